"""Transfer text made from a task's own training text (issue 64's distillation runs:
runs/distillation.py for GLUE, runs/ner_transfer_text.py for CoNLL): variants of each example by
Tang et al. 2019's rules ("Distilling Task-Specific Knowledge from BERT into Simple Neural
Networks", section 3.3), which TinyBERT's data augmentation follows in spirit; the teacher
labels them, so a student sees more text of the task's own domain than its gold labels cover.

Kind: a data step of benchmark runs (benchmarks/, shared by runs/). Plain Python.
"""
import random


def augment(examples: list[tuple[str, ...]], copies: int, seed: int) -> list[tuple[str, ...]]:
  """`copies` variants of each example (a tuple of its texts: one, or a pair), each example's
  in a row, by Tang et al.'s rules less their POS tagger: each word dropped with p=0.1 (theirs
  becomes [MASK], which our tokenizer would read as three pieces of text), else replaced with
  p=0.1 by a word drawn from the examples' text (theirs: a word of the same part of speech),
  then with p=0.25 an n-gram of the result kept, n uniform in 1..5. Each text of a pair alike.
  Words: split at whitespace. Deterministic in `seed`."""
  rng = random.Random(seed)
  words = [w for texts in examples for t in texts for w in t.split()]
  def variant(text: str) -> str:
    out = [w if r >= 0.2 else rng.choice(words) for w in text.split()
           if (r := rng.random()) >= 0.1]
    if len(out) > 1 and rng.random() < 0.25:
      n = rng.randint(1, min(5, len(out)))
      start = rng.randrange(len(out) - n + 1)
      out = out[start:start + n]
    return " ".join(out) or text.split()[0]
  return [tuple(variant(t) for t in texts) for texts in examples for _ in range(copies)]
