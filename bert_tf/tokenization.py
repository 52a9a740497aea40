"""THE tokenizer: google-research/bert's `FullTokenizer`, as TensorFlow ops.

One graph serves data_gen, the training tasks and the TF Serving model alike:

  raw text --(split_words: the reference's BasicTokenizer as RE2 regexes, ICU lower-casing and
  NFD)--> words --(tf_text.FastWordpieceTokenizer)--> wordpiece ids.

tensorflow-text's own BERT normaliser (`lower_case_nfd_strip_accents`) case-folds instead of
lower-casing (Greek final sigma and kappa symbol differ from Python's `str.lower`) and splits
at C1 controls that the reference deletes, so the normalisation here is spelled out step by
step to match the reference character for character. The character classes are computed from
Python's `unicodedata` and `str.lower`, the very tables the reference consults, so they agree
on every code point. Where TensorFlow's ICU lower-cases differently from Python (a locale
other than English, letters newer than its Unicode version, final sigma next to those),
`lower_case` steps in. One departure is left, on no real text: ICU's NFD knows 20 letters of
Unicode 16 scripts (Todhri, Tulu-Tigalari, Gurung Khema, Kirat Rai) that Python 3.11 leaves
undecomposed; tests/test_tokenization.py checks every code point.
"""
import collections
import functools
import hashlib
import os
import unicodedata

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.common.files import read_json, write_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
UNK_TOKEN = "[UNK]"
SUFFIX_INDICATOR = "##"
# The reference maps a word longer than this many characters (code points, after
# normalisation) to [UNK] without trying to piece it.
MAX_CHARS_PER_WORD = 200

# Case pairs added in Unicode 14 that Python 3.11's `str.lower` knows and the ICU inside
# TensorFlow 2.20's `tf.strings.lower` does not: code point ranges (first, last) and the
# offset to their lowercase.
_LOWER_FIXES = (
    (0x2C2F, 0x2C2F, 0x30),     # Glagolitic capital letter caudate chrivi
    (0xA7C0, 0xA7C0, 1),        # Latin capital old polish o
    (0xA7D0, 0xA7D0, 1),        # Latin capital closed insular g
    (0xA7D6, 0xA7D6, 1),        # Latin capital middle scots s
    (0xA7D8, 0xA7D8, 1),        # Latin capital sigmoid s
    (0x10570, 0x1057A, 0x27),   # Vithkuqi capitals
    (0x1057C, 0x1058A, 0x27),
    (0x1058C, 0x10592, 0x27),
    (0x10594, 0x10595, 0x27),
)


# The reference's "Chinese characters": the CJK Unified Ideographs blocks, assigned or not
# (kana and Hangul are space-separated scripts and not among them).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# The reference's punctuation besides Unicode's P*: all non-alphanumeric ASCII ("$", "^", "`"
# are symbols to Unicode).
_ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))


def _bracket(ranges) -> str:
  """An RE2 bracket expression for inclusive code point ranges [(first, last), ...]."""
  return "[" + "".join(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}"
                       for lo, hi in ranges) + "]"


def _ranges(code_points: list[int]) -> list[tuple[int, int]]:
  """Sorted code points -> maximal inclusive ranges."""
  ranges = []
  for cp in code_points:
    if ranges and ranges[-1][1] == cp - 1:
      ranges[-1][1] = cp
    else:
      ranges.append([cp, cp])
  return [tuple(r) for r in ranges]


def _classify(char: str, category: str) -> str | None:
  """Which of the reference's character classes `char` (an assigned character) is in."""
  if char in "\t\n\r":
    return "space"
  if char == "\ufffd" or category in ("Cc", "Cf"):
    return "dropped"  # By _clean_text, NUL included.
  if char != " " and (category == "Zs" or char.isspace()):
    # _clean_text's whitespace, and what else `str.split()` splits on (U+2028, U+2029);
    # " " itself needs no replacing by " ".
    return "space"
  if category.startswith("P") or any(lo <= ord(char) <= hi for lo, hi in _ASCII_PUNCTUATION):
    return "punctuation"
  if category == "Mn":
    return "nonspacing_mark"  # Stripped as accents after NFD.
  return None


def _sigma_context(char: str) -> str | None:
  """How Python's `str.lower` sees `char` around a capital sigma, asked of `str.lower` itself:
  "cased" (a sigma after it, with nothing after that, is final) or "case_ignorable" (skipped
  when looking for such a neighbour)."""
  if (char + "\u03a3").lower().endswith("\u03c2"):
    return "cased"
  if ("\u0391\u03a3" + char + "\u0392").lower()[1] == "\u03c3":
    return "case_ignorable"
  return None


@functools.cache
def _char_classes() -> dict[str, str]:
  """The reference's character classes as RE2 bracket expressions, from Python's own
  `unicodedata` and `str.lower`; computed once per process (~1 s)."""
  members = collections.defaultdict(list)
  for cp in range(0x110000):
    char = chr(cp)
    category = unicodedata.category(char)
    if category in ("Cn", "Co", "Cs"):  # Unassigned, private use, surrogates: in no class.
      continue
    for name in (_classify(char, category), _sigma_context(char)):
      if name:
        members[name].append(cp)
  classes = {name: _bracket(_ranges(cps)) for name, cps in members.items()}
  classes["cjk_or_punctuation"] = _bracket(
      sorted(_CJK_RANGES + tuple(_ranges(members["punctuation"]))))
  classes["lower_fixes"] = _bracket([(lo, hi) for lo, hi, _ in _LOWER_FIXES])
  return classes


def _fix_lower_case(texts: tf.Tensor) -> tf.Tensor:
  """Lower-cases the code points of `_LOWER_FIXES`, which ICU leaves as they are."""
  chars = tf.strings.unicode_decode(texts, "UTF-8")
  cps = chars.flat_values
  for lo, hi, offset in _LOWER_FIXES:
    cps = tf.where((cps >= lo) & (cps <= hi), cps + offset, cps)
  return tf.strings.unicode_encode(chars.with_flat_values(cps), "UTF-8")


def lower_capital_sigma(texts: tf.Tensor) -> tf.Tensor:
  """Python's final-sigma rule: capital sigma becomes final "ς" after a cased letter unless
  a cased letter follows (case-ignorables, like apostrophes and accents, skipped), else "σ".

  ICU knows the rule too, but not the letters Unicode added after its version.
  """
  classes = _char_classes()
  cased, ignorable = classes["cased"], classes["case_ignorable"]
  followed = f"\u03a3({ignorable}*{cased})"
  # A match consumes the letter after the sigma, which may be a sigma itself: a second pass
  # reaches those (each is now preceded by a lower-cased sigma, so never consumed again).
  texts = tf.strings.regex_replace(texts, followed, "\u03c3\\1")
  texts = tf.strings.regex_replace(texts, followed, "\u03c3\\1")
  texts = tf.strings.regex_replace(texts, f"({cased}{ignorable}*)\u03a3", "\\1\u03c2")
  return tf.strings.regex_replace(texts, "\u03a3", "\u03c3")


def lower_sigmas_in_context(texts: tf.Tensor) -> tf.Tensor:
  """Capital sigmas lower-cased by the context of the whole text, as the reference lower-cases
  whole words: a basic token alone (ΑΣ of ΑΣ'Β) would end in a final sigma. For graphs that
  split text with offsets first: the three sigmas have the same length, so offsets stay
  valid."""
  has_sigma = tf.reduce_any(tf.strings.regex_full_match(texts, "(?s).*\u03a3.*"))
  return tf.cond(has_sigma, lambda: lower_capital_sigma(texts), lambda: texts)


def lower_case(texts: tf.Tensor) -> tf.Tensor:
  """Python's `str.lower` as TF ops: [batch] tf.string -> [batch] tf.string.

  ICU lower-cases with the process's default locale, where Turkish or Azeri would turn "I"
  into dotless "ı", so ASCII goes first, locale-free, and capital sigma, whose context rule
  needs Python's view of which letters are cased. ICU then does the rest; the few code
  points it does not know yet are fixed up. The last two steps run only for the rare batches
  that need them. (Under a Turkish or Lithuanian locale, ICU still adds or drops a combining
  dot above on "i", which the uncased pipeline strips right after, as an accent.)
  """
  texts = tf.strings.lower(texts)
  rare = tf.reduce_any(tf.strings.regex_full_match(
      texts, f"(?s).*[\u03a3{_char_classes()['lower_fixes'][1:-1]}].*"))
  texts = tf.cond(rare, lambda: lower_capital_sigma(texts), lambda: texts)
  texts = tf.strings.lower(texts, encoding="utf-8")
  return tf.cond(rare, lambda: _fix_lower_case(texts), lambda: texts)


def valid_utf8(texts: tf.Tensor) -> tf.Tensor:
  """[batch] tf.string with each invalid UTF-8 sequence replaced by U+FFFD."""
  # Transcoding is slow: only for batches that need it.
  valid = tf.strings.regex_full_match(texts, r"[\x{0}-\x{D7FF}\x{E000}-\x{10FFFF}]*")
  return tf.cond(tf.reduce_all(valid), lambda: texts, lambda: tf.strings.unicode_transcode(
      texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD))


def split_words(texts: tf.Tensor, do_lower_case: bool) -> tf.RaggedTensor:
  """The reference's BasicTokenizer: [batch] tf.string -> [batch, (words)] tf.string.

  Invalid UTF-8 becomes U+FFFD, which the reference then deletes like any other
  replacement character.
  """
  classes = _char_classes()
  texts = valid_utf8(texts)
  texts = tf.strings.regex_replace(texts, classes["dropped"], "")
  texts = tf.strings.regex_replace(texts, classes["space"], " ")
  if do_lower_case:
    texts = lower_case(texts)
    texts = tf_text.normalize_utf8(texts, "NFD")
    texts = tf.strings.regex_replace(texts, classes["nonspacing_mark"], "")
  # After NFD, as in the reference: U+037E GREEK QUESTION MARK decomposes to ";", and the
  # CJK compatibility ideographs to unified ones.
  texts = tf.strings.regex_replace(texts, f"({classes['cjk_or_punctuation']})", r" \1 ")
  return tf.strings.split(texts)


def split_with_offsets(texts: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor,
                                                  tf.RaggedTensor]:
  """The BasicTokenizer's split (see `split_words`) without its normalisation, keeping where
  each token is: the text cut at whitespace, and around each punctuation mark and CJK
  character (kept as tokens). [batch] tf.string -> (tokens, begins, ends), [batch, (tokens)]
  each, the offsets in bytes. What the serving graphs map answers and entities back with."""
  classes = _char_classes()
  return tf_text.regex_split_with_offsets(
      texts, f"[ {classes['space'][1:-1]}]|{classes['cjk_or_punctuation']}",
      classes["cjk_or_punctuation"])


def _read_tokenizer_json(path: str) -> tuple[list[str], bool]:
  """(the tokens in id order, do_lower_case) of a `tokenizers` library tokenizer.json, as
  transformers 5 saves a BertTokenizer: a WordPiece model (`vocab`: token -> id), a
  BertNormalizer (lowercase; strip_accents, null meaning the same as lowercase;
  handle_chinese_chars; clean_text) and BertPreTokenizer. ValueError naming the file and the
  setting for anything google-research/bert's tokenizer does not do (its do_lower_case
  lower-cases and strips accents together)."""
  spec = read_json(path)
  model = spec.get("model") if isinstance(spec, dict) else None
  normalizer = spec.get("normalizer") or {}
  pre_tokenizer = spec.get("pre_tokenizer") or {}
  anyway = "; give --vocab_file (and --do_lower_case) to use its vocab anyway"
  if not isinstance(model, dict) or model.get("type") != "WordPiece":
    kind = model.get("type") if isinstance(model, dict) else None
    raise ValueError(f"{path}: model type {kind!r}, not BERT's WordPiece{anyway}")
  expected = {("model", "continuing_subword_prefix"): (model.get("continuing_subword_prefix"),
                                                       SUFFIX_INDICATOR),
              ("model", "unk_token"): (model.get("unk_token"), UNK_TOKEN),
              ("normalizer", "type"): (normalizer.get("type"), "BertNormalizer"),
              ("normalizer", "handle_chinese_chars"): (normalizer.get("handle_chinese_chars"),
                                                       True),
              ("normalizer", "clean_text"): (normalizer.get("clean_text"), True),
              ("pre_tokenizer", "type"): (pre_tokenizer.get("type"), "BertPreTokenizer")}
  for (part, key), (value, supported) in expected.items():
    if value != supported:
      raise ValueError(f"{path}: {part} {key} {value!r}, where google-research/bert's "
                       f"tokenizer has {supported!r}{anyway}")
  lowercase = normalizer.get("lowercase")
  strip_accents = normalizer.get("strip_accents")
  if not isinstance(lowercase, bool) or strip_accents not in (None, lowercase):
    raise ValueError(f"{path}: normalizer lowercase {lowercase!r} with strip_accents "
                     f"{strip_accents!r}: google-research/bert's do_lower_case lower-cases and "
                     f"strips accents together, or does neither{anyway}")
  vocab = model.get("vocab")
  if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
    raise ValueError(f"{path}: model vocab is not a map of tokens to the ids 0..n-1")
  return sorted(vocab, key=vocab.get), lowercase


def _is_tokenizer_json(vocab_file: str) -> bool:
  """Whether a vocab file is a `tokenizers` library tokenizer.json (all that transformers 5's
  save_pretrained writes of a BertTokenizer: no vocab.txt), not a vocab.txt: by its .json."""
  return vocab_file.endswith(".json")


def load_vocab(vocab_file: str) -> dict[str, int]:
  """Reads a vocab.txt (one token a line, the line number is its id) into token -> id, in the
  order of the ids; or a Hugging Face tokenizer.json's WordPiece tokens (`_read_tokenizer_json`).

  As in the reference's and transformers' load_vocab, a token on several lines takes its last
  line's id (google-research/bert's Chinese vocab as some copies ship it repeats one), the
  earlier line's id kept under a placeholder no word can be (it holds spaces, which split
  words), and logged; so is an empty line's (or one of whitespace: token "", no word either).

  Raises FileNotFoundError for a missing file.
  """
  if _is_tokenizer_json(vocab_file):
    if not tf.io.gfile.exists(vocab_file):
      raise FileNotFoundError(f"vocab file {vocab_file} not found")
    return {token: index for index, token in enumerate(_read_tokenizer_json(vocab_file)[0])}
  try:
    with tf.io.gfile.GFile(vocab_file, "r") as f:
      # Only "\n" ends a line, as for the reference's readline(): str.splitlines() would also
      # split at U+2028 and friends.
      lines = f.read().split("\n")
  except tf.errors.NotFoundError as e:
    raise FileNotFoundError(f"vocab file {vocab_file} not found") from e
  if lines[-1] == "":
    lines.pop()  # The final newline.
  tokens = [line.strip() or f"[empty line {number}]" for number, line in enumerate(lines, 1)]
  last = {token: index for index, token in enumerate(tokens)}
  for index, token in enumerate(tokens):
    if last[token] != index:
      logging.warning("%s:%d: token %r again on line %d, whose id it takes (as the reference "
                      "does)", vocab_file, index + 1, token, last[token] + 1)
      tokens[index] = f"[line {index + 1}, repeated on line {last[token] + 1}]"
  return {token: index for index, token in enumerate(tokens)}


def _unknown_if_too_long(words: tf.RaggedTensor) -> tf.RaggedTensor:
  """Replaces words over MAX_CHARS_PER_WORD characters by [UNK], as the reference does."""
  flat = words.flat_values

  def replace():
    too_long = tf.strings.length(flat, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
    return tf.where(too_long, UNK_TOKEN, flat)

  # Counting characters is slow; a word has at least as many bytes, which are free to count.
  maybe_long = tf.reduce_any(tf.strings.length(flat) > MAX_CHARS_PER_WORD)
  return words.with_flat_values(tf.cond(maybe_long, replace, lambda: flat))


class TokenizerModule(tf.Module):
  """The tokenizer's TF half: what a SavedModel holds.

  Saving it carries vocab.txt as the asset `vocab_file` and the flag `do_lower_case` as a
  variable, where TF Hub's BERT models keep them.
  """

  def __init__(self, vocab_file: str, inv_vocab: list[str], do_lower_case: bool,
               name: str = "tokenizer"):
    super().__init__(name=name)
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    self._lower = do_lower_case
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=inv_vocab, suffix_indicator=SUFFIX_INDICATOR, unknown_token=UNK_TOKEN,
        # Long words never get here (see __call__); 4 bytes is the longest UTF-8 character.
        max_bytes_per_word=4 * MAX_CHARS_PER_WORD, token_out_type=tf.int32,
        no_pretokenization=True)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def __call__(self, texts):
    """[batch] tf.string -> [batch, (pieces)] int32 wordpiece ids."""
    return self.word_pieces(texts).merge_dims(1, 2)

  def word_pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """[batch] tf.string -> [batch, (words), (pieces)] int32 wordpiece ids, word by word (what
    a TF Hub preprocessor's `tokenize` answers). Not a tf.function of its own: a SavedModel of
    this module keeps only its __call__."""
    words = _unknown_if_too_long(split_words(texts, self._lower))
    return self._wordpiece.tokenize(words)


def _stated_lower_case(vocab_file: str) -> tuple[bool, str] | None:
  """The do_lower_case that the model `vocab_file` belongs to states, and where: a
  tokenizer.json's normalizer (the vocab being the tokenizer.json), a TF Hub SavedModel's
  do_lower_case variable (the vocab being its assets/vocab.txt), or the tokenizer_config.json
  of a Hugging Face model folder beside it; None without any."""
  if _is_tokenizer_json(vocab_file):
    # What transformers tokenizes with; the tokenizer_config.json beside it only echoes it.
    return _read_tokenizer_json(vocab_file)[1], "its normalizer"
  assets = os.path.dirname(vocab_file)
  saved_model = os.path.dirname(assets)
  if (os.path.basename(assets) == "assets" and
      tf.io.gfile.exists(os.path.join(saved_model, "saved_model.pb"))):
    # Where TF Hub's BERT SavedModels keep it: the root object's variable.
    key = "do_lower_case/.ATTRIBUTES/VARIABLE_VALUE"
    reader = tf.train.load_checkpoint(os.path.join(saved_model, "variables", "variables"))
    if not reader.has_tensor(key):
      return None
    return bool(reader.get_tensor(key)), f"the do_lower_case variable of {saved_model}"
  path = os.path.join(assets, "tokenizer_config.json")
  if not tf.io.gfile.exists(path):
    return None
  config = read_json(path)
  stated = config.get("do_lower_case") if isinstance(config, dict) else None
  return (stated, "the tokenizer_config.json beside it") if isinstance(stated, bool) else None


def _has_accent(piece: str) -> bool:
  """Whether `piece` has a character the uncased normalisation strips (a nonspacing mark
  after NFD)."""
  return not piece.isascii() and any(unicodedata.category(c) == "Mn"
                                     for c in unicodedata.normalize("NFD", piece))


def _lower_case(vocab_file: str, inv_vocab: list[str], do_lower_case: bool | None) -> bool:
  """The do_lower_case to tokenize with: the one given, refused where it contradicts the vocab
  (as google-research/bert's `validate_case_matches_checkpoint` refused one that contradicts a
  known checkpoint's name); None (a flag not given) takes what the model states, else
  google-research/bert's default True, which the vocab's pieces may refuse as they would a
  True given.

  A wrong casing fails silently: an uncased vocab with do_lower_case False makes every
  capitalised word [UNK] (6% of the tokens of English; MRPC F1 0.07), and a cased vocab with
  True never produces its capitalised pieces. What the model states decides (a tokenizer.json's
  normalizer, a Hugging Face folder's tokenizer_config.json, a TF Hub SavedModel's
  do_lower_case: `_stated_lower_case`);
  else the vocab's pieces (bracketed special tokens such as [CLS] and [unused0] aside): any
  capital makes it cased; lower-case letters with neither capitals nor accents (which
  lower-casing strips) make it uncased; anything else (a vocab without cased scripts, or
  lower-case with accents) is left to the flag. Single characters and <S>-like markers do not
  count: Google's Chinese vocab, an uncased one (do_lower_case=True), lists the capitals A-Z
  alone beside its characters, and <S>, <T>.

  Raises:
    ValueError: naming the vocab, the contradiction and the value to pass.
  """
  if (found := _stated_lower_case(vocab_file)) is not None:
    stated, where = found
    if do_lower_case is not None and stated != do_lower_case:
      raise ValueError(
          f"{vocab_file}: do_lower_case={do_lower_case} contradicts {where}, which says "
          f"do_lower_case={stated} (the model is {'uncased' if stated else 'cased'}); leave "
          f"--do_lower_case out, or pass --do_lower_case={stated}")
    return stated
  if do_lower_case is None:
    do_lower_case = True
  pieces = [t for t in inv_vocab if not (t.startswith("[") and t.endswith("]"))]
  capitals = [t for t in pieces if t != t.lower() and len(t) > 1 and
              not (t.startswith("<") and t.endswith(">"))]
  if do_lower_case and capitals:
    raise ValueError(
        f"{vocab_file}: a cased vocab ({len(capitals)} word pieces with capitals, such as "
        f"{capitals[0]!r}) with do_lower_case=True, which lower-cases the text so that those "
        "pieces never occur; pass --do_lower_case=False")
  if (not do_lower_case and not capitals and any(t != t.upper() for t in pieces) and
      not any(map(_has_accent, pieces))):
    raise ValueError(
        f"{vocab_file}: an uncased vocab (no word piece has a capital or an accent) with "
        "do_lower_case=False, which keeps the text's capitals so that every word with one "
        "becomes [UNK] or wrong pieces; pass --do_lower_case=True")
  return do_lower_case


def _vocab_txt(vocab_file: str, inv_vocab: list[str]) -> str:
  """A vocab.txt of the tokens: `vocab_file` itself, or for a tokenizer.json, its tokens in
  TensorFlow's in-memory file system (ram://, named by their digest), where a SavedModel takes
  its asset from and a run copies its vocab.txt from, and nothing is left on disk."""
  if not _is_tokenizer_json(vocab_file):
    return vocab_file
  text = "".join(token + "\n" for token in inv_vocab)
  path = f"ram://bert_tf/vocab-{hashlib.sha256(text.encode()).hexdigest()[:16]}/vocab.txt"
  if not tf.io.gfile.exists(path):
    write_text(path, text)
  return path


class FullTokenizer:
  """google-research/bert's FullTokenizer: basic tokenization, then WordPiece.

  `vocab_file`: a vocab.txt, or a Hugging Face tokenizer.json (`vocab_txt` is then a vocab.txt
  of its tokens). `do_lower_case` True (uncased models) lower-cases and strips accents; False
  (cased) does neither; a value that contradicts the vocab is refused; None: what the model
  states, else True (`_lower_case`). Every method runs the same TF graph, `module`; attach
  `module` to a SavedModel to tokenize in serving.
  """

  def __init__(self, vocab_file: str, do_lower_case: bool | None = None):
    self.vocab_file = vocab_file
    self.vocab = load_vocab(vocab_file)
    missing = [t for t in SPECIAL_TOKENS if t not in self.vocab]
    if missing:
      raise ValueError(f"{vocab_file}: missing special token(s) {' '.join(missing)}")
    self.inv_vocab = list(self.vocab)
    self.do_lower_case = do_lower_case = _lower_case(vocab_file, self.inv_vocab, do_lower_case)
    self.vocab_txt = _vocab_txt(vocab_file, self.inv_vocab)
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        self.vocab[t] for t in SPECIAL_TOKENS)
    # Indexed by id: whether a piece continues a word (whole word masking needs it).
    self.is_continuation = np.array([t.startswith(SUFFIX_INDICATOR) for t in self.inv_vocab])
    self.module = TokenizerModule(self.vocab_txt, self.inv_vocab, do_lower_case)

  def tf_tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Graph-safe: [batch] tf.string -> [batch, (pieces)] int32 ids."""
    return self.module(texts)

  def tokenize_ids(self, texts: list[str]) -> list[np.ndarray]:
    """The batched fast path: one int32 array of wordpiece ids per text (str or bytes)."""
    if len(texts) == 0:  # pylint: disable=g-explicit-length-test  (a list or an array)
      return []
    ids = self.module(tf.constant(texts, dtype=tf.string))
    return np.split(ids.flat_values.numpy(), ids.row_splits.numpy()[1:-1])

  def tokenize(self, text: str) -> list[str]:
    """One text -> its wordpiece strings."""
    return self.convert_ids_to_tokens(self.tokenize_ids([text])[0])

  def convert_tokens_to_ids(self, tokens) -> list[int]:
    return [self.vocab[t] for t in tokens]

  def convert_ids_to_tokens(self, ids) -> list[str]:
    return [self.inv_vocab[i] for i in ids]
