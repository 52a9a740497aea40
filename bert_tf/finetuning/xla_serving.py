"""A task model compiled by XLA for a serving graph (`--export_jit_compile`): what a serving
module calls in place of the Keras model, the same outputs.

At batch 1 the encoder's projections take as long in TensorFlow as in torch; what makes a
request slower is the ~400 small ops beside them (layer norms as 9 ops each, bias adds, GELU,
the attention's transposes and mask), each its own kernel launch (benchmarks/README.md,
serving). XLA fuses them. It compiles one program per input shape, so the rows are padded to a
power of two and the length to a bucket (`length_bucket`): a few dozen programs for any
traffic, each compiled on the first request of its shape (TF Serving's warm-up requests).
The padding is masked out (its rows' and columns' input_mask is 0) and cut from the outputs.

TF Serving runs such a graph on a CPU only with --xla_cpu_compilation_enabled=true (off by
default), so exports are compiled only when asked.
"""
import tensorflow as tf
import tf_keras

from bert_tf.modeling.encoder import INPUT_NAMES

# The powers of two a row count or a length is rounded up to: far above any batch or
# max_position_embeddings.
_POWERS = [2**k for k in range(17)]


def next_power_of_two(n: tf.Tensor) -> tf.Tensor:
  """The smallest power of two >= n (1 for n <= 1): int32 scalar."""
  powers = tf.constant(_POWERS, tf.int32)
  return tf.reduce_min(tf.where(powers >= n, powers, _POWERS[-1]))


def length_bucket(length: tf.Tensor, max_length: int) -> tf.Tensor:
  """`length` rounded up to a multiple of an eighth of its next power of two (at least 4):
  4 buckets an octave (4, 8, ..., 32, 40, 48, 56, 64, 80, ...), each at most 25% longer than
  the lengths it holds; at most max(length, max_length) (the task's max_seq_length, which
  max_position_embeddings holds)."""
  step = tf.maximum(next_power_of_two(length) // 8, 4)
  bucket = (length + step - 1) // step * step
  return tf.minimum(bucket, tf.maximum(length, max_length))


class CompiledModel(tf.Module):
  """`model` (a task model on the encoder's inputs, {INPUT_NAMES: int32 [rows, ..., length]},
  `training=False`) through XLA, one program per padded shape; called as the model is.

  Its outputs are the model's for the rows and positions given: each cut back to `rows`, and
  those with a position axis (axis 1 of no fixed size: SQuAD's start and end logits, NER's
  per-token logits) to `length`.
  """

  def __init__(self, model: tf_keras.Model, max_length: int):
    super().__init__(name="compiled_model")
    self.model = model
    self.max_length = max_length
    self._forward = tf.function(lambda inputs: model(inputs, training=False),
                                jit_compile=True, autograph=False)

  def __call__(self, inputs: dict, training: bool = False):
    del training  # Serving: inference only.
    shape = tf.shape(inputs["input_mask"])
    rows, length = shape[0], shape[-1]
    pad_rows = next_power_of_two(rows) - rows
    pad_length = length_bucket(length, self.max_length) - length
    padded = {}
    for name in INPUT_NAMES:
      ids = inputs[name]
      middle = [[0, 0]] * (len(ids.shape) - 2)  # Multiple choice's [rows, choices, length].
      padded[name] = tf.pad(ids, [[0, pad_rows], *middle, [0, pad_length]])
    # One trace for every shape (XLA still compiles one program per shape): its outputs'
    # static shapes tell a position axis, the one of no fixed size on inputs of any length.
    forward = self._forward.get_concrete_function(
        {name: tf.TensorSpec([None] * len(t.shape), t.dtype) for name, t in padded.items()})

    def cut(output, traced):
      output = output[:rows]
      return output[:, :length] if traced.shape.rank >= 2 and traced.shape[1] is None else output
    return tf.nest.map_structure(cut, forward(padded), forward.structured_outputs)
