"""The training loop: resuming a killed run, stopping on NaN, XLA, float16, evaluation.

Also a driver for other processes: `python tests/test_training.py RECORDS INIT OUT STEPS` trains
the tiny model (tiny_pretraining) to STEPS and prints the results as JSON.
"""
import json
import os
import re
import subprocess
import sys
import types

from absl import logging
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.common import errors
from bert_tf.common import progress
from bert_tf.modeling import checkpoints
from bert_tf.modeling import configs
from bert_tf.modeling import pretrainer
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization
from tfrecords import datasets
from tiny_pretraining import (BATCH, CONFIG, PREDS, SEQ, TOTAL_STEPS, assert_same_values,
                             checkpoint_steps, checkpoint_values, train_tiny,
                             write_init_checkpoint, write_pretraining_records)

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """The uninterrupted 8-step run, and the first half of the run that gets "killed" at 4."""
  d = tmp_path_factory.mktemp("runs")
  records = ",".join(write_pretraining_records(str(d / f"data-{i}.tfrecord"), 32, seed=i)
                     for i in range(2))
  init = write_init_checkpoint(str(d / "init" / "ckpt"))
  strategy = distribute.get_strategy("one_device")
  full = train_tiny(strategy, records, init, str(d / "full"), TOTAL_STEPS)
  half = train_tiny(strategy, records, init, str(d / "killed"), TOTAL_STEPS // 2)
  return dict(dir=d, records=records, init=init, full=full, half=half)


@pytest.mark.slow
def test_killed_run_resumed_in_another_process_matches_the_uninterrupted_run(runs):
  d = runs["dir"]
  assert checkpoint_steps(d / "full") == [2, 4, 6, 8]
  assert checkpoint_steps(d / "killed") == [2, 4]
  # Resume in a new process: it must restore model, optimizer, step and input position.
  out = subprocess.run([sys.executable, __file__, runs["records"], runs["init"],
                        str(d / "killed"), str(TOTAL_STEPS)],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert out.returncode == 0, out.stderr[-3000:]
  resumed = json.loads(out.stdout.strip().splitlines()[-1])
  assert "resuming at global step 4" in out.stderr
  assert checkpoint_steps(d / "killed") == [2, 4, 6, 8]
  assert resumed["global_step"] == runs["full"]["global_step"] == TOTAL_STEPS
  assert resumed["loss"] == pytest.approx(runs["full"]["loss"], rel=1e-5)
  # Every variable, optimizer moments and step included, as after the uninterrupted run.
  final = checkpoint_values(str(d / "killed" / "ckpt-8"))
  assert_same_values(final, checkpoint_values(str(d / "full" / "ckpt-8")))
  # ... and training did move them: all but the attention key biases (softmax ignores a
  # constant shift of the scores, so their gradient is zero; biases get no weight decay).
  init = checkpoint_values(runs["init"])
  still = [n for n in init if np.allclose(init[n], final[n])]
  assert len(init) > 25 and all("_key_dense/bias" in n for n in still), still


@pytest.mark.slow
def test_a_finished_run_is_not_trained_further(runs):
  strategy = distribute.get_strategy("one_device")
  results = train_tiny(strategy, runs["records"], runs["init"], str(runs["dir"] / "full"),
                       TOTAL_STEPS)
  assert results == {"global_step": TOTAL_STEPS}
  assert checkpoint_steps(runs["dir"] / "full") == [2, 4, 6, 8]


@pytest.mark.slow
@pytest.mark.parametrize("progress_seconds", [None, 1e-9])
def test_progress_lines_change_no_step_nor_trace_again(runs, tmp_path, monkeypatch,
                                                      progress_seconds):
  """The full run (the default: a loop's steps in calls that end before the next line is due)
  ends with the weights of one call a loop (None), and of one step a call with a progress line
  after each (1e-9 s: a line always due), bit for bit.

  However many calls, the loop and its step are traced once: slots created in the loop's first
  call would make tf.function trace it twice (once to create the variables, once to run); the
  metrics' names come from the step's own trace, which the loop reuses: each trace of a real
  model is seconds of start-up."""
  lines, made = [], []
  monkeypatch.setattr(loop.logging, "info", lambda fmt, *args: lines.append(fmt % args))
  make_loop = loop._loop_fn
  monkeypatch.setattr(loop, "_loop_fn",
                      lambda strategy, step: made.append((make_loop(strategy, step), step))
                      or made[-1][0])
  train_tiny(distribute.get_strategy("one_device"), runs["records"], runs["init"],
             str(tmp_path), TOTAL_STEPS, progress_seconds=progress_seconds)
  full, ours = (checkpoint_values(str(d / f"ckpt-{TOTAL_STEPS}"))
                for d in (runs["dir"] / "full", tmp_path))
  for name, value in full.items():
    np.testing.assert_array_equal(ours[name], value, err_msg=name)
  steps = [line.split(" | ")[:2] for line in lines if line.startswith("step ")]
  # A line at each loop's end (2 steps a loop), with the loss; with 1e-9, one within it too.
  within = [1, 3, 5, 7] if progress_seconds else []
  assert [int(s[0].split()[1].split("/")[0]) for s in steps] == sorted(within + [2, 4, 6, 8])
  # (The time left in any unit: a first line's rate includes tracing, slow on a loaded machine.)
  assert all(re.fullmatch(r"[\d.,e+-]+ steps/s(, [\d.]+ (s|min|h|days) left)?", s[1])
             for s in steps), steps
  [(loop_fn, step)] = made
  assert loop_fn.experimental_get_tracing_count() == 1
  assert step.gradients.experimental_get_tracing_count() == 1
  assert sorted(step.metrics.means) == ["loss", "masked_lm_accuracy", "masked_lm_loss",
                                        "next_sentence_accuracy", "next_sentence_loss"]


@pytest.mark.slow
def test_progress_lines_come_within_the_interval_as_the_step_time_changes(runs, tmp_path,
                                                                          monkeypatch):
  """On a simulated clock that each call of the loop moves by its steps' time: a first call
  that traces for 45 s, then 0.2 s a step, twice as slow from step 200, 8x faster from step
  400. After the first line (tracing makes it late), lines are never more than the interval
  (30 s) apart, nor much less, and a line costs a handful of calls."""
  clock, calls, lines = [0.0], [], []

  def seconds(step):
    return 0.2 if step < 200 else 0.4 if step < 400 else 0.05

  make_loop = loop._loop_fn

  def timed_loop_fn(strategy, step_fn):
    run = make_loop(strategy, step_fn)

    def call(iterator, num_steps):
      done, n = sum(calls), int(num_steps)
      clock[0] += (45.0 if not calls else 0.0) + sum(seconds(done + i) for i in range(n))
      calls.append(n)
      return run(iterator, num_steps)
    return call

  monkeypatch.setattr(loop, "_loop_fn", timed_loop_fn)
  monkeypatch.setattr(loop, "time", types.SimpleNamespace(time=lambda: clock[0]))
  monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
  monkeypatch.setattr(loop.logging, "info",
                      lambda fmt, *args: lines.append((clock[0], fmt % args)))
  train_tiny(distribute.get_strategy("one_device"), runs["records"], runs["init"],
             str(tmp_path), 600, steps_per_loop=1000, save_checkpoints_steps=1000)
  times = [t for t, line in lines if line.startswith("step ")]
  assert sum(calls) == 600 and times[-1] == pytest.approx(45 + 200 * 0.2 + 200 * 0.4 + 10)
  gaps = np.diff(times)
  assert times[0] > 45 and max(gaps) <= 30.0, (times, calls)
  assert min(gaps[:-1]) >= 20.0, (times, calls)  # the last: where training ended
  assert len(calls) <= 6 * len(times), calls


@pytest.mark.slow
def test_xla_compiled_step_matches_the_plain_one(runs, tmp_path):
  strategy = distribute.get_strategy("one_device")
  results = train_tiny(strategy, runs["records"], runs["init"], str(tmp_path), 4,
                       jit_compile=True)
  assert results["loss"] == pytest.approx(runs["half"]["loss"], rel=1e-4)
  assert_same_values(checkpoint_values(str(tmp_path / "ckpt-4")),
                     checkpoint_values(str(runs["dir"] / "full" / "ckpt-4")),
                     rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_float16_with_loss_scaling_trains_close_to_float32(runs, tmp_path):
  strategy = distribute.get_strategy("one_device")
  loop.set_mixed_precision("fp16")
  try:
    results = train_tiny(strategy, runs["records"], runs["init"], str(tmp_path), 4,
                         loss_scaling=True)
  finally:
    loop.set_mixed_precision("none")
  assert results["loss"] == pytest.approx(runs["half"]["loss"], rel=2e-3)
  values = checkpoint_values(str(tmp_path / "ckpt-4"))
  assert "optimizer/loss_scale/current_loss_scale/.ATTRIBUTES/VARIABLE_VALUE" in values
  assert all(v.dtype != np.float16 for v in values.values())  # float32 master weights


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, runs):
  # Records 24..31 have NaN weights: read in order, step 4's batch is poisoned.
  records = write_pretraining_records(str(tmp_path / "nan.tfrecord"), 32, nan_from=24)
  def in_order(ctx):
    return datasets.pretraining_dataset(records, SEQ, PREDS, BATCH, is_training=False,
                                        input_context=ctx).repeat()
  strategy = distribute.get_strategy("one_device")
  out = tmp_path / "out"
  with pytest.raises(FloatingPointError, match=r"loss is nan at global step 4.*ckpt-2"):
    train_tiny(strategy, records, runs["init"], str(out), TOTAL_STEPS, dataset_fn=in_order)
  assert checkpoint_steps(out) == [2]
  assert all(np.isfinite(v).all() for v in checkpoint_values(str(out / "ckpt-2")).values())


@pytest.mark.slow
def test_nan_weights_under_a_finite_loss_are_not_saved(tmp_path, runs):
  @tf.custom_gradient
  def nan_gradient(x):
    return tf.identity(x), lambda dy: dy * np.nan

  def nan_gradient_loss(features, outputs, counts=None):
    # The loss stays finite; the update it makes does not.
    return pretrainer.pretraining_loss(
        features, dict(outputs, nsp_logits=nan_gradient(outputs["nsp_logits"])), counts=counts)
  strategy = distribute.get_strategy("one_device")
  with pytest.raises(FloatingPointError, match="weights are not finite at global step 1"):
    loop.train(strategy, lambda: pretrainer.build_pretrainer(CONFIG, SEQ, PREDS),
               lambda: optimization.create_optimizer(1e-3, TOTAL_STEPS, 0),
               nan_gradient_loss,
               lambda ctx: datasets.pretraining_dataset(runs["records"], SEQ, PREDS, BATCH,
                                                        True, ctx),
                   str(tmp_path), TOTAL_STEPS, steps_per_loop=1, save_checkpoints_steps=1,
                   count_fn=pretrainer.pretraining_loss_counts)
  assert checkpoint_steps(tmp_path) == []


@pytest.mark.slow
def test_evaluate_reports_the_checkpoint_loss_and_step(runs):
  def eval_dataset(ctx):
    return datasets.pretraining_dataset(runs["records"], SEQ, PREDS, BATCH, is_training=False,
                                        input_context=ctx)
  strategy = distribute.get_strategy("one_device")
  output_dir = str(runs["dir"] / "full")
  results = loop.evaluate(strategy, lambda: pretrainer.build_pretrainer(CONFIG, SEQ, PREDS),
                          pretrainer.pretraining_loss, eval_dataset, output_dir, max_steps=3)
  assert results["global_step"] == TOTAL_STEPS
  # The same numbers computed directly from ckpt-8 over the same 3 batches.
  model = pretrainer.build_pretrainer(CONFIG, SEQ, PREDS)
  checkpoints.load_into_pretrainer(model, os.path.join(output_dir, "ckpt-8"))
  losses, accuracies = [], []
  for features in eval_dataset(None).take(3):
    loss, metrics = pretrainer.pretraining_loss(features, model(features, training=False))
    losses.append(float(loss))
    accuracies.append(float(metrics["next_sentence_accuracy"]))
  assert results["loss"] == pytest.approx(np.mean(losses), rel=1e-5)
  assert results["next_sentence_accuracy"] == pytest.approx(np.mean(accuracies), abs=1e-6)
  assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                             "next_sentence_accuracy", "next_sentence_loss"]

  path = runs["dir"] / "eval_results.txt"
  loop.write_eval_results(str(path), results)
  lines = path.read_text().splitlines()
  assert lines[0] == "global_step = 8" and lines[1] == f"loss = {results['loss']}"
  assert [p.name for p in runs["dir"].glob("eval_results.txt*")] == ["eval_results.txt"]


@pytest.mark.slow
def test_a_truncated_shard_met_in_the_training_loop_is_named(tmp_path):
  """TensorFlow's DataLossError from inside the loop's tf.function names no file; the reader's
  guard finds the one cut short."""
  files = [write_pretraining_records(str(tmp_path / f"data-{i}.tfrecord"), 16, seed=i)
           for i in range(2)]
  with open(files[1], "r+b") as f:
    f.truncate(os.path.getsize(files[1]) - 50)
  strategy = distribute.get_strategy("one_device")
  with pytest.raises(datasets.DamagedRecordsError,
                     match=rf"^{files[1]}: damaged: truncated record at byte \d+"):
    with datasets.naming_damaged_file(files):
      loop.train(strategy, lambda: pretrainer.build_pretrainer(CONFIG, SEQ, PREDS),
                 lambda: optimization.create_optimizer(1e-3, TOTAL_STEPS, 0),
                 pretrainer.pretraining_loss,
                 lambda ctx: datasets.pretraining_dataset(files, SEQ, PREDS, BATCH, True, ctx),
                 str(tmp_path / "out"), TOTAL_STEPS, steps_per_loop=2,
                 count_fn=pretrainer.pretraining_loss_counts)


@pytest.mark.slow
def test_a_failed_save_leaves_no_half_written_checkpoint(tmp_path, runs, monkeypatch):
  """A disk that fills during a save: TensorFlow leaves ckpt-<N>_temp/ behind and says so in
  graph terms; the run removes the former, and the entry points' one line keeps the path and
  the cause only."""
  out = tmp_path / "out"
  message = (f"{{{{function_node __wrapped__SaveV2_dtypes_144_device_/job:localhost/replica:0/"
             f"task:0/device:CPU:0}}}} {out}/ckpt-2_temp/part-00000-of-00001.data; No space "
             "left on device [Op:SaveV2]")

  def full_disk(manager, checkpoint_number):
    os.makedirs(os.path.join(manager.directory, f"ckpt-{checkpoint_number}_temp"))
    raise tf.errors.ResourceExhaustedError(None, None, message)
  monkeypatch.setattr(tf.train.CheckpointManager, "save", full_disk)
  with pytest.raises(SystemExit) as exit_info:
    with errors.exit_on_user_error("run_pretraining"):
      train_tiny(distribute.get_strategy("one_device"), runs["records"], runs["init"],
                 str(out), 2)
  assert str(exit_info.value) == (f"run_pretraining: error: {out}/ckpt-2_temp/part-00000-of-"
                                  "00001.data; No space left on device")
  assert not list(out.glob("ckpt-*"))


def test_mixed_precision_names_are_checked():
  with pytest.raises(ValueError, match="'fp8' is not one of"):
    loop.set_mixed_precision("fp8")


if __name__ == "__main__":
  logging.set_verbosity(logging.INFO)
  _records, _init, _output_dir, _steps = sys.argv[1:]
  print(json.dumps(train_tiny(distribute.get_strategy("one_device"), _records, _init,
                              _output_dir, int(_steps))))


def test_models_are_built_and_traced_without_autograph(monkeypatch):
  """Keras would rewrite each Model Garden layer's `call` with AutoGraph (seconds per
  start-up): every AutoGraph conversion goes through `api.converted_call`; count them."""
  from tensorflow.python.autograph.impl import api  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling.encoder import build_encoder  # pylint: disable=g-import-not-at-top
  converted = []
  original = api.converted_call

  def counting(f, *args, **kwargs):
    converted.append(f)
    return original(f, *args, **kwargs)

  monkeypatch.setattr(api, "converted_call", counting)
  config = configs.BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
                              num_attention_heads=2, intermediate_size=32,
                              max_position_embeddings=16)
  model = loop.without_autograph(build_encoder)(config)
  spec = {name: tf.TensorSpec([2, None], tf.int32)
          for name in ("input_word_ids", "input_mask", "input_type_ids")}
  tf.function(lambda x: loop.without_autograph(model)(x, training=True)
              ).get_concrete_function(spec)

  def layer_calls():
    return [f for f in converted if isinstance(getattr(f, "__self__", None), tf_keras.layers.Layer)]

  assert layer_calls() == []
  build_encoder(config)  # As Keras builds it on its own: converted.
  assert len(layer_calls()) >= 3  # The block, its attention and more.
