"""prepare_corpus as an Apache Beam pipeline: the local path's shards, byte for byte.

`prepare_corpus --runner=NAME [Beam pipeline options]` runs this instead of the local worker
processes (`pipeline`). The steps:

  Plan      per input file: its units (`sources.plan_units`: raw documents, or a
            multistream dump's byte ranges), keyed by their order (file, unit).
  Clean     per unit: `units.process_unit`, on the Beam worker's thread (the page time
            limit works there too); the unit's documents to a scratch file, back to back, and
            a small entry per document (split, shard, size, counts, text hash).
  Shards    per output file, given every unit's entries (`beam_options.Gather`): that shard
            and split's documents, in unit order, copied from the scratch files; --dedup
            decided over all units in order, as the local path decides it. Written under
            temporary names, renamed by the driver once every one is complete.
  Stats     beside Shards, from every unit's entries: the totals (`pipeline.Totals`, the
            local path's) and each output file's documents, to the scratch directory; the
            driver adds the timing and writes the stats file. The counts come through the
            pipeline's elements, not the runner's metrics, which not every runner reports
            (DaskRunner does not).

Deterministic: a document's shard and split depend on its identity, its place on its unit's
order, never on which worker ran what. Only units, file names and small entries cross between
steps. The workers share no disk: the inputs (read by `sources`, its `files` Beam's:
`beam_files.InputFiles`), the scratch directory (beside the output) and the outputs go through
Beam's file systems (`beam_files`: local, gs://, s3://, ...).
"""
import collections
import dataclasses
import time
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options import pipeline_options as options_lib
import numpy as np

from bert_tf.common.errors import DataError
from data_gen.corpus import pipeline
from data_gen.corpus import sources
from data_gen.corpus import units as units_lib
from data_gen.corpus.config import CorpusConfig
from data_gen.jobs import beam_files
from data_gen.jobs import beam_options
from data_gen.jobs import outputs as outputs_lib


@dataclasses.dataclass
class UnitFile:
  """A cleaned unit: its documents in `path` (None: it has none), back to back.

  entries: [documents, 5] int64: split, shard, bytes, sentences, words.
  digests: each document's text hash, for --dedup.
  """
  order: tuple[int, int]
  path: str | None
  entries: np.ndarray
  digests: list[bytes]
  counts: collections.Counter
  source_bytes: int
  warnings: list[str]


def _plan(file: tuple[int, str, str, frozenset[str]], unit_chars: int):
  """Plan: one input file's units (a dump's carry the names its links hide under)."""
  file_index, path, kind, hidden_names = file
  try:
    yield from sources.plan_units(file_index, path, kind, unit_chars, beam_files.InputFiles,
                                  hidden_names)
  except DataError as e:  # as a ValueError: the form `beam_options.user_error` finds
    raise ValueError(str(e)) from None


def _clean(unit: sources.Unit, config: CorpusConfig, scratch: str) -> UnitFile:
  """Clean: a unit's documents, to a scratch file; what the later steps need of them."""
  try:
    result = units_lib.process_unit(unit, config, beam_files.InputFiles)
  except DataError as e:  # as a ValueError: the form `beam_options.user_error` finds
    raise ValueError(str(e)) from None
  path = None
  if result.documents:
    path = FileSystems.join(scratch, "unit-%06d-%08d" % unit.order)
    beam_files.write_whole(path, (doc.text for doc in result.documents))
  entries = np.array([(d.split, d.shard, len(d.text), d.sentences, d.words)
                      for d in result.documents], np.int64).reshape(-1, 5)
  return UnitFile(order=unit.order, path=path, entries=entries,
                  digests=[d.digest for d in result.documents], counts=result.counts,
                  source_bytes=result.source_bytes, warnings=result.warnings)


def _documents(units: list[UnitFile], dedup: bool):
  """(unit, its entry, byte offset in its file) of every document written, in job order."""
  seen = set() if dedup else None
  for unit in sorted(units, key=lambda u: u.order):
    offset = 0
    for entry, digest in zip(unit.entries.tolist(), unit.digests):
      if seen is None or digest not in seen:
        if seen is not None:
          seen.add(digest)
        yield unit, entry, offset
      offset += entry[2]


def _unit_number(unit) -> int:
  """A unit's (or a UnitFile's) place, for `beam_options.Spread`: its file's units in turn."""
  return sum(unit.order)


def _write_shard(job: tuple[int, list[UnitFile]], targets: list[tuple[int, int]],
                 paths: list[list[str]], dedup: bool, suffix: str) -> str:
  """Shards: output file targets[i] (split, shard) of job (i, units) under its name +
  `suffix`."""
  index, units = job
  target = targets[index]
  split, shard = target
  path = paths[split][shard]
  source, source_path = None, None
  try:
    with beam_files.open_write(path + suffix) as out:
      for unit, entry, offset in _documents(units, dedup):  # in unit order: one file open
        if (entry[0], entry[1]) == target:
          if unit.path != source_path:
            if source is not None:
              source.close()
            source, source_path = beam_files.open_read(unit.path), unit.path
          source.seek(offset)
          out.write(source.read(entry[2]))
  finally:
    if source is not None:
      source.close()
  return path


def _write_stats(units: list[UnitFile], input_files: list[str], kinds: dict[str, str],
                 config: CorpusConfig, warnings: list[str], paths: list[list[str]],
                 path: str) -> None:
  """Stats: the local path's totals (after the run's `warnings`), and the documents of each
  output file, to `path`."""
  totals = pipeline.Totals(config.dedup, warnings)
  written = [[0] * len(split) for split in paths]
  for unit in sorted(units, key=lambda u: u.order):
    totals.add_unit(unit.counts, unit.source_bytes, unit.warnings)
    for entry, digest in zip(unit.entries.tolist(), unit.digests):
      if totals.keep(digest):
        totals.add_document(entry[0], entry[2], entry[3], entry[4])
        written[entry[0]][entry[1]] += 1
  if not sum(totals.documents):
    raise pipeline.empty_corpus(input_files, totals.counts)
  beam_files.write_json(path, totals.stats(
      input_files, kinds, config,
      {p: n for split, counts in zip(paths, written) for p, n in zip(split, counts)},
      beam_files.InputFiles))


def prepare_corpus(input_files: list[str],
                   output_file: str,
                   config: CorpusConfig,
                   options: options_lib.PipelineOptions,
                   unit_chars: int = sources.UNIT_CHARS) -> dict:
  """`pipeline.prepare_corpus`'s shards, stats file and result, from a Beam pipeline.

  Args:
    input_files, output_file, config, unit_chars: as `pipeline.prepare_corpus`.
    options: the Beam pipeline options, from `beam_options.pipeline_options`.

  Returns:
    The stats, also written as JSON to `jobs.outputs.stats_path(output_file)`, with the runner.

  Raises:
    ValueError: an input not what its source kind reads, or no document left, naming it.
  """
  input_files = sources.without_indexes(list(input_files), beam_files.InputFiles)
  kinds = pipeline.source_kinds(input_files, config.source, beam_files.InputFiles)
  wikis = pipeline.wikis(input_files, kinds, config, beam_files.InputFiles)
  config = wikis.config
  train, holdout = pipeline.output_paths(output_file, config)
  outputs = train + holdout
  files = beam_files.files_for(output_file)
  outputs_lib.check_no_other_shards(outputs, files)
  outputs_lib.remove_leftovers(outputs, files)
  job = f"beam-{uuid.uuid4().hex[:12]}"
  scratch, suffix = outputs_lib.scratch_dir(outputs[0], job), f".tmp-{job}"
  start = time.monotonic()
  try:
    p = beam.Pipeline(options=options)
    units = (p | "Files" >> beam.Create([(i, path, kinds[path],
                                          wikis.hidden_names.get(path, frozenset()))
                                         for i, path in enumerate(input_files)])
             | "Plan" >> beam.FlatMap(_plan, unit_chars)
             | "Spread" >> beam_options.Spread(beam_options.spread_partitions(options),
                                               key=_unit_number)
             | "Clean" >> beam.Map(_clean, config, scratch)
             | "Units" >> beam_options.Gather())
    targets = [(units_lib.TRAIN, s) for s in range(len(train))] + \
              [(units_lib.HOLDOUT, s) for s in range(len(holdout))]
    shards = (units
              | "Outputs" >> beam.FlatMap(lambda units: ((i, units) for i in range(len(targets))))
              | "Spread outputs" >> beam.Reshuffle()  # (on Dask a no-op: copies, in one task)
              | "Shards" >> beam.Map(_write_shard, targets, [train, holdout], config.dedup,
                                     suffix))
    stats = units | "Stats" >> beam.Map(_write_stats, input_files, kinds, config,
                                        wikis.warnings, [train, holdout],
                                        FileSystems.join(scratch, "stats.json"))
    # Last, on both: DaskRunner runs the last step applied and what it reads, no more.
    _ = (shards, stats) | "Done" >> beam.Flatten()
    beam_options.run(p)
    stats = beam_files.read_json(FileSystems.join(scratch, "stats.json"))
    FileSystems.rename([path + suffix for path in outputs], outputs)  # all or none, as locally
  finally:
    outputs_lib.remove_leftovers(outputs, files)  # this job's scratch, or a failed one's shards
  stats = {**pipeline.with_timing(stats, time.monotonic() - start,
                                  beam_options.num_workers(options)),
           "runner": beam_options.runner(options)}
  beam_files.write_json(outputs_lib.stats_path(output_file), stats)
  return stats
