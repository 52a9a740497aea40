"""The paper's two pretraining phases, tiny: phase 1 at length 32 (5 predictions) stopping at
SWITCH of a schedule over TOTAL (--stop_at_step), phase 2 at 64 (10) on records of its own, in
a new output_dir, either way: --continue_from (phase 1's optimizer state, step and single
schedule go on to TOTAL) or --init_checkpoint (weights only, a schedule of its own that warms
up again)."""
import dataclasses
import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.common import files
from bert_tf.modeling import checkpoints
from bert_tf.modeling import pretrainer
from bert_tf.training import distribute
from bert_tf.training import optimization
from bert_tf.training import pretraining
from tiny_pretraining import (CONFIG, PREDS, SEQ, assert_same_values, checkpoint_steps,
                              checkpoint_values, killed_copy, write_pretraining_records)
from tfrecords import datasets

pytestmark = pytest.mark.slow  # Three tiny pretraining runs, more for the resume.

LONG, LONG_PREDS = 2 * SEQ, 2 * PREDS
# Phase 1 trains to SWITCH of a schedule over TOTAL, phase 2 on to TOTAL.
LR, WARMUP, SWITCH, TOTAL = 1e-3, 2, 4, 8
BETA_1, BETA_2, EPSILON = 0.9, 0.999, 1e-6  # optimization.create_optimizer's Adam.
POSITIONS = "encoder/layer_with_weights-1/embeddings/.ATTRIBUTES/VARIABLE_VALUE"
MLM_BIAS = "masked_lm/output_bias.Sbias/.ATTRIBUTES/VARIABLE_VALUE"
KERNEL = "encoder/layer_with_weights-5/kernel/.ATTRIBUTES/VARIABLE_VALUE"  # The pooler's.


def slot(name: str, which: str) -> str:
  return name.replace("/.ATTRIBUTES", f"/.OPTIMIZER_SLOT/optimizer/{which}/.ATTRIBUTES")


def args(d, phase: int, **overrides) -> pretraining.PretrainArgs:
  length = dict(max_seq_length=SEQ, max_predictions_per_seq=PREDS) if phase == 1 else dict(
      max_seq_length=LONG, max_predictions_per_seq=LONG_PREDS)
  values = dict(bert_config_file=str(d / "bert_config.json"),
                input_file=str(d / ("short" if phase == 1 else "long") / "data.tfrecord"),
                output_dir=str(d / f"phase{phase}"), do_train=True, train_batch_size=8,
                learning_rate=LR, num_warmup_steps=WARMUP, iterations_per_loop=1,
                num_train_steps=TOTAL, stop_at_step=SWITCH if phase == 1 else None,
                save_checkpoints_steps=2 if phase == 1 else 1, **length)
  return pretraining.PretrainArgs(**dict(values, **overrides))


def pretrain(a: pretraining.PretrainArgs) -> dict:
  return pretraining.pretrain(a, distribute.get_strategy("one_device"))


def learning_rates(output_dir) -> dict[int, float]:
  """The learning_rate summaries the loop wrote, by global step."""
  rates = {}
  for path in glob.glob(os.path.join(output_dir, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == "learning_rate":
          rates[event.step] = float(tf.make_ndarray(value.tensor))
  return rates


def schedule(num_train_steps: int, step: int) -> float:
  return float(optimization.learning_rate_schedule(LR, num_train_steps, WARMUP)(step))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Phase 1 (to 2, then rerun to SWITCH), then phase 2 both ways: continued to TOTAL, and
  afresh for 4 steps."""
  d = tmp_path_factory.mktemp("two_phases")
  # One config for both phases: the position table has all LONG rows from the start.
  dataclasses.replace(CONFIG, max_position_embeddings=LONG).to_json_file(
      str(d / "bert_config.json"))
  for name, seq, preds, seed in (("short", SEQ, PREDS, 0), ("long", LONG, LONG_PREDS, 1)):
    (d / name).mkdir()
    write_pretraining_records(str(d / name / "data.tfrecord"), 48, seed=seed, seq=seq,
                              preds=preds)
  pretrain(args(d, 1, stop_at_step=2))
  pretrain(args(d, 1))  # A larger --stop_at_step trains on.
  pretrain(args(d, 2, output_dir=str(d / "continued"), continue_from=str(d / "phase1")))
  pretrain(args(d, 2, output_dir=str(d / "afresh"), num_train_steps=4,
                init_checkpoint=str(d / "phase1")))
  return d


def first_gradient(d) -> dict[str, np.ndarray]:
  """The clipped gradient at phase 1's ckpt-4 on the first batch of phase 2's records (as
  pretrain's input pipeline orders them: seeded), by checkpoint name: what phase 2's first
  step must have applied."""
  a = args(d, 2)
  tf_keras.utils.set_random_seed(a.seed)  # As pretrain(): tf.data's order depends on it too.
  model = pretrainer.build_pretrainer(checkpoints.config_from_file(a.bert_config_file), LONG,
                                      LONG_PREDS)
  checkpoints.load_into_pretrainer(model, str(d / "phase1" / "ckpt-4"))
  batch = next(iter(datasets.record_dataset(
      files.list_files(a.input_file), a.record_layout(), a.train_batch_size, True,
      input_context=tf.distribute.InputContext(), seed=a.seed, drop_remainder=True)))
  with tf.GradientTape() as tape:
    loss, _ = pretrainer.pretraining_loss(batch, model(batch, training=True))
  grads, _ = tf.clip_by_global_norm(
      [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)], 1.0)
  # Named as in checkpoints: the gradients saved in the variables' places.
  for variable, grad in zip(model.trainable_variables, grads):
    variable.assign(grad)
  prefix = tf.train.Checkpoint(**model.checkpoint_items).write(str(d / "gradient" / "ckpt"))
  return checkpoint_values(prefix)


def test_phase_1_and_continued_phase_2_follow_one_schedule_over_the_total(runs):
  assert checkpoint_steps(runs / "phase1") == [2, 4]
  assert checkpoint_steps(runs / "continued") == [5, 6, 7, 8]
  rates = learning_rates(runs / "phase1")
  assert sorted(rates) == [1, 2, 3, 4]
  rates.update(learning_rates(runs / "continued"))
  # Each summary is the rate for the step after it: warm-up, then one linear decay from
  # WARMUP to 0 at TOTAL across the switch (not phase 1's own decay to 0 at SWITCH).
  assert sorted(rates) == list(range(1, TOTAL + 1))
  expected = {step: schedule(TOTAL, step) for step in rates}
  assert expected[SWITCH] > 0 and expected[TOTAL] == 0
  assert rates == pytest.approx(expected, rel=1e-6, abs=1e-12)
  assert settings(runs / "phase1")["num_train_steps"] == TOTAL
  assert "stop_at_step" not in settings(runs / "phase1")


def settings(output_dir) -> dict:
  return json.loads((output_dir / "run_settings.json").read_text())


def test_a_smaller_stop_at_step_is_already_there_and_evaluates(runs, tmp_path):
  phase1 = tmp_path / "phase1"
  shutil.copytree(runs / "phase1", phase1)
  results = pretrain(args(runs, 1, output_dir=str(phase1), stop_at_step=2, do_eval=True,
                          max_eval_steps=2))
  assert results["global_step"] == SWITCH
  assert checkpoint_steps(phase1) == [2, 4]
  assert settings(phase1) == settings(runs / "phase1")


def test_continued_phase_2_goes_on_with_phase_1s_step_weights_optimizer_and_schedule(runs):
  before = checkpoint_values(str(runs / "phase1" / "ckpt-4"))
  after = checkpoint_values(str(runs / "continued" / "ckpt-5"))
  gradient = first_gradient(runs)
  assert MLM_BIAS in gradient and any(name.startswith("next_sentence/") for name in gradient)
  # Against the largest gradient: some are float noise around 0 (the attention keys' biases).
  scale = max(np.max(np.abs(g)) for g in gradient.values())
  for name, g in gradient.items():
    # Adam's moments went on from phase 1's (fresh ones would be (1 - b1) g and (1 - b2) g^2),
    # by the gradient of phase 2's first batch (of its records from their start).
    m4, v4, m5, v5 = (values[slot(name, which)] for values in (before, after)
                      for which in "mv")
    assert np.any(m4) and np.any(v4), name
    np.testing.assert_allclose(m5, BETA_1 * m4 + (1 - BETA_1) * g, rtol=1e-4,
                               atol=1e-5 * scale, err_msg=name)
    np.testing.assert_allclose(v5, BETA_2 * v4 + (1 - BETA_2) * g ** 2, rtol=1e-4,
                               atol=1e-5 * scale ** 2, err_msg=name)
  # Step 5's update of phase 1's weights (the masked-LM output bias: no weight decay) at the
  # single schedule's rate for step 4, with Adam's bias correction for a 5th step.
  t = SWITCH + 1
  m5, v5 = after[slot(MLM_BIAS, "m")], after[slot(MLM_BIAS, "v")]
  rate = schedule(TOTAL, SWITCH) * np.sqrt(1 - BETA_2 ** t) / (1 - BETA_1 ** t)
  expected = before[MLM_BIAS] - rate * m5 / (np.sqrt(v5) + EPSILON * np.sqrt(1 - BETA_2 ** t))
  np.testing.assert_allclose(after[MLM_BIAS], expected, rtol=1e-5, atol=1e-8)


def test_the_positions_past_phase_1s_length_first_train_in_phase_2(runs):
  start = checkpoint_values(str(runs / "phase1" / "ckpt-2"))[POSITIONS]
  phase1 = checkpoint_values(str(runs / "phase1" / "ckpt-4"))[POSITIONS]
  phase2 = checkpoint_values(str(runs / "continued" / "ckpt-8"))[POSITIONS]
  assert start.shape == phase1.shape == phase2.shape == (LONG, CONFIG.hidden_size)  # Not resized.
  # In phase 1 only weight decay moves them (lr * 0.01 * w a step); in phase 2, Adam's
  # updates (~lr a step).
  assert np.max(np.abs(phase1[SEQ:] - start[SEQ:])) < 1e-5
  assert np.min(np.max(np.abs(phase2[SEQ:] - phase1[SEQ:]), axis=1)) > 1e-4
  assert np.max(np.abs(phase1[:SEQ] - start[:SEQ])) > 1e-4


def test_a_killed_continued_phase_2_resumes_from_its_own_output_dir(runs):
  """Killed after ckpt-6 and run again with the same flags: it resumes at 6 from its own
  output_dir, skipping the 2 batches of its records it had consumed (not 6), and ends on the
  uninterrupted run's ckpt-8."""
  killed = runs / "killed"
  killed_copy(runs / "continued", 6, killed, files=("run_settings.json", "bert_config.json"))
  pretrain(args(runs, 2, output_dir=str(killed), continue_from=str(runs / "phase1")))
  assert checkpoint_steps(killed)[-1] == TOTAL
  assert_same_values(checkpoint_values(str(killed / "ckpt-8")),
                     checkpoint_values(str(runs / "continued" / "ckpt-8")))


def test_phase_2_from_init_checkpoint_starts_a_schedule_of_its_own(runs):
  assert checkpoint_steps(runs / "afresh") == [1, 2, 3, 4]
  rates = learning_rates(runs / "afresh")
  assert rates[1] == pytest.approx(LR / WARMUP) and rates[2] == pytest.approx(schedule(4, 2))
  before = checkpoint_values(str(runs / "phase1" / "ckpt-4"))
  after = checkpoint_values(str(runs / "afresh" / "ckpt-1"))
  weights = [name for name in after if ".OPTIMIZER_SLOT" not in name and
             name.split("/")[0] in ("encoder", "masked_lm", "next_sentence")]
  assert MLM_BIAS in weights and any(name.startswith("next_sentence/") for name in weights)
  # Step 1's rate is warm-up's 0: the weights after it are phase 1's, both heads included.
  assert_same_values({n: after[n] for n in weights}, {n: before[n] for n in weights},
                     rtol=0, atol=0)
  # Adam's moments start afresh: m1 = (1 - b1) g, v1 = (1 - b2) g^2.
  m1, v1 = after[slot(KERNEL, "m")], after[slot(KERNEL, "v")]
  np.testing.assert_allclose((m1 / (1 - BETA_1)) ** 2, v1 / (1 - BETA_2), rtol=1e-4,
                             atol=1e-6 * np.max(v1 / (1 - BETA_2)))


@pytest.mark.parametrize("overrides, message", [
    (dict(learning_rate=2e-3), "--learning_rate=0.002, but the run --continue_from={d}/phase1 "
     "continues was trained with 0.001 ({d}/phase1/run_settings.json)"),
    (dict(num_warmup_steps=3), "--num_warmup_steps=3, but the run --continue_from={d}/phase1 "
     "continues was trained with 2"),
    (dict(optimizer="lamb"), "--optimizer=lamb, but the run --continue_from={d}/phase1 "
     "continues was trained with adamw"),
    (dict(num_train_steps=2 * TOTAL), "--num_train_steps=16, but the run --continue_from="
     "{d}/phase1 continues was trained with 8 ({d}/phase1/run_settings.json): a continued run "
     "goes on with its schedule (--num_train_steps is the total of both phases: run phase 1 "
     "with --num_train_steps=<total> --stop_at_step=<switch>)"),
    (dict(num_train_steps=SWITCH, continue_from="{d}/ended"), "--num_train_steps=4, but "
     "{d}/ended/ckpt-4 is at global step 4: the run --continue_from={d}/ended continues has "
     "already reached its total (run phase 1 with --num_train_steps=<total> "
     "--stop_at_step=<switch>)"),
    (dict(stop_at_step=SWITCH), "--stop_at_step=4, but {d}/phase1/ckpt-4 is at global step 4: "
     "a continued run trains on past 4"),
    (dict(stop_at_step=TOTAL + 1), "--stop_at_step=9, but --num_train_steps=8: training stops "
     "at a step from 1 to num_train_steps"),
    (dict(init_checkpoint="{d}/phase1"), "--continue_from={d}/phase1 and --init_checkpoint="
     "{d}/phase1: give one"),
    (dict(do_train=False, do_eval=True), "--continue_from={d}/phase1 continues training: give "
     "--do_train"),
    (dict(continue_from="{d}/long"), "--continue_from={d}/long: not a run_pretraining "
     "output_dir or one of its checkpoints (no checkpoint in {d}/long)"),
    (dict(continue_from="{d}/afresh/ckpt-9"), "--continue_from={d}/afresh/ckpt-9: not a "
     "run_pretraining output_dir or one of its checkpoints (no checkpoint in {d}/afresh)"),
    (dict(output_dir="{d}/phase1"), "--continue_from={d}/phase1 is in --output_dir={d}/phase1:"
     " a continued run (phase 2) needs an --output_dir of its own"),
])
def test_a_continue_from_that_cannot_go_on_is_refused_in_one_line(runs, overrides, message):
  ended = runs / "ended"  # A phase 1 trained to its own total (SWITCH): nothing to go on with.
  if not ended.exists():
    ended.mkdir()
    for f in [*(runs / "phase1").glob("ckpt-4.*"), runs / "phase1" / "bert_config.json"]:
      shutil.copy(f, ended)
    (ended / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
    (ended / "run_settings.json").write_text(json.dumps(
        dict(settings(runs / "phase1"), num_train_steps=SWITCH)))
  overrides = {k: v.format(d=runs) if isinstance(v, str) else v for k, v in overrides.items()}
  a = args(runs, 2, **dict(dict(output_dir=str(runs / "refused"),
                               continue_from=str(runs / "phase1")), **overrides))
  with pytest.raises(ValueError) as raised:
    pretrain(a)
  assert str(raised.value).startswith(message.format(d=runs))
  assert "\n" not in str(raised.value)
  assert not (runs / "refused" / "run_settings.json").exists()


def test_run_pretraining_refuses_a_mismatch_naming_the_flag_and_both_values(runs):
  a = args(runs, 2, output_dir=str(runs / "refused_cli"))
  flags = [f"--{name}={getattr(a, name)}" for name in (
      "bert_config_file", "input_file", "output_dir", "max_seq_length",
      "max_predictions_per_seq", "num_train_steps", "num_warmup_steps")]
  out = subprocess.run(
      [sys.executable, "-m", "bert_tf.scripts.run_pretraining", *flags, "--do_train",
       "--learning_rate=5e-4", f"--continue_from={runs / 'phase1' / 'ckpt-4'}"],
      capture_output=True, text=True, timeout=900, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert out.returncode == 1
  errors = [l for l in out.stderr.splitlines() if l.startswith("run_pretraining: error: ")]
  assert errors == [f"run_pretraining: error: --learning_rate=0.0005, but the run "
                    f"--continue_from={runs}/phase1/ckpt-4 continues was trained with 0.001 "
                    f"({runs}/phase1/run_settings.json): a continued run goes on with its "
                    "schedule (for a schedule of its own, give the checkpoint as "
                    "--init_checkpoint)"], out.stderr[-2000:]
