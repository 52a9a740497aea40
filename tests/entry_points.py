"""Several runs of a console script in one Python process, each as a user would see it.

A process that starts Python and TensorFlow costs seconds of CPU before a run does anything;
bad-input tests that each start `python -m bert_tf.scripts.<script>` spend most of their time
there. run_cases starts one process for all of a test's runs of one entry point:

  [out, ...] = run_cases("bert_tf.scripts.run_pretraining", [[flag, ...], ...])
  out.returncode, out.stderr, out.stdout   (a subprocess.CompletedProcess for each run)

A case may also be a `Call`: a function run in that process between two runs, where a later
run needs what an earlier one wrote, made into something else (a killed run's copy of a
finished one, a damaged checkpoint):

  [trained, resumed] = run_cases(module, [argv, Call("tiny_pretraining.killed_copy",
                                                     [trained_dir, 2, killed_dir]), argv])

Each run sees what it would alone: sys.argv as `python -m <module> <flags>` sets it, the flags
back at their defaults (absl's FLAGS unparsed, then parsed from that argv), absl's app.run set
up as on its first call (the logging at INFO), the module's `run()` (the console script's
target, setup.cfg) called as the script calls it, and the exit status and stderr the
interpreter would give: sys.exit(None) is 0, sys.exit("message") prints the message and is 1,
an uncaught exception prints its traceback and is 1. File descriptors 1 and 2 are redirected
to a file per run, so TensorFlow's own C++ lines land in that run's output too.

What one process shares between runs: anything a run caches at module level or in TensorFlow's
process-wide state (a device configuration, a mixed precision policy the run does not set
itself); what TensorFlow logs at exit lands in no run's stderr. A test of such a thing, or of
a run killed part-way, needs a process of its own (subprocess.run).

`python tests/entry_points.py MODULE CASES_JSON RESULTS_JSON` is the driver run_cases starts.
"""
import dataclasses
import importlib
import json
import os
import subprocess
import sys
import tempfile
import traceback

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


@dataclasses.dataclass
class Call:
  """A step between runs: `function` ("module.name": of tests/, or the standard library's)
  called with `args` (JSON values) in the runs' process. It has no result of its own."""
  function: str
  args: list


def run_cases(module: str, cases: list, env: dict | None = None, cwd: str | None = None,
              timeout: float = 900) -> list[subprocess.CompletedProcess]:
  """`python -m <module> <argv>` for each argv of `cases` (or the `Call`s among them), in
  order, in one new process (env: its environment, TF_CPP_MIN_LOG_LEVEL=2 by default; cwd: its
  working folder); AssertionError with the driver's stderr if the driver itself fails."""
  runs = [case for case in cases if not isinstance(case, Call)]
  with tempfile.TemporaryDirectory() as tmp:
    cases_file, results_file = os.path.join(tmp, "cases.json"), os.path.join(tmp, "results.json")
    with open(cases_file, "w", encoding="utf-8") as f:
      json.dump([dataclasses.asdict(c) if isinstance(c, Call) else c for c in cases], f)
    driver = subprocess.run([sys.executable, __file__, module, cases_file, results_file],
                            capture_output=True, text=True, timeout=timeout,
                            env=ENV if env is None else env, cwd=cwd)
    assert driver.returncode == 0 and os.path.exists(results_file), driver.stderr[-3000:]
    with open(results_file, encoding="utf-8") as f:
      results = json.load(f)
  return [subprocess.CompletedProcess([sys.executable, "-m", module, *argv], *result)
          for argv, result in zip(runs, results)]


def _exit_status(code) -> int:
  """What the interpreter makes of SystemExit(code) at exit; a message goes to stderr."""
  if code is None or isinstance(code, int):
    return code or 0
  print(code, file=sys.stderr)
  return 1


def _run(module, argv: list[str], out_path: str, err_path: str) -> int:
  """module.run() with argv, fds 1 and 2 into the files; its exit status."""
  from absl import app, flags  # pylint: disable=g-import-not-at-top  (after bert_tf's defaults)
  saved = [os.dup(1), os.dup(2)]
  sys.stdout.flush()
  sys.stderr.flush()
  with open(out_path, "wb") as out, open(err_path, "wb") as err:
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
  try:
    sys.argv = [module.__file__, *argv]
    flags.FLAGS.unparse_flags()
    # app.run's set-up as on its first call, which bumps the logging to INFO where no
    # --verbosity is given (a later call parses the flags only, and they are back at WARNING).
    app._run_init.done = False  # pylint: disable=protected-access
    app._register_and_parse_flags_with_usage.done = False  # pylint: disable=protected-access
    try:
      module.run()
      status = 0
    except SystemExit as e:
      status = _exit_status(e.code)
    except BaseException:  # pylint: disable=broad-except  (as the interpreter reports it)
      traceback.print_exc()
      status = 1
    return status
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, copy in zip((1, 2), saved):
      os.dup2(copy, fd)
      os.close(copy)


def _driver(module_name: str, cases_file: str, results_file: str) -> None:
  with open(cases_file, encoding="utf-8") as f:
    cases = json.load(f)
  module = importlib.import_module(module_name)
  results = []
  for i, argv in enumerate(cases):
    if isinstance(argv, dict):  # A Call.
      function_module, name = argv["function"].rsplit(".", 1)
      getattr(importlib.import_module(function_module), name)(*argv["args"])
      continue
    out_path, err_path = f"{results_file}.{i}.out", f"{results_file}.{i}.err"
    status = _run(module, argv, out_path, err_path)
    results.append([status] + [open(p, encoding="utf-8", errors="replace").read()
                               for p in (out_path, err_path)])
  with open(results_file, "w", encoding="utf-8") as f:
    json.dump(results, f)


if __name__ == "__main__":
  _driver(*sys.argv[1:])
