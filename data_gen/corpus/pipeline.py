"""prepare_corpus on this machine's cores: sources -> units -> worker processes -> text shards.

The main process reads the inputs into units (`sources`: raw pages, documents, or the
byte ranges of a multistream dump the workers read themselves), the spawned workers clean and
split them (`units`, no TensorFlow), and the main process writes each unit's documents,
in input order, to the shard and split each one's identity hash chose. At most two units per
worker are in flight, so memory stays flat whatever the dump's size (with --dedup, plus a
16-byte hash per document kept).

Deterministic: a document's shard and split depend on its identity alone and the order within
a shard is the input order, so the shards are byte-identical whatever --num_workers (and on
Beam: `beam`). With --dedup, a document whose exact text came earlier in input order is
dropped. Every shard is written under a temporary name and renamed when the job is complete;
a failed job leaves none.
"""
import collections
import contextlib
import dataclasses
import logging
import os
import sys
import time

from bert_tf.common import files as files_lib
from bert_tf.common import progress
from bert_tf.common.errors import DataError
from data_gen.corpus import namespaces
from data_gen.corpus import sentences
from data_gen.corpus import sources
from data_gen.corpus import units
from data_gen.corpus.config import LANGUAGE_CODE, CorpusConfig
from data_gen.jobs import outputs as outputs_lib
from data_gen.jobs import workers as workers_lib


def holdout_prefix(output_file: str) -> str:
  """The held-out split's name: out/wiki.txt -> out/wiki.holdout.txt (outside an
  'out/wiki.txt-*' glob of the training shards)."""
  root, ext = os.path.splitext(output_file)
  return f"{root}.holdout{ext}"


def output_paths(output_file: str, config: CorpusConfig) -> tuple[list[str], list[str]]:
  """The training shards and the held-out ones (none without --holdout_fraction)."""
  train = outputs_lib.shard_paths([output_file], config.num_output_shards)
  if not config.holdout_fraction:
    return train, []
  return train, outputs_lib.shard_paths([holdout_prefix(output_file)],
                                        config.num_holdout_shards)


def source_kinds(input_files: list[str], source: str,
                 files=sources.LocalFiles) -> dict[str, str]:
  """Each input's source kind: `source`, or detected (source "auto"; read through `files`)."""
  return {path: sources.detect(path, files) if source == "auto" else source
          for path in input_files}


@dataclasses.dataclass
class Wikis:
  """What the dumps among the inputs say of their wikis: the run's `config` with its language
  decided, each dump's `hidden_names` (`namespaces.hidden_names`), `warnings` to report."""
  config: CorpusConfig
  hidden_names: dict[str, frozenset[str]]
  warnings: list[str]


def wikis(input_files: list[str], kinds: dict[str, str], config: CorpusConfig,
          files=sources.LocalFiles) -> Wikis:
  """The run's language: --language, else the first dump's <siteinfo>'s (xml:lang, else its
  dbname's wiki code), else "en"; and the names each dump's links to files, media and
  categories go by: its <siteinfo>'s, English, the namespace table's for the run's language and
  the dump's own. Warns (logged too) where --language disagrees with a dump's <siteinfo> (the
  flag wins), where dumps of several languages come without it, and where the table has no row
  for the language (the <siteinfo>'s and English names still apply)."""
  siteinfos = {path: sources.read_siteinfo(path, files)
               for path in input_files if kinds[path] == "wikipedia"}
  own = {path: list(dict.fromkeys(code for code in (info.language,
                                                    namespaces.wiki_code(info.dbname)) if code))
         for path, info in siteinfos.items()}
  language = config.language or next(
      (code for codes in own.values() for code in codes if LANGUAGE_CODE.fullmatch(code)), "en")
  warnings = []
  spoken = sorted({codes[0] for codes in own.values() if codes})
  if not config.language and len(spoken) > 1:
    warnings.append(f"the dumps' <siteinfo>s name {len(spoken)} languages ({', '.join(spoken)}): "
                    f"the text taken as {language}; give --language, or one run a language")
  for path, codes in own.items():
    if config.language and codes and config.language not in codes:
      warnings.append(f"--language={language} over {path}'s <siteinfo> ({'/'.join(codes)}): "
                      f"the text taken as {language}, files and categories hidden under both "
                      "wikis' names")
  if siteinfos and not namespaces.in_table(language, *(c for codes in own.values()
                                                       for c in codes if language in codes)):
    warnings.append(f"language {language}: no row in {namespaces.TABLE}: files and "
                    "categories are hidden under the dumps' <siteinfo> names and English ones")
  for warning in warnings:
    logging.warning("prepare_corpus: %s", warning)
  return Wikis(dataclasses.replace(config, language=language),
               {path: namespaces.hidden_names((language, *codes),
                                              siteinfos[path].hidden_namespace_names)
                for path, codes in own.items()},
               warnings)


class Totals:
  """The job's counts, added up unit by unit in input order; decides --dedup's drops."""

  def __init__(self, dedup: bool, warnings: list[str] = ()):
    self.counts = collections.Counter()
    self.seen = set() if dedup else None
    self.source_bytes = 0
    self.documents = [0, 0]  # TRAIN, HOLDOUT
    self.sentences = self.words = self.bytes_out = 0
    self.warnings = list(warnings)  # the run's (`wikis`), then the units'

  def add_unit(self, counts: collections.Counter, source_bytes: int,
               warnings: list[str]) -> None:
    self.counts.update(counts)
    self.source_bytes += source_bytes
    self.warnings += warnings
    for warning in warnings:
      logging.warning("prepare_corpus: %s", warning)

  def keep(self, digest: bytes) -> bool:
    """Whether a document with this text hash is written (False: a duplicate, counted)."""
    if self.seen is None:
      return True
    if digest in self.seen:
      self.counts["skipped_duplicate"] += 1
      return False
    self.seen.add(digest)
    return True

  def add_document(self, split: int, size: int, sentences: int, words: int) -> None:
    self.documents[split] += 1
    self.bytes_out += size
    self.sentences += sentences
    self.words += words

  def stats(self, input_files: list[str], kinds: dict[str, str], config: CorpusConfig,
            output_files: dict[str, int], files=sources.LocalFiles) -> dict:
    """The stats file's contents, less the run's timing and workers (the inputs' sizes from
    `files`, as `sources` reads them). `config` is the run's, its language decided (`wikis`):
    the splitter it meant is named, and whether its lines are paragraphs, not sentences."""
    splitter = sentences.resolve(config.sentence_splitter, config.language)
    skipped = {key.removeprefix("skipped_"): n for key, n in sorted(self.counts.items())
               if key.startswith("skipped_")}
    return {
        "documents_in": self.counts["documents_in"],
        "documents_out": sum(self.documents),
        "train_documents": self.documents[units.TRAIN],
        "holdout_documents": self.documents[units.HOLDOUT],
        "skipped": skipped,
        "books_without_markers": self.counts["books_without_markers"],
        "sentences": self.sentences,
        "sentence_splitter": splitter,
        # A language without sentence punctuation (Thai): each line a paragraph, unsplit.
        "one_paragraph_a_line": splitter == "paragraph",
        "words": self.words,
        "bytes_in": sum(files.size(p) for p in input_files),
        "source_bytes": self.source_bytes,
        "bytes_out": self.bytes_out,
        "warnings": self.warnings,
        "config": config.to_dict(),
        "input_files": {p: kinds[p] for p in input_files},
        "output_files": output_files,
    }


def check_outputs(input_files: list[str], outputs: list[str]) -> None:
  """Local outputs only, not beside another run's shards; what a killed run left removed."""
  remote = [p for p in outputs if "://" in p]
  if remote:
    raise ValueError(f"{remote[0]}: prepare_corpus writes local files only; write them "
                     "locally, then copy them (gsutil -m cp, say)")
  if not input_files:
    raise ValueError("no input file")
  outputs_lib.check_no_other_shards(outputs)
  outputs_lib.remove_leftovers(outputs)


def with_timing(stats: dict, seconds: float, num_workers: int | None) -> dict:
  return {**stats, "seconds": seconds,
          "source_mb_per_second": stats["source_bytes"] / 1e6 / max(seconds, 1e-9),
          "num_workers": num_workers}


def empty_corpus(input_files: list[str], counts: collections.Counter) -> DataError:
  skipped = ", ".join(f"{n} {k.removeprefix('skipped_')}" for k, n in sorted(counts.items())
                      if k.startswith("skipped_"))
  return DataError(f"no document to write from {', '.join(input_files)}: "
                   f"{counts['documents_in']} read" + (f", skipped: {skipped}" if skipped else ""))


def prepare_corpus(input_files: list[str],
                   output_file: str,
                   config: CorpusConfig,
                   num_workers: int,
                   workers=None,
                   unit_chars: int = sources.UNIT_CHARS,
                   progress_seconds: float = progress.INTERVAL) -> dict:
  """Writes the documents of `input_files` as create_pretraining_data's input.

  Args:
    input_files: the sources, in order (a multistream dump's index is found beside it).
    output_file: the prefix the shards are named from (`output_paths`).
    config: the job's settings.
    num_workers: worker processes.
    workers: a pool of worker processes (`jobs.workers.start_workers`) the caller started and
      shuts down (prepare_corpus starts them before anything else); default: `num_workers`
      started here and shut down as the job ends.
    unit_chars: a unit's size; the output does not depend on it.
    progress_seconds: how often a progress line goes to stderr.

  Returns:
    The stats, also written as JSON to `jobs.outputs.stats_path(output_file)`.

  Raises:
    DataError: an input is not what its source kind reads (naming the file, and the line or
      page), or no document is left to write.
  """
  input_files = sources.without_indexes(list(input_files))
  kinds = source_kinds(input_files, config.source)
  train, holdout = output_paths(output_file, config)
  check_outputs(input_files, train + holdout)
  wiki = wikis(input_files, kinds, config)
  config = wiki.config
  totals = Totals(config.dedup, wiki.warnings)
  start = time.monotonic()
  meter = progress.Meter(None, interval=progress_seconds)
  with contextlib.ExitStack() as stack:
    pool = workers
    if pool is None:
      pool = workers_lib.start_workers(num_workers)
      stack.callback(pool.shutdown, wait=True, cancel_futures=True)  # last, and on an error
    shards = [[stack.enter_context(open(stack.enter_context(files_lib.temporary_path(p)), "wb"))
               for p in paths] for paths in (train, holdout)]
    written = [[0] * len(paths) for paths in (train, holdout)]

    def write(future) -> None:
      result = future.result()
      totals.add_unit(result.counts, result.source_bytes, result.warnings)
      for doc in result.documents:
        if totals.keep(doc.digest):
          shards[doc.split][doc.shard].write(doc.text)
          written[doc.split][doc.shard] += 1
          totals.add_document(doc.split, len(doc.text), doc.sentences, doc.words)
      if meter.due():
        print(f"prepare_corpus: {totals.counts['documents_in']:,} documents read, "
              f"{sum(totals.documents):,} written, source "
              f"{meter.line(totals.source_bytes / 1e6, 'MB')}", file=sys.stderr,
              flush=True)

    in_flight = collections.deque()
    for file_index, path in enumerate(input_files):
      for unit in sources.plan_units(file_index, path, kinds[path], unit_chars,
                                     hidden_names=wiki.hidden_names.get(path, frozenset())):
        in_flight.append(pool.submit(units.process_unit, unit, config))
        if len(in_flight) >= 2 * num_workers:
          write(in_flight.popleft())
    while in_flight:
      write(in_flight.popleft())
    if not sum(totals.documents):
      raise empty_corpus(input_files, totals.counts)
  counts = dict(zip(train + holdout, written[0] + written[1]))
  stats = with_timing(totals.stats(input_files, kinds, config, counts),
                      time.monotonic() - start, num_workers)
  outputs_lib.write_json(outputs_lib.stats_path(output_file), stats)
  return stats


def summary(stats: dict) -> str:
  """The end-of-run report, a few lines."""
  skipped = ", ".join(f"{reason} {n:,}" for reason, n in stats["skipped"].items()) or "none"
  workers = (f"{stats['num_workers']} workers" if stats["num_workers"]
             else "the runner's workers")
  if stats.get("runner"):
    workers += f" on {stats['runner']}"
  lines = ("paragraphs (one a line: no sentence punctuation)" if stats["one_paragraph_a_line"]
           else "sentences")
  return "\n".join([
      f"documents {stats['documents_in']:,} read, {stats['documents_out']:,} written "
      f"({stats['train_documents']:,} train, {stats['holdout_documents']:,} held out); "
      f"skipped: {skipped}",
      f"{lines} {stats['sentences']:,}  words {stats['words']:,}  "
      f"{stats['source_bytes'] / 1e6:,.1f} MB of source -> {stats['bytes_out'] / 1e6:,.1f} MB",
      f"{stats['seconds']:.1f} s, {stats['source_mb_per_second']:.2f} MB/s of source, "
      f"{workers}, {len(stats['output_files'])} shards",
  ])
