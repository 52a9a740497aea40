"""--recompute_layers (`encoder.recomputed_blocks`): each Transformer block's forward pass
computed again in the backward pass. The same loss, gradients and dropout masks as without,
eagerly, in a tf.function and under XLA; checkpoints either way; a run of the runner and of
pretraining with it, and one resumed without it; refused with dropout under several replicas.

`python tests/test_recompute.py` is the several-replicas driver: it must split the CPU into
two logical devices before TensorFlow initialises, so it runs in a process of its own.
"""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.modeling import encoder
from bert_tf.training import loop
import processes

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def _model(config, recompute: bool) -> tf_keras.Model:
  """The tiny encoder (dropout on: BertConfig's 0.1), seeded alike whatever `recompute`."""
  tf_keras.utils.set_random_seed(7)
  with encoder.recomputed_blocks(recompute):
    return encoder.build_encoder(config)


def _micro_batches(lengths: tuple[int, ...] = (12, 16)) -> tuple[dict, ...]:
  """Micro-batches of these lengths (by default two: the model is called twice in a step)."""
  rng = np.random.default_rng(0)
  return tuple({"input_word_ids": tf.constant(rng.integers(1, 1000, (4, n)), tf.int32),
                "input_mask": tf.ones((4, n), tf.int32),
                "input_type_ids": tf.zeros((4, n), tf.int32)} for n in lengths)


def _loss(features, outputs, counts=None):
  loss = (tf.reduce_mean(outputs["sequence_output"] ** 2) +
          tf.reduce_mean(outputs["pooled_output"]))
  return loss, {}


def _steps(model, how: str, lengths: tuple[int, ...] = (12, 16)) -> list:
  """(loss, gradients) of two steps on the same micro-batches, as the training loop computes
  them (`loop.accumulated_gradients` in a tf.function without AutoGraph, optionally under
  XLA): a step's dropout masks differ from the last one's only if the generators advanced as
  they should."""
  def gradients(features):
    loss, _, grads = loop.accumulated_gradients(
        model, _loss, features, loop.update_counts(loop.count_records, features))
    return loss, [tf.convert_to_tensor(g) for g in grads]
  if how != "eager":
    gradients = tf.function(gradients, autograph=False, jit_compile=how == "xla")
  return [gradients(_micro_batches(lengths)) for _ in range(2)]


def _largest_difference(steps, others) -> float:
  return max(float(np.max(np.abs(a - b))) for (loss, grads), (other_loss, other_grads)
             in zip(steps, others) for a, b in zip([loss, *grads], [other_loss, *other_grads]))


@pytest.mark.parametrize("how", ["eager", "tf.function",
                                 pytest.param("xla", marks=pytest.mark.slow)])
def test_the_same_loss_and_gradients_with_dropout_on(tiny_bert_config, how):
  # Under XLA one block and one micro-batch: compiling each call of a block (its two passes
  # and dropout masks) takes most of the test's time, and blocks and micro-batches one after
  # another are the eager and tf.function cases'.
  config, lengths = (dataclasses.replace(tiny_bert_config, num_hidden_layers=1), (16,)) if (
      how == "xla") else (tiny_bert_config, (12, 16))
  plain = _steps(_model(config, recompute=False), how, lengths)
  recomputed = _steps(_model(config, recompute=True), how, lengths)
  # The same to rounding (here 0.0 but under XLA, which fuses the second pass its own way).
  assert _largest_difference(plain, recomputed) <= 1e-6
  assert float(plain[0][0]) != float(plain[1][0])  # The two steps drew different masks.


def test_the_pretrainers_last_block_too(tiny_bert_config):
  """The pretrainer's last block attends from the masked positions only ([queries, hidden
  states, mask]): both kinds of state get their gradients."""
  from bert_tf.modeling import pretrainer  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  features = {"input_word_ids": rng.integers(1, 1000, (4, 16)), "input_mask": np.ones((4, 16)),
              "input_type_ids": np.zeros((4, 16)),
              "masked_lm_positions": np.stack([rng.choice(16, 3, replace=False)
                                               for _ in range(4)]),
              "masked_lm_ids": rng.integers(1, 1000, (4, 3)), "masked_lm_weights": np.ones((4, 3)),
              "next_sentence_labels": rng.integers(0, 2, (4, 1))}
  features = {k: tf.constant(v, tf.float32 if k == "masked_lm_weights" else tf.int32)
              for k, v in features.items()}
  steps = []
  for recompute in (False, True):
    tf_keras.utils.set_random_seed(7)
    with encoder.recomputed_blocks(recompute):
      model = pretrainer.build_pretrainer(tiny_bert_config, 16, 3)

    @tf.function(autograph=False)
    def gradients(features, model=model):
      loss, _, grads = loop.accumulated_gradients(
          model, pretrainer.pretraining_loss, features,
          loop.update_counts(pretrainer.pretraining_loss_counts, features))
      return loss, [tf.convert_to_tensor(g) for g in grads if g is not None]
    steps.append([gradients(features)])
  assert len(steps[0][0][1]) == len(steps[1][0][1])
  # Rounding: the hidden states' two gradients (as queries, as keys) are summed apart.
  assert _largest_difference(*steps) <= 1e-6


def test_without_the_generators_set_back_the_masks_differ(tiny_bert_config, monkeypatch):
  """What makes the test above pass: a naive recompute draws new masks in its second pass
  (other gradients) and leaves the generators advanced twice (the next micro-batch's and the
  next step's masks differ)."""
  monkeypatch.setattr(encoder, "_dropout_generators", lambda block: [])
  plain = _steps(_model(tiny_bert_config, recompute=False), "tf.function")
  naive = _steps(_model(tiny_bert_config, recompute=True), "tf.function")
  assert _largest_difference(plain[:1], naive[:1]) > 1e-3
  assert float(plain[1][0]) != float(naive[1][0])


def test_only_training_recomputes(tiny_bert_config, monkeypatch):
  recomputed = []
  recompute_grad = tf.recompute_grad
  monkeypatch.setattr(tf, "recompute_grad", lambda f: recomputed.append(f) or recompute_grad(f))
  model = _model(tiny_bert_config, recompute=True)
  features = _micro_batches()[0]
  model(features, training=False)
  assert not recomputed
  model(features, training=True)
  assert len(recomputed) == tiny_bert_config.num_hidden_layers
  recomputed.clear()
  _model(tiny_bert_config, recompute=False)(features, training=True)
  assert not recomputed


def test_checkpoints_load_either_way(tiny_bert_config, tmp_path):
  """No layer or variable of its own: a checkpoint written with recompute on restores, every
  value consumed, into a model built with it off, and the reverse."""
  for source, target in ((True, False), (False, True)):
    model = encoder.create_variables(_model(tiny_bert_config, source))
    prefix = tf.train.Checkpoint(model=model).write(str(tmp_path / f"from_{source}"))
    other = encoder.create_variables(_model(tiny_bert_config, target))
    for v in other.variables:
      v.assign(tf.zeros_like(v))
    tf.train.Checkpoint(model=other).read(prefix).assert_consumed()
    for a, b in zip(model.variables, other.variables):
      assert a.name == b.name
      np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.slow
def test_a_fine_tuning_run_trains_with_it(tmp_path):
  from toys import classifier_runner, make_sst2, toy_args  # pylint: disable=g-import-not-at-top
  make_sst2(tmp_path / "data", num_train=64, num_dev=16)
  args = toy_args(str(tmp_path), tmp_path / "data", tmp_path / "out", do_train=True,
                  do_eval=True, recompute_layers=True, num_train_epochs=0.5,
                  iterations_per_loop=1)
  results = classifier_runner(args).run()["best"]
  assert results["global_step"] == 2 and np.isfinite(results["eval_loss"])
  with open(tmp_path / "out" / loop.RUN_SETTINGS) as f:
    assert "recompute_layers" not in json.load(f)


@pytest.mark.slow
def test_pretraining_with_it_resumes_without_it(tmp_path, tiny_config_file):
  """Not a run setting: the same math, so a run may go on with the flag switched."""
  from tiny_pretraining import PREDS, write_pretraining_records  # pylint: disable=g-import-not-at-top
  from bert_tf.training import distribute, pretraining  # pylint: disable=g-import-not-at-top
  records = write_pretraining_records(str(tmp_path / "records.tfrecord"), 32, seq=32)
  args = pretraining.PretrainArgs(
      bert_config_file=tiny_config_file, input_file=records, output_dir=str(tmp_path / "out"),
      max_seq_length=32, max_predictions_per_seq=PREDS, do_train=True, train_batch_size=8,
      num_train_steps=2, num_warmup_steps=1, save_checkpoints_steps=2, iterations_per_loop=2,
      recompute_layers=True)
  strategy = distribute.get_strategy("one_device")
  pretraining.pretrain(args, strategy)
  pretraining.pretrain(dataclasses.replace(args, num_train_steps=4, recompute_layers=False,
                                           do_eval=True), strategy)
  assert loop.checkpoint_step(args.output_dir) == 4


@pytest.mark.slow
def test_several_replicas_refuse_it_with_dropout_only(tmp_path):
  out = subprocess.run([sys.executable, __file__], capture_output=True, text=True,
                       timeout=900, env=ENV)
  assert out.returncode == 0, out.stderr[-3000:]
  results = json.loads(out.stdout.strip().splitlines()[-1])
  assert results["replicas"] == 2
  assert results["refused"].startswith("--recompute_layers with dropout under 2 replicas")
  assert results["without_dropout"] <= 1e-6


def _several_replicas_driver() -> None:
  """Under Mirrored over two CPUs: with dropout, building a recomputing encoder is refused;
  without, a replica's gradients with recompute equal those without."""
  processes.two_cpu_devices()
  processes.tiny_model_settings()
  from bert_tf.modeling.configs import BertConfig  # pylint: disable=g-import-not-at-top
  config = BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  results = {"replicas": strategy.num_replicas_in_sync}
  with strategy.scope():
    try:
      _model(config, recompute=True)
    except ValueError as e:
      results["refused"] = str(e)
    no_dropout = dataclasses.replace(config, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    models = [_model(no_dropout, recompute) for recompute in (False, True)]

  @tf.function(autograph=False)
  def gradients(model):
    def step():
      features = _micro_batches()[0]
      return loop.accumulated_gradients(
          model, _loss, features, loop.update_counts(loop.count_records, features))[2]
    return strategy.experimental_local_results(strategy.run(step))[0]
  plain, recomputed = (gradients(m) for m in models)
  results["without_dropout"] = max(float(tf.reduce_max(tf.abs(tf.convert_to_tensor(a) -
                                                              tf.convert_to_tensor(b))))
                                   for a, b in zip(plain, recomputed))
  print(json.dumps(results))


if __name__ == "__main__":
  import bert_tf  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
  _several_replicas_driver()
