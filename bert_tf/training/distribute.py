"""A tf.distribute strategy from plain arguments (the values of run_*.py's flags).

  tpu                     TPUStrategy on the TPU named by `tpu` (a name, or a grpc:// address)
  mirrored                MirroredStrategy over the local GPUs, or the local CPU devices if none
  multi_worker_mirrored   MultiWorkerMirroredStrategy; the cluster comes from TF_CONFIG
  one_device              OneDeviceStrategy on the first GPU, else the CPU
  auto                    tpu when a TPU is named, mirrored with several GPUs, else one_device

`distribute_datasets_from_function` / `distribute_dataset` feed a strategy's replicas.
"""
from absl import logging
import tensorflow as tf

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker_mirrored", "one_device")


def get_strategy(distribution_strategy: str = "auto",
                 tpu: str | None = None,
                 tpu_zone: str | None = None,
                 gcp_project: str | None = None,
                 num_tpu_cores: int | None = None) -> tf.distribute.Strategy:
  """Builds (and for TPUs, connects and initialises) the named strategy.

  Args:
    distribution_strategy: one of `STRATEGIES`.
    tpu: the TPU name or address for TPUClusterResolver; "" or None lets the resolver look in
      the environment (e.g. on a Cloud TPU VM).
    tpu_zone, gcp_project: where to look the TPU name up; None = from the GCE metadata.
    num_tpu_cores: the cores the caller expects; a warning if the TPU has another number.
  """
  if distribution_strategy not in STRATEGIES:
    raise ValueError(f"distribution_strategy {distribution_strategy!r} is not one of "
                     f"{STRATEGIES}")
  if distribution_strategy == "auto":
    distribution_strategy = _auto(tpu)
  strategy = _build(distribution_strategy, tpu, tpu_zone, gcp_project, num_tpu_cores)
  logging.info("distribution strategy: %s with %d replicas", distribution_strategy,
               strategy.num_replicas_in_sync)
  return strategy


def _build(name: str, tpu, tpu_zone, gcp_project, num_tpu_cores) -> tf.distribute.Strategy:
  if name == "tpu":
    return _tpu_strategy(tpu, tpu_zone, gcp_project, num_tpu_cores)
  if name == "multi_worker_mirrored":
    # First: collectives must be configured before anything initialises the runtime.
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(
        [d.name for d in gpus or tf.config.list_logical_devices("CPU")])
  return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def _auto(tpu: str | None) -> str:
  if tpu:
    return "tpu"
  if len(tf.config.list_physical_devices("GPU")) > 1:
    return "mirrored"
  return "one_device"


def _tpu_strategy(tpu, tpu_zone, gcp_project, num_tpu_cores) -> tf.distribute.TPUStrategy:
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
      tpu=tpu or "", zone=tpu_zone, project=gcp_project)
  tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  strategy = tf.distribute.TPUStrategy(resolver)
  if num_tpu_cores and num_tpu_cores != strategy.num_replicas_in_sync:
    logging.warning("--num_tpu_cores=%d but the TPU has %d cores; using all of them",
                    num_tpu_cores, strategy.num_replicas_in_sync)
  return strategy


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """Whether this process writes checkpoints, summaries and results: the "chief" task, or
  worker 0 when the cluster names no chief; always true outside a multi-worker cluster
  (a TPU's workers are driven by this one process)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or isinstance(resolver,
                                    tf.distribute.cluster_resolver.TPUClusterResolver):
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  if not task_type:
    return True
  return task_type == "chief" or (task_type == "worker" and task_id == 0 and
                                  "chief" not in resolver.cluster_spec().as_dict())


def _on_host_cpu(strategy: tf.distribute.Strategy) -> bool:
  """One replica, on the CPU this process runs on."""
  devices = strategy.extended.worker_devices
  return len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU"


def distribute_datasets_from_function(strategy: tf.distribute.Strategy, dataset_fn):
  """`strategy.distribute_datasets_from_function(dataset_fn)`, but the dataset itself when the
  one replica is the host CPU: there tf.distribute's wrapper only adds a MultiDeviceIterator
  whose per-device pipelines run tf.data's autotuning thread, which can stall the end of a run
  (see `tfrecords.datasets.NO_AUTOTUNE_THREAD`)."""
  if _on_host_cpu(strategy):
    return dataset_fn(tf.distribute.InputContext())
  return strategy.distribute_datasets_from_function(dataset_fn)


def distribute_dataset(strategy: tf.distribute.Strategy, dataset: tf.data.Dataset):
  """`strategy.experimental_distribute_dataset(dataset)` (global batches split across the
  replicas), but the dataset itself on the host CPU, as `distribute_datasets_from_function`."""
  if _on_host_cpu(strategy):
    return dataset
  return strategy.experimental_distribute_dataset(dataset)
