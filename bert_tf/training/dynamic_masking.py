"""Dynamic masking: the masked LM targets drawn afresh each time a record is read, in the
tf.data pipeline (as the Model Garden's text loader and RoBERTa do), from records that hold
only the sentence pairs (`tfrecords.schema.unmasked_pretraining_features`).

The rules are the offline masker's (`data_gen/pretraining_data/masking.py`, google-research/bert's
`create_masked_lm_predictions`): of the n tokens that are not [CLS]/[SEP]/padding, a budget of
min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))) is filled by taking words in a
random order, each one whose pieces still fit (with whole-word masking a word is a piece without
"##", or one that opens a segment, and the "##" pieces after it; without, every token is its own
word); each chosen token then becomes [MASK] with mask_token_prob, a uniformly random vocabulary
id with random_token_prob, and stays itself otherwise, independently per token.

tensorflow-text does the masking (`mask_language_model`, `MaskValuesChooser`); only the count
and grouping of the chosen positions are ours (`BudgetSelector`), because tensorflow-text's
`RandomItemSelector` takes ceil(items * rate) items, so with whole words its budget counts
words, not tokens, and can overrun max_predictions_per_seq.

Randomness is TensorFlow's stateful RNG under the global seed, applied in one sequential map
after batching: the same seed draws the same masks in the same order, so a resumed run (which
skips the batches it has consumed, `loop._skip_consumed`) sees the masks an uninterrupted
run would have seen; every epoch draws new ones.
"""
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization
from tfrecords.masked_lm import MaskingRules


class BudgetSelector(tf_text.RandomItemSelector):
  """Chooses the masked positions of a batch by the offline masker's rule (module docstring):
  tensorflow-text's random selector with our budget and word grouping.

  get_selection_mask(input_ids [batch, (tokens)], axis=1) -> bool [batch, (tokens)].
  """

  def __init__(self, rules: MaskingRules, special_ids: list[int],
               is_continuation: np.ndarray | None):
    super().__init__(rules.max_predictions_per_seq, rules.masked_lm_prob,
                     unselectable_ids=special_ids)
    self._continues = None if is_continuation is None else tf.constant(is_continuation, tf.bool)

  def _word_starts(self, ids: tf.Tensor, candidates: tf.Tensor) -> tf.Tensor:
    """[batch, L] bool: where a word starts among the candidates."""
    if self._continues is None:
      return candidates
    continues = tf.gather(self._continues, ids)
    after_candidate = tf.pad(candidates[:, :-1], [[0, 0], [1, 0]])
    return candidates & ~(continues & after_candidate)

  def _budget(self, candidates: tf.Tensor) -> tf.Tensor:
    """[batch] int32: min(max_predictions, max(1, round(n * prob))); halves round to even,
    as the offline masker's np.rint and the original's Python 3 round."""
    n = tf.reduce_sum(tf.cast(candidates, tf.float32), axis=1)
    wanted = tf.cast(tf.round(n * self.selection_rate), tf.int32)
    return tf.minimum(self.max_selections_per_batch, tf.maximum(1, wanted))

  def get_selection_mask(self, input_ids: tf.RaggedTensor, axis: int = 1) -> tf.RaggedTensor:
    del axis  # Tokens are the items; words are grouped here.
    candidates = self.get_selectable(input_ids, 1).to_tensor(False)      # [b, L]
    ids = input_ids.to_tensor(0)
    starts = self._word_starts(ids, candidates)
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1              # [b, L]
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    width = tf.shape(ids)[1]
    # Pieces per word: [b, width] (a row has at most `width` words). Counts are float32 from
    # here: oneDNN logs an error line for int and bool transposes on CPUs without AVX-512.
    flat_word = tf.range(tf.shape(ids)[0])[:, None] * width + tf.maximum(word, 0)
    word_len = tf.reshape(tf.math.unsorted_segment_sum(
        tf.cast(candidates, tf.float32), flat_word, tf.size(ids)), tf.shape(ids))
    # Words in a random order per row; the padding words last.
    keys = tf.where(tf.range(width)[None, :] < num_words[:, None],
                    tf.random.uniform(tf.shape(ids)), np.inf)
    order = tf.argsort(keys, axis=1, stable=True)
    len_in_order = tf.gather(word_len, order, batch_dims=1)
    budget = tf.cast(self._budget(candidates), tf.float32)

    def take_if_fits(state, lengths):
      total, _ = state
      fits = tf.cast(total + lengths <= budget, tf.float32)
      return total + fits * lengths, fits
    zeros = tf.zeros_like(budget)
    _, taken_in_order = tf.scan(take_if_fits, tf.transpose(len_in_order),
                                initializer=(zeros, zeros))
    taken = tf.gather(tf.transpose(taken_in_order) > 0, tf.argsort(order, axis=1),
                      batch_dims=1)
    chosen = candidates & tf.gather(taken, tf.maximum(word, 0), batch_dims=1)
    return tf.RaggedTensor.from_tensor(chosen, lengths=input_ids.row_lengths())


class DynamicMasker:
  """Adds masked LM targets to batches of unmasked records, in place of the offline ones.

  __call__(batch) takes a dict with input_word_ids, input_mask [batch, max_seq_length] int32
  (others pass through) and returns it with input_word_ids masked and masked_lm_positions,
  masked_lm_ids [batch, max_predictions_per_seq] int32, masked_lm_weights float32 (1.0 real,
  0.0 padding) added: what `datasets.pretraining_dataset` gives for offline records.
  """

  def __init__(self, rules: MaskingRules, vocab_file: str, vocab_size: int):
    vocab = tokenization.load_vocab(vocab_file)
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[PAD]") if t not in vocab]
    if missing:
      raise ValueError(f"{vocab_file}: no {', '.join(missing)} in the vocabulary")
    if len(vocab) > vocab_size:
      raise ValueError(f"{vocab_file}: {len(vocab)} tokens, but the bert config's vocab_size "
                       f"is {vocab_size}")
    self.rules = rules
    self.pad_id = vocab["[PAD]"]
    is_continuation = np.zeros([vocab_size], bool)
    for token, index in vocab.items():
      is_continuation[index] = token.startswith(tokenization.SUFFIX_INDICATOR)
    self.selector = BudgetSelector(rules, [vocab["[CLS]"], vocab["[SEP]"], self.pad_id],
                                   is_continuation if rules.do_whole_word_mask else None)
    # Random replacements are drawn from the whole vocabulary, as the offline masker's.
    self.chooser = tf_text.MaskValuesChooser(len(vocab), vocab["[MASK]"],
                                             rules.mask_token_prob, rules.random_token_prob)

  def __call__(self, batch: dict) -> dict:
    ids = batch["input_word_ids"]
    seq_length = ids.shape[1]
    width = self.rules.max_predictions_per_seq
    tokens = tf.RaggedTensor.from_tensor(ids, lengths=tf.reduce_sum(batch["input_mask"], 1))
    masked, positions, labels = tf_text.mask_language_model(tokens, self.selector, self.chooser)
    out = dict(batch)
    out["input_word_ids"] = masked.to_tensor(self.pad_id, shape=[None, seq_length])
    out["masked_lm_positions"] = tf.cast(positions.to_tensor(0, shape=[None, width]), tf.int32)
    out["masked_lm_ids"] = tf.cast(labels.to_tensor(0, shape=[None, width]), tf.int32)
    out["masked_lm_weights"] = tf.ones_like(positions, tf.float32).to_tensor(
        0.0, shape=[None, width])
    return out

  def apply(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset's batches masked. One sequential map: the stateful RNG then draws the same
    masks in the same order on every run with the same seed (see the module docstring)."""
    return dataset.map(self).prefetch(tf.data.AUTOTUNE)
