"""data_gen.vocab / build_vocab: a WordPiece vocab learned from a corpus, split as the
tokenizer splits it."""
import collections
import json
import os
import random

import pytest
import tensorflow as tf

from bert_tf import tokenization
from data_gen import vocab
from data_gen.jobs import languages
import entry_points

WORDS = ("the a of to and in is was for on that with as by at from his her they it "
         "running runner runs ran jumping jumped jumps walking walked walks talking talked "
         "talks unhappy unhappiness happiness happily kindness kindly unkind café naïve "
         "Zürich résumé Straße Ελλάδα ΟΔΟΣ 北京 東京 tokyo london paris 1999 2024 3.14").split()


# Derived words, which share pieces a learner should find ("un", "##ing", ...).
WORDS += [prefix + stem + suffix for prefix in ("", "un", "re", "over")
          for stem in ("happy", "kind", "play", "read", "work", "help")
          for suffix in ("", "s", "ed", "ing", "ness", "er")]


def _corpus(path, lines=400, seed=0):
  """Sentences of words drawn with Zipf's law, capitalised at the start, with punctuation
  and numbers."""
  rng = random.Random(seed)
  weights = [1 / (rank + 1) for rank in range(len(WORDS))]
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(lines):
      words = rng.choices(WORDS, weights, k=rng.randint(4, 14))
      f.write(" ".join(words).capitalize() + rng.choice([".", "!", "?", ", etc."]) + "\n")
  return str(path)


def _detokenize(pieces: list[str]) -> list[str]:
  words = []
  for piece in pieces:
    if piece.startswith("##"):
      words[-1] += piece[2:]
    else:
      words.append(piece)
  return words


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_learned_vocab_round_trips_the_corpus(tmp_path, do_lower_case):
  corpus = _corpus(tmp_path / "corpus.txt")
  counts = vocab.count_words([corpus], do_lower_case)
  tokens = vocab.learn_vocab(counts, vocab_size=300, num_unused=2, min_token_count=3)
  assert tokens[:7] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]"]
  assert 0.85 * 300 <= len(tokens) <= 300
  assert len(set(tokens)) == len(tokens)
  path = str(tmp_path / "vocab.txt")
  vocab.write_vocab(tokens, path)
  assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]  # No temporary left.
  tokenizer = tokenization.FullTokenizer(path, do_lower_case)
  with open(corpus, encoding="utf-8") as f:
    lines = f.read().splitlines()
  words = tokenization.split_words(tf.constant(lines), do_lower_case).to_list()
  num_pieces = num_words = 0
  for line_words, ids in zip(words, tokenizer.tokenize_ids(lines)):
    assert tokenizer.unk_id not in ids
    # The pieces put back together are the tokenizer's words: learned as the text is split.
    assert _detokenize(tokenizer.convert_ids_to_tokens(ids)) == [w.decode() for w in line_words]
    num_pieces += len(ids)
    num_words += len(line_words)
  # Learned pieces, not characters: most words are one or two pieces.
  assert num_pieces < 1.6 * num_words
  # Case and accents follow do_lower_case, as in the tokenizer.
  assert ("café" in tokens) == (not do_lower_case) and ("cafe" in tokens) == do_lower_case


def test_count_words_uses_the_tokenizer_split(tmp_path):
  path = tmp_path / "c.txt"
  path.write_bytes("Héllo, WORLD!\n\nΟΔΟΣ 北京 ".encode("utf-8") + b"bad\xff\n")
  assert vocab.count_words([str(path)], True) == {"hello": 1, ",": 1, "world": 1, "!": 1,
                                                  "οδος": 1, "北": 1, "京": 1, "bad": 1}
  assert vocab.count_words([str(path)], False, max_lines=1) == {
      "Héllo": 1, ",": 1, "WORLD": 1, "!": 1}


def test_vocab_is_capped_at_vocab_size_keeping_characters():
  learned = ["[PAD]", "[UNK]", "a", "b", "##a", "##b", "ab", "ba", "##ab", "aab"]
  assert vocab._cap(learned, 8, num_reserved=2) == learned[:8]
  assert vocab._cap(learned, 6, num_reserved=2) == learned[:6]
  with pytest.raises(ValueError, match="vocab_size 5 is less than the 6 reserved"):
    vocab._cap(learned, 5, num_reserved=2)
  with pytest.raises(ValueError, match="vocab_size 5 leaves no room"):
    vocab.learn_vocab({"a": 1}, 5)


# Words of a small second language, none of them in WORDS.
SWAHILI = "habari jambo asante rafiki chakula nyumba shule kitabu mwalimu watoto".split()


def _small_language(path, lines=12, seed=0):
  rng = random.Random(seed)
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(lines):
      f.write(" ".join(rng.choices(SWAHILI, k=6)) + ".\n")
  return str(path)


def test_smoothing_weighs_a_small_languages_words_into_the_vocab(tmp_path):
  """400 lines of one language, 12 of another: its words mostly under min_token_count as
  counted, over it once weighed by multilingual.md's smoothing (its rate ~5 at S=0.5)."""
  counted = {"en": vocab.count_language([_corpus(tmp_path / "en.txt")], True),
             "sw": vocab.count_language([_small_language(tmp_path / "sw.txt")], True)}
  assert {language: sentences for language, (_, sentences) in counted.items()} == \
      {"en": 400, "sw": 12}
  learned = {}
  for smoothing in (1.0, 0.5):
    shares = languages.smoothed_shares({l: n for l, (_, n) in counted.items()}, smoothing)
    weighed = vocab.weigh_languages({l: words for l, (words, _) in counted.items()},
                                    {l: share["rate"] for l, share in shares.items()})
    assert weighed["nyumba"] == pytest.approx(counted["sw"][0]["nyumba"] * shares["sw"]["rate"])
    learned[smoothing] = set(vocab.learn_vocab(weighed, 300, min_token_count=10))
  assert len(learned[1.0] & set(SWAHILI)) <= 3
  assert learned[0.5] >= set(SWAHILI)


def test_cjk_characters_and_punctuation_are_whole_tokens(tmp_path):
  """Each Chinese character (and punctuation mark) a token of its own, whatever the alphabet
  limit, never "##"-joined (the tokenizer splits them off, so never looks one up)."""
  rng = random.Random(0)
  hanzi = [chr(0x4E00 + 37 * i) for i in range(60)]
  path = tmp_path / "zh.txt"
  path.write_text("".join("".join(rng.choices(hanzi, k=20)) + "。Running jumped, Walking.\n"
                          for _ in range(300)), encoding="utf-8")
  counts = vocab.count_words([str(path)], False)
  tokens = vocab.learn_vocab(counts, 200, min_token_count=5, max_unique_chars=20,
                             do_lower_case=False)
  assert set(hanzi) | {"。", ",", "."} <= set(tokens)
  assert not [t for t in tokens if t.startswith("##") and (t[2:] in hanzi or t[2:] in ",.。")]
  vocab.write_vocab(tokens, str(tmp_path / "vocab.txt"))
  tokenizer = tokenization.FullTokenizer(str(tmp_path / "vocab.txt"), False)
  assert vocab.unk_rate(counts, tokenizer) == 0
  assert tokenizer.tokenize("".join(hanzi[:3]) + "。") == hanzi[:3] + ["。"]
  assert vocab.unk_rate(collections.Counter({"ξ": 1, hanzi[0]: 3}), tokenizer) == 0.25


# A larger language with many rare characters: 600 CJK ideographs seen once each, among 20
# common ones.
RARE_HANZI = [chr(0x4E00 + i) for i in range(600)]
COMMON_HANZI = [chr(0x5E00 + i) for i in range(20)]


def _chinese(path, seed=0):
  """1000 lines: 100 with 6 rare characters each, all with common ones."""
  rng = random.Random(seed)
  with open(path, "w", encoding="utf-8") as f:
    for i in range(1000):
      rare = "".join(RARE_HANZI[6 * i:6 * i + 6]) if i < 100 else ""
      f.write(rare + "".join(rng.choices(COMMON_HANZI, k=10)) + "。\n")
  return str(path)


def test_smoothing_keeps_every_character_the_corpus_has(tmp_path):
  """Chinese 1000 lines, Swahili 12: at S=0.7 Chinese is weighed below 1 (each rare character
  counts ~0.9), under min_token_count=1 as weighed; kept all the same, as at S=1."""
  counted = {"zh": vocab.count_language([_chinese(tmp_path / "zh.txt")], True),
             "sw": vocab.count_language([_small_language(tmp_path / "sw.txt")], True)}
  counts = {language: words for language, (words, _) in counted.items()}
  unweighed = sum(counts.values(), collections.Counter())
  hanzi = {}
  for smoothing in (1.0, 0.7):
    shares = languages.smoothed_shares({l: n for l, (_, n) in counted.items()}, smoothing)
    weighed = vocab.weigh_languages(counts, {l: share["rate"] for l, share in shares.items()})
    hanzi[smoothing] = set(vocab.learn_vocab(weighed, 3000, min_token_count=1,
                                             unweighed_counts=unweighed)) & set(RARE_HANZI)
    if smoothing != 1:
      assert shares["zh"]["rate"] < 1 and weighed[RARE_HANZI[0]] < 1
      # The floor judged on the weighed counts: the rare characters all [UNK].
      assert not set(vocab.learn_vocab(weighed, 3000, min_token_count=1)) & set(RARE_HANZI)
  assert hanzi[0.7] == hanzi[1.0] == set(RARE_HANZI)


@pytest.mark.slow
def test_build_vocab_script(tmp_path):
  """A run, then two bad inputs to the same --output_file, each as a user starts it, all in one
  process (Python and TensorFlow started once)."""
  corpus = _corpus(tmp_path / "a.txt", seed=1)
  _corpus(tmp_path / "b.txt", seed=2)
  out = tmp_path / "out" / "vocab.txt"
  small = _small_language(tmp_path / "sw.txt")
  shared = tmp_path / "shared" / "vocab.txt"
  chinese = _chinese(tmp_path / "zh.txt")
  # A corpus folder with a job's stats beside its text, which a glob matches.
  (tmp_path / "folder").mkdir()
  _corpus(tmp_path / "folder" / "wiki.txt", seed=3)
  (tmp_path / "folder" / "wiki.stats.json").write_text(
      json.dumps({"holdout_fraction": 0.1, "splitter": "punkt"}), encoding="utf-8")
  (result, missing, bad_size, multilingual, not_a_language, twice, smoothing, no_languages,
   cjk, folder) = entry_points.run_cases("data_gen.build_vocab", [
          [f"--input_file={tmp_path}/a.txt,{tmp_path}/b*.txt", f"--output_file={out}",
           "--vocab_size=200", "--min_token_count=2", "--nodo_lower_case"],
          [f"--input_file={tmp_path}/nope*.txt", f"--output_file={out}"],
          [f"--input_file={corpus}", f"--output_file={out}", "--vocab_size=0"],
          [f"--input_file=en:{corpus},sw:{small}", f"--output_file={shared}",
           "--vocab_size=300", "--language_smoothing=0.5"],
          [f"--input_file=english:{corpus}", f"--output_file={shared}"],
          [f"--input_file=sw:{corpus},SW:{small}", f"--output_file={shared}"],
          [f"--input_file=en:{corpus}", f"--output_file={shared}", "--language_smoothing=0"],
          [f"--input_file={corpus}", f"--output_file={shared}", "--language_smoothing=0.7"],
          [f"--input_file=zh:{chinese},sw:{small}", f"--output_file={tmp_path}/cjk/vocab.txt",
           "--vocab_size=3000", "--min_token_count=1", "--language_smoothing=0.7"],
          [f"--input_file={tmp_path}/folder/*", f"--output_file={tmp_path}/f/vocab.txt",
           "--vocab_size=200", "--min_token_count=1"],
      ], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr
  assert f"to {out}" in result.stdout
  # No temporary file left behind.
  assert sorted(os.listdir(out.parent)) == ["vocab.stats.json", "vocab.txt"]
  tokens = out.read_text(encoding="utf-8").split("\n")[:-1]
  assert tokens[:5] == list(tokenization.SPECIAL_TOKENS) and len(tokens) <= 200
  assert "Zürich" in tokens or "##ü" in tokens  # Cased: accents kept.
  assert os.path.exists(corpus)

  assert missing.returncode != 0 and "no file matches" in missing.stderr
  assert "nope*.txt" in missing.stderr
  assert bad_size.returncode != 0 and "--vocab_size must be positive" in bad_size.stderr

  # A shared vocab: the small language weighed up, each language's [UNK] rate in the stats.
  assert multilingual.returncode == 0, multilingual.stderr
  stats = json.loads((shared.parent / "vocab.stats.json").read_text())
  sw = stats["languages"]["sw"]
  assert sw["sentences"] == 12 and stats["languages"]["en"]["sentences"] == 400
  assert sw["raw_share"] == pytest.approx(12 / 412)
  assert sw["sampled_share"] == pytest.approx(
      (12 / 412) ** 0.5 / ((12 / 412) ** 0.5 + (400 / 412) ** 0.5))
  assert sw["unk_rate"] == 0 and 0 < stats["languages"]["en"]["unk_rate"] < 0.01
  assert set(SWAHILI) <= set(shared.read_text(encoding="utf-8").split("\n"))
  assert "sw: share of sentences 2.9% -> weighed 14.8%, [UNK] 0.00%" in multilingual.stdout
  for bad, message in ((not_a_language, "build_vocab: error: --input_file: 'english' (in "
                        f"'english:{corpus}') is not a language code"),
                       (twice, "build_vocab: error: --input_file: language 'SW' given twice (as 'sw:"),
                       (smoothing, "build_vocab: error: --language_smoothing=0.0: must be in "
                        "(0, 1]"),
                       (no_languages, "build_vocab: error: --language_smoothing=0.7 smooths the "
                        "languages' shares, and --input_file names no language: prefix each "
                        "glob with its language")):
    assert bad.returncode == 1 and message in bad.stderr and "Traceback" not in bad.stderr

  # Smoothed, Chinese weighed below 1: every character kept all the same, none [UNK].
  assert cjk.returncode == 0, cjk.stderr
  learned = (tmp_path / "cjk" / "vocab.txt").read_text("utf-8").split("\n")
  assert set(RARE_HANZI) <= set(learned)
  stats = json.loads((tmp_path / "cjk" / "vocab.stats.json").read_text())
  assert stats["languages"]["zh"]["rate"] < 1 and stats["languages"]["zh"]["unk_rate"] == 0
  assert "zh: share of sentences 98.8% -> weighed 95.7%, [UNK] 0.00%" in cjk.stdout

  # The stats beside the text: skipped, said in one line; its keys no words of the vocab.
  assert folder.returncode == 0, folder.stderr
  assert (f"build_vocab: skipped 1 file(s) of our jobs' own that --input_file's globs matched: "
          f"{tmp_path}/folder/wiki.stats.json (stats); name a file without wildcards to read "
          "it\n") in folder.stdout
  assert not {"holdout", "splitter", "punkt"} & set(
      (tmp_path / "f" / "vocab.txt").read_text("utf-8").split("\n"))
