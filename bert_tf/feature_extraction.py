"""Feature extraction: google-research/bert's extract_features.py as one library call, and the
hidden states of chosen layers for a frozen-encoder model (the paper's feature-based NER).

    extract(ExtractArgs(input_file=..., output_file=..., init_checkpoint=...))
    FeatureExtractor(encoder, layers=(-1, -2, -3, -4)).hidden_states(ids, mask, types)

input_file holds one example a line, `text_a` or `text_a ||| text_b` (the original's format);
its features are the original's ([CLS] a [SEP] (b [SEP]), the pair truncated from the longer
text). Layers: 0 is the embedding output, 1..L the Transformer layers, and negatives count
from the last (-1 = L), which is Hugging Face's `hidden_states` indexing; the original's
"-1,-2,-3,-4" means the same four layers.

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
from typing import Sequence

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf import checkpoints
from bert_tf import tokenization
from bert_tf.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder
from bert_tf.tasks import DataError
from bert_tf.tasks import classification
from bert_tf.tasks import runner
from bert_tf.tokenization import FullTokenizer
from tfrecords import writer

OUTPUT_FORMATS = ("jsonl", "npz", "tfrecord")
POOLINGS = ("none", "cls", "mean", "first_piece")
# The encoder's layer whose output is the embeddings' (after their LayerNorm): what layer 0
# of BERT's hidden states is. Dropout follows it, inactive here.
EMBEDDING_OUTPUT_LAYER = "embeddings/layer_norm"
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
  do_lower_case: bool = True
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


def layer_positions(layers: Sequence[int], num_layers: int) -> list[int]:
  """--layers' indices -> positions in [embeddings, layer 1, ..., layer L] (0..L).

  Raises ValueError naming --layers and the valid range for an index outside the model."""
  if not layers:
    raise ValueError("--layers: no layer given")
  positions = []
  for layer in layers:
    if not -(num_layers + 1) <= layer <= num_layers:
      raise ValueError(
          f"--layers: layer {layer} is outside the model, which has {num_layers} layers: "
          f"0 (embeddings) to {num_layers}, or -{num_layers + 1} to -1 counting from the last")
    positions.append(layer % (num_layers + 1))
  return positions


class FeatureExtractor:
  """The hidden states of chosen layers of a BERT encoder (`build_encoder`'s), from one
  tf.function traced once for any batch and sequence length.

  For a frozen-encoder model (the paper's feature-based NER): `hidden_states` gives a list,
  one per entry of `layers` (see `layer_positions`), of float32 [batch, seq, H] tensors.
  """

  def __init__(self, encoder: tf_keras.Model, layers: Sequence[int]):
    self.layers = tuple(layers)
    encoder_outputs = encoder.output["encoder_outputs"]
    self._positions = layer_positions(self.layers, len(encoder_outputs))
    states = [encoder.get_layer(EMBEDDING_OUTPUT_LAYER).output] + list(encoder_outputs)
    # Only the layers up to the highest one asked for are computed (and no pooler).
    self.model = tf_keras.Model(encoder.input,
                                {str(p): states[p] for p in sorted(set(self._positions))})

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3)
  def hidden_states(self, input_word_ids, input_mask, input_type_ids) -> list[tf.Tensor]:
    """int32 [batch, seq] each -> per layer of `layers`, float32 [batch, seq, H]."""
    outputs = self.model(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                              input_type_ids=input_type_ids), training=False)
    return [outputs[str(p)] for p in self._positions]

  def stacked(self, input_word_ids, input_mask, input_type_ids) -> np.ndarray:
    """The same as numpy, the layers stacked: float32 [batch, seq, layers, H]."""
    states = self.hidden_states(*(tf.convert_to_tensor(x, tf.int32)
                                  for x in (input_word_ids, input_mask, input_type_ids)))
    return np.stack([s.numpy() for s in states], axis=2)


def load_extractor(init_checkpoint: str, layers: Sequence[int],
                   bert_config_file: str | None = None) -> FeatureExtractor:
  """A FeatureExtractor on the encoder of a Hugging Face folder, a google-research/bert or
  this project's checkpoint (`bert_tf.checkpoints`); its config from bert_config_file, else
  from beside the checkpoint."""
  config = (BertConfig.from_json_file(bert_config_file) if bert_config_file
            else checkpoints.load_config(init_checkpoint))
  layer_positions(layers, config.num_hidden_layers)  # Before the weights load.
  encoder = build_encoder(config)
  checkpoints.load_into_encoder(encoder, init_checkpoint)
  return FeatureExtractor(encoder, layers)


# ---------------------------------------------------------------------------------------------
# Examples and features.

def read_examples(input_file: str) -> list[InputExample]:
  """The original's read_examples: a line is `text_a` or `text_a ||| text_b`, stripped;
  unique_id is the line's index. Invalid UTF-8 is dropped, as the original's decoding does.

  Raises DataError naming the file and line for an empty line or an empty side of |||."""
  with tf.io.gfile.GFile(input_file, "rb") as f:
    # Only "\n" ends a line, as for the original's readline().
    lines = f.read().decode("utf-8", "ignore").split("\n")
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
    packed = classification.pack(ids_a[i].astype(np.int64),
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

def run_features(extractor: FeatureExtractor, features: list[InputFeature],
                 batch_size: int) -> list[np.ndarray]:
  """Each feature's rows (see InputFeature), float32 [rows, layers, H], in the features' order.
  Batches are of features of similar length (sorted), padded to their own longest."""
  order = np.argsort([f.length for f in features], kind="stable")
  values = [None] * len(features)
  for start in range(0, len(order), batch_size):
    indexes = order[start:start + batch_size]
    batch = [features[i] for i in indexes]
    seq = max(f.length for f in batch)
    states = extractor.stacked(*(np.stack([getattr(f, name)[:seq] for f in batch])
                                 for name in ("input_ids", "input_mask", "segment_ids")))
    for i, f, state in zip(indexes, batch, states):
      values[i] = (state[:f.length].mean(axis=0, keepdims=True) if f.positions is None
                   else state[f.positions])
  return values


# ---------------------------------------------------------------------------------------------
# The outputs.

def json_line(unique_id: int, tokens: list[str], layers: Sequence[int],
              values: np.ndarray) -> str:
  """One example in the original's layout; values float32 [rows, layers, H].

  x * 1e6 is exact in float64 for a float32 x (24 + 14 significant bits), so rint(x * 1e6)
  / 1e6 is the double nearest the correctly rounded decimal: round(float(x), 6), the
  original's, at numpy's speed. json.dumps writes floats as repr, as the original's did."""
  rounded = (np.rint(values.astype(np.float64) * 1e6) / 1e6).tolist()
  features = [{"token": token, "layers": [{"index": layer, "values": v}
                                          for layer, v in zip(layers, row)]}
              for token, row in zip(tokens, rounded)]
  return json.dumps({"linex_index": unique_id, "features": features}) + "\n"


def tf_example(unique_id: int, tokens: list[str], layers: Sequence[int],
               values: np.ndarray) -> bytes:
  """One example as a serialized tf.train.Example of TFRECORD_FEATURES."""
  def feature(**kwargs):
    return tf.train.Feature(**kwargs)
  return tf.train.Example(features=tf.train.Features(feature={
      "linex_index": feature(int64_list=tf.train.Int64List(value=[unique_id])),
      "tokens": feature(bytes_list=tf.train.BytesList(value=[t.encode() for t in tokens])),
      "layers": feature(int64_list=tf.train.Int64List(value=layers)),
      "values": feature(float_list=tf.train.FloatList(value=values.reshape(-1))),
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
  if args.output_format not in OUTPUT_FORMATS:
    raise ValueError(f"--output_format={args.output_format}: not one of "
                     f"{', '.join(OUTPUT_FORMATS)}")
  if args.batch_size < 1:
    raise ValueError(f"--batch_size={args.batch_size}: must be positive")
  config, vocab_file = runner.resolve_files(args, args.max_seq_length)
  layer_positions(args.layers, config.num_hidden_layers)
  tokenizer = FullTokenizer(vocab_file, args.do_lower_case)
  features = convert_examples(read_examples(args.input_file), tokenizer, args.max_seq_length,
                              args.pooling)
  encoder = build_encoder(config)
  checkpoints.load_into_encoder(encoder, args.init_checkpoint)
  extractor = FeatureExtractor(encoder, args.layers)
  start = time.time()
  chunk = args.batch_size * _CHUNK_BATCHES
  with _writer(args.output_format, args.output_file, args.layers, features,
               config.hidden_size) as write, \
       concurrent.futures.ThreadPoolExecutor(1) as pool:
    # The encoder runs the next chunk while the thread writes this one (TensorFlow's ops
    # release the GIL; JSON formatting is the writer's).
    pending = None
    for begin in range(0, len(features), chunk):
      part = features[begin:begin + chunk]
      values = run_features(extractor, part, args.batch_size)
      if pending:
        pending.result()
      pending = pool.submit(lambda p, v: [write(f, x) for f, x in zip(p, v)], part, values)
    pending.result()
  seconds = time.time() - start
  logging.info("%d examples in %.1f s", len(features), seconds)
  return {"examples": len(features), "rows": sum(len(f.row_tokens) for f in features),
          "seconds": seconds, "examples_per_second": len(features) / seconds}
