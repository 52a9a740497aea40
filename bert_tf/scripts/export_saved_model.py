"""Exports a fine-tuned model (run_classifier, run_squad, ...) as a SavedModel for TF Serving.

  export_saved_model --model_dir=/tmp/mrpc --export_dir=/tmp/mrpc_serving --data_dir=glue/MRPC

writes /tmp/mrpc_serving/<next version>/ (see `export.saved_model`): the task's
`serving_default` signature on raw text (a classifier: text_a and text_b -> label and
probabilities; SQuAD: question and context -> answer), the vocabulary as an asset, and warm-up
requests from the first eval examples of --data_dir.
"""

from absl import flags

from bert_tf.scripts import cli
from export import saved_model

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "A run_* script's --output_dir: holds the checkpoints, "
                    "bert_config.json, vocab.txt and task_config.json.")
flags.DEFINE_string("export_dir", None, "TF Serving's model base path: the SavedModel goes to "
                    "<export_dir>/<1 + the largest version there>/.")
flags.DEFINE_string("checkpoint", None, "A checkpoint prefix to export instead of the latest "
                    "in --model_dir.")
flags.DEFINE_string("data_dir", None, "[Optional] The task's data (run_classifier's --data_dir, "
                    "run_squad's --predict_file): its first eval examples become the warm-up "
                    "requests (else built-in sample texts).")
flags.DEFINE_string("model_name", "bert", "The model name in the warm-up requests (TF "
                    "Serving's --model_name).")


def main() -> str:
  """The new version's path."""
  return saved_model.export_from_output_dir(FLAGS.model_dir, FLAGS.export_dir,
                                            data=FLAGS.data_dir, checkpoint=FLAGS.checkpoint,
                                            model_name=FLAGS.model_name)


def run():
  """The `export_saved_model` console script."""
  cli.run_main("export_saved_model", main, ["model_dir", "export_dir"])


if __name__ == "__main__":
  run()
