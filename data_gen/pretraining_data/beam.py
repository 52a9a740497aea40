"""create_pretraining_data as an Apache Beam pipeline: the local path's shards, byte for byte.

`create_pretraining_data --runner=NAME [Beam pipeline options]` runs this instead of the local
worker processes (`pipeline`). The steps (each a parallel map unless said otherwise):

  Scan      per input file: its documents' byte extents and characters
            (`documents.document_extents`) and read stats; a .gz file's text is copied to the
            scratch directory, where its extents can be read back (a .gz stream cannot seek).
  Plan      one element, every file's scan (`beam_options.Gather`): the local path's chunks
            (`documents.chunk_documents` over the extents), each a list of byte ranges of the
            corpus, keyed by its index; the first also carries the corpus's read stats.
  Records   per chunk: reads its ranges back, tokenizes them, makes its instances
            (`instances.chunk_records`: seeded by the chunk's index, shuffled within the chunk,
            as locally) and writes them to a scratch file as TFRecord frames, grouped by
            residue: group q holds the chunk's records j = q, q + N, q + 2N, ... (N shards).
  Shards    per shard, given every chunk's entry (`beam_options.Gather`): record j of chunk c
            is record offset(c) + j of the job, and the local path deals record i to shard
            i mod N; so shard s is, in chunk order, group (s - offset(c)) mod N of each chunk:
            one contiguous byte range per chunk, copied (the frames are the bytes
            tf.io.TFRecordWriter writes). Written under temporary names, which the driver
            renames once every shard is complete.
  Languages (input files by language, `pipeline`'s smoothed sampling): Scan also counts each
            file's sentences (`documents.count_sentences`, a second read of the file), Plan
            chunks each language's files apart and interleaves the languages' chunks, as
            locally (`pipeline.interleave`), and gives each chunk its language's rate.
  Stats     beside Shards, from every chunk's entry: the totals, to the scratch directory; the
            driver adds the timing and writes the stats file beside the output, as the local
            path does. The counts (and the workers' peak memory) come through the pipeline's
            elements, not the runner's metrics, which not every runner reports (DaskRunner
            does not).

Deterministic: every random draw depends on (random_seed, chunk index, dupe pass), every order
on the chunk and shard indices, none on which worker ran what or when; a retried element
rewrites the same bytes. Only file names, counts and small arrays cross between steps (the text
and the records go through files), so memory per worker is bounded whatever the corpus size:
Records holds one chunk (~1 MB of text, one dupe pass of its instances; its records go to the
worker's own disk until grouped, within the element), Shards a 4 MB copy buffer and one small
entry per chunk, Plan 24 bytes per document of the corpus (its extents: ~150 MB for 6 million
documents).

Runners: any Beam runner (`beam_options`: DirectRunner runs as the FnApiRunner, offline;
DaskRunner). The workers share no disk: the scratch directory (beside the first output) and the
shards go through Beam's file systems (`beam_files`: local, gs://, ...); `documents` reads the
text (the inputs, a .gz file's copy) through tf.io.gfile (local, gs://). Workers import
TensorFlow: they tokenize (tensorflow-text).
"""
import contextlib
import dataclasses
import itertools
import logging
import operator
import os
import resource
import shutil
import struct
import tempfile
import time
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options import pipeline_options as options_lib
import google_crc32c
import numpy as np

from bert_tf.tokenization import FullTokenizer
from data_gen.jobs import beam_files
from data_gen.jobs import beam_options
from data_gen.jobs import outputs
from data_gen.pretraining_data import documents as documents_lib
from data_gen.pretraining_data import instances as instances_lib
from data_gen.pretraining_data import pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig
from data_gen.pretraining_data.masking import VocabInfo

# Beam's metrics namespace: counters documents, instances, masked_tokens, ... (JobStats's
# names), files and lines, for a runner's view of a job in progress (Dataflow's console, say);
# the stats come from the pipeline's own elements.
NAMESPACE = "create_pretraining_data"
# A copy of a shard's range of a chunk file goes through a buffer this big.
COPY_BYTES = 4 << 20
_HEADER = struct.Struct("<q")


@dataclasses.dataclass
class FileScan:
  """One input file's documents.

  text_path: where their bytes are: the file, or a .gz file's decompressed copy.
  extents:   [documents, 3] int64: start, end (bytes of the text), characters.
  """
  index: int
  text_path: str
  extents: np.ndarray
  read_stats: documents_lib.ReadStats
  language: str | None = None
  sentences: int = 0


@dataclasses.dataclass
class ChunkPlan:
  """A chunk: its index (the seed) and its documents as (text_path, start, end, documents)
  ranges, one per file it spans; its language and that language's sampling rate; the first
  chunk's `read_stats`, the whole corpus's, and `sampling`, `pipeline.language_sampling`'s."""
  index: int
  ranges: list[tuple[str, int, int, int]]
  read_stats: documents_lib.ReadStats | None = None
  language: str | None = None
  rate: float = 1.0
  sampling: dict | None = None


@dataclasses.dataclass
class ChunkFile:
  """A chunk's records in the scratch directory (path None: the chunk made none), the peak
  memory of the worker process that made them, so far, and its plan's `read_stats`."""
  index: int
  path: str | None
  stats: pipeline.JobStats
  peak_rss_bytes: int
  read_stats: documents_lib.ReadStats | None
  language: str | None = None
  sampling: dict | None = None


# ------------------------------------------------------------------ the steps

def _scan(item: tuple[int, str, str | None], scratch: str, chunk_chars: int) -> FileScan:
  """Scan: the extents of one file's documents (and its sentences, where it has a language)."""
  index, path, language = item
  stats = documents_lib.ReadStats()
  with contextlib.ExitStack() as stack:
    text_path, copy = path, None
    if path.endswith(".gz"):
      text_path = FileSystems.join(scratch, f"text-{index:06d}")
      copy = stack.enter_context(beam_files.open_write(text_path))
    extents = documents_lib.document_extents(path, stats, chunk_chars, copy)
    flat = np.fromiter(itertools.chain.from_iterable(extents), np.int64).reshape(-1, 3)
  Metrics.counter(NAMESPACE, "files").inc()
  Metrics.counter(NAMESPACE, "lines").inc(stats.lines)
  sentences = 0 if language is None else documents_lib.count_sentences([path], chunk_chars)[0]
  return FileScan(index=index, text_path=text_path, extents=flat, read_stats=stats,
                  language=language, sentences=sentences)


def _plan(scans: list[FileScan], chunk_chars: int, smoothing: float):
  """Plan: the local path's chunks of the whole corpus, as byte ranges."""
  scans = sorted(scans, key=lambda s: s.index)
  by_language = {}  # in the order of the files, which the languages' order gave
  for scan in scans:
    by_language.setdefault(scan.language, []).append(scan)
  sampling = None if None in by_language else pipeline.language_sampling(
      {language: sum(s.sentences for s in group) for language, group in by_language.items()},
      smoothing)
  read = documents_lib.ReadStats()
  for scan in scans:
    read.files += scan.read_stats.files
    read.lines += scan.read_stats.lines
    read.text_bytes += scan.read_stats.text_bytes
    read.invalid_utf8_lines += scan.read_stats.invalid_utf8_lines
    read.invalid_utf8_examples += scan.read_stats.invalid_utf8_examples
  del read.invalid_utf8_examples[documents_lib.MAX_REPORTED_LINES:]

  def chunks(group):  # (twice a language: its count for the interleave, then its chunks)
    return documents_lib.chunk_documents(
        ((scan.text_path, *row) for scan in group for row in scan.extents.tolist()),
        chunk_chars, size=lambda e: e[3])
  merged = pipeline.interleave(
      {language: chunks(group) for language, group in by_language.items()},
      {language: sum(1 for _ in chunks(group)) for language, group in by_language.items()})
  for index, (language, chunk) in enumerate(merged):
    ranges = []
    for text_path, part in itertools.groupby(chunk, key=lambda e: e[0]):
      part = list(part)
      ranges.append((text_path, part[0][1], part[-1][2], len(part)))
    yield ChunkPlan(index=index, ranges=ranges, read_stats=read if index == 0 else None,
                    language=language,
                    rate=1.0 if sampling is None else sampling[language]["rate"],
                    sampling=sampling if index == 0 else None)


def _masked_crc(data: bytes) -> int:
  """TFRecord's masked CRC32C."""
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _frame(record: bytes) -> bytes:
  """`record` framed as in a TFRecord file: length, its CRC, the data, its CRC."""
  length = struct.pack("<Q", len(record))
  return b"".join([length, struct.pack("<I", _masked_crc(length)), record,
                   struct.pack("<I", _masked_crc(record))])


def _write_groups(records: instances_lib.ChunkRecords, num_shards: int, path: str) -> None:
  """Writes a chunk's records to `path`, framed, group q (records j = q mod num_shards, in
  the chunk's order) after group q - 1, behind a header of the num_shards + 1 group offsets."""
  order, lengths = records.order, records.lengths
  group_bytes = [int(lengths[order[q::num_shards]].sum()) + 16 * len(order[q::num_shards])
                 for q in range(num_shards)]
  offsets = _HEADER.size * (num_shards + 1) + np.cumsum([0] + group_bytes)
  starts = np.cumsum(lengths) - lengths
  def blocks():
    yield offsets.astype("<i8").tobytes()
    with open(records.path, "rb") as source:
      buffer = bytearray()
      for q in range(num_shards):
        for i in order[q::num_shards]:
          buffer += _frame(os.pread(source.fileno(), int(lengths[i]), int(starts[i])))
          if len(buffer) >= COPY_BYTES:
            yield bytes(buffer)
            buffer.clear()
      yield bytes(buffer)
  beam_files.write_whole(path, blocks())


class _Records(beam.DoFn):
  """Records: a chunk's instances (the local path's worker), written in shard groups."""

  def __init__(self, vocab_file: str, do_lower_case: bool, config: PretrainingDataConfig,
               chunk_chars: int, num_shards: int, scratch: str):
    super().__init__()
    self.vocab_file, self.do_lower_case = vocab_file, do_lower_case
    self.config, self.chunk_chars = config, chunk_chars
    self.num_shards, self.scratch = num_shards, scratch
    self.counters = {name: Metrics.counter(NAMESPACE, name)
                     for name in ("documents", "sentences", "tokens", "instances",
                                  "masked_tokens")}

  def setup(self):
    self.tokenizer = FullTokenizer(self.vocab_file, do_lower_case=self.do_lower_case)
    self.vocab = VocabInfo.from_tokenizer(self.tokenizer)
    # The chunk's records before they are grouped: the worker's own disk, read back by the
    # same element (`_write_groups`), never by another step.
    self.local = tempfile.mkdtemp(prefix="create_pretraining_data-")

  def teardown(self):
    shutil.rmtree(self.local, ignore_errors=True)

  def process(self, plan: ChunkPlan):
    docs = [doc for text_path, start, end, _ in plan.ranges
            for doc in documents_lib.extent_documents(text_path, start, end, self.chunk_chars)]
    if len(docs) != sum(r[3] for r in plan.ranges):
      raise ValueError(f"{plan.ranges[0][0]}: changed while the job read it")
    chunk = documents_lib.tokenize_chunk(self.tokenizer, docs)
    stats = pipeline.JobStats(documents=chunk.num_documents, sentences=chunk.num_sentences,
                              tokens=len(chunk.token_ids),
                              unk_tokens=int((chunk.token_ids == self.tokenizer.unk_id).sum()),
                              sentences_not_nfc=chunk.sentences_not_nfc,
                              unk_tokens_not_nfc=chunk.unk_tokens_not_nfc)
    path = None
    if chunk.num_documents:
      records = instances_lib.chunk_records(chunk, plan.index, self.config, self.vocab,
                                            os.path.join(self.local, f"chunk-{plan.index}"),
                                            plan.rate)
      stats.add(records)
      path = FileSystems.join(self.scratch, f"chunk-{plan.index:08d}")
      _write_groups(records, self.num_shards, path)
      os.remove(records.path)
    for name, counter in self.counters.items():
      counter.inc(getattr(stats, name))
    logging.info("create_pretraining_data: chunk %d: %d documents, %d instances", plan.index,
                 stats.documents, stats.instances)
    # ru_maxrss: KiB on Linux.
    yield ChunkFile(index=plan.index, path=path, stats=stats,
                    peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                    read_stats=plan.read_stats, language=plan.language,
                    sampling=plan.sampling)


def _check_text(chunks: list[ChunkFile], input_files: list[str]) -> None:
  if not any(c.stats.documents for c in chunks):
    raise ValueError(f"no text in {', '.join(input_files)}: the corpus is empty")


def _shard_groups(shard: int, chunks: list[ChunkFile], num_shards: int):
  """(chunk, group, records) of shard `shard` in each chunk that has records of it, in chunk
  order (see the module doc)."""
  first = 0
  for chunk in sorted(chunks, key=lambda c: c.index):
    n = chunk.stats.instances
    group = (shard - first) % num_shards
    first += n
    if group < n:
      yield chunk, group, len(range(group, n, num_shards))


def _write_shard(job: tuple[int, list[ChunkFile]], output_files: list[str],
                 input_files: list[str], suffix: str) -> str:
  """Shards: shard s of `output_files`, of job (s, chunks), from every chunk's group of it, to
  its name + `suffix` (the driver renames the shards once all are written)."""
  shard, chunks = job
  _check_text(chunks, input_files)
  path = output_files[shard]
  with beam_files.open_write(path + suffix) as out:
    for chunk, group, _ in _shard_groups(shard, chunks, len(output_files)):
      with beam_files.open_read(chunk.path) as f:
        f.seek(_HEADER.size * group)
        start, end = np.frombuffer(f.read(2 * _HEADER.size), "<i8").tolist()
        f.seek(start)
        while start < end:
          block = f.read(min(COPY_BYTES, end - start))
          out.write(block)
          start += len(block)
  return path


def _write_stats(chunks: list[ChunkFile], input_files: list[str], output_files: list[str],
                 path: str) -> None:
  """Stats: the job's totals to `path` (a JSON object, the local path's keys but timing, and
  the workers' peak memory)."""
  _check_text(chunks, input_files)
  totals = pipeline.JobStats()
  for chunk in chunks:
    _add(totals, chunk.stats)
  first = next(c for c in chunks if c.read_stats is not None)
  stats = {
      **dataclasses.asdict(totals), **dataclasses.asdict(first.read_stats),
      "output_files": {p: sum(n for *_, n in _shard_groups(s, chunks, len(output_files)))
                       for s, p in enumerate(output_files)},
      "worker_peak_rss_bytes": max(c.peak_rss_bytes for c in chunks)}
  if first.sampling is not None:
    by_language = {language: pipeline.JobStats() for language in first.sampling}
    for chunk in chunks:
      _add(by_language[chunk.language], chunk.stats)
    stats["languages"] = pipeline.language_summary(first.sampling, by_language)
  beam_files.write_json(path, stats)


def _add(totals: pipeline.JobStats, counts: pipeline.JobStats) -> None:
  for field in dataclasses.fields(totals):
    setattr(totals, field.name, getattr(totals, field.name) + getattr(counts, field.name))


# ------------------------------------------------------------------ the job

def _build(p: beam.Pipeline, by_language: dict[str, list[str]], input_files: list[str],
           output_files: list[str], tokenizer,
           config: PretrainingDataConfig, chunk_chars: int, scratch: str, suffix: str) -> None:
  files = [(path, language) for language, paths in by_language.items() for path in paths]
  scans = (p | "Files" >> beam.Create([(i, *file) for i, file in enumerate(files)])
           | "Scan" >> beam.Map(_scan, scratch, chunk_chars))
  chunks = (scans
            | "Scans" >> beam_options.Gather()
            | "Plan" >> beam.FlatMap(_plan, chunk_chars, config.language_smoothing)
            | "Spread" >> beam_options.Spread(beam_options.spread_partitions(p.options),
                                              key=operator.attrgetter("index"))
            | "Records" >> beam.ParDo(_Records(tokenizer.vocab_file, tokenizer.do_lower_case,
                                               config, chunk_chars, len(output_files),
                                               scratch))
            | "Chunks" >> beam_options.Gather())
  shards = (chunks
            | "Shard numbers" >> beam.FlatMap(lambda chunks: ((s, chunks) for s in
                                                             range(len(output_files))))
            | "Spread shards" >> beam.Reshuffle()  # (on Dask a no-op: copies, in one task)
            | "Shards" >> beam.Map(_write_shard, output_files, input_files, suffix))
  stats = chunks | "Stats" >> beam.Map(_write_stats, input_files, output_files,
                                       FileSystems.join(scratch, "stats.json"))
  # Last, on both: DaskRunner runs the last step applied and what it reads, no more.
  _ = (shards, stats) | "Done" >> beam.Flatten()


def create_pretraining_data(input_files: list[str] | dict[str, list[str]],
                            output_files: list[str],
                            tokenizer: FullTokenizer,
                            config: PretrainingDataConfig,
                            options: options_lib.PipelineOptions,
                            chunk_chars: int = documents_lib.CHUNK_CHARS) -> dict:
  """`pipeline.create_pretraining_data`'s shards, stats file and result, from a Beam pipeline.

  Args:
    input_files, output_files, config, chunk_chars: as `pipeline.create_pretraining_data`;
      the outputs may be in a bucket (gs://...), which the runner's workers can reach.
    tokenizer: a `FullTokenizer`; the workers load their own from its vocab_file, which they
      must be able to read.
    options: the Beam pipeline options, from `beam_options.pipeline_options`.

  Returns:
    The stats, also written as JSON to `outputs.stats_path(output_files[0])`, with the runner
    and the workers' peak memory.

  Raises:
    ValueError: the corpus empty or not text, naming it.
  """
  by_language = pipeline.files_by_language(input_files)
  input_files = [path for paths in by_language.values() for path in paths]
  files = beam_files.files_for(output_files[0])
  outputs.check_no_other_shards(output_files, files)
  outputs.remove_leftovers(output_files, files)
  # The scratch directory and the shards' temporary names: leftovers of a killed job go with
  # the next job's remove_leftovers, as the local path's.
  job = f"beam-{uuid.uuid4().hex[:12]}"
  scratch, suffix = outputs.scratch_dir(output_files[0], job), f".tmp-{job}"
  start = time.monotonic()
  try:
    p = beam.Pipeline(options=options)  # (the runner checks its options here)
    _build(p, by_language, input_files, output_files, tokenizer, config, chunk_chars, scratch, suffix)
    beam_options.run(p)
    stats = beam_files.read_json(FileSystems.join(scratch, "stats.json"))
    # All or none, as the local path: no shard under its name before every one is complete.
    FileSystems.rename([path + suffix for path in output_files], output_files)
  finally:
    outputs.remove_leftovers(output_files, files)  # this job's scratch, or a failed one's shards
  seconds = time.monotonic() - start
  stats = {**stats, "seconds": seconds,
           "instances_per_second": stats["instances"] / max(seconds, 1e-9),
           "unk_rate": stats["unk_tokens"] / max(stats["tokens"], 1),
           "num_workers": beam_options.num_workers(options),
           "runner": beam_options.runner(options), "chunk_chars": chunk_chars,
           "config": config.to_dict(), "input_files": input_files}
  beam_files.write_json(outputs.stats_path(output_files[0]), stats)
  return stats
