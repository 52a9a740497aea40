r"""Pretrains BERT (masked LM + next sentence prediction) on google-research/bert's records.

The original's flags, same names and meanings, plus: --distribution_strategy,
--mixed_precision, --jit_compile, --optimizer, --objective, --nsp, --seed, and
--dynamic_masking (with --vocab_file and create_pretraining_data's masking flags) for records
made with create_pretraining_data --dynamic_masking, --stop_at_step and --continue_from (the
paper's two phases on one schedule), and --pack_sequences (several records a row, the same
records and model: no compute on padding). For example:

  run_pretraining --bert_config_file=bert_config.json --input_file='data/*.tfrecord' \
      --output_dir=/tmp/pretraining --do_train --do_eval --num_train_steps=20 \
      --num_warmup_steps=10 --learning_rate=2e-5

The paper's two phases: phase 1 at 128 stops at 90% of the one schedule, phase 2 at 512 goes
on from it to the total ($RUN: the flags both share, --learning_rate, --num_warmup_steps...):

  run_pretraining $RUN --input_file='out128/*' --output_dir=phase1 --max_seq_length=128 \
      --max_predictions_per_seq=20 --num_train_steps=1000000 --stop_at_step=900000
  run_pretraining $RUN --input_file='out512/*' --output_dir=phase2 --max_seq_length=512 \
      --max_predictions_per_seq=80 --num_train_steps=1000000 --continue_from=phase1

See `bert_tf.training.pretraining` for what output_dir receives.
"""
from absl import flags

from bert_tf.common import output_lock
from bert_tf.modeling import pretrainer
from bert_tf.scripts import cli
from bert_tf.training import optimization
from bert_tf.training import pretraining
from tfrecords import packing

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. "
                     "Must match the data file.", lower_bound=1)
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.", lower_bound=1)
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.", lower_bound=0)
flags.DEFINE_integer("stop_at_step", None,
                     "Stop training at this global step, the learning rate's schedule still "
                     "over --num_train_steps (phase 1 of the paper's two: "
                     "--num_train_steps=1000000 --stop_at_step=900000). A re-run with a larger "
                     "one, or none, trains on.", lower_bound=1)
flags.DEFINE_string("continue_from", None,
                    "Phase 2 of the paper's two: a run_pretraining --output_dir (its latest "
                    "checkpoint) or one of its ckpt-N to go on from, in a new --output_dir: "
                    "the model, optimizer state and global step, on this run's records (e.g. "
                    "--max_seq_length=512 --max_predictions_per_seq=80). --learning_rate, "
                    "--num_warmup_steps, --optimizer and --num_train_steps (the total: "
                    "phase 1 stopped short of it by --stop_at_step) must be that run's. For weights only and a schedule of its "
                    "own, give it as --init_checkpoint instead.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.", lower_bound=1)
flags.DEFINE_enum("optimizer", "adamw", list(optimization.OPTIMIZERS),
                  "adamw (the paper's) or lamb (for large batches).")
flags.DEFINE_enum("objective", "mlm", list(pretrainer.OBJECTIVES),
                  "mlm (BERT) or ltr (left-to-right LM, the paper's ablation).")
flags.DEFINE_bool("nsp", True, "Train next sentence prediction too.")
flags.DEFINE_bool("dynamic_masking", False, "The records hold no masked LM targets "
                  "(create_pretraining_data --dynamic_masking): draw them afresh each time a "
                  "record is read, by the rules of the flags below (create_pretraining_data's).")
flags.DEFINE_string("vocab_file", None, "With --dynamic_masking: the vocabulary the records "
                    "were made with.")
flags.DEFINE_float("masked_lm_prob", 0.15, "With --dynamic_masking: masked LM probability.")
flags.DEFINE_bool("do_whole_word_mask", False, "With --dynamic_masking: mask whole words.")
flags.DEFINE_float("mask_token_prob", 0.8, "With --dynamic_masking: of the chosen tokens, the "
                   "share shown as [MASK] (the paper's Table 8).")
flags.DEFINE_float("random_token_prob", 0.1, "With --dynamic_masking: of the chosen tokens, "
                   "the share shown as a random token; the rest stay themselves.")
flags.DEFINE_bool("pack_sequences", False,
                  "Train on rows that each hold up to --max_sequences_per_pack records, packed "
                  "from the records as they are (no regeneration): no compute on the padding "
                  "this removes, the same model (each record attends to itself, positions "
                  "and next-sentence prediction its own; the checkpoints are any run's). "
                  "--train_batch_size then counts rows (the static shape, memory and update) "
                  "and --num_train_steps updates: a step holds ~k records a row, k the progress "
                  "lines' sequences_per_second / examples_per_second; for the paper's batch "
                  "of records give train_batch_size / k (Graphcore's convention; not "
                  "MLPerf's, where a step holds a fixed count of records: under static shapes "
                  "a row's records vary). --do_eval evaluates unpacked.")
flags.DEFINE_integer("max_sequences_per_pack", packing.DEFAULT_SEQUENCES_PER_PACK,
                     "With --pack_sequences: the most records a row holds (at least 2).")
flags.DEFINE_integer("max_predictions_per_pack", None,
                     "With --pack_sequences: the masked LM slots of a row, each a projection "
                     "onto the vocabulary (from --max_predictions_per_seq to it x "
                     "--max_sequences_per_pack). Default: the most the original's masking rule "
                     "at --masked_lm_prob puts in a row, floor(max_seq_length x "
                     "masked_lm_prob + max_sequences_per_pack / 2), at least "
                     "--max_predictions_per_seq (20 at 128 and 0.15, 80 at 512); a pack "
                     "holding more is split.")
flags.DEFINE_integer("packing_buffer", packing.DEFAULT_BUFFER_SIZE,
                     "With --pack_sequences: records packed together (more pack fuller).",
                     lower_bound=1)
cli.define_model_flags(max_seq_length=128, fine_tuning=False)
cli.define_training_flags(fine_tuning=False)
cli.define_accelerator_flags()


def main() -> dict:
  args = cli.args_from_flags(pretraining.PretrainArgs)
  output_lock.check_not_input([args.output_dir], "--output_dir",
                              [("--input_file", p) for p in FLAGS.input_file.split(",")],
                              folder=True)
  # Before anything runs a TF op: multi-worker collectives must be set up at startup.
  strategy = cli.strategy_from_flags()
  return pretraining.pretrain(args, strategy)


def run():
  cli.run_main("run_pretraining", main, ["bert_config_file", "input_file", "output_dir"])


if __name__ == "__main__":
  run()
