"""What both jobs' Beam pipelines share: the runner and pipeline options of --runner=NAME,
checked before the job starts (before TensorFlow loads, for create_pretraining_data): a typo
fails in seconds; a pipeline's run to its end (`run`), with the user's error in a failed one
as one line (`user_error`); the transforms that spread the work over any runner's workers
(`Spread`) and gather it back (`Gather`).

`DirectRunner` runs as the FnApiRunner: the DirectRunner first tries Beam's Prism runner,
which it downloads from the internet, and an offline machine stalls or fails there.
`DaskRunner` (Beam knows it by its class path only) runs on a Dask cluster: Beam's
--dask_client_address=tcp://HOST:8786 for a running one, else a LocalCluster of this machine's
cores (`pip install -e '.[dask]'`). It runs a pipeline as one graph of Dask bags, and three
things of that shape the pipelines: a Reshuffle is a no-op, so the work spreads only over a
step's partitions (`Spread` makes them); a step's side input is computed again, in one task,
for each task that reads it, so a step's results go on as main inputs (`Gather`), computed
once, in parallel; and it computes the last step applied and what that one reads, so each
pipeline ends in a Flatten of its last steps.
"""
import contextlib
import functools
import importlib
import io
import logging
import os
import re
from typing import Any, Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options import pipeline_options as options_lib
from apache_beam.transforms import combiners
from apache_beam.runners import runner as runner_lib

from bert_tf.common import errors

# The DirectRunner's engine that needs nothing from the internet.
OFFLINE_RUNNER = "FnApiRunner"
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
# Short names (lower case) of runners Beam's own map lacks, and the extra each needs.
_RUNNERS = {"dask": DASK_RUNNER, "daskrunner": DASK_RUNNER}
_EXTRAS = {DASK_RUNNER: "dask"}
# The partitions `Spread` makes on DaskRunner without --dask_npartitions, per core of this
# machine (a LocalCluster's worker threads): two, so that workers finishing unevenly still
# find work; not many more, as the Gather after them costs Dask partitions squared tasks
# (16 partitions: ~10 s of a 2-core machine).
DASK_PARTITIONS_PER_CORE = 2


def pipeline_options(beam_args: list[str],
                     program: str = "create_pretraining_data") -> options_lib.PipelineOptions:
  """The Beam pipeline options `beam_args` (--runner=NAME among them) give to `program` (the
  job whose flags they stand beside).

  Raises:
    ValueError: an unknown option or runner, or a bad value, naming it.
  """
  options = options_lib.PipelineOptions(beam_args)
  standard = options.view_as(options_lib.StandardOptions)
  if standard.runner.lower() in ("direct", "directrunner"):
    logging.warning("--runner=%s: running on the %s (the DirectRunner would first download "
                    "Beam's Prism runner from the internet); --runner=PrismRunner for Prism",
                    standard.runner, OFFLINE_RUNNER)
    standard.runner = OFFLINE_RUNNER
  given_runner, standard.runner = standard.runner, _RUNNERS.get(standard.runner.lower(),
                                                                 standard.runner)
  try:
    if standard.runner == DASK_RUNNER:
      # First: without it Beam's dask_runner module fails to load with an AttributeError (it
      # falls back to `ddist = {}`, then reads ddist.Client).
      importlib.import_module("dask.distributed")
    runner_lib.create_runner(standard.runner)  # (imports the runner's module: its options)
  except ImportError as e:  # not installed (Dataflow: apache-beam[gcp]; Dask: .[dask])
    extra = _EXTRAS.get(standard.runner)
    raise ValueError(f"--runner={given_runner}: {e}" +
                     (f" (pip install -e '.[{extra}]')" if extra else "")) from None
  except ValueError as e:  # unknown
    raise ValueError(f"--runner={given_runner}: {e}") from None
  if standard.runner == DASK_RUNNER:
    # DaskRunner swaps transforms in after the pipeline is built, and Beam then infers a
    # Flatten's element type as the union of its inputs' schemas (our dataclasses), which
    # failed now and then ("not enough values to unpack (expected 2, got 0)": 3 of ~12
    # prepare_corpus runs on a LocalCluster); DaskRunner passes Python objects, no coder needs
    # the types.
    options.view_as(options_lib.TypeOptions).pipeline_type_check = False
  usage = io.StringIO()
  try:
    with contextlib.redirect_stderr(usage):  # argparse's usage text: one line is enough
      known = options.get_all_options()
      given = options.get_all_options(retain_unknown_options=True)
  except SystemExit:  # argparse's "PROG: error: MESSAGE" (PROG: the script's file name)
    raise ValueError(re.sub(r"^\S+: error: ", "",
                            usage.getvalue().strip().splitlines()[-1])) from None
  unknown = sorted(set(given) - set(known))
  if unknown:
    raise ValueError(f"--{unknown[0]}: neither a flag of {program} nor a Beam "
                     "pipeline option")
  # For the driver's own file operations before a pipeline is built (matching the inputs,
  # sniffing their kinds, checking the outputs): s3:// and others read theirs (keys, region).
  FileSystems.set_options(options)
  return options


def runner(options: options_lib.PipelineOptions) -> str:
  """The runner's name: FnApiRunner, DaskRunner (not its class path), DataflowRunner..."""
  return options.view_as(options_lib.StandardOptions).runner.rsplit(".", 1)[-1]


def num_workers(options: options_lib.PipelineOptions) -> int | None:
  """The workers the options ask for: --direct_num_workers on the FnApiRunner, else
  --num_workers (Dataflow); None: the runner's choice."""
  if runner(options).lower().startswith("fnapi"):
    workers = options.view_as(options_lib.DirectOptions).direct_num_workers
    return os.cpu_count() if workers == 0 else workers or 1  # 0: Beam's "all cores"
  return options.view_as(options_lib.WorkerOptions).num_workers


# The last line of a worker's traceback that names a user's error (what the local path reports
# in one line), and the step Beam appends to it.
_USER_ERROR = re.compile(
    r"^(?:[\w.]+\.)?(?:ValueError|OSError|FileNotFoundError|IsADirectoryError|"
    r"NotADirectoryError|PermissionError|NotFoundError|PermissionDeniedError|DataLossError): "
    r"(.*?)(?: \[while running '[^']*'\])?$", re.MULTILINE)


_STEP = re.compile(r" \[while running '[^']*'\]$")


def user_error(error: Exception) -> ValueError | None:
  """The user's error (a file not text, the corpus empty, a disk full, the runner's options or
  extra missing...) in the error a failed pipeline raises: itself, on one line, without the
  step Beam appends, when it was raised in this process; else found in a worker's traceback
  (text); None for anything else (a bug)."""
  if errors.is_user_error(error) or isinstance(error, ImportError):
    return ValueError(re.sub(r"\s*\n\s*", " ", _STEP.sub("", str(error)).strip()))
  found = _USER_ERROR.findall(str(error))
  return ValueError(found[-1]) if found else None


def run(pipeline) -> None:
  """Runs `pipeline` to its end.

  Raises:
    ValueError: a user's error in it (`user_error`), on one line; anything else as raised.
  """
  try:
    result = pipeline.run()
    try:
      result.wait_until_finish()
    finally:
      # DaskRunner's result holds the Dask client it opened (and the LocalCluster that client
      # started, without --dask_client_address): closed here, not at the process's exit.
      client = getattr(result, "client", None)
      if client is not None:
        client.close()
  except Exception as e:  # pylint: disable=broad-except  (re-raised unless a user's error)
    found = user_error(e)
    if found is None:
      raise
    raise found from None


def spread_partitions(options: options_lib.PipelineOptions) -> int | None:
  """The partitions `Spread` makes: on DaskRunner, --dask_npartitions (else
  DASK_PARTITIONS_PER_CORE a core of this machine: give a cluster's, 2 a worker thread); None
  on other runners (a Reshuffle spreads the elements there)."""
  if options.view_as(options_lib.StandardOptions).runner != DASK_RUNNER:
    return None
  return (options.get_all_options().get("npartitions") or
          DASK_PARTITIONS_PER_CORE * len(os.sched_getaffinity(0)))


def _in_partition(element, key: Callable[[object], int], partitions: int, partition: int) -> bool:
  return key(element) % partitions == partition


class Spread(beam.PTransform):
  """The elements, spread over the runner's workers for the next step: Beam's Reshuffle; on
  DaskRunner (partitions: `spread_partitions`), the partitions of a Flatten, element e in
  partition key(e) % partitions (a Filter each: Dask runs a step as one task a partition).

  On Dask, for the job's heavy step alone: each of its partitions is a Filter of each of the
  partitions it reads, so partitions multiply with each Spread down a pipeline (a Gather keeps
  them: Dask's groupby does)."""

  def __init__(self, partitions: int | None, key: Callable[[object], int]):
    super().__init__()
    self.partitions, self.key = partitions, key

  def expand(self, pcoll):
    if self.partitions is None:
      return pcoll | beam.Reshuffle()
    return ([pcoll | f"Partition {i}" >> beam.Filter(
        functools.partial(_in_partition, key=self.key, partitions=self.partitions,
                          partition=i)) for i in range(self.partitions)]
            | beam.Flatten())


class _Start:
  """Gather's element of its own: a list, empty or not, comes out."""


class Gather(beam.PTransform):
  """The whole collection as one element, a list (in no order), also when it is empty: what a
  side input (AsList) gives, as a main input (see the module doc)."""

  def expand(self, pcoll):
    start = pcoll.pipeline | "Start" >> beam.Create([_Start()]).with_output_types(Any)
    return ((pcoll, start) | "With start" >> beam.Flatten()
            | "List" >> combiners.ToList().without_defaults()  # (a default: a side input)
            | "Elements" >> beam.Map(lambda items: [e for e in items
                                                    if not isinstance(e, _Start)]))
