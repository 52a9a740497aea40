"""The encoder: its interface, its attention modes, and the activations' meanings."""
import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import MultiHeadAttention, activation, build_encoder

CONFIG = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=48, max_position_embeddings=16,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SEQ = 10


def _inputs(ids, mask=None, types=None):
  ids = np.asarray(ids, np.int32)
  mask = np.ones_like(ids) if mask is None else np.asarray(mask, np.int32)
  types = np.zeros_like(ids) if types is None else np.asarray(types, np.int32)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


def _random_ids(seed, shape=(2, SEQ)):
  return np.random.default_rng(seed).integers(1, CONFIG.vocab_size, shape)


@pytest.fixture(scope="module", params=["bidirectional", "causal"])
def encoder(request):
  tf.random.set_seed(0)
  return build_encoder(CONFIG, attention=request.param)


def test_input_and_output_names_and_shapes(encoder):
  assert sorted(encoder.input) == ["input_mask", "input_type_ids", "input_word_ids"]
  types = np.zeros((2, SEQ), np.int32)
  types[:, 5:] = 1
  out = encoder(_inputs(_random_ids(1), types=types))
  assert sorted(out) == ["encoder_outputs", "pooled_output", "sequence_output"]
  assert out["sequence_output"].shape == (2, SEQ, 32)
  assert out["pooled_output"].shape == (2, 32)
  assert len(out["encoder_outputs"]) == 2
  assert all(x.shape == (2, SEQ, 32) for x in out["encoder_outputs"])
  np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
  # The pooler ends in tanh.
  assert np.abs(out["pooled_output"]).max() < 1.0


def test_causal_mode_is_causal_and_bidirectional_is_not(encoder):
  ids = _random_ids(2)
  changed = ids.copy()
  changed[:, 6] = (ids[:, 6] % (CONFIG.vocab_size - 1)) + 1  # A different token at position 6.
  before = encoder(_inputs(ids))["sequence_output"].numpy()
  after = encoder(_inputs(changed))["sequence_output"].numpy()
  earlier_change = np.abs(before[:, :6] - after[:, :6]).max()
  assert np.abs(before[:, 6:] - after[:, 6:]).max() > 1e-3
  if encoder.name.endswith("causal"):
    assert earlier_change < 1e-6
  else:
    assert earlier_change > 1e-3


def test_padding_does_not_change_real_positions(encoder):
  # The same 6 real tokens, padded to 10 with two different fillers (ids the mask hides).
  real = _random_ids(3, (1, 6))
  outputs = []
  for filler_seed in (4, 5):
    ids = np.concatenate([real, _random_ids(filler_seed, (1, SEQ - 6))], axis=1)
    mask = np.array([[1] * 6 + [0] * (SEQ - 6)])
    outputs.append(encoder(_inputs(ids, mask)))
  short = encoder(_inputs(real))
  for out in outputs:
    np.testing.assert_allclose(out["sequence_output"][:, :6], short["sequence_output"],
                               atol=1e-5)
    np.testing.assert_allclose(out["pooled_output"], short["pooled_output"], atol=1e-5)


def test_attention_mode_is_checked():
  with pytest.raises(ValueError, match="attention 'sideways'"):
    build_encoder(CONFIG, attention="sideways")


def test_gelu_names_keep_each_sources_meaning():
  x = tf.constant([-2.0, 0.5, 1.0, 3.0])
  erf_form = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.numpy()]
  tanh_form = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
               for v in x.numpy()]
  assert np.abs(np.subtract(erf_form, tanh_form)).max() > 1e-4  # The test can tell them apart.
  np.testing.assert_allclose(activation("gelu")(x), tanh_form, atol=1e-6)
  np.testing.assert_allclose(activation("gelu_new")(x), tanh_form, atol=1e-6)
  np.testing.assert_allclose(activation("gelu_exact")(x), erf_form, atol=1e-6)


def test_blocks_attend_with_matmuls_equal_to_tf_keras_einsums(encoder):
  """The blocks use bert_tf's MultiHeadAttention (batched matmuls), whose outputs and scores
  equal tf_keras's (einsums) on the same weights, with a mask and fewer queries than keys."""
  block = encoder.get_layer("transformer/layer_0")
  assert type(block._attention_layer) is MultiHeadAttention
  config = block._attention_layer.get_config()
  ours = MultiHeadAttention.from_config(dict(config))
  theirs = tf_keras.layers.MultiHeadAttention.from_config(dict(config))
  rng = np.random.default_rng(3)
  query = rng.normal(size=(2, 3, 32)).astype(np.float32)
  value = rng.normal(size=(2, SEQ, 32)).astype(np.float32)
  mask = rng.integers(0, 2, (2, 3, SEQ)).astype(bool)
  mask[:, :, 0] = True
  ours(query, value, attention_mask=mask)
  theirs(query, value, attention_mask=mask)
  theirs.set_weights(ours.get_weights())
  for a, b in zip(ours(query, value, attention_mask=mask, return_attention_scores=True),
                  theirs(query, value, attention_mask=mask, return_attention_scores=True)):
    np.testing.assert_allclose(a, b, atol=1e-5)
