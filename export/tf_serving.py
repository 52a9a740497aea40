"""A task's serving module as a SavedModel in TF Serving's layout, with warm-up requests.

    export_dir/<version>/                    version = 1 + the largest integer there
      saved_model.pb, variables/
      assets/vocab.txt                       the tokenizer's vocabulary (via its asset)
      assets.extra/tf_serving_warmup_requests   a few real PredictionLogs, replayed at load

What the signatures take and answer is the task's (`FineTuningTask.serving_module`); this
module only writes them, and marks those shaped for TF Serving's Classify and Regress APIs
with those APIs' method names (`api_method_name`). The runner does not import it (export sits
above the tasks): the run_* scripts hand `export` to the runner for --export_dir.
"""
import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
# How tf.saved_model.save writes fingerprint.pb: rewritten after the method names change, so
# its checksum of saved_model.pb stays true (TensorFlow exports no public writer for it).
from tensorflow.python.saved_model import fingerprinting_utils
# What tf_keras.models.save_model(save_traces=False) sets; tf_keras makes it public only for
# a Keras model, and ours is a tf.Module that holds one.
from tf_keras.src.saving.legacy.saved_model.utils import keras_option_scope

TEXT_SIGNATURE = "serving_default"
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def next_version(export_dir: str) -> int:
  """1 + the largest integer-named entry of export_dir (1 when there is none)."""
  versions = [int(n.rstrip("/")) for n in tf.io.gfile.listdir(export_dir)
              if n.rstrip("/").isdigit()] if tf.io.gfile.isdir(export_dir) else []
  return max(versions, default=0) + 1


def export(module: tf.Module, export_dir: str, warmup_inputs: list[dict[str, str]] = (),
           model_name: str = "bert") -> str:
  """Saves `module` (with its `signatures()`) as `export_dir/<next version>/`, written under a
  temporary name first so TF Serving (which polls for integer-named folders) never loads a
  half-written model.

  Args:
    warmup_inputs: requests for serving_default ({input name: text}), written as warm-up
      requests, one each plus one batch of them all; none written when empty.
    model_name: the model name in the warm-up requests (TF Serving's --model_name).

  Returns:
    The path of the new version folder.
  """
  version = next_version(export_dir)
  final = os.path.join(export_dir, str(version))
  tmp = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}")
  tf.io.gfile.makedirs(export_dir)
  try:
    # Only the signatures are served: without Keras' own traces of every layer's call (which
    # only tf_keras.models.load_model reads) saving is faster, 6x for the BiLSTM tagger.
    with keras_option_scope(save_traces=False):
      tf.saved_model.save(module, tmp, signatures=module.signatures())
    write_method_names(tmp)
    if warmup_inputs:
      write_warmup_requests(os.path.join(tmp, WARMUP_FILE), warmup_inputs, model_name)
  except BaseException:
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
    raise
  tf.io.gfile.rename(tmp, final)
  return final


def api_method_name(signature: meta_graph_pb2.SignatureDef) -> str | None:
  """The method name of the TF Serving API a signature is shaped for, as the server looks one
  up: Classify's when it takes one string tensor `inputs` (serialized tf.Examples) and answers
  `classes` and/or `scores`, Regress's when it answers `outputs` alone; else None."""
  inputs, outputs = set(signature.inputs), set(signature.outputs)
  if (inputs != {tf.saved_model.CLASSIFY_INPUTS}
      or signature.inputs[tf.saved_model.CLASSIFY_INPUTS].dtype != tf.string.as_datatype_enum):
    return None
  if outputs and outputs <= {tf.saved_model.CLASSIFY_OUTPUT_CLASSES,
                             tf.saved_model.CLASSIFY_OUTPUT_SCORES}:
    return tf.saved_model.CLASSIFY_METHOD_NAME
  if outputs == {tf.saved_model.REGRESS_OUTPUTS}:
    return tf.saved_model.REGRESS_METHOD_NAME
  return None


def write_method_names(path: str) -> None:
  """Gives each signature of the SavedModel at `path` shaped for TF Serving's Classify or
  Regress API that API's method name (`api_method_name`); the others keep theirs.

  TF2's writer records every signature under the Predict method name. TF Serving's :classify
  and :regress refuse a signature not named theirs wherever its method-name check is on: in
  2.x model servers with --enable_signature_method_name_check (off by default), in older ones
  always. Their own names pass every API (Predict's check admits all three), so the exports
  serve with the check on or off.
  """
  pb_path = os.path.join(path, "saved_model.pb")
  with tf.io.gfile.GFile(pb_path, "rb") as f:
    saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  marked = False
  for meta_graph in saved_model.meta_graphs:
    for signature in meta_graph.signature_def.values():
      method_name = api_method_name(signature)
      if method_name:
        signature.method_name = method_name
        marked = True
  if marked:
    with tf.io.gfile.GFile(pb_path, "wb") as f:
      f.write(saved_model.SerializeToString(deterministic=True))
    fingerprinting_utils.write_fingerprint(path)


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


def write_warmup_requests(path: str, requests: list[dict[str, str]], model_name: str) -> None:
  """Each request as a batch of one, then all of them as one batch."""
  batches = [[r] for r in requests] + [list(requests)]
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path) as writer:
    for batch in batches:
      inputs = {name: np.array([r[name].encode("utf-8") for r in batch], dtype=object)
                for name in batch[0]}
      writer.write(prediction_log(model_name, TEXT_SIGNATURE, inputs))
