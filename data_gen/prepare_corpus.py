"""Wikipedia dumps, WikiExtractor output, books, paragraphs -> create_pretraining_data's input.

One sentence a line, a blank line between documents, UTF-8; one article (or book, or document)
a document. Streaming, on all cores, deterministic: the same inputs give the same shards
whatever --num_workers, and on Beam (--runner). See data_gen/corpus/pipeline.py.

  prepare_corpus --input_file=enwiki-latest-pages-articles-multistream.xml.bz2 \\
    --output_file=corpus/wiki.txt --num_output_shards=100 --holdout_fraction=0.001
  create_pretraining_data --input_file='corpus/wiki.txt-*' ...

Writes the training shards <output_file>-0000i-of-0000N, the held-out documents beside them
(corpus/wiki.holdout.txt) and the stats (corpus/wiki.stats.json).
"""
import contextlib
import sys

from absl import app
from absl import flags

from bert_tf.common import errors
from bert_tf.common import files
from bert_tf.common import output_lock
from data_gen.corpus import pipeline
from data_gen.corpus import sentences
from data_gen.corpus.config import SOURCES, CorpusConfig
from data_gen.jobs import launch
from data_gen.jobs import outputs

# No TensorFlow, here or in what this imports: the spawned workers re-import this module, and
# the main process has no use for it either.

flags.DEFINE_string("input_file", None,
                    "Input files (comma-separated, globs allowed): Wikipedia XML dumps (.xml, "
                    ".xml.bz2; a multistream dump's index is found beside it), WikiExtractor "
                    "output, books, or paragraph files. With --runner, on any of Beam's file "
                    "systems (gs://, s3://...).")
flags.DEFINE_string("output_file", None,
                    "Output prefix: the shards are <output_file>-0000i-of-0000N (or the file "
                    "itself without --num_output_shards).")
flags.DEFINE_enum("source", "auto", SOURCES,
                  "The inputs' kind; auto: detected per file from its first bytes.")
flags.DEFINE_string("language", None,
                    "The text's language code (de, zh, zh-yue). Default: a Wikipedia dump's "
                    "<siteinfo> says (xml:lang, dbname); en for other sources. A dump's files "
                    "and categories are hidden under this language's names and aliases, the "
                    "dump's <siteinfo> names and the English ones.")
flags.DEFINE_enum("sentence_splitter", sentences.DEFAULT, sentences.NAMES,
                  "The sentence segmenter (data_gen/corpus/sentences.py); auto: the "
                  "language's best measured (nupunkt for en, punkt for zh, ja, de; th, with "
                  "no sentence punctuation, keeps one paragraph a line).")
flags.DEFINE_integer("num_output_shards", None, "Training shards to write.")
flags.DEFINE_float("holdout_fraction", 0.0,
                   "Share of the documents held out for evaluation (chosen by a hash of their "
                   "identity), written to <output_file's stem>.holdout<ext> (with "
                   "--num_holdout_shards=M > 1, its shards -0000i-of-0000M).")
flags.DEFINE_integer("num_holdout_shards", 1, "Held-out shards to write.")
flags.DEFINE_integer("min_sentences", 1, "Drop documents with fewer sentences.")
flags.DEFINE_integer("min_words", 0, "Drop documents with fewer words.")
flags.DEFINE_bool("dedup", False, "Drop documents whose exact text an earlier one has.")
flags.DEFINE_float("page_time_limit", 60.0,
                   "CPU seconds a Wikipedia page may take to parse; longer ones are skipped "
                   "and counted (0: no limit).")
flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores).")
flags.DEFINE_string("runner", None,
                    "Run as an Apache Beam pipeline on this runner, with the Beam pipeline "
                    "options given beside the flags (as create_pretraining_data).")

FLAGS = flags.FLAGS
PROGRAM = "prepare_corpus"


def _config() -> CorpusConfig:
  return CorpusConfig(
      source=FLAGS.source, language=FLAGS.language,
      sentence_splitter=FLAGS.sentence_splitter,
      num_output_shards=FLAGS.num_output_shards, holdout_fraction=FLAGS.holdout_fraction,
      num_holdout_shards=FLAGS.num_holdout_shards, min_sentences=FLAGS.min_sentences,
      min_words=FLAGS.min_words, dedup=FLAGS.dedup, page_time_limit=FLAGS.page_time_limit)


def _input_files(on_beam: bool) -> list[str]:
  """--input_file's files; on Beam, a pattern of another file system (gs://...) matched by
  Beam's file systems, which its workers read."""
  if not on_beam:
    return files.list_files(FLAGS.input_file)
  from data_gen.jobs import beam_files  # pylint: disable=g-import-not-at-top  (an extra)
  return files.list_files(FLAGS.input_file, beam_files.input_file_system)


def _run(config: CorpusConfig, launched: launch.Launch) -> dict:
  """The job (on Beam or the local workers, as launched): its stats."""
  input_files = _input_files(launched.options is not None)
  train, holdout = pipeline.output_paths(FLAGS.output_file, config)
  output_lock.check_not_input(
      train + holdout + [outputs.stats_path(FLAGS.output_file)],
      "--output_file", [("--input_file", p) for p in FLAGS.input_file.split(",")])
  with output_lock.lock_output_files([FLAGS.output_file]):
    if launched.options is not None:
      from data_gen.corpus import beam  # pylint: disable=g-import-not-at-top  (an extra)
      return beam.prepare_corpus(input_files, FLAGS.output_file, config, launched.options)
    return pipeline.prepare_corpus(input_files, FLAGS.output_file, config,
                                   launched.num_workers, workers=launched.workers)


def main(argv):
  try:
    config = _config()
    launched = launch.start(PROGRAM, FLAGS.runner, FLAGS.num_workers, argv[1:])
  except ValueError as e:
    sys.exit(f"{PROGRAM}: error: {e}")
  with errors.exit_on_user_error(PROGRAM), launched.workers or contextlib.nullcontext():
    stats = _run(config, launched)
  print(pipeline.summary(stats))
  print(f"wrote {len(stats['output_files'])} file(s) ({next(iter(stats['output_files']))}"
        f"{', ...' if len(stats['output_files']) > 1 else ''}); stats in "
        f"{outputs.stats_path(FLAGS.output_file)}")


def run():
  """The `prepare_corpus` console script."""
  flags.mark_flags_as_required(["input_file", "output_file"])
  app.run(main, flags_parser=lambda argv: launch.parse_flags(FLAGS, argv, PROGRAM))


if __name__ == "__main__":
  run()
