r"""Does multilingual.md's smoothing do what it says? A small BERT pretrained on four languages
of very unequal size at S=1.0 and at S=0.7, then scored by held-out masked-LM accuracy in each
language.

Kind: a run of our product (benchmarks/runs/), on $BERT_TF_DATA (../shared/data); no peer.

The corpus is language_sampling.py's (English, two Gutenberg novels and a Wikipedia sample,
~43x each of German, Spanish and French, XNLI dev's premises; shares in sentences) and its
vocab: build_vocab's shared uncased 8,000 tokens weighed at S=0.7, one vocab for both S, so
that the sampling is the only difference. For each S and seed: create_pretraining_data by
language at that S (the seed its random_seed too: which English documents a sub-sampling rate
keeps), then the demo's small BERT (L=2, H=128, 2 heads; sequence 64, 10 predictions, batch
32, 100 warm-up steps, lr 2e-3 unless --learning_rate) for --num_train_steps, MLM + NSP. The
held-out text: XNLI dev's hypotheses (each once), the same sentences in each language (none of them
pretraining text; written about the premises, so in the small languages' domain, outside
English's), made into records per language without smoothing (dupe_factor 5, one seed for
all models), each scored with run_pretraining's evaluation (--do_eval, the pretrained run as
--init_checkpoint).

Prints a table: per S and seed the masked-LM accuracy in each language, the mean over the
seeds per S, and the mean's difference S=0.7 - S=1.0; then each run's seconds.

  BERT_TF_DATA=../shared/data PYTHONPATH=. TF_CPP_MIN_LOG_LEVEL=2 \
    .venv/bin/python -m benchmarks.runs.language_pretraining --num_train_steps=3000
"""
import os
import shutil
import statistics
import sys
import time

from absl import app
from absl import flags

import demo  # the demo's small BERT: its config, sequence length and predictions
from benchmarks import data_root
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder
from benchmarks.runs import language_sampling  # the corpus and its shared vocab
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import distribute
from bert_tf.training import pretraining
from data_gen import vocab
from data_gen.jobs.outputs import shard_paths
from data_gen.pretraining_data import pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", scratch.path("bench_language_pretraining"),
                    "Corpus, records and runs (emptied first).")
flags.DEFINE_list("smoothings", ["1.0", "0.7"], "The S values, the first the baseline.")
flags.DEFINE_list("seeds", ["1", "2"], "Seeds: records (random_seed) and pretraining.")
flags.DEFINE_integer("num_train_steps", 2000, "Pretraining steps of each run.")
flags.DEFINE_float("learning_rate", 2e-3, "Peak learning rate (the demo's small BERT's).")
flags.DEFINE_integer("num_workers", 2, "create_pretraining_data's workers.")

VOCAB_SMOOTHING = 0.7
LANGUAGES = ("en", "de", "es", "fr")
HELD_OUT_SEED = 12345


def records(files, path: str, tokenizer, config: PretrainingDataConfig) -> tuple[str, dict]:
  """create_pretraining_data into two shards at `path`: their glob, the job's stats."""
  stats = pipeline.create_pretraining_data(files, shard_paths([path], 2), tokenizer, config,
                                           FLAGS.num_workers)
  return path + "-*-of-*", stats


def pretrain(bert_config: str, input_file: str, output_dir: str, seed: int) -> None:
  steps = FLAGS.num_train_steps
  pretraining.pretrain(pretraining.PretrainArgs(
      bert_config_file=bert_config, input_file=input_file, output_dir=output_dir,
      do_train=True, max_seq_length=demo.SEQ_LEN,
      max_predictions_per_seq=demo.MAX_PREDICTIONS, train_batch_size=32,
      learning_rate=FLAGS.learning_rate,
      num_train_steps=steps, num_warmup_steps=min(100, steps // 10),
      iterations_per_loop=min(100, steps), save_checkpoints_steps=steps, seed=seed),
      distribute.get_strategy("one_device"))


def masked_lm_accuracy(bert_config: str, checkpoint: str, input_file: str,
                       output_dir: str) -> float:
  """run_pretraining --do_eval --do_train=false --init_checkpoint: over all the records."""
  results = pretraining.pretrain(pretraining.PretrainArgs(
      bert_config_file=bert_config, input_file=input_file, output_dir=output_dir,
      init_checkpoint=checkpoint, do_eval=True, max_seq_length=demo.SEQ_LEN,
      max_predictions_per_seq=demo.MAX_PREDICTIONS, eval_batch_size=64,
      max_eval_steps=10**6), distribute.get_strategy("one_device"))
  return results["masked_lm_accuracy"]


def main(argv):
  del argv
  if data_root.path() is None:
    sys.exit(f"set ${data_root.ENV} to the data folder (../shared/data)")
  out = FLAGS.output_dir
  shutil.rmtree(out, ignore_errors=True)
  os.makedirs(out)
  files = language_sampling.corpus(out)
  counted = {language: vocab.count_language(paths, True) for language, paths in files.items()}
  vocab_file = os.path.join(out, "vocab.txt")
  language_sampling.shared_vocab(counted, VOCAB_SMOOTHING, vocab_file)
  tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
  bert_config = os.path.join(out, "bert_config.json")
  demo.write_small_config(vocab_file, bert_config)

  shapes = dict(max_seq_length=demo.SEQ_LEN, max_predictions_per_seq=demo.MAX_PREDICTIONS)
  held_out, masked = {}, {}
  for language in LANGUAGES:
    text = language_sampling.xnli_sentences(out, language, language_sampling.HYPOTHESES)
    held_out[language], stats = records(
        [text], os.path.join(out, "held_out", language, "eval.tfrecord"), tokenizer,
        PretrainingDataConfig(**shapes, dupe_factor=5, random_seed=HELD_OUT_SEED))
    masked[language] = stats["masked_tokens"]

  smoothings, seeds = list(map(float, FLAGS.smoothings)), list(map(int, FLAGS.seeds))
  accuracy, seconds = {}, {}
  for smoothing in smoothings:
    for seed in seeds:
      start = time.monotonic()
      run = os.path.join(out, f"S{smoothing}_seed{seed}")
      train, _ = records(files, os.path.join(run, "records", "pretrain.tfrecord"), tokenizer,
                         PretrainingDataConfig(**shapes, dupe_factor=2, random_seed=seed,
                                               language_smoothing=smoothing))
      pretrain(bert_config, train, os.path.join(run, "model"), seed)
      for language in LANGUAGES:
        accuracy[smoothing, seed, language] = masked_lm_accuracy(
            bert_config, os.path.join(run, "model"), held_out[language],
            os.path.join(run, f"eval_{language}"))
      seconds[smoothing, seed] = time.monotonic() - start

  mean = {(s, l): statistics.mean(accuracy[s, seed, l] for seed in seeds)
          for s in smoothings for l in LANGUAGES}
  print(f"\nheld-out masked-LM accuracy, {FLAGS.num_train_steps} steps; masked tokens held "
        "out: " + ", ".join(f"{l} {masked[l]:,}" for l in LANGUAGES))
  print("| S | seed | " + " | ".join(LANGUAGES) + " |")
  print("|---" * (2 + len(LANGUAGES)) + "|")
  for s in smoothings:
    for seed in seeds:
      print(f"| {s} | {seed} | " + " | ".join(f"{accuracy[s, seed, l]:.4f}" for l in LANGUAGES)
            + " |")
    print(f"| {s} | mean | " + " | ".join(f"{mean[s, l]:.4f}" for l in LANGUAGES) + " |")
  for s in smoothings[1:]:
    print(f"| {s} - {smoothings[0]} | mean | " + " | ".join(
        f"{mean[s, l] - mean[smoothings[0], l]:+.4f}" for l in LANGUAGES) + " |")
  print("\nseconds (records, pretraining, 4 evaluations): " + ", ".join(
      f"S={s} seed {seed}: {seconds[s, seed]:.0f}" for s, seed in seconds))


if __name__ == "__main__":
  app.run(main)
