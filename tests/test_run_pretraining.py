"""run_pretraining end to end, as a user runs it: outputs, --init_checkpoint, and bad input;
a packed run's checkpoint fine-tuned and exported; pretrain() in this process: damaged or
foreign record files named, a busy output_dir refused."""
import json
import logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.common import output_lock
from bert_tf.finetuning import runner
from bert_tf.modeling import checkpoints
from bert_tf.modeling import pretrainer
from bert_tf.training import distribute
from bert_tf.training import pretraining
from export import tf_serving
import entry_points
from tiny_pretraining import (CONFIG, PREDS, SEQ, VOCAB_SIZE, assert_same_values,
                              checkpoint_steps, checkpoint_values, write_init_checkpoint,
                              write_pretraining_records)
from tfrecords import datasets, schema, writer
from toys import FILLER, make_sst2

pytestmark = pytest.mark.slow  # Every test here trains, exports or starts processes.

def read_results(path) -> dict[str, float]:
  return {k: float(v) for k, v in (line.split(" = ") for line in
                                   open(path, encoding="utf-8").read().splitlines())}


def write_short_records(path: str, num_records: int) -> str:
  """Records of 6 to SEQ tokens, padded to SEQ, masked by the original's count (15%, at
  least 1): what packing packs."""
  rng = np.random.default_rng(0)
  pad = lambda values, width: np.pad(values, (0, width - len(values)))
  rows = []
  for _ in range(num_records):
    n = int(rng.integers(6, SEQ + 1))
    masked = min(PREDS, max(1, round(n * 0.15)))
    rows.append(dict(
        input_ids=pad(rng.integers(1, VOCAB_SIZE, n), SEQ), input_mask=pad(np.ones(n), SEQ),
        segment_ids=pad(np.arange(n) >= n // 2, SEQ),
        masked_lm_positions=pad(np.sort(rng.choice(np.arange(1, n), masked, replace=False)),
                                PREDS),
        masked_lm_ids=pad(rng.integers(1, VOCAB_SIZE, masked), PREDS),
        masked_lm_weights=pad(np.ones(masked), PREDS),
        next_sentence_labels=[rng.integers(0, 2)]))
  writer.write_records(path, schema.pretraining_features(SEQ, PREDS), rows)
  return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  """The trained run (4 steps, evaluated) and `reruns`' runs on from it, each as a user starts
  it, all in one process of their own (Python and TensorFlow started once, not once a run)."""
  d = tmp_path_factory.mktemp("pretraining")
  records = write_pretraining_records(str(d / "data.tfrecord"), 48)
  write_short_records(str(d / "short.tfrecord"), 96)
  config_file = str(d / "bert_config.json")
  CONFIG.to_json_file(config_file)
  common = [f"--bert_config_file={config_file}", f"--input_file={records}",
            f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}",
            "--train_batch_size=8", "--eval_batch_size=8", "--max_eval_steps=3",
            "--num_train_steps=4", "--num_warmup_steps=1", "--iterations_per_loop=2",
            "--save_checkpoints_steps=2"]
  trained = d / "trained"
  names, cases = _reruns(d, trained)
  out, packed, *outs = entry_points.run_cases(
      "bert_tf.scripts.run_pretraining",
      [common + [f"--output_dir={trained}", "--do_train", "--do_eval"],
       common + [f"--input_file={d / 'short.tfrecord'}", "--pack_sequences",
                 "--packing_buffer=64", f"--output_dir={d / 'packed'}", "--do_train",
                 "--do_eval"],
       *(case if isinstance(case, entry_points.Call) else common + case for case in cases)])
  assert out.returncode == 0, out.stderr[-3000:]
  return dict(dir=d, common=common, trained=trained, log=out.stderr, stdout=out.stdout,
              reruns=dict(zip(names, outs), packed=packed))


def test_trains_checkpoints_summarizes_and_evaluates(setup):
  trained = setup["trained"]
  assert checkpoint_steps(trained) == [2, 4]
  assert re.search(r"step 4/4 \| [\d.,e+-]+ steps/s, 0 s left \| loss ", setup["log"])
  assert "examples_per_second" in setup["log"]
  assert list(trained.glob("events.out.tfevents.*")) and list(
      (trained / "eval").glob("events.out.tfevents.*"))
  assert json.loads((trained / "bert_config.json").read_text()) == CONFIG.to_dict()
  results = read_results(trained / "eval_results.txt")
  assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                             "next_sentence_accuracy", "next_sentence_loss"]
  assert results["global_step"] == 4
  # The run ends on a summary of what it did.
  assert re.search(rf"run_pretraining: done in [\d,]+ s; outputs in {trained}\n"
                   r"  the model at global step 4\n  loss [\d.]+, masked_lm_accuracy [\d.]+",
                   setup["stdout"]), setup["stdout"]
  assert results["loss"] == pytest.approx(results["masked_lm_loss"] +
                                          results["next_sentence_loss"], rel=1e-5)


# Bad input: the flags of each case (after the common ones, so they win), the messages its one
# error line must hold.
BAD_INPUT = [
    (["--input_file={dir}/missing-*.tfrecord"], ["no file matches '{dir}/missing-*.tfrecord'"]),
    (["--max_seq_length=64"],
     ["{dir}/data.tfrecord: feature 'input_ids' has length 32 in the records, but "
      "--max_seq_length=64"]),
    # A checkpoint of another model size must not load (the loader's error, surfaced).
    (["--bert_config_file={dir}/wide.json", "--do_eval",
      "--init_checkpoint={dir}/trained/ckpt-4"], ["ckpt-4: does not match the model"]),
    # Resuming checkpoints of one config with another: refused before anything is written.
    (["--bert_config_file={dir}/wide.json", "--output_dir={dir}/trained"],
     ["trained/bert_config.json: the checkpoints in --output_dir were made with this config, "
      "which differs from --bert_config_file {dir}/wide.json"]),
    # Resuming with another learning rate: refused, naming what differs.
    (["--output_dir={dir}/trained", "--learning_rate=1e-3"],
     ["trained/run_settings.json: --output_dir holds a run trained with other settings "
      "(learning_rate 5e-05 -> 0.001)"]),
    # A misspelt key must not train the default size.
    (["--bert_config_file={dir}/misspelt.json"],
     ["misspelt.json: unknown key 'hiden_size' (did you mean 'hidden_size'?)"]),
    (["--bert_config_file={dir}/small_vocab.json"],
     ["{dir}/data.tfrecord: feature 'input_ids' holds token id", "vocab_size is 5"]),
    # An OS error (the output's parent is a file): one line naming the path, no traceback.
    (["--output_dir={dir}/data.tfrecord/out"], ["{dir}/data.tfrecord is not a directory"]),
    (["--learning_rate=1e30", "--num_warmup_steps=0"],
     ["the loss is nan at global step 2;", "The last good checkpoint is none"]),
    # Packing: fewer masked LM slots than one record holds; a run resumed packed.
    (["--pack_sequences", "--max_predictions_per_pack=4"],
     [f"--max_predictions_per_pack=4: a packed row's masked LM slots go from {PREDS} "
      "(--max_predictions_per_seq, one record's) to 15"]),
    (["--output_dir={dir}/trained", "--pack_sequences"],
     ["--output_dir holds a run trained with other settings (max_predictions_per_pack None "
      "-> 6; max_sequences_per_pack None -> 3; pack_sequences None -> True"]),
    (["--pack_sequences", "--max_sequences_per_pack=1"],
     ["--max_sequences_per_pack=1: --pack_sequences packs at least 2 records a row"]),
]


def _reruns(d, trained) -> tuple[list[str], list]:
  """The names and cases (flags after the common ones, and the steps between) of the runs on
  from the trained one: eval_only, killed (resumed after ckpt-2), damaged (resumed past a
  damaged ckpt-4), from_damaged (a damaged --init_checkpoint), bad-<i> (BAD_INPUT's cases)."""
  wide = dict(CONFIG.to_dict(), hidden_size=48, intermediate_size=96)
  (d / "wide.json").write_text(json.dumps(wide))
  misspelt = {("hiden_size" if k == "hidden_size" else k): v for k, v in CONFIG.to_dict().items()}
  (d / "misspelt.json").write_text(json.dumps(misspelt))
  (d / "small_vocab.json").write_text(json.dumps(dict(CONFIG.to_dict(), vocab_size=5)))
  Call = entry_points.Call  # pylint: disable=invalid-name
  # A save cut short by a full disk, one killed half-way: as the run's latest, as an init.
  between = [Call("tiny_pretraining.killed_copy", [str(trained), 2, str(d / "killed")]),
             Call("shutil.copytree", [str(trained), str(d / "damaged")]),
             Call("os.mkdir", [str(d / "damaged" / "ckpt-6_temp")]),
             Call("tiny_pretraining.killed_copy", [str(trained), 4, str(d / "damaged_init")])]
  between += [Call("os.truncate", [str(damaged / "ckpt-4.data-00000-of-00001"), 1000])
              for damaged in (d / "damaged", d / "damaged_init")]
  # Packed: trained (`packed`, by the same flags as `trained` and its own records) in
  # `setup`'s first process; killed after its ckpt-2 like `killed`.
  between.append(Call("tiny_pretraining.killed_copy", [str(d / "packed"), 2,
                                                       str(d / "packed_killed")]))
  short, packed = [f"--input_file={d / 'short.tfrecord'}"], ["--pack_sequences",
                                                            "--packing_buffer=64"]
  cases = {
      "eval_only": [f"--output_dir={d / 'eval_only'}", "--do_eval",
                    f"--init_checkpoint={trained / 'ckpt-4'}"],
      "killed": [f"--output_dir={d / 'killed'}", "--do_train"],
      "damaged": [f"--output_dir={d / 'damaged'}", "--do_train"],
      "from_damaged": [f"--output_dir={d / 'from_damaged'}", "--do_eval",
                       f"--init_checkpoint={d / 'damaged_init' / 'ckpt-4'}"],
      "nvidia": [f"--output_dir={d / 'nvidia'}", "--num_accumulation_steps=4",
                 "--train_batch_size=32", "--do_train"],
      "packed_killed": [*short, *packed, f"--output_dir={d / 'packed_killed'}", "--do_train"],
      # Its checkpoint unpacked, evaluated on the same records.
      "packed_unpacked": [*short, f"--output_dir={d / 'packed_unpacked'}", "--do_eval",
                          f"--init_checkpoint={d / 'packed' / 'ckpt-4'}"]}
  for i, (flags, _) in enumerate(BAD_INPUT):
    flags = [f.format(dir=d) for f in flags]
    do = [] if "--do_eval" in flags else ["--do_train"]
    # Later flags win: those of the case override the common ones.
    cases[f"bad-{i}"] = [f"--output_dir={d / 'bad'}", *flags, *do]
  return list(cases), between + list(cases.values())


@pytest.fixture(scope="module")
def reruns(setup) -> dict:
  """{name: CompletedProcess} of `_reruns`' runs."""
  return setup["reruns"]


def test_eval_only_from_init_checkpoint_reproduces_the_trained_results(setup, reruns):
  out = reruns["eval_only"]
  assert out.returncode == 0, out.stderr[-3000:]
  results = read_results(setup["dir"] / "eval_only" / "eval_results.txt")
  trained = read_results(setup["trained"] / "eval_results.txt")
  assert results["global_step"] == 0  # Nothing trained here: the weights came from ckpt-4.
  for key in ("loss", "masked_lm_accuracy", "next_sentence_loss"):
    assert results[key] == pytest.approx(trained[key], rel=1e-5), key


def test_resumed_run_reads_on_from_the_same_input_position(setup, reruns):
  """A run "killed" after ckpt-2 and resumed in another process ends with exactly the
  uninterrupted run's ckpt-4: the weights, the optimizer moments and step, and so the same
  batches (CONFIG has no dropout; --seed fixes the input order)."""
  out = reruns["killed"]
  assert out.returncode == 0, out.stderr[-3000:]
  assert "resuming at global step 2" in out.stderr
  assert_same_values(checkpoint_values(str(setup["dir"] / "killed" / "ckpt-4")),
                     checkpoint_values(str(setup["trained"] / "ckpt-4")))


def test_a_damaged_latest_checkpoint_is_skipped_and_training_redone_from_the_one_before(
    setup, reruns):
  damaged = setup["dir"] / "damaged"
  out = reruns["damaged"]
  assert out.returncode == 0, out.stderr[-3000:]
  assert f"skipping a damaged checkpoint: {damaged}/ckpt-4: the checkpoint is damaged" \
      in out.stderr
  assert "resuming at global step 2" in out.stderr
  assert not (damaged / "ckpt-6_temp").exists()
  assert_same_values(checkpoint_values(str(damaged / "ckpt-4")),
                     checkpoint_values(str(setup["trained"] / "ckpt-4")))
  # As an --init_checkpoint, a damaged one is named as damaged, not as another model.
  out = reruns["from_damaged"]
  assert out.returncode == 1
  assert (f"run_pretraining: error: {setup['dir']}/damaged_init/ckpt-4: the checkpoint is "
          "damaged (truncated, or changed since it was saved)") in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("case", range(len(BAD_INPUT)))
def test_bad_input_exits_nonzero_with_a_clear_message(setup, reruns, case):
  d = setup["dir"]
  out = reruns[f"bad-{case}"]
  assert out.returncode == 1
  # One line says what is wrong, no traceback.
  errors = [l for l in out.stderr.splitlines() if l.startswith("run_pretraining: error: ")]
  assert len(errors) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
  for message in BAD_INPUT[case][1]:
    assert message.format(dir=d) in errors[0], errors[0]
  assert json.loads((d / "trained" / "bert_config.json").read_text()) == CONFIG.to_dict()


def test_nvidias_flag_is_refused_with_the_conversion(reruns):
  out = reruns["nvidia"]
  assert out.returncode != 0
  assert ("NVIDIA's --num_accumulation_steps takes --train_batch_size as the per-GPU "
          "micro-batch" in out.stderr)
  assert "--gradient_accumulation_steps=N" in out.stderr and "Traceback" not in out.stderr


def test_packed_run_trains_resumes_and_its_checkpoint_evaluates_unpacked(setup, reruns):
  """--pack_sequences on records of 6-32 tokens: ~1.5 records a row, said by the progress line;
  killed after ckpt-2 and resumed, the uninterrupted run's ckpt-4; evaluation (always
  unpacked) the same from the packed run as from its checkpoint in an unpacked one."""
  d = setup["dir"]
  out = reruns["packed"]
  assert out.returncode == 0, out.stderr[-3000:]
  assert checkpoint_steps(d / "packed") == [2, 4]
  line = re.search(r"step 4/4 \| [\d.,e+-]+ steps/s, 0 s left \| loss .*", out.stderr)[0]
  rates = dict(re.findall(r"(\w+)_per_second ([\d.e+-]+)", line))
  assert set(rates) == {"examples", "sequences", "tokens"}, line
  # Rows of 32, records of 19 tokens on average: at most 1.68 a row (1.4-1.6 a batch here).
  assert 1.2 < float(rates["sequences"]) / float(rates["examples"]) <= 3, line
  settings = json.loads((d / "packed" / "run_settings.json").read_text())
  assert (settings["pack_sequences"], settings["max_sequences_per_pack"],
          settings["max_predictions_per_pack"], settings["packing_buffer"]) == (True, 3, 6, 64)

  out = reruns["packed_killed"]
  assert out.returncode == 0, out.stderr[-3000:]
  assert "resuming at global step 2" in out.stderr
  assert_same_values(checkpoint_values(str(d / "packed_killed" / "ckpt-4")),
                     checkpoint_values(str(d / "packed" / "ckpt-4")))

  out = reruns["packed_unpacked"]
  assert out.returncode == 0, out.stderr[-3000:]
  packed = read_results(d / "packed" / "eval_results.txt")
  unpacked = read_results(d / "packed_unpacked" / "eval_results.txt")
  for key in ("loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_loss"):
    assert unpacked[key] == pytest.approx(packed[key], rel=1e-5), key


def test_a_packed_runs_checkpoint_fine_tunes_and_exports_as_any_other(setup, reruns, tmp_path,
                                                                       caplog):
  """The packed run's ckpt-4 as a fine-tuning run's --init_checkpoint, its bert_config.json
  found beside it: the classifier starts from its encoder, every weight, and the toy SST-2
  trains, evaluates, predicts and exports a SavedModel that answers as the run predicted."""
  assert reruns["packed"].returncode == 0, reruns["packed"].stderr[-3000:]
  packed = str(setup["dir"] / "packed" / "ckpt-4")
  caplog.set_level(logging.INFO, logger="absl")  # Whatever verbosity an earlier test left.
  # CONFIG's 100 ids as a vocabulary: the special tokens, the toy's words, unused pieces.
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", *FILLER]
  words += [f"[unused{i}]" for i in range(VOCAB_SIZE - len(words))]
  (tmp_path / "vocab.txt").write_text("".join(f"{w}\n" for w in words))
  make_sst2(tmp_path / "data", num_train=64, num_dev=16, num_test=4)
  task = finetuning.build("classification", {"task_name": "SST-2", "max_seq_length": SEQ},
                          data_dir=str(tmp_path / "data"))
  run = runner.Runner(task, runner.RunArgs(
      output_dir=str(tmp_path / "out"), init_checkpoint=packed,
      vocab_file=str(tmp_path / "vocab.txt"), do_train=True, do_eval=True, do_predict=True,
      train_batch_size=16, eval_batch_size=16, predict_batch_size=4, learning_rates=(3e-3,),
      num_train_epochs=2, export_dir=str(tmp_path / "serving")),
      distribute.get_strategy("one_device"), exporter=tf_serving.export)
  # What training starts from (`Runner.init_fn`, before output_dir has a checkpoint): the
  # encoder the packed checkpoint holds, as the (unpacked) pretrainer reads it.
  model, step = run.restore()
  read = pretrainer.build_pretrainer(CONFIG, SEQ, PREDS)
  assert "encoder" in checkpoints.load_into_pretrainer(read, packed)
  ours, theirs = model.checkpoint_items["encoder"].weights, read.checkpoint_items["encoder"].weights
  assert step == 0 and [w.name for w in ours] == [w.name for w in theirs]
  for a, b in zip(ours, theirs):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)

  caplog.clear()  # restore() said it too: the line below must be training's own.
  best = run.run()["best"]
  assert (f"initialized the encoder from {packed}; the classification head is drawn fresh"
          in caplog.text)
  assert best["global_step"] == 64 // 16 * 2 and np.isfinite(best["eval_loss"]), best
  predicted = np.loadtxt(tmp_path / "out" / "test_results.tsv")
  with open(tmp_path / "data" / "test.tsv", encoding="utf-8") as f:
    sentences = [line.split("\t")[1] for line in f.read().splitlines()[1:]]
  served = tf.saved_model.load(best["export_path"]).signatures["serving_default"](
      text_a=tf.constant(sentences))
  np.testing.assert_allclose(served["probabilities"].numpy(), predicted, atol=1e-5)


def _pretrain(tmp_path, input_file: str, **overrides) -> dict:
  """pretrain() in this process on the tiny model."""
  config_file = str(tmp_path / "bert_config.json")
  CONFIG.to_json_file(config_file)
  args = pretraining.PretrainArgs(
      bert_config_file=config_file, input_file=input_file, output_dir=str(tmp_path / "out"), max_seq_length=SEQ, max_predictions_per_seq=PREDS,
      train_batch_size=8, eval_batch_size=8, num_train_steps=2, num_warmup_steps=1,
      **overrides)
  return pretraining.pretrain(args, distribute.get_strategy("one_device"))


def test_a_file_that_is_no_record_file_in_the_glob_is_named(tmp_path):
  """`--input_file='out/*'` also matches create_pretraining_data's stats JSON."""
  write_pretraining_records(str(tmp_path / "pretrain.tfrecord"), 8)
  (tmp_path / "pretrain.stats.json").write_text('{\n  "documents": 2\n}\n')
  with pytest.raises(datasets.DamagedRecordsError,
                     match=f"^{tmp_path}/pretrain.stats.json: not a TFRecord file"):
    _pretrain(tmp_path, f"{tmp_path}/pretrain*", do_train=True)


def test_a_truncated_shard_is_named_when_the_run_meets_it(tmp_path):
  files = [write_pretraining_records(str(tmp_path / f"data-{i}.tfrecord"), 16, seed=i)
           for i in range(2)]
  with open(files[0], "r+b") as f:
    f.truncate(os.path.getsize(files[0]) - 50)  # Its first record still reads: the check passes.
  init = write_init_checkpoint(str(tmp_path / "init" / "ckpt"))
  with pytest.raises(datasets.DamagedRecordsError,
                     match=rf"^{files[0]}: damaged: truncated record at byte \d+"):
    _pretrain(tmp_path, ",".join(files), do_eval=True, init_checkpoint=init)


def test_a_second_job_on_the_same_output_dir_is_refused_before_writing(tmp_path):
  records = write_pretraining_records(str(tmp_path / "data.tfrecord"), 8)
  with output_lock.lock_output_dir(str(tmp_path / "out")):
    with pytest.raises(output_lock.OutputBusyError,
                       match=f"^{tmp_path}/out: another job is writing there: pid {os.getpid()} "):
      _pretrain(tmp_path, records, do_train=True)
    assert os.listdir(tmp_path / "out") == [".lock"]
