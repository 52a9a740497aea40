"""The demo's task is held out: what its dev set asks, neither fine-tuning's training rows nor
the pretraining corpus has seen (`make demo` itself is a minutes-long run, not a test)."""
import os

import demo
from data_gen import sample_corpus


def test_the_dev_sentences_are_in_neither_the_training_rows_nor_the_pretraining_corpus(tmp_path):
  held_out = demo.make_acceptability_task(str(tmp_path))
  corpus = str(tmp_path / "corpus.txt")
  sample_corpus.write_corpus(corpus, leave_out=held_out)

  def rows(name):
    with open(os.path.join(tmp_path, name), encoding="utf-8") as f:
      return [line.rstrip("\n").split("\t") for line in f][1:]

  bag = lambda text: tuple(sorted(text.lower().split()))
  train, dev = rows("train.tsv"), rows("dev.tsv")
  assert {label for _, label in dev} == {"real", "scrambled"}
  # A dev row's words, real or shuffled, never under a training row's label.
  assert not {bag(text) for text, _ in dev} & {bag(text) for text, _ in train}
  # Nor among the sentences pretraining reads (the corpus's lines, as their words).
  with open(corpus, encoding="utf-8") as f:
    corpus_bags = {bag(" ".join(demo.WORD.findall(line))) for line in f if line.strip()}
  assert not {bag(text) for text, _ in dev} & corpus_bags
  assert len(held_out) >= len(dev)
