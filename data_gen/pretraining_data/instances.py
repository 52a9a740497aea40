"""Training instances: sentence pairs for next sentence prediction, masked for the masked LM.

google-research/bert's `create_instances_from_document`, per chunk of documents. For each
document and each of dupe_factor passes: a target length (max_seq_length - 3, or with
probability short_seq_prob a random one in [2, that]); sentences accumulated up to it and cut
at a random point into A; B the actual continuation (50%) or a span from a random other
document (50%, the unused sentences put back); the pair truncated one token at a time from the
front or back of the longer; `[CLS] A [SEP] B [SEP]`; then masked (see `masking`).

The one deliberate departure: the "random document" is drawn from the same chunk (a window of
consecutive documents, see `documents`), not from the whole corpus, and the chunk's
instances are shuffled among themselves, so memory stays bounded whatever the corpus size.

Numpy only: this runs in the data generator's worker processes, which never import TensorFlow.
"""
import dataclasses
import os
import random
from typing import Iterator

import numpy as np

from data_gen.pretraining_data import masking
from data_gen.pretraining_data.config import PretrainingDataConfig
from tfrecords import example_encoder


@dataclasses.dataclass
class TokenizedChunk:
  """A chunk of documents as wordpiece ids, flat.

  Sentence s is token_ids[sentence_starts[s]:sentence_starts[s + 1]]; document d is sentences
  document_starts[d] to document_starts[d + 1] - 1. No sentence and no document is empty.

  token_ids:       [tokens] int32.
  sentence_starts: [sentences + 1] int64.
  document_starts: [documents + 1] int64.
  sentences_not_nfc, unk_tokens_not_nfc: for the report only (`documents.tokenize_chunk`):
                   its sentences not in Unicode NFC, and the [UNK] tokens of theirs that their
                   NFC form would not have.
  """
  token_ids: np.ndarray
  sentence_starts: np.ndarray
  document_starts: np.ndarray
  sentences_not_nfc: int = 0
  unk_tokens_not_nfc: int = 0

  @property
  def num_documents(self) -> int:
    return len(self.document_starts) - 1

  @property
  def num_sentences(self) -> int:
    return len(self.sentence_starts) - 1

  def select(self, kept: np.ndarray) -> "TokenizedChunk":
    """The chunk of the documents where `kept` ([documents] bool) is True, in order."""
    documents = np.flatnonzero(kept)
    first, last = self.document_starts[documents], self.document_starts[documents + 1]
    sentences = np.concatenate([np.arange(f, l) for f, l in zip(first, last)])
    tokens = [self.token_ids[self.sentence_starts[f]:self.sentence_starts[l]]
              for f, l in zip(first, last)]
    lengths = np.diff(self.sentence_starts)[sentences]
    return TokenizedChunk(token_ids=np.concatenate(tokens),
                          sentence_starts=np.concatenate([[0], np.cumsum(lengths)]),
                          document_starts=np.concatenate([[0], np.cumsum(last - first)]))


@dataclasses.dataclass
class InstanceBatch:
  """n training instances, as arrays.

  input_ids:           [n, max_seq_length] int32, masked (unless dynamic), zero-padded.
  seq_length:          [n] int32, tokens before the padding.
  b_start:             [n] int32, the position of B's first token (segment 1 from there).
  masked_lm_positions: [n, max_predictions_per_seq] int32, ascending, zero-padded.
  masked_lm_ids:       [n, max_predictions_per_seq] int32, the original tokens there.
  num_masked:          [n] int32, how many positions are real.
  (The three masked_lm fields are None for dynamic masking: the records then hold none.)
  is_random_next:      [n] int32, 1 when B is a random span (the next_sentence_labels).
  """
  input_ids: np.ndarray
  seq_length: np.ndarray
  b_start: np.ndarray
  masked_lm_positions: np.ndarray | None
  masked_lm_ids: np.ndarray | None
  num_masked: np.ndarray | None
  is_random_next: np.ndarray

  def __len__(self) -> int:
    return len(self.input_ids)

  def record_columns(self) -> dict[str, np.ndarray]:
    """The columns of `tfrecords.schema.pretraining_features` (or, unmasked,
    `unmasked_pretraining_features`), [n, length] each, in the layout's order."""
    position = np.arange(self.input_ids.shape[1])
    real = position < self.seq_length[:, None]
    columns = {
        "input_ids": self.input_ids,
        "input_mask": real.astype(np.int32),
        "segment_ids": (real & (position >= self.b_start[:, None])).astype(np.int32),
    }
    if self.num_masked is not None:
      weights = np.arange(self.masked_lm_positions.shape[1]) < self.num_masked[:, None]
      columns.update(masked_lm_positions=self.masked_lm_positions,
                     masked_lm_ids=self.masked_lm_ids,
                     masked_lm_weights=weights.astype(np.float32))
    columns["next_sentence_labels"] = self.is_random_next[:, None]
    return columns


def _truncate(a: list[int], b: list[int], max_num_tokens: int, rng: random.Random) -> None:
  """Trims the spans a = [start, end), b in place to max_num_tokens together.

  The original removes one token at a time from the longer (B on a tie), from its front or
  back with equal chance. Which one is trimmed depends on the lengths alone, so the counts
  follow in closed form, and each count's front share is Binomial(count, 1/2).
  """
  len_a, len_b = a[1] - a[0], b[1] - b[0]
  excess = len_a + len_b - max_num_tokens
  if excess <= 0:
    return
  gap = min(excess, abs(len_a - len_b))
  trim_a, trim_b = (gap, 0) if len_a > len_b else (0, gap)
  trim_b += (excess - gap + 1) // 2   # equal lengths from here: B, A, B, A, ...
  trim_a += (excess - gap) // 2
  for span, count in ((a, trim_a), (b, trim_b)):
    front = rng.getrandbits(count).bit_count() if count else 0
    span[0] += front
    span[1] -= count - front


def _pair_spans(chunk: TokenizedChunk, config: PretrainingDataConfig,
                rng: random.Random) -> list[tuple[int, int, int, int, int]]:
  """One pass over the chunk's documents: (a_start, a_end, b_start, b_end, is_random_next)
  per instance, spans of `chunk.token_ids`."""
  starts = chunk.sentence_starts.tolist()
  documents = chunk.document_starts.tolist()
  num_documents = len(documents) - 1
  max_num_tokens = config.max_seq_length - 3  # [CLS], [SEP], [SEP]
  pairs = []
  for doc in range(num_documents):
    first, end = documents[doc], documents[doc + 1]
    # Mostly fill the sequence; sometimes (short_seq_prob) aim shorter, to resemble the
    # shorter inputs of fine-tuning.
    target = max_num_tokens
    if rng.random() < config.short_seq_prob:
      target = rng.randint(2, max_num_tokens)
    begin = i = first
    while i < end:
      if i == end - 1 or starts[i + 1] - starts[begin] >= target:
        count = i + 1 - begin
        a_end = begin + (rng.randint(1, count - 1) if count >= 2 else 1)
        a = [starts[begin], starts[a_end]]
        if count == 1 or rng.random() < 0.5:
          is_random_next = 1
          other = doc
          for _ in range(10):  # a different document, unless the chunk has only this one
            other = rng.randint(0, num_documents - 1)
            if other != doc:
              break
          s = rng.randint(documents[other], documents[other + 1] - 1)
          b = [starts[s], starts[s + 1]]
          while b[1] - b[0] < target - (a[1] - a[0]) and s + 1 < documents[other + 1]:
            s += 1
            b[1] = starts[s + 1]
          i = a_end - 1  # put the sentences after A back, for the next instance
        else:
          is_random_next = 0
          b = [starts[a_end], starts[i + 1]]
        _truncate(a, b, max_num_tokens, rng)
        pairs.append((a[0], a[1], b[0], b[1], is_random_next))
        begin = i + 1
      i += 1
  return pairs


def _pack(chunk: TokenizedChunk, pairs: np.ndarray, max_seq_length: int,
          vocab: masking.VocabInfo) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """`[CLS] A [SEP] B [SEP]` padded, for each row of pairs [n, 5] (see `_pair_spans`).

  Returns:
    input_ids [n, max_seq_length] int32, seq_length [n], b_start [n] (position of B's first
    token) and candidates [n, max_seq_length] bool (the positions of A and B).
  """
  a_start, a_end, b_start, b_end = pairs[:, :4].T.astype(np.int32)
  rows = np.arange(len(pairs))
  first_sep = 1 + a_end - a_start
  second_sep = first_sep + 1 + b_end - b_start
  position = np.arange(max_seq_length, dtype=np.int32)
  # Indices into the chunk's tokens followed by [CLS], [SEP], [PAD].
  cls, sep, pad = len(chunk.token_ids) + np.arange(3, dtype=np.int32)
  source = np.concatenate([chunk.token_ids, [vocab.cls_id, vocab.sep_id, vocab.pad_id]])
  in_b = position > first_sep[:, None]
  index = position + np.where(in_b, (b_start - first_sep - 1)[:, None], (a_start - 1)[:, None])
  candidates = position < second_sep[:, None]
  index[~candidates] = pad
  index[:, 0] = cls
  index[rows, first_sep] = sep
  index[rows, second_sep] = sep
  candidates[:, 0] = False
  candidates[rows, first_sep] = False
  return source[index].astype(np.int32), second_sep + 1, first_sep + 1, candidates


def pass_instances(chunk: TokenizedChunk, chunk_index: int, dupe_pass: int,
                   config: PretrainingDataConfig, vocab: masking.VocabInfo) -> InstanceBatch:
  """One pass over the chunk's documents: pairs, packed and (unless config.dynamic_masking)
  masked, in document order.

  The random draws come from (random_seed, chunk_index, dupe_pass) alone, so the instances are
  the same whichever process makes them, and in whatever order.
  """
  seed = np.random.SeedSequence([config.random_seed, chunk_index], spawn_key=(dupe_pass,))
  span_seed, mask_seed = seed.spawn(2)
  span_rng = random.Random(int.from_bytes(span_seed.generate_state(4).tobytes(), "little"))
  pairs = np.array(_pair_spans(chunk, config, span_rng), np.int64).reshape(-1, 5)
  input_ids, seq_length, b_start, candidates = _pack(chunk, pairs, config.max_seq_length, vocab)
  batch = InstanceBatch(input_ids=input_ids, seq_length=seq_length.astype(np.int32),
                        b_start=b_start.astype(np.int32), masked_lm_positions=None,
                        masked_lm_ids=None, num_masked=None,
                        is_random_next=pairs[:, 4].astype(np.int32))
  if config.dynamic_masking:
    return batch
  masked = masking.mask_batch(input_ids, candidates, config, vocab,
                              np.random.default_rng(mask_seed))
  return dataclasses.replace(batch, input_ids=masked.input_ids,
                             masked_lm_positions=masked.positions,
                             masked_lm_ids=masked.label_ids, num_masked=masked.num_masked)


@dataclasses.dataclass
class ChunkRecords:
  """A chunk's instances as serialized `tf.train.Example`s, spilled to a local file by the
  worker that made them, and the counts the job reports.

  path:    the file: the records back to back, in the order they were made.
  lengths: [records] int64, each record's size in bytes.
  order:   [records] the order to write them in (the chunk's shuffle).
  """
  path: str
  lengths: np.ndarray
  order: np.ndarray
  instance_tokens: int = 0
  masked_tokens: int = 0
  random_next: int = 0

  def __len__(self) -> int:
    return len(self.lengths)

  def records(self) -> Iterator[bytes]:
    """The records in `order`, read one at a time from the file."""
    offsets = np.cumsum(self.lengths) - self.lengths
    with open(self.path, "rb") as f:
      for i in self.order:
        yield os.pread(f.fileno(), int(self.lengths[i]), int(offsets[i]))


# The spawn key of a chunk's sampling draws (`document_passes`): no dupe pass's (its pass
# number) can be this.
SAMPLING_KEY = 1 << 31


def document_passes(num_documents: int, copies: float, random_seed: int,
                    chunk_index: int) -> np.ndarray:
  """[documents] how many passes each document of a chunk takes part in: `copies` on average
  (dupe_factor x its language's sampling rate), floor(copies), or one more with probability
  frac(copies), drawn from (random_seed, chunk_index) alone."""
  whole, fraction = divmod(copies, 1.0)
  rng = np.random.default_rng(np.random.SeedSequence([random_seed, chunk_index],
                                                     spawn_key=(SAMPLING_KEY,)))
  return int(whole) + (rng.random(num_documents) < fraction)


def chunk_records(chunk: TokenizedChunk, chunk_index: int, config: PretrainingDataConfig,
                  vocab: masking.VocabInfo, path: str, rate: float = 1.0) -> ChunkRecords:
  """The worker processes' unit of work: all dupe_factor passes over a chunk, serialized to
  the file `path` and shuffled together (seeded by (random_seed, chunk_index)), as the original
  shuffles all its instances.

  rate: the chunk's language's sampling rate (`jobs.languages.smoothed_shares`); other than 1,
  each document takes part in dupe_factor x rate passes on average (`document_passes`), pass p
  pairing the documents with more than p among themselves: a rate under 1 sub-samples the
  documents, over 1 repeats them, with masks and pairs of their own in each pass.

  Each pass goes to the file as soon as it is made, and the records come back to the main
  process as a file rather than pickled through a pipe: neither process ever holds a whole
  chunk's records (~25 MB) in memory.
  """
  lengths, stats = [], dict(instance_tokens=0, masked_tokens=0, random_next=0)
  passes = None if rate == 1.0 else document_passes(
      chunk.num_documents, config.dupe_factor * rate, config.random_seed, chunk_index)
  with open(path, "wb") as f:
    for dupe_pass in range(config.dupe_factor if passes is None else passes.max(initial=0)):
      part = chunk if passes is None else chunk.select(passes > dupe_pass)
      batch = pass_instances(part, chunk_index, dupe_pass, config, vocab)
      records = example_encoder.encode(batch.record_columns())
      f.writelines(records)
      lengths += map(len, records)
      stats["instance_tokens"] += int(batch.seq_length.sum())
      stats["masked_tokens"] += 0 if batch.num_masked is None else int(batch.num_masked.sum())
      stats["random_next"] += int(batch.is_random_next.sum())
  shuffle = np.random.default_rng(np.random.SeedSequence([config.random_seed, chunk_index]))
  return ChunkRecords(path=path, lengths=np.array(lengths, np.int64),
                      order=shuffle.permutation(len(lengths)), **stats)
