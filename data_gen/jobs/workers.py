"""The data generators' worker processes: a spawned pool, every worker started at once.

Spawned (TensorFlow is not fork-safe), each loads Python, numpy and the modules of its work
(~0.4 s): a caller that starts them before it imports TensorFlow has them ready when its
tokenizer is (create_pretraining_data does). Here, in the standard library alone, so that a
caller can start them before it loads anything heavy.
"""
import concurrent.futures
import multiprocessing
import os

from data_gen.jobs import parent_death


def start_workers(num_workers: int) -> concurrent.futures.ProcessPoolExecutor:
  """The job's worker processes, all started now.

  Each dies with the caller (`parent_death`: the kernel's signal on Linux), so call this from
  the main thread: the kernel signals when the thread that started a worker exits.
  """
  if num_workers < 1:
    raise ValueError(f"--num_workers={num_workers}: must be >= 1")
  pool = concurrent.futures.ProcessPoolExecutor(
      num_workers, mp_context=multiprocessing.get_context("spawn"),
      initializer=parent_death.exit_with_parent, initargs=(os.getpid(),))
  # The pool spawns a worker per submission that finds none idle: one no-op each starts
  # them all now, rather than as the first work arrives.
  for _ in range(num_workers):
    pool.submit(int)
  return pool
