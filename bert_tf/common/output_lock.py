"""One job per output: a lock held while a job writes its output folder (or its output files);
and no output that is one of the job's inputs (`check_not_input`).

Two jobs writing the same output would delete each other's temporary files and fail cryptically,
or mix their outputs. So each job holds an flock(2) on a lock file beside its outputs while it
runs, with its pid, host, command line and start time written in it; a second job refuses at
once, naming the first and the lock file. The kernel releases an flock when its process ends,
however it ends (kill -9 too): a lock left by a dead job never blocks the next one.

Taken once per run (a fine-tuning sweep's runs all go on under it): not re-entrant, so two
threads of one process writing the same output are refused like two processes. Outputs on
gs://, ram:// and tf.io.gfile's other file systems go unlocked: flock needs a local one.

The lock makes the folder it sits in, and removes again each folder it made that the job left
empty: a job refused before it wrote anything (a malformed data file) leaves no folder behind.
"""
import contextlib
import fcntl
import fnmatch
import glob
import json
import os
import socket
import sys
import time


class OutputBusyError(OSError):
  """Another job holds the lock of the output: it is writing there now."""


def check_not_input(outputs: list[str], output_flag: str, inputs: list[tuple[str, str]],
                    folder: bool = False) -> None:
  """Raises ValueError (naming both flags) when a job's output is one of its inputs.

  outputs: the files the job writes, or (folder) the folder it writes into. inputs: (flag,
  path or glob) pairs, a comma-separated list's patterns one pair each; flag "" names the path
  alone. A file is refused that is an input file (the same real path, a link to it too) or that
  an input glob matches (`--input_file='d/*' --output_file=d/x`: a later run reads the output
  as input). A folder is refused that holds an input file or that an input glob reads in.
  Plain string tests for gs:// and tf.io.gfile's other file systems. No TensorFlow: data_gen
  calls it before its workers need any."""
  for output in outputs:
    out = _real(output)
    for flag, pattern in inputs:
      given = f"{flag}={pattern}" if flag else pattern
      if not pattern.strip():
        continue
      pattern = _real(pattern.strip())
      files = _files(pattern)
      if folder:
        reads_in = any(c in pattern for c in "*?[") and _matches_folder(out, pattern)
        if reads_in or any(f == out or f.startswith(out.rstrip("/") + "/") for f in files):
          raise ValueError(f"{given}: {'reads in' if reads_in else 'lies in'} {output_flag}="
                           f"{output}, which the job writes: keep the inputs outside it")
      elif out in files or any(_same_file(output, f) for f in files):
        one_of = "a file of " if any(c in pattern for c in "*?[") else ""
        raise ValueError(f"{output_flag}={output} is {one_of}{given}: writing it would destroy "
                         "the input; write it elsewhere")
      elif _glob_match(out, pattern):
        raise ValueError(f"{output_flag}={output} matches {given}: a later run would read the "
                         "output as input; write it elsewhere")


def _real(path: str) -> str:
  """An absolute path with links resolved (glob characters kept), for a local path."""
  return path if "://" in path else os.path.realpath(path)


def _glob_match(path: str, pattern: str) -> bool:
  """Whether a glob matches path, `*` never crossing a `/` (as tf.io.gfile.glob)."""
  parts, globs = path.split("/"), pattern.split("/")
  return len(parts) == len(globs) and all(map(fnmatch.fnmatchcase, parts, globs))


def _matches_folder(folder: str, pattern: str) -> bool:
  """Whether a glob can match a file in `folder` or below it."""
  parts, globs = folder.rstrip("/").split("/"), pattern.split("/")[:-1]
  return len(globs) >= len(parts) and all(map(fnmatch.fnmatchcase, parts, globs))


def _files(pattern: str) -> list[str]:
  """The real paths of the local files a path or glob names (none for other file systems)."""
  if "://" in pattern:
    return [pattern]
  return [os.path.realpath(f) for f in glob.glob(pattern)] or [pattern]


def _same_file(a: str, b: str) -> bool:
  """Whether two local paths are one file (a hard link too)."""
  try:
    return "://" not in a + b and os.path.samefile(a, b)
  except OSError:
    return False


@contextlib.contextmanager
def lock_output_dir(output_dir: str, is_chief: bool = True):
  """Holds `output_dir/.lock` inside the block; OutputBusyError if another job holds it.
  Only the chief locks: the other workers of a multi-worker job share its output_dir."""
  if not is_chief:
    yield
    return
  with _hold(output_dir, os.path.join(output_dir, ".lock")):
    yield


@contextlib.contextmanager
def lock_output_files(prefixes: list[str]):
  """Holds `out/.pretrain.tfrecord.lock` for each output file prefix `out/pretrain.tfrecord`
  (the file and its shards) inside the block: jobs writing other prefixes in the same folder
  run side by side. OutputBusyError if another job holds one."""
  with contextlib.ExitStack() as stack:
    for prefix in prefixes:
      folder, name = os.path.split(prefix)
      stack.enter_context(_hold(prefix, os.path.join(folder, f".{name}.lock")))
    yield


@contextlib.contextmanager
def _hold(output: str, lock_path: str):
  if "://" in lock_path:
    # gs://, ram:// and the other file systems of tf.io.gfile have no flock: not locked.
    yield
    return
  made = _missing_folders(os.path.dirname(lock_path) or ".")
  os.makedirs(os.path.dirname(lock_path) or ".", exist_ok=True)
  try:
    fd = _acquire(output, lock_path)
    try:
      yield
    finally:
      # Removed while still held, so that no job ever finds a stale one (see `_acquire`).
      with contextlib.suppress(FileNotFoundError):
        os.unlink(lock_path)
      os.close(fd)
  finally:
    for folder in made:  # The deepest first; rmdir keeps a folder that holds anything.
      try:
        os.rmdir(folder)
      except OSError:
        break


def _missing_folders(folder: str) -> list[str]:
  """The folders os.makedirs(folder) would make, the deepest first; NotADirectoryError naming
  the file where a folder should be (os.makedirs would name the whole path)."""
  missing, folder = [], os.path.abspath(folder)
  while not os.path.exists(folder):
    missing.append(folder)
    folder = os.path.dirname(folder)
  if not os.path.isdir(folder):
    raise NotADirectoryError(f"{folder} is not a directory")
  return missing


def _acquire(output: str, lock_path: str) -> int:
  """A descriptor of lock_path holding its flock, this process's details written in it."""
  while True:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _holder(fd)
      os.close(fd)
      raise OutputBusyError(f"{output}: another job is writing there: {holder}; its lock is "
                            f"{lock_path} (freed when that job ends, even if killed). Wait for "
                            "it or stop it, or write elsewhere") from None
    if _is_current(fd, lock_path):
      break
    # Its last holder removed the file between our open and our flock: we hold a file that no
    # other job can open. Take the one now at lock_path instead.
    os.close(fd)
  os.ftruncate(fd, 0)
  os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                           "command": " ".join(sys.argv)}).encode())
  return fd


def _is_current(fd: int, lock_path: str) -> bool:
  """Whether fd is the file at lock_path now."""
  try:
    return os.path.samestat(os.fstat(fd), os.stat(lock_path))
  except FileNotFoundError:
    return False


def _holder(fd: int) -> str:
  """Who holds the lock, from what it wrote in the file."""
  try:
    who = json.loads(os.pread(fd, 1 << 16, 0))
    return (f"pid {who['pid']} on {who['host']}, started {who['started']} "
            f"({who['command']})")
  except (ValueError, KeyError, TypeError):
    return "a job that has not written its details yet"
