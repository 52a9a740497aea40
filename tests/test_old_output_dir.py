"""An output_dir that run_classifier wrote before the house moved (the code at 4a9272d;
fixtures/classifier_4a9272d/make.sh says how it was made) still works with today's code: its
checkpoints (keyed by attribute paths), task_config.json and run_settings.json (by field
names) are read as they were. It predicts what it predicted then, its training resumes from
its halfway checkpoint, and it exports for serving."""
import os
import shutil

import numpy as np
import pytest

from entry_points import run_cases
from export import saved_model

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "classifier_4a9272d")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
# The flags it was trained with (make.sh), but for its files' places.
TRAINING = ["--task_name=SST-2", "--max_seq_length=16", "--do_train", "--do_eval",
            "--do_predict", "--train_batch_size=16", "--learning_rate=3e-3",
            "--num_train_epochs=6", "--save_checkpoints_steps=36", "--iterations_per_loop=12",
            "--eval_batch_size=8", "--predict_batch_size=4"]

pytestmark = pytest.mark.slow


def _copy(folder):
  """A copy of the fixture in `folder`: data/ and out/ (the run's output_dir)."""
  shutil.copytree(FIXTURE, folder / "old")
  return folder / "old"


@pytest.fixture
def old(tmp_path):
  return _copy(tmp_path)


def _flags(old, *flags) -> list[str]:
  return [f"--data_dir={old / 'data'}", f"--output_dir={old / 'out'}", *flags]


def _then(old) -> np.ndarray:
  """The test probabilities that 4a9272d's run predicted."""
  return np.loadtxt(os.path.join(FIXTURE, "out", "test_results.tsv"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
  """run_classifier on copies of the fixture, in one process (each start costs seconds):
  predicting on one, its test_results.tsv removed; on another, its last checkpoint removed,
  resuming in another batch order (refused), then in its own (resumed)."""
  predicting, resuming = (_copy(tmp_path_factory.mktemp(name)) for name in ("predict", "resume"))
  os.remove(predicting / "out" / "test_results.tsv")
  out = resuming / "out"
  for name in os.listdir(out):
    if name.startswith("ckpt-72."):
      os.remove(out / name)
  (out / "checkpoint").write_text('model_checkpoint_path: "ckpt-36"\n'
                                  'all_model_checkpoint_paths: "ckpt-36"\n')
  model_files = [f"--bert_config_file={out / 'bert_config.json'}",
                 f"--vocab_file={out / 'vocab.txt'}"]
  # Its batches were grouped by length, the only order then: resuming in another is refused.
  predicted, refused, resumed = run_cases(
      "bert_tf.scripts.run_classifier",
      [_flags(predicting, "--task_name=SST-2", "--do_predict"),
       _flags(resuming, *TRAINING, *model_files),
       _flags(resuming, *TRAINING, *model_files, "--group_by_length")], env=ENV)
  return dict(predicting=predicting, predicted=predicted, resuming=resuming, refused=refused,
              resumed=resumed)


def test_it_predicts_what_it_predicted(runs):
  assert runs["predicted"].returncode == 0, runs["predicted"].stderr[-3000:]
  then = _then(runs["predicting"])
  assert np.all(np.abs(then - 0.5) > 0.4)  # A trained model, sure of each answer.
  np.testing.assert_allclose(np.loadtxt(runs["predicting"] / "out" / "test_results.tsv"), then,
                             atol=2e-6)


def test_its_training_resumes_from_its_halfway_checkpoint(runs):
  refused, resumed = runs["refused"], runs["resumed"]
  assert refused.returncode != 0
  assert refused.stderr.strip().splitlines()[-1].endswith(
      "run_settings.json: --output_dir holds a run trained with other settings "
      "(group_by_length True -> False). Give a new --output_dir to train afresh (a checkpoint "
      "of this one can be its --init_checkpoint), or the same settings to resume this one")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "trained to global step 72" in resumed.stdout
  assert "eval_accuracy 1," in resumed.stdout
  np.testing.assert_allclose(np.loadtxt(runs["resuming"] / "out" / "test_results.tsv"),
                             _then(runs["resuming"]), atol=1e-3)


def test_it_exports_and_serves_its_predictions(old, tmp_path, serve_in_plain_tf):
  path = saved_model.export_from_output_dir(str(old / "out"), str(tmp_path / "serving"),
                                            data=str(old / "data"))
  with open(old / "data" / "test.tsv") as f:
    sentences = [line.split("\t")[1] for line in f.read().splitlines()[1:]]
  served = serve_in_plain_tf(path, {"text_a": sentences})
  np.testing.assert_allclose(served["probabilities"], _then(old), atol=2e-6)
  assert served["label"] == ["0" if p > 0.5 else "1" for p in _then(old)[:, 0]]
