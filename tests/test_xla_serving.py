"""A task model compiled by XLA for serving (`xla_serving.CompiledModel`): the padded shapes,
and the model's own outputs for any rows and length, per-position outputs cut back."""
import numpy as np
from official.nlp.modeling import models
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.finetuning import xla_serving
from bert_tf.modeling.encoder import INPUT_NAMES, build_encoder, create_variables
from bert_tf.modeling.task_models import build_classifier


def test_lengths_padded_to_four_buckets_an_octave():
  bucket = lambda n, max_length=512: int(xla_serving.length_bucket(tf.constant(n), max_length))
  assert [bucket(n) for n in (1, 4, 5, 9, 17, 31, 32, 33, 41, 64, 65, 100, 384, 500)] == [
      4, 4, 8, 12, 20, 32, 32, 40, 48, 64, 80, 112, 384, 512]
  assert [bucket(n, max_length=36) for n in (33, 36, 37)] == [36, 36, 37]
  assert [int(xla_serving.next_power_of_two(tf.constant(n))) for n in (0, 1, 3, 8, 9)] == [
      1, 1, 4, 8, 16]


def _inputs(lengths: list[int], width: int, seed: int = 0) -> dict:
  """A batch of rows `lengths` long (a prefix of ones in the mask), `width` wide."""
  rng = np.random.default_rng(seed)
  mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
  return {"input_word_ids": tf.constant(rng.integers(1000, 2000, mask.shape) * mask, tf.int32),
          "input_mask": tf.constant(mask),
          "input_type_ids": tf.constant((np.arange(width) >= 3) * mask, tf.int32)}


@pytest.mark.parametrize("lengths, width", [([7], 7), ([5, 11, 9], 11), ([], 1)])
def test_compiled_classifier_answers_as_the_model(tiny_bert_config, lengths, width):
  tf_keras.utils.set_random_seed(3)
  model = build_classifier(tiny_bert_config, 3)
  compiled = xla_serving.CompiledModel(model, max_length=16)
  inputs = _inputs(lengths, width)
  expected = model(inputs, training=False)
  # Serving calls it in a graph, where the rows and the length are unknown.
  spec = {name: tf.TensorSpec([None, None], tf.int32) for name in INPUT_NAMES}
  served = tf.function(compiled, input_signature=[spec])(inputs)
  assert served.shape == expected.shape
  np.testing.assert_allclose(served, expected, atol=1e-5)
  if lengths:
    assert np.ptp(expected.numpy()) > 1e-3  # Not a constant model.


def test_compiled_span_labeler_cuts_its_positions_back(tiny_bert_config):
  tf_keras.utils.set_random_seed(4)
  model = create_variables(models.BertSpanLabeler(build_encoder(tiny_bert_config)))
  compiled = xla_serving.CompiledModel(model, max_length=32)
  inputs = _inputs([13, 6, 10], 13, seed=1)  # 3 rows to 4, 13 positions to 16.
  spec = {name: tf.TensorSpec([None, None], tf.int32) for name in INPUT_NAMES}
  expected = model(inputs, training=False)
  # In a serving graph, and eagerly (where every shape is known).
  for served in (tf.function(compiled, input_signature=[spec])(inputs), compiled(inputs)):
    for served_logits, logits in zip(served, expected):
      assert served_logits.shape == logits.shape == (3, 13)
      np.testing.assert_allclose(served_logits, logits, atol=1e-5)
