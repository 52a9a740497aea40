"""What a process that runs tests sets before TensorFlow initialises: pytest's own (conftest)
and the drivers a test starts as `python tests/test_x.py ...`, where a test needs a fresh
process (a device configuration). Not the entry points a test starts as a user would, nor
the process that serves exports: those keep TensorFlow's defaults, as users run them.
"""
import tensorflow as tf


def graph_rewrites_off() -> None:
  """Grappler's graph rewrites off: they optimise each traced function's graph once, before
  its first run, which on the tests' tiny shapes costs more than all of its steps (-22% of the
  CPU of test_toy_task, test_swag and test_gradient_accumulation) and changes no result a test
  asserts."""
  tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


def two_cpu_devices() -> None:
  """The CPU as two logical devices, for a MirroredStrategy over "/cpu:0" and "/cpu:1"."""
  [cpu] = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
