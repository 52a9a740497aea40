"""The pretraining data job: corpus -> chunks -> worker processes -> record shards.

The main process streams the corpus in chunks (`documents`), tokenizes them
(tensorflow-text, about a million wordpieces a second: a small share of the work) and writes
the shards. Worker processes pair, pack, mask and serialize the chunks
(`instances.chunk_records`, numpy only): they are spawned (TensorFlow is not fork-safe) and
never import TensorFlow, which would cost each of them ~700 MB; they hand a chunk's records back
as a local file. At most two chunks per worker are in flight, so memory stays flat whatever the
corpus size.

Deterministic: a chunk's instances depend on (random_seed, chunk index, dupe pass) alone, and
the main process deals them round-robin to the shards in chunk order, so the same corpus, seed
and shard count give byte-identical shards whatever the number of workers. Every shard is
written under a temporary name and renamed once complete; a re-run after a crash removes what
a killed run left behind and rewrites everything, identically. The workers' record files go
to a hidden scratch directory beside the first shard (`outputs.scratch_dir`), on the output's
disk.

Several languages (`input_files` by language, `--input_file=en:corpus/en/*,de:corpus/de/*`):
multilingual.md's smoothed sampling (`jobs.languages`). A language's share counts its
sentences (non-blank lines, one pass over its files before the job): the corpus format's unit,
which says about as much in any language, where characters do not (a Chinese character is
about a word, an English letter a fifth of one) nor UTF-8 bytes (two a Cyrillic letter, three a
CJK character); tokens would depend on the vocab and cost a tokenizing pass before any
sampling; documents range from a bot's one-line stub to a book. No chunk spans two languages
(a random next sentence stays in its language), and the languages' chunks are interleaved
(`interleave`: each language's spread evenly over the job, so that any stretch of the shards
holds the languages in their sampled shares, where one language after another would give a
run that stops early mostly the first); each chunk's documents take part in dupe_factor x rate passes on average
(`instances.chunk_records`), drawn from (random_seed, chunk index): deterministic as above.
The stats give each language's raw and sampled shares, its rate and its counts.
"""
import collections
import concurrent.futures
import contextlib
import dataclasses
import heapq
import os
import shutil
import sys
import time

import tensorflow as tf

from bert_tf.common import progress
from data_gen.jobs import languages as languages_lib
from data_gen.jobs import outputs
from data_gen.jobs import workers as workers_lib
from data_gen.pretraining_data import documents as documents_lib
from data_gen.pretraining_data import instances as instances_lib
from data_gen.pretraining_data.config import PretrainingDataConfig
from data_gen.pretraining_data.masking import VocabInfo
from tfrecords import writer as writer_lib


@dataclasses.dataclass
class JobStats:
  """The counts a run reports (and writes to its stats file)."""
  documents: int = 0
  sentences: int = 0
  tokens: int = 0
  unk_tokens: int = 0
  # The sentences not in Unicode NFC, and the [UNK] tokens of theirs NFC would spare
  # (`documents.tokenize_chunk`): the [UNK] warning's normalization part.
  sentences_not_nfc: int = 0
  unk_tokens_not_nfc: int = 0
  instances: int = 0
  instance_tokens: int = 0
  masked_tokens: int = 0
  random_next: int = 0
  seconds: float = 0.0

  def add(self, chunk: instances_lib.ChunkRecords) -> None:
    self.instances += len(chunk)
    self.instance_tokens += chunk.instance_tokens
    self.masked_tokens += chunk.masked_tokens
    self.random_next += chunk.random_next


def _chunk_result(future: concurrent.futures.Future, scratch: str) -> instances_lib.ChunkRecords:
  """A worker's chunk. A failed write of its records (a full disk, say) is an OSError without
  a file name, which would leave the user guessing which disk: it gets the scratch's."""
  try:
    return future.result()
  except OSError as e:
    if e.filename is not None:
      raise
    raise OSError(f"{scratch}: {e.strerror or e} (writing the workers' scratch files, beside "
                  "the first output file)") from e


class _Progress:
  """A line to stderr at least every `interval` seconds: documents and instances so far, the
  corpus's MB read, the rate and the time left (the total is the files' sizes: unknown where
  one is gzipped, whose size is not its text's)."""

  def __init__(self, interval: float, input_files: list[str]):
    self.start = time.monotonic()
    total = (None if any(p.endswith(".gz") for p in input_files) else
             sum(tf.io.gfile.stat(p).length for p in input_files) / 1e6)
    self.meter = progress.Meter(total, interval=interval)

  def update(self, stats: JobStats, read_stats: documents_lib.ReadStats,
             force: bool = False) -> None:
    if force or self.meter.due():
      print(f"create_pretraining_data: {stats.documents:,} documents, {stats.instances:,} "
            f"instances, {self.meter.line(read_stats.text_bytes / 1e6, 'MB')}",
            file=sys.stderr, flush=True)


def files_by_language(input_files: list[str] | dict[str, list[str]]) -> dict:
  """`input_files` as language -> files: a list's language is None."""
  return input_files if isinstance(input_files, dict) else {None: input_files}


def language_sampling(sentences: dict[str, int], smoothing: float) -> dict:
  """Per language, from its corpus's sentences (`documents.count_sentences`): those, its raw
  and sampled shares and rate (`jobs.languages.smoothed_shares`)."""
  shares = languages_lib.smoothed_shares(sentences, smoothing)
  return {language: {**shares[language], "corpus_sentences": sentences[language]}
          for language in sentences}


def create_pretraining_data(input_files: list[str] | dict[str, list[str]],
                            output_files: list[str],
                            tokenizer,
                            config: PretrainingDataConfig,
                            num_workers: int,
                            chunk_chars: int = documents_lib.CHUNK_CHARS,
                            progress_seconds: float = progress.INTERVAL,
                            workers: concurrent.futures.Executor | None = None) -> dict:
  """Writes the pretraining records of `input_files` round-robin to `output_files`.

  Args:
    input_files: text files (see `documents`), in order; or by language (language -> files),
      sampled as config.language_smoothing says (see the module doc).
    output_files: the shards, all written (see `outputs.shard_paths`).
    tokenizer: a `bert_tf.tokenization.FullTokenizer`.
    config: the job's settings.
    num_workers: worker processes.
    chunk_chars: the chunk size; part of what the output depends on (like the seed).
    progress_seconds: how often a progress line goes to stderr.
    workers: the `num_workers` workers, already started (`jobs.workers.start_workers`:
      create_pretraining_data starts them before it loads TensorFlow); default: started here.
      Shut down as the job ends.

  Returns:
    The stats, also written as JSON to `outputs.stats_path(output_files[0])`.

  Raises:
    ValueError: the corpus holds no document, or an output file is not local.
  """
  by_language = files_by_language(input_files)
  input_files = [path for files in by_language.values() for path in files]
  sizes = None if None in by_language else {
      language: documents_lib.count_sentences(files, chunk_chars)
      for language, files in by_language.items()}
  sampling = None if sizes is None else language_sampling(
      {language: sentences for language, (sentences, _) in sizes.items()},
      config.language_smoothing)
  # The scratch, the stats and the check for other shards are local file operations, which
  # would take gs://bucket/x for a local folder "gs:".
  remote = [p for p in output_files if "://" in p]
  if remote:
    raise ValueError(f"{remote[0]}: create_pretraining_data writes local files only; write "
                     "them locally, then copy them (gsutil -m cp, say)")
  outputs.check_no_other_shards(output_files)
  vocab = VocabInfo.from_tokenizer(tokenizer)
  read_stats, stats = documents_lib.ReadStats(), JobStats()
  language_stats = {language: JobStats() for language in by_language}
  status = _Progress(progress_seconds, input_files)
  outputs.remove_leftovers(output_files)

  with contextlib.ExitStack() as stack:
    # The workers' record files (see `instances.ChunkRecords`); removed, whatever is left in
    # it, however the job ends, after the workers have stopped. (Left by a kill -9, it goes
    # with the next run's remove_leftovers; a failure to remove it must not hide the error
    # that ends the job.)
    spill_dir = outputs.scratch_dir(output_files[0], str(os.getpid()))
    os.makedirs(spill_dir)
    stack.callback(shutil.rmtree, spill_dir, ignore_errors=True)
    pool = workers or workers_lib.start_workers(num_workers)
    # Closed last, and on an error without running the chunks still queued.
    stack.callback(pool.shutdown, wait=True, cancel_futures=True)
    shards = [stack.enter_context(writer_lib.AtomicRecordWriter(p)) for p in output_files]

    def write(language: str | None, chunk: instances_lib.ChunkRecords) -> None:
      """Deals the chunk's records round-robin, continuing where the last chunk stopped."""
      for i, record in enumerate(chunk.records(), start=stats.instances):
        shards[i % len(shards)].write(record)
      os.remove(chunk.path)
      stats.add(chunk)
      language_stats[language].add(chunk)
      status.update(stats, read_stats)

    in_flight = collections.deque()
    for index, (language, docs) in enumerate(_chunks(by_language, sizes, read_stats,
                                                     chunk_chars)):
      chunk = documents_lib.tokenize_chunk(tokenizer, docs)
      for counts in (stats, language_stats[language]):
        counts.documents += chunk.num_documents
        counts.sentences += chunk.num_sentences
        counts.tokens += len(chunk.token_ids)
        counts.unk_tokens += int((chunk.token_ids == tokenizer.unk_id).sum())
        counts.sentences_not_nfc += chunk.sentences_not_nfc
        counts.unk_tokens_not_nfc += chunk.unk_tokens_not_nfc
      if chunk.num_documents:
        rate = 1.0 if sampling is None else sampling[language]["rate"]
        in_flight.append((language, pool.submit(
            instances_lib.chunk_records, chunk, index, config, vocab,
            os.path.join(spill_dir, f"chunk-{index}"), rate)))
      if len(in_flight) >= 2 * num_workers:
        language, future = in_flight.popleft()
        write(language, _chunk_result(future, spill_dir))
    while in_flight:
      language, future = in_flight.popleft()
      write(language, _chunk_result(future, spill_dir))
    if not stats.documents:
      raise ValueError(f"no text in {', '.join(input_files)}: the corpus is empty")
  stats.seconds = time.monotonic() - status.start
  status.update(stats, read_stats, force=True)
  result = {
      **dataclasses.asdict(stats),
      "instances_per_second": stats.instances / max(stats.seconds, 1e-9),
      "unk_rate": stats.unk_tokens / max(stats.tokens, 1),
      **dataclasses.asdict(read_stats),
      "num_workers": num_workers,
      "chunk_chars": chunk_chars,
      "config": config.to_dict(),
      "input_files": list(input_files),
      "output_files": {s.path: s.count for s in shards},
  }
  if sampling is not None:
    result["languages"] = language_summary(sampling, language_stats)
  outputs.write_json(outputs.stats_path(output_files[0]), result)
  return result


def _chunks(by_language: dict, sizes: dict | None, read_stats: documents_lib.ReadStats,
            chunk_chars: int):
  """(language, documents) of each chunk of the corpus, in the job's order: no chunk spanning
  two languages, the languages interleaved (their chunk counts: `sizes`)."""
  streams = {language: documents_lib.chunk_documents(
      documents_lib.read_documents(files, read_stats, chunk_chars), chunk_chars)
             for language, files in by_language.items()}
  if sizes is None:
    return ((None, docs) for docs in streams[None])
  return interleave(streams, {language: chunks for language, (_, chunks) in sizes.items()})


def interleave(streams: dict, counts: dict[str, int]):
  """(language, item) of each language's stream of `counts[language]` items, merged so that
  each language's are spread evenly over the whole: item i of n at (i + 0.5) / n, a tie in the
  languages' order. Deterministic, from the counts alone (the local job's and Beam's plan)."""
  def placed(order, language, stream):
    for i, item in enumerate(stream):
      yield (i + 0.5) / counts[language], order, language, item
  merged = heapq.merge(*(placed(order, language, stream)
                         for order, (language, stream) in enumerate(streams.items())),
                       key=lambda placed_item: placed_item[:2])
  return ((language, item) for _, _, language, item in merged)


def language_summary(sampling: dict, language_stats: dict[str, JobStats]) -> dict:
  """The stats' "languages": per language, `language_sampling`'s shares and rate, its counts,
  and instance_share, the share of the instances it got."""
  instances = sum(s.instances for s in language_stats.values())
  return {language: {**sampling[language],
                     **{k: v for k, v in dataclasses.asdict(counts).items() if k != "seconds"},
                     "unk_rate": counts.unk_tokens / max(counts.tokens, 1),
                     "instance_share": counts.instances / max(instances, 1)}
          for language, counts in language_stats.items()}


# More [UNK] than this share of the tokens is warned about: English prose with a matching
# vocab has well under 0.1%; the wrong --do_lower_case for the vocab makes ~6%.
HIGH_UNK_RATE = 0.01


def _masked_summary(stats: dict) -> str:
  if stats["config"].get("dynamic_masking"):
    return "unmasked (run_pretraining --dynamic_masking masks them)"
  share = stats["masked_tokens"] / max(stats["instance_tokens"] - 3 * stats["instances"], 1)
  return f"masked tokens {stats['masked_tokens']:,} ({share:.1%} of the tokens of A and B)"


def summary(stats: dict) -> str:
  """The end-of-run report, a few lines."""
  workers = f"{stats['num_workers']} workers" if stats["num_workers"] else "the runner's workers"
  if stats.get("runner"):  # a Beam run
    workers += f" on {stats['runner']}"
  lines = [
      f"documents {stats['documents']:,}  sentences {stats['sentences']:,}  "
      f"tokens {stats['tokens']:,} ([UNK] {stats['unk_rate']:.2%})  "
      f"({stats['files']} files, {stats['lines']:,} lines)",
      f"instances {stats['instances']:,}  {_masked_summary(stats)}  "
      f"random next {stats['random_next'] / max(stats['instances'], 1):.1%}",
      f"{stats['seconds']:.1f} s, {stats['instances_per_second']:,.0f} instances/s, "
      f"{workers}, "
      f"{len(stats['output_files'])} shards",
  ]
  if stats.get("languages"):
    lines.append("languages (share of sentences -> sampled): " + ", ".join(
        f"{language} {s['raw_share']:.1%} -> {s['sampled_share']:.1%}"
        for language, s in stats["languages"].items()))
  if stats["unk_rate"] > HIGH_UNK_RATE:
    causes = []
    if stats["unk_tokens_not_nfc"]:
      causes.append(
          f"{stats['sentences_not_nfc'] / max(stats['sentences'], 1):.1%} of the text is not "
          f"in Unicode NFC (decomposed accents?), and in NFC {stats['unk_tokens_not_nfc']:,} "
          "of these would not be [UNK]: normalize it (e.g. uconv -x any-nfc, or Python's "
          "unicodedata.normalize('NFC', line)) before this job")
    if stats["unk_tokens"] - stats["unk_tokens_not_nfc"] > HIGH_UNK_RATE * stats["tokens"]:
      causes.append("is the vocab the corpus's language and script, and --do_lower_case the "
                    "vocab's?")
    lines.append(f"WARNING: {stats['unk_tokens']:,} tokens ({stats['unk_rate']:.1%}, over "
                 f"{HIGH_UNK_RATE:.0%}) are [UNK]: {'; '.join(causes)}")
  if stats["invalid_utf8_lines"]:
    lines.append(f"WARNING: {stats['invalid_utf8_lines']:,} lines were not valid UTF-8 (decoded "
                 f"with U+FFFD replacements), first at {', '.join(stats['invalid_utf8_examples'])}")
  return "\n".join(lines)
