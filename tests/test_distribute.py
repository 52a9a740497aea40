"""Strategies: built from arguments; Mirrored over 2 CPU devices updates exactly as one device;
MultiWorkerMirrored with 2 worker processes on localhost trains, evaluates and checkpoints.

`python tests/test_distribute.py DIR` is the Mirrored driver: it must split the CPU into two
logical devices before TensorFlow initialises, so it runs in a process of its own.
"""
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf.training import distribute
import processes
from tiny_pretraining import (CONFIG, PREDS, SEQ, assert_same_values, checkpoint_steps,
                              checkpoint_values, train_tiny, write_init_checkpoint,
                              write_pretraining_records)

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_strategy_from_arguments():
  assert isinstance(distribute.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
  # auto on a box with no TPU named and no GPU: one device.
  strategy = distribute.get_strategy("auto")
  assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
  assert distribute.is_chief(strategy)
  with pytest.raises(ValueError, match="'parameter_server' is not one of"):
    distribute.get_strategy("parameter_server")


def test_one_replica_on_the_host_cpu_reads_the_dataset_itself():
  # No tf.distribute input wrapper there (its autotuned per-device pipelines can stall the
  # end of a run); the Mirrored test below checks both paths feed the same batches.
  strategy = distribute.get_strategy("one_device")
  dataset = tf.data.Dataset.range(6).batch(2)
  assert distribute.distribute_datasets_from_function(strategy, lambda ctx: dataset) is dataset
  assert [b.numpy().tolist() for b in distribute.distribute_dataset(strategy, dataset)] == [
      [0, 1], [2, 3], [4, 5]]


@pytest.mark.slow
def test_mirrored_over_two_cpus_updates_as_one_device(tmp_path):
  out = subprocess.run([sys.executable, __file__, str(tmp_path)], capture_output=True,
                       text=True, timeout=900, env=ENV)
  assert out.returncode == 0, out.stderr[-3000:]
  results = json.loads(out.stdout.strip().splitlines()[-1])
  assert results["replicas"] == [1, 2]
  one, two = results["one_device"], results["mirrored"]
  assert two["global_step"] == one["global_step"] == 4
  assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
  # Weights and Adam moments after 4 steps: the same global batch gives the same update.
  assert_same_values(checkpoint_values(str(tmp_path / "mirrored" / "ckpt-4")),
                     checkpoint_values(str(tmp_path / "one_device" / "ckpt-4")),
                     rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_multi_worker_mirrored_two_processes_train_and_checkpoint(tmp_path):
  records = write_pretraining_records(str(tmp_path / "data.tfrecord"), 64)
  config_file = str(tmp_path / "bert_config.json")
  CONFIG.to_json_file(config_file)
  output_dir = tmp_path / "out"
  workers = processes.run_workers(
      ["-m", "bert_tf.scripts.run_pretraining", f"--bert_config_file={config_file}",
       f"--input_file={records}", f"--output_dir={output_dir}", f"--max_seq_length={SEQ}",
       f"--max_predictions_per_seq={PREDS}", "--do_train", "--do_eval",
       "--train_batch_size=8", "--eval_batch_size=8", "--num_train_steps=4",
       "--num_warmup_steps=1", "--iterations_per_loop=2", "--save_checkpoints_steps=2",
       "--max_eval_steps=2", "--distribution_strategy=multi_worker_mirrored"], str(tmp_path))
  logs = []
  for returncode, err in workers:
    logs.append(err)
    assert returncode == 0, err[-3000:]
  assert all("multi_worker_mirrored with 2 replicas" in log for log in logs)
  # The chief (worker 0) alone writes checkpoints, summaries and results into output_dir ...
  assert checkpoint_steps(output_dir) == [2, 4]
  assert "saved" in logs[0] and str(output_dir) in logs[0]
  assert len(list(output_dir.glob("events.out.tfevents.*"))) == 1
  results = dict(line.split(" = ") for line in
                 (output_dir / "eval_results.txt").read_text().splitlines())
  assert results["global_step"] == "4" and float(results["loss"]) > 0
  # ... the other worker saved into a temporary directory, removed after each save.
  assert not any((tmp_path / "tmp1").rglob("*ckpt*"))


def _mirrored_driver(work_dir: str) -> None:
  """Trains 4 steps on one device and on 2 mirrored CPU devices, from the same init."""
  processes.two_cpu_devices()
  processes.tiny_model_settings()
  records = write_pretraining_records(os.path.join(work_dir, "data.tfrecord"), 64)
  init = write_init_checkpoint(os.path.join(work_dir, "init", "ckpt"))
  results, replicas = {}, []
  for name in ("one_device", "mirrored"):
    strategy = distribute.get_strategy(name)
    replicas.append(strategy.num_replicas_in_sync)
    results[name] = train_tiny(strategy, records, init, os.path.join(work_dir, name), 4)
  print(json.dumps(dict(results, replicas=replicas)))


if __name__ == "__main__":
  _mirrored_driver(sys.argv[1])
