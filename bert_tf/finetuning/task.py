"""What every fine-tuning task implements: the runner (`bert_tf.finetuning.runner`) and export
(`export.saved_model`) drive a task only through this interface and never name one.

A task is one file (`classification.py`, `squad.py`, ...) holding, in this order:

  examples     read_examples(split): the examples of a split ("train", "eval", "predict"
               are the runner's modes; `splits(mode)` names the splits of each,
               `split_file(split)` the file each is read from)
  features     convert_examples(examples, tokenizer, is_training) -> `Features`: one or more
               record dicts per example (SQuAD's windows), with the map back to the example
  records      record_layout(is_training): the TFRecord layout (`tfrecords.schema`)
  model        build_model(bert_config): an encoder (`model.encoder`) and the task's head,
               variables created; outputs a tensor or a dict of tensors
  loss         loss(features, outputs) -> (mean loss, {name: scalar metric});
               soft_targets(features, outputs): what a student distils of the outputs
  outputs      predict_outputs(features, outputs): what each feature hands to post-processing
  predictions  postprocess(examples, features, outputs): per-feature arrays -> per-example
               predictions
  metrics      evaluate(examples, predictions) -> {name: float}; `primary_metric` picks the
               best run of a sweep
  files        write_predictions(...): the original's output files
  serving      serving_module(model, tokenizer): a tf.Module whose `signatures()` take raw
               text; warmup_inputs(examples): sample requests for TF Serving's warm-up

A task registers under its config's `kind` (`bert_tf.finetuning.register`) and is built by name:
to run, from its settings and inputs (`from_data`, through `bert_tf.finetuning.build`); to export,
from its config alone (`from_config`). The task's `config` (a `TaskConfig` dataclass) is what
export needs to rebuild and serve the model: it is written as task_config.json beside the
checkpoints and read back with `runner.read_task_config`.
"""
import abc
import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.common.errors import DataError
from bert_tf.common.files import write_text
from bert_tf.common.json_config import check_known_keys
from bert_tf.modeling.configs import BertConfig
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import loop
from tfrecords import schema

MODES = ("train", "eval", "predict")


@dataclasses.dataclass
class TaskConfig:
  """A task's settings that outlive the run: subclass with the task's fields. `kind` (a class
  attribute, not a field) is the name its task class registers under (`bert_tf.tasks`)."""
  kind: ClassVar[str] = ""
  # The settings a trained model fixes: a run that does not train takes them from the trained
  # run's task_config.json (a flag given that disagrees is refused); those among `data_fields`
  # are read from the data, which must then agree (`runner.take_trained_settings`).
  trained_fields: ClassVar[tuple[str, ...]] = ("max_seq_length", "do_lower_case")
  data_fields: ClassVar[tuple[str, ...]] = ()
  # What the head's weights mean (their number and order): a fine-tuned --init_checkpoint's
  # head is restored only where its task_config.json has the same kind and these.
  head_fields: ClassVar[tuple[str, ...]] = ()
  max_seq_length: int = 128
  # None (the flag not given): what the model states; the runner sets the casing it uses.
  do_lower_case: bool | None = True

  def to_dict(self) -> dict:
    return {"task": self.kind, **dataclasses.asdict(self)}

  def to_json_file(self, path: str) -> None:
    write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

  @classmethod
  def from_dict(cls, values: dict, source: str = "task config") -> "TaskConfig":
    """Refuses unknown keys, naming the closest known one."""
    values = {k: v for k, v in values.items() if k != "task"}
    check_known_keys(values, [f.name for f in dataclasses.fields(cls)], source)
    return cls(**values)


@dataclasses.dataclass
class Features:
  """A split's features: `records` are the record dicts (the layout's names, numpy values),
  in order; `example_index[i]` is the example that records[i] came from. `extras[i]` holds
  what post-processing needs beyond the records (e.g. SQuAD's token maps); None if nothing."""
  records: list[dict]
  example_index: np.ndarray
  extras: list[Any] | None = None

  def __len__(self) -> int:
    return len(self.records)


class FineTuningTask(abc.ABC):
  """One fine-tuning task; see the module docstring for the order of its parts.

  Subclasses set `config_class` (their TaskConfig), `primary_metric` and, where they apply,
  `loss_reads_padding` and `loss_per_token`, and hold their config in `self.config`. A task
  built by `from_config` alone (no data paths) must still build its model and serving module:
  that is how export uses it.
  """
  config_class: ClassVar[type[TaskConfig]] = TaskConfig
  primary_metric: ClassVar[str] = ""
  # Whether the loss reads positions past a sequence's mask (SQuAD's softmax over every
  # position, as the original's): such a task trains on batches padded to max_seq_length,
  # since length buckets would change its loss.
  loss_reads_padding: ClassVar[bool] = False
  # Whether the loss is a mean over tokens (NER's): batches grouped by length would weigh the
  # tokens of short sequences more than random batches do (a batch of short sentences holds
  # few tokens, yet counts as a whole step), so such a task trains on random batches, each
  # only cut to its own length (with accumulation, split in equal parts: exact, `loss_counts`).
  loss_per_token: ClassVar[bool] = False
  # What the task's examples and labels are called in its messages.
  example_noun: ClassVar[str] = "examples"
  label_noun: ClassVar[str] = "labels"
  # google-research/bert's fine-tuned output layer that this task's head is (its kernel's and
  # bias's names: run_classifier's `output_weights`, run_squad's `cls/squad/...`), if any.
  tf1_head: ClassVar[tuple[str, str] | None] = None
  # The transformers class whose task head this task's is (`checkpoints.HF_ARCHITECTURES`):
  # what export --format=huggingface writes, and a Hugging Face folder whose head this task
  # takes from --init_checkpoint. The head's outputs are the config's `labels`, in order,
  # where `head_fields` has them (None: one output, regression).
  hf_architecture: ClassVar[str | None] = None
  # The constructor's keyword arguments beyond the config: where the task's data is and how
  # it is read (the run_* scripts' flags of the same names).
  input_args: ClassVar[tuple[str, ...]] = ("data_dir",)

  def __init__(self, config: TaskConfig, data_dir: str | None = None):
    self.config = config
    self.data_dir = data_dir

  @classmethod
  def from_data(cls, settings: dict, **inputs) -> "FineTuningTask":
    """The task to run: its config from `settings` (its fields; omitted ones take their
    defaults) and, for `TaskConfig.data_fields`, from the data (`data_settings`)."""
    unknown = sorted(set(inputs) - set(cls.input_args))
    if unknown:
      raise TypeError(f"{cls.__qualname__}: unknown inputs {', '.join(unknown)}; it takes "
                      f"{', '.join(cls.input_args)}")
    settings = {**settings, **cls.data_settings(settings, **inputs)}
    config = cls.config_class.from_dict(settings, f"{cls.config_class.kind} settings")
    return cls(config, **inputs)

  @classmethod
  def data_settings(cls, settings: dict, **inputs) -> dict:
    """The config's fields that the data decides (the labels of the training file...), given
    the other settings and the inputs; DataError naming the file if it cannot tell."""
    del settings, inputs  # A task whose data decides nothing.
    return {}

  @classmethod
  def from_config(cls, config: TaskConfig, data: str | None = None) -> "FineTuningTask":
    """The task as export needs it: the config, and optionally where its eval examples are
    (the task's first input: a data_dir, a SQuAD predict file), for warm-up requests."""
    return cls(config, data)

  # Examples.
  @abc.abstractmethod
  def splits(self, mode: str) -> list[str]:
    """The names of the splits of a mode ("train": exactly one; "eval", "predict": any)."""

  @abc.abstractmethod
  def split_file(self, split: str) -> str:
    """The file a split is read from."""

  def check_inputs(self, modes: list[str]) -> None:
    """Raises DataError naming the file when a split that these modes read has none: before
    any training, not after it."""
    for mode in modes:
      for split in self.splits(mode):
        path = self.split_file(split)
        if not tf.io.gfile.exists(path):
          raise DataError(f"{path}: file not found (the {split} split, for --do_{mode})")

  def data_mismatch(self, field: str, trained, source: str) -> str:
    """The message for a setting read from the data (`TaskConfig.data_fields`) that differs
    from the trained model's (`source`: its task_config.json), in the task's terms."""
    ours = getattr(self.config, field)
    where = self.split_file(self.splits("train")[0])
    if field == "labels" and ours is not None and trained is not None:
      if len(ours) != len(trained):
        return (f"{where} has {len(ours)} {self.label_noun}; the trained model has "
                f"{len(trained)} ({source}: {', '.join(trained)})")
      return (f"{where}: its {self.label_noun} {', '.join(ours)} are not the trained model's "
              f"{', '.join(trained)} ({source})")
    return f"{where}: {field} {ours!r}, but the trained model has {trained!r} ({source})"

  @abc.abstractmethod
  def read_examples(self, split: str) -> list:
    """The examples of a split, in order; DataError naming file and line (or id) if bad."""

  # Features and records.
  @abc.abstractmethod
  def convert_examples(self, examples: list, tokenizer: FullTokenizer,
                       is_training: bool) -> Features:
    """Examples -> features; `is_training` features carry the training targets."""

  @abc.abstractmethod
  def record_layout(self, is_training: bool) -> list[schema.Feature]:
    """The layout of the records that convert_examples' records are written in."""

  # Model and loss.
  @abc.abstractmethod
  def build_model(self, bert_config: BertConfig) -> tf_keras.Model:
    """The encoder (as `model.encoder`) with the task's head, variables created."""

  def loss_counts(self, features: dict) -> dict[str, tf.Tensor]:
    """What each term of the loss is a mean over in this batch, from its labels alone:
    {term: float32 count}. The records, unless the task says otherwise (NER: its labelled
    tokens). The training loop sums them over an update's micro-batches and replicas."""
    return loop.count_records(features)

  @abc.abstractmethod
  def loss(self, features: dict, outputs, counts: dict | None = None) -> tuple[tf.Tensor, dict]:
    """(loss, {name: scalar metric}) of a training batch: each term's sum over the batch
    divided by counts[term] (`loss_counts` of the whole update, so its micro-batches add up
    to its loss; this batch's own when None), in float32."""

  def predict_outputs(self, features: dict, outputs) -> dict[str, tf.Tensor]:
    """What post-processing needs of each feature of a batch: {name: [batch, ...]}, the same
    shape for every batch: a batch may come cut short of max_seq_length (length buckets), so
    a per-token output is padded back to it."""
    del features
    return outputs if isinstance(outputs, dict) else {"logits": outputs}

  def soft_targets(self, features: dict, outputs) -> dict | None:
    """What of a batch's outputs (as build_model's model gives them) a student learns from a
    fine-tuned teacher of this task: {name: `distillation.SoftTarget`}, the same names for
    every batch. None: the task cannot be distilled."""
    del features, outputs
    return None

  def transfer_examples(self, path: str) -> list:
    """Unlabelled examples read from `path` in the layout of this task's prediction input (a
    test file's, a predict file's): a student's transfer data, which its teacher labels
    (--transfer_file). NotImplementedError: the task reads none."""
    raise NotImplementedError(f"the {self.config.kind} task reads no --transfer_file")

  # Predictions, metrics and files.
  @abc.abstractmethod
  def postprocess(self, examples: list, features: Features,
                  outputs: dict[str, np.ndarray]) -> Any:
    """Per-feature outputs ({name: [num_features, ...]}, in features' order) -> per-example
    predictions, in whatever form evaluate() and write_predictions() take."""

  @abc.abstractmethod
  def evaluate(self, examples: list, predictions: Any) -> dict[str, float]:
    """The task's metrics of the predictions against the examples' labels."""

  @abc.abstractmethod
  def write_predictions(self, output_dir: str, split: str, examples: list,
                        predictions: Any) -> list[str]:
    """Writes the original's prediction files for a split; returns their paths."""

  # Serving.
  @abc.abstractmethod
  def serving_module(self, model: tf_keras.Model, tokenizer: FullTokenizer) -> tf.Module:
    """A tf.Module with `signatures()` -> {name: concrete function}: "serving_default" takes
    raw text (a [batch] string tensor per input) and answers in the task's terms."""

  @abc.abstractmethod
  def warmup_inputs(self, examples: list | None = None) -> list[dict[str, str]]:
    """A few requests for serving_default ({input name: text}): from the first of `examples`
    when given, else built-in texts."""
