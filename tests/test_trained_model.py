"""Runs that use a trained model (issue 30, part A): the trained run's settings decide a
predict-only run, empty splits and a head that no longer fits are one line; a Hugging Face
config.json as --bert_config_file; run_pretraining extended to a larger --num_train_steps.
A fine-tuned classifier as --init_checkpoint is test_run_classifier's, on its trained run."""
import json
import logging
import os
import re
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.common.errors import DataError
from bert_tf.modeling import checkpoints
from bert_tf.finetuning import runner
from bert_tf.tasks.squad import task as squad
from bert_tf.training import distribute
from bert_tf.training import pretraining
from tiny_pretraining import CONFIG, PREDS, SEQ, write_pretraining_records
from toys import MINILM, VOCAB, make_conll, tiny_config
import entry_points

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
ONE_DEVICE = distribute.get_strategy("one_device")


def _read(path) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


# NER: the trained run's settings decide a predict-only run.
@pytest.fixture(scope="module")
def toy_ner(tmp_path_factory):
  """A short run (max_seq_length 32, no document context) on the toy NER: output_dir."""
  tmp = tmp_path_factory.mktemp("ner")
  make_conll(tmp / "data", {"train": 12, "dev": 4})
  task = finetuning.build("ner", {"max_seq_length": 32, "document_context": False},
                     data_dir=str(tmp / "data"))
  args = runner.RunArgs(output_dir=str(tmp / "out"), bert_config_file=tiny_config(
      str(tmp / "bert_config.json")), vocab_file=VOCAB, do_train=True, do_predict=True,
      train_batch_size=16, predict_batch_size=16, learning_rates=(5e-3,), num_train_epochs=2)
  runner.run(task, args, ONE_DEVICE)
  return str(tmp / "out")


def _predict(data, output_dir, task_args=None, **args):
  """A predict-only run; the task from the data with `task_args`, else the flags' defaults
  (max_seq_length 128, document context)."""
  task = finetuning.build("ner", task_args, data_dir=str(data))
  return runner.run(task, runner.RunArgs(output_dir=str(output_dir), do_predict=True, **args),
                    ONE_DEVICE)


def _run_ner(data, output_dir, *flags):
  return subprocess.run(
      [sys.executable, "-m", "bert_tf.scripts.run_ner", f"--data_dir={data}",
       f"--output_dir={output_dir}", "--do_predict", *flags],
      capture_output=True, text=True, timeout=900, env=ENV)


@pytest.fixture(scope="module")
def ner_runs(toy_ner, tmp_path_factory) -> dict:
  """{name: (folder, CompletedProcess)} of run_ner --do_predict runs on from toy_ner's, each
  as a user starts it, both in one process (Python and TensorFlow started once): "predict"
  (--init_checkpoint=toy_ner, no --max_seq_length), "tags" (toy_ner's model, the data with
  an eighth tag)."""
  data = os.path.join(os.path.dirname(toy_ner), "data")
  new = tmp_path_factory.mktemp("predict")
  tags = tmp_path_factory.mktemp("tags")
  shutil.copytree(toy_ner, tags / "out")
  shutil.copytree(data, tags / "data")
  train = tags / "data" / "train.txt"
  train.write_text(_read(train) + "Zorro NN O B-MISC\n\n")
  runs = {
      "predict": (new, [f"--data_dir={data}", f"--output_dir={new / 'new'}",
                        f"--init_checkpoint={toy_ner}"]),
      "tags": (tags, [f"--data_dir={tags / 'data'}", f"--output_dir={tags / 'out'}",
                      "--max_seq_length=32", "--nodocument_context",
                      *(f"--{k}={v}" for k, v in _model_files(tags / "out").items())]),
  }
  results = entry_points.run_cases("bert_tf.scripts.run_ner",
                                   [[*argv, "--do_predict"] for _, argv in runs.values()])
  return {name: (folder, result) for (name, (folder, _)), result in zip(runs.items(), results)}


@pytest.mark.slow
def test_a_predict_only_run_takes_the_trained_runs_settings(toy_ner, ner_runs, tmp_path):
  data = os.path.join(os.path.dirname(toy_ner), "data")
  # As the original's README predicts: --init_checkpoint=$TRAINED; no --max_seq_length.
  folder, result = ner_runs["predict"]
  assert result.returncode == 0, result.stderr[-2000:]
  taken = re.search(r"the trained model's settings \(.*\): (.*)", result.stderr)
  assert taken and {"max_seq_length=32", "document_context=False"} <= set(
      taken[1].split(", ")), result.stderr[-2000:]
  assert (_read(folder / "new" / "predictions.txt") ==
          _read(os.path.join(toy_ner, "predictions.txt")))
  # A setting the user gave that disagrees is refused, naming the flag.
  with pytest.raises(ValueError, match=r"^--max_seq_length=128: the trained model has "
                     rf"max_seq_length 32 \({toy_ner}/task_config.json\)"):
    _predict(data, tmp_path / "new2", init_checkpoint=toy_ner,
             flags_given=("max_seq_length",))


# The settings of the trained run, given as flags (so that 4a9272d's code runs too).
SAME = dict(max_seq_length=32, document_context=False)


def _model_files(out) -> dict:
  return dict(bert_config_file=os.path.join(out, "bert_config.json"),
              vocab_file=os.path.join(out, "vocab.txt"))


@pytest.mark.slow
def test_a_renamed_tag_in_the_data_folder_is_named(toy_ner, tmp_path):
  out = tmp_path / "out"
  shutil.copytree(toy_ner, out)
  shutil.copytree(os.path.join(os.path.dirname(toy_ner), "data"), tmp_path / "data")
  train = tmp_path / "data" / "train.txt"
  train.write_text(_read(train).replace("-ORG", "-AORG"))
  with pytest.raises(ValueError, match=rf"^{train}: its tags O, B-AORG, B-LOC, .* are not the "
                     rf"trained model's O, B-LOC, B-ORG, .*\({out}/task_config.json\)"):
    _predict(tmp_path / "data", out, SAME, **_model_files(out))


@pytest.mark.slow
def test_a_head_that_no_longer_fits_is_the_last_line(toy_ner, ner_runs, tmp_path):
  folder, result = ner_runs["tags"]
  out, train = folder / "out", folder / "data" / "train.txt"
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      f"run_ner: error: {train} has 8 tags; the trained model has 7 ({out}/task_config.json: "
      "O, B-LOC, B-ORG, B-PER, I-LOC, I-ORG, I-PER)")
  # Any other model the checkpoint does not fit (a deeper --bert_config_file): the error, not
  # TensorFlow's warning about each value left unrestored, is the last line. A process of its
  # own: TensorFlow may log that warning as the process exits, which run_cases would not show.
  deeper = tmp_path / "deeper.json"
  deeper.write_text(json.dumps(dict(json.loads(_read(out / "bert_config.json")),
                                    num_hidden_layers=3)))
  result = _run_ner(os.path.join(os.path.dirname(toy_ner), "data"), out, "--max_seq_length=32",
                    "--nodocument_context", f"--bert_config_file={deeper}",
                    f"--vocab_file={out / 'vocab.txt'}")
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"run_ner: error: {out}/ckpt-") and "does not match" in last, last


# Empty splits: one line naming the file.
@pytest.mark.slow
def test_an_empty_dev_file_is_named(toy_ner, tmp_path):
  shutil.copytree(os.path.join(os.path.dirname(toy_ner), "data"), tmp_path / "data")
  (tmp_path / "data" / "dev.txt").write_text("-DOCSTART- -X- -X- O\n\n")
  with pytest.raises(DataError, match=rf"^{tmp_path}/data/dev.txt: no sentences \(the dev "
                     r"split, for --do_eval\)"):
    _predict(tmp_path / "data", tmp_path / "new", SAME, init_checkpoint=toy_ner, do_eval=True)


@pytest.mark.slow
def test_a_squad_predict_file_without_questions_is_named(tmp_path):
  context = "The tower was built in 1889 by Gustave Eiffel."
  train = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "q1", "question": "Who built it?",
       "answers": [{"text": "Gustave Eiffel", "answer_start": context.index("Gustave")}]}]}]}]}
  empty = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": []}]}]}
  for name, data in (("train.json", train), ("empty.json", empty)):
    (tmp_path / name).write_text(json.dumps(data))
  task = squad.SquadTask(squad.SquadConfig(max_seq_length=32, max_query_length=8, doc_stride=8),
                         train_file=str(tmp_path / "train.json"),
                         predict_file=str(tmp_path / "empty.json"))
  args = runner.RunArgs(output_dir=str(tmp_path / "out"), bert_config_file=tiny_config(
      str(tmp_path / "c.json")), vocab_file=VOCAB, do_train=True, do_eval=True,
      train_batch_size=1, num_train_epochs=1)
  with pytest.raises(DataError, match=rf"^{tmp_path}/empty.json: no questions \(the predict "
                     r"split, for --do_eval\)"):
    runner.run(task, args, ONE_DEVICE)


# A Hugging Face config.json as --bert_config_file.
def test_a_hugging_face_config_json_is_a_bert_config_file(tmp_path):
  hf = os.path.join(MINILM, "config.json")
  config, _ = checkpoints.resolve_files(hf, VOCAB, None, 128)
  assert config == checkpoints.load_config(MINILM) and config.hidden_size == 384
  # The original's schema keeps refusing typos, naming the closest key.
  typo = tmp_path / "bert_config.json"
  typo.write_text(json.dumps(dict(CONFIG.to_dict(), hiden_size=8)))
  with pytest.raises(ValueError, match=r"hiden_size.*hidden_size"):
    checkpoints.resolve_files(str(typo), VOCAB, None, 16)


# run_pretraining to a larger --num_train_steps.
@pytest.mark.slow
def test_pretraining_goes_on_to_a_larger_num_train_steps(tmp_path, caplog):
  caplog.set_level(logging.INFO, logger="absl")  # Whatever verbosity an earlier test left.
  records = write_pretraining_records(str(tmp_path / "data.tfrecord"), 16)
  config_file = str(tmp_path / "bert_config.json")
  CONFIG.to_json_file(config_file)

  def pretrain(**overrides):
    args = dict(bert_config_file=config_file, input_file=records,
                output_dir=str(tmp_path / "out"), max_seq_length=SEQ,
                max_predictions_per_seq=PREDS, train_batch_size=8, num_train_steps=2,
                num_warmup_steps=1, do_train=True)
    pretraining.pretrain(pretraining.PretrainArgs(**dict(args, **overrides)), ONE_DEVICE)
    return tf.train.latest_checkpoint(str(tmp_path / "out"))

  assert pretrain().endswith("ckpt-2")
  assert pretrain(num_train_steps=4).endswith("ckpt-4")
  # The decay rebuilt over 4 steps: at step 2 the rate is 5e-5 * (1 - 2/4).
  assert "num_train_steps 2 -> 4: training on from global step 2 to 4" in caplog.text
  assert "decays linearly to 0 at step 4 (was 2): 2.5e-05 at step 2" in caplog.text
  with pytest.raises(ValueError, match="num_train_steps 4 -> 3, but the run in --output_dir "
                     "has reached global step 4: give at least 4"):
    pretrain(num_train_steps=3)
  with pytest.raises(ValueError, match=r"\(learning_rate 5e-05 -> 0.0001; num_train_steps 4 "
                     r"-> 6\)"):
    pretrain(num_train_steps=6, learning_rate=1e-4)
