"""Atomic TFRecord writing: records go to a temporary name, renamed only when complete.

A crash leaves no file under the final name, so a re-run sees exactly what is missing and
a reader never meets half a shard.
"""
import os

import numpy as np
import tensorflow as tf

from tfrecords.schema import Feature


def encode_example(features: list[Feature], values: dict) -> bytes:
  """Serializes one `tf.train.Example` holding `values[f.name]` for each feature, zero-padded
  to `f.length`. Raises ValueError naming the feature when a value is too long."""
  proto = {}
  for f in features:
    value = np.asarray(values[f.name]).reshape(-1)
    if value.size > f.length:
      raise ValueError(f"feature {f.name!r}: {value.size} values, at most {f.length} allowed")
    padded = np.zeros(f.length, dtype=np.int64 if f.dtype == "int64" else np.float32)
    padded[: value.size] = value
    if f.dtype == "int64":
      proto[f.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=padded.tolist()))
    else:
      proto[f.name] = tf.train.Feature(float_list=tf.train.FloatList(value=padded.tolist()))
  return tf.train.Example(features=tf.train.Features(feature=proto)).SerializeToString()


class AtomicRecordWriter:
  """A TFRecord file written under `<path>.tmp-<pid>` and renamed to `path` on a clean close.

  Use as a context manager; on an exception the temporary file is removed and `path` is left
  untouched.
  """

  def __init__(self, path: str, options: str | None = None):
    self.path = path
    self.tmp_path = f"{path}.tmp-{os.getpid()}"
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    self._writer = tf.io.TFRecordWriter(self.tmp_path, options=options)
    self.count = 0

  def write(self, serialized: bytes) -> None:
    self._writer.write(serialized)
    self.count += 1

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    self._writer.close()
    if exc_type is None:
      os.replace(self.tmp_path, self.path)
    elif os.path.exists(self.tmp_path):
      os.remove(self.tmp_path)
    return False


def write_records(path: str, features: list[Feature], rows) -> int:
  """Writes each dict in `rows` as one Example to `path`, atomically. Returns the count."""
  with AtomicRecordWriter(path) as writer:
    for row in rows:
      writer.write(encode_example(features, row))
  return writer.count
