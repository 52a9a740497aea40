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
  per entry of `shapes` (each output's shape, None first).

  Two calls at once: served with one intra-op thread an op (the lowest batch-1 latency: small
  products split over threads wait on each other) and two inter-op threads, two chunks of a
  batch run side by side (benchmarks/README.md, serving). As two loops, one over the even chunks
  and one over the odd, which nothing orders, so that every executor runs them at once: one loop
  with parallel_iterations=2 did as a TF2 function, but in a v1 Session (TF Serving's runtime)
  ran one chunk at a time (batch 32 there: 154-158 sentences/s, the two loops 253-263; batch 1
  within 1.2%; as a TF2 function the same both ways).
  """
  num_rows = tf.shape(next(iter(inputs.values())))[0]
  # At least one call: the even loop's first chunk is the empty batch's only one.
  num_calls = tf.maximum((num_rows + chunk_size - 1) // chunk_size, 1)

  def call(k, *arrays):
    chunk = {name: t[k * chunk_size:(k + 1) * chunk_size] for name, t in inputs.items()}
    return (k + 2, *(a.write(k // 2, tf.cast(o, tf.float32))
                     for a, o in zip(arrays, fn(chunk))))

  def loop(first: int) -> list:
    """The outputs of chunks first, first + 2, ..., a TensorArray each, with one element more
    than the loop's calls: the end of the list, written after it."""
    arrays = tuple(tf.TensorArray(tf.float32, size=(num_calls - first + 1) // 2 + 1,
                                  infer_shape=False, element_shape=tf.TensorShape(shape),
                                  clear_after_read=False)  # the first is read twice
                   for shape in shapes)
    _, *arrays = tf.while_loop(lambda k, *_: k < num_calls, call, (tf.constant(first), *arrays),
                               parallel_iterations=1)
    return arrays

  # Each list ends with no rows shaped as the first chunk's outputs: an empty TensorArray has
  # no shape to concatenate to, and a one-chunk batch's odd loop makes no call.
  lists = []
  for even, odd in zip(loop(0), loop(1)):
    ending = even.read(0)[:0]
    lists.append([even.write(even.size() - 1, ending).concat(),
                  odd.write(odd.size() - 1, ending).concat()])
  # Row r is in chunk c = r // chunk_size: in the even list at row (c // 2) * chunk_size +
  # r % chunk_size, in the odd one at that row after the even list's rows.
  rows = tf.range(num_rows)
  chunk = rows // chunk_size
  position = ((chunk // 2) * chunk_size + rows % chunk_size
              + (chunk % 2) * tf.shape(lists[0][0])[0])
  return tuple(tf.ensure_shape(tf.gather(tf.concat(parts, 0), position), shape)
               for parts, shape in zip(lists, shapes))
