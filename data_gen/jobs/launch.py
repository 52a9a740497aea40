"""How a data-generation entry point starts its work: local worker processes or a Beam runner.

`create_pretraining_data` and `prepare_corpus` share these flags (--num_workers, --runner, and
Beam's own pipeline options beside them), check them alike and start the same way: the local
workers are spawned first, so they boot while the main process imports the rest.
"""
import concurrent.futures
import dataclasses
import os
import sys

from absl import flags

from data_gen.jobs import workers


@dataclasses.dataclass
class Launch:
  """What runs the job: Beam pipeline options, or local workers already started.

  options:     the Beam pipeline options (--runner given), else None.
  workers:     the started local worker pool (no --runner), else None; the caller closes it.
  num_workers: --num_workers, or the cores this process may use.
  """
  options: object
  workers: concurrent.futures.ProcessPoolExecutor | None
  num_workers: int


def parse_flags(flag_values: flags.FlagValues, argv: list[str], program: str) -> list[str]:
  """The program's flags from argv; what is left (Beam's options) goes on to `start`."""
  try:
    return flag_values(argv, known_only=True)
  except flags.Error as e:
    sys.exit(f"{program}: error: {e}")


def start(program: str, runner: str | None, num_workers: int | None,
          beam_args: list[str]) -> Launch:
  """Checks the launch flags and starts the workers (no runner) or builds Beam's options.

  Raises:
    ValueError: Beam options without --runner, --num_workers with it, a bad Beam option or
      runner, Beam not installed, or --num_workers < 1; the message names the flag.
  """
  if beam_args and not runner:
    raise ValueError(f"unexpected arguments {' '.join(beam_args)} (Beam pipeline options go "
                     "with --runner)")
  if runner and num_workers is not None:
    # (This flag takes --num_workers before Beam sees it: Dataflow's own is out of reach.)
    raise ValueError("--num_workers is for the local worker processes; with --runner, give "
                     "the runner's options (--direct_num_workers=N, --max_num_workers=N on "
                     "Dataflow, a Dask cluster's workers)")
  if num_workers is None:
    num_workers = len(os.sched_getaffinity(0))
  if not runner:
    return Launch(options=None, workers=workers.start_workers(num_workers),
                  num_workers=num_workers)
  try:
    from data_gen.jobs import beam_options  # pylint: disable=g-import-not-at-top  (an extra)
  except ImportError as e:
    raise ValueError(f"--runner needs Apache Beam: pip install -e '.[beam]' ({e})") from None
  return Launch(options=beam_options.pipeline_options([f"--runner={runner}", *beam_args],
                                                      program),
                workers=None, num_workers=num_workers)
