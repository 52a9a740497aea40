"""The masked LM objective: which positions to predict, and what the model sees there.

google-research/bert's `create_masked_lm_predictions`, for a whole batch of sequences at once
in numpy. Per sequence, as in the original: of the n tokens that are not [CLS]/[SEP], choose
min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))) uniformly at random (with whole
word masking: shuffle the words, take each one that still fits, all its pieces together); each
chosen token becomes [MASK] with probability mask_token_prob, a uniformly random vocabulary
token with probability random_token_prob, and stays itself otherwise (the paper's 80/10/10).
The draws differ from the original's, the distribution is the same.

Numpy only: this runs in the data generator's worker processes, which never import TensorFlow.
"""
import dataclasses

import numpy as np

from data_gen.pretraining_data.config import PretrainingDataConfig


@dataclasses.dataclass(frozen=True)
class VocabInfo:
  """What instance creation needs of the vocabulary (picklable, without the tokenizer).

  is_continuation: [size] bool, by id: the piece continues a word ("##" prefix).
  """
  size: int
  pad_id: int
  cls_id: int
  sep_id: int
  mask_id: int
  is_continuation: np.ndarray

  @classmethod
  def from_tokenizer(cls, tokenizer) -> "VocabInfo":
    """From a `bert_tf.tokenization.FullTokenizer`."""
    return cls(size=len(tokenizer.inv_vocab), pad_id=tokenizer.pad_id, cls_id=tokenizer.cls_id,
               sep_id=tokenizer.sep_id, mask_id=tokenizer.mask_id,
               is_continuation=np.asarray(tokenizer.is_continuation, bool))


@dataclasses.dataclass
class MaskedLm:
  """The masked sequences of a batch of n and their prediction targets.

  input_ids:  [n, max_seq_length] int32, with the chosen positions replaced.
  positions:  [n, max_predictions_per_seq] int32, ascending, zero-padded.
  label_ids:  [n, max_predictions_per_seq] int32, the original token at each position.
  num_masked: [n] int32, how many of `positions` are real.
  """
  input_ids: np.ndarray
  positions: np.ndarray
  label_ids: np.ndarray
  num_masked: np.ndarray


def num_to_predict(num_tokens: np.ndarray, config: PretrainingDataConfig) -> np.ndarray:
  """[n] -> [n]: the original's min(max_predictions, max(1, round(num_tokens * prob))).

  np.rint, like Python 3's round, rounds halves to even.
  """
  wanted = np.rint(num_tokens * config.masked_lm_prob).astype(np.int64)
  return np.minimum(config.max_predictions_per_seq, np.maximum(1, wanted))


def _choose_tokens(candidates: np.ndarray, budget: np.ndarray, width: int,
                   rng: np.random.Generator) -> np.ndarray:
  """`budget` [n] of the `candidates` [n, L] positions of each row, uniformly at random.

  Returns:
    [n, width] positions: each row's first `budget` ascending, the rest 0.
  """
  keys = np.where(candidates, rng.random(candidates.shape), np.inf)
  if width < keys.shape[1]:  # only the `width` smallest keys can be chosen: skip the full sort
    smallest = np.argpartition(keys, width - 1, axis=1)[:, :width]
  else:
    smallest = np.broadcast_to(np.arange(keys.shape[1]), keys.shape)
  by_key = np.argsort(np.take_along_axis(keys, smallest, axis=1), axis=1)
  smallest = np.take_along_axis(smallest, by_key, axis=1)
  real = np.arange(smallest.shape[1]) < budget[:, None]
  positions = np.sort(np.where(real, smallest, keys.shape[1]), axis=1)
  return _padded(np.where(real, positions, 0), width)


def _padded(positions: np.ndarray, width: int) -> np.ndarray:
  """[n, k] -> [n, width]: zero columns added (when max_seq_length < max_predictions)."""
  out = np.zeros((len(positions), width), np.int64)
  out[:, :positions.shape[1]] = positions[:, :width]
  return out


def _choose_words(candidates: np.ndarray, continues: np.ndarray, budget: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
  """Whole words of the `candidates` [n, L] positions, at most `budget` [n] tokens per row.

  A word is a candidate piece that does not continue a word (no "##"), or that opens a segment,
  with the continuation pieces after it. As in google-research/bert, the words are shuffled and
  each taken if its pieces still fit the budget: [n, L] bool.
  """
  n, length = candidates.shape
  after_candidate = np.zeros_like(candidates)
  after_candidate[:, 1:] = candidates[:, :-1]
  starts = candidates & ~(continues & after_candidate)
  word = np.cumsum(starts, axis=1) - 1                                    # [n, L]
  num_words = starts.sum(axis=1)
  width = max(1, int(num_words.max()))
  rows = np.broadcast_to(np.arange(n)[:, None], (n, length))
  word_len = np.zeros((n, width), np.int64)
  np.add.at(word_len, (rows[candidates], word[candidates]), 1)
  # Words in a random order per row; the padding words (length 0) last.
  keys = np.where(np.arange(width) < num_words[:, None], rng.random((n, width)), np.inf)
  order = np.argsort(keys, axis=1)
  len_in_order = np.take_along_axis(word_len, order, axis=1)
  taken_in_order = np.zeros((n, width), bool)
  total = np.zeros(n, np.int64)
  # Greedy, one shuffled word per step across all rows: the original's loop, vectorised.
  for r in range(width):
    fits = total + len_in_order[:, r] <= budget
    taken_in_order[:, r] = fits
    total += np.where(fits, len_in_order[:, r], 0)
  taken = np.zeros((n, width), bool)
  np.put_along_axis(taken, order, taken_in_order, axis=1)
  return candidates & np.take_along_axis(taken, np.maximum(word, 0), axis=1)


def mask_batch(input_ids: np.ndarray, candidates: np.ndarray, config: PretrainingDataConfig,
               vocab: VocabInfo, rng: np.random.Generator) -> MaskedLm:
  """Chooses and replaces the masked LM positions of a batch.

  Args:
    input_ids: [n, max_seq_length] int32 token ids.
    candidates: [n, max_seq_length] bool, the positions that may be chosen (not [CLS], [SEP],
      padding).
    config: masked_lm_prob, max_predictions_per_seq, do_whole_word_mask and the split.
    vocab: the special ids, the vocabulary size and which pieces continue a word.
    rng: the source of all random draws.

  Returns:
    A `MaskedLm`.
  """
  budget = num_to_predict(candidates.sum(axis=1), config)
  width = config.max_predictions_per_seq
  if config.do_whole_word_mask:
    chosen = _choose_words(candidates, vocab.is_continuation[input_ids], budget, rng)
    # The chosen positions first, in ascending order, then the rest.
    positions = _padded(np.argsort(~chosen, axis=1, kind="stable"), width)
    num_masked = chosen.sum(axis=1)
  else:
    positions = _choose_tokens(candidates, budget, width, rng)
    num_masked = budget
  real = np.arange(width) < num_masked[:, None]
  labels = np.take_along_axis(input_ids, positions, axis=1)
  draw = rng.random(positions.shape)
  random_ids = rng.integers(0, vocab.size, positions.shape)
  shown = np.where(draw < config.mask_token_prob, vocab.mask_id,
                   np.where(draw < config.mask_token_prob + config.random_token_prob,
                            random_ids, labels))
  masked = input_ids.copy()
  np.put_along_axis(masked, positions, np.where(real, shown, labels), axis=1)
  return MaskedLm(input_ids=masked,
                  positions=np.where(real, positions, 0).astype(np.int32),
                  label_ids=np.where(real, labels, 0).astype(np.int32),
                  num_masked=num_masked.astype(np.int32))
