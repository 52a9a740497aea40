"""Long texts in a serving graph: what the raw-text signatures that window their input
(`squad_serving`, `ner_serving`) share. The windows themselves differ by task (SQuAD's hold the
question too); how a piece picks its window, and how the model runs over many windows, do not.
"""
from typing import Callable

import tensorflow as tf


def best_window(first: tf.Tensor, length: tf.Tensor, num_pieces: tf.Tensor) -> tf.Tensor:
  """The window where each piece has the most context: int64 [num_pieces].

  The original's score (run_squad's _check_is_max_context), min(left, right) + 0.01 * window
  length, computed as it does in float64 so that ties come out the same; the first window
  wins a tie.

  Args:
    first: int64 [W], the index of each window's first piece among the batch's pieces.
    length: int64 [W], each window's number of pieces.
    num_pieces: the number of pieces in the batch.
  """
  piece = tf.ragged.range(first, first + length)  # [W, (length)], the batch's pieces.
  window = piece.value_rowids()
  position = piece.flat_values - tf.gather(first, window)
  window_length = tf.gather(length, window)
  context = tf.minimum(position, window_length - 1 - position)
  score = tf.cast(context, tf.float64) + 0.01 * tf.cast(window_length, tf.float64)
  pieces = piece.flat_values
  best = tf.math.unsorted_segment_max(score, pieces, num_pieces)
  candidates = tf.where(tf.equal(score, tf.gather(best, pieces)), window,
                        tf.cast(tf.size(first), tf.int64))
  return tf.math.unsorted_segment_min(candidates, pieces, num_pieces)


def call_in_chunks(fn: Callable[[dict], tuple], inputs: dict, chunk_size: int,
                   shapes: list[list]) -> tuple:
  """fn over `inputs` ({name: [W, ...]}) `chunk_size` rows at a time, at most two calls at once
  (to bound memory whatever W), its float32 outputs concatenated: a tuple, one [W, ...] tensor
  per entry of `shapes` (each output's shape, None first)."""
  num_rows = tf.shape(next(iter(inputs.values())))[0]
  # At least one call: TensorArray.concat() of nothing fails (an empty batch has no windows).
  num_calls = tf.maximum((num_rows + chunk_size - 1) // chunk_size, 1)

  def call(k, *arrays):
    chunk = {name: t[k * chunk_size:(k + 1) * chunk_size] for name, t in inputs.items()}
    outputs = fn(chunk)
    return (k + 1, *(a.write(k, tf.cast(o, tf.float32)) for a, o in zip(arrays, outputs)))

  arrays = tuple(tf.TensorArray(tf.float32, size=num_calls, infer_shape=False,
                                element_shape=tf.TensorShape(shape)) for shape in shapes)
  # Two calls in flight: served with one intra-op thread an op (the lowest batch-1 latency: small
  # products split over threads wait on each other) and two inter-op threads, two chunks of a
  # batch run side by side (benchmarks/README.md, serving).
  _, *arrays = tf.while_loop(lambda k, *_: k < num_calls, call, (tf.constant(0), *arrays),
                             parallel_iterations=2)
  return tuple(tf.ensure_shape(a.concat(), shape) for a, shape in zip(arrays, shapes))
