"""Smoothed language sampling (multilingual.md's S) in build_vocab and create_pretraining_data,
on real text in four languages of very unequal size.

Kind: a run of our product (benchmarks/runs/), on $BERT_TF_DATA (../shared/data).

The corpus: English, two Project Gutenberg novels and WikiExtractor's English Wikipedia sample
(one line a sentence, blank lines between documents; the books' hard-wrapped lines taken as they
are); German, Spanish and French, XNLI dev's premises in each (each once, ten to a document):
about 50:1:1:1 in sentences. For S = 1 and 0.7:

  vocab    build_vocab's library calls, an uncased 8,000-token shared vocab: per language its
           [UNK] rate and wordpieces per word (a language crowded out of the vocab is cut into
           more, shorter pieces);
  records  create_pretraining_data by language with the S=0.7 vocab (2 workers, dupe_factor 2):
           per language its raw and sampled shares, the rate, the share of the instances it got;
           the seconds of the sentence-counting pass beside the job's; the bytes of a 1-worker
           run against the 2-worker one.

  BERT_TF_DATA=../shared/data PYTHONPATH=. TF_CPP_MIN_LOG_LEVEL=2 \
    .venv/bin/python -m benchmarks.runs.language_sampling
"""
import collections
import csv
import filecmp
import os
import sys
import tempfile
import time

from benchmarks import data_root
from bert_tf.tokenization import FullTokenizer
from data_gen import vocab
from data_gen.jobs import languages
from data_gen.jobs.outputs import shard_paths
from data_gen.pretraining_data import documents, pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig

VOCAB_SIZE = 8000


def english_corpus(folder: str) -> str:
  """The English text: two Gutenberg novels and WikiExtractor's Wikipedia sample, one file."""
  path = os.path.join(folder, "en.txt")
  with open(path, "w", encoding="utf-8") as out:
    for name in ("books/155-0.txt", "books/2511-0.txt"):
      with open(data_root.path(name), encoding="utf-8-sig") as f:
        out.write(f.read().replace("\r\n", "\n") + "\n\n")
    with open(data_root.path("wikipedia/wikiextractor_wiki_00"), encoding="utf-8") as f:
      for line in f:
        out.write("\n" if line.startswith(("<doc", "</doc")) else line)
  return path


PREMISES, HYPOTHESES = 0, 1  # XNLI's columns


def xnli_sentences(folder: str, language: str, column: int = PREMISES) -> str:
  """XNLI dev's premises (or hypotheses) in `language`, each once, ten to a document."""
  with open(data_root.path(f"xnli/dev-{language}.tsv"), encoding="utf-8") as f:
    sentences = list(dict.fromkeys(row[column] for row in csv.reader(f, delimiter="\t",
                                                                     quoting=csv.QUOTE_NONE)))
  path = os.path.join(folder, f"{language}-{('premises', 'hypotheses')[column]}.txt")
  with open(path, "w", encoding="utf-8") as out:
    for start in range(0, len(sentences), 10):
      out.write("\n".join(sentences[start:start + 10]) + "\n\n")
  return path


def corpus(folder: str) -> dict[str, list[str]]:
  """The four languages' files, by language: English ~43x each of the others in sentences."""
  return {"en": [english_corpus(folder)],
          **{language: [xnli_sentences(folder, language)] for language in ("de", "es", "fr")}}


def shared_vocab(counted: dict[str, tuple[collections.Counter, int]], smoothing: float,
                 path: str) -> dict[str, dict[str, float]]:
  """build_vocab's shared vocab written to `path`: the languages' word counts (`counted`:
  vocab.count_language's) weighed at `smoothing`. Returns the languages' shares."""
  shares = languages.smoothed_shares({l: n for l, (_, n) in counted.items()}, smoothing)
  weighed = vocab.weigh_languages({l: words for l, (words, _) in counted.items()},
                                  {l: share["rate"] for l, share in shares.items()})
  vocab.write_vocab(vocab.learn_vocab(weighed, VOCAB_SIZE, min_token_count=5), path)
  return shares


def _pieces_per_word(word_counts: collections.Counter, tokenizer) -> float:
  words = list(word_counts)
  ids = tokenizer.tokenize_ids(words)
  return (sum(word_counts[w] * len(i) for w, i in zip(words, ids)) /
          sum(word_counts.values()))


def main():
  if data_root.path() is None:
    sys.exit(f"set ${data_root.ENV} to the data folder (../shared/data)")
  folder = tempfile.mkdtemp(prefix="language_sampling-")
  files = corpus(folder)
  counted = {language: vocab.count_language(paths, True) for language, paths in files.items()}

  print("| S | language | sentences | raw share | weighed share | [UNK] rate | pieces per word |")
  print("|---|---|---|---|---|---|---|")
  vocab_files = {}
  for smoothing in (1.0, 0.7):
    vocab_files[smoothing] = os.path.join(folder, f"vocab-{smoothing}.txt")
    shares = shared_vocab(counted, smoothing, vocab_files[smoothing])
    tokenizer = FullTokenizer(vocab_files[smoothing], do_lower_case=True)
    for language, (words, sentences) in counted.items():
      print(f"| {smoothing} | {language} | {sentences:,} | {shares[language]['raw_share']:.3f} "
            f"| {shares[language]['sampled_share']:.3f} "
            f"| {vocab.unk_rate(words, tokenizer):.2%} "
            f"| {_pieces_per_word(words, tokenizer):.2f} |")

  tokenizer = FullTokenizer(vocab_files[0.7], do_lower_case=True)
  start = time.monotonic()
  for paths in files.values():
    documents.count_sentences(paths)
  counting = time.monotonic() - start
  print("\n| S | language | raw share | sampled share | rate | instance share | instances |")
  print("|---|---|---|---|---|---|---|")
  for smoothing in (1.0, 0.7):
    config = PretrainingDataConfig(dupe_factor=2, language_smoothing=smoothing)
    runs = {}
    for workers in (2, 1):
      outputs = shard_paths([os.path.join(folder, f"out-{smoothing}-{workers}",
                                          "pretrain.tfrecord")], 2)
      stats = pipeline.create_pretraining_data(files, outputs, tokenizer, config, workers)
      runs[workers] = outputs, stats
    same = all(filecmp.cmp(a, b, shallow=False) for a, b in zip(runs[1][0], runs[2][0]))
    stats = runs[2][1]
    for language, s in stats["languages"].items():
      print(f"| {smoothing} | {language} | {s['raw_share']:.3f} | {s['sampled_share']:.3f} | "
            f"{s['rate']:.2f} | {s['instance_share']:.3f} | {s['instances']:,} |")
    print(f"| {smoothing} | all | | | | | {stats['instances']:,} in {stats['seconds']:.1f} s "
          f"(2 workers); 1 worker: {'the same' if same else 'OTHER'} bytes |")
  print(f"\nsentence-counting pass: {counting:.2f} s for "
        f"{sum(os.path.getsize(p) for paths in files.values() for p in paths) / 1e6:.1f} MB")


if __name__ == "__main__":
  main()
