"""A fine-tuned classifier as a self-contained SavedModel for TF Serving.

    export_dir/<version>/                    TF Serving's layout; version = next free integer
      saved_model.pb, variables/
      assets/vocab.txt                       the tokenizer's vocabulary (via its asset)
      assets.extra/tf_serving_warmup_requests   a few real PredictionLogs, replayed at load

Signatures:
  serving_default:  text_a (and text_b for pair tasks) string [batch] → tokenized and packed
                    in the graph (tensorflow-text) → logits [batch, num_labels] float32,
                    probabilities [batch, num_labels] float32, label [batch] string
                    (for regression: logits [batch, 1] and label [batch] float32, the score).
  serve_token_ids:  input_word_ids, input_mask, input_type_ids int32 [batch, seq] → the same.

A process that imports only tensorflow and tensorflow_text loads and runs it. Bad text does not
break it: the tokenizer drops invalid UTF-8 (as U+FFFD), long texts are truncated to
max_seq_length like the training features, an empty string gives `[CLS] [SEP]`.
"""
import os

import numpy as np
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers

from bert_tf.configs import BertConfig
from bert_tf.modeling.classifier import build_classifier
from bert_tf.tasks import glue
from bert_tf.tasks.fine_tune import CLASSIFIER_CONFIG, ClassifierConfig, restore_classifier
from bert_tf.tokenization import FullTokenizer

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "serve_token_ids"
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# Warm-up requests when no dev data is at hand: a short, a long and an empty text.
SAMPLE_TEXTS = [("The movie was great.", "I enjoyed the film."),
                ("Shares of the company fell 5 percent after the quarterly report, analysts "
                 "said on Tuesday.", "The stock dropped after the earnings report."),
                ("", "")]


class ClassifierServing(tf.Module):
  """The classifier with its tokenizer and label names: what the SavedModel holds.

  Tracked for saving: the Keras model and the tokenizer's TF module (whose vocabulary
  becomes an asset); the label names are constants of the graph.
  """

  def __init__(self, model: tf_keras.Model, tokenizer: FullTokenizer, max_seq_length: int,
               label_names: list[str] | None, is_pair: bool):
    super().__init__(name="classifier_serving")
    self.model = model
    self.tokenizer = tokenizer.module
    self.special_ids = dict(start_of_sequence_id=tokenizer.cls_id,
                            end_of_segment_id=tokenizer.sep_id, padding_id=tokenizer.pad_id)
    self.max_seq_length = max_seq_length
    self.is_pair = is_pair
    self.regression = label_names is None
    self.label_names = None if self.regression else tf.constant(label_names)

  def pack(self, text_a: tf.Tensor, text_b: tf.Tensor | None = None) -> dict:
    """string [batch] (x2) → the model's three int32 inputs [batch, max_seq_length]."""
    segments = [self.tokenizer(text_a)]
    if text_b is not None:
      segments.append(self.tokenizer(text_b))
    # Round-robin trimming keeps the same ids as the training features' truncate_pair.
    packed = layers.BertPackInputs.bert_pack_inputs(
        segments, self.max_seq_length, truncator="round_robin", **self.special_ids)
    # int32, as serve_token_ids takes them: the model then runs the same graph on both.
    return {name: tf.cast(ids, tf.int32) for name, ids in packed.items()}

  def predict_ids(self, inputs: dict) -> dict:
    """The model's three inputs, int32 [batch, seq] → logits, probabilities and label (see
    the module docstring)."""
    logits = self.model(inputs, training=False)
    if self.regression:
      return {"logits": logits, "label": logits[:, 0]}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.gather(self.label_names, tf.argmax(logits, axis=-1))}

  def signatures(self) -> dict:
    """{signature name: concrete function} for `tf.saved_model.save`."""
    text = tf.TensorSpec([None], tf.string)
    if self.is_pair:
      serve_text = tf.function(lambda text_a, text_b: self.predict_ids(self.pack(text_a, text_b)),
                               input_signature=[text, text])
    else:
      serve_text = tf.function(lambda text_a: self.predict_ids(self.pack(text_a)),
                               input_signature=[text])
    ids = tf.TensorSpec([None, None], tf.int32)
    serve_ids = tf.function(
        lambda input_word_ids, input_mask, input_type_ids: self.predict_ids(
            dict(input_word_ids=input_word_ids, input_mask=input_mask,
                 input_type_ids=input_type_ids)),
        input_signature=[ids, ids, ids])
    return {TEXT_SIGNATURE: serve_text.get_concrete_function(),
            IDS_SIGNATURE: serve_ids.get_concrete_function()}


def next_version(export_dir: str) -> int:
  """1 + the largest integer-named entry of export_dir (1 when there is none)."""
  versions = [int(n) for n in tf.io.gfile.listdir(export_dir) if n.isdigit()] \
      if tf.io.gfile.isdir(export_dir) else []
  return max(versions, default=0) + 1


def export(serving: ClassifierServing, export_dir: str, warmup_texts: list[tuple] = (),
           model_name: str = "bert") -> str:
  """Saves `serving` as `export_dir/<next version>/`, written under a temporary name first so
  TF Serving (which polls for integer-named folders) never loads a half-written model.

  Args:
    warmup_texts: tuples (text_a,) or (text_a, text_b) written as warm-up requests, one
      request each plus one batch of them all; none written when empty.
    model_name: the model name in the warm-up requests (TF Serving's --model_name).

  Returns:
    The path of the new version folder.
  """
  version = next_version(export_dir)
  final = os.path.join(export_dir, str(version))
  tmp = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}")
  tf.io.gfile.makedirs(export_dir)
  try:
    tf.saved_model.save(serving, tmp, signatures=serving.signatures())
    if warmup_texts:
      write_warmup_requests(os.path.join(tmp, WARMUP_FILE), warmup_texts, serving.is_pair,
                            model_name)
    tf.io.gfile.rename(tmp, final)
  finally:
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
  return final


def load_serving(model_dir: str, checkpoint: str | None = None
                 ) -> tuple[ClassifierServing, ClassifierConfig]:
  """The ClassifierServing of a run_classifier output_dir, and its ClassifierConfig: from its
  classifier_config.json, bert_config.json, vocab.txt and latest checkpoint (or `checkpoint`).

  The model is built in float32, whatever precision it was fine-tuned in.
  """
  config = ClassifierConfig.from_json_file(os.path.join(model_dir, CLASSIFIER_CONFIG))
  bert_config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
  tokenizer = FullTokenizer(os.path.join(model_dir, "vocab.txt"), config.do_lower_case)
  checkpoint = checkpoint or tf.train.latest_checkpoint(model_dir)
  if not checkpoint:
    raise FileNotFoundError(f"{model_dir}: no checkpoint to export")
  tf_keras.mixed_precision.set_global_policy("float32")
  model = build_classifier(bert_config, 1 if config.labels is None else len(config.labels))
  restore_classifier(model, checkpoint)
  serving = ClassifierServing(model, tokenizer, config.max_seq_length, config.labels,
                              config.is_pair)
  return serving, config


def dev_texts(task_name: str, data_dir: str, count: int = 3) -> list[tuple]:
  """The first `count` dev examples' texts (a tuple per example) of the task in data_dir."""
  task = glue.get_task(task_name, data_dir)
  examples = task.get_examples(data_dir, task.eval_splits[0])[:count]
  return [(e.text_a,) if e.text_b is None else (e.text_a, e.text_b) for e in examples]


def export_from_output_dir(model_dir: str, export_dir: str, data_dir: str | None = None,
                           checkpoint: str | None = None, model_name: str = "bert") -> str:
  """Exports a run_classifier output_dir's model (see `load_serving`) to export_dir/<version>,
  with warm-up requests from data_dir's dev examples (else `SAMPLE_TEXTS`). Returns the path."""
  serving, config = load_serving(model_dir, checkpoint)
  if data_dir:
    texts = dev_texts(config.task_name, data_dir)
  else:
    texts = [t[:2 if serving.is_pair else 1] for t in SAMPLE_TEXTS]
  return export(serving, export_dir, texts, model_name)


# TF Serving's warm-up file is a TFRecord of `tensorflow.serving.PredictionLog` protos. The
# tensorflow-serving-api package (which defines them) pins its own TensorFlow, so the few
# fields needed are encoded here by hand, with the field numbers of tensorflow_serving/apis:
#   PredictionLog.predict_log = 6; PredictLog.request = 1;
#   PredictRequest.model_spec = 1, .inputs = 2 (map<string, TensorProto>: key 1, value 2);
#   ModelSpec.name = 1, .signature_name = 3.


def _varint(n: int) -> bytes:
  out = bytearray()
  while True:
    byte, n = n & 0x7F, n >> 7
    out.append(byte | (0x80 if n else 0))
    if not n:
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protobuf field (wire type 2)."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def prediction_log(model_name: str, signature_name: str, inputs: dict) -> bytes:
  """A serialized PredictionLog holding one PredictRequest of `inputs` {name: array}."""
  model_spec = _field(1, model_name.encode()) + _field(3, signature_name.encode())
  request = _field(1, model_spec)
  for name, value in sorted(inputs.items()):
    tensor = tf.make_tensor_proto(value).SerializeToString()
    request += _field(2, _field(1, name.encode()) + _field(2, tensor))
  return _field(6, _field(1, request))


def write_warmup_requests(path: str, texts: list[tuple], is_pair: bool, model_name: str) -> None:
  names = ("text_a", "text_b") if is_pair else ("text_a",)
  batches = [[t] for t in texts] + [list(texts)]
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path) as writer:
    for batch in batches:
      inputs = {n: np.array([t[i].encode("utf-8") for t in batch], dtype=object)
                for i, n in enumerate(names)}
      writer.write(prediction_log(model_name, TEXT_SIGNATURE, inputs))
