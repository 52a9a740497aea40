"""The paper's optimizer: schedule, AdamW and LAMB updates against numpy references."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.training import optimization

LR, STEPS = 0.1, 10


def test_schedule_warms_up_linearly_then_decays_to_zero_as_the_original():
  schedule = optimization.learning_rate_schedule(LR, num_train_steps=STEPS, num_warmup_steps=4)
  got = np.array([float(schedule(step)) for step in range(STEPS + 2)])
  # google-research/bert: lr * step / warmup during warmup, else lr * (1 - step / num_steps).
  want = [LR * s / 4 if s < 4 else LR * max(0.0, 1 - s / STEPS) for s in range(STEPS + 2)]
  np.testing.assert_allclose(got, want, atol=1e-7)
  assert got[0] == 0 and got[STEPS] == 0 and got[3] == pytest.approx(0.075)


def test_schedule_rejects_bad_step_counts():
  with pytest.raises(ValueError, match="num_warmup_steps"):
    optimization.learning_rate_schedule(LR, num_train_steps=10, num_warmup_steps=-1)
  with pytest.raises(ValueError, match="num_train_steps"):
    optimization.learning_rate_schedule(LR, num_train_steps=0, num_warmup_steps=0)


def _variables():
  """A kernel (decayed), a bias and a LayerNorm gamma (not decayed), named as the model's."""
  rng = np.random.default_rng(0)
  values = {"dense/kernel": rng.normal(size=(3, 2)), "dense/bias": rng.normal(size=(2,)),
            "embeddings/layer_norm/gamma": rng.normal(size=(2,))}
  with tf.name_scope("model"):
    return values, [tf.Variable(v.astype(np.float32), name=n) for n, v in values.items()]


def _gradients(norm: float, seed: int) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  grads = [rng.normal(size=s) for s in [(3, 2), (2,), (2,)]]
  total = np.sqrt(sum((g ** 2).sum() for g in grads))
  return [g * norm / total for g in grads]


def _clip(grads, clip_norm=1.0):
  total = np.sqrt(sum((g ** 2).sum() for g in grads))
  return [g * min(1.0, clip_norm / total) for g in grads]


def _run(optimizer_name: str, steps_grads) -> list[np.ndarray]:
  values, variables = _variables()
  opt = optimization.create_optimizer(LR, STEPS, 0, optimizer=optimizer_name)
  for grads in steps_grads:
    opt.apply_gradients(zip([tf.constant(g, tf.float32) for g in grads], variables))
  assert int(opt.iterations) == len(steps_grads)
  return [v.numpy() for v in variables]


def _adamw_reference(steps_grads, clip=True, epsilon_hat=False):
  """Adam's Algorithm 1 (bias-corrected moments, epsilon added to sqrt(v_hat)) + decoupled
  weight decay lr * 0.01 * w on the kernel only; gradients clipped to global norm 1.
  epsilon_hat: Keras' form instead, epsilon added to the uncorrected sqrt(v)."""
  values, _ = _variables()
  w = list(values.values())
  m = [np.zeros_like(x) for x in w]
  v = [np.zeros_like(x) for x in w]
  for t, grads in enumerate(steps_grads, start=1):
    grads = _clip(grads) if clip else grads
    lr = LR * (1 - (t - 1) / STEPS)
    lr_t = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
    for i, g in enumerate(grads):
      if i == 0:
        w[i] = w[i] - lr * 0.01 * w[i]
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      epsilon = 1e-6 if epsilon_hat else 1e-6 * np.sqrt(1 - 0.999 ** t)
      w[i] = w[i] - lr_t * m[i] / (np.sqrt(v[i]) + epsilon)
  return w


def _lamb_reference(steps_grads):
  """LAMB: the bias-corrected Adam direction plus 0.01 * w (kernel only), scaled by the trust
  ratio |w| / |update| (kernel only); gradients clipped to global norm 1."""
  values, _ = _variables()
  w = list(values.values())
  m = [np.zeros_like(x) for x in w]
  v = [np.zeros_like(x) for x in w]
  for t, grads in enumerate(steps_grads, start=1):
    lr = LR * (1 - (t - 1) / STEPS)
    for i, g in enumerate(_clip(grads)):
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      update = (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-6)
      ratio = 1.0
      if i == 0:
        update = update + 0.01 * w[i]
        ratio = np.linalg.norm(w[i]) / np.linalg.norm(update)
      w[i] = w[i] - ratio * lr * update
  return w


# Step 1's gradient (norm 10) is clipped, step 2's (norm 0.3) is not: Adam is invariant to a
# constant gradient scale, so only gradients of different norms show whether clipping happened.
STEPS_GRADS = [_gradients(10.0, seed=1), _gradients(0.3, seed=2), _gradients(5.0, seed=3)]


def test_adamw_matches_reference_with_decay_only_on_kernels_and_global_clipping():
  got = _run("adamw", STEPS_GRADS)
  for g, want in zip(got, _adamw_reference(STEPS_GRADS)):
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
  # The reference without clipping differs: the comparison above does see the clipping.
  unclipped = _adamw_reference(STEPS_GRADS, clip=False)
  assert max(np.abs(g - u).max() for g, u in zip(got, unclipped)) > 1e-3


def test_adamw_adds_epsilon_to_the_bias_corrected_root_as_adam_algorithm_1():
  # Gradients of ~1e-6 per weight, as a large model's are after global clipping: there the
  # two placements of epsilon differ severalfold.
  tiny = [[g * 1e-5 for g in grads] for grads in STEPS_GRADS]
  got = _run("adamw", tiny)
  for g, want in zip(got, _adamw_reference(tiny)):
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7)
  keras_form = _adamw_reference(tiny, epsilon_hat=True)
  assert max(np.abs(g - k).max() for g, k in zip(got, keras_form)) > 1e-3


def test_adamw_sparse_update_equals_dense():
  # Embedding tables get IndexedSlices gradients, with rows repeated (a token twice in a batch)
  # and rows absent: the update is that of the summed dense gradient, zero rows included (their
  # moments still decay). Two steps, so the second sees the first's moments.
  steps = [[g * 1e-5 for g in grads] for grads in STEPS_GRADS[1:]]
  for grads in steps:
    grads[0][1] = 0.0
  dense = _run("adamw", steps)
  values, variables = _variables()
  opt = optimization.create_optimizer(LR, STEPS, 0)
  for grads in steps:
    kernel = grads[0]
    rows = tf.constant(np.stack([0.25 * kernel[0], kernel[2], 0.75 * kernel[0]]), tf.float32)
    kernel_slices = tf.IndexedSlices(rows, tf.constant([0, 2, 0]))
    opt.apply_gradients(zip([kernel_slices] + [tf.constant(g, tf.float32) for g in grads[1:]],
                            variables))
  np.testing.assert_allclose(variables[0].numpy(), dense[0], rtol=1e-5, atol=1e-7)
  assert not np.allclose(dense[0][1], values["dense/kernel"][1])  # The zero row moved too.


def test_lamb_matches_reference_trust_ratio():
  got = _run("lamb", STEPS_GRADS)
  for g, want in zip(got, _lamb_reference(STEPS_GRADS)):
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_loss_scaling_wraps_and_unknown_optimizer_is_rejected():
  opt = optimization.create_optimizer(LR, STEPS, 1, loss_scaling=True)
  assert isinstance(opt, tf_keras.mixed_precision.LossScaleOptimizer)
  with pytest.raises(ValueError, match="'sgd' is not one of"):
    optimization.create_optimizer(LR, STEPS, 1, optimizer="sgd")
