"""The pretraining model and its loss: masked LM + next sentence prediction, and the ablations.

objective "mlm" (BERT): bidirectional encoder; the masked-LM head predicts the original token at
  each of `masked_lm_positions`; with `nsp`, a head on the pooled output predicts whether
  sentence B follows sentence A.
objective "ltr" (the paper's "LTR & No NSP", like OpenAI GPT): causal encoder over the original
  tokens; the same LM head predicts token t+1 from positions <= t, for every non-pad token. The
  original tokens come back from the MLM records (`restore_original_tokens`), so one set of
  records serves both objectives.

Packed ("mlm" only; `build_pretrainer(..., max_sequences_per_pack=k)`, k > 1): each row of
S = max_seq_length holds up to k sequences, the masked-LM targets of all of them
(k * P slots, P = max_predictions_per_seq) and each sequence's next-sentence label at
its [CLS]:
  input_word_ids, input_type_ids: int32 [B, S], as unpacked (segment ids per sequence);
  input_mask: int32 [B, S], 0 at padding, else the token's 1-based sequence index in its row;
  input_positions: int32 [B, S], each token's position in its own sequence (0 at padding);
  masked_lm_positions, masked_lm_ids: int32 [B, k*P]; masked_lm_weights: float32 [B, k*P]
    (the model reads as many slots as it is given; each costs a projection onto the whole
    vocabulary, empty or not);
  next_sentence_labels, next_sentence_positions (its [CLS]'s index in the row): int32 [B, k];
  next_sentence_weights: float32 [B, k], 1.0 for a sequence, 0.0 for an empty slot.
The encoder's attention is block-diagonal and its position ids restart per sequence (see
`encoder.build_encoder`), so every sequence gets the outputs and losses it gets unpacked, from
the same variables.
"""
import tensorflow as tf
import tf_keras

from bert_tf.modeling import heads
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder

OBJECTIVES = ("mlm", "ltr")
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
PACKED_ENCODER_INPUTS = ENCODER_INPUTS + ("input_positions",)


def restore_original_tokens(features: dict) -> tf.Tensor:
  """input_word_ids [B, S] with each masked position (weight > 0) given back its original id.

  Padding slots of masked_lm_positions (weight 0, position 0) leave [CLS] alone. One-hot
  arithmetic rather than a scatter: static shapes, XLA-friendly.
  """
  ids = features["input_word_ids"]
  real = tf.cast(features["masked_lm_weights"] > 0, ids.dtype)                  # [B, P]
  hits = tf.one_hot(features["masked_lm_positions"], ids.shape[1] or tf.shape(ids)[1],
                    dtype=ids.dtype) * real[:, :, None]                          # [B, P, S]
  originals = tf.reduce_sum(hits * features["masked_lm_ids"][:, :, None], axis=1)  # [B, S]
  return ids * (1 - tf.reduce_sum(hits, axis=1)) + originals


class BertPretrainer(tf_keras.Model):
  """Encoder + LM head (+ next-sentence head).

  call(features) takes the dict of `tfrecords.datasets.pretraining_dataset` (packed: the
  module doc's) and returns
    mlm_logits: float32 [B, N, V] at the N masked_lm_positions ("mlm"), or [B, S, V] at
      every position ("ltr");
    nsp_logits: float32 [B, 2], when `nsp`; [B, k, 2] packed, at next_sentence_positions.
  Logits are float32 even under mixed precision, so the softmax and loss are.
  """

  def __init__(self, config: BertConfig, objective: str = "mlm", nsp: bool = True,
               packed: bool = False, **kwargs):
    super().__init__(**kwargs)
    self.objective = objective
    self.packed = packed
    self.encoder = build_encoder(config, "causal" if objective == "ltr" else "bidirectional",
                                 packed=packed)
    self.masked_lm = heads.masked_lm(config, self.encoder)
    self.next_sentence = heads.next_sentence(config) if nsp else None
    if objective == "mlm":
      # The last block's output is read only at [CLS] and the masked positions: it runs on
      # those queries alone (see `_encode_at`), its layers and those below it the encoder's.
      self._last_block = self.encoder.get_layer(
          f"transformer/layer_{config.num_hidden_layers - 1}")
      self._below_last_block = tf_keras.Model(self.encoder.inputs, self._last_block.input)
      self._pooler = self.encoder.get_layer("pooler_transform")

  @property
  def checkpoint_items(self) -> dict:
    """The trackables to save and restore, by the names `bert_tf.modeling.checkpoints` reads."""
    items = dict(encoder=self.encoder, masked_lm=self.masked_lm)
    if self.next_sentence is not None:
      items["next_sentence"] = self.next_sentence
    return items

  def call(self, features, training=None):
    inputs = {name: features[name]
              for name in (PACKED_ENCODER_INPUTS if self.packed else ENCODER_INPUTS)}
    if self.objective == "ltr":
      inputs["input_word_ids"] = restore_original_tokens(features)
      ids = inputs["input_word_ids"]
      positions = tf.broadcast_to(tf.range(ids.shape[1] or tf.shape(ids)[1]), tf.shape(ids))
      encoded = self.encoder(inputs, training=training)
      sequence_output, pooled_output = encoded["sequence_output"], encoded["pooled_output"]
    else:
      # Each sequence's [CLS]: the row's first token unpacked, its own position packed.
      cls_positions = (features["next_sentence_positions"] if self.packed
                       else tf.zeros_like(features["masked_lm_positions"][:, :1]))
      sequence_output, pooled_output = self._encode_at(
          inputs, cls_positions, features["masked_lm_positions"], training)
      positions = tf.broadcast_to(tf.range(tf.shape(sequence_output)[1]),
                                  tf.shape(features["masked_lm_positions"]))
    outputs = {"mlm_logits": tf.cast(
        self.masked_lm(sequence_output, masked_positions=positions), tf.float32)}
    if self.next_sentence is not None:
      outputs["nsp_logits"] = tf.cast(self.next_sentence(pooled_output), tf.float32)
    return outputs

  def _encode_at(self, inputs: dict, cls_positions: tf.Tensor, positions: tf.Tensor,
                 training) -> tuple:
    """The encoder's sequence output at `positions` [B, P] -> [B, P, H], and the pooled
    output of the [CLS] at `cls_positions` [B, C]: [B, H] unpacked (C = 1, the row's first
    token), [B, C, H] packed. Equal to the whole encoder's, but its last block attends from
    the C [CLS] and the P positions only (keys and values still every position), since
    nothing else of its output is read. At sequence 128 and 20 predictions that block does
    ~1/4 of its work.
    """
    hidden, mask = self._below_last_block(inputs, training=training)  # [B,S,H], [B,S,S]
    queries = tf.concat([cls_positions, positions], axis=1)            # [B, C + P]
    last = self._last_block([tf.gather(hidden, queries, batch_dims=1), hidden,
                             tf.gather(mask, queries, batch_dims=1)], training=training)
    num_cls = cls_positions.shape[1] or tf.shape(cls_positions)[1]
    pooled = self._pooler(last[:, :num_cls] if self.packed else last[:, 0])
    return last[:, num_cls:], pooled


def dummy_features(max_seq_length: int, max_predictions_per_seq: int,
                   batch_size: int = 1, max_sequences_per_pack: int = 0) -> dict:
  """An all-zero batch of pretraining features of the given shapes (to build a model):
  unpacked, or packed (the module doc's) when max_sequences_per_pack > 1."""
  seq = tf.zeros([batch_size, max_seq_length], tf.int32)
  if max_sequences_per_pack <= 1:
    preds = tf.zeros([batch_size, max_predictions_per_seq], tf.int32)
    return dict(input_word_ids=seq, input_mask=tf.ones_like(seq), input_type_ids=seq,
                masked_lm_positions=preds, masked_lm_ids=preds,
                masked_lm_weights=tf.zeros([batch_size, max_predictions_per_seq]),
                next_sentence_labels=tf.zeros([batch_size, 1], tf.int32))
  preds = tf.zeros([batch_size, max_sequences_per_pack * max_predictions_per_seq], tf.int32)
  sequences = tf.zeros([batch_size, max_sequences_per_pack], tf.int32)
  return dict(input_word_ids=seq, input_mask=tf.ones_like(seq), input_type_ids=seq,
              input_positions=seq, masked_lm_positions=preds, masked_lm_ids=preds,
              masked_lm_weights=tf.zeros(preds.shape), next_sentence_labels=sequences,
              next_sentence_positions=sequences, next_sentence_weights=tf.zeros(sequences.shape))


def _check(config: BertConfig, max_seq_length: int, objective: str, nsp: bool,
           max_sequences_per_pack: int) -> None:
  if objective not in OBJECTIVES:
    raise ValueError(f"objective {objective!r} is not one of {OBJECTIVES}")
  if objective == "ltr" and nsp:
    # A causal [CLS] sees only itself: there is no sentence-pair summary to classify.
    raise ValueError("objective 'ltr' trains without next sentence prediction (the paper's "
                     "'LTR & No NSP'); pass nsp=False")
  if objective == "ltr" and max_sequences_per_pack > 1:
    raise ValueError("objective 'ltr' trains on unpacked rows: max_sequences_per_pack "
                     f"{max_sequences_per_pack} needs objective 'mlm'")
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"max_seq_length {max_seq_length} exceeds the config's "
                     f"max_position_embeddings {config.max_position_embeddings}")


def build_pretrainer(config: BertConfig, max_seq_length: int, max_predictions_per_seq: int,
                     objective: str = "mlm", nsp: bool = True,
                     max_sequences_per_pack: int = 0) -> BertPretrainer:
  """A BertPretrainer with its variables created (ready to load a checkpoint into).

  max_sequences_per_pack: k > 1 builds the packed form ("mlm" only), which reads the module
  doc's packed features, up to k sequences a row and max_predictions_per_seq targets each;
  0 or 1, the unpacked one. The two have the same variables.
  """
  _check(config, max_seq_length, objective, nsp, max_sequences_per_pack)
  model = BertPretrainer(config, objective=objective, nsp=nsp,
                         packed=max_sequences_per_pack > 1,
                         name=f"bert_pretrainer_{objective}")
  model(dummy_features(max_seq_length, max_predictions_per_seq,
                       max_sequences_per_pack=max_sequences_per_pack))
  return model


@tf.custom_gradient
def _softmax_cross_entropy(logits, labels):
  """-log softmax(logits)[label], and whether the label's logit is the largest (1.0 or 0.0).

  logits float32 [B, N, V]; labels int32 [B, N] -> two float32 [B, N]. The value and gradient
  (softmax - one_hot) of `sparse_softmax_cross_entropy_with_logits`, ~2.3x faster on a CPU
  with the accuracy included (its kernel is single-threaded over the vocabulary; argmax was
  another pass): the masked-LM loss is the largest cost in a small model's step after the
  matmuls. The gradient is one pass over the vocabulary (the kept exponentials, scaled per
  row), then the label's entry of each row. The accuracy reuses the row maximum (a tie with
  the label counts as correct).
  """
  shifted = logits - tf.reduce_max(logits, -1, keepdims=True)
  exp = tf.exp(shifted)
  sum_exp = tf.reduce_sum(exp, -1, keepdims=True)                                  # [B, N, 1]
  label_logit = tf.gather(shifted, labels[..., None], batch_dims=2)[..., 0]        # [B, N]

  def grad(d_xent, d_correct):
    del d_correct  # Not differentiable.
    softmax_grad = tf.reshape(exp * (d_xent[..., None] / sum_exp), [-1, tf.shape(exp)[-1]])
    rows = tf.range(tf.shape(softmax_grad)[0])
    labels_grad = tf.tensor_scatter_nd_sub(
        softmax_grad, tf.stack([rows, tf.reshape(labels, [-1])], axis=1),
        tf.reshape(d_xent, [-1]))
    return tf.reshape(labels_grad, tf.shape(exp)), None

  xent = tf.math.log(sum_exp)[..., 0] - label_logit
  return (xent, tf.cast(label_logit >= 0, tf.float32)), grad


def _weighted_lm_loss(logits, labels, weights, count):
  """The original's masked-LM loss: sum(w * xent) / (count + 1e-5), count the sum of w over
  the update (this batch's own, in the original); accuracy alike.

  logits float32 [B, N, V]; labels int32 [B, N]; weights float32 [B, N]; count float32 [].
  """
  xent, correct = _softmax_cross_entropy(logits, labels)
  denominator = count + 1e-5
  return (tf.reduce_sum(weights * xent) / denominator,
          tf.reduce_sum(weights * correct) / denominator)


def _lm_weights(features: dict, objective: str) -> tf.Tensor:
  """float32 [B, N]: which LM targets count (masked_lm_weights; for "ltr", the non-pad next
  tokens)."""
  if objective == "ltr":
    return tf.cast(features["input_mask"][:, 1:], tf.float32)
  return tf.cast(features["masked_lm_weights"], tf.float32)


def _nsp_weights(features: dict) -> tf.Tensor | None:
  """float32 [B, k]: which next-sentence slots of a packed batch hold a sequence; None for an
  unpacked batch, whose every row is one."""
  weights = features.get("next_sentence_weights")
  return None if weights is None else tf.cast(weights, tf.float32)


def pretraining_loss_counts(features: dict, objective: str = "mlm") -> dict[str, tf.Tensor]:
  """What the pretraining loss's terms are means over in this batch: the LM targets that
  count, and the records (next sentence prediction's): the rows of an unpacked batch, the
  sequences of a packed one."""
  nsp_weights = _nsp_weights(features)
  records = (tf.cast(tf.shape(features["input_word_ids"])[0], tf.float32)
             if nsp_weights is None else tf.reduce_sum(nsp_weights))
  return {"lm targets": tf.reduce_sum(_lm_weights(features, objective)), "records": records}


def pretraining_loss(features: dict, outputs: dict, objective: str = "mlm", nsp: bool = True,
                     counts: dict | None = None) -> tuple[tf.Tensor, dict]:
  """The batch's loss (float32 scalar) and scalar metrics.

  Loss = the LM loss (+ the mean next-sentence loss with `nsp`). The LM loss is the original's
  sum(w * xent) / (sum(w) + 1e-5), w the masked_lm_weights, with sum(w) over the whole update
  (`counts`, `pretraining_loss_counts` summed over its micro-batches and replicas; this
  batch's own when None): the masked positions of the global batch weigh alike however it is
  split. The next-sentence loss is a mean over the update's records, each sequence of a pack
  one (its empty slots, next_sentence_weights 0, none). Metrics: masked_lm_loss,
  masked_lm_accuracy (for "ltr", the next-token loss and accuracy over non-pad targets, under
  the same names), and with `nsp` next_sentence_loss, next_sentence_accuracy.
  """
  if objective not in OBJECTIVES:
    raise ValueError(f"objective {objective!r} is not one of {OBJECTIVES}")
  if nsp != ("nsp_logits" in outputs):
    raise ValueError(f"nsp={nsp} but the model {'lacks' if nsp else 'has'} a next-sentence head")
  counts = counts or pretraining_loss_counts(features, objective)
  logits = tf.cast(outputs["mlm_logits"], tf.float32)
  if objective == "ltr":
    logits, labels = logits[:, :-1], restore_original_tokens(features)[:, 1:]
  else:
    labels = features["masked_lm_ids"]
  lm_loss, lm_accuracy = _weighted_lm_loss(logits, labels, _lm_weights(features, objective),
                                           counts["lm targets"])
  metrics = dict(masked_lm_loss=lm_loss, masked_lm_accuracy=lm_accuracy)
  loss = lm_loss
  if nsp:
    # [B, 2] unpacked, [B, k, 2] packed: one row per sequence slot.
    nsp_logits = tf.reshape(tf.cast(outputs["nsp_logits"], tf.float32), [-1, 2])
    labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=nsp_logits)
    correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels),
                      tf.float32)
    nsp_weights = _nsp_weights(features)
    if nsp_weights is not None:
      nsp_weights = tf.reshape(nsp_weights, [-1])
      xent, correct = xent * nsp_weights, correct * nsp_weights
    metrics["next_sentence_loss"] = tf.reduce_sum(xent) / counts["records"]
    metrics["next_sentence_accuracy"] = tf.reduce_sum(correct) / counts["records"]
    loss += metrics["next_sentence_loss"]
  return loss, metrics
