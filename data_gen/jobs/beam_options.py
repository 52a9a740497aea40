"""What both jobs' Beam pipelines share: the runner and pipeline options of --runner=NAME,
checked before the job starts (before TensorFlow loads, for create_pretraining_data): a typo
fails in seconds; and the user's error in a failed pipeline (`user_error`), one line.

`DirectRunner` runs as the FnApiRunner: the DirectRunner first tries Beam's Prism runner,
which it downloads from the internet, and an offline machine stalls or fails there.
"""
import contextlib
import io
import logging
import os
import re

from apache_beam.options import pipeline_options as options_lib
from apache_beam.runners import runner as runner_lib

from bert_tf.common import errors

# The DirectRunner's engine that needs nothing from the internet.
OFFLINE_RUNNER = "FnApiRunner"


def pipeline_options(beam_args: list[str],
                     program: str = "create_pretraining_data") -> options_lib.PipelineOptions:
  """The Beam pipeline options `beam_args` (--runner=NAME among them) give to `program` (the
  job whose flags they stand beside).

  Raises:
    ValueError: an unknown option or runner, or a bad value, naming it.
  """
  options = options_lib.PipelineOptions(beam_args)
  usage = io.StringIO()
  try:
    with contextlib.redirect_stderr(usage):  # argparse's usage text: one line is enough
      known = options.get_all_options()
      given = options.get_all_options(retain_unknown_options=True)
  except SystemExit:
    raise ValueError(usage.getvalue().strip().splitlines()[-1]) from None
  unknown = sorted(set(given) - set(known))
  if unknown:
    raise ValueError(f"--{unknown[0]}: neither a flag of {program} nor a Beam "
                     "pipeline option")
  standard = options.view_as(options_lib.StandardOptions)
  if standard.runner.lower() in ("direct", "directrunner"):
    logging.warning("--runner=%s: running on the %s (the DirectRunner would first download "
                    "Beam's Prism runner from the internet); --runner=PrismRunner for Prism",
                    standard.runner, OFFLINE_RUNNER)
    standard.runner = OFFLINE_RUNNER
  try:
    runner_lib.create_runner(standard.runner)
  except (ImportError, ValueError) as e:  # not installed (Dataflow: apache-beam[gcp]); unknown
    raise ValueError(f"--runner={standard.runner}: {e}") from None
  return options


def runner(options: options_lib.PipelineOptions) -> str:
  return options.view_as(options_lib.StandardOptions).runner


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
