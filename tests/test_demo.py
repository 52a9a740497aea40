"""The demo's task is held out: what its dev set asks, neither fine-tuning's training rows nor
the pretraining corpus has seen (`make demo` itself is a minutes-long run, not a test)."""
import os

import demo
from data_gen import sample_corpus


def test_the_dev_sentences_are_in_neither_the_training_rows_nor_the_pretraining_corpus(tmp_path):
  held_out = demo.make_topic_task(str(tmp_path))
  corpus = str(tmp_path / "corpus.txt")
  sample_corpus.write_corpus(corpus, leave_out=held_out)

  def rows(name):
    with open(os.path.join(tmp_path, name), encoding="utf-8") as f:
      return [line.rstrip("\n").split("\t") for line in f][1:]

  train, dev = rows("train.tsv"), rows("dev.tsv")
  assert {label for _, label in dev} == set(demo.TOPICS)
  assert not {text for text, _ in dev} & {text for text, _ in train}
  # Nor among the sentences pretraining reads (the corpus's lines, as their words).
  with open(corpus, encoding="utf-8") as f:
    corpus_texts = {" ".join(demo.WORD.findall(line)) for line in f}
  assert not {text for text, _ in dev} & corpus_texts
  assert len(held_out) >= len(dev)
