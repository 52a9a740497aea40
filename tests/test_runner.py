"""The task-independent runner: any TensorFlow file system for outputs, the best checkpoint
of a sweep as a later run's --init_checkpoint and as an export source, one job per output_dir."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.common import output_lock
from bert_tf.finetuning import runner
from bert_tf.training import distribute
from export import saved_model
from toys import VOCAB, make_sst2, tiny_config, toy_args

pytestmark = pytest.mark.slow  # Every test here trains, exports or starts processes.

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _run(args: dict) -> dict:
  task = finetuning.build("classification", {"task_name": args.pop("task_name"),
                                       "max_seq_length": args.pop("max_seq_length")},
                     data_dir=args.pop("data_dir"))
  return runner.run(task, runner.RunArgs(**args), distribute.get_strategy("one_device"))


def _run_in_ram(script: str, flags: list[str], cwd) -> list[str]:
  """Runs an entry point in a fresh process with --output_dir=ram://out (TensorFlow's
  in-memory file system, standing in for a Cloud TPU user's gs://: only tf.io.gfile can write
  it) and --export_dir=ram://serving; returns what the process then lists in both."""
  check = (
      "import tensorflow as tf\n"
      "from absl import app\n"
      f"from bert_tf.scripts import {script} as script\n"
      "def main(argv):\n"
      "  script.main()\n"
      "  print(sorted(tf.io.gfile.listdir('ram://out')) + tf.io.gfile.listdir('ram://serving'))\n"
      "app.run(main)\n")
  result = subprocess.run(
      [sys.executable, "-c", check, "--output_dir=ram://out", "--export_dir=ram://serving",
       "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1", *flags],
      capture_output=True, text=True, timeout=900, env=ENV, cwd=cwd)
  assert result.returncode == 0, result.stderr[-3000:]
  # A head that leaves weights unused (SQuAD's, the pooler) must not warn at every trace.
  assert "Gradients do not exist" not in result.stderr
  assert not os.listdir(cwd) or not any(n.startswith("ram") for n in os.listdir(cwd))
  return eval(result.stdout.strip().splitlines()[-1])  # pylint: disable=eval-used


def test_run_classifier_writes_everything_through_tf_io_gfile(tmp_path):
  make_sst2(tmp_path / "data", num_train=32, num_dev=8, num_test=4)
  listed = _run_in_ram("run_classifier", [
      "--task_name=SST-2", f"--data_dir={tmp_path / 'data'}",
      f"--bert_config_file={tiny_config(str(tmp_path / 'c.json'))}", f"--vocab_file={VOCAB}",
      "--max_seq_length=16", "--train_batch_size=8"], tmp_path)
  for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "checkpoint",
               "eval_results.txt", "eval_results.json", "test_results.tsv", "SST-2.tsv",
               "task_config.json", "bert_config.json", "vocab.txt", "1"):
    assert name in listed, (name, listed)


def test_run_squad_writes_everything_through_tf_io_gfile(tmp_path):
  context = "The tower was built in 1889 by Gustave Eiffel for the World's Fair in Paris."
  qas = [{"id": "q1", "question": "Who built the tower?", "is_impossible": False,
          "answers": [{"text": "Gustave Eiffel", "answer_start": context.index("Gustave")}]},
         {"id": "q2", "question": "When was it built?", "is_impossible": False,
          "answers": [{"text": "1889", "answer_start": context.index("1889")}]},
         {"id": "q3", "question": "How tall is the moon?", "is_impossible": True,
          "answers": []}]
  data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": qas}] * 1}]}
  with open(tmp_path / "squad.json", "w") as f:
    json.dump(data, f)
  listed = _run_in_ram("run_squad", [
      f"--train_file={tmp_path / 'squad.json'}", f"--predict_file={tmp_path / 'squad.json'}",
      "--version_2_with_negative", f"--bert_config_file={tiny_config(str(tmp_path / 'c.json'))}",
      f"--vocab_file={VOCAB}", "--max_seq_length=32", "--doc_stride=8",
      "--max_query_length=8", "--train_batch_size=2", "--predict_batch_size=4"], tmp_path)
  for name in ("train.tf_record", "eval.tf_record", "checkpoint", "eval_results.txt",
               "predictions.json", "nbest_predictions.json", "null_odds.json",
               "task_config.json", "bert_config.json", "vocab.txt", "1"):
    assert name in listed, (name, listed)


def test_best_of_a_sweep_loads_as_init_checkpoint_and_exports(tmp_path):
  """The sweep keeps the best run (its table, its folder, its checkpoint in output_dir), which
  a later run loads and export serves."""
  make_sst2(tmp_path / "data", num_train=128, num_dev=32)
  sweep = str(tmp_path / "sweep")
  args = toy_args(str(tmp_path), tmp_path / "data", sweep, do_train=True, do_eval=True,
                  learning_rates=(1e-6, 3e-3), num_train_epochs=10)
  results = _run(dict(args))
  best, runs = results["best"], results["runs"]
  assert [r["learning_rate"] for r in runs] == [1e-6, 3e-3]
  # 1e-6 barely moves a fresh model; 3e-3 learns the rule.
  assert runs[1]["eval_accuracy"] > runs[0]["eval_accuracy"]
  assert best["learning_rate"] == 3e-3 and best["eval_accuracy"] >= 0.9, best
  assert not os.path.exists(os.path.join(sweep, ".lock"))  # Held once for all runs, then freed.
  with open(os.path.join(sweep, "sweep_results.tsv")) as f:
    table = f.read().splitlines()
  assert table[0].split("\t")[:2] == ["learning_rate", "seed"] and len(table) == 3
  assert os.path.isdir(os.path.join(sweep, "runs", "lr0.003_seed12345"))

  # As a later run's --init_checkpoint: the whole model comes back (the same task and labels),
  # at the best run's step.
  later = dict(args, output_dir=str(tmp_path / "later"), init_checkpoint=sweep,
               bert_config_file=None, vocab_file=None, do_train=False)
  task = finetuning.build("classification", {"task_name": "SST-2", "max_seq_length": 32},
                     data_dir=str(tmp_path / "data"))
  later_runner = runner.Runner(task, runner.RunArgs(
      **{k: v for k, v in later.items() if k not in ("task_name", "data_dir", "max_seq_length")}),
      distribute.get_strategy("one_device"))
  model, step = later_runner.restore()
  assert step == best["global_step"]
  trained, _ = runner.Runner(task, runner.RunArgs(
      **{k: v for k, v in dict(args, do_train=False).items()
         if k not in ("task_name", "data_dir", "max_seq_length")}),
      distribute.get_strategy("one_device")).restore()
  assert len(model.weights) == len(trained.weights)
  for ours, theirs in zip(model.weights, trained.weights):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

  # As an export source: the SavedModel classifies as the best run does.
  path = saved_model.export_from_output_dir(sweep, str(tmp_path / "serving"),
                                            data=str(tmp_path / "data"))
  loaded = tf.saved_model.load(path).signatures["serving_default"]
  labels = loaded(text_a=tf.constant(["the movie was good", "a bad film it was"]))["label"]
  assert [l.decode() for l in labels.numpy()] == ["1", "0"]
  # output_dir's checkpoint is the best run's: evaluating it gives the best's accuracy.
  evaluated = _run(dict(args, do_train=False))
  assert evaluated["best"]["eval_accuracy"] == pytest.approx(runs[1]["eval_accuracy"])


def test_a_second_job_on_the_same_output_dir_is_refused_before_writing(tmp_path):
  make_sst2(tmp_path / "data", num_train=16, num_dev=8)
  out = str(tmp_path / "out")
  args = toy_args(str(tmp_path), tmp_path / "data", out, do_train=True, do_eval=True)
  with output_lock.lock_output_dir(out):
    with pytest.raises(output_lock.OutputBusyError,
                       match=f"^{out}: another job is writing there: pid {os.getpid()} "):
      _run(args)
    assert os.listdir(out) == [".lock"]
