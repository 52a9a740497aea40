"""The task-independent runner: any TensorFlow file system for outputs, and the best checkpoint
of a sweep as a later run's --init_checkpoint and as an export source."""
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from bert_tf import distribute
from bert_tf.tasks import runner
from bert_tf.tasks.classification import ClassificationTask
from export import saved_model
from test_run_classifier import VOCAB, make_sst2, tiny_config, toy_args

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _run(args: dict) -> dict:
  task = ClassificationTask.from_data(args.pop("task_name"), args.pop("data_dir"),
                                      args.pop("max_seq_length"))
  return runner.run(task, runner.RunArgs(**args), distribute.get_strategy("one_device"))


def test_run_classifier_writes_everything_through_tf_io_gfile(tmp_path):
  """ram:// (TensorFlow's in-memory file system) stands in for a Cloud TPU user's gs://: a
  path that only tf.io.gfile can write. The process checks its own outputs before exiting."""
  make_sst2(tmp_path / "data", num_train=32, num_dev=8, num_test=4)
  out = "ram://classifier/out"
  check = (
      "import sys, tensorflow as tf\n"
      "from absl import app\n"
      "from bert_tf import run_classifier\n"
      "def main(argv):\n"
      "  run_classifier.main()\n"
      f"  print(sorted(tf.io.gfile.listdir('{out}')))\n"
      "run_classifier.flags.mark_flags_as_required(['task_name', 'data_dir', 'output_dir'])\n"
      "app.run(main)\n")
  result = subprocess.run(
      [sys.executable, "-c", check, "--task_name=SST-2", f"--data_dir={tmp_path / 'data'}",
       f"--output_dir={out}", f"--bert_config_file={tiny_config(str(tmp_path / 'c.json'))}",
       f"--vocab_file={VOCAB}", "--max_seq_length=16", "--train_batch_size=8",
       "--num_train_epochs=1", "--do_train", "--do_eval", "--do_predict",
       f"--export_dir={out}_serving"],
      capture_output=True, text=True, timeout=600, env=ENV, cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  listed = eval(result.stdout.strip().splitlines()[-1])  # pylint: disable=eval-used
  for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "checkpoint",
               "eval_results.txt", "eval_results.json", "test_results.tsv", "SST-2.tsv",
               "task_config.json", "bert_config.json", "vocab.txt"):
    assert name in listed, (name, listed)
  assert not any(n.startswith("ram") for n in os.listdir(tmp_path))  # Nothing on local disk.


def test_best_of_a_sweep_loads_as_init_checkpoint_and_exports(tmp_path):
  make_sst2(tmp_path / "data", num_train=128, num_dev=32)
  sweep = str(tmp_path / "sweep")
  args = toy_args(str(tmp_path), tmp_path / "data", sweep, do_train=True, do_eval=True,
                  learning_rates=(1e-6, 3e-3), num_train_epochs=10)
  best = _run(dict(args))["best"]
  assert best["learning_rate"] == 3e-3 and best["eval_accuracy"] >= 0.9, best

  # As a later run's --init_checkpoint: its encoder comes back (its head is drawn afresh).
  later = dict(args, output_dir=str(tmp_path / "later"), init_checkpoint=sweep,
               bert_config_file=None, vocab_file=None, do_train=False)
  task = ClassificationTask.from_data("SST-2", str(tmp_path / "data"), 32)
  later_runner = runner.Runner(task, runner.RunArgs(
      **{k: v for k, v in later.items() if k not in ("task_name", "data_dir", "max_seq_length")}),
      distribute.get_strategy("one_device"))
  model, step = later_runner.restore()
  assert step == 0
  trained, _ = runner.Runner(task, runner.RunArgs(
      **{k: v for k, v in dict(args, do_train=False).items()
         if k not in ("task_name", "data_dir", "max_seq_length")}),
      distribute.get_strategy("one_device")).restore()
  for ours, theirs in zip(model.checkpoint_items["encoder"].weights,
                          trained.checkpoint_items["encoder"].weights):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

  # As an export source: the SavedModel classifies as the best run does.
  path = saved_model.export_from_output_dir(sweep, str(tmp_path / "serving"),
                                            data=str(tmp_path / "data"))
  loaded = tf.saved_model.load(path).signatures["serving_default"]
  labels = loaded(text_a=tf.constant(["the movie was good", "a bad film it was"]))["label"]
  assert [l.decode() for l in labels.numpy()] == ["1", "0"]
