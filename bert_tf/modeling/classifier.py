"""The sentence (pair) classifier: BERT's [CLS] pooled output, dropout, one dense layer.

As google-research/bert's `create_model` in run_classifier.py: the output layer's weights are
drawn from a truncated normal of stddev `initializer_range`, the dropout rate is the encoder's
`hidden_dropout_prob`, and every weight (encoder included) is fine-tuned. The model returns
logits; the loss and the serving signature apply the softmax (regression: the one output is
the score).
"""
import tensorflow as tf
import tf_keras

from bert_tf.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder, initializer

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class BertClassifier(tf_keras.Model):
  """Encoder + dropout + dense.

  call(features) reads input_word_ids, input_mask, input_type_ids (int32 [batch, seq]) from
  the dict, ignoring anything else in it (labels), and returns logits float32
  [batch, num_labels], float32 even under a mixed-precision policy.
  """

  def __init__(self, encoder: tf_keras.Model, config: BertConfig, num_labels: int, **kwargs):
    super().__init__(**kwargs)
    self.encoder = encoder
    self.dropout = tf_keras.layers.Dropout(config.hidden_dropout_prob)
    self.classifier = tf_keras.layers.Dense(num_labels, kernel_initializer=initializer(config),
                                            dtype=tf.float32, name="output")

  @property
  def checkpoint_items(self) -> dict:
    """What `bert_tf.checkpoints` reads from our checkpoints: the fine-tuned encoder."""
    return {"encoder": self.encoder}

  def call(self, features, training=None):
    pooled = self.encoder({name: features[name] for name in INPUT_NAMES},
                          training=training)["pooled_output"]
    return self.classifier(self.dropout(pooled, training=training))


def build_classifier(config: BertConfig, num_labels: int) -> BertClassifier:
  """A fresh BertClassifier with its variables created (num_labels 1 for regression), ready
  to load a checkpoint into."""
  model = BertClassifier(build_encoder(config), config, num_labels, name="bert_classifier")
  dummy = tf.zeros([1, 2], tf.int32)
  model({name: dummy for name in INPUT_NAMES})
  return model
