"""The paper's optimizer: Adam with decoupled weight decay, linear warmup, linear decay; or LAMB.

Built from the Model Garden (`official.nlp.optimization.WarmUp`, `official.modeling.optimization`'s
`AdamWeightDecay` and `LAMB`), configured as google-research/bert's `optimization.py`:

  learning rate   init_lr * step / num_warmup_steps             while step < num_warmup_steps
                  init_lr * (1 - step / num_train_steps)        after (PolynomialDecay, power 1)
  Adam            beta_1 0.9, beta_2 0.999, epsilon 1e-6
  weight decay    0.01, decoupled (lr * rate * w subtracted from w), not on LayerNorm or biases
  clipping        global norm 1.0

Two differences from the original, both the Model Garden's: Adam's moments are bias-corrected
(the original's were not; this only changes the first few hundred steps, which warmup already
tempers), and the gradient is clipped AFTER the all-reduce across replicas (the original clipped
each TPU core's gradient before summing), so N replicas update exactly as one device would.
One from the Model Garden, see `AdamWeightDecay`: epsilon is added to the bias-corrected
sqrt(v), as in Adam's Algorithm 1, PyTorch, optax and transformers.
"""
from absl import logging
import tensorflow as tf
import tf_keras
from official.modeling.optimization import lamb
from official.modeling.optimization import legacy_adamw
from official.nlp import optimization as nlp_optimization

OPTIMIZERS = ("adamw", "lamb")

# Variables whose name matches any of these get no weight decay (and, in LAMB, no trust ratio).
# The Model Garden names layer norms "layer_norm"; google-research/bert and Hugging Face names
# (kept by the checkpoint loaders in some models) use "LayerNorm".
NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")


class AdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """The Model Garden's AdamWeightDecay with epsilon added to the bias-corrected sqrt(v):
  w -= lr * m_hat / (sqrt(v_hat) + epsilon), Adam's Algorithm 1 (Kingma & Ba 2015).

  Keras adds epsilon to the uncorrected sqrt(v) (the paper's "epsilon hat" variant), which
  makes it 1 / sqrt(1 - beta_2^t) times larger: ~32x at step 1, still ~3x at step 100. With
  epsilon 1e-6 and clipped gradients of ~1e-5 per weight (global norm 1 over millions), that
  shrinks the early updates of small-gradient weights severalfold, and a fine-tuning run of a
  few hundred steps is all early steps: SQuAD fine-tuning from MiniLM trailed transformers'
  (the same step otherwise, benchmarks/squad.py --replay_file) until this was changed.
  """

  def _prepare_local(self, var_device, var_dtype, apply_state):
    super()._prepare_local(var_device, var_dtype, apply_state)
    coefficients = apply_state[(var_device, var_dtype)]
    # Both the dense kernel and the sparse update divide by sqrt(v) + epsilon and take the
    # bias correction in the learning rate; scaling epsilon moves it inside the correction.
    coefficients["epsilon"] = coefficients["epsilon"] * tf.sqrt(
        1 - coefficients["beta_2_power"])

  def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices, **kwargs):
    """The word embeddings' gradient (the rows a batch gathered) scattered into a dense one,
    then applied as every other weight's. The same update, with fewer passes: Keras's sparse
    Adam still decays every row of both moments and moves every row of the weight, in
    separate dense ops; the dense kernel does it all in one (MiniLM fine-tuning at 16
    tokens: 30 of 480 ms of ops a step). After the all-reduce, which stays sparse."""
    num_rows = tf.shape(handle, out_type=indices.dtype)[0]
    dense = tf.math.unsorted_segment_sum(grad, indices, num_rows)
    return self._resource_apply_dense(dense, handle, **kwargs)


def learning_rate_schedule(learning_rate: float, num_train_steps: int,
                           num_warmup_steps: int,
                           end_learning_rate: float = 0.0
                           ) -> tf_keras.optimizers.schedules.LearningRateSchedule:
  """Linear warmup from 0 to `learning_rate`, then linear decay to `end_learning_rate`.

  As in the original, the decay is computed from step 0, so right after warmup the rate is
  learning_rate * (1 - num_warmup_steps / num_train_steps).
  """
  if num_train_steps <= 0:
    raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
  if num_warmup_steps < 0:
    raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
  if num_warmup_steps > num_train_steps:
    # Allowed, as in the original: the rate then only ever warms up.
    logging.warning("num_warmup_steps %d > num_train_steps %d: the learning rate never "
                    "reaches its peak", num_warmup_steps, num_train_steps)
  schedule = tf_keras.optimizers.schedules.PolynomialDecay(
      initial_learning_rate=learning_rate, decay_steps=num_train_steps,
      end_learning_rate=end_learning_rate, power=1.0)
  if num_warmup_steps:
    schedule = nlp_optimization.WarmUp(initial_learning_rate=learning_rate,
                                       decay_schedule_fn=schedule,
                                       warmup_steps=num_warmup_steps)
  return schedule


def create_optimizer(learning_rate: float,
                     num_train_steps: int,
                     num_warmup_steps: int,
                     optimizer: str = "adamw",
                     weight_decay: float = 0.01,
                     clip_norm: float = 1.0,
                     loss_scaling: bool = False) -> tf_keras.optimizers.legacy.Optimizer:
  """The paper's optimizer with its learning-rate schedule.

  Args:
    learning_rate: peak learning rate (reached at the end of warmup).
    num_train_steps: steps over which the rate decays linearly to zero.
    num_warmup_steps: steps of linear warmup from zero.
    optimizer: "adamw" (the paper's) or "lamb" (You et al. 2019, for large batches).
    weight_decay: decoupled weight decay rate; LayerNorm and bias variables are excluded.
    clip_norm: clip the (all-reduced) gradient to this global norm; 0 disables clipping.
    loss_scaling: wrap in a dynamic `LossScaleOptimizer`, needed for float16 training.

  Returns:
    A tf_keras legacy optimizer; its `iterations` is the global step.
  """
  schedule = learning_rate_schedule(learning_rate, num_train_steps, num_warmup_steps)
  common = dict(learning_rate=schedule, weight_decay_rate=weight_decay, beta_1=0.9,
                beta_2=0.999, epsilon=1e-6,
                exclude_from_weight_decay=list(NO_DECAY_PATTERNS),
                global_clipnorm=clip_norm or None)
  if optimizer == "adamw":
    # gradient_clip_norm=0: AdamWeightDecay's own clipping runs before the all-reduce; we
    # clip with `global_clipnorm`, which Keras applies after it.
    opt = AdamWeightDecay(gradient_clip_norm=0.0, **common)
  elif optimizer == "lamb":
    opt = lamb.LAMB(**common)
  else:
    raise ValueError(f"optimizer {optimizer!r} is not one of {OPTIMIZERS}")
  if loss_scaling:
    opt = tf_keras.mixed_precision.LossScaleOptimizer(opt)
  return opt
