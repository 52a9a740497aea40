"""The pretraining heads, named as google-research/bert's `cls/...` variables.

masked LM:     dense + activation + LayerNorm, then logits against the word embedding table
               (tied weights) plus an output bias — the Model Garden's `layers.MaskedLM`.
next sentence: a dense layer from the pooled output to 2 logits (0 = is next, 1 = random).
"""
import tf_keras
from official.nlp.modeling import layers

from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling.configs import BertConfig


def masked_lm(config: BertConfig, encoder: tf_keras.Model) -> layers.MaskedLM:
  """The masked-LM head over `encoder`'s embedding table.

  Called as head(sequence_output [B, S, H], positions int32 [B, P]) -> logits [B, P, V].
  """
  return layers.MaskedLM(
      embedding_table=encoder_lib.embedding_table(encoder),
      activation=encoder_lib.activation(config.hidden_act),
      initializer=encoder_lib.initializer(config),
      name="cls/predictions")


def next_sentence(config: BertConfig) -> tf_keras.layers.Dense:
  """pooled_output [B, H] -> logits [B, 2]."""
  return tf_keras.layers.Dense(
      2, kernel_initializer=encoder_lib.initializer(config), name="cls/seq_relationship")
