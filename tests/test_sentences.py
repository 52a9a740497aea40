"""data_gen.corpus.sentences: every registered splitter on hard sentences, the default for real,
each language's default on its own script (Chinese and Japanese without spaces, German
abbreviations, Thai left whole) and on a paragraph that changes script, and the one-line errors for an unknown name, a missing library
or a language a library has no rules for."""
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


# Sentences of each language's own script, as a wiki's paragraph has them (own fixtures):
# Chinese and Japanese with no space between sentences, a closing quote kept with the sentence
# it closes; German abbreviations (z. B., Nr. 5, u. a., usw.) inside a sentence.
LANGUAGES = [
    ("zh", "他说：“我明天走。”大家都笑了。北京是中国的首都！你去过吗？我去过。",
     ["他说：“我明天走。”", "大家都笑了。", "北京是中国的首都！", "你去过吗？", "我去过。"]),
    ("ja", "「行こう。」彼は言った。東京は日本の首都です！行ったことがありますか？はい。",
     ["「行こう。」", "彼は言った。", "東京は日本の首都です！", "行ったことがありますか？",
      "はい。"]),
    ("de", "Das ist z. B. ein Satz. Er wohnt in Nr. 5 der Straße. Es gibt u. a. Äpfel, Birnen "
     "usw. und Pflaumen. Und noch einer.",
     ["Das ist z. B. ein Satz.", "Er wohnt in Nr. 5 der Straße.",
      "Es gibt u. a. Äpfel, Birnen usw. und Pflaumen.", "Und noch einer."]),
]
# A paragraph that changes script, as a wiki's may: English, Chinese (no space between its
# sentences), Hindi, English again. Every script's sentence end ends a sentence, whatever the
# language's splitter, and a decimal ends none.
MIXED = ("BERT was released by Google in 2018. It scored 3.5 points more. "
         "它是一个语言模型。它由谷歌发布！ यह एक भाषा मॉडल है। इसे गूगल ने बनाया॥ It is open.")
MIXED_SENTENCES = ["BERT was released by Google in 2018.",
                   "It scored 3.5 points more.", "它是一个语言模型。",
                   "它由谷歌发布！", "यह एक भाषा मॉडल है।", "इसे गूगल ने बनाया॥", "It is open."]
THAI = "ประเทศไทยมีประชากรมาก กรุงเทพมหานครเป็นเมืองหลวง อากาศร้อนเกือบทั้งปี"


def _splitter_or_skip(name, language="en"):
  """The built splitter; a test of one whose library is absent skips, saying which."""
  registry = sentences._SPLITTERS  # pylint: disable=protected-access
  module, package, _ = registry[sentences.resolve(name, language)]
  if module and importlib.util.find_spec(module) is None:
    pytest.skip(f"{module} is not installed (pip install {package})")
  return sentences.get_splitter(name, language)


# "paragraph" splits nothing by design (a language without sentence punctuation).
@pytest.mark.parametrize("name", [n for n in sentences.NAMES if n != "paragraph"])
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


@pytest.mark.parametrize("language, text, expected", LANGUAGES)
def test_each_languages_default_splits_its_own_script(language, text, expected):
  assert sentences.get_splitter(sentences.DEFAULT, language)(text) == expected


@pytest.mark.parametrize("language", ["zh", "ja", "hi", "en", "de"])
def test_a_paragraph_that_changes_script_splits_at_every_scripts_sentence_end(language):
  assert sentences.get_splitter(sentences.DEFAULT, language)(MIXED) == MIXED_SENTENCES


def test_latin_text_in_chinese_is_cut_where_english_ends_a_sentence_not_at_a_title():
  # In Chinese, "." ends a sentence where nupunkt (English's splitter) ends one after a Latin
  # word; a title, initials or a decimal end none, and a closing quote stays with its sentence.
  split = sentences.get_splitter(sentences.DEFAULT, "zh")
  assert split("美国 U.S. 总统访问了北京。Dr. Smith 和 J. K. Rowling 也来了。π 约为 3.14。"
               "他说：“It is late.” 大家都笑了。") == [
                   "美国 U.S. 总统访问了北京。", "Dr. Smith 和 J. K. Rowling 也来了。",
                   "π 约为 3.14。", "他说：“It is late.”", "大家都笑了。"]


def test_another_scripts_mark_inside_a_sentence_ends_none():
  # A quotation's 。 with a comma, a bracket or a lower-case word after it: the sentence goes on.
  split = sentences.get_splitter(sentences.DEFAULT, "en")
  assert split("Morning Musume (モーニング娘。, Mōningu Musume) is a group. He wrote (它是。) "
               "in Chinese. The song 「桜。」 is sung by them.") == [
                   "Morning Musume (モーニング娘。, Mōningu Musume) is a group.",
                   "He wrote (它是。) in Chinese.", "The song 「桜。」 is sung by them."]


def test_english_keeps_nupunkt_and_a_subtag_takes_its_languages_default():
  assert sentences.default_splitter("en") == "nupunkt"
  assert sentences.default_splitter("zh-yue") == sentences.default_splitter("zh") == "punkt"


def test_thai_keeps_one_paragraph_a_line():
  # No sentence punctuation: its spaces part phrases, so the paragraph stays whole.
  assert sentences.default_splitter("th") == "paragraph"
  assert sentences.get_splitter(sentences.DEFAULT, "th")(f"  {THAI} ") == [THAI]


def test_the_defaults_libraries_are_install_requirements():
  # A user's `pip install` brings every language's default, so prepare_corpus runs without an
  # extra whatever the language.
  parser = configparser.ConfigParser()
  parser.read(os.path.join(os.path.dirname(os.path.dirname(__file__)), "setup.cfg"))
  required = [re.split(r"[=<>~!\[ ]", line.strip())[0]
              for line in parser["options"]["install_requires"].splitlines() if line.strip()]
  registry = sentences._SPLITTERS  # pylint: disable=protected-access
  for language in ("en", "zh", "ja", "de", "fr", "ar", "sw"):
    assert registry[sentences.default_splitter(language)][1] in required, language


def test_an_unknown_name_names_the_value_and_the_choices():
  with pytest.raises(errors.DataError, match="'regex'.*auto, blingfire, syntok, pysbd"):
    sentences.get_splitter("regex")


def test_a_language_without_the_librarys_rules_is_named():
  _splitter_or_skip("pysbd")
  with pytest.raises(errors.DataError, match="'pysbd' has no rules for language 'th'"):
    sentences.get_splitter("pysbd", "th")


def test_a_missing_library_names_the_package_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, "syntok", None)  # `import syntok` now raises ImportError
  monkeypatch.delitem(sys.modules, "syntok.segmenter", raising=False)
  with pytest.raises(errors.DataError, match=r"'syntok'.*pip install syntok.*choices are"):
    sentences.get_splitter("syntok")
