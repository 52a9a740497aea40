"""A worker process that ends the moment its parent does, however the parent ends (kill -9
included), whatever the load.

On Linux the kernel does it: `prctl(PR_SET_PDEATHSIG, SIGKILL)` has the worker killed when the
thread that started it exits, with no help from the worker (a thread polling for the parent
waits for a core on a busy machine, and a stopped worker never polls). Elsewhere, or where
prctl cannot be called, a daemon thread polls the parent's pid twice a second.

Only the standard library: a spawned worker runs `exit_with_parent` (its pool's initializer)
before anything heavy is imported into it.
"""
import ctypes
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _kernel_signals_on_parent_death() -> bool:
  """Asks the kernel to SIGKILL this process when its parent dies; False where it cannot."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
  except (OSError, AttributeError):
    return False


def exit_with_parent(parent_pid: int) -> None:
  """A pool's initializer: ends this worker when `parent_pid` (the process that started it,
  from the thread that outlives the pool: the main thread) dies.

  The kernel's signal where there is one, else a thread that polls every 0.5 s. Either way the
  parent may have died before this ran (a worker still starting when its parent was killed):
  then the worker ends now.
  """
  if not _kernel_signals_on_parent_death():
    def watch():
      while os.getppid() == parent_pid:
        time.sleep(0.5)
      os._exit(1)  # pylint: disable=protected-access  (no cleanup: nobody is left to need it)
    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()
  if os.getppid() != parent_pid:
    os._exit(1)  # pylint: disable=protected-access
