"""Feature extraction: google-research/bert's extract_features.py as one library call (the
layers' hidden states are `bert_tf.modeling.feature_extractor`'s).

    extract(ExtractArgs(input_file=..., output_file=..., init_checkpoint=...))

input_file holds one example a line, `text_a` or `text_a ||| text_b` (the original's format);
its features are the original's ([CLS] a [SEP] (b [SEP]), the pair truncated from the longer
text). Layers: see `bert_tf.modeling.feature_extractor` (0 the embeddings, -1 the last).

Pooling picks each example's rows:
  none         every token, [CLS] and [SEP] included (the original's)
  cls          one row, [CLS]'s vector
  mean         one row, "[MEAN]": the mean over the example's tokens ([CLS] and [SEP]
               included: sentence-transformers' mean pooling)
  first_piece  one row per word, as the reference BasicTokenizer splits the text (the token
               is the normalised word), holding the word's first WordPiece's vector; words cut
               off by max_seq_length have none

output_format (the file is written under a temporary name, then renamed):
  jsonl     the original's layout, a line per example: {"linex_index": i, "features":
            [{"token": t, "layers": [{"index": l, "values": [...]}, ...]}, ...]}, values
            rounded to 6 decimals as the original's round(float(x), 6), byte for byte
  npz       linex_index int64 [N], row_splits int64 [N + 1] (example i's rows are
            row_splits[i]:row_splits[i + 1]), tokens str [rows], layers int64 [layers],
            values float32 [rows, layers, H]; streamed to disk, never whole in memory
  tfrecord  one tf.train.Example per example, TFRECORD_FEATURES: values [rows * layers * H]

The encoder runs as one tf.function traced once (any [batch, seq] shape); each chunk of
examples is sorted by length so that a batch pads only to its own longest example, and the
output of one chunk is written on a second thread while the encoder runs the next.
"""
import concurrent.futures
import contextlib
import dataclasses
import io
import json
import os
import re
import time
import zipfile
from typing import Iterator, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.common import output_lock
from bert_tf.common.errors import DataError
from bert_tf.modeling import checkpoints
from bert_tf.modeling.feature_extractor import FeatureExtractor, layer_positions, load_extractor
from bert_tf.finetuning import inputs
from bert_tf.finetuning import text_files
from bert_tf.tokenization import FullTokenizer
from tfrecords import writer

OUTPUT_FORMATS = ("jsonl", "npz", "tfrecord")
POOLINGS = ("none", "cls", "mean", "first_piece")
# The tfrecord output's Example, per example; values are [rows, layers, H] flattened.
TFRECORD_FEATURES = {
    "linex_index": tf.io.FixedLenFeature([1], tf.int64),
    "tokens": tf.io.VarLenFeature(tf.string),
    "layers": tf.io.VarLenFeature(tf.int64),
    "values": tf.io.VarLenFeature(tf.float32),
}
# The original's pair separator, spaces included ("a|||b" is one text to it).
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")
_MEAN_TOKEN = "[MEAN]"
# Batches per chunk: sorted by length within a chunk; two chunks of outputs are in memory.
_CHUNK_BATCHES = 8


@dataclasses.dataclass
class ExtractArgs:
  """extract_features' flags of the same names (--layers as integers)."""
  input_file: str
  output_file: str
  init_checkpoint: str
  layers: tuple[int, ...] = (-1, -2, -3, -4)
  bert_config_file: str | None = None
  vocab_file: str | None = None
  max_seq_length: int = 128
  do_lower_case: bool | None = True  # None: what the model states (`FullTokenizer`).
  batch_size: int = 32
  output_format: str = "jsonl"
  pooling: str = "none"


@dataclasses.dataclass
class InputExample:
  unique_id: int
  text_a: str
  text_b: str | None


@dataclasses.dataclass
class InputFeature:
  """One example's model inputs (int64 [max_seq_length] each, zero-padded) and its rows:
  `positions` (int [rows]) the tokens whose vectors are output, None for mean pooling."""
  unique_id: int
  input_ids: np.ndarray
  input_mask: np.ndarray
  segment_ids: np.ndarray
  length: int
  positions: np.ndarray | None
  row_tokens: list[str]


# ---------------------------------------------------------------------------------------------
# Examples and features.

def read_examples(input_file: str) -> list[InputExample]:
  """The original's read_examples: a line is `text_a` or `text_a ||| text_b`, stripped;
  unique_id is the line's index. Invalid UTF-8 is dropped, as the original's decoding does,
  with one warning naming the file's first such line and the counts (`text_files.read_text`).

  Raises DataError naming the file and line for an empty line or an empty side of |||."""
  # Only "\n" ends a line, as for the original's readline().
  lines = text_files.read_text(input_file, invalid="drop").split("\n")
  if lines[-1] == "":
    lines.pop()  # The final newline.
  if not lines:
    raise DataError(f"{input_file}: no examples (one sentence, or 'text_a ||| text_b', a line)")
  examples = []
  for number, line in enumerate(lines, start=1):
    line = line.strip()
    where = f"{input_file}:{number}"
    if not line:
      raise DataError(f"{where}: empty line (one sentence, or 'text_a ||| text_b', a line)")
    if line == "|||":
      raise DataError(f"{where}: both sides of ||| are empty")
    if line.startswith("||| ") or line.endswith(" |||"):
      side = "text_a, before" if line.startswith("|||") else "text_b, after"
      raise DataError(f"{where}: {side} |||, is empty")
    match = _PAIR.match(line)
    text_a, text_b = match.groups() if match else (line, None)
    examples.append(InputExample(number - 1, text_a, text_b))
  return examples


def _words(texts: list[str], do_lower_case: bool) -> list[list[str]]:
  """The reference BasicTokenizer's words of each text, normalised as the tokenizer does."""
  words = tokenization.split_words(tf.constant(texts, tf.string), do_lower_case)
  return [[w.decode("utf-8") for w in row] for row in words.to_list()]


def _first_pieces(ids: np.ndarray, len_a: int, tokenizer: FullTokenizer) -> tuple[np.ndarray, int]:
  """(positions of the words' first pieces, how many of them are in text_a) of one example's
  ids [length] ([CLS] a [SEP] (b [SEP]), text_a's pieces at 1..len_a)."""
  pieces = np.ones([len(ids)], bool)
  pieces[[0, len_a + 1, len(ids) - 1]] = False  # [CLS] and the [SEP]s.
  starts = np.flatnonzero(pieces & ~tokenizer.is_continuation[ids])
  return starts, int((starts <= len_a).sum())


def convert_examples(examples: list[InputExample], tokenizer: FullTokenizer,
                     max_seq_length: int, pooling: str = "none") -> list[InputFeature]:
  """The original's features (`classification.pack`: [CLS] a [SEP] (b [SEP])) and the rows
  `pooling` outputs. A text_b without any token makes no pair, as in the original."""
  if pooling not in POOLINGS:
    raise ValueError(f"--pooling={pooling}: not one of {', '.join(POOLINGS)}")
  texts_b = [e.text_b or "" for e in examples]
  ids_a = tokenizer.tokenize_ids([e.text_a for e in examples])
  ids_b = tokenizer.tokenize_ids(texts_b)
  if pooling == "first_piece":
    words_a = _words([e.text_a for e in examples], tokenizer.do_lower_case)
    words_b = _words(texts_b, tokenizer.do_lower_case)
  features = []
  for i, example in enumerate(examples):
    b = ids_b[i] if len(ids_b[i]) else None
    packed = inputs.pack(ids_a[i].astype(np.int64),
                                 None if b is None else b.astype(np.int64),
                                 max_seq_length, tokenizer)
    length = int(packed["input_mask"].sum())
    tokens = tokenizer.convert_ids_to_tokens(packed["input_ids"][:length])
    if pooling == "none":
      positions, row_tokens = np.arange(length), tokens
    elif pooling == "cls":
      positions, row_tokens = np.zeros([1], np.int64), tokens[:1]
    elif pooling == "mean":
      positions, row_tokens = None, [_MEAN_TOKEN]
    else:  # Words cut off by max_seq_length have no first piece, and no row.
      len_a = int((packed["segment_ids"][:length] == 0).sum()) - 2
      positions, in_a = _first_pieces(packed["input_ids"][:length], len_a, tokenizer)
      row_tokens = words_a[i][:in_a] + (words_b[i][:len(positions) - in_a] if b is not None
                                        else [])
    features.append(InputFeature(example.unique_id, packed["input_ids"], packed["input_mask"],
                                 packed["segment_ids"], length, positions, row_tokens))
  return features


# ---------------------------------------------------------------------------------------------
# The forward pass.

def sorted_batches(features: list[InputFeature], batch_size: int
                   ) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
  """(indexes into features, model inputs): batches of features of similar length (sorted),
  their inputs int32 [batch, seq] padded to the batch's own longest."""
  order = np.argsort([f.length for f in features], kind="stable")
  for start in range(0, len(order), batch_size):
    indexes = order[start:start + batch_size]
    seq = max(features[i].length for i in indexes)
    yield indexes, {name: np.stack([getattr(features[i], field)[:seq] for i in indexes]
                                   ).astype(np.int32)
                    for name, field in (("input_word_ids", "input_ids"),
                                        ("input_mask", "input_mask"),
                                        ("input_type_ids", "segment_ids"))}


def run_features(extractor: FeatureExtractor, features: list[InputFeature],
                 batch_size: int) -> list[np.ndarray]:
  """Each feature's rows (see InputFeature), float32 [rows, layers, H], in the features' order."""
  values = [None] * len(features)
  for indexes, batch in sorted_batches(features, batch_size):
    for i, state in zip(indexes, extractor.stacked(**batch)):
      f = features[i]
      values[i] = (state[:f.length].mean(axis=0, keepdims=True) if f.positions is None
                   else state[f.positions])
  return values


def chunks(features: list[InputFeature], batch_size: int) -> Iterator[list[InputFeature]]:
  """The features in the pieces that are sorted by length and held in memory at once."""
  size = batch_size * _CHUNK_BATCHES
  for start in range(0, len(features), size):
    yield features[start:start + size]


# ---------------------------------------------------------------------------------------------
# The outputs.

def _cells(texts: list[str], width: int = 4) -> np.ndarray:
  """uint32 [len(texts), width // 4]: each ASCII text's bytes, 0-padded to `width`, as machine
  words (so that writing them and reading the words' bytes gives the text back)."""
  cells = np.zeros([len(texts), width], np.uint8)
  for i, text in enumerate(texts):
    cells[i, :len(text)] = np.frombuffer(text.encode(), np.uint8)
  return cells.view(np.uint32)


# The text of a number of millionths m < 10**9, repr(m / 1e6) as json.dumps writes it, in four
# words of 0-padded bytes: [sign, whole part], [".", decimals 1-3], [decimals 4-6], [", "];
# trailing zeros dropped, but one decimal ("12.0").
_THOUSAND = range(1000)
_WHOLE = _cells([sign + str(i) for sign in ("", "-") for i in _THOUSAND])[:, 0]
_DECIMALS_1_3 = _cells([f".{i:03d}" for i in _THOUSAND] +  # decimals 4-6 follow
                       ["." + (f"{i:03d}".rstrip("0") or "0") for i in _THOUSAND])[:, 0]
_DECIMALS_4_6 = _cells([f"{i:03d}".rstrip("0") for i in _THOUSAND])[:, 0]
_SEPARATOR, _END = _cells([", ", "\n"])[:, 0]
# 1 to 99 millionths: repr's exponent form ("1.5e-05"), in the first three words.
_EXPONENT_FORM = _cells([sign + repr(m / 1e6) for sign in ("", "-") for m in range(100)], 12)


def _json_floats(values: np.ndarray) -> list[str] | None:
  """float32 [groups, n] -> per group, `json.dumps([round(float(x), 6) for x in row])`
  without its brackets; None if a value is not finite or 1000 or more (Python formats those).

  x * 1e6 is exact in float64 for a float32 x (24 + 14 significant bits), so rint(x * 1e6)
  is the correctly rounded number of millionths, round()'s; json.dumps writes its double as
  the shortest repr, which is those digits. Written here by table look-ups, ~10x faster than
  Python's float formatting: the JSON would otherwise cost more than the encoder."""
  groups, n = values.shape
  scaled = np.rint(values.astype(np.float64).reshape(-1) * 1e6)
  millionths = np.abs(scaled)
  if not (millionths < 1e9).all():
    return None
  millionths = millionths.astype(np.int32)
  negative = np.signbit(scaled).astype(np.int32)  # -0.0 too: Python writes "-0.0".
  whole, fraction = np.divmod(millionths, 1_000_000)
  high, low = np.divmod(fraction, 1000)
  words = np.empty([groups, n, 4], np.uint32)
  flat = words.reshape(-1, 4)
  flat[:, 0] = _WHOLE[whole + 1000 * negative]
  flat[:, 1] = _DECIMALS_1_3[high + 1000 * (low == 0)]
  flat[:, 2] = _DECIMALS_4_6[low]
  words[:, :, 3] = _SEPARATOR
  words[:, -1, 3] = _END
  small = np.flatnonzero((millionths > 0) & (millionths < 100))
  flat[small, :3] = _EXPONENT_FORM[millionths[small] + 100 * negative[small]]
  return words.tobytes().translate(None, b"\0").decode("ascii").split("\n")[:-1]


def json_line(unique_id: int, tokens: list[str], layers: Sequence[int],
              values: np.ndarray) -> str:
  """One example in the original's layout, its text exactly as the original's json.dumps
  writes it (values round(float(x), 6)); values float32 [rows, layers, H]."""
  rows, num_layers, hidden_size = values.shape
  floats = _json_floats(values.reshape(-1, hidden_size))
  if floats is None:
    floats = [json.dumps([round(float(x), 6) for x in group])[1:-1]
              for group in values.reshape(-1, hidden_size)]
  features = []
  for row, token in enumerate(tokens):
    groups = floats[row * num_layers:(row + 1) * num_layers]
    features.append(f'{{"token": {json.dumps(token)}, "layers": [' + ", ".join(
        f'{{"index": {layer}, "values": [{text}]}}' for layer, text in zip(layers, groups)) +
                    "]}")
  return f'{{"linex_index": {unique_id}, "features": [{", ".join(features)}]}}\n'


def _varint(n: int) -> bytes:
  out = bytearray()
  while n > 0x7F:
    out.append(n & 0x7F | 0x80)
    n >>= 7
  return bytes(out + bytes([n]))


def _float_feature(values: np.ndarray) -> tf.train.Feature:
  """A float_list Feature parsed from protobuf's packed bytes: a list of a million Python
  floats would take longer than the encoder."""
  data = np.ascontiguousarray(values, "<f4").tobytes()
  float_list = b"\x0a" + _varint(len(data)) + data  # FloatList.value (1), packed.
  return tf.train.Feature.FromString(b"\x12" + _varint(len(float_list)) + float_list)


def tf_example(unique_id: int, tokens: list[str], layers: Sequence[int],
               values: np.ndarray) -> bytes:
  """One example as a serialized tf.train.Example of TFRECORD_FEATURES."""
  return tf.train.Example(features=tf.train.Features(feature={
      "linex_index": tf.train.Feature(int64_list=tf.train.Int64List(value=[unique_id])),
      "tokens": tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[t.encode() for t in tokens])),
      "layers": tf.train.Feature(int64_list=tf.train.Int64List(value=layers)),
      "values": _float_feature(values),
  })).SerializeToString()


@contextlib.contextmanager
def _atomic(path: str):
  """Yields a temporary name beside `path`, renamed to `path` when the block succeeds and
  removed when it fails."""
  if os.path.dirname(path):
    tf.io.gfile.makedirs(os.path.dirname(path))
  tmp = f"{path}.tmp-{os.getpid()}"
  try:
    yield tmp
  except BaseException:
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.remove(tmp)
    raise
  tf.io.gfile.rename(tmp, path, overwrite=True)


class _WriteOnly(io.RawIOBase):
  """A GFile opened for writing, seen as not seekable: zipfile then streams its members
  (sizes after the data) instead of seeking back, which a GFile being written cannot."""

  def __init__(self, file):
    super().__init__()
    self._file = file

  def writable(self) -> bool:
    return True

  def write(self, data) -> int:
    self._file.write(bytes(data))
    return len(data)


def _npy_entry(archive: zipfile.ZipFile, name: str, shape: tuple, dtype: str) -> io.BufferedIOBase:
  """An open `<name>.npy` member of `archive` with its header written: the array's bytes
  (C order) are to follow."""
  entry = archive.open(f"{name}.npy", "w", force_zip64=True)
  np.lib.format.write_array_header_1_0(
      entry, {"descr": dtype, "fortran_order": False, "shape": tuple(int(n) for n in shape)})
  return entry


def _check_format(output_format: str) -> None:
  if output_format not in OUTPUT_FORMATS:
    raise ValueError(f"--output_format={output_format}: not one of {', '.join(OUTPUT_FORMATS)}")


@contextlib.contextmanager
def _writer(output_format: str, path: str, layers: Sequence[int],
            features: list[InputFeature], hidden_size: int):
  """Yields write(feature, values [rows, layers, H]), called in the features' order."""
  if output_format == "tfrecord":
    with writer.AtomicRecordWriter(path) as records:
      yield lambda f, values: records.write(tf_example(f.unique_id, f.row_tokens, layers, values))
    return
  with _atomic(path) as tmp, tf.io.gfile.GFile(tmp, "wb") as file:
    if output_format == "jsonl":
      yield lambda f, values: file.write(
          json_line(f.unique_id, f.row_tokens, layers, values).encode())
      return
    rows = [len(f.row_tokens) for f in features]
    with zipfile.ZipFile(_WriteOnly(file), "w") as archive:
      for name, array in (("linex_index", np.array([f.unique_id for f in features], np.int64)),
                          ("row_splits", np.cumsum([0] + rows, dtype=np.int64)),
                          ("tokens", np.array([t for f in features for t in f.row_tokens], str)),
                          ("layers", np.array(layers, np.int64))):
        with _npy_entry(archive, name, array.shape, array.dtype.str) as entry:
          entry.write(array.tobytes())
      with _npy_entry(archive, "values", (sum(rows), len(layers), hidden_size), "<f4") as entry:
        yield lambda f, values: entry.write(np.ascontiguousarray(values, "<f4").tobytes())


def extract(args: ExtractArgs) -> dict:
  """extract_features: input_file -> output_file (see the module doc).

  Returns {"examples", "rows", "seconds", "examples_per_second"}; the time is the encoder's
  and the writing's, from the first batch on (not loading the model)."""
  _check_format(args.output_format)
  if args.batch_size < 1:
    raise ValueError(f"--batch_size={args.batch_size}: must be positive")
  output_lock.check_not_input([args.output_file], "--output_file", [
      ("--input_file", args.input_file), ("--vocab_file", args.vocab_file or ""),
      ("--bert_config_file", args.bert_config_file or "")])
  config, vocab_file = checkpoints.resolve_files(args.bert_config_file, args.vocab_file,
                                            args.init_checkpoint, args.max_seq_length)
  layer_positions(args.layers, config.num_hidden_layers)
  tokenizer = FullTokenizer(vocab_file, args.do_lower_case)
  features = convert_examples(read_examples(args.input_file), tokenizer, args.max_seq_length,
                              args.pooling)
  extractor = load_extractor(args.init_checkpoint, args.layers, config)
  return write_features(extractor, features, args.output_format, args.output_file,
                        args.batch_size)


def write_features(extractor: FeatureExtractor, features: list[InputFeature],
                   output_format: str, output_file: str, batch_size: int = 32) -> dict:
  """The features' rows of the extractor's layers in output_file (see the module doc).

  Returns {"examples", "rows", "seconds", "examples_per_second"}: the encoder's and the
  writing's time."""
  _check_format(output_format)
  start = time.time()
  with _writer(output_format, output_file, extractor.layers, features,
               extractor.hidden_size) as write, \
       concurrent.futures.ThreadPoolExecutor(1) as pool:
    # The encoder runs the next chunk while the thread writes this one (TensorFlow's ops
    # release the GIL; JSON formatting is the writer's).
    pending = None
    for part in chunks(features, batch_size):
      values = run_features(extractor, part, batch_size)
      if pending:
        pending.result()
      pending = pool.submit(lambda p, v: [write(f, x) for f, x in zip(p, v)], part, values)
    pending.result()
  seconds = time.time() - start
  logging.info("%d examples in %.1f s", len(features), seconds)
  return {"examples": len(features), "rows": sum(len(f.row_tokens) for f in features),
          "seconds": seconds, "examples_per_second": len(features) / seconds}
