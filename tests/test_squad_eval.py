"""bert_tf.tasks.squad.scoring: the official SQuAD v1.1 / v2.0 scores, checked against the Model
Garden's copies of the official functions and by hand."""
import json
import os
import random
import subprocess
import sys

import pytest
import tensorflow as tf
from official.nlp.tools import squad_evaluate_v1_1 as official_v1
from official.nlp.tools import squad_evaluate_v2_0 as official_v2

from bert_tf.scripts import squad_evaluate
from bert_tf.tasks.squad import scoring as squad_eval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _dataset(questions, version=None):
  """A SQuAD "data" list of one article: `questions` is [(id, [gold texts])]. With a
  version ("v2.0"), questions carry `is_impossible` as SQuAD v2.0's do."""
  qas = []
  for qid, answers in questions:
    qa = {"id": qid, "question": f"what is {qid}?",
          "answers": [{"text": t, "answer_start": 0} for t in answers]}
    if version:
      qa["is_impossible"] = not answers
    qas.append(qa)
  return [{"title": "t", "paragraphs": [{"context": "some context", "qas": qas}]}]


def _write_json(path, obj):
  path.write_text(json.dumps(obj), encoding="utf-8")
  return str(path)


def official_v2_main(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
  """What evaluate-v2.0.py's main() prints, from the Model Garden's copies of its functions
  (its own `evaluate` drops unpredicted questions, fixes the threshold at 1.0 and renames
  best_* to final_*)."""
  with_na_probs = na_probs is not None
  if na_probs is None:
    na_probs = {k: 0.0 for k in predictions}
  qid_to_has_ans = official_v2._make_qid_to_has_ans(dataset)
  has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
  no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
  exact_raw, f1_raw = official_v2._get_raw_scores(dataset, predictions)
  exact_thresh = official_v2._apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans,
                                                     na_prob_thresh)
  f1_thresh = official_v2._apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans,
                                                  na_prob_thresh)
  out_eval = official_v2._make_eval_dict(exact_thresh, f1_thresh)
  if has_ans_qids:
    official_v2._merge_eval(
        out_eval, official_v2._make_eval_dict(exact_thresh, f1_thresh, has_ans_qids), "HasAns")
  if no_ans_qids:
    official_v2._merge_eval(
        out_eval, official_v2._make_eval_dict(exact_thresh, f1_thresh, no_ans_qids), "NoAns")
  if with_na_probs:
    best_exact, exact_t = official_v2._find_best_thresh(predictions, exact_raw, na_probs,
                                                        qid_to_has_ans)
    best_f1, f1_t = official_v2._find_best_thresh(predictions, f1_raw, na_probs,
                                                  qid_to_has_ans)
    out_eval.update(best_exact=best_exact, best_exact_thresh=exact_t, best_f1=best_f1,
                    best_f1_thresh=f1_t)
  return dict(out_eval)


def official_v1_main(dataset, predictions):
  """evaluate-v1.1.py's scores: the Model Garden returns fractions (and "final_f1")."""
  result = official_v1.evaluate(dataset, predictions)
  return {"exact_match": 100 * result["exact_match"], "f1": 100 * result["final_f1"]}


# (id, gold answers, prediction): articles, punctuation, case, spacing, several golds.
V1_CASES = [
    ("article", ["the Eiffel Tower"], "Eiffel Tower"),            # EM 1, F1 1
    ("punct", ["U.S."], "US"),                                    # EM 1, F1 1
    ("multi", ["Denver Broncos", "the Broncos", "Broncos"], "Denver"),  # F1 2/3
    ("partial", ["in the 10th and 11th centuries"], "10th century"),  # F1 2/7
    ("empty", ["blue"], ""),                                      # 0, 0
    ("spaces", ["  Mr.  Smith "], "mr smith"),                    # EM 1, F1 1
    ("repeat", ["New York New York"], "New York"),                # F1 2/3
    ("missing", ["green"], None),                                 # 0, 0 (unanswered)
]
V1_EXPECTED = {"exact_match": 100 * 3 / 8, "f1": 100 * (3 + 2 / 3 + 2 / 7 + 2 / 3) / 8}

# (id, gold answers, prediction, na_prob): "The" normalises to "" (so "" matches it though
# the question has an answer); " " is an empty answer to the scores but a non-empty
# prediction to the threshold sweep; a2 and u2 tie on na_prob.
V2_CASES = [
    ("a1", ["France", "France"], "France", 0.1),
    ("a2", ["10th and 11th centuries", "in the 10th and 11th centuries"], "the 10th century",
     0.6),                                                         # F1 max(1/3, 2/7)
    ("a3", ["Rollo"], "", 0.9),
    ("a4", ["The"], "", 0.3),
    ("u1", [], "", 0.8),
    ("u2", [], "Normandy", 0.6),
    ("u3", [], " ", 0.2),
]


def _v1_fixture():
  dataset = _dataset([(qid, golds) for qid, golds, _ in V1_CASES])
  predictions = {qid: p for qid, _, p in V1_CASES if p is not None}
  return dataset, predictions


def _v2_fixture():
  dataset = _dataset([(qid, golds) for qid, golds, _, _ in V2_CASES], "v2.0")
  predictions = {qid: p for qid, _, p, _ in V2_CASES}
  na_probs = {qid: na for qid, _, _, na in V2_CASES}
  return dataset, predictions, na_probs


def test_normalize_and_token_scores():
  assert squad_eval.normalize_answer("  The  U.S.-born,  an ACTOR! ") == "usborn actor"
  assert squad_eval.normalize_answer("a an the") == ""
  assert squad_eval.normalize_answer("theatre anthem") == "theatre anthem"
  assert squad_eval.compute_exact("The Cat", "cat.") == 1
  assert squad_eval.compute_f1("the cat sat", "cat sat on mat") == pytest.approx(2 / 3)
  assert squad_eval.compute_f1("", "") == 1 and squad_eval.compute_f1("the", "") == 1
  assert squad_eval.compute_f1("", "cat") == 0 and squad_eval.compute_f1("dog", "cat") == 0


def test_v1_equals_official_and_hand_values(caplog):
  dataset, predictions = _v1_fixture()
  result = squad_eval.evaluate_v1(dataset, predictions)
  assert list(result) == ["exact_match", "f1"]
  assert result == pytest.approx(V1_EXPECTED, rel=1e-12)
  assert result == pytest.approx(official_v1_main(dataset, predictions), rel=1e-12)
  assert "Unanswered question missing will receive score 0." in caplog.text


def test_v2_equals_official_and_hand_values():
  dataset, predictions, na_probs = _v2_fixture()
  result = squad_eval.evaluate_v2(dataset, predictions, na_probs)
  assert result == official_v2_main(dataset, predictions, na_probs)
  assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                          "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                          "best_exact_thresh", "best_f1", "best_f1_thresh"]
  assert result == pytest.approx({
      "exact": 100 * 4 / 7, "f1": 100 * (4 + 1 / 3) / 7, "total": 7,
      "HasAns_exact": 50.0, "HasAns_f1": 100 * (2 + 1 / 3) / 4, "HasAns_total": 4,
      "NoAns_exact": 100 * 2 / 3, "NoAns_f1": 100 * 2 / 3, "NoAns_total": 3,
      # The sweep: a1 +1 (best), u3 -1 (" "), a4 +1, a2 +1/3 for F1 (best), u2 -1, ...
      "best_exact": 100 * 4 / 7, "best_exact_thresh": 0.1,
      "best_f1": 100 * (4 + 1 / 3) / 7, "best_f1_thresh": 0.6}, rel=1e-12)
  # Above 0.5, a2, u2, u1, a3 count as "no answer".
  result = squad_eval.evaluate_v2(dataset, predictions, na_probs, na_prob_thresh=0.5)
  assert (result["exact"], result["f1"]) == pytest.approx((100 * 5 / 7, 100 * 5 / 7))
  for thresh in (1.0, 0.6, 0.5, 0.0, -1.0):
    for probs in (None, na_probs):
      assert (squad_eval.evaluate_v2(dataset, predictions, probs, thresh)
              == official_v2_main(dataset, predictions, probs, thresh))
  # Without na_probs: no best_*; only the groups present.
  answerable = _dataset([("a1", ["France"])])
  assert squad_eval.evaluate_v2(answerable, {"a1": "france"}) == {
      "exact": 100.0, "f1": 100.0, "total": 1,
      "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 1}


def test_random_datasets_equal_official():
  """Random golds and predictions over words with articles, punctuation and case, ties in
  na_probs: v1 equals the official x100, v2 equals it exactly."""
  rng = random.Random(0)
  words = "The the a an A cat Cat dog 1066 U.S. New-York , . ! 's of and".split()

  def phrase():
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))

  questions, predictions = [], {}
  for i in range(400):
    golds = [phrase() for _ in range(rng.randint(0, 3))]
    questions.append((f"q{i}", golds))
    pick = rng.random()
    predictions[f"q{i}"] = ("" if pick < 0.2 else rng.choice(golds) if golds and pick < 0.5
                            else phrase())
  na_probs = {qid: round(rng.random(), 1) for qid in predictions}
  dataset = _dataset(questions, "v2.0")
  for thresh in (1.0, 0.5):
    assert (squad_eval.evaluate_v2(dataset, predictions, na_probs, thresh)
            == official_v2_main(dataset, predictions, na_probs, thresh))
  answerable = _dataset([q for q in questions if q[1]])
  assert (squad_eval.evaluate_v1(answerable, predictions)
          == pytest.approx(official_v1_main(answerable, predictions), rel=1e-12))


def test_v2_missing_predictions_score_zero(caplog):
  """The official v2.0 script stops on a KeyError; here the question scores 0 and stays in
  every total, and needs no na_prob."""
  dataset, predictions, na_probs = _v2_fixture()
  del predictions["u1"], na_probs["u1"]
  result = squad_eval.evaluate_v2(dataset, predictions, na_probs)
  assert "Missing prediction for u1" in caplog.text
  assert result == pytest.approx({
      "exact": 100 * 3 / 7, "f1": 100 * (3 + 1 / 3) / 7, "total": 7,
      "HasAns_exact": 50.0, "HasAns_f1": 100 * (2 + 1 / 3) / 4, "HasAns_total": 4,
      "NoAns_exact": 100 / 3, "NoAns_f1": 100 / 3, "NoAns_total": 3,
      # The sweep starts from 2 questions predicted "no answer" (u2, u3), not 3.
      "best_exact": 100 * 3 / 7, "best_exact_thresh": 0.1,
      "best_f1": 100 * (3 + 1 / 3) / 7, "best_f1_thresh": 0.6}, rel=1e-12)


def test_bad_arguments():
  dataset, predictions, na_probs = _v2_fixture()
  del na_probs["a2"]
  with pytest.raises(ValueError, match="question a2 has a prediction but no no-answer"):
    squad_eval.evaluate_v2(dataset, predictions, na_probs)
  with pytest.raises(ValueError, match="question u1 has no answers: SQuAD v2.0"):
    squad_eval.evaluate_v1(dataset, predictions)
  with pytest.raises(ValueError, match="question a1: the prediction is a int"):
    squad_eval.evaluate_v1(dataset, {"a1": 3})
  with pytest.raises(ValueError, match="holds no questions"):
    squad_eval.evaluate_v2([], {})


def test_readers(tmp_path):
  data = {"version": "1.1", "data": _dataset([("q1", ["x"])])}
  good = _write_json(tmp_path / "good.json", data)
  assert squad_eval.read_dataset(good, "1.1") == data["data"]
  ram = "ram://squad_eval_test/data.json"
  with tf.io.gfile.GFile(ram, "w") as f:
    f.write(json.dumps(data))
  assert squad_eval.read_dataset(ram) == data["data"]
  malformed = tmp_path / "malformed.json"
  malformed.write_text('{"q1": "x",\n  "q2": }')
  bad_structure = {"data": _dataset([("q1", ["x"])])}
  bad_structure["data"][0]["paragraphs"][0]["qas"][0]["answers"] = [{"start": 0}]
  cases = [
      (lambda: squad_eval.read_json(str(tmp_path / "none.json")), r"none.json: file not found"),
      (lambda: squad_eval.read_json(str(malformed)),
       r"malformed.json: malformed JSON at line 2, column 9: Expecting value"),
      (lambda: squad_eval.read_dataset(good, "v2.0"),
       r"good.json: SQuAD version '1.1', expected 'v2.0'"),
      (lambda: squad_eval.read_dataset(_write_json(tmp_path / "p.json", {"q1": "x"})),
       r'p.json: no "data" key'),
      (lambda: squad_eval.read_dataset(_write_json(tmp_path / "s.json", bad_structure)),
       r's.json: question q1: an answer without a string "text"'),
      (lambda: squad_eval.read_predictions(_write_json(tmp_path / "l.json", ["x"])),
       r"l.json: predictions are a list"),
      (lambda: squad_eval.read_na_probs(_write_json(tmp_path / "n.json", {"q1": "x"})),
       r"n.json: question q1: the no-answer probability 'x' is not a number"),
  ]
  for call, message in cases:
    with pytest.raises(ValueError, match=message):
      call()


def test_main(tmp_path, capsys):
  dataset, predictions = _v1_fixture()
  data = _write_json(tmp_path / "dev-v1.1.json", {"version": "1.1", "data": dataset})
  preds = _write_json(tmp_path / "predictions.json", predictions)
  assert squad_evaluate.main([data, preds]) == 0
  assert json.loads(capsys.readouterr().out) == squad_eval.evaluate_v1(dataset, predictions)

  dataset, predictions, na_probs = _v2_fixture()
  data = _write_json(tmp_path / "dev-v2.0.json", {"version": "v2.0", "data": dataset})
  preds = _write_json(tmp_path / "predictions.json", predictions)
  # v2.0 from the data's is_impossible keys; the official script's dashed flag.
  assert squad_evaluate.main([data, preds, "--na-prob-thresh", "0.5"]) == 0
  assert (json.loads(capsys.readouterr().out)
          == squad_eval.evaluate_v2(dataset, predictions, None, 0.5))

  del na_probs["a2"]
  odds = _write_json(tmp_path / "null_odds.json", na_probs)
  assert squad_evaluate.main([data, preds, "--na_prob_file", odds]) == 2
  err = capsys.readouterr().err
  assert err == (f"squad_evaluate: error: {odds}: question a2 has a prediction but no "
                 f"no-answer probability\n")


def _squad_evaluate(*args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([sys.executable, "-m", "bert_tf.scripts.squad_evaluate", *args],
                        cwd=ROOT, env=env, capture_output=True, text=True)


def test_command_line(tmp_path):
  dataset, predictions, na_probs = _v2_fixture()
  data = _write_json(tmp_path / "dev.json", {"version": "v2.0", "data": dataset})
  preds = _write_json(tmp_path / "predictions.json", predictions)
  odds = _write_json(tmp_path / "null_odds.json", na_probs)
  result = _squad_evaluate(data, preds, "--na_prob_file", odds)
  assert result.returncode == 0, result.stderr
  assert json.loads(result.stdout) == squad_eval.evaluate_v2(dataset, predictions, na_probs)

  (tmp_path / "bad.json").write_text("{")
  result = _squad_evaluate(data, str(tmp_path / "bad.json"))
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      f"squad_evaluate: error: {tmp_path}/bad.json: malformed JSON at line 1, column 2: "
      f"Expecting property name enclosed in double quotes"]
  # The scores alone load no TensorFlow (~5 CPU s): the official scripts take a fraction of
  # a second, and so does this one.
  check = ("import sys\n"
           "from bert_tf.scripts import squad_evaluate\n"
           f"assert squad_evaluate.main({[data, preds]!r}) == 0\n"
           "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'tf_keras'}))")
  result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True,
                          text=True)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip().splitlines()[-1] == "[]"
