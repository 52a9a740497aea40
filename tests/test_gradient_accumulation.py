"""Gradient accumulation (--gradient_accumulation_steps): a batch taken in micro-batches makes
the update the whole batch makes, across micro-batches and replicas, with one all-reduce and
one loss-scale decision per update."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.modeling import checkpoints
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling import pretrainer
from bert_tf.tasks.ner.task import NerConfig, NerTask
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization
import processes
from tfrecords import datasets, schema, writer
from toys import classifier_runner, make_sst2, toy_args
from tiny_pretraining import (CONFIG, PREDS, SEQ, VOCAB_SIZE, assert_same_values,
                              checkpoint_values, killed_copy, write_init_checkpoint)

BATCH = 16
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def write_uneven_records(path: str, num_records: int, seed: int = 0) -> str:
  """Pretraining records with 1 to PREDS real predictions each: micro-batches then hold
  different numbers of masked positions, so a mean per micro-batch is not the batch's."""
  rng = np.random.default_rng(seed)
  rows = []
  for _ in range(num_records):
    real = rng.integers(1, PREDS + 1)
    rows.append(dict(input_ids=rng.integers(1, VOCAB_SIZE, SEQ), input_mask=np.ones(SEQ),
                     segment_ids=np.repeat([0, 1], SEQ // 2),
                     masked_lm_positions=rng.choice(np.arange(1, SEQ), PREDS, replace=False),
                     masked_lm_ids=rng.integers(1, VOCAB_SIZE, PREDS),
                     masked_lm_weights=(np.arange(PREDS) < real).astype(np.float32),
                     next_sentence_labels=[rng.integers(0, 2)]))
  writer.write_records(path, schema.pretraining_features(SEQ, PREDS), rows)
  return path


def train(strategy, records: str, init: str, output_dir: str, num_train_steps: int,
          micro_batches: int, optimizer: str = "adamw", total_steps: int = 6) -> dict:
  """The tiny pretrainer from `init` on batches of BATCH (seeded order): a checkpoint every
  update; the schedule is `total_steps` long, whatever num_train_steps stops at."""
  tf.random.set_seed(0)
  return loop.train(
      strategy, lambda: pretrainer.build_pretrainer(CONFIG, SEQ, PREDS),
      lambda: optimization.create_optimizer(1e-3, total_steps, 2, optimizer=optimizer),
      pretrainer.pretraining_loss,
      lambda ctx: datasets.pretraining_dataset(records, SEQ, PREDS, BATCH, True, ctx, seed=1),
      output_dir, num_train_steps, steps_per_loop=1, save_checkpoints_steps=1,
      init_fn=lambda model: checkpoints.load_into_pretrainer(model, init),
      count_fn=pretrainer.pretraining_loss_counts, micro_batches=micro_batches)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp("accumulation")
  return dict(root=root, records=write_uneven_records(str(root / "data.tfrecord"), 96),
              init=write_init_checkpoint(str(root / "init" / "ckpt")))


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_three_updates_in_four_micro_batches_equal_three_whole_batch_updates(data, optimizer):
  """K=3 updates, dropout off: every weight (and Adam/LAMB moment) within 1e-5, and the same
  losses; bias correction, LAMB's trust ratio and weight decay each act once per update."""
  strategy = distribute.get_strategy("one_device")
  runs = {n: train(strategy, data["records"], data["init"],
                   str(data["root"] / f"{optimizer}-{n}"), 3, micro_batches=n)
          for n in (1, 4)}
  assert runs[1]["global_step"] == runs[4]["global_step"] == 3
  assert runs[4]["loss"] == pytest.approx(runs[1]["loss"], rel=1e-5)
  whole = checkpoint_values(str(data["root"] / f"{optimizer}-1" / "ckpt-3"))
  parts = checkpoint_values(str(data["root"] / f"{optimizer}-4" / "ckpt-3"))
  initial = checkpoint_values(data["init"])
  moved = [k for k in initial if k in whole and not np.allclose(initial[k], whole[k])]
  assert len(moved) > 10  # The updates did something to compare.
  assert_same_values(parts, whole, rtol=0, atol=1e-5)


def test_the_masked_lm_loss_is_normalised_over_the_whole_batch(data):
  """Why the counts matter: with these records the mean of the micro-batches' own masked-LM
  means is not the batch's; the accumulated loss and gradients are the batch's."""
  tf.random.set_seed(0)  # The batch drawn, whatever earlier tests set.
  model = pretrainer.build_pretrainer(CONFIG, SEQ, PREDS)
  [batch] = datasets.pretraining_dataset(data["records"], SEQ, PREDS, BATCH, True,
                                         seed=1).take(1)
  count_fn = pretrainer.pretraining_loss_counts
  whole = loop.accumulated_gradients(model, pretrainer.pretraining_loss, batch,
                                     loop.update_counts(count_fn, batch))
  parts = loop.accumulated_gradients(model, pretrainer.pretraining_loss, batch,
                                     loop.update_counts(count_fn, batch), micro_batches=4)
  np.testing.assert_allclose(parts[0], whole[0], rtol=1e-6)
  for key in whole[1]:
    np.testing.assert_allclose(parts[1][key], whole[1][key], rtol=1e-5)
  for a, b in zip(parts[2], whole[2]):
    if b is not None:
      np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), atol=1e-6)
  # An untrained model's losses are all near log(vocab), whatever the weighting: on logits
  # that spread them, a mean of the parts' own means is another number than the batch's.
  logits = tf.constant(np.random.default_rng(0).normal(0, 5, (BATCH, PREDS, VOCAB_SIZE)),
                       tf.float32)
  outputs = lambda rows: {"mlm_logits": logits[rows], "nsp_logits": tf.zeros([BATCH // 4, 2])}
  parts = _split(batch, 4)
  own_means = np.mean([
      pretrainer.pretraining_loss(part, outputs(slice(4 * i, 4 * i + 4)))[1]["masked_lm_loss"]
      for i, part in enumerate(parts)])
  batch_mean = pretrainer.pretraining_loss(
      batch, {"mlm_logits": logits, "nsp_logits": tf.zeros([BATCH, 2])})[1]["masked_lm_loss"]
  assert abs(own_means - float(batch_mean)) > 0.01


def _split(batch: dict, n: int) -> list[dict]:
  """n equal micro-batches, in order, as `loop.accumulated_gradients` splits a batch."""
  return [{k: tf.split(v, n)[i] for k, v in batch.items()} for i in range(n)]


def test_ner_per_token_loss_is_exact_across_micro_batches(tiny_bert_config):
  """A mean over labelled tokens (NER's `loss_counts`), through the tf.while_loop split: the
  loss and gradients of 4 micro-batches are the batch's."""
  task = NerTask(NerConfig(max_seq_length=16, labels=["O", "B-PER", "I-PER", "X"]))
  model = task.build_model(tiny_bert_config)
  rng = np.random.default_rng(3)
  lengths = rng.integers(3, 16, 8)
  mask = (np.arange(16)[None] < lengths[:, None]).astype(np.int32)
  labels = np.where(mask == 1, rng.integers(-1, 3, (8, 16)), -1).astype(np.int32)
  batch = dict(input_word_ids=tf.constant(rng.integers(1, 50, (8, 16)) * mask, tf.int32),
               input_mask=tf.constant(mask), input_type_ids=tf.zeros([8, 16], tf.int32),
               label_ids=tf.constant(labels))
  counts = loop.update_counts(task.loss_counts, batch)
  assert float(counts["labelled tokens"]) == (labels >= 0).sum()
  whole = loop.accumulated_gradients(model, task.loss, batch, counts, training=False)
  parts = loop.accumulated_gradients(model, task.loss, batch, counts, micro_batches=4,
                                     training=False)
  np.testing.assert_allclose(parts[0], whole[0], rtol=1e-6)
  np.testing.assert_allclose(parts[1]["accuracy"], whole[1]["accuracy"], rtol=1e-6)
  for a, b in zip(parts[2], whole[2]):
    if b is not None:
      np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), atol=1e-6)


@pytest.mark.slow
def test_a_killed_run_resumes_bit_for_bit_and_with_another_accumulation(data):
  """The straight run's ckpt-2 is what a run killed after its second update leaves: resumed
  with the same accumulation and with another, it ends as the straight run."""
  strategy = distribute.get_strategy("one_device")
  root = data["root"]
  train(strategy, data["records"], data["init"], str(root / "straight"), 4, micro_batches=2)
  for name, resumed_with in (("same", 2), ("other", 4)):
    killed_copy(root / "straight", 2, root / name)
    train(strategy, data["records"], data["init"], str(root / name), 4,
          micro_batches=resumed_with)
  straight = checkpoint_values(str(root / "straight" / "ckpt-4"))
  # The same micro-batches again: the same numbers, bit for bit.
  for key, value in checkpoint_values(str(root / "same" / "ckpt-4")).items():
    np.testing.assert_array_equal(value, straight[key], err_msg=key)
  # The same records (skipped in examples), summed in another order.
  assert_same_values(checkpoint_values(str(root / "other" / "ckpt-4")), straight, rtol=0,
                     atol=1e-5)


def test_fp16_an_overflowing_micro_batch_skips_the_whole_update(data):
  """Loss scaling decides once per update: one micro-batch of two with an infinite gradient
  skips the update (the weights stay) and halves the scale once; both overflowing, once too.
  One run of three updates: clean, the second micro-batch poisoned, both."""
  [batch] = datasets.pretraining_dataset(data["records"], SEQ, PREDS, 8, True, seed=1).take(1)

  @tf.custom_gradient
  def poison(x, poisoned):
    return tf.identity(x), lambda dy: (tf.where(poisoned, np.inf, 1.0) * dy, None)

  def loss_fn(features, outputs, counts=None):
    # Records whose first token is 0 (none in the data) give an infinite gradient.
    poisoned = tf.reduce_any(features["input_word_ids"][:, 1] == 0)
    outputs = dict(outputs, nsp_logits=poison(outputs["nsp_logits"], poisoned))
    return pretrainer.pretraining_loss(features, outputs, counts=counts)

  def poisoned(rows):
    ids = batch["input_word_ids"].numpy()
    ids[rows, 1] = 0
    return tf.data.Dataset.from_tensors(dict(batch, input_word_ids=tf.constant(ids)))
  updates = [[], [5], [1, 6]]  # Rows 0-3 are the first micro-batch, 4-7 the second.
  batches = poisoned(updates[0]).concatenate(poisoned(updates[1])).concatenate(
      poisoned(updates[2]))
  out = data["root"] / "fp16"
  loop.train(distribute.get_strategy("one_device"),
             lambda: pretrainer.build_pretrainer(CONFIG, SEQ, PREDS),
             lambda: optimization.create_optimizer(1e-3, 6, 0, loss_scaling=True), loss_fn,
             lambda ctx: batches, str(out), len(updates), steps_per_loop=1,
             save_checkpoints_steps=1,
             init_fn=lambda m: checkpoints.load_into_pretrainer(m, data["init"]),
             count_fn=pretrainer.pretraining_loss_counts, micro_batches=2)
  scale = "optimizer/loss_scale/current_loss_scale/.ATTRIBUTES/VARIABLE_VALUE"
  values = [checkpoint_values(data["init"])] + [
      checkpoint_values(str(out / f"ckpt-{step}")) for step in (1, 2, 3)]
  assert values[1][scale] == 2.0 ** 15
  assert any(not np.array_equal(values[0][k], values[1][k]) for k in values[0]
             if k in values[1])
  for step, rows in enumerate(updates[1:], 2):
    assert values[step][scale] == values[step - 1][scale] / 2, rows
    for key in values[0]:
      if key in values[step] and "optimizer" not in key:
        np.testing.assert_array_equal(values[step][key], values[step - 1][key], err_msg=key)


@pytest.mark.slow
def test_fine_tuning_in_micro_batches_cut_to_their_longest_trains_as_the_batch(tmp_path):
  """run_classifier's random batches of 16, as 8 micro-batches sorted by length and each cut
  (one pass each) or as the default 4: the same model after 4 updates (dropout off)."""
  make_sst2(tmp_path / "data", num_train=64)
  config = tmp_path / "no_dropout.json"  # toy_args writes its own bert_config.json.
  BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0).to_json_file(str(config))
  values = {}
  for n in (1, 8):
    out = tmp_path / f"out{n}"
    args = toy_args(str(tmp_path), tmp_path / "data", out, bert_config_file=str(config),
                    do_train=True, num_train_epochs=1, gradient_accumulation_steps=n)
    assert classifier_runner(args).run()["best"]["global_step"] == 4
    values[n] = checkpoint_values(tf.train.latest_checkpoint(str(out)))
  assert_same_values(values[8], values[1], rtol=0, atol=1e-5)
  with pytest.raises(ValueError, match=r"--train_batch_size=16 .* give a multiple of 3$"):
    classifier_runner(toy_args(str(tmp_path), tmp_path / "data", tmp_path / "out3",
                               do_train=True, gradient_accumulation_steps=3))


def test_the_batch_must_divide_into_replicas_and_micro_batches():
  assert loop.micro_batch_size(256, 2, 4) == 32
  with pytest.raises(ValueError, match=r"^--train_batch_size=30 \(the global batch of one "
                     r"update\) does not divide into 2 replica\(s\) x "
                     r"--gradient_accumulation_steps=4 micro-batches: give a multiple of 8$"):
    loop.micro_batch_size(30, 2, 4)


@pytest.mark.slow
def test_mirrored_one_all_reduce_per_update_and_the_whole_batch_update(tmp_path):
  """Two replicas on two logical CPUs, each taking its half in 2 micro-batches: the update of
  the whole batch on one device (the masked positions counted across replicas), and as many
  reductions traced as without accumulation."""
  out = subprocess.run([sys.executable, __file__, str(tmp_path)], capture_output=True,
                       text=True, timeout=900, env=ENV)
  assert out.returncode == 0, out.stderr[-3000:]
  results = json.loads(out.stdout.strip().splitlines()[-1])
  assert results["replicas"] == 2
  # Without accumulation: the gradients' one batched all-reduce, the counts' one.
  reductions = results["reductions"]
  assert reductions["1"] == reductions["2"] > 0, reductions
  one = checkpoint_values(str(tmp_path / "one_device-1" / "ckpt-2"))
  for n in ("1", "2"):
    assert_same_values(checkpoint_values(str(tmp_path / f"mirrored-{n}" / "ckpt-2")), one,
                       rtol=0, atol=1e-5)


def _mirrored_driver(work_dir: str) -> None:
  processes.two_cpu_devices()
  processes.tiny_model_settings()
  records = write_uneven_records(os.path.join(work_dir, "data.tfrecord"), 64)
  init = write_init_checkpoint(os.path.join(work_dir, "init", "ckpt"))
  train(distribute.get_strategy("one_device"), records, init,
        os.path.join(work_dir, "one_device-1"), 2, micro_batches=1)
  # Every reduction across replicas goes through these two (all_reduce, the optimizer's
  # gradient all-reduce, metrics): count the calls while the step is traced and run.
  calls = {"n": 0}
  extended = tf.distribute.StrategyExtended
  for name in ("batch_reduce_to", "reduce_to"):
    original = getattr(extended, name)

    def counted(self, *args, _original=original, **kwargs):
      calls["n"] += 1
      return _original(self, *args, **kwargs)
    setattr(extended, name, counted)
  strategy = distribute.get_strategy("mirrored")
  reductions = {}
  for n in (1, 2):
    calls["n"] = 0
    train(strategy, records, init, os.path.join(work_dir, f"mirrored-{n}"), 2, micro_batches=n)
    reductions[n] = calls["n"]
  print(json.dumps(dict(replicas=strategy.num_replicas_in_sync, reductions=reductions)))


if __name__ == "__main__":
  _mirrored_driver(sys.argv[1])
