"""The losses that tasks share."""
import tensorflow as tf


def softmax_loss(labels: tf.Tensor, logits: tf.Tensor) -> tuple[tf.Tensor, dict]:
  """(mean cross-entropy, {"accuracy": ...}) of logits [batch, classes] against labels
  [batch], in float32."""
  logits = tf.cast(logits, tf.float32)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
  hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32)
  return loss, {"accuracy": tf.reduce_mean(hits)}
