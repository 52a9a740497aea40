"""Pretrains BERT (masked LM + next sentence prediction) on google-research/bert's records.

The original's flags, same names and meanings, plus: --distribution_strategy,
--mixed_precision, --jit_compile, --optimizer, --objective, --nsp, --seed. For example:

  run_pretraining --bert_config_file=bert_config.json --input_file='data/*.tfrecord' \
      --output_dir=/tmp/pretraining --do_train --do_eval --num_train_steps=20 \
      --num_warmup_steps=10 --learning_rate=2e-5

output_dir receives `ckpt-<step>` checkpoints (a re-run resumes from the latest), a copy of
bert_config.json beside them (so the checkpoints load as `--init_checkpoint` elsewhere),
TensorBoard summaries, and with --do_eval eval_results.txt.
"""
import functools
import os
import sys

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from bert_tf import checkpoints
from bert_tf import cli
from bert_tf import distribute
from bert_tf import optimization
from bert_tf import training
from bert_tf.configs import BertConfig
from bert_tf.modeling import pretrainer
from tfrecords import datasets
from tfrecords import schema

FLAGS = flags.FLAGS

# The original's flags.
flags.DEFINE_string("bert_config_file", None, "The config json file of the BERT model.")
flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model): ours, "
                    "google-research/bert's TF1 one, or a Hugging Face folder.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Must match the data file.", lower_bound=1)
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. "
                     "Must match the data file.", lower_bound=1)
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.", lower_bound=1)
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", lower_bound=1)
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.", lower_bound=1)
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.", lower_bound=0)
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.",
                     lower_bound=1)
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "How many steps to make in each device loop (and between log lines).",
                     lower_bound=1)
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.", lower_bound=1)
cli.define_accelerator_flags()
flags.DEFINE_enum("optimizer", "adamw", list(optimization.OPTIMIZERS),
                  "adamw (the paper's) or lamb (for large batches).")
flags.DEFINE_enum("objective", "mlm", list(pretrainer.OBJECTIVES),
                  "mlm (BERT) or ltr (left-to-right LM, the paper's ablation).")
flags.DEFINE_bool("nsp", True, "Train next sentence prediction too.")
flags.DEFINE_integer("seed", 12345, "Random seed: initialization, dropout and the order of the "
                     "input, so a resumed run reads on from exactly where it stopped.")

# Record features -> the flag that sets their length.
LENGTH_FLAGS = {"input_ids": "max_seq_length", "input_mask": "max_seq_length",
                "segment_ids": "max_seq_length", "masked_lm_positions": "max_predictions_per_seq",
                "masked_lm_ids": "max_predictions_per_seq",
                "masked_lm_weights": "max_predictions_per_seq"}


def check_records(files: list[str], features: list[schema.Feature]) -> None:
  """Raises ValueError when the first record of a file disagrees with the flags' lengths:
  parsing would fail later, deep inside the training loop, with a less helpful message."""
  for path in files:
    for serialized in tf.data.TFRecordDataset(path).take(1):
      example = tf.train.Example.FromString(serialized.numpy()).features.feature
      for f in features:
        if f.name not in example:
          raise ValueError(f"{path}: the records have no feature {f.name!r}")
        kind = example[f.name].WhichOneof("kind")
        length = len(getattr(example[f.name], kind).value)
        if length != f.length:
          flag = LENGTH_FLAGS.get(f.name)
          raise ValueError(f"{path}: feature {f.name!r} has length {length} in the records, "
                           f"but {f'--{flag}=' if flag else 'the layout says '}{f.length}")


def _model_fn(config: BertConfig):
  return functools.partial(pretrainer.build_pretrainer, config, FLAGS.max_seq_length,
                           FLAGS.max_predictions_per_seq, objective=FLAGS.objective,
                           nsp=FLAGS.nsp)


def _init_fn():
  if not FLAGS.init_checkpoint:
    return None
  def init(model):
    parts = checkpoints.load_into_pretrainer(model, FLAGS.init_checkpoint)
    logging.info("initialized %s from %s", ", ".join(parts), FLAGS.init_checkpoint)
  return init


def _train(strategy, config: BertConfig, loss_fn) -> None:
  def dataset_fn(ctx):
    return datasets.pretraining_dataset(FLAGS.input_file, FLAGS.max_seq_length,
                                        FLAGS.max_predictions_per_seq, FLAGS.train_batch_size,
                                        is_training=True, input_context=ctx, seed=FLAGS.seed)
  optimizer_fn = functools.partial(
      optimization.create_optimizer, FLAGS.learning_rate, FLAGS.num_train_steps,
      FLAGS.num_warmup_steps, optimizer=FLAGS.optimizer,
      loss_scaling=FLAGS.mixed_precision == "fp16")
  training.train(strategy, _model_fn(config), optimizer_fn, loss_fn, dataset_fn,
                 FLAGS.output_dir, FLAGS.num_train_steps,
                 steps_per_loop=FLAGS.iterations_per_loop,
                 save_checkpoints_steps=FLAGS.save_checkpoints_steps,
                 init_fn=_init_fn(), jit_compile=FLAGS.jit_compile)


def _evaluate(strategy, config: BertConfig, loss_fn, files: list[str]) -> None:
  def dataset_fn(ctx):
    # Whole batches only, as the original: one static shape for XLA and TPUs.
    return datasets.record_dataset(
        files, schema.pretraining_features(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq),
        FLAGS.eval_batch_size, is_training=False, input_context=ctx, drop_remainder=True)
  results = training.evaluate(strategy, _model_fn(config), loss_fn, dataset_fn,
                              FLAGS.output_dir, max_steps=FLAGS.max_eval_steps,
                              init_fn=_init_fn())
  if distribute.is_chief(strategy):
    path = os.path.join(FLAGS.output_dir, "eval_results.txt")
    training.write_eval_results(path, results)
    logging.info("***** Eval results *****\n%s",
                 "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))


def _write_config(config: BertConfig, output_dir: str) -> None:
  """bert_config.json beside the checkpoints, so that they load as an --init_checkpoint
  elsewhere. Refuses to replace another config that checkpoints were written with."""
  path = os.path.join(output_dir, "bert_config.json")
  if tf.train.latest_checkpoint(output_dir) and tf.io.gfile.exists(path):
    if BertConfig.from_json_file(path) != config:
      raise ValueError(f"{path}: the checkpoints in --output_dir were made with this config, "
                       f"which differs from --bert_config_file {FLAGS.bert_config_file}")
    return
  config.to_json_file(f"{path}.tmp-{os.getpid()}")
  tf.io.gfile.rename(f"{path}.tmp-{os.getpid()}", path, overwrite=True)


def pretrain() -> None:
  """Runs what the flags ask for; raises ValueError / FileNotFoundError / FloatingPointError
  with a message for the user."""
  if not FLAGS.do_train and not FLAGS.do_eval:
    raise ValueError("At least one of `do_train` or `do_eval` must be True.")
  config = BertConfig.from_json_file(FLAGS.bert_config_file)
  files = datasets.list_files(FLAGS.input_file)
  # Before anything runs a TF op: multi-worker collectives must be set up at startup.
  strategy = cli.strategy_from_flags()
  tf.random.set_seed(FLAGS.seed)  # After the strategy: multi-worker setup must come first.
  check_records(files, schema.pretraining_features(FLAGS.max_seq_length,
                                                   FLAGS.max_predictions_per_seq))
  training.set_mixed_precision(FLAGS.mixed_precision)
  tf.io.gfile.makedirs(FLAGS.output_dir)
  if distribute.is_chief(strategy):
    _write_config(config, FLAGS.output_dir)
  loss_fn = functools.partial(pretrainer.pretraining_loss, objective=FLAGS.objective,
                              nsp=FLAGS.nsp)
  if FLAGS.do_train:
    _train(strategy, config, loss_fn)
  if FLAGS.do_eval:
    _evaluate(strategy, config, loss_fn, files)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  try:
    pretrain()
  except (ValueError, FileNotFoundError, FloatingPointError) as e:
    sys.exit(f"run_pretraining: error: {e}")


def run():
  flags.mark_flags_as_required(["bert_config_file", "input_file", "output_dir"])
  app.run(main)


if __name__ == "__main__":
  run()
