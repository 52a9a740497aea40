"""The sentence (pair) classifier: BERT's [CLS] pooled output, dropout, one dense layer.

As google-research/bert's `create_model` in run_classifier.py: the output layer's weights are
drawn from a truncated normal of stddev `initializer_range`, the dropout rate is the encoder's
`hidden_dropout_prob`, and every weight (encoder included) is fine-tuned. Softmax (or, for
regression, the identity) is applied by the loss and by the serving signature, so the model
returns logits.
"""
import tensorflow as tf
import tf_keras

from bert_tf.configs import BertConfig

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def build_classifier(encoder: tf_keras.Model, config: BertConfig,
                     num_labels: int) -> tf_keras.Model:
  """A Keras model from the three int32 inputs [batch, seq_length] to logits [batch, num_labels]
  (num_labels 1 for regression: the predicted score).

  Logits are float32 even under a mixed-precision policy, so the softmax and the loss are
  computed at full precision.
  """
  inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
            for name in INPUT_NAMES}
  pooled = encoder(inputs)["pooled_output"]
  pooled = tf_keras.layers.Dropout(config.hidden_dropout_prob, name="dropout")(pooled)
  logits = tf_keras.layers.Dense(
      num_labels, dtype="float32", name="output",
      kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range),
  )(pooled)
  return tf_keras.Model(inputs, logits, name="bert_classifier")
