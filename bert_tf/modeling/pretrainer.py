"""The pretraining model and its loss: masked LM + next sentence prediction, and the ablations.

objective "mlm" (BERT): bidirectional encoder; the masked-LM head predicts the original token at
  each of `masked_lm_positions`; with `nsp`, a head on the pooled output predicts whether
  sentence B follows sentence A.
objective "ltr" (the paper's "LTR & No NSP", like OpenAI GPT): causal encoder over the original
  tokens; the same LM head predicts token t+1 from positions <= t, for every non-pad token. The
  original tokens come back from the MLM records (`restore_original_tokens`), so one set of
  records serves both objectives.
"""
import tensorflow as tf
import tf_keras

from bert_tf.modeling import heads
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder

OBJECTIVES = ("mlm", "ltr")
ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


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

  call(features) takes the dict of `tfrecords.datasets.pretraining_dataset` and returns
    mlm_logits: float32 [B, P, V] at masked_lm_positions ("mlm"), or [B, S, V] at every
      position ("ltr");
    nsp_logits: float32 [B, 2], when `nsp`.
  Logits are float32 even under mixed precision, so the softmax and loss are.
  """

  def __init__(self, config: BertConfig, objective: str = "mlm", nsp: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.objective = objective
    self.encoder = build_encoder(config, "causal" if objective == "ltr" else "bidirectional")
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
    inputs = {name: features[name] for name in ENCODER_INPUTS}
    if self.objective == "ltr":
      inputs["input_word_ids"] = restore_original_tokens(features)
      ids = inputs["input_word_ids"]
      positions = tf.broadcast_to(tf.range(ids.shape[1] or tf.shape(ids)[1]), tf.shape(ids))
      encoded = self.encoder(inputs, training=training)
      sequence_output, pooled_output = encoded["sequence_output"], encoded["pooled_output"]
    else:
      sequence_output, pooled_output = self._encode_at(
          inputs, features["masked_lm_positions"], training)
      positions = tf.broadcast_to(tf.range(tf.shape(sequence_output)[1]),
                                  tf.shape(features["masked_lm_positions"]))
    outputs = {"mlm_logits": tf.cast(
        self.masked_lm(sequence_output, masked_positions=positions), tf.float32)}
    if self.next_sentence is not None:
      outputs["nsp_logits"] = tf.cast(self.next_sentence(pooled_output), tf.float32)
    return outputs

  def _encode_at(self, inputs: dict, positions: tf.Tensor, training) -> tuple:
    """The encoder's sequence output at `positions` [B, P] -> [B, P, H], and its pooled
    output [B, H]: equal to the whole encoder's, but its last block attends from [CLS] and
    the P positions only (keys and values still every position), since nothing else of its
    output is read. At sequence 128 and 20 predictions that block does ~1/4 of its work.
    """
    hidden, mask = self._below_last_block(inputs, training=training)  # [B,S,H], [B,S,S]
    queries = tf.concat([tf.zeros_like(positions[:, :1]), positions], axis=1)  # [B, 1 + P]
    last = self._last_block([tf.gather(hidden, queries, batch_dims=1), hidden,
                             tf.gather(mask, queries, batch_dims=1)], training=training)
    return last[:, 1:], self._pooler(last[:, 0])


def dummy_features(max_seq_length: int, max_predictions_per_seq: int,
                   batch_size: int = 1) -> dict:
  """An all-zero batch of pretraining features of the given shapes (to build a model)."""
  seq = tf.zeros([batch_size, max_seq_length], tf.int32)
  preds = tf.zeros([batch_size, max_predictions_per_seq], tf.int32)
  return dict(input_word_ids=seq, input_mask=tf.ones_like(seq), input_type_ids=seq,
              masked_lm_positions=preds, masked_lm_ids=preds,
              masked_lm_weights=tf.zeros([batch_size, max_predictions_per_seq]),
              next_sentence_labels=tf.zeros([batch_size, 1], tf.int32))


def _check(config: BertConfig, max_seq_length: int, objective: str, nsp: bool) -> None:
  if objective not in OBJECTIVES:
    raise ValueError(f"objective {objective!r} is not one of {OBJECTIVES}")
  if objective == "ltr" and nsp:
    # A causal [CLS] sees only itself: there is no sentence-pair summary to classify.
    raise ValueError("objective 'ltr' trains without next sentence prediction (the paper's "
                     "'LTR & No NSP'); pass nsp=False")
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"max_seq_length {max_seq_length} exceeds the config's "
                     f"max_position_embeddings {config.max_position_embeddings}")


def build_pretrainer(config: BertConfig, max_seq_length: int, max_predictions_per_seq: int,
                     objective: str = "mlm", nsp: bool = True) -> BertPretrainer:
  """A BertPretrainer with its variables created (ready to load a checkpoint into)."""
  _check(config, max_seq_length, objective, nsp)
  model = BertPretrainer(config, objective=objective, nsp=nsp,
                         name=f"bert_pretrainer_{objective}")
  model(dummy_features(max_seq_length, max_predictions_per_seq))
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


def pretraining_loss_counts(features: dict, objective: str = "mlm") -> dict[str, tf.Tensor]:
  """What the pretraining loss's terms are means over in this batch: the LM targets that
  count, and the records (next sentence prediction's)."""
  return {"lm targets": tf.reduce_sum(_lm_weights(features, objective)),
          "records": tf.cast(tf.shape(features["input_word_ids"])[0], tf.float32)}


def pretraining_loss(features: dict, outputs: dict, objective: str = "mlm", nsp: bool = True,
                     counts: dict | None = None) -> tuple[tf.Tensor, dict]:
  """The batch's loss (float32 scalar) and scalar metrics.

  Loss = the LM loss (+ the mean next-sentence loss with `nsp`). The LM loss is the original's
  sum(w * xent) / (sum(w) + 1e-5), w the masked_lm_weights, with sum(w) over the whole update
  (`counts`, `pretraining_loss_counts` summed over its micro-batches and replicas; this
  batch's own when None): the masked positions of the global batch weigh alike however it is
  split. Metrics: masked_lm_loss, masked_lm_accuracy (for "ltr", the next-token loss and
  accuracy over non-pad targets, under the same names), and with `nsp` next_sentence_loss,
  next_sentence_accuracy.
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
    nsp_logits = tf.cast(outputs["nsp_logits"], tf.float32)
    labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    metrics["next_sentence_loss"] = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=nsp_logits)) / counts["records"]
    metrics["next_sentence_accuracy"] = tf.reduce_sum(tf.cast(
        tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels),
        tf.float32)) / counts["records"]
    loss += metrics["next_sentence_loss"]
  return loss, metrics
