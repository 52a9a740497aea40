"""The losses that tasks share.

A loss here is a sum over the batch divided by a count: the batch's own by default, or the
whole update's (`loop.LossFn`), so that the micro-batches of one update add up to its loss.
"""
import tensorflow as tf


def records(counts: dict | None, values: tf.Tensor) -> tf.Tensor:
  """What a mean over records divides by: counts["records"] (the update's), else the number of
  records in `values` [batch, ...]."""
  if counts is not None:
    return counts["records"]
  return tf.cast(tf.shape(values)[0], tf.float32)


def mean(values: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
  """sum(values) / count in float32: a batch's part of the update's mean."""
  return tf.reduce_sum(tf.cast(values, tf.float32)) / count


def softmax_loss(labels: tf.Tensor, logits: tf.Tensor,
                 counts: dict | None = None) -> tuple[tf.Tensor, dict]:
  """(mean cross-entropy, {"accuracy": ...}) of logits [batch, classes] against labels
  [batch] over the records (see `records`), in float32."""
  logits = tf.cast(logits, tf.float32)
  count = records(counts, labels)
  hits = tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels)
  return (mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits), count),
          {"accuracy": mean(hits, count)})
