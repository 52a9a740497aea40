"""A benchmark's run of one configuration in a fresh process: its last stdout line, a JSON
object, printed and returned; a failed child ends the parent with the command and its stderr.

Kind: shared by every kind (benchmarks/); imported, never run."""
import json
import os
import subprocess
import sys


def run_json(command: list[str], env: dict[str, str] | None = None, label: str | None = None,
             echo: bool = True) -> dict:
  """Runs command (TensorFlow's start-up noise silenced; `env` added to this process's) -> its
  last stdout line, parsed; printed after "label | " when echo. A failure names label (else the
  command)."""
  try:
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))
  except OSError as error:  # No such program (a --peer_python mistyped), not executable.
    sys.exit(f"{label or command[0]}: cannot start {command[0]}: {error.strerror}")
  if done.returncode:
    sys.exit(f"{label or ' '.join(command)} failed:\n{done.stderr[-3000:]}")
  result = json.loads(done.stdout.strip().splitlines()[-1])
  if echo:
    print(f"{label} | {json.dumps(result)}" if label else json.dumps(result), flush=True)
  return result
