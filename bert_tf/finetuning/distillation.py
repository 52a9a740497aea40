"""Distillation: a fine-tuned teacher's outputs as a smaller student's training targets, for any
task (Hinton et al. 2015; Turc et al. 2019, "Well-Read Students Learn Better", the recipe behind
google-research/bert's small BERTs; DistilBERT's student initialised from the teacher's layers).

What a task distils is its own say (`FineTuningTask.soft_targets`): each of its model's outputs
that a student learns, as logits of one kind:

  classes    [batch, classes]: a softmax over the classes (classification, multiple choice)
  positions  [batch, seq]: a softmax over the positions (SQuAD's start and end)
  tokens     [batch, seq, classes]: a softmax over the classes at each weighed position (NER's
             labelled first pieces)
  score      [batch, 1]: a value (regression), learned by squared error

The framework does the rest. The teacher runs once over the training features, dropout off,
and its logits go into the training records beside the features (`teacher_<name>`, float), so
that every epoch's student step reads them and costs the student alone. A per-position output
is stored positions last ([classes, seq] for `tokens`), marked per-token: the length buckets cut
it with the tokens (`schema.Feature.sequence_length`).

The student's loss: weight x the soft loss + (1 - weight) x the task's own loss on the gold
labels, where there are any: with transfer examples, each record says whether it has gold
labels (`GOLD`), and the task's loss is a mean over those that do (its counts over them alone,
the whole update's as every loss's: `count_fn`). The soft loss of a softmax is the KL
divergence from the teacher's distribution at temperature T to the student's, times T^2
(Hinton et al.: the gradients' scale kept whatever T; 0 when the student matches), of a score
the squared error; each a mean over what the task's loss counts (records, or NER's labelled
tokens: `counts`), the targets' losses averaged.

TinyBERT's intermediate losses (`Intermediate`) compare the two encoders' hidden states and
attention over a layer map. They are not stored: a record's states would weigh megabytes. The
teacher runs beside the student at every step instead (`Student`), which then costs about a
teacher's forward pass more; its soft targets then come from that same pass, and nothing is
stored (`Settings.stores_targets`).
"""
import dataclasses
import re

import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.finetuning import losses
from bert_tf.modeling import encoder
from bert_tf.modeling.configs import BertConfig
from tfrecords import schema

KINDS = ("classes", "positions", "tokens", "score")
PREFIX = "teacher_"
# A training record's feature where gold labels mix with transfer examples: int64 [1], 1 for
# the training set's records, 0 for the transfer examples' (their label fields zeros).
GOLD = "gold_labels"
_GOLD_COUNT = "gold "  # The gold records' counts: "gold " + the task's term.
_TOKENS = "input tokens"  # What the intermediate losses are means over: the real tokens.
# A stored `positions` logit past the teacher's batch's cut: the softmax gives it no mass (0
# would give it e^0 / Z, at a temperature most of it over a long padding).
NO_POSITION = -1e4
_LAYER = re.compile(r"transformer/layer_(\d+)")


@dataclasses.dataclass(frozen=True)
class SoftTarget:
  """One output a student learns (see the module docstring): its kind, the model's logits, and
  for `tokens` the positions' weights [batch, seq] (1 where the loss counts) and the name of
  the count (`FineTuningTask.loss_counts`) that the mean divides by."""
  kind: str
  logits: tf.Tensor
  weights: tf.Tensor | None = None
  count: str = "records"

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"soft target kind {self.kind!r} is not one of {KINDS}")
    if (self.kind == "tokens") != (self.weights is not None):
      raise ValueError("a `tokens` soft target needs its positions' weights; no other takes any")


@dataclasses.dataclass(frozen=True)
class Intermediate:
  """TinyBERT's intermediate losses (Jiao et al. 2019), each with its weight beside the soft
  and gold losses: `hidden_weight` x the mean squared error of the hidden states (the
  embeddings', then each student block's output against its teacher block's; the student's
  through a learned projection where the widths differ), `attention_weight` x that of the
  attention probabilities (each student block's against its teacher block's; the same heads),
  each a mean over the real tokens (the keys summed, the heads and hidden units averaged) and
  over the layers compared. `layer_map`: the teacher block (0-based) that each student block
  learns; empty: TinyBERT's uniform map (of 6 teacher blocks, a 3-block student learns 1,3,5)."""
  hidden_weight: float = 0.0
  attention_weight: float = 0.0
  layer_map: tuple[int, ...] = ()

  def __post_init__(self):
    for flag, value in (("hidden", self.hidden_weight), ("attention", self.attention_weight)):
      if value < 0:
        raise ValueError(f"--distill_{flag}_weight={value}: must be 0 or more")

  def teacher_blocks(self, teacher_layers: int, student_layers: int) -> tuple[int, ...]:
    """The teacher block that each student block learns: `layer_map`, else the uniform map.
    ValueError naming --distill_layer_map."""
    flag = f"--distill_layer_map={','.join(map(str, self.layer_map))}"
    if not self.layer_map:
      if teacher_layers % student_layers:
        raise ValueError(f"--distill_layer_map: a student of {student_layers} layers has no "
                         f"uniform map onto the teacher's {teacher_layers}: give one teacher "
                         "block per student block")
      step = teacher_layers // student_layers
      return tuple(step * (i + 1) - 1 for i in range(student_layers))
    if len(self.layer_map) != student_layers:
      raise ValueError(f"{flag}: {len(self.layer_map)} teacher blocks for a student of "
                       f"{student_layers} layers: one a student block")
    bad = [i for i in self.layer_map if not 0 <= i < teacher_layers]
    if bad:
      raise ValueError(f"{flag}: the teacher has blocks 0..{teacher_layers - 1}, not {bad[0]}")
    return self.layer_map


@dataclasses.dataclass(frozen=True)
class Settings:
  """How a student learns: its teacher (a fine-tuned model of the task, any form
  --init_checkpoint takes), the softmax temperature, the weight of the soft loss (1 - weight on
  the gold labels, on the records that have them), the teacher's layers that initialise the
  student's (one per student layer; empty: the student's own --init_checkpoint, or none), and
  unlabelled examples that the teacher labels beside the training set
  (`FineTuningTask.transfer_examples`); the intermediate losses, if any (None: none, and the
  teacher does not run during training)."""
  teacher: str
  temperature: float = 1.0
  weight: float = 1.0
  teacher_layers: tuple[int, ...] = ()
  transfer_file: str | None = None
  intermediate: Intermediate | None = None

  def __post_init__(self):
    if self.temperature <= 0:
      raise ValueError(f"--distill_temperature={self.temperature}: must be positive")
    if not 0 <= self.weight <= 1:
      raise ValueError(f"--distill_weight={self.weight}: must be in [0, 1] (1: the teacher's "
                       "outputs alone, 0: the gold labels alone)")
    if self.transfer_file and self.weight == 0:
      raise ValueError("--transfer_file with --distill_weight=0: the gold labels alone train, "
                       "and its examples have none; give a weight above 0")

  @property
  def stores_targets(self) -> bool:
    """Whether the teacher labels the training records once (`TeacherOutputs`): the soft loss
    counts and the teacher does not run beside the student anyway (`Student`), whose outputs
    then hold its soft targets."""
    return self.weight > 0 and self.intermediate is None

  @property
  def marks_gold(self) -> bool:
    """Whether the records say which have gold labels (`GOLD`): the gold labels' loss counts
    and the records include transfer examples, which have none."""
    return bool(self.transfer_file) and self.weight < 1


def mark_gold(records: list[dict], transfer: list[dict]) -> tuple[list[dict], schema.Feature]:
  """The training set's records, then the transfer examples', each with its `GOLD` mark; and
  the mark's feature for the layout."""
  marked = ([{**record, GOLD: np.ones(1, np.int64)} for record in records] +
            [{**record, GOLD: np.zeros(1, np.int64)} for record in transfer])
  return marked, schema.Feature(GOLD, "int64", 1)


def _gold_only(values, features: dict):
  """`values` (a nest of [batch, ...] tensors) cut to the records with gold labels."""
  keep = tf.reshape(features[GOLD], [-1]) > 0
  return tf.nest.map_structure(lambda value: tf.boolean_mask(value, keep), values)


def count_fn(task, settings: Settings):
  """The student's count_fn (`loop.CountFn`): the task's counts over the records, and where the
  records mark gold labels (`Settings.marks_gold`) the same over the marked ones alone
  ("gold <term>"), which the gold labels' loss divides by."""
  def fn(features: dict) -> dict:
    counts = dict(task.loss_counts(features))
    if settings.marks_gold:
      counts.update({_GOLD_COUNT + term: count for term, count in
                     task.loss_counts(_gold_only(features, features)).items()})
    if settings.intermediate:
      counts[_TOKENS] = tf.reduce_sum(tf.cast(features["input_mask"] > 0, tf.float32))
    return counts
  return fn


class Student(tf_keras.Model):
  """What a student trains as when intermediate losses count (`Intermediate`): the student
  (a task model) and its teacher, frozen and dropout off, over the same batch. Outputs a dict:
    outputs: the student's own outputs, as the task's model gives them;
    hidden, teacher_hidden: the embeddings, then each student block's output (through the
      projection to the teacher's width, if any) and its teacher block's: lists of float
      [rows, seq, H], rows the encoder's (a multiple-choice batch's choices flattened);
    attention, teacher_attention: each student block's attention probabilities and its teacher
      block's: lists of float [rows, heads, seq, seq];
    teacher_outputs: the teacher's own outputs, as the task's model gives them (its soft
      targets: `FineTuningTask.soft_targets`).
  The training loop checkpoints and initialises `checkpointed`, the student, as any model it
  trains, and the projection besides (`checkpoint_items`); the teacher comes from
  --teacher_checkpoint every run, not from the student's checkpoints."""

  def __init__(self, student: tf_keras.Model, config: BertConfig, teacher: tf_keras.Model,
               teacher_config: BertConfig, teacher_blocks: tuple[int, ...]):
    super().__init__(name="student_beside_teacher")
    self.checkpointed, self.teacher, self.teacher_blocks = student, teacher, teacher_blocks
    teacher.trainable = False
    self.projection = None
    if config.hidden_size != teacher_config.hidden_size:  # TinyBERT's W_h, one for all layers.
      self.projection = tf_keras.layers.Dense(
          teacher_config.hidden_size, kernel_initializer=encoder.initializer(config),
          name="hidden_projection")
      self.projection.build([None, None, config.hidden_size])

  @property
  def checkpoint_items(self) -> dict:
    return {**self.checkpointed.checkpoint_items,
            **({"hidden_projection": self.projection} if self.projection else {})}

  def call(self, features: dict, training=None) -> dict:
    with encoder.recorded_blocks() as blocks:
      outputs = self.checkpointed(features, training=training)
    with encoder.recorded_blocks() as teacher_blocks:
      teacher_outputs = self.teacher(features, training=False)
    mapped = [teacher_blocks[i] for i in self.teacher_blocks]
    project = self.projection or (lambda x: x)
    held = lambda states: [tf.stop_gradient(state) for state in states]  # Targets, not weights.
    return {"outputs": outputs,
            "teacher_outputs": tf.nest.map_structure(tf.stop_gradient, teacher_outputs),
            "hidden": [project(state) for state in
                       [blocks[0].input] + [block.output for block in blocks]],
            "teacher_hidden": held([teacher_blocks[0].input] + [b.output for b in mapped]),
            "attention": [block.attention for block in blocks],
            "teacher_attention": held([b.attention for b in mapped])}


def intermediate_losses(features: dict, states: dict, counts: dict) -> dict[str, tf.Tensor]:
  """{"hidden_loss", "attention_loss"} of a batch's `Student` outputs (`Intermediate`), each
  a sum over the batch's real tokens divided by counts["input tokens"], the update's."""
  def loss(student, teacher, error):
    means = []
    for s, t in zip(student, teacher):
      errors = error(tf.square(tf.cast(s, tf.float32) - tf.cast(t, tf.float32)))
      # input_mask [batch, (choices,) seq] as the encoder's rows: [rows, seq], as `errors`.
      real = tf.reshape(features["input_mask"], tf.shape(errors)) > 0
      means.append(losses.mean(errors * tf.cast(real, tf.float32), counts[_TOKENS]))
    return tf.add_n(means) / len(means)
  return {
      "hidden_loss": loss(states["hidden"], states["teacher_hidden"],
                          lambda e: tf.reduce_mean(e, -1)),
      # [rows, heads, queries, keys] -> [rows, queries]: the keys summed, the heads averaged.
      "attention_loss": loss(states["attention"], states["teacher_attention"],
                             lambda e: tf.reduce_mean(tf.reduce_sum(e, -1), 1))}


class TeacherOutputs:
  """A prediction step's output function (`Runner.outputs`) for the teacher's pass: the
  soft-target logits of a batch ({teacher_<name>: ...}, float32), each per-position output
  padded back to max_seq_length (a batch may come cut shorter; `positions` with NO_POSITION)
  and stored positions last;
  then `record_features`, the records' features that hold them."""

  def __init__(self, task, max_seq_length: int):
    self.task = task
    self.max_seq_length = max_seq_length
    self.kinds = {}  # teacher_<name> -> its kind, as the task said when the step was traced

  def __call__(self, features: dict, outputs) -> dict[str, tf.Tensor]:
    stored = {}
    for name, target in self.task.soft_targets(features, outputs).items():
      logits = tf.cast(target.logits, tf.float32)
      padding = self.max_seq_length - tf.shape(logits)[1]
      if target.kind == "positions":  # Past the cut: padding, read by a batch cut longer.
        logits = tf.pad(logits, [[0, 0], [0, padding]], constant_values=NO_POSITION)
      elif target.kind == "tokens":
        logits = tf.transpose(tf.pad(logits, [[0, 0], [0, padding], [0, 0]]), [0, 2, 1])
      stored[PREFIX + name] = logits
      self.kinds[PREFIX + name] = target.kind
    return stored

  def record_features(self, outputs: dict[str, np.ndarray]) -> list[schema.Feature]:
    """The features of the teacher's outputs ({teacher_<name>: [n, ...]}) in the records:
    float32, per-token where the output is per position."""
    return [schema.Feature(name, "float32", int(np.prod(values.shape[1:])),
                           self.max_seq_length if self.kinds[name] in ("positions", "tokens")
                           else 0)
            for name, values in outputs.items()]


def stored_logits(target: SoftTarget, stored: tf.Tensor) -> tf.Tensor:
  """A teacher's output as its record feature is read ([batch, length], a per-position one
  cut with the batch: `TeacherOutputs`) -> its logits in the shape of the student's, `target`."""
  if target.kind == "tokens":  # Stored [classes, seq]: back to [batch, seq, classes].
    return tf.transpose(tf.reshape(stored, [tf.shape(stored)[0],
                                            tf.shape(target.logits)[-1], -1]), [0, 2, 1])
  return stored


def soft_loss(target: SoftTarget, teacher: tf.Tensor, temperature: float,
              counts: dict) -> tf.Tensor:
  """One target's soft loss (module docstring). teacher: its logits, as the student's."""
  student = tf.cast(target.logits, tf.float32)
  teacher = tf.cast(teacher, tf.float32)
  if target.kind == "score":
    return losses.mean(tf.reduce_sum(tf.square(student - teacher), -1), counts[target.count])
  log_teacher = tf.nn.log_softmax(teacher / temperature)
  kl = tf.reduce_sum(tf.exp(log_teacher) * (log_teacher - tf.nn.log_softmax(
      student / temperature)), -1) * temperature ** 2
  if target.weights is not None:
    kl *= tf.cast(target.weights, tf.float32)
  return losses.mean(kl, counts[target.count])


def loss_fn(task, settings: Settings):
  """The student's loss (a `loop.LossFn`, its counts `count_fn`'s): the soft targets' mean
  soft loss, mixed with the task's own loss by `settings.weight`, over the records with gold
  labels where they are marked; plus the intermediate losses by their weights (the outputs
  then a `Student`'s, which hold the teacher's soft targets too). Metrics: `soft_loss`; the
  task's own with the gold labels' loss (`label_loss`) where they count; `hidden_loss` and
  `attention_loss` where they do."""
  counted = count_fn(task, settings)
  intermediate = settings.intermediate

  def fn(features: dict, outputs, counts: dict | None = None):
    counts = counts or counted(features)
    terms, metrics = [], {}
    if intermediate:
      states, outputs = outputs, outputs["outputs"]
      for name, value in intermediate_losses(features, states, counts).items():
        weight = getattr(intermediate, name.replace("_loss", "_weight"))
        if weight:
          terms.append(weight * value)
          metrics[name] = value
    if settings.weight > 0:
      targets = task.soft_targets(features, outputs)
      if intermediate:  # The teacher beside the student gives them.
        teacher = {name: t.logits for name, t in
                   task.soft_targets(features, states["teacher_outputs"]).items()}
      else:  # The records hold them.
        teacher = {name: stored_logits(t, features[PREFIX + name]) for name, t in targets.items()}
      soft = tf.add_n([soft_loss(t, teacher[name], settings.temperature, counts)
                       for name, t in targets.items()]) / len(targets)
      terms.append(settings.weight * soft)
      metrics["soft_loss"] = soft
    if settings.weight < 1:
      if settings.marks_gold:  # An update of transfer examples alone: 0 of 0 gold records.
        gold, task_metrics = task.loss(
            *_gold_only((features, outputs), features),
            {term[len(_GOLD_COUNT):]: tf.maximum(count, 1.0) for term, count in counts.items()
             if term.startswith(_GOLD_COUNT)})
      else:
        gold, task_metrics = task.loss(features, outputs, counts)
      terms.append((1 - settings.weight) * gold)
      metrics.update(task_metrics, label_loss=gold)
    return tf.add_n(terms), metrics
  return fn


def student_config(teacher: BertConfig, student: BertConfig | None,
                   layers: tuple[int, ...]) -> BertConfig:
  """The student's config for initialisation from the teacher's `layers`: the teacher's with
  len(layers) layers when `student` is None, else `student` checked against the teacher (the
  same sizes but the depth, one teacher layer per student layer). ValueError naming the flag."""
  flag = f"--init_from_teacher_layers={','.join(map(str, layers))}"
  bad = [i for i in layers if not 0 <= i < teacher.num_hidden_layers]
  if bad:
    raise ValueError(f"{flag}: the teacher has layers 0..{teacher.num_hidden_layers - 1}, "
                     f"not {bad[0]}")
  if student is None:
    return dataclasses.replace(teacher, num_hidden_layers=len(layers))
  if student.num_hidden_layers != len(layers):
    raise ValueError(f"{flag}: {len(layers)} teacher layers for a student of "
                     f"{student.num_hidden_layers} (--bert_config_file): one a student layer")
  for field in dataclasses.fields(BertConfig):
    if field.name not in ("num_hidden_layers", "hidden_dropout_prob",
                          "attention_probs_dropout_prob"):
      ours, theirs = getattr(student, field.name), getattr(teacher, field.name)
      if ours != theirs:
        raise ValueError(f"{flag}: the student's {field.name} is {ours}, the teacher's "
                         f"{theirs}: a student initialised from the teacher's layers has "
                         "their sizes (leave --bert_config_file out to take the teacher's)")
  return student


def layer_weights(model: tf_keras.Model) -> dict[str, list[np.ndarray]]:
  """A task model's weights for `init_from_teacher`: each encoder layer's by name, and the
  head's (the variables outside the encoder, in order) as "head"."""
  encoder = model.checkpoint_items["encoder"]
  weights = {layer.name: layer.get_weights() for layer in encoder.layers if layer.weights}
  inside = {id(v) for v in encoder.variables}
  weights["head"] = [v.numpy() for v in model.variables if id(v) not in inside]
  return weights


def init_from_teacher(model: tf_keras.Model, teacher: dict[str, list[np.ndarray]],
                      layers: tuple[int, ...]) -> None:
  """DistilBERT's initialisation: the student's block i from the teacher's block layers[i];
  the embeddings, the pooler and the task's head from the teacher's own (`layer_weights`)."""
  encoder = model.checkpoint_items["encoder"]
  for layer in encoder.layers:
    if not layer.weights:
      continue
    block = _LAYER.fullmatch(layer.name)
    layer.set_weights(teacher[f"transformer/layer_{layers[int(block[1])]}" if block
                              else layer.name])
  inside = {id(v) for v in encoder.variables}
  head = [v for v in model.variables if id(v) not in inside]
  if [tuple(v.shape) for v in head] != [w.shape for w in teacher["head"]]:
    raise ValueError("the student's task head differs from the teacher's in shape: it cannot "
                     "be initialised from the teacher's")
  for variable, value in zip(head, teacher["head"]):
    variable.assign(value)
