"""One job per output: a lock held while a job writes its output folder (or its output files).

Two jobs writing the same output would delete each other's temporary files and fail cryptically,
or mix their outputs. So each job holds an flock(2) on a lock file beside its outputs while it
runs, with its pid, host, command line and start time written in it; a second job refuses at
once, naming the first and the lock file. The kernel releases an flock when its process ends,
however it ends (kill -9 too): a lock left by a dead job never blocks the next one.

Taken once per run (a fine-tuning sweep's runs all go on under it): not re-entrant, so two
threads of one process writing the same output are refused like two processes. Outputs on
gs://, ram:// and tf.io.gfile's other file systems go unlocked: flock needs a local one.
"""
import contextlib
import fcntl
import json
import os
import socket
import sys
import time


class OutputBusyError(OSError):
  """Another job holds the lock of the output: it is writing there now."""


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
  os.makedirs(os.path.dirname(lock_path) or ".", exist_ok=True)
  fd = _acquire(output, lock_path)
  try:
    yield
  finally:
    # Removed while still held, so that no job ever finds a stale one (see `_acquire`).
    with contextlib.suppress(FileNotFoundError):
      os.unlink(lock_path)
    os.close(fd)


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
