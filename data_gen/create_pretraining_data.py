"""Raw text -> masked LM / next sentence TFRecords: google-research/bert's script, on all cores.

Same flags, defaults and record format as google-research/bert's create_pretraining_data.py,
plus --num_workers, --num_output_shards, the masking split (--mask_token_prob,
--random_token_prob) and --dynamic_masking (unmasked pairs, masked by run_pretraining
--dynamic_masking as it reads them). Streaming and deterministic; see
data_gen/pretraining_data/pipeline.py. Writes a stats file beside the output:
out/pretrain.tfrecord -> out/pretrain.stats.json.

  create_pretraining_data --input_file='corpus/*.txt' --output_file=out/pretrain.tfrecord \\
    --vocab_file=vocab.txt --num_output_shards=8

Several languages, sampled as multilingual BERT's (each language's share of the sentences to
the power S, renormalized; data_gen/pretraining_data/pipeline.py says why sentences):

  create_pretraining_data --input_file='en:corpus/en/*,de:corpus/de/*,sw:corpus/sw/*' \\
    --language_smoothing=0.7 --output_file=out/pretrain.tfrecord --vocab_file=vocab.txt

With --runner=NAME, the same job runs as an Apache Beam pipeline
(data_gen/pretraining_data/beam.py; `pip install -e '.[beam]'`), the other flags Beam's
pipeline options, and writes the same bytes:

  create_pretraining_data ... --runner=FnApiRunner --direct_num_workers=2 \\
    --direct_running_mode=multi_processing
"""
import contextlib
import sys

from absl import app
from absl import flags

from bert_tf.common import errors
from bert_tf.common import output_lock
from data_gen.jobs import corpus_files
from data_gen.jobs import languages
from data_gen.jobs import launch
from data_gen.jobs import outputs
from data_gen.pretraining_data.config import PretrainingDataConfig

# No TensorFlow at the top: the spawned workers re-import this module, and TensorFlow (imported
# by the tokenizer and the writer, in main) would cost each of them ~800 MB.

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files, globs allowed); "
                    "by language: en:corpus/en/*,de:corpus/de/* (see --language_smoothing). "
                    "A glob skips our jobs' *.stats.json and prepare_corpus's held-out files "
                    "(name one without wildcards to read it).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than the maximum length.")
flags.DEFINE_float("mask_token_prob", 0.8,
                   "Share of the chosen tokens replaced by [MASK] (the paper's Table 8).")
flags.DEFINE_float("random_token_prob", 0.1,
                   "Share of the chosen tokens replaced by a random token; the rest stay "
                   "unchanged.")
flags.DEFINE_bool("dynamic_masking", False,
                  "Write the sentence pairs unmasked, for run_pretraining --dynamic_masking, "
                  "which draws the masks afresh each time it reads a record (the masking "
                  "flags then go to run_pretraining).")
flags.DEFINE_float("language_smoothing", 1.0,
                   "For an --input_file by language: each language's share of the sentences "
                   "raised to this power and renormalized (multilingual BERT: 0.7); languages "
                   "then sub-sampled or repeated to those shares. 1: the corpus's own shares. "
                   "Other than 1, --input_file must name its languages.")
flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores).")
flags.DEFINE_integer("num_output_shards", None,
                     "Write this many shards <output_file>-0000i-of-0000N (one --output_file), "
                     "instances dealt round-robin; default: one per --output_file.")
flags.DEFINE_string("runner", None,
                    "Run as an Apache Beam pipeline on this runner (FnApiRunner, DataflowRunner, "
                    "FlinkRunner, SparkRunner, DaskRunner, ...), with the Beam pipeline options "
                    "given beside the flags; default: this machine's worker processes "
                    "(--num_workers). "
                    "DirectRunner runs as the FnApiRunner (it would download Prism).")

FLAGS = flags.FLAGS
PROGRAM = "create_pretraining_data"


def _config() -> PretrainingDataConfig:
  return PretrainingDataConfig(
      max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
      masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
      do_whole_word_mask=FLAGS.do_whole_word_mask, mask_token_prob=FLAGS.mask_token_prob,
      random_token_prob=FLAGS.random_token_prob, dynamic_masking=FLAGS.dynamic_masking,
      language_smoothing=FLAGS.language_smoothing)


def _input_files(inputs: list[languages.LanguageInput]
                 ) -> tuple[list[str] | dict[str, list[str]], list[corpus_files.Skipped]]:
  """--input_file's files, by language where it names languages (a file in two languages'
  globs is refused), and those its globs matched that are skipped (`jobs.corpus_files`: our
  jobs' stats, prepare_corpus's held-out files)."""
  if inputs[0].language is None:
    return corpus_files.list_files(inputs[0].patterns)
  by_language, seen, skipped = {}, {}, []
  for item in inputs:
    by_language[item.language], skipped_here = corpus_files.list_files(item.patterns)
    skipped += skipped_here
    for path in by_language[item.language]:
      if path in seen:
        raise ValueError(f"--input_file: {path} is in both {seen[path]} and {item.language}")
      seen[path] = item.language
  return by_language, skipped


def _generate(config: PretrainingDataConfig, inputs: list[languages.LanguageInput],
              launched: launch.Launch) -> tuple[dict, list[str]]:
  """The job (on Beam or the local workers, as launched): (stats, the shards written)."""
  # pylint: disable=g-import-not-at-top  (see the note above the flags)
  from bert_tf.tokenization import FullTokenizer
  from data_gen.pretraining_data import pipeline
  input_files, skipped = _input_files(inputs)
  if skipped:
    print(corpus_files.skipped_line(PROGRAM, skipped), flush=True)
  prefixes = [p.strip() for p in FLAGS.output_file.split(",") if p.strip()]
  output_files = outputs.shard_paths(prefixes, FLAGS.num_output_shards)
  output_lock.check_not_input(
      output_files + [outputs.stats_path(output_files[0])], "--output_file",
      [("--input_file", p) for item in inputs for p in item.patterns.split(",")] +
      [("--vocab_file", FLAGS.vocab_file)])
  tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
  with output_lock.lock_output_files(prefixes):
    if launched.options is not None:
      from data_gen.pretraining_data import beam
      return beam.create_pretraining_data(input_files, output_files, tokenizer, config,
                                          launched.options), output_files
    return pipeline.create_pretraining_data(input_files, output_files, tokenizer, config,
                                            launched.num_workers,
                                            workers=launched.workers), output_files


def main(argv):
  try:
    config = _config()  # bad settings fail here, before TensorFlow loads; and bad Beam options
    inputs = languages.parse_inputs(FLAGS.input_file)
    languages.check_smoothing_has_languages(inputs, config.language_smoothing)
    launched = launch.start(PROGRAM, FLAGS.runner, FLAGS.num_workers, argv[1:])
  except ValueError as e:
    sys.exit(f"{PROGRAM}: error: {e}")
  with errors.exit_on_user_error(PROGRAM), launched.workers or contextlib.nullcontext():
    stats, output_files = _generate(config, inputs, launched)
  from data_gen.pretraining_data import pipeline  # pylint: disable=g-import-not-at-top
  print(pipeline.summary(stats))
  print(f"wrote {len(output_files)} shard(s) ({output_files[0]}"
        f"{', ...' if len(output_files) > 1 else ''}); stats in "
        f"{outputs.stats_path(output_files[0])}")


def run():
  """The `create_pretraining_data` console script."""
  flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
  app.run(main, flags_parser=lambda argv: launch.parse_flags(FLAGS, argv, PROGRAM))


if __name__ == "__main__":
  run()
