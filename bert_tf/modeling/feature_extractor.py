"""The hidden states of chosen layers of a BERT encoder: what extract_features writes and what
a frozen-encoder model reads (the paper's feature-based NER, Table 7).

    FeatureExtractor(encoder, layers=(-1, -2, -3, -4)).hidden_states(ids, mask, types)

Layers: 0 is the embedding output, 1..L the Transformer layers, and negatives count from the
last (-1 = L), which is Hugging Face's `hidden_states` indexing. The original's "-1,-2,-3,-4"
means the same four layers; its positive indices were one less (its 0 was the first
Transformer layer, and it had no embedding output).
"""
from typing import Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.modeling import checkpoints
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder

# The encoder's layer whose output is the embeddings (after their layer norm).
EMBEDDING_OUTPUT_LAYER = "embeddings/layer_norm"


def layer_positions(layers: Sequence[int], num_layers: int) -> list[int]:
  """--layers' indices -> positions in [embeddings, layer 1, ..., layer L] (0..L).

  Raises ValueError naming --layers and the valid range for an index outside the model."""
  if not layers:
    raise ValueError("--layers: no layer given")
  positions = []
  for layer in layers:
    if not -(num_layers + 1) <= layer <= num_layers:
      raise ValueError(
          f"--layers: layer {layer} is outside the model, which has {num_layers} layers: "
          f"0 (embeddings) to {num_layers}, or -{num_layers + 1} to -1 counting from the last")
    positions.append(layer % (num_layers + 1))
  return positions


class FeatureExtractor:
  """The hidden states of chosen layers of a BERT encoder (`build_encoder`'s), from one
  tf.function traced once for any batch and sequence length.

  For a frozen-encoder model (the paper's feature-based NER): `hidden_states` gives a list,
  one per entry of `layers` (see `layer_positions`), of float32 [batch, seq, H] tensors.
  """

  def __init__(self, encoder: tf_keras.Model, layers: Sequence[int]):
    self.layers = tuple(layers)
    encoder_outputs = encoder.output["encoder_outputs"]
    self._positions = layer_positions(self.layers, len(encoder_outputs))
    states = [encoder.get_layer(EMBEDDING_OUTPUT_LAYER).output] + list(encoder_outputs)
    # Only the layers up to the highest one asked for are computed (and no pooler).
    self.model = tf_keras.Model(encoder.input,
                                {str(p): states[p] for p in sorted(set(self._positions))})

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3)
  def hidden_states(self, input_word_ids, input_mask, input_type_ids) -> list[tf.Tensor]:
    """int32 [batch, seq] each -> per layer of `layers`, float32 [batch, seq, H]."""
    outputs = self.model(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                              input_type_ids=input_type_ids), training=False)
    return [outputs[str(p)] for p in self._positions]

  @property
  def hidden_size(self) -> int:
    return self.model.output[str(self._positions[0])].shape[-1]

  def stacked(self, input_word_ids, input_mask, input_type_ids) -> np.ndarray:
    """The same as numpy, the layers stacked: float32 [batch, seq, layers, H]."""
    states = self.hidden_states(*(tf.convert_to_tensor(x, tf.int32)
                                  for x in (input_word_ids, input_mask, input_type_ids)))
    return np.stack([s.numpy() for s in states], axis=2)


def load_extractor(init_checkpoint: str, layers: Sequence[int],
                   config: BertConfig | None = None) -> FeatureExtractor:
  """A FeatureExtractor on the encoder of a Hugging Face folder, a google-research/bert or
  this project's checkpoint (see `checkpoints`); `config` defaults to the one beside it."""
  config = config or checkpoints.load_config(init_checkpoint)
  layer_positions(layers, config.num_hidden_layers)  # Before the weights load.
  encoder = build_encoder(config)
  checkpoints.load_into_encoder(encoder, init_checkpoint)
  return FeatureExtractor(encoder, layers)
