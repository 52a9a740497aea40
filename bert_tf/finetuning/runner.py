"""The one fine-tuning runner: any `FineTuningTask`, as google-research/bert's run_* scripts
run theirs, plus the paper's recipe (several learning rates and restarts, the best on dev kept).

    run(task, RunArgs(output_dir=..., init_checkpoint=..., do_train=True, ...), strategy)

output_dir receives (the original's names first):
  train.tf_record, eval.tf_record, predict.tf_record      the features (a split after the
                                                           first of its kind: eval_<split>...)
  ckpt-<step>                                              the model (the best run's, in a sweep)
  eval_results.txt, eval_results.json                      dev metrics of the best run
  the task's prediction files                              e.g. test_results.tsv, predictions.json
  sweep_results.tsv                                        every run's dev metrics
  bert_config.json, vocab.txt, task_config.json            what export and later runs read back
  run_settings.json                                        what defines the trained model: a
                                                           re-run with other settings is refused
  runs/lr<lr>_seed<seed>/                                  each run's checkpoints, in a sweep

A run that does not train (--do_eval, --do_predict) uses output_dir's latest checkpoint, else a
fine-tuned --init_checkpoint, head included (`Runner.init_fn`; nothing untrained predicts), and
that trained run's task_config.json decides its labels, casing, sequence length...
(`take_trained_settings`), not the data folder's training file.

Every path goes through tf.io.gfile, so output_dir may be gs:// (Cloud TPUs) or ram://. While a
run writes a local output_dir, a second one there is refused (`output_lock`).
"""
import dataclasses
import json
import os
import time
from typing import Callable
import warnings

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.common import output_lock
from bert_tf.common import progress
from bert_tf.common.errors import DataError
from bert_tf.common.files import write_text
from bert_tf.modeling import checkpoints
from bert_tf.modeling import encoder
from bert_tf.modeling.configs import BertConfig
from bert_tf.finetuning import distillation
from bert_tf.finetuning import task_class
from bert_tf.finetuning.task import FineTuningTask, Features, TaskConfig
from bert_tf.tokenization import FullTokenizer, load_vocab
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization
from tfrecords import datasets, writer

TASK_CONFIG = "task_config.json"

# Models get whole feature dicts (labels too, which the loss reads); the Model Garden's
# functional models ignore the extra keys, as intended, but warn at every trace.
warnings.filterwarnings("ignore", message="Input dict contained keys", category=UserWarning)

# (serving module, export_dir, warm-up inputs) -> the path of the written SavedModel.
Exporter = Callable[[tf.Module, str, list], str]


@dataclasses.dataclass
class RunArgs:
  """The task-independent arguments of a run: the run_* scripts' flags of the same names."""
  output_dir: str
  bert_config_file: str | None = None
  vocab_file: str | None = None
  init_checkpoint: str | None = None
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: int = 32  # The global batch of one update.
  gradient_accumulation_steps: int = 1  # Micro-batches a replica takes its batch in.
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rates: tuple[float, ...] = (5e-5,)
  num_restarts: int = 1
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 1000
  seed: int = 12345
  mixed_precision: str = "none"
  jit_compile: bool = False
  recompute_layers: bool = False  # Not a run setting: the same math (`encoder.recomputed_blocks`).
  export_dir: str | None = None
  length_buckets: int | None = None  # None: see `batch_length_buckets`.
  # The task settings the user chose (flags given on the command line): a run that does not
  # train takes the others from the trained model (`take_trained_settings`). None: all chosen.
  flags_given: tuple[str, ...] | None = None
  group_by_length: bool = False
  # Random training batches as this many micro-batches sorted by length, each cut (see
  # `datasets.sorted_micro_batches`); where it applies, see `Runner.dataset`.
  sorted_micro_batches: int = 4
  # Distillation (`finetuning.distillation`): a fine-tuned model of the task whose outputs the
  # trained model learns; None: the gold labels alone.
  teacher_checkpoint: str | None = None
  distill_temperature: float = 1.0
  distill_weight: float = 1.0
  init_from_teacher_layers: tuple[int, ...] = ()
  transfer_file: str | None = None
  # TinyBERT's intermediate losses (`distillation.Intermediate`): 0 weights, none.
  distill_hidden_weight: float = 0.0
  distill_attention_weight: float = 0.0
  distill_layer_map: tuple[int, ...] = ()


# What a run's run_settings.json held without naming it, before the setting existed: until
# e848d21, training batches were always grouped by length.
RUN_SETTINGS_IMPLIED = {"group_by_length": True}

# Under XLA each batch length is one compiled program: few lengths, each a multiple of 8.
COMPILED_LENGTH_BUCKETS = 16


def batch_length_buckets(args: RunArgs, task: FineTuningTask,
                         strategy: tf.distribute.Strategy) -> int:
  """The length buckets of the batches (0: every batch padded to max_seq_length). Training:
  batches of similar lengths (`datasets.length_bucketed`); evaluation and prediction: records
  written in order of length, each batch cut (`datasets.cut_in_order`), outputs put back in
  order. Unset (None): COMPILED_LENGTH_BUCKETS under --jit_compile, else max_seq_length, each
  batch cut to its own longest: uncompiled, a new length costs nothing."""
  if task.loss_reads_padding:
    logging.info("length buckets off: this task's loss reads the padding")
    return 0
  if isinstance(strategy, tf.distribute.TPUStrategy):
    # The loop of steps_per_loop steps is one TPU program: every batch needs one shape.
    logging.info("TPU: length buckets off, every batch padded to max_seq_length")
    return 0
  if args.length_buckets is not None:
    return args.length_buckets
  return COMPILED_LENGTH_BUCKETS if args.jit_compile else task.config.max_seq_length


def restore(model: tf_keras.Model, checkpoint: str) -> int:
  """Restores a fine-tuned model's checkpoint (training's, with optimizer state, or a sweep's
  best) into `model`. Returns its global step; ValueError naming the checkpoint if a variable
  of the model is missing from it."""
  checkpoints.read_checkpoint(tf.train.Checkpoint(model=model), checkpoint, partial=True)
  step = tf.Variable(0, dtype=tf.int64)
  tf.train.Checkpoint(global_step=step).read(checkpoint).expect_partial()
  return int(step.numpy())


def read_task_config(path: str) -> TaskConfig:
  """A task_config.json as its task's TaskConfig; errors name the file."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f"{path}: not found (a fine-tuning run writes it into output_dir)")
  with tf.io.gfile.GFile(path) as f:
    try:
      values = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON ({e})") from None
  cls = task_class(values.get("task", ""), path)
  return cls.config_class.from_dict(values, path)


def trained_task_config(args: RunArgs) -> tuple[TaskConfig, str] | None:
  """(config, its path) of the model that a run which does not train evaluates or predicts
  with: --output_dir's task_config.json when output_dir holds a checkpoint, else the one
  beside --init_checkpoint (a fine-tuning run's output_dir or checkpoint); None if none."""
  if tf.train.latest_checkpoint(args.output_dir):
    path = os.path.join(args.output_dir, TASK_CONFIG)
  elif args.init_checkpoint:
    path = checkpoints.beside(args.init_checkpoint, TASK_CONFIG)
  else:
    return None
  return (read_task_config(path), path) if tf.io.gfile.exists(path) else None


def take_trained_settings(task: FineTuningTask, trained: TaskConfig, source: str,
                          flags_given: tuple[str, ...] | None) -> None:
  """Sets the task's `trained_fields` to the trained model's (`source`: its task_config.json)
  for a run that does not train: the labels, casing, sequence length... that the model was
  trained with, not whatever the data folder's training file or the flags' defaults say.
  ValueError naming the data file or the flag that disagrees (a flag the user gave;
  flags_given None: every setting counts as given, but None, which chooses nothing)."""
  config = task.config
  if trained.kind != config.kind:
    raise ValueError(f"{source}: the trained model is a {trained.kind} model, not "
                     f"{config.kind}")
  taken = {}
  for field in config.trained_fields:
    ours, theirs = getattr(config, field), getattr(trained, field)
    if ours == theirs:
      continue
    if field in config.data_fields:
      raise ValueError(task.data_mismatch(field, theirs, source))
    if ours is not None and (flags_given is None or field in flags_given):
      raise ValueError(f"--{field}={ours}: the trained model has {field} {theirs!r} "
                       f"({source}); leave the flag out, or give its value")
    taken[field] = theirs
  if taken:
    logging.info("the trained model's settings (%s): %s", source,
                 ", ".join(f"{k}={v!r}" for k, v in taken.items()))
    task.config = dataclasses.replace(config, **taken)


def load_trained(model_dir: str, checkpoint: str | None = None, data: str | None = None
                 ) -> tuple[FineTuningTask, tf_keras.Model, FullTokenizer]:
  """A run's task (from task_config.json; `data` says where its examples are, see
  `FineTuningTask.from_config`), its model restored from the latest checkpoint in model_dir
  (or `checkpoint`), in float32 whatever it was trained in, and its tokenizer."""
  config = read_task_config(os.path.join(model_dir, TASK_CONFIG))
  task = task_class(config.kind).from_config(config, data)
  bert_config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
  tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"), task.config.do_lower_case)
  checkpoint = checkpoint or tf.train.latest_checkpoint(model_dir)
  if not checkpoint:
    raise FileNotFoundError(f"{model_dir}: no checkpoint")
  tf_keras.mixed_precision.set_global_policy("float32")
  model = task.build_model(bert_config)
  restore(model, checkpoint)
  return task, model, tokenizer


@dataclasses.dataclass
class SplitRecords:
  """A split written as records: its examples, the record file and its layout, how many
  features it holds, and (eval and predict splits only: post-processing reads them) the
  features themselves and, where they are written in order of length, the feature of each
  record (`by_length`)."""
  name: str
  examples: list
  path: str
  layout: list
  num_features: int
  features: Features | None = None
  order: np.ndarray | None = None


def head_variables(model: tf_keras.Model) -> tuple:
  """(kernel, bias) of a task head that is one output layer on the encoder (the classifier's,
  the span labeler's); ValueError for any other head."""
  encoder = {id(v) for v in model.checkpoint_items["encoder"].variables}
  head = [v for v in model.variables if id(v) not in encoder]
  if len(head) != 2 or len(head[0].shape) != 2 or len(head[1].shape) != 1:
    raise ValueError(f"the task's head is not one output layer: {[v.name for v in head]}")
  return head[0], head[1]


def by_length(records: list[dict], layout) -> np.ndarray:
  """The records' indices in order of their longest sequence (stable): evaluation batches of
  neighbours in that order are cut to about their own length (`datasets.cut_in_order`)."""
  [mask] = [f for f in layout if f.name == "input_mask"]
  lengths = [r["input_mask"].reshape(-1, mask.sequence_length).sum(-1).max() for r in records]
  return np.argsort(lengths, kind="stable")


def in_feature_order(outputs: dict[str, np.ndarray], order: np.ndarray | None) -> dict:
  """Outputs of records written in `order` (see `by_length`) put back in the features' order."""
  if order is None:
    return outputs
  inverse = np.argsort(order)
  return {name: values[inverse] for name, values in outputs.items()}


def _record_name(kind: str, index: int, split: str) -> str:
  """The original's names for the first split of a kind; the split's name after others."""
  return f"{kind}.tf_record" if index == 0 else f"{kind}_{split}.tf_record"


def padding_records(layout, count: int) -> list[dict]:
  """All-zero records (is_real_example 0 where the layout has it) that fill the last batch,
  so evaluation and prediction see static batch shapes (what TPUs and XLA need)."""
  return [{f.name: np.zeros([f.length]) for f in layout}] * count


class Runner:
  """One run_* invocation: records, the runs of the sweep, results and prediction files."""

  def __init__(self, task: FineTuningTask, args: RunArgs, strategy: tf.distribute.Strategy,
               exporter: Exporter | None = None):
    """exporter: writes the serving module for --export_dir (`export.tf_serving.export`; the
    entry points hand it over, since export/ is built on this runner, not under it)."""
    if not (args.do_train or args.do_eval or args.do_predict):
      raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    runs = len(args.learning_rates) * args.num_restarts
    if runs > 1 and args.do_train and not args.do_eval:
      raise ValueError(f"{runs} runs (--learning_rate values x --num_restarts) need --do_eval: "
                       "the best on dev is kept")
    if args.export_dir and exporter is None:
      raise ValueError("--export_dir needs an exporter (export.tf_serving.export)")
    self.task = task
    self.args = args
    self.strategy = strategy
    self.exporter = exporter
    if not args.do_train:  # The trained model's labels, casing... decide, not the data's.
      trained = trained_task_config(args)
      if trained:
        take_trained_settings(task, *trained, args.flags_given)
    trained_dir = (args.output_dir if not args.do_train and
                   tf.train.latest_checkpoint(args.output_dir) else None)
    self.distillation = self.teacher_head = self.teacher_weights = None
    if args.transfer_file and not args.teacher_checkpoint:
      raise ValueError(f"--transfer_file={args.transfer_file} without --teacher_checkpoint: "
                       "a teacher labels its examples")
    for flag in ("distill_hidden_weight", "distill_attention_weight", "distill_layer_map"):
      if getattr(args, flag) and not args.teacher_checkpoint:
        raise ValueError(f"--{flag} without --teacher_checkpoint: it compares the student's "
                         "layers with a teacher's")
    if args.teacher_checkpoint:
      self.bert_config, vocab_file = self._student_files()
      self._check_teacher()
    else:
      self.bert_config, vocab_file = checkpoints.resolve_files(
          args.bert_config_file, args.vocab_file, args.init_checkpoint,
          task.config.max_seq_length, trained_dir)
    self.tokenizer = FullTokenizer(vocab_file, task.config.do_lower_case)
    # do_lower_case None (the flag not given): the model's, which task_config.json records.
    task.config = dataclasses.replace(task.config, do_lower_case=self.tokenizer.do_lower_case)
    if len(self.tokenizer.vocab) > self.bert_config.vocab_size:
      raise ValueError(f"{vocab_file} has {len(self.tokenizer.vocab)} tokens, but the bert "
                       f"config's vocab_size is {self.bert_config.vocab_size}: ids past it "
                       "have no embedding (a vocab of another model?)")
    task.check_inputs([m for m, on in zip(("train", "eval", "predict"),
                                          (args.do_train, args.do_eval, args.do_predict)) if on])
    self.is_chief = distribute.is_chief(strategy)
    self._predictions = {}  # split -> (examples, predictions): a split both scored and written.
    self.vocab_file = vocab_file
    self.init_head = self._init_head(args.init_checkpoint) if args.init_checkpoint else None
    if not args.do_train and not trained_dir:
      if not args.init_checkpoint:
        raise FileNotFoundError(f"no checkpoint in {args.output_dir} and no "
                                "--init_checkpoint: nothing to evaluate or predict with")
      how, why = self.init_head
      if how == "encoder":
        raise ValueError(
            f"--init_checkpoint={args.init_checkpoint}: {why}, so without --do_train the "
            f"{task.config.kind} head would be untrained: give a fine-tuned model (a "
            "fine-tuning run's output_dir), or --do_train")
    self.length_buckets = batch_length_buckets(args, task, strategy)
    if args.do_train:
      loop.micro_batch_size(args.train_batch_size, strategy.num_replicas_in_sync,
                            args.gradient_accumulation_steps)

  def _student_files(self) -> tuple[BertConfig, str]:
    """(BertConfig, vocab file) of a student (--teacher_checkpoint): --bert_config_file or
    --init_checkpoint's, or with --init_from_teacher_layers the teacher's less the layers left
    out (`distillation.student_config`); the vocab --vocab_file's, --init_checkpoint's, else
    the teacher's, which the student's must be (the teacher reads the student's records).
    ValueError naming the flag otherwise."""
    args, max_seq_length = self.args, self.task.config.max_seq_length
    if not args.do_train:
      raise ValueError(f"--teacher_checkpoint={args.teacher_checkpoint} without --do_train: "
                       "a teacher's outputs are training targets")
    if type(self.task).soft_targets is FineTuningTask.soft_targets:
      raise ValueError(f"--teacher_checkpoint: the {self.task.config.kind} task does not say "
                       "what of its outputs a student learns (FineTuningTask.soft_targets): it "
                       "cannot be distilled")
    intermediate = None
    if args.distill_hidden_weight or args.distill_attention_weight:
      intermediate = distillation.Intermediate(
          args.distill_hidden_weight, args.distill_attention_weight,
          tuple(args.distill_layer_map))
    elif args.distill_layer_map:
      raise ValueError(f"--distill_layer_map={','.join(map(str, args.distill_layer_map))} "
                       "without --distill_hidden_weight or --distill_attention_weight: it maps "
                       "the layers that those losses compare")
    self.distillation = distillation.Settings(
        args.teacher_checkpoint, args.distill_temperature, args.distill_weight,
        tuple(args.init_from_teacher_layers), args.transfer_file, intermediate)
    self.teacher_config, teacher_vocab = checkpoints.resolve_files(
        None, None, args.teacher_checkpoint, max_seq_length)
    layers = self.distillation.teacher_layers
    if layers:
      if args.init_checkpoint:
        raise ValueError("--init_from_teacher_layers and --init_checkpoint: the student starts "
                         "from one of them")
      student = (checkpoints.config_from_file(args.bert_config_file)
                 if args.bert_config_file else None)
      config = distillation.student_config(self.teacher_config, student, layers)
      vocab_file = args.vocab_file or teacher_vocab
    elif args.bert_config_file or args.init_checkpoint:
      config, vocab_file = checkpoints.resolve_files(
          args.bert_config_file, args.vocab_file or (None if args.init_checkpoint else
                                                     teacher_vocab),
          args.init_checkpoint, max_seq_length)
    else:
      raise ValueError(f"--teacher_checkpoint={args.teacher_checkpoint}: which student? Give "
                       "its --bert_config_file (and --init_checkpoint: a pretrained compact "
                       "model), or --init_from_teacher_layers")
    if load_vocab(vocab_file) != load_vocab(teacher_vocab):
      raise ValueError(f"--teacher_checkpoint={args.teacher_checkpoint}: its vocab "
                       f"({teacher_vocab}) is not the student's ({vocab_file}): the teacher "
                       "reads the student's token ids")
    if intermediate:  # The teacher block each student block learns; ValueError if none fits.
      self.teacher_blocks = intermediate.teacher_blocks(self.teacher_config.num_hidden_layers,
                                                        config.num_hidden_layers)
      if args.recompute_layers:  # `encoder.recorded_blocks` cannot read a recomputed block.
        raise ValueError("--recompute_layers with --distill_hidden_weight or "
                         "--distill_attention_weight: the recomputed layers' states cannot be "
                         "compared; train without one of them")
      heads = config.num_attention_heads, self.teacher_config.num_attention_heads
      if intermediate.attention_weight and heads[0] != heads[1]:
        raise ValueError(f"--distill_attention_weight={intermediate.attention_weight}: the "
                         f"student has {heads[0]} attention heads, the teacher {heads[1]}: "
                         "their attention compares head by head (or leave it 0)")
    return config, vocab_file

  def _check_teacher(self) -> None:
    """Refuses a teacher that is not a fine-tuned model of this task and labels (its head as
    `_init_head` finds it), or one of this project's trained with another casing; the casing
    not given (None), the teacher's own, which reads the same token ids."""
    args, task = self.args, self.task
    self.teacher_head = self._init_head(args.teacher_checkpoint)
    if self.teacher_head[0] == "encoder":
      raise ValueError(f"--teacher_checkpoint={args.teacher_checkpoint}: "
                       f"{self.teacher_head[1]}: a teacher is a fine-tuned {task.config.kind} "
                       "model of this run's labels, head included")
    if self.teacher_head[0] != "model":
      return
    trained = checkpoints.beside(args.teacher_checkpoint, TASK_CONFIG)
    casing = read_task_config(trained).do_lower_case
    if task.config.do_lower_case is None:
      task.config = dataclasses.replace(task.config, do_lower_case=casing)
    elif task.config.do_lower_case != casing:
      raise ValueError(f"--do_lower_case={task.config.do_lower_case}: the teacher was trained "
                       f"with do_lower_case={casing} ({trained})")

  def _write_model_files(self) -> None:
    """bert_config.json and vocab.txt beside the checkpoints (so they load as an
    --init_checkpoint, and export finds everything in one folder), and task_config.json."""
    out, vocab_file = self.args.output_dir, self.tokenizer.vocab_txt
    self.bert_config.to_json_file(os.path.join(out, "bert_config.json"))
    if os.path.abspath(vocab_file) != os.path.abspath(os.path.join(out, "vocab.txt")):
      tf.io.gfile.copy(vocab_file, os.path.join(out, "vocab.txt"), overwrite=True)
    self.task.config.to_json_file(os.path.join(out, TASK_CONFIG))

  def write_records(self, mode: str, batch_size: int,
                    only: list[str] | None = None) -> list[SplitRecords]:
    """Each split of the mode (or those of `only`) as features in `<mode>[_<split>].tf_record`;
    eval and predict records are padded to whole batches (their outputs are dropped again)."""
    out = []
    is_training = mode == "train"
    layout = self.task.record_layout(is_training)
    for index, split in enumerate(self.task.splits(mode)):
      if only is not None and split not in only:
        continue
      examples = self.task.read_examples(split)
      if not examples:
        raise DataError(f"{self.task.split_file(split)}: no {self.task.example_noun} (the "
                        f"{split} split, for --do_{mode})")
      features = self.task.convert_examples(examples, self.tokenizer, is_training)
      records, order = features.records, None
      if is_training and self.distillation:
        if self.distillation.marks_gold:
          records, mark = distillation.mark_gold(records, self._transfer_records(layout))
          layout = layout + [mark]
        elif self.distillation.transfer_file:
          records = records + self._transfer_records(layout)
        layout = layout + self._add_teacher_outputs(records, layout)
      if not is_training:
        if self.length_buckets:  # Batches of similar lengths, cut (see `dataset`).
          order = by_length(records, layout)
          records = [records[i] for i in order]
        records = records + padding_records(layout, -len(records) % batch_size)
      path = os.path.join(self.args.output_dir, _record_name(mode, index, split))
      writer.write_records(path, layout, records)
      padding = f" + {len(records) - len(features)} padding" if not is_training else ""
      transfer = (f" + {len(records) - len(features)} of --transfer_file" if is_training and
                  len(records) > len(features) else "")
      logging.info("%s: %d examples, %d features%s%s -> %s", split, len(examples),
                   len(features), padding, transfer, path)
      # Training features are only counted: SQuAD's would hold ~1 GB for nothing.
      out.append(SplitRecords(split, examples, path, layout,
                              len(records) if is_training else len(features),
                              None if is_training else features, order))
    return out

  def _transfer_records(self, layout: list) -> list[dict]:
    """--transfer_file's examples (`FineTuningTask.transfer_examples`) as training records:
    their features, the training layout's fields they lack (the gold labels) zeros, which no
    loss reads (the gold labels' loss skips them: `distillation.mark_gold`)."""
    path = self.distillation.transfer_file
    try:
      examples = self.task.transfer_examples(path)
    except NotImplementedError as e:
      raise ValueError(f"--transfer_file={path}: {e}") from None
    if not examples:
      raise DataError(f"{path}: no {self.task.example_noun} (--transfer_file)")
    features = self.task.convert_examples(examples, self.tokenizer, is_training=False)
    return [{f.name: record.get(f.name, np.zeros(f.length)) for f in layout}
            for record in features.records]

  def _add_teacher_outputs(self, records: list[dict], layout: list) -> list:
    """The teacher's outputs of the training records (`distillation.TeacherOutputs`), added
    to each record; returns their features in the layout. The teacher runs once, dropout off,
    over the records in order of length (batches cut as evaluation's), and its weights are
    kept for --init_from_teacher_layers. It runs over nothing where the records hold no soft
    targets (`distillation.Settings.stores_targets`): with --distill_weight=0, the gold labels
    alone (the baseline of a student initialised from the teacher's layers), and with the
    intermediate losses, whose teacher runs beside the student and gives them at every step."""
    args, task = self.args, self.task
    with self.strategy.scope():
      teacher = task.build_model(self.teacher_config)
    self.load(teacher, args.teacher_checkpoint, self.teacher_head, strict=True)
    if self.distillation.teacher_layers:
      self.teacher_weights = distillation.layer_weights(teacher)
    if not self.distillation.stores_targets:
      return []
    order = by_length(records, layout) if self.length_buckets else None
    ordered = records if order is None else [records[i] for i in order]
    batch_size = args.eval_batch_size
    path = os.path.join(args.output_dir, "teacher_input.tf_record")
    writer.write_records(path, layout, ordered + padding_records(
        layout, -len(ordered) % batch_size))
    teacher_outputs = distillation.TeacherOutputs(task, task.config.max_seq_length)
    outputs = self.outputs(teacher, SplitRecords("train", [], path, layout, len(records),
                                                 order=order),
                           batch_size, teacher_outputs)
    tf.io.gfile.remove(path)
    for index, record in enumerate(records):
      record.update({name: values[index].reshape(-1) for name, values in outputs.items()})
    logging.info("the teacher's outputs (%s) of %d training features, from %s",
                 ", ".join(outputs), len(records), args.teacher_checkpoint)
    return teacher_outputs.record_features(outputs)

  def dataset(self, records: SplitRecords, batch_size: int, is_training: bool, seed=None,
              ctx=None) -> tf.data.Dataset:
    """The split's batches. Training: random batches, each cut to its longest, as
    micro-batches of its records sorted by length, each cut to its own (--gradient_
    accumulation_steps of equal size, else `sorted_micro_batches` sized to pad least) where
    shapes are free
    (uncompiled) and the loss is a mean over records; or, with --group_by_length, batches of
    similar lengths (not where the loss is a mean over tokens, whose weights grouping would
    shift toward short sequences)."""
    args, task = self.args, self.task
    accumulation = args.gradient_accumulation_steps
    # A loss over tokens keeps its random batches whole (cut), as before exact counts made
    # sorted parts possible for it: that change to what trains has no quality study yet.
    # With accumulation the step splits such a batch into equal parts.
    parts = (1 if task.loss_per_token or args.jit_compile else
             accumulation if accumulation > 1 else args.sorted_micro_batches)
    grouped = args.group_by_length and not task.loss_per_token
    if is_training and self.length_buckets and not grouped and parts > 1 and accumulation == 1:
      logging.info("each training batch runs as %d parts of its records sorted by length, "
                   "sized to pad least, each cut to its longest: one update, the whole batch's "
                   "gradient", parts)
    return datasets.record_dataset(
        [records.path], records.layout, batch_size, is_training,
        input_context=ctx, seed=seed, drop_remainder=True, length_buckets=self.length_buckets,
        records_per_epoch=records.num_features,
        group_by_length=grouped, micro_batches=parts, least_padding=accumulation == 1)

  def _init_head(self, path: str) -> tuple[str, str]:
    """What a checkpoint (--init_checkpoint, --teacher_checkpoint) gives the task's head:
    ("model", its task_config.json) for a
    fine-tuned model of this task (the same kind and `head_fields`: the labels, in the same
    order), ("tf1", the names) for google-research/bert's fine-tuned output layer of this
    task (`checkpoints.TF1_HEADS`), ("hf", its class) for a Hugging Face model of this task's
    class with this run's labels (`_hf_head`), else ("encoder", why it gives none)."""
    config = self.task.config
    kind, _ = checkpoints.resolve(path)
    if kind == "tf1":
      heads = checkpoints.tf1_heads(path)
      if self.task.tf1_head in heads:
        return "tf1", f"{checkpoints.TF1_HEADS[self.task.tf1_head]}'s {self.task.tf1_head[0]}"
      if heads:
        return "encoder", (f"its head is {checkpoints.TF1_HEADS[heads[0]]}'s {heads[0][0]}, "
                           f"not a {config.kind} head")
      return "encoder", ("a google-research/bert checkpoint without a fine-tuned head (no "
                         f"{' or '.join(h[0] for h in checkpoints.TF1_HEADS)})")
    if kind == "hf":
      return self._hf_head(path)
    if kind == "hub":
      return "encoder", "a TF Hub encoder fills the encoder only"
    if kind == "config":
      return "encoder", "a config file holds no weights"
    source = checkpoints.beside(path, TASK_CONFIG)
    if not tf.io.gfile.exists(source):
      return "encoder", f"no {TASK_CONFIG} beside it (a pretraining checkpoint, no task head)"
    trained = read_task_config(source)
    if trained.kind != config.kind:
      return "encoder", f"{source}: a {trained.kind} model, not {config.kind}"
    for field in config.head_fields:
      ours, theirs = getattr(config, field), getattr(trained, field)
      if ours != theirs:
        if field in config.data_fields:
          return "encoder", self.task.data_mismatch(field, theirs, source)
        return "encoder", f"{source}: {field} {theirs!r}, this run's {ours!r}"
    return "model", source

  def _hf_head(self, path: str) -> tuple[str, str]:
    """A Hugging Face folder's head, as `_init_head` says: ("hf", its class) when the class
    is this task's (`FineTuningTask.hf_architecture`) and, where the head's outputs are
    labels, config.json's id2label is this run's labels in the same order (problem_type
    "regression" for none); else ("encoder", why)."""
    config = self.task.config
    architecture = checkpoints.hf_architecture(path)
    if architecture is None or checkpoints.HF_ARCHITECTURES[architecture].head is None:
      return "encoder", "a Hugging Face model fills the encoder only"
    if architecture != self.task.hf_architecture or getattr(config, "feature_based", ""):
      return "encoder", f"its head is a Hugging Face {architecture}'s, not a {config.kind} head"
    if "labels" in config.head_fields:
      source = os.path.join(checkpoints.resolve(path)[1], "config.json")
      with tf.io.gfile.GFile(source) as f:
        problem_type = json.load(f).get("problem_type")
      if problem_type == "multi_label_classification":
        return "encoder", (f"{source}: problem_type {problem_type} (a sigmoid for each "
                           f"label), where the {config.kind} head is one softmax")
      labels = checkpoints.hf_labels(source)
      if labels != config.labels:
        return "encoder", self.task.data_mismatch("labels", labels, f"{source}: id2label")
    return "hf", f"a Hugging Face {architecture}"

  def init_fn(self, model: tf_keras.Model) -> int:
    """Initialises a model to train or to predict with: from the teacher's layers
    (--init_from_teacher_layers: `distillation.init_from_teacher`), else from
    --init_checkpoint (`load`), else not at all. Returns the global step of a model restored
    whole, else 0."""
    if self.teacher_weights is not None:
      layers = self.distillation.teacher_layers
      distillation.init_from_teacher(model, self.teacher_weights, layers)
      logging.info("initialized the student from the teacher's layers %s, embeddings and head "
                   "(%s)", ",".join(map(str, layers)), self.args.teacher_checkpoint)
      return 0
    if not self.args.init_checkpoint:
      return 0
    return self.load(model, self.args.init_checkpoint, self.init_head,
                     strict=not self.args.do_train)

  def load(self, model: tf_keras.Model, path: str, head: tuple[str, str], strict: bool) -> int:
    """Loads a checkpoint as `_init_head` said of it (`head`): the whole model, head included,
    when it is a fine-tuned model of this task (its task_config.json has the same kind and
    labels, in the same order), google-research/bert's fine-tuned checkpoint of this task's
    head (run_classifier's output_weights, run_squad's cls/squad/output_*) or a Hugging Face
    model of this task's class and labels (its classifier or qa_outputs); else only the
    encoder, the task's head freshly drawn, and a log line names why. strict: a head whose
    weights do not fit is an error, not drawn fresh. Returns the global step of the model
    restored whole, else 0."""
    how, why = head
    if how == "model":
      step = restore(model, checkpoints.resolve(path)[1])
      logging.info("initialized the whole model, head included, from %s (%s: the same task "
                   "and labels)", path, why)
      return step
    checkpoints.load_into_encoder(model.checkpoint_items["encoder"], path)
    if how in ("tf1", "hf"):
      kernel, bias = head_variables(model)
      try:
        if how == "tf1":
          checkpoints.load_tf1_head(kernel, bias, path, self.task.tf1_head)
        else:
          checkpoints.load_hf_head(kernel, bias, path)
      except ValueError as e:
        if strict:
          raise
        logging.info("initialized the encoder from %s; the %s head is drawn fresh: %s", path,
                     self.task.config.kind, e)
        return 0
      logging.info("initialized the encoder and the head (%s) from %s", why, path)
      return 0
    logging.info("initialized the encoder from %s; the %s head is drawn fresh: %s", path,
                 self.task.config.kind, why)
    return 0

  def train(self, records: SplitRecords, learning_rate: float, seed: int,
            run_dir: str) -> tuple[tf_keras.Model, dict]:
    """One fine-tuning run in run_dir (resuming from its latest checkpoint). Returns the
    trained model and {global_step, train_seconds, examples_per_second}."""
    args = self.args
    # Steps from the features, not the examples: a SQuAD question has several windows.
    num_train_steps = int(records.num_features / args.train_batch_size * args.num_train_epochs)
    if num_train_steps < 1:
      raise ValueError(f"{records.num_features} training features make no step of "
                       f"--train_batch_size={args.train_batch_size}")
    num_warmup_steps = int(num_train_steps * args.warmup_proportion)
    tf_keras.utils.set_random_seed(seed)
    built = []

    def model_fn():
      with encoder.recomputed_blocks(args.recompute_layers):
        built.append(self.task.build_model(self.bert_config))
      if not (self.distillation and self.distillation.intermediate):
        return built[-1]
      # The intermediate losses read the teacher's states at every step: it trains beside.
      teacher = self.task.build_model(self.teacher_config)
      self.load(teacher, args.teacher_checkpoint, self.teacher_head, strict=True)
      return distillation.Student(built[-1], self.bert_config, teacher, self.teacher_config,
                                  self.teacher_blocks)

    start = time.time()
    with datasets.naming_damaged_file([records.path]):
      results = loop.train(
          self.strategy, model_fn,
          lambda: optimization.create_optimizer(
              learning_rate, num_train_steps, num_warmup_steps,
              loss_scaling=args.mixed_precision == "fp16"),
          (distillation.loss_fn(self.task, self.distillation)
           if self.distillation and (self.distillation.weight > 0 or
                                     self.distillation.intermediate) else self.task.loss),
          lambda ctx: self.dataset(records, args.train_batch_size, True, seed, ctx),
          run_dir, num_train_steps, steps_per_loop=args.iterations_per_loop,
          save_checkpoints_steps=args.save_checkpoints_steps, init_fn=self.init_fn,
          jit_compile=args.jit_compile,
          count_fn=(distillation.count_fn(self.task, self.distillation) if self.distillation
                    else self.task.loss_counts),
          micro_batches=args.gradient_accumulation_steps)
    seconds = time.time() - start
    return built[-1], {"global_step": results["global_step"], "train_seconds": seconds,
                       "examples_per_second": num_train_steps * args.train_batch_size / seconds}

  def restore(self) -> tuple[tf_keras.Model, int]:
    """The model of output_dir's latest checkpoint, else --init_checkpoint's (`init_fn`)."""
    with self.strategy.scope():
      model = self.task.build_model(self.bert_config)
    latest = tf.train.latest_checkpoint(self.args.output_dir)
    if latest:
      logging.info("restoring %s", latest)
      return model, restore(model, latest)
    if not self.args.init_checkpoint:
      raise FileNotFoundError(f"no checkpoint in {self.args.output_dir} and no "
                              "--init_checkpoint: nothing to evaluate or predict with")
    return model, self.init_fn(model)

  def predict(self, model: tf_keras.Model, records: SplitRecords, batch_size: int):
    """The task's per-example predictions for a split: the model's outputs (`outputs`),
    then post-processing."""
    return self.task.postprocess(
        records.examples, records.features,
        self.outputs(model, records, batch_size, self.task.predict_outputs))

  def outputs(self, model: tf_keras.Model, records: SplitRecords, batch_size: int,
              output_fn: Callable[[dict, object], dict]) -> dict[str, np.ndarray]:
    """output_fn(features, model outputs) of every feature of a split, in the features'
    order: the model over its records, dropout off (each global batch split across replicas
    in order and gathered back)."""
    strategy = self.strategy

    # Plain ops only: nothing for AutoGraph to convert. Batches cut to their own lengths come
    # in many shapes: after the second, one trace for any length rather than one per length.
    @tf.function(autograph=False, reduce_retracing=True)
    def step(features):
      def replica_fn(f):
        return output_fn(f, loop.without_autograph(model)(f, training=False))
      return tf.nest.map_structure(lambda t: strategy.gather(t, axis=0),
                                   strategy.run(replica_fn, args=(features,)))

    dataset = self.dataset(records, batch_size, False)
    batches = []
    pace = progress.Meter(-(-records.num_features // batch_size))
    with datasets.naming_damaged_file([records.path]):
      for batch in distribute.distribute_dataset(strategy, dataset):
        batches.append(step(batch))
        if pace.due():
          logging.info("predicting %s: %s", records.name, pace.line(len(batches), "batches"))
    num = records.num_features
    outputs = {k: np.concatenate([b[k].numpy() for b in batches])[:num] for k in batches[0]}
    return in_feature_order(outputs, records.order)

  def evaluate(self, model: tf_keras.Model, eval_records: list[SplitRecords]) -> dict:
    """Dev metrics, named as the original's eval_results.txt: `eval_<metric>` for the first
    eval split, `eval_<split>_<metric>` for others (MNLI's dev_mismatched)."""
    results = {}
    for index, records in enumerate(eval_records):
      predictions = self.predict(model, records, self.args.eval_batch_size)
      self._predictions[records.name] = (records.examples, predictions)
      prefix = "eval_" if index == 0 else f"eval_{records.name}_"
      metrics = self.task.evaluate(records.examples, predictions)
      results.update({prefix + k: v for k, v in metrics.items()})
    return results

  def run(self) -> dict:
    """Does what the arguments ask; returns {"best": results, "runs": every run's}. Refuses
    (output_lock.OutputBusyError) while another job writes output_dir."""
    with output_lock.lock_output_dir(self.args.output_dir, self.is_chief):
      # Made under the lock, which removes it again if the run leaves it empty (refused); the
      # lock makes no folder on gs:// or for a worker that is not the chief.
      tf.io.gfile.makedirs(self.args.output_dir)
      return self._run()

  def _run(self) -> dict:
    args = self.args
    eval_records = self.write_records("eval", args.eval_batch_size) if args.do_eval else []
    if args.do_train:
      [train_records] = self.write_records("train", args.train_batch_size)
      # Before anything of the model is written: a refused re-run leaves the old run whole.
      loop.check_run_settings(args.output_dir, self.run_settings(train_records),
                              self.is_chief, implied=RUN_SETTINGS_IMPLIED)
    if self.is_chief and (args.do_train or not tf.io.gfile.exists(
        os.path.join(args.output_dir, TASK_CONFIG))):
      self._write_model_files()
    if args.do_train:
      model, results, runs = self.sweep(train_records, eval_records)
    else:
      model, step = self.restore()
      results, runs = {"global_step": step}, []
      if args.do_eval:
        results.update(self.evaluate(model, eval_records))
    if args.do_eval and self.is_chief:
      self.write_eval_results(results, runs)
    if args.do_predict:
      self.write_predictions(model)
    if args.export_dir and self.is_chief:
      data = eval_records[0].examples if eval_records else None
      path = self.exporter(self.task.serving_module(model, self.tokenizer), args.export_dir,
                           self.task.warmup_inputs(examples=data))
      logging.info("exported the model for TF Serving to %s", path)
      results["export_path"] = path
    return {"best": results, "runs": runs}

  def run_settings(self, train_records: SplitRecords) -> dict:
    """What defines the trained model (see `loop.check_run_settings`); the training
    data by its records' digest, which also covers the features' flags and the vocab."""
    args = self.args
    return {"task": self.task.config.to_dict(), "bert_config": self.bert_config.to_dict(),
            "init_checkpoint": args.init_checkpoint,
            "train_records_sha256": loop.file_sha256(train_records.path),
            **{name: getattr(args, name) for name in (
                "train_batch_size", "learning_rates", "num_restarts", "num_train_epochs",
                "warmup_proportion", "seed", "mixed_precision")},
            # The order and shapes of the batches: a resumed run must draw the same ones.
            "length_buckets": self.length_buckets, "group_by_length": self.args.group_by_length,
            # Only where there is one: runs from before distillation existed read the same.
            **({"distillation": dataclasses.asdict(self.distillation)} if self.distillation
               else {})}

  def sweep(self, train_records: SplitRecords, eval_records: list[SplitRecords]):
    """Fine-tunes once per (learning rate, restart); keeps the best on the task's primary
    metric on the first dev split. Returns (best model, its results, every run's results)."""
    args = self.args
    single = len(args.learning_rates) * args.num_restarts == 1
    best_model, best, best_predictions, runs = None, None, {}, []
    for learning_rate in args.learning_rates:
      for restart in range(args.num_restarts):
        seed = args.seed + restart
        run_dir = (args.output_dir if single else
                   os.path.join(args.output_dir, "runs", f"lr{learning_rate:g}_seed{seed}"))
        model, trained = self.train(train_records, learning_rate, seed, run_dir)
        results = {"learning_rate": learning_rate, "seed": seed, **trained}
        self._predictions.clear()
        if eval_records:
          results.update(self.evaluate(model, eval_records))
          logging.info("run lr=%g seed=%d: %s", learning_rate, seed, results)
        runs.append(results)
        key = f"eval_{self.task.primary_metric}"
        if best is None or (key in results and results[key] > best[key]):
          best_model, best, best_predictions = model, results, dict(self._predictions)
    self._predictions = best_predictions
    if not single and self.is_chief:
      # The best run's weights become output_dir's checkpoint, saved as training saves (the
      # encoder also under its own name) so it loads for predict, export and as a later
      # run's --init_checkpoint.
      step = tf.Variable(best["global_step"], dtype=tf.int64)
      tf.train.CheckpointManager(loop.checkpoint(best_model, step), args.output_dir,
                                 max_to_keep=1, checkpoint_name="ckpt").save(
                                     checkpoint_number=best["global_step"])
    return best_model, best, runs

  def write_eval_results(self, results: dict, runs: list[dict]) -> None:
    out = self.args.output_dir
    loop.write_eval_results(os.path.join(out, "eval_results.txt"), results)
    write_text(os.path.join(out, "eval_results.json"), json.dumps(
        {"task": self.task.config.to_dict(), "primary_metric": self.task.primary_metric,
         "best": results, "runs": runs}, indent=2) + "\n")
    logging.info("***** Eval results *****\n%s",
                 "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))
    if len(runs) > 1:
      columns = sorted({k for r in runs for k in r}, key=lambda k: (k != "learning_rate",
                                                                    k != "seed", k))
      table = ["\t".join(columns)] + ["\t".join(f"{r.get(c, '')}" for c in columns)
                                      for r in runs]
      write_text(os.path.join(out, "sweep_results.tsv"), "\n".join(table) + "\n")
      logging.info("***** All runs *****\n%s", "\n".join(table))

  def write_predictions(self, model: tf_keras.Model) -> None:
    """The task's prediction files for each predict split (a split just evaluated, like
    SQuAD's predict_file, is not predicted again)."""
    args = self.args
    pending = [s for s in self.task.splits("predict") if s not in self._predictions]
    for records in self.write_records("predict", args.predict_batch_size, only=pending):
      self._predictions[records.name] = (
          records.examples, self.predict(model, records, args.predict_batch_size))
    if self.is_chief:
      for split in self.task.splits("predict"):
        for path in self.task.write_predictions(args.output_dir, split,
                                                *self._predictions[split]):
          logging.info("%s: predictions -> %s", split, path)


def run(task: FineTuningTask, args: RunArgs, strategy: tf.distribute.Strategy,
        exporter: Exporter | None = None) -> dict:
  """Runs what args ask of the task (see `Runner.run`)."""
  return Runner(task, args, strategy, exporter).run()
