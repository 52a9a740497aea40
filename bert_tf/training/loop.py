"""The one training loop, for pretraining and fine-tuning alike.

    train(strategy, model_fn, optimizer_fn, loss_fn, dataset_fn, output_dir, num_train_steps)

A `tf.function` runs many steps a call (`strategy.run` in a `tf.range` loop: what keeps TPUs
fed): up to `steps_per_loop`, between summaries, sized so a progress line (steps/s, time left)
comes at least every `progress_seconds`. A step is one optimizer update on one global batch.
Batches come from `distribute.distribute_datasets_from_function(strategy, dataset_fn)` with
fixed shapes, so XLA and TPUs compile one program.

Gradient accumulation: a replica may take its batch in several micro-batches, one forward and
backward pass each, their gradients summed into one update (one all-reduce, one optimizer
step): the dataset gives a tuple of micro-batches (fine-tuning's, each cut to its own
longest), or the step splits a batch into `micro_batches` equal parts. The update is the
one-big-batch update, not an average of micro-batch means: every loss is a sum of terms, each
a mean over something the labels count (`count_fn`: records, masked positions, labelled
tokens), and each term is divided by its count over the whole update (all micro-batches, all
replicas: one all-reduce of a few scalars per update) before the gradients are taken.

Checkpoints `ckpt-<global step>` go to output_dir every `save_checkpoints_steps`. A run started
on an output_dir that holds one resumes from the latest: model, optimizer state (so the
learning-rate schedule), global step, and the input position (each input pipeline skips the
batches it had consumed; the same batches again when `dataset_fn` is seeded). A run given
`continue_from` (another run's checkpoint, pretraining's phase 1) starts from all of that but
the input: its own, from the start.

The settings that define a run (`check_run_settings`) are kept beside its checkpoints as
run_settings.json: a re-run with other settings is refused instead of resuming (or, if
finished, silently re-evaluating) a model that the new flags did not make.

Summaries (loss, the loss function's metrics, learning rate, examples/s and the caller's
`throughput` rates: pretraining's sequences/s and real tokens/s) go to TensorBoard in
output_dir and as a progress line to the log. A non-finite loss stops training with an error,
leaving the last good checkpoint the latest.
"""
import hashlib
import json
import os
import tempfile
import time
from typing import Callable

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.common import files
from bert_tf.common import progress
from bert_tf.modeling import checkpoints
from bert_tf.training import distribute

# --mixed_precision values -> Keras policies.
PRECISIONS = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}

# count_fn(features) -> {term: float32 scalar}: what each term of the loss is a mean over in
# this batch (its records, masked positions...), from the labels alone.
CountFn = Callable[[dict], dict]
# loss_fn(features, outputs, counts=None) -> (loss, {name: metric}): each term's sum over the
# batch divided by counts[term] (this batch's own count_fn when None), so that over the
# micro-batches and replicas of an update, given the update's counts, they add up to its loss.
LossFn = Callable[..., tuple[tf.Tensor, dict]]
DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


RUN_SETTINGS = "run_settings.json"


def check_run_settings(output_dir: str, settings: dict, is_chief: bool = True,
                       extendable: tuple[str, ...] = (), implied: dict | None = None) -> dict:
  """Writes `settings` (what defines the trained model: config, data, learning rate...) to
  output_dir/run_settings.json; if the file is already there, raises ValueError listing what
  differs, so a re-run with new flags neither resumes nor re-reports the old model.

  extendable: settings (a step count) that may grow: a re-run where only these changed goes
  on, to the new count, unless one is below the global step that output_dir's latest
  checkpoint reached (ValueError). implied: {name: value} that a file written before a
  setting existed held without naming it (the code then knew one way only). Returns
  {name: (old, new)} of those that changed."""
  path = os.path.join(output_dir, RUN_SETTINGS)
  settings = json.loads(json.dumps(settings))  # As read back: tuples become lists.
  extended = {}
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      old = {**(implied or {}), **json.load(f)}
    old, new = _flat(old), _flat(settings)
    changed = [key for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    if not changed:
      return {}
    if set(changed) <= set(extendable):
      step = checkpoint_step(output_dir)
      for key in changed:
        if not isinstance(new[key], int) or not isinstance(old.get(key), int):
          break
        if new[key] < step:
          raise ValueError(f"{path}: {key} {old[key]} -> {new[key]}, but the run in "
                           f"--output_dir has reached global step {step}: give at least {step}")
        extended[key] = (old[key], new[key])
    if len(extended) != len(changed):
      raise ValueError(
          f"{path}: --output_dir holds a run trained with other settings ("
          f"{'; '.join(f'{k} {old.get(k)!r} -> {new.get(k)!r}' for k in changed)}). Give a "
          "new --output_dir to train afresh (a checkpoint of this one can be its "
          "--init_checkpoint), or the same settings to resume this one")
  if is_chief:
    files.write_text(path, json.dumps(settings, indent=2, sort_keys=True) + "\n")
  return extended


def checkpoint_step(output_dir: str) -> int:
  """The global step of output_dir's latest checkpoint (0 if none)."""
  latest = tf.train.latest_checkpoint(output_dir)
  if not latest:
    return 0
  step = tf.Variable(0, dtype=tf.int64)
  tf.train.Checkpoint(global_step=step).read(latest).expect_partial()
  return int(step.numpy())


def _flat(settings: dict, prefix: str = "") -> dict:
  """{"task": {"max_seq_length": 32}} -> {"task.max_seq_length": 32}: what changed, by name."""
  out = {}
  for key, value in settings.items():
    if isinstance(value, dict):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def file_sha256(path: str) -> str:
  """The hex SHA-256 of a file (any tf.io.gfile path), read in 8 MB chunks."""
  digest = hashlib.sha256()
  with tf.io.gfile.GFile(path, "rb") as f:
    while chunk := f.read(8 << 20):
      digest.update(chunk)
  return digest.hexdigest()


def set_mixed_precision(name: str) -> None:
  """Sets the Keras dtype policy ("none" | "bf16" | "fp16"); call before building models.

  fp16 also needs a loss-scaling optimizer (`create_optimizer(..., loss_scaling=True)`).
  """
  if name not in PRECISIONS:
    raise ValueError(f"mixed_precision {name!r} is not one of {tuple(PRECISIONS)}")
  tf_keras.mixed_precision.set_global_policy(PRECISIONS[name])


class _Metrics:
  """Means of the loss and the loss function's metrics over steps and replicas, and sums of
  the examples and of the `throughput` counts. Sync-on-read variables: updated per replica,
  read as the global mean (sum)."""

  def __init__(self, names: list[str],
               throughput: dict[str, Callable[[dict], tf.Tensor]] | None = None):
    self.means = {name: tf_keras.metrics.Mean(name) for name in ["loss"] + names}
    self.throughput = throughput or {}
    self.sums = {name: tf_keras.metrics.Sum(name) for name in ["examples", *self.throughput]}

  def update(self, features: dict, loss: tf.Tensor, metrics: dict) -> None:
    self.means["loss"].update_state(loss)
    for name, value in metrics.items():
      if name != "loss":
        self.means[name].update_state(value)
    self.sums["examples"].update_state(batch_size(features))
    parts = features if isinstance(features, tuple) else (features,)
    for name, fn in self.throughput.items():
      self.sums[name].update_state(tf.add_n([tf.cast(fn(part), tf.float32) for part in parts]))

  def result(self) -> dict[str, float]:
    return {name: float(m.result()) for name, m in self.means.items()}

  def rates(self, seconds: float) -> dict[str, float]:
    """{<name>_per_second} of the examples and the throughput counts."""
    return {f"{name}_per_second": float(m.result()) / seconds for name, m in self.sums.items()}

  def reset(self) -> None:
    for m in list(self.means.values()) + list(self.sums.values()):
      m.reset_state()


def batch_size(features: dict | tuple[dict, ...]) -> tf.Tensor:
  """The records in a batch, or in all micro-batches of one (a tuple of dicts)."""
  parts = features if isinstance(features, tuple) else (features,)
  return tf.add_n([tf.shape(tf.nest.flatten(part)[0])[0] for part in parts])


def count_records(features: dict) -> dict[str, tf.Tensor]:
  """The count_fn of a loss that is a mean over records (most tasks')."""
  return {"records": tf.cast(batch_size(features), tf.float32)}


def micro_batch_size(train_batch_size: int, num_replicas: int,
                     gradient_accumulation_steps: int) -> int:
  """The records of one forward and backward pass: the global batch of one update taken by
  each replica in gradient_accumulation_steps micro-batches; ValueError, naming the numbers,
  when they do not divide it."""
  if gradient_accumulation_steps < 1:
    raise ValueError(f"--gradient_accumulation_steps={gradient_accumulation_steps}: need at "
                     "least 1")
  parts = num_replicas * gradient_accumulation_steps
  if train_batch_size % parts:
    raise ValueError(
        f"--train_batch_size={train_batch_size} (the global batch of one update) does not "
        f"divide into {num_replicas} replica(s) x --gradient_accumulation_steps="
        f"{gradient_accumulation_steps} micro-batches: give a multiple of {parts}")
  micro = train_batch_size // parts
  logging.info("train_batch_size %d per update = %d replica(s) x %d micro-batch(es) x %d "
               "records", train_batch_size, num_replicas, gradient_accumulation_steps, micro)
  return micro


def without_autograph(fn: Callable) -> Callable:
  """fn, with AutoGraph off in everything it calls. Keras rewrites the `call` of every layer
  it did not define itself (the Model Garden's, ours) with AutoGraph when it builds a model
  and when it first traces one: seconds of source rewriting at each start-up (MiniLM: 1.5 of
  a 4.5 s build, 0.5 of a 3 s trace of the step) for layers whose Python branches all test
  static values. Model building and model calls go through this."""
  return tf.autograph.experimental.do_not_convert(fn)


def _metric_names(strategy: tf.distribute.Strategy, fn, dataset_fn: DatasetFn,
                  count_fn: CountFn | None = None) -> list[str]:
  """The names of the metrics `fn` (a tf.function: features (, counts) -> (loss,
  {name: metric}, ...)) returns, from its trace on a replica's batch (and the update's counts
  when count_fn is given), in a replica context: the trace that the loop calling fn under
  `strategy.run` then reuses (same function, signature and context), so learning the names
  costs no trace of its own (~0.7 s on MiniLM)."""
  context = tf.distribute.InputContext(num_replicas_in_sync=strategy.num_replicas_in_sync)
  spec = dataset_fn(context).element_spec
  args = [spec]
  if count_fn is not None:
    terms = tf.function(lambda features: update_counts(count_fn, features),
                        autograph=False).get_concrete_function(spec).structured_outputs
    args.append({term: tf.TensorSpec([], tf.float32) for term in terms})
  names = []
  strategy.run(lambda: names.append(
      sorted(fn.get_concrete_function(*args).structured_outputs[1])))
  return names[0]


def _skip_consumed(dataset_fn: DatasetFn, steps: int) -> DatasetFn:
  """dataset_fn, each pipeline skipping the batches it gave in the first `steps` steps that
  read it (the global step, less the step this output_dir's input began at)."""
  def fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
    dataset = dataset_fn(ctx)
    if steps:
      # Each pipeline feeds num_replicas / num_pipelines replicas one batch per step.
      dataset = dataset.skip(steps * ctx.num_replicas_in_sync // ctx.num_input_pipelines)
    return dataset
  return fn


def _create_slots(optimizer, variables) -> None:
  """Creates the optimizer's slot variables now: left to the first apply_gradients, they are
  created inside the training loop's tf.function, which must then be traced twice (once to
  create them, once to run), and a trace of the forward and backward pass takes seconds."""
  optimizer._create_all_weights(variables)  # pylint: disable=protected-access


def update_counts(count_fn: CountFn, features: dict | tuple[dict, ...]) -> dict[str, tf.Tensor]:
  """count_fn over a batch, or summed over the micro-batches of one (a tuple of dicts)."""
  counts = {}
  for part in (features if isinstance(features, tuple) else (features,)):
    for term, count in count_fn(part).items():
      counts[term] = counts.get(term, 0.0) + tf.cast(count, tf.float32)
  return counts


def accumulated_gradients(model: tf_keras.Model, loss_fn: LossFn,
                          features: dict | tuple[dict, ...], counts: dict,
                          micro_batches: int = 1, training: bool = True,
                          scale: Callable[[tf.Tensor], tf.Tensor] | None = None,
                          accumulators: list[tf.Variable] | None = None):
  """The loss, metrics and gradients (of model.trainable_variables; None where the loss does
  not reach) of a batch taken in micro-batches: a tuple of dicts as they are given (unrolled),
  or a dict split into `micro_batches` equal parts (a `tf.while_loop`). `counts`: the whole
  update's (`update_counts`, all-reduced over replicas), so the parts' losses, metrics and
  gradients add up to the update's. `scale`: applied to the loss before its gradient (loss
  scaling).

  `accumulators`: variables shaped as the trainable ones (gradient accumulation, for memory):
  one forward and backward pass per part, the activations of one alive at a time, the
  gradients summed into them in place. Without them, a tuple's parts (random batches cut in
  sorted parts, for speed) take one forward pass each under one tape and one backward pass:
  the batch's memory, and no weights-sized sum per part to wait for (one part after another,
  4 parts of an MRPC batch trained ~15% slower); a dict's parts are summed as tensors (tests
  compare them with the whole batch).
  """
  scale = scale or (lambda loss: loss)

  def forward(part):
    return loss_fn(part, without_autograph(model)(part, training=training), counts=counts)

  if isinstance(features, tuple) and tf.inside_function():
    # The parts share a signature: one trace of the forward pass (and one backward function)
    # for all of them, not a copy per part (4 parts of MiniLM traced in ~9 s, as one in ~3 s).
    forward = tf.function(forward, autograph=False)

  def gradients(parts):
    with tf.GradientTape() as tape:
      loss, metrics = 0.0, {}
      for part in parts:
        loss_i, metrics_i = forward(part)
        loss += tf.cast(loss_i, tf.float32)
        for name, value in metrics_i.items():
          metrics[name] = metrics.get(name, 0.0) + tf.cast(value, tf.float32)
      scaled = scale(loss)
    return loss, metrics, tape.gradient(scaled, model.trainable_variables)

  if isinstance(features, tuple) and accumulators is None:
    return gradients(features)
  if isinstance(features, dict):
    if micro_batches == 1:
      return gradients((features,))
    rows = tf.nest.flatten(features)[0].shape[0]
    split = {name: tf.reshape(value, tf.concat([[micro_batches, rows // micro_batches],
                                                 tf.shape(value)[1:]], 0))
             for name, value in features.items()}
    part = lambda i: {name: value[i] for name, value in split.items()}
    loss, metrics, grads = gradients((part(0),))
    summed = _Sum(grads, accumulators)

    def body(i, loss, metrics, *carried):
      part_loss, part_metrics, part_grads = gradients((part(i),))
      carried = summed.add(carried, part_grads)
      return (i + 1, loss + part_loss,
              {name: value + part_metrics[name] for name, value in metrics.items()}, *carried)

    # One iteration at a time: by default a while loop runs up to 10 at once, and nothing in
    # an iteration's forward pass waits for the last one's gradients (all activations alive).
    _, loss, metrics, *carried = tf.while_loop(
        lambda i, *_: i < micro_batches, body,
        (tf.constant(1), loss, metrics, *summed.carried), parallel_iterations=1)
    return loss, metrics, summed.result(carried)

  loss, metrics, grads = gradients(features[:1])
  summed = _Sum(grads, accumulators)
  carried = summed.carried
  for part in features[1:]:
    # The next part starts once the last one's gradients are summed, so its activations are
    # freed first: the memory of one micro-batch, not of the batch.
    with tf.control_dependencies(tf.nest.flatten(carried, expand_composites=True)):
      part = tf.nest.map_structure(tf.identity, part)
    part_loss, part_metrics, part_grads = gradients((part,))
    carried = summed.add(carried, part_grads)
    loss += part_loss
    metrics = {name: value + part_metrics[name] for name, value in metrics.items()}
  return loss, metrics, summed.result(carried)


class _Sum:
  """Gradients summed over micro-batches: in place into `accumulators` when given (what the
  loop carries is then one flag), else as dense tensors (a while loop carries fixed shapes)."""

  def __init__(self, first: list, accumulators: list[tf.Variable] | None):
    self.reached = [i for i, g in enumerate(first) if g is not None]
    self.size, self.accumulators = len(first), accumulators
    if accumulators is None:
      self.carried = [tf.convert_to_tensor(first[i]) for i in self.reached]
    else:
      updates = [accumulators[i].assign(tf.convert_to_tensor(first[i])) for i in self.reached]
      with tf.control_dependencies(updates):
        self.carried = [tf.constant(True)]

  def add(self, carried: list, grads: list) -> list:
    if self.accumulators is None:
      return [a + tf.convert_to_tensor(grads[i]) for a, i in zip(carried, self.reached)]
    with tf.control_dependencies(carried):
      updates = [self.accumulators[i].assign_add(tf.convert_to_tensor(grads[i]))
                 for i in self.reached]
    with tf.control_dependencies(updates):
      return [tf.identity(carried[0])]

  def result(self, carried: list) -> list:
    grads = [None] * self.size
    if self.accumulators is None:
      for i, g in zip(self.reached, carried):
        grads[i] = g
      return grads
    with tf.control_dependencies(carried):
      for i in self.reached:
        grads[i] = self.accumulators[i].read_value()
    return grads


class _TrainStep:
  """The per-replica step of one update: the update's counts (all-reduced), the forward and
  backward passes of its micro-batches (XLA-compiled with jit_compile), then the one update
  and the metrics. Traced without AutoGraph, like the models (`without_autograph`): every
  branch in it tests a static value, and converting the optimizer's and the loss's code costs
  a start-up ~0.5 s."""

  def __init__(self, strategy: tf.distribute.Strategy, model, optimizer, loss_fn: LossFn,
               count_fn: CountFn, dataset_fn: DatasetFn, jit_compile: bool,
               micro_batches: int,
               throughput: dict[str, Callable[[dict], tf.Tensor]] | None = None):
    self.model, self.optimizer = model, optimizer
    self.loss_fn, self.count_fn, self.micro_batches = loss_fn, count_fn, micro_batches
    self.num_replicas = strategy.num_replicas_in_sync
    self.loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    self.gradients = tf.function(self._gradients, jit_compile=jit_compile, autograph=False)
    with strategy.scope():
      # With accumulation, each replica sums its micro-batches' gradients into its own copy
      # of these (in place: one weights-sized set), read locally for the one update. Not
      # tracked by the checkpoint: an update's sum never outlives its step.
      self.accumulators = None if micro_batches == 1 else [
          tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False,
                      synchronization=tf.VariableSynchronization.ON_READ,
                      aggregation=tf.VariableAggregation.SUM)
          for v in model.trainable_variables]
      self.metrics = _Metrics(_metric_names(strategy, self.gradients, dataset_fn, count_fn),
                              throughput)

  def _gradients(self, features, counts):
    loss, step_metrics, grads = accumulated_gradients(
        self.model, self.loss_fn, features, counts, self.micro_batches,
        scale=self.optimizer.get_scaled_loss if self.loss_scaling else None,
        accumulators=self.accumulators)
    if self.loss_scaling:
      # Once per update, on the summed gradients: a micro-batch that overflowed makes them
      # non-finite, and the optimizer then skips the whole update and lowers the scale.
      grads = self.optimizer.get_unscaled_gradients(grads)
    return loss, step_metrics, grads

  def __call__(self, features):
    # Outside the XLA cluster, as the gradients' all-reduce: the whole update's counts.
    counts = tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, update_counts(self.count_fn, features))
    loss, step_metrics, grads = self.gradients(features, counts)
    # The gradients' all-reduce sums the replicas' parts of the update. Weights the loss does
    # not reach (the pooler under a span or token head) have no gradient: left out, rather
    # than warned about at every trace.
    self.optimizer.apply_gradients(
        (g, v) for g, v in zip(grads, self.model.trainable_variables) if g is not None)
    # Each replica's loss is its part of the update's: times the replicas, their mean is it.
    self.metrics.update(features, loss * self.num_replicas,
                        {name: value * self.num_replicas for name, value in step_metrics.items()})


def steps_for_call(seconds_left: float, seconds_per_step: float, last: int, room: int) -> int:
  """How many steps the next tf.function call of the loop runs, between progress lines.

  Half of the steps that fit before the next line is due at the last call's speed, so a
  line comes on time even if steps get up to twice as slow within the call; the loop then
  logs once the time left is below a tenth of the interval (or a step): about four calls a
  line. At most twice the last call (the first call's time is mostly tracing) and `room`
  (the steps left in the loop), at least 1. A call costs a few milliseconds.
  """
  fits = int(seconds_left / 2 / seconds_per_step) if seconds_per_step > 0 else room
  return max(1, min(room, 2 * last, fits))


def _loop_fn(strategy: tf.distribute.Strategy, step_fn) -> Callable:
  """A tf.function running `num_steps` (a scalar tensor: no retrace) steps of step_fn."""
  @tf.function
  def loop(iterator, num_steps):
    for _ in tf.range(num_steps):
      strategy.run(without_autograph(step_fn), args=(next(iterator),))
  return loop


@tf.function
def _all_finite(variables) -> tf.Tensor:
  return tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in variables])


def checkpointed(model: tf_keras.Model) -> tf_keras.Model:
  """The model a training model stands for: itself, or the one it wraps (its `checkpointed`:
  a distilled student beside its teacher), which checkpoints hold as `model` and init_fn
  initialises."""
  return getattr(model, "checkpointed", model)


def checkpoint(model: tf_keras.Model, global_step: tf.Variable, **items) -> tf.train.Checkpoint:
  """The model (`checkpointed`; also under the training model's `checkpoint_items` names, e.g.
  `encoder`, for fine-tuning to read), the global step, and any other trackables (the
  optimizer)."""
  model_items = getattr(model, "checkpoint_items", {})
  return tf.train.Checkpoint(model=checkpointed(model), global_step=global_step, **model_items,
                             **items)


def _restore(checkpoint: tf.train.Checkpoint, output_dir: str, model: tf_keras.Model,
             init_fn: Callable | None, continue_from: str | None = None) -> None:
  """Restores the newest checkpoint in output_dir that reads, saying which damaged ones it
  skipped (a crash or a full disk during a save); with none there, restores continue_from
  whole (another run's checkpoint: model, optimizer state, global step), else calls
  init_fn(model)."""
  state = tf.train.get_checkpoint_state(output_dir)
  saved = list(reversed(state.all_model_checkpoint_paths)) if state else []
  damaged = []
  for path in saved:
    try:
      checkpoints.read_checkpoint(checkpoint, path)
    except checkpoints.CorruptCheckpointError as e:
      logging.warning("skipping a damaged checkpoint: %s", e)
      damaged.append(path)
      continue
    logging.info("restoring %s%s", path,
                 f" (skipped the damaged {', '.join(damaged)})" if damaged else "")
    return
  if damaged:
    raise checkpoints.CorruptCheckpointError(
        f"no checkpoint in {output_dir} reads ({', '.join(damaged)} are damaged): remove them "
        "to train afresh")
  if continue_from:
    checkpoints.read_checkpoint(checkpoint, continue_from)
    logging.info("continuing from %s", continue_from)
  elif init_fn is not None:
    init_fn(checkpointed(model))


class _Saver:
  """Saves `ckpt-<step>`: the chief into output_dir (keeping `keep` of them); other workers
  of a multi-worker cluster, which must take part in saving, into a temporary directory."""

  def __init__(self, strategy, checkpoint, output_dir: str, keep: int):
    self.is_chief = distribute.is_chief(strategy)
    directory = (output_dir if self.is_chief else
                 os.path.join(tempfile.gettempdir(), f"bert_tf-worker-{os.getpid()}"))
    self.manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=keep,
                                              checkpoint_name="ckpt")
    if self.is_chief:
      self._remove_unfinished()

  def _remove_unfinished(self) -> None:
    """A save that died half-way (killed, disk full) leaves its shards in ckpt-<N>_temp/."""
    for unfinished in tf.io.gfile.glob(os.path.join(self.manager.directory, "ckpt-*_temp")):
      logging.warning("removing %s, a checkpoint save that did not finish", unfinished)
      tf.io.gfile.rmtree(unfinished)

  def save(self, step: int) -> str:
    try:
      path = self.manager.save(checkpoint_number=step)
    except tf.errors.OpError:
      self._remove_unfinished()  # A full disk or a lost bucket: leave no half-written save.
      raise
    if not self.is_chief:
      tf.io.gfile.rmtree(self.manager.directory)
    return path


def _learning_rate(optimizer) -> float:
  schedule = optimizer.learning_rate
  return float(schedule(optimizer.iterations) if callable(schedule) else schedule)


def _log_progress(step: int, num_train_steps: int, pace: str, results: dict = None):
  shown = "".join(f" | {k} {v:.4g}" for k, v in (results or {}).items())
  logging.info("step %d/%d | %s%s", step, num_train_steps, pace, shown)


def _write_summaries(writer, step: int, results: dict) -> None:
  with writer.as_default(step=step):
    for name, value in results.items():
      tf.summary.scalar(name, value)
  writer.flush()


def train(strategy: tf.distribute.Strategy,
          model_fn: Callable[[], tf_keras.Model],
          optimizer_fn: Callable[[], tf_keras.optimizers.legacy.Optimizer],
          loss_fn: LossFn,
          dataset_fn: DatasetFn,
          output_dir: str,
          num_train_steps: int,
          steps_per_loop: int = 1000,
          save_checkpoints_steps: int = 1000,
          keep_checkpoint_max: int = 5,
          init_fn: Callable[[tf_keras.Model], None] | None = None,
          jit_compile: bool = False,
          count_fn: CountFn = count_records,
          micro_batches: int = 1,
          continue_from: str | None = None,
          input_start_step: int = 0,
          progress_seconds: float | None = progress.INTERVAL,
          throughput: dict[str, Callable[[dict], tf.Tensor]] | None = None
          ) -> dict[str, float]:
  """Trains until the global step reaches num_train_steps (resuming from output_dir).

  Args:
    strategy: from `distribute.get_strategy`.
    model_fn: builds the model, variables created (called in strategy.scope()): what the step
      trains, its outputs what loss_fn reads; it may wrap the model that checkpoints hold
      (`checkpointed`).
    optimizer_fn: builds the optimizer (in strategy.scope()), a tf_keras legacy one as
      `optimization.create_optimizer` returns; its `iterations` is the step.
    loss_fn: (features, model outputs, counts) -> (loss, {name: scalar metric}), each term
      of the loss its sum over the batch divided by counts[term] (see `LossFn`).
    dataset_fn: InputContext -> dataset of per-replica batches of fixed shape, repeating; or
      of tuples of micro-batches (fine-tuning's, each cut to its longest).
    output_dir: checkpoints and TensorBoard summaries.
    num_train_steps: the global step to stop at (the schedule's length is the optimizer's).
    steps_per_loop: steps between summaries, metrics' means and progress lines (at most; see
      progress_seconds).
    save_checkpoints_steps: a checkpoint at every multiple of this, and at the end.
    keep_checkpoint_max: checkpoints kept in output_dir.
    init_fn: called with the model (`checkpointed`) when output_dir holds no checkpoint
      (e.g. to load --init_checkpoint).
    jit_compile: compile the forward and backward pass with XLA.
    count_fn: features -> {term: what it is a mean over}; by default the records.
    micro_batches: a replica's batch (a dict) is taken in this many equal micro-batches,
      their gradients summed into its update (gradient accumulation; see
      `micro_batch_size`). A tuple of micro-batches from the dataset is taken as it comes.
    continue_from: a checkpoint of another run of this loop (pretraining's phase 1), restored
      whole when output_dir holds no checkpoint: the model, the optimizer's state and the
      global step, so the schedule goes on where that run stopped (init_fn is not called).
    input_start_step: the global step at which output_dir's input began (continue_from's
      step): a resumed run skips the batches of its own input that it consumed, not those
      the other run consumed of its input.
    progress_seconds: a progress line (step, steps/s, time left) at least this often: a loop's
      steps run as several tf.function calls (`steps_for_call`), each ending well before the
      next line is due at the measured speed, the same steps on the same batches. A line can
      only be late when one call outlasts it: the first call's tracing, a single step longer
      than the interval, or steps more than twice as slow within a call. None: one call per
      loop, a line per loop.
    throughput: {name: features -> a count} (pretraining's sequences and real tokens: an
      example is a row, and a packed row holds several sequences), each summed over a loop
      and reported as <name>_per_second beside examples_per_second.

  Returns:
    The last loop's mean loss and metrics, learning_rate, examples_per_second and the
    throughput's rates (the first loop's include tracing and compiling), and `global_step`.

  Raises:
    FloatingPointError: the loss or the weights became NaN or infinite; nothing was saved
      after the last good checkpoint.
  """
  with strategy.scope():
    model = without_autograph(model_fn)()
    optimizer = optimizer_fn()
    _create_slots(optimizer, model.trainable_variables)
    state = checkpoint(model, optimizer.iterations, optimizer=optimizer)
  _restore(state, output_dir, model, init_fn, continue_from)
  saver = _Saver(strategy, state, output_dir, keep_checkpoint_max)
  step = int(optimizer.iterations.numpy())
  if step >= num_train_steps:
    logging.info("global step %d: already trained to %d steps", step, num_train_steps)
    return {"global_step": step}
  if step < input_start_step:
    raise ValueError(f"global step {step} is before input_start_step {input_start_step}")
  if step > input_start_step:
    logging.info("resuming at global step %d; skipping the input consumed so far", step)

  step_fn = _TrainStep(strategy, model, optimizer, loss_fn, count_fn, dataset_fn, jit_compile,
                       micro_batches, throughput)
  metrics = step_fn.metrics
  iterator = iter(distribute.distribute_datasets_from_function(
      strategy, _skip_consumed(dataset_fn, step - input_start_step)))
  loop = _loop_fn(strategy, step_fn)
  writer = (tf.summary.create_file_writer(output_dir) if saver.is_chief
            else tf.summary.create_noop_writer())
  results = {}
  pace = progress.Meter(num_train_steps, done=step, interval=progress_seconds or 0)
  # The first call is one step (it traces); later calls are sized by the last one's speed.
  num_steps, seconds_per_step = 0, float("inf")
  while step < num_train_steps:
    loop_end = step + min(steps_per_loop, num_train_steps - step,
                          save_checkpoints_steps - step % save_checkpoints_steps)
    start = time.time()
    while step < loop_end:
      if progress_seconds is None:
        num_steps = loop_end - step
      else:
        num_steps = steps_for_call(pace.seconds_left(), seconds_per_step, num_steps,
                                   loop_end - step)
      call_start = time.time()
      loop(iterator, tf.constant(num_steps))
      step = int(optimizer.iterations.numpy())
      seconds_per_step = (time.time() - call_start) / num_steps
      if (progress_seconds is not None and step < loop_end and
          pace.seconds_left() < max(progress_seconds / 10, seconds_per_step)):
        # Due, or too close to due for another call to be worth making: the line now.
        _log_progress(step, num_train_steps, pace.rate(step, "steps"))
    results = dict(metrics.result(), learning_rate=_learning_rate(optimizer),
                   **metrics.rates(time.time() - start))
    metrics.reset()
    _log_progress(step, num_train_steps, pace.rate(step, "steps"), results)
    _write_summaries(writer, step, results)
    if not np.isfinite(results["loss"]):
      _stop(f"the loss is {results['loss']} at global step {step}", saver)
    if step % save_checkpoints_steps == 0 or step == num_train_steps:
      # The weights too (the last update may have broken them), but only before saving: on
      # TPUs this reads every weight back to the host.
      if not _all_finite(model.trainable_variables):
        _stop(f"the weights are not finite at global step {step}", saver)
      logging.info("saved %s", saver.save(step))
  return dict(results, global_step=step)


def _stop(problem: str, saver: _Saver):
  raise FloatingPointError(
      f"{problem}; stopped without saving. The last good checkpoint is "
      f"{saver.manager.latest_checkpoint or 'none (none was saved)'}")


def evaluate(strategy: tf.distribute.Strategy,
             model_fn: Callable[[], tf_keras.Model],
             loss_fn: LossFn,
             dataset_fn: DatasetFn,
             output_dir: str,
             max_steps: int | None = None,
             init_fn: Callable[[tf_keras.Model], None] | None = None) -> dict[str, float]:
  """The mean loss and metrics of the latest checkpoint in output_dir over the dataset.

  Args:
    dataset_fn: InputContext -> dataset of per-replica batches (finite, or cut by max_steps).
    max_steps: evaluate at most this many batches (all when None).
    init_fn: initialises the model when output_dir holds no checkpoint (global_step 0).

  Returns:
    loss, the loss function's metrics, and global_step (of the checkpoint). Also written as
    TensorBoard summaries to output_dir/eval.
  """
  with strategy.scope():
    model = without_autograph(model_fn)()
    global_step = tf.Variable(0, dtype=tf.int64, trainable=False)
    forward = tf.function(
        lambda features: loss_fn(features, without_autograph(model)(features, training=False)),
        autograph=False)
    metrics = _Metrics(_metric_names(strategy, forward, dataset_fn))
  latest = tf.train.latest_checkpoint(output_dir)
  if latest:
    checkpoints.read_checkpoint(checkpoint(model, global_step), latest, partial=True)
  elif init_fn is not None:
    init_fn(checkpointed(model))
  else:
    raise FileNotFoundError(f"no checkpoint to evaluate in {output_dir} (and no init "
                            f"checkpoint)")

  @tf.function
  def eval_step(features):
    def step(features):
      loss, step_metrics = forward(features)
      metrics.update(features, tf.cast(loss, tf.float32), step_metrics)
    strategy.run(step, args=(features,))

  num_batches = 0
  pace = progress.Meter(max_steps)
  for features in distribute.distribute_datasets_from_function(strategy, dataset_fn):
    if max_steps is not None and num_batches >= max_steps:
      break
    eval_step(features)
    num_batches += 1
    if pace.due():
      logging.info("eval: %s", pace.line(num_batches, "batches"))
  if not num_batches:
    raise ValueError("the evaluation data holds no complete batch")
  # Read once, by every worker: reading is an all-reduce across workers.
  means = metrics.result()
  step = int(global_step.numpy())
  logging.info("eval at global step %d over %d batches: %s", step, num_batches, means)
  if distribute.is_chief(strategy):
    _write_summaries(tf.summary.create_file_writer(os.path.join(output_dir, "eval")), step,
                     means)
  return dict(means, global_step=step)


def write_eval_results(path: str, results: dict) -> None:
  """`key = value` lines, sorted, as the original's eval_results.txt; written atomically."""
  files.write_text(path, "".join(f"{key} = {results[key]}\n" for key in sorted(results)))
