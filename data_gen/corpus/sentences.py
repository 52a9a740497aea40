"""Sentence segmenters for prepare_corpus: one paragraph's text -> its sentences.

Each entry wraps a real library that needs no download at run time (its rules or model ship in
the package; NLTK's sent_tokenize is not one: its Punkt model is a download). A library is
imported when its splitter is built, so only the one asked for need be installed. Building one
may take a while (spaCy, a Punkt model): callers build one a process and reuse it.

The default, nupunkt, is chosen by benchmarks/runs/sentence_splitters.py (benchmarks/README.md,
"Pretraining text: prepare_corpus"). Only it and blingfire split fast enough to cost little in
the job: 5-7 MB per CPU second, against 0.1-0.9 for pysbd, syntok and spaCy. It ties blingfire
on pySBD's English Golden Rules (35 and 36 of 48). On the Gutenberg novels it puts a third as
many sentence boundaries after a title ("Mr.", "St."). And it is pure Python with no
dependencies.
"""
from typing import Callable

from bert_tf.common import errors

Splitter = Callable[[str], list[str]]


def _clean(sentences) -> list[str]:
  """The sentences stripped, empty ones dropped, in order."""
  return [s for s in (s.strip() for s in sentences) if s]


def _blingfire() -> Splitter:
  import blingfire  # pylint: disable=g-import-not-at-top
  # One sentence a line; the paragraph has no newline of its own.
  return lambda text: _clean(blingfire.text_to_sentences(text).split("\n"))


def _syntok() -> Splitter:
  from syntok import segmenter  # pylint: disable=g-import-not-at-top

  def split(text: str) -> list[str]:
    # The tokens' offsets cut the original text, so the sentences keep its exact characters.
    return _clean(text[sentence[0].offset:sentence[-1].offset + len(sentence[-1].value)]
                  for paragraph in segmenter.analyze(text) for sentence in paragraph)
  return split


def _pysbd() -> Splitter:
  import pysbd  # pylint: disable=g-import-not-at-top
  # clean=False: its cleaner rewrites the text (drops spaces, joins lines).
  segmenter = pysbd.Segmenter(language="en", clean=False)
  return lambda text: _clean(segmenter.segment(text))


def _nupunkt() -> Splitter:
  import nupunkt  # pylint: disable=g-import-not-at-top
  tokenizer = nupunkt.load_default_model()  # the Punkt model the package ships
  return lambda text: _clean(tokenizer.tokenize(text))


def _spacy() -> Splitter:
  import spacy  # pylint: disable=g-import-not-at-top
  # The rule-based sentencizer on a blank English pipeline: no model to download.
  nlp = spacy.blank("en")
  nlp.add_pipe("sentencizer")
  nlp.max_length = 1 << 30  # its 1M-character guard is for the parser's memory; rules need none
  return lambda text: _clean(sentence.text for sentence in nlp(text).sents)


# name -> (the pip package that provides it, its builder)
_SPLITTERS: dict[str, tuple[str, Callable[[], Splitter]]] = {
    "blingfire": ("blingfire", _blingfire),
    "syntok": ("syntok", _syntok),
    "pysbd": ("pysbd", _pysbd),
    "nupunkt": ("nupunkt", _nupunkt),
    "spacy": ("spacy", _spacy),
}
NAMES: tuple[str, ...] = tuple(_SPLITTERS)
DEFAULT: str = "nupunkt"


def get_splitter(name: str) -> Splitter:
  """The splitter registered as `name`: paragraph text (no newlines) -> its sentences,
  stripped, non-empty, in order. Raises DataError for an unknown name or a library that is not
  installed."""
  if name not in _SPLITTERS:
    raise errors.DataError(
        f"unknown sentence splitter {name!r}; choose one of {', '.join(NAMES)}")
  package, build = _SPLITTERS[name]
  try:
    return build()
  except ImportError as e:
    raise errors.DataError(
        f"sentence splitter {name!r} needs the {package!r} package (pip install {package}), "
        f"which is not installed ({e}); installed or not, the choices are {', '.join(NAMES)}"
    ) from None
