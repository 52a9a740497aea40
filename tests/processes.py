"""What a process that runs tests sets before TensorFlow initialises: pytest's own (conftest)
and the drivers a test starts as `python tests/test_x.py ...`, where a test needs a fresh
process (a device configuration). Not the entry points a test starts as a user would, nor
the process that serves exports: those keep TensorFlow's defaults, as users run them.
"""
import socket

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


def free_ports(n: int) -> list[int]:
  """n ports on localhost free now: a MultiWorkerMirrored cluster's workers' addresses."""
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("localhost", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports
