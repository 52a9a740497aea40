"""Exports a model as a SavedModel: a fine-tuned one for TF Serving, or any pre-trained
checkpoint as TF Hub's BERT encoder and preprocessor.

  export_saved_model --model_dir=/tmp/mrpc --export_dir=/tmp/mrpc_serving --data_dir=glue/MRPC

writes /tmp/mrpc_serving/<next version>/ (see `export.saved_model`): the task's
`serving_default` signature on raw text (a classifier: text_a and text_b -> label and
probabilities; SQuAD: question and context -> answer), the vocabulary as an asset, and warm-up
requests from the first eval examples of --data_dir.

  export_saved_model --format=tf_hub --init_checkpoint=uncased_L-12_H-768_A-12 \\
      --export_dir=/tmp/bert_hub

writes /tmp/bert_hub/encoder/ and /tmp/bert_hub/preprocessor/ (see `export.tf_hub`): the
Reusable SavedModels that `tensorflow_hub.KerasLayer` loads, from any checkpoint
--init_checkpoint reads (ours, google-research/bert's, Hugging Face's, a TF Hub encoder), with
its masked-LM head as the encoder's `mlm` when the checkpoint has one.

  export_saved_model --format=huggingface --init_checkpoint=/tmp/mrpc --export_dir=/tmp/mrpc_hf

writes /tmp/mrpc_hf/ (see `export.huggingface`): a transformers folder (config.json,
model.safetensors, vocab.txt, tokenizer_config.json) that `from_pretrained` loads, of the class
the checkpoint is: a run_* output_dir its task's BertFor..., a pretraining checkpoint
BertForPreTraining (BertForMaskedLM without NSP), an encoder alone BertModel.
"""

from absl import flags

from bert_tf.scripts import cli
from export import huggingface
from export import saved_model
from export import tf_hub

FLAGS = flags.FLAGS

FORMATS = ("tf_serving", "tf_hub", "huggingface")

flags.DEFINE_enum("format", "tf_serving", list(FORMATS),
                  "tf_serving: a fine-tuned run's task model (--model_dir) for TF Serving; "
                  "tf_hub: a pre-trained checkpoint (--init_checkpoint) as TF Hub's BERT "
                  "encoder and preprocessor SavedModels, <export_dir>/encoder and "
                  "<export_dir>/preprocessor; huggingface: any checkpoint (--init_checkpoint: "
                  "a run_* output_dir, a pretraining checkpoint...) as a transformers folder, "
                  "--export_dir, with its task's head.")
flags.DEFINE_string("model_dir", None, "--format=tf_serving: a run_* script's --output_dir: "
                    "holds the checkpoints, bert_config.json, vocab.txt and task_config.json.")
flags.DEFINE_string("export_dir", None, "TF Serving's model base path: the SavedModel goes to "
                    "<export_dir>/<1 + the largest version there>/. With --format=tf_hub: the "
                    "folder for encoder/ and preprocessor/ (neither may exist yet); with "
                    "--format=huggingface: the folder itself (which may not exist yet).")
flags.DEFINE_string("checkpoint", None, "A checkpoint prefix to export instead of the latest "
                    "in --model_dir.")
flags.DEFINE_string("data_dir", None, "[Optional] The task's data (run_classifier's --data_dir, "
                    "run_squad's --predict_file): its first eval examples become the warm-up "
                    "requests (else built-in sample texts).")
flags.DEFINE_string("model_name", "bert", "The model name in the warm-up requests (TF "
                    "Serving's --model_name).")
# --format=tf_hub: --init_checkpoint and what goes with it; --max_seq_length is the
# preprocessor's sequence length.
cli.define_model_flags(max_seq_length=128)

# The flags that only one format reads.
_OWN_FLAGS = {"tf_serving": ("model_dir", "checkpoint", "data_dir", "model_name"),
              "tf_hub": ("init_checkpoint", "bert_config_file", "vocab_file", "do_lower_case",
                         "max_seq_length"),
              "huggingface": ("init_checkpoint", "bert_config_file", "vocab_file",
                              "do_lower_case")}


def main() -> str:
  """The exported path(s)."""
  required = {"tf_serving": "model_dir"}.get(FLAGS.format, "init_checkpoint")
  if not FLAGS[required].value:
    raise ValueError(f"--format={FLAGS.format} needs --{required}")
  others = [name for names in _OWN_FLAGS.values() for name in names
            if name not in _OWN_FLAGS[FLAGS.format] and FLAGS[name].present]
  if others:
    raise ValueError(f"--{others[0]} is not read with --format={FLAGS.format}")
  if FLAGS.format == "huggingface":
    return huggingface.export(
        FLAGS.init_checkpoint, FLAGS.export_dir, FLAGS.bert_config_file, FLAGS.vocab_file,
        FLAGS.do_lower_case)
  if FLAGS.format == "tf_hub":
    paths = tf_hub.export(FLAGS.init_checkpoint, FLAGS.export_dir, FLAGS.bert_config_file,
                          FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length)
    return "\n".join(f"{name}: {path}" for name, path in paths.items())
  return saved_model.export_from_output_dir(FLAGS.model_dir, FLAGS.export_dir,
                                            data=FLAGS.data_dir, checkpoint=FLAGS.checkpoint,
                                            model_name=FLAGS.model_name)


def run():
  """The `export_saved_model` console script."""
  cli.run_main("export_saved_model", main, ["export_dir"])


if __name__ == "__main__":
  run()
