"""Atomic TFRecord writing: records go to a temporary name, renamed only when complete.

A crash leaves no file under the final name, so a re-run sees exactly what is missing and
a reader never meets half a shard. Examples are serialized by `example_encoder`, whole
columns at once.
"""
import contextlib
import itertools

import numpy as np
import tensorflow as tf

from bert_tf.common import files
from tfrecords import example_encoder
from tfrecords.schema import Feature

# Rows encoded per call of the column encoder.
_BLOCK_ROWS = 4096


def encode_examples(features: list[Feature], columns: dict) -> list[bytes]:
  """Serializes one `tf.train.Example` per row of `columns`.

  Args:
    features: the record layout.
    columns: feature name -> array [rows, f.length] (int for "int64", float for "float32").

  Returns:
    rows serialized Examples, byte for byte protobuf's deterministic serialization.
  """
  arrays = {}
  for f in features:
    array = np.asarray(columns[f.name], dtype=np.int64 if f.dtype == "int64" else np.float32)
    if array.ndim != 2 or array.shape[1] != f.length:
      raise ValueError(f"feature {f.name!r}: shape {array.shape}, expected [rows, {f.length}]")
    arrays[f.name] = array
  return example_encoder.encode(arrays)


def _padded(feature: Feature, value) -> np.ndarray:
  """`value` flattened and zero-padded to `feature.length`; ValueError if it is too long."""
  value = np.asarray(value).reshape(-1)
  if value.size > feature.length:
    raise ValueError(f"feature {feature.name!r}: {value.size} values, "
                     f"at most {feature.length} allowed")
  padded = np.zeros(feature.length, dtype=np.int64 if feature.dtype == "int64" else np.float32)
  padded[: value.size] = value
  return padded


def _encode_rows(features: list[Feature], rows: list[dict]) -> list[bytes]:
  columns = {f.name: np.stack([_padded(f, row[f.name]) for row in rows]) for f in features}
  return encode_examples(features, columns)


def encode_example(features: list[Feature], values: dict) -> bytes:
  """Serializes one `tf.train.Example` holding `values[f.name]` for each feature, zero-padded
  to `f.length`. Raises ValueError naming the feature when a value is too long."""
  return _encode_rows(features, [values])[0]


class AtomicRecordWriter:
  """A TFRecord file written under `<path>.tmp-<pid>` and renamed to `path` on a clean close.

  Use as a context manager; on an exception the temporary file is removed and `path` is left
  untouched.
  """

  def __init__(self, path: str, options: str | None = None):
    self.path = path
    # tf.io.gfile: the path may be gs:// (Cloud TPUs read records from buckets) or ram://.
    self._temporary = contextlib.ExitStack()
    self.tmp_path = self._temporary.enter_context(files.temporary_path(path))
    self._writer = tf.io.TFRecordWriter(self.tmp_path, options=options)
    self.count = 0

  def write(self, serialized: bytes) -> None:
    self._writer.write(serialized)
    self.count += 1

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    self._writer.close()
    return self._temporary.__exit__(exc_type, exc, tb)


def write_records(path: str, features: list[Feature], rows) -> int:
  """Writes each dict in `rows` as one Example to `path`, atomically. Returns the count."""
  rows = iter(rows)
  with AtomicRecordWriter(path) as writer:
    while block := list(itertools.islice(rows, _BLOCK_ROWS)):
      for record in _encode_rows(features, block):
        writer.write(record)
  return writer.count
