"""An output_dir that run_classifier wrote before the house moved (the code at 4a9272d;
fixtures/classifier_4a9272d/make.sh says how it was made) still works with today's code: its
checkpoints (keyed by attribute paths), task_config.json and run_settings.json (by field
names) are read as they were. It predicts what it predicted then, its training resumes from
its halfway checkpoint, and it exports for serving."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from export import saved_model

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "classifier_4a9272d")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
# The flags it was trained with (make.sh), but for its files' places.
TRAINING = ["--task_name=SST-2", "--max_seq_length=16", "--do_train", "--do_eval",
            "--do_predict", "--train_batch_size=16", "--learning_rate=3e-3",
            "--num_train_epochs=6", "--save_checkpoints_steps=36", "--iterations_per_loop=12",
            "--eval_batch_size=8", "--predict_batch_size=4"]

pytestmark = pytest.mark.slow


@pytest.fixture
def old(tmp_path):
  """A copy of the fixture: data/ and out/ (the run's output_dir)."""
  shutil.copytree(FIXTURE, tmp_path / "old")
  return tmp_path / "old"


def _run_classifier(old, *flags) -> subprocess.CompletedProcess:
  return subprocess.run(
      [sys.executable, "-m", "bert_tf.scripts.run_classifier", f"--data_dir={old / 'data'}",
       f"--output_dir={old / 'out'}", *flags], capture_output=True, text=True, timeout=900,
      env=ENV)


def _then(old) -> np.ndarray:
  """The test probabilities that 4a9272d's run predicted."""
  return np.loadtxt(os.path.join(FIXTURE, "out", "test_results.tsv"))


def test_it_predicts_what_it_predicted(old):
  os.remove(old / "out" / "test_results.tsv")
  result = _run_classifier(old, "--task_name=SST-2", "--do_predict")
  assert result.returncode == 0, result.stderr[-3000:]
  then = _then(old)
  assert np.all(np.abs(then - 0.5) > 0.4)  # A trained model, sure of each answer.
  np.testing.assert_allclose(np.loadtxt(old / "out" / "test_results.tsv"), then, atol=2e-6)


def test_its_training_resumes_from_its_halfway_checkpoint(old):
  out = old / "out"
  for name in os.listdir(out):
    if name.startswith("ckpt-72."):
      os.remove(out / name)
  (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-36"\n'
                                  'all_model_checkpoint_paths: "ckpt-36"\n')
  model_files = [f"--bert_config_file={out / 'bert_config.json'}",
                 f"--vocab_file={out / 'vocab.txt'}"]
  # Its batches were grouped by length, the only order then: resuming in another is refused.
  refused = _run_classifier(old, *TRAINING, *model_files)
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1].endswith(
      "run_settings.json: --output_dir holds a run trained with other settings "
      "(group_by_length True -> False). Give a new --output_dir to train afresh (a checkpoint "
      "of this one can be its --init_checkpoint), or the same settings to resume this one")
  resumed = _run_classifier(old, *TRAINING, *model_files, "--group_by_length")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "trained to global step 72" in resumed.stdout
  assert "eval_accuracy 1," in resumed.stdout
  np.testing.assert_allclose(np.loadtxt(out / "test_results.tsv"), _then(old), atol=1e-3)


def test_it_exports_and_serves_its_predictions(old, tmp_path, serve_in_fresh_process):
  path = saved_model.export_from_output_dir(str(old / "out"), str(tmp_path / "serving"),
                                            data=str(old / "data"))
  with open(old / "data" / "test.tsv") as f:
    sentences = [line.split("\t")[1] for line in f.read().splitlines()[1:]]
  served = serve_in_fresh_process(path, {"text_a": sentences})
  np.testing.assert_allclose(served["probabilities"], _then(old), atol=2e-6)
  assert served["label"] == ["0" if p > 0.5 else "1" for p in _then(old)[:, 0]]
