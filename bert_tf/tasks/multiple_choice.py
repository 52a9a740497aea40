"""Multiple choice: SWAG (Zellers et al. 2018), as the BERT paper fine-tunes it, and the user's
own data with any number of endings; one file for the whole task.

  examples     SWAG: `train.csv`, `val.csv`, `test.csv` in data_dir, in SWAG's own layout
               (`video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0..3,
               label`, test without label; columns found by their header names). The
               context is sent1; each ending is `sent2 ending_i` (sent2 starts every ending).
               Generic: `train`, `dev`, `test` files (`.tsv` or `.csv`) in data_dir whose
               header names `context`, `ending0` ... `ending<N-1>` and `label` (the correct
               ending's index 0..N-1; test files need none), optionally `guid`. N is the
               number of ending columns of the training file's header (of the first file
               there is, without one); every file of the task must have them all.
  features     one sequence per ending, `[CLS] context [SEP] ending_i [SEP]`, packed as
               classification's pairs (`classification.pack`: segment ids 1 from the ending
               on, the pair truncated by popping from the longer, as the original's SWAG
               code and Hugging Face's run_swag), the N sequences one after another in one
               record (`schema.multiple_choice_features`)
  model        the Model Garden's BertClassifier with one output scores each sequence's
               [CLS] (dropout and initializer as classification's); the N scores of an
               example are its logits [batch, N], the softmax over them in the loss and the
               serving signature ("one vector scoring each [CLS]", the paper's section 4.4)
  metrics      accuracy (and the mean loss) on the dev split
  files        test_results.tsv: the N probabilities, tab-separated, a line per example

Serving (`ChoiceServing`):
  serving_default:  context, ending0 ... ending<N-1> string [batch] → tokenized and packed
                    in the graph (tensorflow-text, BertPackInputs) → logits [batch, N] float32,
                    probabilities [batch, N] float32, label [batch] int32 (the best ending).
                    For SWAG, pass sent1 as the context and `sent2 ending_i` as ending i, as
                    the training features do.
  serve_token_ids:  input_word_ids, input_mask, input_type_ids int32 [batch, N, seq] → the same.
"""
import dataclasses
import os
import re
from typing import ClassVar

import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.common.errors import DataError
from bert_tf.common.files import write_text
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import INPUT_NAMES
from bert_tf.modeling.task_models import build_classifier
from bert_tf.finetuning import register
from bert_tf.finetuning import text_files
from bert_tf.finetuning.inputs import IDS_SIGNATURE, TextPacker, ids_signature, pack
from bert_tf.finetuning import losses
from bert_tf.finetuning.distillation import SoftTarget
from bert_tf.finetuning.task import Features, FineTuningTask, TaskConfig
from bert_tf.tokenization import FullTokenizer
from tfrecords import schema

TASK_NAMES = ("swag", "generic")
# Warm-up requests when no dev data is at hand (endings cycle through these), and an empty one.
SAMPLE_CONTEXT = "A man is standing on a ladder next to the house."
SAMPLE_ENDINGS = ("He paints the window frames white.", "The ladder sings a song.",
                  "She swims across the lake.", "They eat the roof for dinner.")


@dataclasses.dataclass
class MultipleChoiceConfig(TaskConfig):
  """What a fine-tuned multiple-choice model is beyond its encoder."""
  kind: ClassVar[str] = "multiple_choice"
  task_name: str = "swag"
  num_choices: int = 4

  def __post_init__(self):
    if self.task_name not in TASK_NAMES:
      raise ValueError(f"--task_name={self.task_name}: one of {', '.join(TASK_NAMES)}")
    if self.num_choices < 2:
      raise ValueError(f"num_choices={self.num_choices}: a choice needs at least 2 endings")


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
  """One question: the context, its endings (SWAG's sent2 already in front of each), and the
  correct ending's index (None for unlabelled test data)."""
  guid: str
  context: str
  endings: tuple[str, ...]
  label: int | None = None


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where a dataset's fields are: the file of each split (split name -> file name), the
  context's column, and the column whose text starts every ending (SWAG's sent2) if any."""
  files: dict[str, str]
  context: str
  start: str | None = None

  def split_names(self) -> list[str]:
    return list(self.files)


SWAG = Layout({"train": "train.csv", "val": "val.csv", "test": "test.csv"}, "sent1", "sent2")


def generic_layout(data_dir: str) -> Layout:
  """train/dev/test, each the .tsv or (if only that exists) the .csv file of data_dir."""
  files = {}
  for split in ("train", "dev", "test"):
    found = [f"{split}{ext}" for ext in (".tsv", ".csv")
             if tf.io.gfile.exists(os.path.join(data_dir, f"{split}{ext}"))]
    files[split] = found[0] if found else f"{split}.tsv"
  return Layout(files, "context")


def _delimiter(path: str) -> str:
  return "," if path.endswith(".csv") else "\t"


def read_rows(path: str):
  """(rows, header line number, column names): the rows after the header, as
  `text_files.read_rows` yields them; DataError naming an empty file."""
  rows = text_files.read_rows(path, _delimiter(path))
  line, header = next(rows, (None, None))
  if header is None:
    raise DataError(f"{path}: no header (an empty file)")
  return rows, line, [name.strip() for name in header]


def _count_endings(names: list[str]) -> int:
  return sum(bool(re.fullmatch(r"ending\d+", name)) for name in names)


def count_endings(path: str) -> int:
  """N: the number of `ending<i>` columns in the file's header (at least 2)."""
  _, line, names = read_rows(path)
  count = _count_endings(names)
  if count < 2:
    raise DataError(f"{path}:{line}: header {names} names {count} ending column(s) "
                    "(ending0, ending1, ...); a choice needs at least 2")
  return count


def read_examples(path: str, layout: Layout, num_choices: int, split: str,
                  need_labels: bool) -> list[ChoiceExample]:
  """A split's examples; DataError naming file and line for a header whose ending columns are
  not the task's num_choices (a dev file of 5 endings is not scored as 4-way), a missing
  column, a row of fewer or more columns than the header (a tab or comma inside a text would
  shift the columns after it), an empty ending or a label outside 0..num_choices-1."""
  rows, header_line, names = read_rows(path)
  endings = [f"ending{i}" for i in range(num_choices)]
  required = [layout.context] + ([layout.start] if layout.start else []) + endings
  for name in required + (["label"] if need_labels else []):
    if name not in names:
      raise DataError(f"{path}:{header_line}: header has no {name!r} column (it has {names})")
  if _count_endings(names) != num_choices:
    raise DataError(f"{path}:{header_line}: header names {_count_endings(names)} ending "
                    f"columns; the task has {num_choices} (ending0 ... ending{num_choices - 1}): "
                    "every file of a task needs the same endings")
  column = {n: names.index(n) for n in required + ["label", "guid"] if n in names}
  examples = []
  for line, row in rows:
    if len(row) != len(names):
      hint = f" (a {'comma' if path.endswith('.csv') else 'tab'} inside a text?)"
      raise DataError(f"{path}:{line}: {len(row)} columns, expected {len(names)} as the header"
                      + (hint if len(row) > len(names) else ""))
    texts = [row[column[e]] for e in endings]
    for i, text in enumerate(texts):
      if not text.strip():
        raise DataError(f"{path}:{line}: ending{i} is empty: each row needs {num_choices} "
                        "endings")
    if layout.start:  # SWAG's sent2 begins every ending (Hugging Face's run_swag joins them).
      texts = [f"{row[column[layout.start]]} {text}" for text in texts]
    label = None  # A test file's label column may be absent or blank.
    if "label" in column and (need_labels or row[column["label"]].strip()):
      label = _label(path, line, row[column["label"]], num_choices)
    guid = row[column["guid"]] if "guid" in column else f"{split}-{len(examples)}"
    examples.append(ChoiceExample(guid, row[column[layout.context]], tuple(texts), label))
  if not examples:
    raise DataError(f"{path}: no examples")
  return examples


def _label(path: str, line: int, value: str, num_choices: int) -> int:
  value = value.strip()
  if value not in {str(i) for i in range(num_choices)}:
    raise DataError(f"{path}:{line}: label {value!r} is not one of 0..{num_choices - 1}")
  return int(value)


def convert_examples(examples: list[ChoiceExample], max_seq_length: int,
                     tokenizer: FullTokenizer) -> list[dict]:
  """Feature dicts (see `schema.multiple_choice_features`), one per example, in order: each
  ending packed with the context by classification's `pack`, the sequences concatenated."""
  contexts = tokenizer.tokenize_ids([e.context for e in examples])
  endings = tokenizer.tokenize_ids([text for e in examples for text in e.endings])
  features, start = [], 0
  for example, context in zip(examples, contexts):
    context = np.asarray(context, np.int64)
    choices = [pack(context, np.asarray(ids, np.int64), max_seq_length, tokenizer)
               for ids in endings[start:start + len(example.endings)]]
    start += len(example.endings)
    feature = {name: np.concatenate([c[name] for c in choices]) for name in choices[0]}
    feature["label_ids"] = example.label or 0
    feature["is_real_example"] = 1
    features.append(feature)
  return features


class MultipleChoiceModel(tf_keras.Model):
  """A BertClassifier of one output scoring each of an example's num_choices sequences.

  call(features): input_word_ids, input_mask, input_type_ids int32 [batch, num_choices * seq]
  (the records' layout) or [batch, num_choices, seq] → logits [batch, num_choices].
  """

  def __init__(self, classifier: tf_keras.Model, num_choices: int, **kwargs):
    super().__init__(**kwargs)
    self.classifier = classifier
    self.num_choices = num_choices

  def get_config(self) -> dict:
    """For the SavedModel's Keras metadata; the model is rebuilt by `build_model`, not from it."""
    return {"num_choices": self.num_choices, "name": self.name}

  @property
  def checkpoint_items(self) -> dict:
    """The encoder under its own name, so fine-tuning loads and saves it like other tasks."""
    return self.classifier.checkpoint_items

  def call(self, inputs: dict, training=None):
    flat = {}
    for name in INPUT_NAMES:
      ids = inputs[name]
      # Static when the length is known (records): the encoder then sees static shapes (TPUs).
      length = ids.shape[-1] or tf.shape(ids)[-1]
      flat[name] = tf.reshape(ids, [-1, length if ids.shape.rank == 3
                                    else length // self.num_choices])
    scores = self.classifier(flat, training=training)
    return tf.reshape(scores, [-1, self.num_choices])


def build_model(config: BertConfig, num_choices: int) -> MultipleChoiceModel:
  """classification's BertClassifier (num_labels 1) under the reshapes, variables created."""
  model = MultipleChoiceModel(build_classifier(config, 1), num_choices, name="multiple_choice")
  dummy = tf.zeros([1, num_choices * 2], tf.int32)
  model({name: dummy for name in INPUT_NAMES})
  return model


@register
class MultipleChoiceTask(FineTuningTask):
  """SWAG or a generic multiple-choice dataset (module docstring) in data_dir."""
  config_class = MultipleChoiceConfig
  primary_metric = "accuracy"
  hf_architecture = "BertForMultipleChoice"

  def __init__(self, config: MultipleChoiceConfig, data_dir: str | None = None):
    super().__init__(config, data_dir or "")
    self.layout = SWAG if config.task_name == "swag" else generic_layout(self.data_dir)

  @classmethod
  def data_settings(cls, settings: dict, data_dir: str = "") -> dict:
    """The number of endings read from the data (SWAG: 4)."""
    task_name = settings.get("task_name", "swag").lower()
    num_choices = 4
    if task_name == "generic":
      files = [os.path.join(data_dir, f) for f in generic_layout(data_dir).files.values()]
      found = [f for f in files if tf.io.gfile.exists(f)]
      if not found:
        raise DataError(f"{files[0]}: file not found (nor the dev and test files)")
      num_choices = count_endings(found[0])
    return {"task_name": task_name, "num_choices": num_choices}

  def split_file(self, split: str) -> str:
    return os.path.join(self.data_dir, self.layout.files[split])

  def splits(self, mode: str) -> list[str]:
    train, dev, test = self.layout.split_names()
    return {"train": [train], "eval": [dev], "predict": [test]}[mode]

  def read_examples(self, split: str) -> list[ChoiceExample]:
    return read_examples(self.split_file(split), self.layout, self.config.num_choices, split,
                         need_labels=split not in self.splits("predict"))

  def transfer_examples(self, path: str) -> list[ChoiceExample]:
    """`path` in the test file's layout (no labels needed)."""
    return read_examples(path, self.layout, self.config.num_choices, "transfer",
                         need_labels=False)

  def convert_examples(self, examples, tokenizer, is_training) -> Features:
    records = convert_examples(examples, self.config.max_seq_length, tokenizer)
    return Features(records, np.arange(len(records)))

  def record_layout(self, is_training: bool) -> list[schema.Feature]:
    return schema.multiple_choice_features(self.config.max_seq_length, self.config.num_choices)

  def build_model(self, bert_config: BertConfig) -> tf_keras.Model:
    return build_model(bert_config, self.config.num_choices)

  def loss(self, features: dict, outputs, counts=None) -> tuple[tf.Tensor, dict]:
    """Cross-entropy of the softmax over the endings (and accuracy), in float32."""
    return losses.softmax_loss(features["label_ids"][:, 0], outputs, counts)

  def soft_targets(self, features: dict, outputs) -> dict[str, SoftTarget]:
    """The teacher's softmax over the endings."""
    del features
    return {"logits": SoftTarget("classes", outputs)}

  def predict_outputs(self, features: dict, outputs) -> dict[str, tf.Tensor]:
    return {"logits": tf.cast(outputs, tf.float32)}

  def postprocess(self, examples, features, outputs) -> np.ndarray:
    """The logits [num_examples, num_choices]: one feature per example, in order."""
    return outputs["logits"]

  def evaluate(self, examples, predictions: np.ndarray) -> dict[str, float]:
    """Accuracy and the mean cross-entropy over the examples."""
    labels = np.array([e.label for e in examples])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, predictions)
    return {"accuracy": float(np.mean(np.argmax(predictions, -1) == labels)),
            "loss": float(tf.reduce_mean(loss))}

  def write_predictions(self, output_dir, split, examples, predictions) -> list[str]:
    """test_results.tsv: each example's probabilities of its endings, tab-separated."""
    probabilities = tf.nn.softmax(predictions).numpy()
    path = os.path.join(output_dir, "test_results.tsv")
    write_text(path, "".join("\t".join(f"{p:.6f}" for p in row) + "\n" for row in probabilities))
    return [path]

  def serving_module(self, model: tf_keras.Model, tokenizer: FullTokenizer) -> tf.Module:
    return ChoiceServing(model, tokenizer, self.config.max_seq_length, self.config.num_choices)

  def warmup_inputs(self, examples=None) -> list[dict[str, str]]:
    n = self.config.num_choices
    if examples:
      return [{"context": e.context, **{f"ending{i}": t for i, t in enumerate(e.endings)}}
              for e in examples[:3]]
    sample = {f"ending{i}": SAMPLE_ENDINGS[i % len(SAMPLE_ENDINGS)] for i in range(n)}
    return [{"context": SAMPLE_CONTEXT, **sample},
            {"context": "", **{f"ending{i}": "" for i in range(n)}}]


class ChoiceServing(tf.Module):
  """The multiple-choice model with its tokenizer: what the SavedModel holds (the tokenizer's
  TF module carries the vocabulary as an asset)."""

  def __init__(self, model: tf_keras.Model, tokenizer: FullTokenizer, max_seq_length: int,
               num_choices: int):
    super().__init__(name="choice_serving")
    self.model = model
    self.packer = TextPacker(tokenizer, max_seq_length)
    self.num_choices = num_choices

  def pack(self, context: tf.Tensor, endings: list[tf.Tensor]) -> dict:
    """context and each ending string [batch] → the model's three int32 inputs
    [batch, num_choices, length]: every (context, ending i) packed as one pair, all cut to
    the longest (TextPacker)."""
    batch_size = tf.shape(context)[0]
    # [batch * num_choices]: example b's context and ending i at b * num_choices + i.
    contexts = tf.repeat(context, self.num_choices)
    endings = tf.reshape(tf.stack(endings, axis=1), [-1])
    # The length spelled out, not -1: an empty batch's reshape could not infer it.
    return {name: tf.reshape(ids, [batch_size, self.num_choices, tf.shape(ids)[1]])
            for name, ids in self.packer(contexts, endings).items()}

  def predict_ids(self, inputs: dict) -> dict:
    """The model's three inputs, int32 [batch, num_choices, seq] → logits, probabilities and
    label (the module docstring)."""
    logits = tf.cast(self.model(inputs, training=False), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def signatures(self) -> dict:
    """{signature name: concrete function} for `tf.saved_model.save`."""
    names = ["context"] + [f"ending{i}" for i in range(self.num_choices)]
    serve_text = tf.function(
        lambda context, *endings: self.predict_ids(self.pack(context, list(endings))),
        input_signature=[tf.TensorSpec([None], tf.string, name=n) for n in names])
    return {"serving_default": serve_text.get_concrete_function(),
            IDS_SIGNATURE: ids_signature(self.predict_ids, [None, self.num_choices, None])}
