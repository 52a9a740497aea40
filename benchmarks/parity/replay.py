"""The paired replay that squad.py and ner.py share: bert_tf's training step compared number for
number with a Hugging Face peer's (hf_peer.replay_steps), so that a quality gap can be told
apart from seed noise.

Kind: the paired replay's library (benchmarks/parity/), imported by benchmarks/runs/glue.py,
ner.py and squad.py (their --replay_file), never run; the peers' half is
benchmarks/peers/hf_peer.replay_steps.

The first K batches of the real run's training stream (shuffled by its seed, epochs in a new
order each, each batch as the runner cuts it), the real run's learning-rate schedule, dropout
off unless asked: trains them, writes the batches and the head's initial kernel and bias to an
.npz, and returns the loss of every step. The peer starts from the same weights, takes the same
batches and prints its losses: equal implementations agree to float32 noise. With dropout kept
(both sides) the steps differ only in the dropout masks. With K the real run's steps and each
side scoring its replayed model, it is a paired comparison of the whole recipe in which nothing
random differs but the dropout masks.
"""
import dataclasses
from typing import Callable

from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf.finetuning import runner
from bert_tf.training import loop
from bert_tf.training import optimization


def define_flags() -> None:
  flags.DEFINE_string("replay_file", None, "Write the replay batches and head weights here "
                      "(.npz) and print the loss of each of --replay_steps steps.")
  flags.DEFINE_integer("replay_steps", 10, "Steps of the replay.")
  flags.DEFINE_bool("replay_dropout", False, "Keep the model's dropout in the replay.")
  flags.DEFINE_bool("replay_eval", False, "Score the replayed model.")


def run_args(output_dir: str, **extra) -> runner.RunArgs:
  """The RunArgs of squad.py's and ner.py's recipe, from their common flags (init_checkpoint,
  train_batch_size, predict_batch_size, learning_rate, num_train_epochs, warmup_proportion,
  seed, iterations_per_loop), with `extra` RunArgs fields; no checkpoint before the end."""
  FLAGS = flags.FLAGS
  return runner.RunArgs(
      output_dir=output_dir, init_checkpoint=FLAGS.init_checkpoint, do_train=True,
      do_eval=True, do_predict=True, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.predict_batch_size, predict_batch_size=FLAGS.predict_batch_size,
      learning_rates=(FLAGS.learning_rate,), num_train_epochs=FLAGS.num_train_epochs,
      warmup_proportion=FLAGS.warmup_proportion, seed=FLAGS.seed,
      iterations_per_loop=FLAGS.iterations_per_loop, save_checkpoints_steps=100000, **extra)


def replay(run: runner.Runner, head: Callable[[tf_keras.Model], tf_keras.layers.Layer],
           learning_rate: float, num_steps: int, path: str, dropout: bool,
           **extra: np.ndarray) -> list[float]:
  """Trains num_steps steps of the run's training stream in run's output_dir (its last
  checkpoint is the replayed model) and writes the batches, head(model)'s initial kernel and
  bias and `extra` to path; returns the loss of each step."""
  args, task = run.args, run.task
  batch_size = args.train_batch_size
  [records] = run.write_records("train", batch_size)
  batches = list(run.dataset(records, batch_size, True, args.seed).take(num_steps)
                 .as_numpy_iterator())
  total_steps = int(records.num_features / batch_size * args.num_train_epochs)
  bert_config = run.bert_config if dropout else dataclasses.replace(
      run.bert_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  # The peer takes a batch given as micro-batches (`datasets.sorted_micro_batches`) whole.
  saved = {f"{name}_{i}": value for i, b in enumerate(batches)
           for name, value in merged(b, task.config.max_seq_length).items()}

  def init_fn(model):
    run.init_fn(model)
    kernel, bias = head(model).get_weights()
    saved.update(head_kernel=kernel, head_bias=bias)

  # One batch per element: the batches keep the lengths the runner cut them to.
  def dataset_fn(ctx):
    del ctx
    return tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=tf.nest.map_structure(
            lambda v: tf.TensorSpec([None] * v.ndim, v.dtype), batches[0]))

  loop.train(
      run.strategy, lambda: task.build_model(bert_config),
      lambda: optimization.create_optimizer(learning_rate, total_steps,
                                             int(total_steps * args.warmup_proportion)),
      task.loss, dataset_fn, args.output_dir, num_steps, steps_per_loop=1,
      save_checkpoints_steps=num_steps, init_fn=init_fn, count_fn=task.loss_counts)
  np.savez(path, num_steps=num_steps, total_steps=total_steps, **saved, **extra)
  return [round(float(tf.make_ndarray(value.tensor)), 5)
          for events in tf.io.gfile.glob(f"{args.output_dir}/events.out.tfevents.*")
          for event in tf.compat.v1.train.summary_iterator(events)
          for value in event.summary.value if value.tag == "loss"]


def merged(batch: dict | tuple[dict, ...], sequence_length: int) -> dict:
  """A batch, or the micro-batches of one, as one dict: the parts' per-token features (those
  as wide as a part's input_mask: one sequence a record) padded with zeros to
  sequence_length, then the parts concatenated."""
  if isinstance(batch, dict):
    return batch
  def padded(part: dict) -> dict:
    width = part["input_mask"].shape[1]
    return {k: np.pad(v, [(0, 0), (0, sequence_length - width)])
            if v.ndim == 2 and v.shape[1] == width else v for k, v in part.items()}
  parts = [padded(part) for part in batch]
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def scores(run: runner.Runner, modes: tuple[str, ...]) -> dict:
  """The runner's own metrics of the replayed model (output_dir's last checkpoint) on the
  splits of these modes: the first split's as `<metric>`, others' as `<split>_<metric>`."""
  model, _ = run.restore()
  records = [r for mode in modes for r in run.write_records(mode, run.args.eval_batch_size)]
  return {k[len("eval_"):]: round(v, 4) if isinstance(v, float) else v
          for k, v in run.evaluate(model, records).items()}
