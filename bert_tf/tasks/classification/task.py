"""Sentence (pair) classification, as google-research/bert's run_classifier.py: GLUE, XNLI
and the user's own TSV/CSV data (`glue.py` reads them), one file for the whole task.

Features are the original's: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids
0 for `[CLS] a [SEP]` and 1 for `b [SEP]`, a pair truncated by popping from the longer text
(the original's `_truncate_seq_pair`, which is what the serving graph's round-robin trimmer
computes too), zero-padded to max_seq_length.

The model is the Model Garden's `BertClassifier`: the encoder's pooled [CLS] output, dropout
of the encoder's `hidden_dropout_prob`, one dense layer drawn from a truncated normal of
stddev `initializer_range` (the original's `create_model`); logits out, the softmax in the
loss and the serving signature (regression: the one output is the score).

Prediction files: test_results.tsv (the original's: class probabilities, tab-separated, a
line per example; the score for regression) and the GLUE server's submission file
(e.g. MRPC.tsv, MNLI-m.tsv), per test split.

Serving (`ClassifierServing`):
  serving_default:  text_a (and text_b for pair tasks) string [batch] → tokenized and packed
                    in the graph (tensorflow-text) → logits [batch, num_labels] float32,
                    probabilities [batch, num_labels] float32, label [batch] string
                    (for regression: logits [batch, 1] and label [batch] float32, the score).
  serve_token_ids:  input_word_ids, input_mask, input_type_ids int32 [batch, seq] → the same.
  classification:   for TF Serving's Classify API (`regression`, for its Regress API, when
                    the task is a regression): inputs string [batch], serialized tf.Examples
                    whose bytes features text_a (and text_b) hold the texts → classes
                    [batch, num_labels] string (the label names), scores [batch, num_labels]
                    float32 (the probabilities); for regression outputs [batch] float32 (the
                    score). `:classify` / `:regress` take them, no base64 tensors (the export
                    gives these signatures those APIs' method names).
All run the model on the batch's rows sorted by length, `inputs.SERVING_CHUNK` rows a call, each
chunk cut to its own longest (`inputs.call_by_length`): the outputs are the padded batch's.
Bad text does not break it: the tokenizer turns invalid UTF-8 into U+FFFD (then dropped),
long texts are truncated to max_seq_length like the training features, an empty string gives
`[CLS] [SEP]`.
"""
import dataclasses
import os

import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.common.files import write_text
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.task_models import build_classifier
from bert_tf.tasks.classification import glue
from bert_tf.finetuning import register
from bert_tf.finetuning import metrics as metrics_lib
from bert_tf.tasks.classification.glue import InputExample
from bert_tf.finetuning.inputs import (IDS_SIGNATURE, SERVING_CHUNK, TextPacker, call_by_length,
                                  ids_signature, pack)
from bert_tf.finetuning import losses
from bert_tf.finetuning.distillation import SoftTarget
from bert_tf.finetuning.task import Features, FineTuningTask, TaskConfig
from bert_tf.tokenization import FullTokenizer
from tfrecords import schema

# The signatures for TF Serving's Classify and Regress APIs (`signature_name` in a request).
CLASSIFY_SIGNATURE = "classification"
REGRESS_SIGNATURE = "regression"

# Warm-up requests when no dev data is at hand: a short, a long and an empty text.
SAMPLE_TEXTS = [("The movie was great.", "I enjoyed the film."),
                ("Shares of the company fell 5 percent after the quarterly report, analysts "
                 "said on Tuesday.", "The stock dropped after the earnings report."),
                ("", "")]


@dataclasses.dataclass
class ClassificationConfig(TaskConfig):
  """What a fine-tuned classifier is beyond its encoder. `labels` None means regression."""
  kind = "classification"
  trained_fields = TaskConfig.trained_fields + ("task_name", "labels")
  data_fields = ("labels",)
  head_fields = ("labels",)
  task_name: str = "generic"
  labels: list[str] | None = None
  is_pair: bool = False


def label_id(example: InputExample, label_list: list[str] | None) -> float | int:
  """The label's index (its float value for regression); 0 for unlabelled test examples."""
  if example.label is None:
    return 0
  return float(example.label) if label_list is None else label_list.index(example.label)


def convert_examples(examples: list[InputExample], label_list: list[str] | None,
                     max_seq_length: int, tokenizer) -> list[dict]:
  """Feature dicts (see `schema.classifier_features`), one per example, in order."""
  ids_a = tokenizer.tokenize_ids([e.text_a for e in examples])
  pairs = [i for i, e in enumerate(examples) if e.text_b is not None]
  ids_b = [None] * len(examples)
  if pairs:
    for i, ids in zip(pairs, tokenizer.tokenize_ids([examples[i].text_b for i in pairs])):
      ids_b[i] = ids
  features = []
  for example, a, b in zip(examples, ids_a, ids_b):
    feature = pack(np.asarray(a, np.int64), None if b is None else np.asarray(b, np.int64),
                   max_seq_length, tokenizer)
    feature["label_ids"] = label_id(example, label_list)
    feature["is_real_example"] = 1
    features.append(feature)
  return features


@register
class ClassificationTask(FineTuningTask):
  """A GLUE, XNLI or generic task (see `glue.get_task_data`) in data_dir."""
  config_class = ClassificationConfig
  tf1_head = ("output_weights", "output_bias")  # run_classifier's, on the pooled output.
  hf_architecture = "BertForSequenceClassification"
  input_args = ("data_dir", "xnli_language")

  def __init__(self, config: ClassificationConfig, data_dir: str | None = None,
               xnli_language: str = "zh"):
    super().__init__(config, data_dir)
    self.data = glue.get_task_data(config.task_name, data_dir or "", xnli_language)

  @property
  def primary_metric(self) -> str:
    # The dataset's; XNLI's for all languages is known once its dev split is read.
    return self.data.primary_metric

  @classmethod
  def data_settings(cls, settings: dict, data_dir: str = "", xnli_language: str = "zh"
                    ) -> dict:
    """The task's name as GLUE spells it, its labels and pairing (a generic task's labels are
    those of its training file)."""
    data = glue.get_task_data(settings.get("task_name", "generic"), data_dir, xnli_language)
    return {"task_name": data.name, "labels": data.label_list(data_dir),
            "is_pair": data.is_pair}

  @property
  def regression(self) -> bool:
    return self.config.labels is None

  def _split(self, name: str) -> glue.Split:
    splits = (self.data.train,) + self.data.eval_splits + self.data.predict_splits
    return next(s for s in splits if s.name == name)

  def splits(self, mode: str) -> list[str]:
    return {"train": [self.data.train.name],
            "eval": [s.name for s in self.data.eval_splits],
            "predict": [s.name for s in self.data.predict_splits]}[mode]

  def split_file(self, split: str) -> str:
    return self.data.split_path(self.data_dir or "", self._split(split))

  def read_examples(self, split: str) -> list[InputExample]:
    return self.data.get_examples(self.data_dir, self._split(split))

  def transfer_examples(self, path: str) -> list[InputExample]:
    """`path` read as the first predict split's file (GLUE's test.tsv layout: no labels)."""
    predict = self._split(self.splits("predict")[0])
    transfer = dataclasses.replace(predict, name="transfer", submission=None, columns=(
        dataclasses.replace(predict.columns, file=os.path.basename(path))))
    return self.data.get_examples(os.path.dirname(path), transfer)

  def convert_examples(self, examples, tokenizer, is_training) -> Features:
    records = convert_examples(examples, self.config.labels, self.config.max_seq_length,
                               tokenizer)
    return Features(records, np.arange(len(records)))

  def record_layout(self, is_training: bool) -> list[schema.Feature]:
    return schema.classifier_features(self.config.max_seq_length, self.regression)

  def build_model(self, bert_config: BertConfig) -> tf_keras.Model:
    return build_classifier(bert_config, 1 if self.regression else len(self.config.labels))

  def loss(self, features: dict, outputs, counts=None) -> tuple[tf.Tensor, dict]:
    """Cross-entropy (and accuracy), or squared error for regression; in float32."""
    labels = features["label_ids"][:, 0]
    if self.regression:
      errors = tf.square(tf.cast(outputs, tf.float32)[:, 0] - labels)
      return losses.mean(errors, losses.records(counts, labels)), {}
    return losses.softmax_loss(labels, outputs, counts)

  def soft_targets(self, features: dict, outputs) -> dict[str, SoftTarget]:
    """The teacher's softmax over the labels, or its score for regression."""
    del features
    return {"logits": SoftTarget("score" if self.regression else "classes", outputs)}

  def predict_outputs(self, features: dict, outputs) -> dict[str, tf.Tensor]:
    return {"logits": tf.cast(outputs, tf.float32)}

  def postprocess(self, examples, features, outputs) -> np.ndarray:
    """The logits [num_examples, num_labels]: one feature per example, in order."""
    return outputs["logits"]

  def evaluate(self, examples, predictions: np.ndarray) -> dict[str, float]:
    """The dataset's metrics and the mean loss over the examples; for a dataset scored by
    language (XNLI's all), each metric per language (`accuracy_de`) and as their mean."""
    logits = predictions
    labels = np.array([label_id(e, self.config.labels) for e in examples])
    if self.regression:
      scores = logits[:, 0]
      loss = np.mean(np.square(scores - labels))
    else:
      scores = np.argmax(logits, -1)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    if self.data.by_language:
      results = metrics_lib.compute_by_group(self.data.metrics, labels, scores,
                                             np.array([e.language for e in examples]))
    else:
      results = metrics_lib.compute(self.data.metrics, labels, scores)
    results["loss"] = float(loss)
    return results

  def write_predictions(self, output_dir, split, examples, predictions) -> list[str]:
    logits = predictions
    index = self.splits("predict").index(split)
    name = "test_results.tsv" if index == 0 else f"test_results_{split}.tsv"
    if self.regression:
      lines, labels = [f"{s:.6f}" for s in logits[:, 0]], [f"{s:.3f}" for s in logits[:, 0]]
    else:
      probabilities = tf.nn.softmax(logits).numpy()
      lines = ["\t".join(f"{p:.6f}" for p in row) for row in probabilities]
      labels = [self.config.labels[i] for i in np.argmax(logits, -1)]
    paths = [os.path.join(output_dir, name)]
    write_text(paths[0], "\n".join(lines) + "\n")
    submission = self._split(split).submission
    if submission:
      rows = [f"{e.guid}\t{label}" for e, label in zip(examples, labels)]
      paths.append(os.path.join(output_dir, submission))
      write_text(paths[-1], "\n".join(["index\tprediction"] + rows) + "\n")
    return paths

  def serving_module(self, model: tf_keras.Model, tokenizer: FullTokenizer) -> tf.Module:
    return ClassifierServing(model, tokenizer, self.config.max_seq_length, self.config.labels,
                             self.config.is_pair)

  def warmup_inputs(self, examples=None) -> list[dict[str, str]]:
    texts = ([(e.text_a, e.text_b or "") for e in examples[:3]] if examples else SAMPLE_TEXTS)
    names = ("text_a", "text_b") if self.config.is_pair else ("text_a",)
    return [dict(zip(names, t)) for t in texts]


class ClassifierServing(tf.Module):
  """The classifier with its tokenizer and label names: what the SavedModel holds.

  Tracked for saving: the Keras model and the text packer (its tokenizer's vocabulary becomes
  an asset); the label names are constants of the graph.
  """

  def __init__(self, model: tf_keras.Model, tokenizer: FullTokenizer, max_seq_length: int,
               label_names: list[str] | None, is_pair: bool):
    super().__init__(name="classifier_serving")
    self.model = model
    self.pack = TextPacker(tokenizer, max_seq_length)
    self.is_pair = is_pair
    self.regression = label_names is None
    self.label_names = None if self.regression else tf.constant(label_names)

  def predict_ids(self, inputs: dict) -> dict:
    """The model's three inputs, int32 [batch, seq] → logits, probabilities and label (see
    the module docstring)."""
    num_outputs = 1 if self.regression else self.label_names.shape[0]
    logits, = call_by_length(lambda chunk: (self.model(chunk, training=False),), inputs,
                             SERVING_CHUNK, [[None, num_outputs]])
    if self.regression:
      return {"logits": logits, "label": logits[:, 0]}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.gather(self.label_names, tf.argmax(logits, axis=-1))}

  def predict_examples(self, inputs: tf.Tensor) -> dict:
    """Serialized tf.Examples string [batch], their texts as bytes features named as
    serving_default's inputs (each required) → the Classify API's classes and scores, or
    the Regress API's outputs."""
    names = ("text_a", "text_b") if self.is_pair else ("text_a",)
    texts = tf.io.parse_example(
        inputs, {name: tf.io.FixedLenFeature([], tf.string) for name in names})
    outputs = self.predict_ids(self.pack(*(texts[name] for name in names)))
    if self.regression:
      return {tf.saved_model.REGRESS_OUTPUTS: outputs["label"]}
    scores = outputs["probabilities"]
    return {tf.saved_model.CLASSIFY_OUTPUT_CLASSES: tf.broadcast_to(self.label_names,
                                                                    tf.shape(scores)),
            tf.saved_model.CLASSIFY_OUTPUT_SCORES: scores}

  def signatures(self) -> dict:
    """{signature name: concrete function} for `tf.saved_model.save`."""
    text = tf.TensorSpec([None], tf.string)
    if self.is_pair:
      serve_text = tf.function(lambda text_a, text_b: self.predict_ids(self.pack(text_a, text_b)),
                               input_signature=[text, text])
    else:
      serve_text = tf.function(lambda text_a: self.predict_ids(self.pack(text_a)),
                               input_signature=[text])
    # Its argument's name is the signature's input key, the one both APIs require: "inputs".
    serve_examples = tf.function(self.predict_examples, input_signature=[text])
    return {"serving_default": serve_text.get_concrete_function(),
            IDS_SIGNATURE: ids_signature(self.predict_ids, [None, None]),
            REGRESS_SIGNATURE if self.regression else CLASSIFY_SIGNATURE:
                serve_examples.get_concrete_function()}
