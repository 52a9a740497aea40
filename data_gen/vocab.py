"""Learning a WordPiece vocab.txt from one's own corpus, to pretrain from scratch.

The corpus is split into words by `bert_tf.tokenization.split_words`, the very ops the
tokenizer runs, so the learned pieces are exactly the strings the tokenizer will look up.
Pieces are learned by tensorflow-text's WordPiece vocab learner (the library behind
`bert_vocab_from_dataset`, without its own word splitting).

Layout of the result: [PAD] [UNK] [CLS] [SEP] [MASK] at ids 0..4, then any [unusedN]
placeholders (room for tokens a user adds later without resizing the model), then single
characters, then learned pieces, most frequent first.
"""
import collections

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from bert_tf import tokenization
from bert_tf.common import files


def reserved_tokens(num_unused: int = 0) -> list[str]:
  return list(tokenization.SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused)]


def count_words(files: list[str], do_lower_case: bool, max_lines: int = 0,
                batch_size: int = 4096) -> collections.Counter:
  """Word -> count over the lines of `files` (the first `max_lines` lines if > 0)."""
  lines = tf.data.TextLineDataset(files)
  if max_lines > 0:
    lines = lines.take(max_lines)

  def unique_words(batch):
    words, _, counts = tf.unique_with_counts(
        tokenization.split_words(batch, do_lower_case).flat_values)
    return words, counts

  batches = lines.batch(batch_size).map(unique_words, num_parallel_calls=tf.data.AUTOTUNE)
  counts = collections.Counter()
  for words, word_counts in batches.as_numpy_iterator():
    counts.update(dict(zip(words.tolist(), word_counts.tolist())))
  return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


def learn_vocab(word_counts: collections.Counter, vocab_size: int, num_unused: int = 0,
                min_token_count: int = 10, max_token_length: int = 50,
                max_unique_chars: int = 1000) -> list[str]:
  """A WordPiece vocab of at most `vocab_size` tokens, reserved ones first.

  The learner searches for the count threshold that gives a vocab within 5% under
  `vocab_size`; a small corpus may give fewer tokens (no piece is kept that occurs fewer
  than `min_token_count` times). Words over `max_token_length` characters and words with
  characters outside the `max_unique_chars` most frequent ones are not learned from.
  """
  reserved = reserved_tokens(num_unused)
  if vocab_size <= len(reserved):
    raise ValueError(f"vocab_size {vocab_size} leaves no room beside the {len(reserved)} "
                     f"reserved tokens")
  if not word_counts:
    raise ValueError("no words to learn from")
  vocab = learner.learn(word_counts, vocab_size, reserved, lower_thresh=min_token_count,
                        max_token_length=max_token_length, max_unique_chars=max_unique_chars)
  return _cap(vocab, vocab_size, len(reserved))


def _cap(vocab: list[str], vocab_size: int, num_reserved: int) -> list[str]:
  """At most `vocab_size` tokens: when the learner's search ends just over the target, drops
  its least frequent pieces, never a reserved token or a character (with or without "##"),
  which every word needs to be pieced at all."""
  if len(vocab) <= vocab_size:
    return vocab
  suffix = tokenization.SUFFIX_INDICATOR
  essential = set(vocab[:num_reserved]) | {
      t for t in vocab if len(t) == 1 or (t.startswith(suffix) and len(t) == len(suffix) + 1)}
  room = vocab_size - len(essential)
  if room < 0:
    raise ValueError(f"vocab_size {vocab_size} is less than the {len(essential)} reserved "
                     f"tokens and characters (lower max_unique_chars)")
  kept = set([t for t in vocab if t not in essential][:room]) | essential
  return [t for t in vocab if t in kept]


def write_vocab(tokens: list[str], path: str) -> None:
  """Writes vocab.txt (one token a line) under a temporary name, renamed when complete."""
  files.write_text(path, "".join(t + "\n" for t in tokens))
