r"""Gradient accumulation's cost: a batch of B taken in N micro-batches against a plain batch of
B/N (the memory it must match) and a plain batch of B (the memory it saves), each in a fresh
process (`runs/train_step.py`: MiniLM, a fixed MRPC-shaped batch, forward, backward, AdamW),
alternated over --rounds.

Kind: a run of our product (benchmarks/runs/); no peer (Hugging Face's Trainer accumulates too,
but the question here is what accumulation costs our own step).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/accumulation.py \
      --train_batch_size=32 --gradient_accumulation_steps=4 --rounds=2

Prints each run's JSON line, then per configuration the peak resident memory (MiB, the
process's VmHWM: model, optimizer, activations and TensorFlow's own) and examples/s, and the
ratios of B-in-N to B/N plain: memory (expected ≈ 1, plus one weights-sized accumulator) and
throughput (expected within 5%).
"""
import argparse
import os
import sys

import numpy as np

from benchmarks import child

HERE = os.path.dirname(os.path.abspath(__file__))


def run(batch: int, accumulation: int, args) -> dict:
  command = [sys.executable, os.path.join(HERE, "train_step.py"), f"--steps={args.steps}",
             f"--train_batch_size={batch}", f"--gradient_accumulation_steps={accumulation}",
             f"--max_seq_length={args.max_seq_length}"]
  return child.run_json(command)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--train_batch_size", type=int, default=32, help="B, one update's.")
  parser.add_argument("--gradient_accumulation_steps", type=int, default=4, help="N.")
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=10, help="Timed steps of each run.")
  parser.add_argument("--rounds", type=int, default=2)
  args = parser.parse_args()
  b, n = args.train_batch_size, args.gradient_accumulation_steps
  if b % n:
    parser.error(f"--train_batch_size={b} does not divide into {n} micro-batches")
  configs = {f"B={b} in N={n}": (b, n), f"B/N={b // n} plain": (b // n, 1),
             f"B={b} plain": (b, 1)}
  results = {name: [] for name in configs}
  for _ in range(args.rounds):
    for name, (batch, accumulation) in configs.items():
      results[name].append(run(batch, accumulation, args))
  mean = lambda name, key: float(np.mean([r[key] for r in results[name]]))
  print(f"\nMiniLM, sequence {args.max_seq_length}, {args.rounds} rounds, one process each")
  print("| configuration | peak RSS MiB | examples/s |")
  for name in configs:
    print(f"| {name} | {mean(name, 'peak_rss_mib'):.0f} | "
          f"{mean(name, 'examples_per_s'):.1f} |")
  accumulated, plain = f"B={b} in N={n}", f"B/N={b // n} plain"
  print(f"B in N over B/N plain: memory {mean(accumulated, 'peak_rss_mib') / mean(plain, 'peak_rss_mib'):.3f}x, "
        f"throughput {mean(accumulated, 'examples_per_s') / mean(plain, 'examples_per_s'):.3f}x")


if __name__ == "__main__":
  main()
