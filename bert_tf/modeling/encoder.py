"""The BERT encoder, assembled from the Model Garden's layers.

    input_word_ids, input_mask, input_type_ids: int32 [batch, seq]
      -> token + segment + learned position embeddings -> LayerNorm -> dropout
      -> L post-LN Transformer blocks (self-attention, GELU feed-forward)
      -> sequence_output [batch, seq, H], pooled_output [batch, H] (tanh dense on [CLS]),
         encoder_outputs: every block's output, a list of L [batch, seq, H].

The Model Garden's `BertEncoderV2` is this network in its bidirectional form only; the paper's
left-to-right ablation needs a causal mask too, so the same layers are wired here with an
attention mask that can be either.

Packed (`build_encoder(..., packed=True)`): each row holds several sequences, told apart by
input_mask (0 at padding, else the 1-based index of the token's sequence in its row), with
input_positions int32 [batch, seq] (each token's position in its own sequence). Attention is
block-diagonal and position ids restart per sequence, so each sequence's outputs are those it
would have alone in a row. The same variables: a checkpoint does not know how it was trained.
"""
import contextlib
import dataclasses
import math

import tensorflow as tf
import tf_keras
from official.modeling import activations as tfm_activations
from official.nlp.modeling import layers
from tf_keras.src.engine import base_layer_utils

from bert_tf.modeling.configs import BertConfig

ATTENTION_MODES = ("bidirectional", "causal")
# What the encoder (and every model on it) reads: int32 [batch, seq] each.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# What a packed encoder reads besides: int32 [batch, seq].
PACKED_INPUT_NAMES = INPUT_NAMES + ("input_positions",)

# Variable (and layer) names of the word embedding table, which the masked-LM head shares.
WORD_EMBEDDINGS = "word_embeddings"


def activation(hidden_act: str):
  """BertConfig.hidden_act -> a Keras-serializable activation function.

  "gelu" is google-research/bert's tanh approximation (as is Hugging Face's "gelu_new");
  "gelu_exact" is the erf form.
  """
  if hidden_act in ("gelu", "gelu_new"):
    return tfm_activations.gelu
  if hidden_act == "gelu_exact":
    return tf_keras.activations.gelu  # approximate=False by default.
  return tf_keras.activations.get(hidden_act)


def initializer(config: BertConfig) -> tf_keras.initializers.Initializer:
  """A fresh instance per layer: a reused unseeded instance repeats its values."""
  return tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class AttentionMask(layers.SelfAttentionMask):
  """The [batch, from_seq, to_seq] mask of 1 (attend) and 0 (don't) for self-attention.

  Padding positions (input_mask 0) are never attended to. With `causal`, position i also
  attends only to positions j <= i (a left-to-right language model, like OpenAI GPT).
  """

  def __init__(self, causal: bool = False, **kwargs):
    super().__init__(**kwargs)
    self.causal = causal

  def call(self, inputs, to_mask=None):
    mask = super().call(inputs, to_mask)
    if self.causal:
      mask = tf.linalg.band_part(mask, -1, 0)  # Keeps the lower triangle, j <= i.
    return mask

  def get_config(self):
    return dict(super().get_config(), causal=self.causal)


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class PackedAttentionMask(layers.SelfAttentionMask):
  """The block-diagonal [batch, seq, seq] mask of a packed row: 1 where token i may attend to
  token j, that is where j is a real token (input_mask[j] > 0) of i's own sequence
  (input_mask[i] == input_mask[j]).

  A padding query (input_mask[i] == 0) attends to every real token, as `AttentionMask` lets it:
  on a 0/1 mask (a row of one sequence) the two masks are the same. Its output is never read,
  and it is never a key, so it changes no real token's output.
  """

  def call(self, inputs, to_mask=None):
    # The rows and the columns both come from to_mask; `inputs` gives the dtype, as it does
    # the Model Garden's mask.
    is_key = to_mask[:, None, :] > 0                                          # [B, 1, S]
    same_sequence = tf.equal(to_mask[:, :, None], to_mask[:, None, :])         # [B, S, S]
    is_padding_query = tf.equal(to_mask[:, :, None], 0)                       # [B, S, 1]
    return tf.cast(is_key & (same_sequence | is_padding_query), inputs.dtype)


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class PackedPositionEmbedding(layers.PositionEmbedding):
  """The Model Garden's learned position embeddings (the same table, `embeddings`
  [max_length, width]) read at each token's own position id, not at 0..seq-1.

  Called as layer(embeddings [B, S, width], positions=int32 [B, S]) -> [B, S, width]; the
  embeddings give the table's width when it is built.

  The table's gradient is dense, the rows' gradients summed per position, as unpacked (where
  the table is sliced): a gather's own gradient is an IndexedSlices of one slice a token, whose
  global norm (the optimizer's clipping) counts repeated positions unsummed, so that a packed
  batch and the same batch as accumulated micro-batches would clip differently.
  """

  def call(self, inputs, positions=None):
    del inputs
    return _gather_rows_dense_gradient(tf.convert_to_tensor(self._position_embeddings),
                                       positions)


@tf.custom_gradient
def _gather_rows_dense_gradient(table, indices):
  """tf.gather(table, indices) whose gradient for `table` is a dense tensor of its shape."""
  def gradient(upstream):
    return tf.math.unsorted_segment_sum(upstream, indices, tf.shape(table)[0]), None
  return tf.gather(table, indices), gradient


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class MultiHeadAttention(tf_keras.layers.MultiHeadAttention):
  """tf_keras's attention with its two batched products (query . key, probabilities . value)
  as transposes and `tf.matmul` instead of `tf.einsum`: the same values, and on a CPU ~1.6x
  faster forward and backward (oneDNN's einsum for these equations is slower than its batched
  matmul; [32, 128, 4, 64]: 27 -> 17 ms), ~4% of a pretraining step at L=4/H=256."""

  def _compute_attention(self, query, key, value, attention_mask=None, training=None):
    # query [B, T, N, D], key and value [B, S, N, D] -> output [B, T, N, D], scores [B, N, T, S].
    heads_first = lambda x: tf.transpose(x, [0, 2, 1, 3])
    query = tf.multiply(query, 1.0 / math.sqrt(float(self._key_dim)))
    scores = tf.matmul(heads_first(query), heads_first(key), transpose_b=True)
    scores = self._masked_softmax(scores, attention_mask)
    dropped = self._dropout_layer(scores, training=training)
    return heads_first(tf.matmul(dropped, heads_first(value))), scores


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class TransformerEncoderBlock(layers.TransformerEncoderBlock):
  """The Model Garden's post-LN Transformer block with `MultiHeadAttention` above; built inside
  `recomputed_blocks`, it recomputes its forward pass in the backward pass when training."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    # A plain attribute, not a config entry or a layer: checkpoints and exports stay the same.
    self._recompute = _recompute_blocks
    if self._recompute and (self._output_dropout_rate or self._attention_dropout_rate) and (
        not tf_keras.backend.experimental.is_tf_random_generator_enabled()):
      # `generator_dropout` did nothing (several replicas): TF1's stateful op draws the masks,
      # and a recomputed pass could not draw the first pass's again.
      raise ValueError(
          "--recompute_layers with dropout under "
          f"{tf.distribute.get_strategy().num_replicas_in_sync} replicas: the recomputed pass "
          "cannot redraw the first pass's dropout masks there (TF1's stateful random op); "
          "train on one replica, or without --recompute_layers")

  def build(self, input_shape):
    super().build(input_shape)
    # The block makes tf_keras's layer with no hook to pass a class. Its unbuilt instance becomes
    # the subclass (which adds no state) rather than a new layer: tracking order, and so the
    # order of the weights, stays the Model Garden's.
    self._attention_layer.__class__ = MultiHeadAttention

  def call(self, inputs, output_range=None):
    # `training` read from Keras's call context, as the block's own dropout layers read it: a
    # `training` argument would change the Model Garden's signature (which Keras's SavedModel
    # writer traces once per value). A Python True is the training loop's; functional
    # construction and inference build the plain block.
    training = base_layer_utils.call_context().training is True
    if _recorded is not None:
      return self._recorded_call(inputs, output_range, training)
    if not (self._recompute and training):
      return super().call(inputs, output_range)
    return self._recomputed_call(inputs, output_range)

  def _recorded_call(self, inputs, output_range, training: bool):
    """The plain call, its states appended to `recorded_blocks`' list."""
    if self._recompute and training:
      # A recomputed block's states live in tf.recompute_grad's own function, out of reach.
      raise ValueError("--recompute_layers with distillation's intermediate losses: the "
                       "recomputed blocks' states cannot be read; train without one of them")
    previous, self._return_attention_scores = self._return_attention_scores, True
    try:
      output, attention = super().call(inputs, output_range)
    finally:
      self._return_attention_scores = previous
    _recorded.append(BlockStates(inputs[0], output, attention))
    return output

  def _recomputed_call(self, inputs, output_range):
    """The block under `tf.recompute_grad`: its activations are not kept for the backward
    pass but computed again there, from its input. That second pass runs outside Keras's call
    (set to training again here) and would draw new dropout masks: each dropout generator is
    set back to its state before the first pass, and after the second to where it had got, so
    both passes, and the run, see the masks the block draws without recompute."""
    generators = _dropout_generators(self)
    before = [tf.identity(g.state) for g in generators]
    # [hidden states, attention mask], or the pretrainer's last block's [queries, hidden
    # states, mask]: the states differentiated, the mask (from input_mask alone) not.
    *states, mask = inputs
    plain_call = super().call
    passes = []

    def block(*states):
      recomputing = bool(passes)
      passes.append(recomputing)
      if recomputing:
        reached = [g.state.read_value() for g in generators]
        for g, state in zip(generators, before):
          g.state.assign(state)
      with base_layer_utils.call_context().enter(
          layer=self, inputs=[*states, mask], build_graph=not tf.executing_eagerly(),
          call_context_args={"training": True}):
        y = plain_call([*states, mask], output_range)
      if recomputing:
        # In a tf.function, automatic control dependencies keep these state reads and writes
        # in program order around the draws (all on the same state variables).
        for g, state in zip(generators, reached):
          g.state.assign(state)
      return y

    return tf.recompute_grad(block)(*states)


def _dropout_generators(block: tf_keras.layers.Layer) -> list[tf.random.Generator]:
  """The `tf.random.Generator` of each dropout layer in the block that draws (rate > 0): built
  with the layer (`generator_dropout`), each keeps its state in a variable."""
  # A Dropout layer's `_random_generator` (tf_keras's RandomGenerator) holds the generator.
  return [layer._random_generator._generator  # pylint: disable=protected-access
          for layer in block.submodules
          if isinstance(layer, tf_keras.layers.Dropout) and layer.rate]


# Set by `recomputed_blocks`, read by each TransformerEncoderBlock as it is made.
_recompute_blocks = False
# Set by `recorded_blocks`: the list that each TransformerEncoderBlock called appends to.
_recorded = None


@dataclasses.dataclass(frozen=True)
class BlockStates:
  """What one call of a Transformer block computed (`recorded_blocks`): its input and output
  hidden states, float [batch, seq, H], and its attention probabilities, float
  [batch, heads, seq (queries), seq (keys)] (before attention dropout)."""
  input: tf.Tensor
  output: tf.Tensor
  attention: tf.Tensor


@contextlib.contextmanager
def recomputed_blocks(enabled: bool = True):
  """Transformer blocks made inside this context (with `enabled`) recompute their forward pass
  during the backward pass of training (`tf.recompute_grad`): only each block's input is kept
  between the passes, not its activations (attention scores, the feed-forward's inner layer),
  for about one more forward pass per step: google-research/bert's other advice for BERT-Large
  out of memory. The same variables, the same math and, through `generator_dropout`, the same
  dropout masks: a checkpoint does not know whether it was trained so. Under several replicas,
  whose dropout masks come from TF1's stateful op, a block with dropout is refused.
  """
  global _recompute_blocks
  previous, _recompute_blocks = _recompute_blocks, enabled
  try:
    yield
  finally:
    _recompute_blocks = previous


@contextlib.contextmanager
def recorded_blocks():
  """Yields a list to which each Transformer block called inside this context appends its
  `BlockStates`, in call order: what distillation's intermediate losses compare (the
  embeddings are the first block's input). The block computes them anyway; its output and the
  model's are unchanged. The tensors are the calling graph's: read them in the function that
  called the model."""
  global _recorded
  previous, _recorded = _recorded, []
  try:
    yield _recorded
  finally:
    _recorded = previous


@contextlib.contextmanager
def generator_dropout():
  """Dropout layers built inside this context draw their masks from a `tf.random.Generator`
  (Keras's "stateful" RNG: the stateless Philox kernels) instead of TF1's stateful
  RandomUniform op. Same masks in distribution, ~9x cheaper to draw on a CPU (a
  [32, 4, 128, 128] attention-dropout mask: 16.8 -> 1.9 ms): about 5% of a pretraining step at
  L=4/H=256, ~3% of a fine-tuning step; `build_encoder` builds every encoder in it. Seeded
  by `tf_keras.utils.set_random_seed` (a run stays reproducible); the generators' states are
  not in checkpoints (Keras keeps them out).

  Under a strategy of several replicas (mirrored, TPU) this does nothing and their runs keep
  TF1's op, as before: a generator there is one state variable the replicas would share,
  which was not tried.
  """
  enabled = tf_keras.backend.experimental.is_tf_random_generator_enabled()
  if tf.distribute.get_strategy().num_replicas_in_sync == 1:
    tf_keras.backend.experimental.enable_tf_random_generator()
  try:
    yield
  finally:
    if not enabled:
      tf_keras.backend.experimental.disable_tf_random_generator()


def build_encoder(config: BertConfig, attention: str = "bidirectional",
                  packed: bool = False) -> tf_keras.Model:
  """The BERT encoder as a functional tf_keras Model.

  Args:
    config: the encoder's hyper-parameters.
    attention: "bidirectional" (BERT) or "causal" (left-to-right; the mask also hides padding).
    packed: rows that hold several sequences (bidirectional only): input_mask is each token's
      1-based sequence index in its row (0 at padding), and the model also takes
      `input_positions`, each token's position id in its own sequence. The same variables as
      the unpacked encoder's.

  Returns:
    A Model taking a dict of int32 [batch, seq] tensors `input_word_ids`, `input_mask`,
    `input_type_ids` (and `input_positions` when packed; seq <= config.max_position_embeddings)
    and returning a dict:
      sequence_output: float [batch, seq, hidden_size], the last block's output;
      pooled_output: float [batch, hidden_size], tanh(dense(sequence_output[:, 0])) (packed:
        the row's first sequence's [CLS]);
      encoder_outputs: a list of num_hidden_layers float [batch, seq, hidden_size].
  """
  if attention not in ATTENTION_MODES:
    raise ValueError(f"attention {attention!r} is not one of {ATTENTION_MODES}")
  if packed and attention == "causal":
    # A left-to-right model over a packed row would need each sequence's own lower triangle;
    # the left-to-right ablation trains on unpacked rows.
    raise ValueError("a packed encoder is bidirectional only: the causal ('ltr') mode does "
                     "not take packed rows")
  with generator_dropout():  # Its dropout layers (all made here) draw from generators.
    return _wired_encoder(config, attention, packed)


def _wired_encoder(config: BertConfig, attention: str, packed: bool) -> tf_keras.Model:
  inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
            for name in (PACKED_INPUT_NAMES if packed else INPUT_NAMES)}

  word_embeddings = layers.OnDeviceEmbedding(
      config.vocab_size, config.hidden_size, initializer=initializer(config),
      name=WORD_EMBEDDINGS)(inputs["input_word_ids"])
  if packed:
    position_embeddings = PackedPositionEmbedding(
        max_length=config.max_position_embeddings, initializer=initializer(config),
        name="position_embedding")(word_embeddings, positions=inputs["input_positions"])
  else:
    position_embeddings = layers.PositionEmbedding(
        max_length=config.max_position_embeddings, initializer=initializer(config),
        name="position_embedding")(word_embeddings)
  # One-hot lookup: faster than a gather on TPUs for a table this small.
  type_embeddings = layers.OnDeviceEmbedding(
      config.type_vocab_size, config.hidden_size, initializer=initializer(config),
      use_one_hot=True,
      name="type_embeddings")(inputs["input_type_ids"])
  x = tf_keras.layers.Add()([word_embeddings, position_embeddings, type_embeddings])
  # float32 even under mixed precision, as the Model Garden's encoders keep it.
  x = tf_keras.layers.LayerNormalization(
      axis=-1, epsilon=1e-12, dtype=tf.float32, name="embeddings/layer_norm")(x)
  x = tf_keras.layers.Dropout(config.hidden_dropout_prob, name="embeddings/dropout")(x)

  if packed:
    mask = PackedAttentionMask(name="attention_mask")(x, inputs["input_mask"])
  else:
    mask = AttentionMask(causal=attention == "causal", name="attention_mask")(
        x, inputs["input_mask"])
  encoder_outputs = []
  for i in range(config.num_hidden_layers):
    x = TransformerEncoderBlock(
        num_attention_heads=config.num_attention_heads,
        inner_dim=config.intermediate_size,
        inner_activation=activation(config.hidden_act),
        output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob,
        norm_first=False,
        norm_epsilon=1e-12,
        kernel_initializer=initializer(config),
        name=f"transformer/layer_{i}")([x, mask])
    encoder_outputs.append(x)

  pooled_output = tf_keras.layers.Dense(
      config.hidden_size, activation="tanh", kernel_initializer=initializer(config),
      name="pooler_transform")(x[:, 0, :])
  outputs = dict(sequence_output=x, pooled_output=pooled_output,
                 encoder_outputs=encoder_outputs)
  name = f"bert_encoder_{attention}" + ("_packed" if packed else "")
  return tf_keras.Model(inputs=inputs, outputs=outputs, name=name)


def embedding_table(encoder: tf_keras.Model) -> tf.Variable:
  """The encoder's word embedding table, float [vocab_size, hidden_size]."""
  return encoder.get_layer(WORD_EMBEDDINGS).embeddings


def create_variables(model: tf_keras.Model) -> tf_keras.Model:
  """Calls `model` (the encoder, or a model on it) once on a dummy batch [1, 2] of the
  inputs, so that its variables exist (to restore a checkpoint into); returns it."""
  dummy = tf.zeros([1, 2], tf.int32)
  model({name: dummy for name in INPUT_NAMES})
  return model
