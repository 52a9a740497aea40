"""Learns a WordPiece vocab.txt from a corpus, to pretrain BERT from scratch on one's own
text or language.

The corpus is split into words exactly as the tokenizer splits them (--do_lower_case must
match the one given to create_pretraining_data and the model's tasks later). The vocab has
[PAD] [UNK] [CLS] [SEP] [MASK] at ids 0..4, then --num_unused_tokens placeholders. CJK
characters and punctuation are whole tokens (data_gen/vocab.py).

A shared vocab over several languages, their word counts weighed as multilingual BERT's
(--language_smoothing; a language's share counts its sentences, as create_pretraining_data's),
--max_lines then per language:

  build_vocab --input_file='en:corpus/en/*,zh:corpus/zh/*' --language_smoothing=0.7 \
    --output_file=vocab.txt --vocab_size=119547 --nodo_lower_case

Writes the stats beside the vocab (vocab.txt -> vocab.stats.json): words, the [UNK] rate with
the learned vocab, and per language its shares, rate and [UNK] rate.

  build_vocab --input_file='corpus/*.txt' --output_file=vocab.txt --vocab_size=30522
"""
import collections
import sys

from absl import app
from absl import flags

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files, globs allowed); "
                    "by language: en:corpus/en/*,zh:corpus/zh/* (see --language_smoothing). "
                    "A glob skips our jobs' *.stats.json and prepare_corpus's held-out files "
                    "(name one without wildcards to read it).")
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
flags.DEFINE_integer("max_lines", 0, "Learn from the first this many lines only (0: all); of "
                     "each language, for an --input_file by language.")
flags.DEFINE_float("language_smoothing", 1.0,
                   "For an --input_file by language: each language's share of the sentences "
                   "raised to this power and renormalized (multilingual BERT: 0.7), its word "
                   "counts weighed to that share. 1: the corpus's own shares. Other than 1, "
                   "--input_file must name its languages.")

FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    sys.exit(f"build_vocab: error: unexpected arguments {' '.join(argv[1:])}")
  for name in ("vocab_size", "min_token_count", "max_token_length", "max_unique_chars"):
    if getattr(FLAGS, name) < 1:
      sys.exit(f"build_vocab: error: --{name} must be positive, got {getattr(FLAGS, name)}")
  from data_gen.jobs import languages  # pylint: disable=g-import-not-at-top  (no TensorFlow)
  try:
    inputs = languages.parse_inputs(FLAGS.input_file)
    languages.check_smoothing(FLAGS.language_smoothing)
    languages.check_smoothing_has_languages(inputs, FLAGS.language_smoothing)
  except ValueError as e:
    sys.exit(f"build_vocab: error: {e}")
  # pylint: disable=g-import-not-at-top  (TensorFlow loads only for valid flags)
  from bert_tf.common import errors, output_lock
  from bert_tf.tokenization import FullTokenizer
  from data_gen import vocab
  from data_gen.jobs import corpus_files, outputs
  stats_file = outputs.stats_path(FLAGS.output_file)
  with errors.exit_on_user_error("build_vocab"):
    output_lock.check_not_input([FLAGS.output_file, stats_file], "--output_file",
                                [("--input_file", p) for item in inputs
                                 for p in item.patterns.split(",")])
    listed = {item.language: corpus_files.list_files(item.patterns) for item in inputs}
    files = {language: kept for language, (kept, _) in listed.items()}
    skipped = [s for _, language_skipped in listed.values() for s in language_skipped]
    if skipped:
      print(corpus_files.skipped_line("build_vocab", skipped), flush=True)
    counted = {language: vocab.count_language(paths, FLAGS.do_lower_case, FLAGS.max_lines)
               for language, paths in files.items()}
    counts = {language: words for language, (words, _) in counted.items()}
    unweighed = sum(counts.values(), collections.Counter())
    sampling = None
    if None in counts:
      word_counts = counts[None]
    else:
      sampling = languages.smoothed_shares(
          {language: sentences for language, (_, sentences) in counted.items()},
          FLAGS.language_smoothing)
      word_counts = vocab.weigh_languages(
          counts, {language: shares["rate"] for language, shares in sampling.items()})
    if not word_counts:
      raise ValueError(f"no words in --input_file {FLAGS.input_file}")
    words = sum(sum(c.values()) for c in counts.values())
    print(f"{words} words ({len(word_counts)} distinct) in "
          f"{sum(map(len, files.values()))} file(s); learning...", flush=True)
    tokens = vocab.learn_vocab(
        word_counts, FLAGS.vocab_size, num_unused=FLAGS.num_unused_tokens,
        min_token_count=FLAGS.min_token_count, max_token_length=FLAGS.max_token_length,
        max_unique_chars=FLAGS.max_unique_chars, do_lower_case=FLAGS.do_lower_case,
        unweighed_counts=unweighed)
    vocab.write_vocab(tokens, FLAGS.output_file)
    tokenizer = FullTokenizer(FLAGS.output_file, do_lower_case=FLAGS.do_lower_case)
    stats = {"files": sum(map(len, files.values())), "words": words,
             "distinct_words": len(word_counts), "tokens": len(tokens),
             "unk_rate": vocab.unk_rate(unweighed, tokenizer)}
    if sampling is not None:
      stats["languages"] = {
          language: {**sampling[language], "sentences": counted[language][1],
                     "words": sum(counts[language].values()),
                     "distinct_words": len(counts[language]),
                     "unk_rate": vocab.unk_rate(counts[language], tokenizer)}
          for language in counts}
    outputs.write_json(stats_file, stats)
  print(f"wrote {len(tokens)} tokens to {FLAGS.output_file} ([UNK] {stats['unk_rate']:.2%} of "
        f"the corpus's tokens; stats in {stats_file})")
  for language, s in stats.get("languages", {}).items():
    print(f"  {language}: share of sentences {s['raw_share']:.1%} -> weighed "
          f"{s['sampled_share']:.1%}, [UNK] {s['unk_rate']:.2%}")


def run():
  """The `build_vocab` console script."""
  flags.mark_flags_as_required(["input_file", "output_file"])
  app.run(main)


if __name__ == "__main__":
  run()
