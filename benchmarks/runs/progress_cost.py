r"""What progress lines cost the training loop: `loop.train` with a line at least every 30 s (a
loop's steps in tf.function calls that end before the next line is due: the default)
against one call per loop (progress_seconds=None: a line per loop only), in fresh processes,
alternated, through `runs/train_step.py` (MiniLM's classifier step on a fixed batch).

Kind: a run of our product (benchmarks/runs/), both ways ours.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/progress_cost.py \
      --rounds=3 --steps=30 --train_batch_size=16 --max_seq_length=64

Prints each run's JSON line, then per way the median steady ms/step (the second loop's) and
loop.train's whole seconds (the first loop's growing calls included), and the ratio (lines every
30 s over one call a loop; 1.0 = no cost).
"""
import argparse
import os
import statistics
import sys

from benchmarks import child  # each run in a fresh process

WAYS = {"lines every 30 s": "30", "one call a loop": "0"}


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--train_batch_size", type=int, default=16)
  parser.add_argument("--max_seq_length", type=int, default=64)
  args = parser.parse_args()
  script = os.path.join(os.path.dirname(__file__), "train_step.py")
  runs = {way: [] for way in WAYS}
  for _ in range(args.rounds):
    for way, seconds in WAYS.items():
      runs[way].append(child.run_json(
          [sys.executable, script, f"--steps={args.steps}", f"--progress_seconds={seconds}",
           f"--train_batch_size={args.train_batch_size}",
           f"--max_seq_length={args.max_seq_length}"], label=way))
  medians = {way: {key: statistics.median(r[key] for r in results)
                   for key in ("ms_per_step", "train_s")} for way, results in runs.items()}
  for way, median in medians.items():
    print(f"{way}: {median['ms_per_step']:.1f} ms/step, loop.train {median['train_s']:.1f} s")
  lines, plain = medians.values()
  print(f"ratio (lines / one call): ms/step {lines['ms_per_step'] / plain['ms_per_step']:.3f}, "
        f"loop.train {lines['train_s'] / plain['train_s']:.3f}")


if __name__ == "__main__":
  main()
