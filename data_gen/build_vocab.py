"""Learns a WordPiece vocab.txt from a corpus, to pretrain BERT from scratch on one's own
text or language.

The corpus is split into words exactly as the tokenizer splits them (--do_lower_case must
match the one given to create_pretraining_data and the model's tasks later). The vocab has
[PAD] [UNK] [CLS] [SEP] [MASK] at ids 0..4, then --num_unused_tokens placeholders.

  build_vocab --input_file='corpus/*.txt' --output_file=vocab.txt --vocab_size=30522
"""
import sys

from absl import app
from absl import flags

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files, globs allowed).")
flags.DEFINE_string("output_file", None, "The vocab.txt to write (one token a line).")
flags.DEFINE_integer("vocab_size", 30522, "The most tokens the vocab may hold, reserved "
                     "ones included; the learner aims within 5% under it.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text (and strip accents). Should be True "
                  "for uncased models and False for cased models.")
flags.DEFINE_integer("num_unused_tokens", 0,
                     "Placeholders [unused0] ... after the special tokens, for tokens added "
                     "later without resizing the model.")
flags.DEFINE_integer("min_token_count", 10,
                     "No piece occurring fewer times than this is learned (a small corpus "
                     "then gives a smaller vocab).")
flags.DEFINE_integer("max_token_length", 50, "Words longer than this are not learned from.")
flags.DEFINE_integer("max_unique_chars", 1000,
                     "The alphabet: words with characters outside the most frequent this "
                     "many are not learned from.")
flags.DEFINE_integer("max_lines", 0, "Learn from the first this many lines only (0: all).")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"build_vocab: error: unexpected arguments {' '.join(argv[1:])}")
  for name in ("vocab_size", "min_token_count", "max_token_length", "max_unique_chars"):
    if getattr(FLAGS, name) < 1:
      sys.exit(f"build_vocab: error: --{name} must be positive, got {getattr(FLAGS, name)}")
  # pylint: disable=g-import-not-at-top  (TensorFlow loads only for valid flags)
  from bert_tf.common import errors, output_lock
  from bert_tf.common.files import list_files
  from data_gen import vocab
  with errors.exit_on_user_error("build_vocab"):
    output_lock.check_not_input([FLAGS.output_file], "--output_file",
                                [("--input_file", p) for p in FLAGS.input_file.split(",")])
    files = list_files(FLAGS.input_file)
    word_counts = vocab.count_words(files, FLAGS.do_lower_case, FLAGS.max_lines)
    if not word_counts:
      raise ValueError(f"no words in --input_file {FLAGS.input_file}")
    print(f"{sum(word_counts.values())} words ({len(word_counts)} distinct) in {len(files)} "
          f"file(s); learning...", flush=True)
    tokens = vocab.learn_vocab(
        word_counts, FLAGS.vocab_size, num_unused=FLAGS.num_unused_tokens,
        min_token_count=FLAGS.min_token_count, max_token_length=FLAGS.max_token_length,
        max_unique_chars=FLAGS.max_unique_chars)
    vocab.write_vocab(tokens, FLAGS.output_file)
  print(f"wrote {len(tokens)} tokens to {FLAGS.output_file}")


def run():
  """The `build_vocab` console script."""
  flags.mark_flags_as_required(["input_file", "output_file"])
  app.run(main)


if __name__ == "__main__":
  run()
