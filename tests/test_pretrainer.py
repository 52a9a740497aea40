"""The pretraining model and loss: outputs, the original's loss, the LTR ablation, training."""
import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.modeling import pretrainer
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.pretrainer import (build_pretrainer, pretraining_loss,
                                         restore_original_tokens)

CONFIG = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=48, max_position_embeddings=16)
SEQ, PREDS, BATCH, MASK_ID = 12, 3, 4, 3


def _features(seed=0):
  """A batch of records as create_pretraining_data makes them: [MASK] at the masked
  positions, zero-padded sequences and predictions, NSP labels."""
  rng = np.random.default_rng(seed)
  original = rng.integers(5, CONFIG.vocab_size, (BATCH, SEQ))
  lengths = [SEQ, 9, 7, 10]
  mask = np.array([[1] * n + [0] * (SEQ - n) for n in lengths])
  original = original * mask
  positions = np.zeros((BATCH, PREDS), np.int64)
  weights = np.zeros((BATCH, PREDS), np.float32)
  for b, n in enumerate(lengths):
    k = 2 if b == 2 else PREDS  # One row with a padding slot in its predictions.
    positions[b, :k] = np.sort(rng.choice(np.arange(1, n), k, replace=False))
    weights[b, :k] = 1.0
  ids = original.copy()
  for b in range(BATCH):
    for p, w in zip(positions[b], weights[b]):
      if w:
        ids[b, p] = MASK_ID
  types = np.zeros_like(ids)
  types[:, 6:] = 1
  return original, dict(
      input_word_ids=tf.constant(ids, tf.int32), input_mask=tf.constant(mask, tf.int32),
      input_type_ids=tf.constant(types * mask, tf.int32),
      masked_lm_positions=tf.constant(positions, tf.int32),
      masked_lm_ids=tf.constant(np.take_along_axis(original, positions, 1) * (weights > 0),
                                tf.int32),
      masked_lm_weights=tf.constant(weights),
      next_sentence_labels=tf.constant([[0], [1], [1], [0]], tf.int32))


@pytest.mark.parametrize("objective,nsp", [("mlm", True), ("mlm", False), ("ltr", False)])
def test_outputs_and_checkpoint_items(objective, nsp):
  model = build_pretrainer(CONFIG, SEQ, PREDS, objective=objective, nsp=nsp)
  _, features = _features()
  outputs = model(features)
  lm_length = PREDS if objective == "mlm" else SEQ
  assert outputs["mlm_logits"].shape == (BATCH, lm_length, CONFIG.vocab_size)
  assert outputs["mlm_logits"].dtype == tf.float32
  assert ("nsp_logits" in outputs) == nsp
  assert sorted(model.checkpoint_items) == sorted(
      ["encoder", "masked_lm"] + (["next_sentence"] if nsp else []))
  assert model.encoder.name.endswith("causal" if objective == "ltr" else "bidirectional")
  loss, metrics = pretraining_loss(features, outputs, objective=objective, nsp=nsp)
  expected = {"masked_lm_loss", "masked_lm_accuracy"}
  if nsp:
    expected |= {"next_sentence_loss", "next_sentence_accuracy"}
  assert set(metrics) == expected
  assert loss.dtype == tf.float32 and np.isfinite(loss.numpy())


@pytest.mark.parametrize("num_layers", [1, 2])
def test_last_block_at_the_read_positions_equals_the_whole_encoder(num_layers):
  """The MLM model runs its last block from [CLS] and the masked positions only: its logits
  and gradients equal the whole encoder's read at those positions (padding rows included)."""
  model = build_pretrainer(dataclasses.replace(CONFIG, num_hidden_layers=num_layers), SEQ,
                           PREDS)
  _, features = _features()

  def whole_encoder():
    encoded = model.encoder({k: features[k] for k in pretrainer.ENCODER_INPUTS})
    return (model.masked_lm(encoded["sequence_output"],
                            masked_positions=features["masked_lm_positions"]),
            model.next_sentence(encoded["pooled_output"]))

  def fast_path():
    outputs = model(features)
    return outputs["mlm_logits"], outputs["nsp_logits"]

  results = []
  for forward in (whole_encoder, fast_path):
    with tf.GradientTape() as tape:
      mlm, nsp = forward()
      total = tf.reduce_sum(mlm * mlm) + tf.reduce_sum(nsp)
    results.append((mlm, nsp, tape.gradient(total, model.trainable_variables)))
  (mlm_a, nsp_a, grads_a), (mlm_b, nsp_b, grads_b) = results
  np.testing.assert_allclose(mlm_b, mlm_a, atol=1e-5)
  np.testing.assert_allclose(nsp_b, nsp_a, atol=1e-5)
  for a, b in zip(grads_a, grads_b):
    np.testing.assert_allclose(tf.convert_to_tensor(b), tf.convert_to_tensor(a), atol=1e-4)


def test_bad_arguments_are_clear_errors():
  with pytest.raises(ValueError, match="pass nsp=False"):
    build_pretrainer(CONFIG, SEQ, PREDS, objective="ltr", nsp=True)
  with pytest.raises(ValueError, match="objective 'rtl'"):
    build_pretrainer(CONFIG, SEQ, PREDS, objective="rtl")
  with pytest.raises(ValueError, match="max_position_embeddings 16"):
    build_pretrainer(CONFIG, 32, PREDS)
  model = build_pretrainer(CONFIG, SEQ, PREDS, nsp=False)
  _, features = _features()
  with pytest.raises(ValueError, match="lacks a next-sentence head"):
    pretraining_loss(features, model(features), nsp=True)


def test_mlm_loss_is_the_originals_weighted_mean():
  _, features = _features()
  labels = features["masked_lm_ids"].numpy()
  weights = features["masked_lm_weights"].numpy()
  # Uniform logits: every prediction costs log(V). Make the first prediction of each row
  # right and the rest wrong, so the accuracy counts only weighted predictions.
  logits = np.zeros((BATCH, PREDS, CONFIG.vocab_size), np.float32)
  outputs = {"mlm_logits": tf.constant(logits)}
  loss, metrics = pretraining_loss(features, outputs, nsp=False)
  np.testing.assert_allclose(loss, math.log(CONFIG.vocab_size) * weights.sum()
                             / (weights.sum() + 1e-5), rtol=1e-6)
  logits[:, :, 0] = 1.0  # A wrong guess (labels are >= 5) everywhere...
  logits[np.arange(BATCH), 0, labels[:, 0]] = 5.0  # ...but right at each row's first.
  _, metrics = pretraining_loss(features, {"mlm_logits": tf.constant(logits)}, nsp=False)
  np.testing.assert_allclose(metrics["masked_lm_accuracy"], BATCH / weights.sum(), rtol=1e-5)


def test_ltr_restores_the_original_tokens():
  original, features = _features()
  np.testing.assert_array_equal(restore_original_tokens(features), original)
  # Padding slots (position 0, weight 0) leave [CLS]'s position alone.
  assert features["masked_lm_weights"].numpy()[2, -1] == 0
  # The LTR model sees the original tokens: masked records give the same logits and loss as
  # the unmasked originals with no predictions.
  model = build_pretrainer(CONFIG, SEQ, PREDS, objective="ltr", nsp=False)
  unmasked = dict(features, input_word_ids=tf.constant(original, tf.int32),
                  masked_lm_weights=tf.zeros_like(features["masked_lm_weights"]))
  masked_out, unmasked_out = model(features), model(unmasked)
  np.testing.assert_allclose(masked_out["mlm_logits"], unmasked_out["mlm_logits"], atol=1e-6)
  np.testing.assert_allclose(pretraining_loss(features, masked_out, "ltr", nsp=False)[0],
                             pretraining_loss(unmasked, unmasked_out, "ltr", nsp=False)[0],
                             rtol=1e-6)


def test_ltr_predicts_the_next_token_over_real_tokens_only():
  original, features = _features()
  mask = features["input_mask"].numpy()
  # Logits that name token t+1 at each position t: all right...
  logits = np.zeros((BATCH, SEQ, CONFIG.vocab_size), np.float32)
  for b in range(BATCH):
    for t in range(SEQ - 1):
      logits[b, t, original[b, t + 1]] = 30.0
  _, metrics = pretraining_loss(features, {"mlm_logits": tf.constant(logits)}, "ltr", nsp=False)
  np.testing.assert_allclose(metrics["masked_lm_accuracy"], 1.0, rtol=1e-5)
  assert metrics["masked_lm_loss"] < 1e-6
  # ...then wrong wherever the target is padding: targets past the end do not count.
  pad_target = np.zeros((BATCH, SEQ), bool)
  pad_target[:, :-1] = mask[:, 1:] == 0
  logits[pad_target] = 0.0
  logits[pad_target, 4] = 30.0  # Token 4 is never a target.
  _, metrics = pretraining_loss(features, {"mlm_logits": tf.constant(logits)}, "ltr", nsp=False)
  np.testing.assert_allclose(metrics["masked_lm_accuracy"], 1.0, rtol=1e-5)
  # Logits naming token t itself (no shift) are wrong.
  same = np.zeros_like(logits)
  for b in range(BATCH):
    for t in range(SEQ):
      same[b, t, original[b, t]] = 30.0
  _, metrics = pretraining_loss(features, {"mlm_logits": tf.constant(same)}, "ltr", nsp=False)
  assert metrics["masked_lm_accuracy"] < 0.2


# The masked LM with NSP under XLA: test_training's test_xla_compiled_step_matches_the_plain_one
# (the same steps as without; compiling a step costs seconds of CPU).
@pytest.mark.slow
@pytest.mark.parametrize("objective,nsp,jit_compile", [("mlm", True, False), ("ltr", False, True)])
def test_overfits_a_few_records(objective, nsp, jit_compile):
  tf.random.set_seed(1)
  model = build_pretrainer(CONFIG, SEQ, PREDS, objective=objective, nsp=nsp)
  _, features = _features()
  optimizer = tf_keras.optimizers.Adam(3e-3)

  @tf.function(jit_compile=jit_compile)
  def step():
    with tf.GradientTape() as tape:
      loss, metrics = pretraining_loss(features, model(features, training=True), objective, nsp)
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients((g, v) for g, v in zip(grads, variables) if g is not None)
    return loss, metrics

  losses = [float(step()[0]) for _ in range(60)]
  assert all(np.isfinite(losses))
  assert losses[-1] < 0.3 * losses[0]
  assert np.mean(losses[-10:]) < np.mean(losses[:10])


def test_mixed_precision_logits_and_loss_are_float32():
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    model = build_pretrainer(CONFIG, SEQ, PREDS)
    _, features = _features()
    outputs = model(features, training=True)
    # The Model Garden keeps LayerNorm outputs float32; the matmuls run in float16.
    assert model.encoder.get_layer("transformer/layer_0").compute_dtype == "float16"
    assert model.masked_lm.compute_dtype == "float16"
    assert outputs["mlm_logits"].dtype == tf.float32
    assert outputs["nsp_logits"].dtype == tf.float32
    loss, _ = pretraining_loss(features, outputs)
    assert loss.dtype == tf.float32 and np.isfinite(loss.numpy())
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")


def test_lm_cross_entropy_and_accuracy_are_tensorflows_softmax_and_argmax():
  """The masked-LM loss's own cross-entropy (a custom gradient) against
  sparse_softmax_cross_entropy_with_logits: value and gradient; accuracy against argmax."""
  rng = np.random.default_rng(0)
  logits = tf.constant(rng.normal(0, 3, (3, 4, 50)), tf.float32)
  labels = tf.constant(rng.integers(0, 50, (3, 4)), tf.int32)
  labels = tf.tensor_scatter_nd_update(  # Two positions predicted right.
      labels, [[0, 0], [2, 3]], tf.argmax(tf.gather_nd(logits, [[0, 0], [2, 3]]), -1,
                                          output_type=tf.int32))
  weights = tf.constant([[1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1]], tf.float32)

  def loss_and_accuracy(fn, logits):
    with tf.GradientTape() as tape:
      tape.watch(logits)
      loss, accuracy = fn(2 * logits, labels, weights)  # Something to chain through.
    return loss, accuracy, tape.gradient(loss, logits)

  def reference(logits, labels, weights):
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    denominator = tf.reduce_sum(weights) + 1e-5
    return (tf.reduce_sum(weights * xent) / denominator,
            tf.reduce_sum(weights * correct) / denominator)

  ours = loss_and_accuracy(
      lambda *args: pretrainer._weighted_lm_loss(*args, tf.reduce_sum(weights)), logits)
  theirs = loss_and_accuracy(reference, logits)
  assert 0 < float(theirs[1]) < 1
  for a, b in zip(ours, theirs):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


def test_dropout_is_seeded_and_drawn_afresh_at_every_step(tmp_path):
  """The pretrainer's dropout (tf.random.Generator masks): the same seed builds the same model
  with the same masks; each call draws new ones; no generator state lands in checkpoints."""
  config = dataclasses.replace(CONFIG, hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
  _, features = _features()

  def two_training_calls(seed):
    tf_keras.utils.set_random_seed(seed)
    model = build_pretrainer(config, SEQ, PREDS)
    return model, [model(features, training=True)["mlm_logits"].numpy() for _ in range(2)]

  model, (first, second) = two_training_calls(7)
  _, (first_again, second_again) = two_training_calls(7)
  np.testing.assert_array_equal(first, first_again)
  np.testing.assert_array_equal(second, second_again)
  assert not np.allclose(first, second)
  inference = model(features, training=False)["mlm_logits"].numpy()
  np.testing.assert_array_equal(inference, model(features, training=False)["mlm_logits"].numpy())
  prefix = tf.train.Checkpoint(**model.checkpoint_items).write(str(tmp_path / "ckpt"))
  saved = [name for name, _ in tf.train.list_variables(prefix)]
  assert len(saved) == len(model.variables) + 1  # + the object graph.
