"""`tf.train.Example` serialization of whole columns at once, in numpy.

Building one proto object per record costs more than everything else the pretraining data
generator does; this encodes a block of rows in a few dozen array operations. The bytes are
protobuf's own deterministic serialization (map keys sorted), so readers cannot tell.

Numpy only, no TensorFlow: the data generator's worker processes encode their records with it
(`tfrecords.writer.encode_examples` is the checked entry point for everyone else).
"""
import numpy as np

# Rows encoded per numpy pass: bounds the temporary byte matrices to a few tens of MB.
_BLOCK_ROWS = 4096

# Protobuf wire tags (field number << 3 | wire type 2, length-delimited) of tf.train.Example.
_TAG_FIELD_1 = 0x0A      # Example.features, Features.feature (map entry), entry key, list value
_TAG_ENTRY_VALUE = 0x12  # map entry value (a Feature)
_TAG_FLOAT_LIST = 0x12   # Feature.float_list
_TAG_INT64_LIST = 0x1A   # Feature.int64_list


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
  """Protobuf varints of integer `values` [rows, k], as a byte matrix and what to keep of it.

  Each value gets a slot of w bytes (w: the longest varint among `values`) of which the first
  ones are its varint. Negative values take 10 bytes (two's complement), as in protobuf.

  Returns:
    (bytes, keep): uint8 and bool, both [rows, k * w]; keep is None when all bytes are kept.
  """
  values = np.asarray(values)
  if values.size and (values.min() < 0 or values.max() >= 1 << 32):
    rest = values.astype(np.int64).view(np.uint64)
  else:  # the usual case, several times cheaper in 32 bits
    rest = values.astype(np.uint32)
  width = max(1, (int(rest.max(initial=0)).bit_length() + 6) // 7)
  if width == 1:
    return rest.astype(np.uint8), None
  data = np.empty(values.shape + (width,), np.uint8)
  keep = np.empty(values.shape + (width,), bool)
  keep[..., 0] = True
  for slot in range(width):
    low = (rest & 0x7F).astype(np.uint8)
    rest = rest >> 7
    more = rest != 0
    data[..., slot] = low | (more.astype(np.uint8) << 7)   # the continuation bit
    if slot + 1 < width:
      keep[..., slot + 1] = more
  rows = values.shape[0]
  return data.reshape(rows, -1), keep.reshape(rows, -1)


def _kept(data: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
  """Bytes kept per row: [rows]."""
  return np.full(len(data), data.shape[1]) if keep is None else keep.sum(axis=1)


def _constant(data: bytes, rows: int) -> tuple[np.ndarray, None]:
  return np.broadcast_to(np.frombuffer(data, np.uint8), (rows, len(data))), None


def _length_prefixed(tag: int, inner: np.ndarray) -> tuple[list, np.ndarray]:
  """The `tag` and varint length that open a field holding `inner` [rows] bytes.

  Returns (pieces, total): the pieces to write before the inner bytes, and the field's full
  length per row.
  """
  length = _varints(inner[:, None])
  return [_constant(bytes([tag]), len(inner)), length], 1 + _kept(*length) + inner


def _feature_pieces(name: str, values: np.ndarray) -> tuple[list, np.ndarray]:
  """The map entry `name -> Feature` of every row: (pieces, length per row)."""
  rows = values.shape[0]
  if np.issubdtype(values.dtype, np.floating):
    payload = (np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(rows, -1), None)
    list_tag = _TAG_FLOAT_LIST
  else:
    payload = _varints(values)
    list_tag = _TAG_INT64_LIST
  packed_head, packed_len = _length_prefixed(_TAG_FIELD_1, _kept(*payload))  # packed values
  list_head, list_len = _length_prefixed(list_tag, packed_len)               # Int64/FloatList
  key_bytes = name.encode()
  key_len = _varints(np.array([[len(key_bytes)]]))[0][0].tobytes()
  key = bytes([_TAG_FIELD_1]) + key_len + key_bytes
  value_head, value_len = _length_prefixed(_TAG_ENTRY_VALUE, list_len)       # Feature
  entry_head, entry_len = _length_prefixed(_TAG_FIELD_1, len(key) + value_len)
  pieces = (entry_head + [_constant(key, rows)] + value_head + list_head + packed_head +
            [payload])
  return pieces, entry_len


def _encode_block(columns: dict[str, np.ndarray]) -> list[bytes]:
  rows = len(next(iter(columns.values())))
  body, body_len = [], np.zeros(rows, np.int64)
  for name in sorted(columns):
    pieces, length = _feature_pieces(name, columns[name])
    body += pieces
    body_len += length
  head, _ = _length_prefixed(_TAG_FIELD_1, body_len)                         # Example.features
  pieces = head + body
  data = np.concatenate([p for p, _ in pieces], axis=1)
  keep = np.concatenate([np.ones(p.shape, bool) if k is None else k for p, k in pieces], axis=1)
  ends = np.cumsum(keep.sum(axis=1)).tolist()
  blob = data[keep].tobytes()
  return [blob[start:end] for start, end in zip([0] + ends[:-1], ends)]


def encode(columns: dict[str, np.ndarray]) -> list[bytes]:
  """One serialized `tf.train.Example` per row of `columns`.

  Args:
    columns: feature name -> [rows, length] array, the same rows for all; an integer array
      becomes an int64_list, a floating one a float_list (float32).

  Returns:
    rows serialized Examples.
  """
  rows = len(next(iter(columns.values())))
  records = []
  for start in range(0, rows, _BLOCK_ROWS):
    records += _encode_block({k: v[start:start + _BLOCK_ROWS] for k, v in columns.items()})
  return records
