r"""SQuAD evaluation, equal to the official scripts evaluate-v1.1.py and evaluate-v2.0.py: the
same answer normalisation, exact match and token F1, the same keys, and scores x100 as they
print them (`*_thresh` stay raw no-answer probabilities). The command line is
`bert_tf.scripts.squad_evaluate`.

`evaluate_files` picks v2.0 when the data says "version": "v2.0", has `is_impossible` keys or
unanswerable questions, or when --na_prob_file is given; v1.1 otherwise. It prints one JSON
object, as the official script of that version does.

Where the official scripts would crash, this module decides instead: a question without a
prediction scores 0 in both versions (v1.1 does so officially; v2.0 stops on a KeyError), and
malformed input is a ValueError naming the file and question.
"""
import collections
import json
import math
import re
import string

from absl import logging

from bert_tf.finetuning import text_files  # No TensorFlow at import: evaluation alone needs none.

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
  """Lowers text and removes punctuation, articles and extra whitespace (both scripts')."""
  s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", s).split())


def get_tokens(s: str) -> list[str]:
  return normalize_answer(s).split()


def compute_exact(a_gold: str, a_pred: str) -> int:
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def _token_f1(gold_toks: list[str], pred_toks: list[str]) -> float:
  """Token-overlap F1; 0 without overlap (the official expressions, for equal floats)."""
  common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  return (2 * precision * recall) / (precision + recall)


def compute_f1(a_gold: str, a_pred: str) -> float:
  """v2.0's F1: where either answer is empty ("no answer"), 1 if both are, else 0."""
  gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
  if not gold_toks or not pred_toks:
    return int(gold_toks == pred_toks)
  return _token_f1(gold_toks, pred_toks)


def _list(obj, key: str, where: str) -> list:
  value = obj.get(key) if isinstance(obj, dict) else None
  if not isinstance(value, list):
    raise ValueError(f'{where} has no "{key}" list')
  return value


def _questions(dataset: list) -> list[tuple[str, list[str]]]:
  """[(question id, gold answer texts)] in file order; ValueError on a malformed dataset."""
  if not isinstance(dataset, list):
    raise ValueError(f'"data" is a {type(dataset).__name__}, not a list of articles')
  questions = []
  for i, article in enumerate(dataset):
    for paragraph in _list(article, "paragraphs", f"article {i}"):
      for qa in _list(paragraph, "qas", f"a paragraph of article {i}"):
        qid = qa.get("id") if isinstance(qa, dict) else None
        if not isinstance(qid, str):
          raise ValueError(f'a question of article {i} has no string "id"')
        answers = _list(qa, "answers", f"question {qid}")
        if not all(isinstance(a, dict) and isinstance(a.get("text"), str) for a in answers):
          raise ValueError(f'question {qid}: an answer without a string "text"')
        questions.append((qid, [a["text"] for a in answers]))
  if not questions:
    raise ValueError("the dataset holds no questions")
  return questions


def _check_predictions(predictions: dict) -> None:
  if not isinstance(predictions, dict):
    raise ValueError(f"predictions are a {type(predictions).__name__}, not an object "
                     f"mapping question ids to answer texts")
  for qid, text in predictions.items():
    if not isinstance(text, str):
      raise ValueError(f"question {qid}: the prediction is a {type(text).__name__}, "
                       f"not a string")


def _check_na_probs(na_probs: dict, qids) -> None:
  """Every value a number (they are sorted), and one for each scored question."""
  if not isinstance(na_probs, dict):
    raise ValueError(f"no-answer probabilities are a {type(na_probs).__name__}, not an "
                     f"object mapping question ids to numbers")
  for qid, p in na_probs.items():
    if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(p):
      raise ValueError(f"question {qid}: the no-answer probability {p!r} is not a number")
  for qid in qids:
    if qid not in na_probs:
      raise ValueError(f"question {qid} has a prediction but no no-answer probability")


def evaluate_v1(dataset: list, predictions: dict[str, str]) -> dict:
  """evaluate-v1.1.py: {"exact_match", "f1"} x100, the best over each question's gold answers.

  Args:
    dataset: a SQuAD file's "data" list (articles -> paragraphs -> qas).
    predictions: question id -> answer text. A question without one scores 0 (logged).
  """
  _check_predictions(predictions)
  questions = _questions(dataset)
  exact_match = f1 = 0
  for qid, gold_answers in questions:
    if not gold_answers:
      raise ValueError(f"question {qid} has no answers: SQuAD v2.0 data is scored by "
                       f"evaluate_v2")
    if qid not in predictions:
      logging.error("Unanswered question %s will receive score 0.", qid)
      continue
    prediction = predictions[qid]
    exact_match += max(compute_exact(a, prediction) for a in gold_answers)
    pred_toks = get_tokens(prediction)
    f1 += max(_token_f1(get_tokens(a), pred_toks) for a in gold_answers)
  total = len(questions)
  return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def _raw_scores(questions, predictions):
  """{qid: exact}, {qid: F1} of the predicted questions; an unanswerable question's (or one
  whose answers all normalise to "") only gold answer is ""."""
  exact_scores, f1_scores = {}, {}
  for qid, answers in questions:
    gold_answers = [a for a in answers if normalize_answer(a)] or [""]
    if qid not in predictions:
      logging.error("Missing prediction for %s", qid)
      continue
    a_pred = predictions[qid]
    exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
    f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
  return exact_scores, f1_scores


def _apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
  """Questions whose no-answer probability exceeds the threshold count as answered ""."""
  return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
          for qid, s in scores.items()}


def _make_eval_dict(exact_scores, f1_scores, qid_list) -> dict:
  total = len(qid_list)
  return {"exact": 100.0 * sum(exact_scores[k] for k in qid_list) / total,
          "f1": 100.0 * sum(f1_scores[k] for k in qid_list) / total,
          "total": total}


def _find_best_thresh(predictions, scores, na_probs, qid_to_has_ans):
  """(best score x100, its no-answer threshold): the official sweep from "every question
  unanswered" up through the questions in increasing no-answer probability."""
  cur_score = sum(1 for k in scores if not qid_to_has_ans[k])
  best_score = cur_score
  best_thresh = 0.0
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      diff = -1 if predictions[qid] else 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  # Questions without a prediction stay in the denominator, scoring 0.
  return 100.0 * best_score / len(qid_to_has_ans), best_thresh


def evaluate_v2(dataset: list, predictions: dict[str, str],
                na_probs: dict[str, float] | None = None,
                na_prob_thresh: float = 1.0) -> dict:
  """evaluate-v2.0.py: exact, f1, total, then HasAns_* and NoAns_* (those present), then with
  `na_probs` best_exact, best_exact_thresh, best_f1, best_f1_thresh. Scores x100.

  Args:
    dataset: a SQuAD file's "data" list; a question with no answers is unanswerable.
    predictions: question id -> answer text, "" for no answer. A question without one
      scores 0 (logged).
    na_probs: question id -> the model's no-answer probability (null odds); None: all 0.0.
    na_prob_thresh: a prediction whose na_prob exceeds this counts as "".
  """
  _check_predictions(predictions)
  questions = _questions(dataset)
  qid_to_has_ans = {qid: bool(answers) for qid, answers in questions}
  exact_raw, f1_raw = _raw_scores(questions, predictions)
  if na_probs is None:
    thresh_probs = {k: 0.0 for k in predictions}
  else:
    _check_na_probs(na_probs, exact_raw)
    thresh_probs = na_probs
  exact_thresh = _apply_no_ans_threshold(exact_raw, thresh_probs, qid_to_has_ans,
                                         na_prob_thresh)
  f1_thresh = _apply_no_ans_threshold(f1_raw, thresh_probs, qid_to_has_ans, na_prob_thresh)
  exact_all = {qid: exact_thresh.get(qid, 0) for qid in qid_to_has_ans}
  f1_all = {qid: f1_thresh.get(qid, 0) for qid in qid_to_has_ans}
  out_eval = _make_eval_dict(exact_all, f1_all, list(qid_to_has_ans))
  for prefix, has_ans in (("HasAns", True), ("NoAns", False)):
    qid_list = [k for k, v in qid_to_has_ans.items() if v == has_ans]
    if qid_list:
      for key, value in _make_eval_dict(exact_all, f1_all, qid_list).items():
        out_eval[f"{prefix}_{key}"] = value
  if na_probs is not None:
    best_exact, exact_thresh = _find_best_thresh(predictions, exact_raw, na_probs,
                                                 qid_to_has_ans)
    best_f1, f1_thresh = _find_best_thresh(predictions, f1_raw, na_probs, qid_to_has_ans)
    out_eval.update(best_exact=best_exact, best_exact_thresh=exact_thresh, best_f1=best_f1,
                    best_f1_thresh=f1_thresh)
  return out_eval


def read_json(path: str):
  """The parsed JSON file at `path` (any tf.io.gfile path; UTF-8, a BOM dropped: the tasks'
  `text_files.read_text`); a one-line ValueError naming it."""
  text = text_files.read_text(path)
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: "
                     f"{e.msg}") from None


def _dataset(obj, path: str) -> list:
  if not isinstance(obj, dict) or "data" not in obj:
    raise ValueError(f'{path}: no "data" key: not a SQuAD dataset file')
  try:
    _questions(obj["data"])
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None
  return obj["data"]


def read_dataset(path: str, version: str | None = None) -> list:
  """The "data" list of the SQuAD file at `path`, checked. `version` ("1.1", "v2.0"): refuse
  a file whose "version" differs."""
  obj = read_json(path)
  data = _dataset(obj, path)
  if version is not None and obj.get("version") != version:
    raise ValueError(f"{path}: SQuAD version {obj.get('version')!r}, expected {version!r}")
  return data


def read_predictions(path: str) -> dict[str, str]:
  """A predictions.json: question id -> answer text."""
  predictions = read_json(path)
  try:
    _check_predictions(predictions)
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None
  return predictions


def read_na_probs(path: str) -> dict[str, float]:
  """A null_odds.json: question id -> no-answer probability (or score)."""
  na_probs = read_json(path)
  try:
    _check_na_probs(na_probs, ())
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None
  return na_probs


def is_v2(obj: dict) -> bool:
  """Whether a SQuAD file's JSON (checked) is v2.0: it says so, or a question has an
  `is_impossible` key or no answers."""
  return obj.get("version") == "v2.0" or any(
      "is_impossible" in qa or not qa["answers"]
      for article in obj["data"] for p in article["paragraphs"] for qa in p["qas"])


def evaluate_files(data_file: str, pred_file: str, na_prob_file: str | None = None,
                   na_prob_thresh: float = 1.0) -> tuple[dict, bool]:
  """(the scores, whether v2.0) of the official script of the data's version: v2.0 when the
  data says so (see `is_v2`) or `na_prob_file` is given. ValueError naming the file."""
  obj = read_json(data_file)
  dataset = _dataset(obj, data_file)
  predictions = read_predictions(pred_file)
  if not (na_prob_file or is_v2(obj)):
    return evaluate_v1(dataset, predictions), False
  if not na_prob_file:
    return evaluate_v2(dataset, predictions, None, na_prob_thresh), True
  na_probs = read_na_probs(na_prob_file)
  try:
    return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh), True
  except ValueError as e:  # The data and predictions are checked: a na_prob is missing.
    raise ValueError(f"{na_prob_file}: {e}") from None
