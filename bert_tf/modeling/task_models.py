"""The fine-tuning models: the Model Garden's task models on our encoder, as the original
builds them (google-research/bert's `create_model` in each run_*.py)."""
from official.nlp.modeling import layers
from official.nlp.modeling import models
import tf_keras

from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder, create_variables, initializer


def build_classifier(config: BertConfig, num_labels: int) -> tf_keras.Model:
  """The Model Garden's BertClassifier on our encoder, variables created (num_labels 1 for
  regression). One dropout before the output layer, as the original: the head's own is off.

  call(features) reads input_word_ids, input_mask, input_type_ids (int32 [batch, seq]) from
  the dict (other keys are ignored) and returns logits [batch, num_labels].
  """
  head = layers.ClassificationHead(inner_dim=0, num_classes=num_labels, dropout_rate=0.0,
                                   initializer=initializer(config), name="sentence_prediction")
  return create_variables(models.BertClassifier(
      build_encoder(config), num_labels, dropout_rate=config.hidden_dropout_prob,
      cls_head=head, name="bert_classifier"))
