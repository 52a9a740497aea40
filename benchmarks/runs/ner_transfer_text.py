r"""Unlabelled transfer text for NER distillation in CoNLL-2003's layout (issue 64): test.txt's
words, then English Wikipedia prose (SQuAD v1.1 dev's passages, the WikiExtractor sample's
paragraphs; --nowikipedia: none) cut into sentences and words, then --augment variants of each
train.txt sentence (`augmentation.augment`, TinyBERT's in-domain augmentation; a training
document's variants a document), a word a line, a blank line between sentences and -DOCSTART-
between documents (an article, or a passage: the unit document context reads).

Kind: a data preparation step of a benchmark (runs/ner_distillation.sh's TRANSFER=); no peer.
Sentences: nupunkt, prepare_corpus's English splitter. Words: CoNLL keeps punctuation a token
of its own and "U.S", "1996-08-30", "don't" one word; the regex below does the same (a word's
inner "." "-" "'" stay in it). Headings (a line without sentence-final punctuation) are left
out. Deterministic: the same files give the same bytes.

  BERT_TF_DATA=../shared/data .venv/bin/python -m benchmarks.runs.ner_transfer_text \
      --output=/tmp/bench/ner3/transfer_wiki.txt [--nowikipedia --augment=1]
"""
import json
import os
import re

from absl import app, flags

from bert_tf.tasks.ner import task as ner
from benchmarks import augmentation  # --augment's variants
from data_gen.corpus import sentences as segmenters

flags.DEFINE_string("output", None, "The transfer file to write.", required=True)
flags.DEFINE_bool("wikipedia", True, "Add the Wikipedia sentences after test.txt's.")
flags.DEFINE_integer("augment", 0, "K variants of each train.txt sentence added last.")
flags.DEFINE_integer("augment_seed", 1, "The augmentation's seed.")
FLAGS = flags.FLAGS

_WORD = re.compile(r"\w+(?:[-.'’]\w+)*|[^\w\s]")


def _documents(data: str):
  """Each source document's paragraphs, in file order."""
  with open(os.path.join(data, "squad", "v1.1", "dev-v1.1.json"), encoding="utf-8") as f:
    for article in json.load(f)["data"]:
      for paragraph in article["paragraphs"]:
        yield [paragraph["context"]]
  with open(os.path.join(data, "wikipedia", "wikiextractor_wiki_00"), encoding="utf-8") as f:
    paragraphs = []
    for line in f:
      line = line.strip()
      if line.startswith("<doc"):
        paragraphs = []
      elif line == "</doc>":
        yield paragraphs
      elif line and line[-1] in ".!?\"'”)":
        paragraphs.append(line)


def main(argv):
  del argv
  data = os.environ["BERT_TF_DATA"]
  split = segmenters.get_splitter("nupunkt", "en")
  with open(os.path.join(data, "conll2003", "test.txt"), encoding="utf-8") as f:
    lines = [line.split(" ")[0].rstrip("\n") for line in f]
  counts = {"test.txt": sum(1 for word, after in zip(lines, lines[1:] + [""])
                            if word and word != "-DOCSTART-" and not after)}
  wiki = 0
  for paragraphs in _documents(data) if FLAGS.wikipedia else ():
    lines += ["-DOCSTART-", ""]
    for paragraph in paragraphs:
      for sentence in split(paragraph):
        words = _WORD.findall(sentence)
        if words:
          lines += words + [""]
          wiki += 1
  counts["Wikipedia"] = wiki
  train = (ner.read_conll(os.path.join(data, "conll2003", "train.txt"), tagged=False)
           if FLAGS.augment else [])
  variants = augmentation.augment([(" ".join(s.words),) for s in train], FLAGS.augment,
                                  FLAGS.augment_seed)
  for index, (text,) in enumerate(variants):
    sentence = train[index // FLAGS.augment]
    if index % FLAGS.augment == 0 and (index == 0 or sentence.doc_start):
      lines += ["-DOCSTART-", ""]
    lines += text.split() + [""]
  counts["train.txt variants"] = len(variants)
  temporary = FLAGS.output + ".tmp"
  with open(temporary, "w", encoding="utf-8") as f:
    f.write("\n".join(lines).rstrip("\n") + "\n")
  os.replace(temporary, FLAGS.output)
  print(f"{FLAGS.output}: sentences {counts}")


if __name__ == "__main__":
  app.run(main)
