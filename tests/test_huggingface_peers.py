"""Our Hugging Face exports in the peers' own libraries (issue 48): transformers on torch and
keras-hub on Keras 3, in the python that $BERT_TF_PEER_PYTHON names (benchmarks/README.md's peer
venv; never the project's), through the peer side of benchmarks/parity/huggingface_parity.py.
Skipped, saying why, where that python is not named. That benchmark is the whole check (our own
runs of every kind, MRPC's dev probabilities, MiniLM's round trip); these are its short form.

The reference outputs of the first test are transformers' own, computed once with the folders
(tests/fixtures/hf_heads, made by its make_hf_heads.py).
"""
import json
import os

import numpy as np
import pytest

from benchmarks import peer_python
from benchmarks.parity import huggingface_parity
from export import huggingface
from toys import classifier_runner, make_sst2, toy_args

PEER = os.environ.get(peer_python.ENV)
if not PEER:
  pytestmark = pytest.mark.skip(
      reason=f"${peer_python.ENV} is not set: it names a python with torch, "
      "transformers and keras-hub (benchmarks/README.md's peer venv)")
elif not os.access(PEER, os.X_OK):
  pytestmark = pytest.mark.skip(
      reason=f"${peer_python.ENV}={PEER} is not an executable")

FIXTURES = huggingface_parity.FIXTURES
HEADS = sorted(name for name in os.listdir(FIXTURES)
               if os.path.exists(os.path.join(FIXTURES, name, "expected.npz")))
CLEAN = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}


@pytest.mark.slow
def test_transformers_models_through_ours_give_their_own_outputs(tmp_path):
  """Each fixture folder read by --init_checkpoint and exported again: transformers loads it
  as its own class with nothing missing or unexpected, and it answers as it did before the
  trip; keras-hub's backbone too, where it loads (it needs the pooler)."""
  cases = {}
  for name in HEADS:
    huggingface.export(os.path.join(FIXTURES, name), str(tmp_path / name))
    cases[name] = {"folder": str(tmp_path / name),
                   "expected": os.path.join(FIXTURES, name, "expected.npz")}
  results = huggingface_parity.peer_checks(PEER, str(tmp_path), cases)["cases"]
  for name in HEADS:
    with open(os.path.join(FIXTURES, name, "config.json"), encoding="utf-8") as f:
      assert results[name]["architecture"] == json.load(f)["architectures"][0], name
    assert results[name]["loading"] == CLEAN, name
    assert max(results[name]["outputs"].values()) <= huggingface_parity.TRANSFORMERS_LIMIT, (
        name, results[name]["outputs"])
    if "pooler_output" in np.load(cases[name]["expected"]):
      assert results[name]["keras_hub"] <= huggingface_parity.KERAS_HUB_LIMIT, name


@pytest.mark.slow
def test_a_classifier_fine_tuned_here_answers_alike_in_transformers(tmp_path):
  make_sst2(tmp_path / "data", num_train=32, num_dev=8)
  args = toy_args(str(tmp_path), tmp_path / "data", tmp_path / "out", do_train=True,
                  num_train_epochs=1)
  classifier_runner(args).run()
  huggingface.export(str(tmp_path / "out"), str(tmp_path / "hf"))
  expected = str(tmp_path / "ours.npz")
  np.savez(expected, **huggingface_parity.task_outputs(str(tmp_path / "out"),
                                                                  str(tmp_path / "data")))
  result = huggingface_parity.peer_checks(
      PEER, str(tmp_path), {"sst2": {"folder": str(tmp_path / "hf"), "expected": expected}}
  )["cases"]["sst2"]
  assert result["architecture"] == "BertForSequenceClassification"
  assert result["loading"] == CLEAN
  assert result["outputs"]["logits"] <= huggingface_parity.TRANSFORMERS_LIMIT
  assert result["keras_hub"] <= huggingface_parity.KERAS_HUB_LIMIT
