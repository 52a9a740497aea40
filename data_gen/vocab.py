"""Learning a WordPiece vocab.txt from one's own corpus, to pretrain from scratch.

The corpus is split into words by `bert_tf.tokenization.split_words`, the very ops the
tokenizer runs, so the learned pieces are exactly the strings the tokenizer will look up.
Pieces are learned by tensorflow-text's WordPiece vocab learner (the library behind
`bert_vocab_from_dataset`, without its own word splitting).

Characters the tokenizer always splits off as words of their own (CJK ideographs and
punctuation, as BERT's BasicTokenizer splits them) are whole tokens only: never "##"-joined
(the tokenizer never looks one up), and each one that occurs min_token_count times in the
corpus (as counted, whatever a language's smoothing weighs) is kept whatever the alphabet
limit (max_unique_chars, which counts the other words' characters), so a Chinese corpus's
thousands of characters are not [UNK]. They take at most half the room.

Several languages (`--input_file=en:a/*,zh:b/*`): their word counts are weighed by
multilingual.md's smoothing (`jobs.languages.smoothed_shares`, as create_pretraining_data's
sampling), a language's share counting its sentences (lines with a word), so that a small
language's words are not crowded out of the vocab; `unk_rates` then tells each language's
[UNK] rate with the learned vocab.

Layout of the result: [PAD] [UNK] [CLS] [SEP] [MASK] at ids 0..4, then any [unusedN]
placeholders (room for tokens a user adds later without resizing the model), then the
characters split off (most frequent first), then single characters, then learned pieces,
most frequent first.
"""
import collections

import numpy as np
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from bert_tf import tokenization
from bert_tf.common import files


def reserved_tokens(num_unused: int = 0) -> list[str]:
  return list(tokenization.SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused)]


def count_words(files: list[str], do_lower_case: bool, max_lines: int = 0,
                batch_size: int = 4096) -> collections.Counter:
  """Word -> count over the lines of `files` (the first `max_lines` lines if > 0)."""
  return count_language(files, do_lower_case, max_lines, batch_size)[0]


def count_language(files: list[str], do_lower_case: bool, max_lines: int = 0,
                   batch_size: int = 4096) -> tuple[collections.Counter, int]:
  """`count_words`, and the sentences counted: lines with a word (a language's size, whose
  share the smoothing weighs)."""
  lines = tf.data.TextLineDataset(files)
  if max_lines > 0:
    lines = lines.take(max_lines)

  def unique_words(batch):
    split = tokenization.split_words(batch, do_lower_case)
    words, _, counts = tf.unique_with_counts(split.flat_values)
    return words, counts, tf.math.count_nonzero(split.row_lengths())

  batches = lines.batch(batch_size).map(unique_words, num_parallel_calls=tf.data.AUTOTUNE)
  counts, sentences = collections.Counter(), 0
  for words, word_counts, batch_sentences in batches.as_numpy_iterator():
    counts.update(dict(zip(words.tolist(), word_counts.tolist())))
    sentences += int(batch_sentences)
  return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()}), sentences


def weigh_languages(counts: dict[str, collections.Counter], rates: dict[str, float]
                    ) -> collections.Counter:
  """The languages' word counts as one, each language's times its rate (fractional counts:
  the learner takes them)."""
  total = collections.Counter()
  for language, words in counts.items():
    for word, count in words.items():
      total[word] += count * rates[language]
  return total


def split_off_characters(words: list[str], do_lower_case: bool) -> set[str]:
  """The one-character `words` that the tokenizer splits off from any neighbour: CJK
  ideographs and punctuation."""
  singles = [w for w in words if len(w) == 1]
  if not singles:
    return set()
  split = tokenization.split_words(tf.constant([f"a{c}a" for c in singles]), do_lower_case)
  return {c for c, n in zip(singles, split.row_lengths().numpy()) if n == 3}


def learn_vocab(word_counts: collections.Counter, vocab_size: int, num_unused: int = 0,
                min_token_count: int = 10, max_token_length: int = 50,
                max_unique_chars: int = 1000, do_lower_case: bool = True,
                unweighed_counts: collections.Counter | None = None) -> list[str]:
  """A WordPiece vocab of at most `vocab_size` tokens, reserved ones first.

  The learner searches for the count threshold that gives a vocab within 5% under
  `vocab_size`; a small corpus may give fewer tokens (no piece is kept that occurs fewer
  than `min_token_count` times). Words over `max_token_length` characters and words with
  characters outside the `max_unique_chars` most frequent ones are not learned from. The
  characters the tokenizer splits off (`split_off_characters`, as `do_lower_case` splits) go
  in whole (see the module doc).

  unweighed_counts: for `word_counts` weighed by language (`weigh_languages`), the counts as
  the corpus has them, on which a split-off character's min_token_count is judged (default:
  `word_counts`). Which characters the corpus has is its text's, not its sampling's: a
  character seen once in a language weighed below 1 would fall under any floor, and the
  language's text then be [UNK] where the unsmoothed vocab knows it. The order, and which go
  when they would take over half the room, stay the weighed counts'.
  """
  reserved = reserved_tokens(num_unused)
  if vocab_size <= len(reserved):
    raise ValueError(f"vocab_size {vocab_size} leaves no room beside the {len(reserved)} "
                     f"reserved tokens")
  if not word_counts:
    raise ValueError("no words to learn from")
  alone = split_off_characters(list(word_counts), do_lower_case)
  floor_counts = word_counts if unweighed_counts is None else unweighed_counts
  whole = sorted((c for c in alone if floor_counts[c] >= min_token_count),
                 key=lambda c: (-word_counts[c], c))[:(vocab_size - len(reserved)) // 2]
  rest = {w: c for w, c in word_counts.items() if w not in alone}
  vocab = reserved + whole
  if rest:
    vocab = learner.learn(rest, vocab_size, vocab,
                          lower_thresh=min_token_count, max_token_length=max_token_length,
                          max_unique_chars=max_unique_chars)
  return _cap(vocab, vocab_size, len(reserved) + len(whole))


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


def unk_rate(word_counts: collections.Counter, tokenizer, batch_size: int = 65536) -> float:
  """The share of the wordpieces of the words counted (`count_words`) that are [UNK] with
  `tokenizer` (a `FullTokenizer`: its vocab, casing and rules), each word tokenized once."""
  unk = pieces = 0
  words = list(word_counts)
  for start in range(0, len(words), batch_size):
    batch = words[start:start + batch_size]
    counts = np.array([word_counts[w] for w in batch], np.float64)
    ids = tokenizer.tokenize_ids(batch)
    pieces += float(counts @ np.array([len(i) for i in ids]))
    unk += float(counts @ np.array([int((i == tokenizer.unk_id).sum()) for i in ids]))
  return unk / max(pieces, 1)


def write_vocab(tokens: list[str], path: str) -> None:
  """Writes vocab.txt (one token a line) under a temporary name, renamed when complete."""
  files.write_text(path, "".join(t + "\n" for t in tokens))
