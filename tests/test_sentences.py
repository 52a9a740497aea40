"""data_gen.corpus.sentences: every registered splitter on hard sentences, the default for real, and
the one-line errors for an unknown name or a missing library."""
import configparser
import importlib.util
import os
import re
import sys

import pytest

from bert_tf.common import errors
from data_gen.corpus import sentences

# What every registered splitter gets right: abbreviations, decimals and prices, quotes,
# ? and ! as boundaries, and the spaces around sentences dropped.
HARD = [
    ("Mr. Smith paid $3.50 for the tea. He left at noon.",
     ["Mr. Smith paid $3.50 for the tea.", "He left at noon."]),
    ("See e.g. the report by Prof. Brown for details. It is long.",
     ["See e.g. the report by Prof. Brown for details.", "It is long."]),
    ("The price rose from 1.5 to 2.75 dollars. Sales fell.",
     ["The price rose from 1.5 to 2.75 dollars.", "Sales fell."]),
    ('She said, "It is late." Then she went home.',
     ['She said, "It is late."', "Then she went home."]),
    ("He asked why? Nobody knew! So it ended.",
     ["He asked why?", "Nobody knew!", "So it ended."]),
    ("  Version 3.11 is out.  It is faster. ", ["Version 3.11 is out.", "It is faster."]),
]
# Harder still: what the default was chosen for (pySBD's Golden Rules 15, 16, 20 and 26, and a
# title abbreviation right after a boundary, where blingfire cuts "Dr." off or misses the cut).
DEFAULT_HARD = [
    ("He left at noon. Mr. Smith arrived later.", ["He left at noon.", "Mr. Smith arrived later."]),
    ("It rained in 2019. Dr. Jones stayed home.", ["It rained in 2019.", "Dr. Jones stayed home."]),
    ("I work for the U.S. Government in Virginia.",
     ["I work for the U.S. Government in Virginia."]),
    ("I live in the U.S. How about you?", ["I live in the U.S.", "How about you?"]),
    ("She has $100.00. It is in her bag.", ["She has $100.00.", "It is in her bag."]),
    ('She turned to him, "This is great." She held the book out to show him.',
     ['She turned to him, "This is great."', "She held the book out to show him."]),
]


def _splitter_or_skip(name):
  """The built splitter; a test of one whose library is absent skips, saying which."""
  package = sentences._SPLITTERS[name][0]  # pylint: disable=protected-access
  if importlib.util.find_spec(package) is None:
    pytest.skip(f"{package} is not installed (pip install {package})")
  return sentences.get_splitter(name)


@pytest.mark.parametrize("name", sentences.NAMES)
def test_every_splitter_on_hard_sentences(name):
  split = _splitter_or_skip(name)
  for text, expected in HARD:
    assert split(text) == expected, (name, text)
  assert split("") == [] and split("   ") == []


def test_the_default_is_installed_and_splits_the_hardest():
  # No skip: the default is an install requirement, so it is tested for real everywhere.
  split = sentences.get_splitter(sentences.DEFAULT)
  for text, expected in HARD + DEFAULT_HARD:
    assert split(text) == expected, text


def test_the_defaults_library_is_an_install_requirement():
  # A user's `pip install` brings the default, so prepare_corpus runs without an extra.
  parser = configparser.ConfigParser()
  parser.read(os.path.join(os.path.dirname(os.path.dirname(__file__)), "setup.cfg"))
  required = [re.split(r"[=<>~!\[ ]", line.strip())[0]
              for line in parser["options"]["install_requires"].splitlines() if line.strip()]
  package = sentences._SPLITTERS[sentences.DEFAULT][0]  # pylint: disable=protected-access
  assert package in required


def test_an_unknown_name_names_the_value_and_the_choices():
  with pytest.raises(errors.DataError, match="'punkt'.*blingfire, syntok, pysbd"):
    sentences.get_splitter("punkt")


def test_a_missing_library_names_the_package_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, "syntok", None)  # `import syntok` now raises ImportError
  monkeypatch.delitem(sys.modules, "syntok.segmenter", raising=False)
  with pytest.raises(errors.DataError, match=r"'syntok'.*pip install syntok.*choices are"):
    sentences.get_splitter("syntok")
