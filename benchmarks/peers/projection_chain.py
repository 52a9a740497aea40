r"""The encoder's projections alone, TensorFlow beside torch: are the matrix products of a batch-1
request as fast on both sides? (What is left of a serving latency gap is then the other ops.)

Kind: a side-by-side driver (benchmarks/peers/): it runs itself in the project's venv
(TensorFlow) and in --peer_python (torch), one side at a time, alternated.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/peers/projection_chain.py \
      --peer_python=/tmp/refvenv/bin/python --tokens=12 --threads=2 --rounds=2

Each side chains the 36 products of a 6-layer H=384 encoder (per layer: query, key, value and
output 384x384, feed-forward 384x1536 and 1536x384; MiniLM-L6's shapes, random weights, 42 MB
in all) on a [--tokens, 384] input, each layer's output fed to the next: TensorFlow as one
tf.function of tf.matmul on variables (a SavedModel's weights), torch as `@` under
inference_mode. Both with --threads intra- and inter-op threads. Prints per round each side's
p50 and the best of --calls calls (ms) and the ratio TensorFlow / torch (below 1: TensorFlow
faster), then one JSON line.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

from benchmarks import child  # each side in a fresh process
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON

SHAPES = [(384, 384)] * 4 + [(384, 1536), (1536, 384)]
LAYERS = 6


def _weights(tokens: int) -> tuple[np.ndarray, list[np.ndarray]]:
  rng = np.random.default_rng(0)
  x = rng.normal(size=[tokens, 384]).astype(np.float32)
  return x, [rng.normal(size=s).astype(np.float32) * 0.03 for _ in range(LAYERS) for s in SHAPES]


def _chain(x, w, matmul):
  """The 36 products, layer by layer: h -> q, k, v -> output -> feed-forward -> h."""
  h = x
  for layer in range(LAYERS):
    q, k, v, o, f1, f2 = w[len(SHAPES) * layer:len(SHAPES) * (layer + 1)]
    a = matmul(matmul(h, q) + matmul(h, k) + matmul(h, v), o)
    h = matmul(matmul(a, f1), f2) * 0.01 + h
  return h


def _side(side: str, tokens: int, threads: int, calls: int) -> None:
  """One side's timing: JSON {"p50_ms", "min_ms"} on stdout."""
  x, w = _weights(tokens)
  if side == "tensorflow":
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    variables = [tf.Variable(v) for v in w]
    run = tf.function(lambda x: _chain(x, variables, tf.matmul))
    x = tf.constant(x)
    call = lambda: run(x).numpy()
  else:
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    tensors, x = [torch.from_numpy(v) for v in w], torch.from_numpy(x)

    def call():
      with torch.inference_mode():
        return _chain(x, tensors, lambda a, b: a @ b).numpy()
  for _ in range(20):  # Warm-up: tracing, kernel set-up.
    call()
  seconds = []
  for _ in range(calls):
    start = time.perf_counter()
    call()
    seconds.append(time.perf_counter() - start)
  print(json.dumps({"p50_ms": round(float(np.percentile(seconds, 50)) * 1e3, 2),
                    "min_ms": round(min(seconds) * 1e3, 2)}))


def main():
  parser = argparse.ArgumentParser()
  peer_python.add_flag(parser, required=False)  # A --side child runs without it.
  parser.add_argument("--tokens", type=int, default=12, help="Rows of the input (a request's "
                      "tokens).")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--calls", type=int, default=200, help="Timed calls per side and round.")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--side", choices=["tensorflow", "torch"], help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.side:
    _side(args.side, args.tokens, args.threads, args.calls)
    return
  if not args.peer_python:
    sys.exit(f"--peer_python or ${peer_python.ENV} is required (the peer venv's python, with torch)")
  pythons = {"tensorflow": sys.executable, "torch": args.peer_python}
  rounds = []
  for index in range(args.rounds):
    order = ["tensorflow", "torch"] if index % 2 == 0 else ["torch", "tensorflow"]
    result = {}
    for side in order:
      result[side] = child.run_json(
          [pythons[side], os.path.abspath(__file__), f"--side={side}",
           f"--tokens={args.tokens}", f"--threads={args.threads}", f"--calls={args.calls}"],
          label=f"the {side} side", echo=False)
    result["ratio_p50"] = round(result["tensorflow"]["p50_ms"] / result["torch"]["p50_ms"], 3)
    rounds.append(result)
    print(f"round {index + 1}: tensorflow p50 {result['tensorflow']['p50_ms']} ms (best "
          f"{result['tensorflow']['min_ms']}), torch p50 {result['torch']['p50_ms']} ms (best "
          f"{result['torch']['min_ms']}), ratio {result['ratio_p50']}", flush=True)
  print(json.dumps({"tokens": args.tokens, "threads": args.threads, "rounds": rounds,
                    "loadavg": os.getloadavg()}))


if __name__ == "__main__":
  main()
