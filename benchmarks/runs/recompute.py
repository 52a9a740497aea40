r"""--recompute_layers: peak memory and step time of a fine-tuning step with and without each
Transformer block's forward pass recomputed in the backward pass (`encoder.recomputed_blocks`).

Kind: a run of our product (benchmarks/runs/); no peer (the peer column is the same step
without recompute).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/recompute.py

Each configuration (--sizes: preset:batch:sequence, each with recompute off and on) runs in a
fresh subprocess: a freshly initialised classifier (BertClassifier, dropout on as the
presets have it) on one random batch repeated, the training loop's step (`loop.accumulated_gradients` in
a tf.function without AutoGraph, then the AdamW update), --warmup steps untimed (the trace),
then --steps timed; no checkpointing. Memory is the child's resident set: after the model and
the optimizer's slots exist (`model_mb`) and its peak (`peak_mb`, VmHWM); their difference is
what the step itself holds: activations, gradients, workspace. Prints one JSON line a
configuration, then a table of ratios (recompute on / off).
"""
import json
import sys
import time

from absl import app
from absl import flags

from benchmarks import child

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["bert_base:8:128", "bert_large:4:384"],
                  "preset:batch:sequence configurations.")
flags.DEFINE_integer("warmup", 1, "Untimed steps first (the first traces the step).")
flags.DEFINE_integer("steps", 2, "Timed steps.")
flags.DEFINE_string("child", None, "Internal: run one configuration, preset:batch:sequence:"
                    "recompute (0 or 1), in this process.")


def _status_mb(field: str) -> float:
  """A /proc/self/status memory field (VmRSS, VmHWM) in MB."""
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1]) / 1024
  raise KeyError(field)


def _run_child(spec: str) -> dict:
  """One configuration in this process; TensorFlow is imported only here."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import bert_tf  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from bert_tf.modeling import configs, encoder  # pylint: disable=g-import-not-at-top
  from bert_tf.tasks.classification.task import (  # pylint: disable=g-import-not-at-top
      ClassificationConfig, ClassificationTask)
  from bert_tf.training import loop, optimization  # pylint: disable=g-import-not-at-top

  preset, batch_size, seq, recompute = spec.split(":")
  batch_size, seq, recompute = int(batch_size), int(seq), bool(int(recompute))
  config = configs.preset(preset, vocab_size=30522)
  rng = np.random.default_rng(0)
  shape = (batch_size, seq)
  batch = {"input_word_ids": tf.constant(rng.integers(1000, config.vocab_size, shape), tf.int32),
           "input_mask": tf.ones(shape, tf.int32), "input_type_ids": tf.zeros(shape, tf.int32),
           "label_ids": tf.constant(rng.integers(0, 2, (batch_size, 1)), tf.int32)}
  task = ClassificationTask(ClassificationConfig(seq, labels=["0", "1"]))
  tf_keras.utils.set_random_seed(0)
  with encoder.recomputed_blocks(recompute):
    model = loop.without_autograph(task.build_model)(config)
  optimizer = optimization.create_optimizer(5e-5, 1000, 100)
  optimizer._create_all_weights(model.trainable_variables)  # pylint: disable=protected-access
  model_mb = _status_mb("VmRSS")

  def gradients(features):
    loss, _, grads = loop.accumulated_gradients(
        model, task.loss, features, loop.update_counts(task.loss_counts, features))
    return loss, grads
  gradients = tf.function(gradients, autograph=False)

  @tf.function(autograph=False)
  def step(features):
    loss, grads = gradients(features)
    optimizer.apply_gradients(
        (g, v) for g, v in zip(grads, model.trainable_variables) if g is not None)
    return loss

  for _ in range(FLAGS.warmup):
    float(step(batch))
  start = time.perf_counter()
  for _ in range(FLAGS.steps):
    float(step(batch))
  seconds = (time.perf_counter() - start) / FLAGS.steps
  return {"preset": preset, "batch": batch_size, "seq": seq, "recompute": recompute,
          "s_per_step": round(seconds, 2), "model_mb": round(model_mb),
          "peak_mb": round(_status_mb("VmHWM"))}


def main(argv):
  del argv
  if FLAGS.child:
    print(json.dumps(_run_child(FLAGS.child)), flush=True)
    return
  rows = []
  for size in FLAGS.sizes:
    for recompute in (0, 1):
      rows.append(child.run_json(
          [sys.executable, __file__, f"--child={size}:{recompute}", f"--warmup={FLAGS.warmup}",
           f"--steps={FLAGS.steps}"]))
  print("| configuration | peak MB off / on (ratio) | step's own MB off / on (ratio) | "
        "s a step off / on (ratio) |")
  for off, on in zip(rows[::2], rows[1::2]):
    own_off, own_on = off["peak_mb"] - off["model_mb"], on["peak_mb"] - on["model_mb"]
    print(f"| {off['preset']} batch {off['batch']} seq {off['seq']} | {off['peak_mb']} / "
          f"{on['peak_mb']} ({on['peak_mb'] / off['peak_mb']:.2f}) | {own_off} / {own_on} "
          f"({own_on / own_off:.2f}) | {off['s_per_step']} / {on['s_per_step']} "
          f"({on['s_per_step'] / off['s_per_step']:.2f}) |")


if __name__ == "__main__":
  app.run(main)
