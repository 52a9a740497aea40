"""What a process that runs tests sets before TensorFlow initialises: pytest's own (conftest)
and the drivers a test starts as `python tests/test_x.py ...`, where a test needs a fresh
process (a device configuration). Not the entry points a test starts as a user would, nor
the process that serves exports: those keep TensorFlow's defaults, as users run them; the
one exception here starts them as a user would, as a MultiWorkerMirrored cluster
(`run_workers`).
"""
import json
import os
import socket
import subprocess
import sys

import tensorflow as tf


def tiny_model_settings() -> None:
  """TensorFlow's runtime set for the tests' tiny models, where its defaults cost more than the
  computation; no result a test asserts changes:
  - Grappler's graph rewrites off: they optimise each traced function's graph once, before its
    first run, which on these shapes costs more than all of its steps (-22% of the CPU of
    test_toy_task, test_swag and test_gradient_accumulation).
  - One thread an op (intra-op): `make test` runs two such processes on two cores, and an op
    split over two threads on these shapes mostly waits, spinning, for the other core, which
    the other process needs (six files on two pytest workers, alternated: 186.9 CPU s and
    99.3 s against 214.3 and 113.3; 198.5 against 215.6 beside another job).
  """
  tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
  tf.config.threading.set_intra_op_parallelism_threads(1)


def two_cpu_devices() -> None:
  """The CPU as two logical devices, for a MirroredStrategy over "/cpu:0" and "/cpu:1"."""
  [cpu] = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def run_workers(args: list[str], tmp_dir: str, num_workers: int = 2) -> list[tuple[int, str]]:
  """`python args...` as the workers of a MultiWorkerMirrored cluster on localhost (each its
  TF_CONFIG, and its own TMPDIR, tmp_dir/tmp<index>: a worker that is not the chief saves
  there), all at once; each worker's (return code, stderr) once all have ended."""
  sockets = [socket.socket() for _ in range(num_workers)]
  for s in sockets:
    s.bind(("localhost", 0))
  cluster = {"worker": [f"localhost:{s.getsockname()[1]}" for s in sockets]}
  for s in sockets:
    s.close()
  procs = []
  for index in range(num_workers):
    worker_tmp = os.path.join(tmp_dir, f"tmp{index}")
    os.makedirs(worker_tmp)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=worker_tmp,
               TF_CONFIG=json.dumps({"cluster": cluster,
                                     "task": {"type": "worker", "index": index}}))
    procs.append(subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env))
  results = []
  for proc in procs:
    try:
      _, err = proc.communicate(timeout=900)
    finally:
      proc.kill()
    results.append((proc.returncode, err))
  return results
