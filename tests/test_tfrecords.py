"""The record layer: the numpy Example encoder against protobuf, the atomic writer, and the
tf.data reader (renaming, static shapes, InputContext sharding) on records written here."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tfrecords import datasets, schema, writer

SEQ, PRED = 16, 4


def _protobuf_bytes(features, values) -> bytes:
  """The reference: tf.train.Example built field by field, serialized deterministically."""
  proto = {}
  for f in features:
    padded = np.zeros(f.length, np.int64 if f.dtype == "int64" else np.float32)
    flat = np.asarray(values[f.name]).reshape(-1)
    padded[:flat.size] = flat
    if f.dtype == "int64":
      proto[f.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=padded.tolist()))
    else:
      proto[f.name] = tf.train.Feature(float_list=tf.train.FloatList(value=padded.tolist()))
  return tf.train.Example(features=tf.train.Features(feature=proto)).SerializeToString(
      deterministic=True)


def test_encoder_equals_protobuf_byte_for_byte():
  rng = np.random.default_rng(0)
  features = schema.pretraining_features(SEQ, PRED) + [schema.Feature("any_int", "int64", 5)]
  for _ in range(300):
    values = {}
    for f in features:
      size = rng.integers(0, f.length + 1)  # zero-padding of short values too
      if f.dtype == "int64":
        values[f.name] = rng.integers(0, 1 << int(rng.integers(1, 63)), size)
      else:
        values[f.name] = rng.normal(size=size) * 10.0 ** rng.integers(-30, 30)
    # Negative and extreme int64s take protobuf's 10-byte varints.
    values["any_int"] = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, 5,
                                     dtype=np.int64, endpoint=True)
    assert writer.encode_example(features, values) == _protobuf_bytes(features, values)


def test_encoder_rejects_values_that_do_not_fit():
  features = schema.pretraining_features(SEQ, PRED)
  values = {f.name: [1] for f in features}
  values["masked_lm_ids"] = list(range(PRED + 1))
  with pytest.raises(ValueError, match="masked_lm_ids"):
    writer.encode_example(features, values)
  columns = {f.name: np.zeros((3, f.length)) for f in features}
  columns["input_ids"] = np.zeros((3, SEQ + 1))
  with pytest.raises(ValueError, match="input_ids"):
    writer.encode_examples(features, columns)


def _rows(count, seed=0):
  rng = np.random.default_rng(seed)
  rows = []
  for i in range(count):
    length = int(rng.integers(5, SEQ + 1))
    rows.append({
        "input_ids": np.concatenate([[1000 + i], rng.integers(1, 30000, length - 1)]),
        "input_mask": np.ones(length, np.int64),
        "segment_ids": (np.arange(length) >= length // 2).astype(np.int64),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, length), 2, replace=False)),
        "masked_lm_ids": rng.integers(1, 30000, 2),
        "masked_lm_weights": np.ones(2, np.float32),
        "next_sentence_labels": i % 2,
    })
  return rows


def _write_shards(tmp_path, rows, num_files):
  features = schema.pretraining_features(SEQ, PRED)
  paths = []
  for k in range(num_files):
    paths.append(str(tmp_path / f"data-{k}.tfrecord"))
    assert writer.write_records(paths[-1], features, rows[k::num_files]) == len(rows[k::num_files])
  return paths


def _first_ids(batches):
  return sorted(int(ids[0]) for batch in batches for ids in batch["input_word_ids"].numpy())


def test_round_trip_through_the_reader(tmp_path):
  rows = _rows(37)
  _write_shards(tmp_path, rows, 3)
  ds = datasets.pretraining_dataset(str(tmp_path / "data-*.tfrecord"), SEQ, PRED, batch_size=8,
                                    is_training=False)
  batches = list(ds)
  assert sum(len(b["input_word_ids"]) for b in batches) == 37   # evaluation keeps the tail
  got = {}
  for b in batches:
    for i in range(len(b["input_word_ids"])):
      got[int(b["input_word_ids"][i, 0])] = {k: v[i].numpy() for k, v in b.items()}
  assert set(batches[0]) == {"input_word_ids", "input_mask", "input_type_ids",
                             "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                             "next_sentence_labels"}
  for row in rows:
    out = got[int(row["input_ids"][0])]
    n = len(row["input_ids"])
    np.testing.assert_array_equal(out["input_word_ids"][:n], row["input_ids"])
    assert not out["input_word_ids"][n:].any() and not out["input_mask"][n:].any()
    np.testing.assert_array_equal(out["input_type_ids"][:n], row["segment_ids"])
    np.testing.assert_array_equal(out["masked_lm_positions"][:2], row["masked_lm_positions"])
    np.testing.assert_array_equal(out["masked_lm_weights"], [1, 1, 0, 0])
    assert out["next_sentence_labels"].tolist() == [row["next_sentence_labels"]]
    assert out["input_word_ids"].dtype == np.int32 and out["masked_lm_weights"].dtype == np.float32


def test_training_batches_have_static_shapes(tmp_path):
  _write_shards(tmp_path, _rows(37), 3)
  ds = datasets.pretraining_dataset(str(tmp_path / "*.tfrecord"), SEQ, PRED, batch_size=8,
                                    is_training=True, seed=1)
  assert ds.element_spec["input_word_ids"].shape == [8, SEQ]
  assert ds.element_spec["masked_lm_weights"].shape == [8, PRED]
  assert ds.element_spec["next_sentence_labels"].shape == [8, 1]
  first = next(iter(ds))
  assert first["input_word_ids"].shape == (8, SEQ)


def test_training_reads_every_record_once_per_epoch_in_a_new_order(tmp_path):
  """Epochs do not mix, even with a shuffle buffer larger than the data: a small fine-tuning
  set is seen like Hugging Face's or PyTorch's sampler sees it."""
  rows = _rows(40)
  _write_shards(tmp_path, rows, 3)
  def first_ids():
    ds = datasets.pretraining_dataset(str(tmp_path / "*.tfrecord"), SEQ, PRED, batch_size=8,
                                      is_training=True, seed=3)
    return [int(i) for batch in ds.take(15) for i in batch["input_word_ids"][:, 0].numpy()]
  ids = first_ids()
  epochs = [ids[k:k + 40] for k in range(0, 120, 40)]
  for epoch in epochs:
    assert sorted(epoch) == [1000 + i for i in range(40)]
  assert epochs[0] != epochs[1] != epochs[2]
  # The same for the same seed (what resuming a run relies on).
  assert first_ids() == ids


@pytest.mark.parametrize("num_files", [4, 1])
def test_input_context_gives_each_pipeline_a_disjoint_share(tmp_path, num_files):
  """With at least as many files as pipelines each reads its own files; with fewer, its own
  records. Either way the shares are disjoint and cover everything once."""
  rows = _rows(40)
  _write_shards(tmp_path, rows, num_files)
  shares = []
  for pipeline_id in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                         num_replicas_in_sync=2)
    ds = datasets.pretraining_dataset(str(tmp_path / "*.tfrecord"), SEQ, PRED, batch_size=8,
                                      is_training=False, input_context=context)
    batches = list(ds)
    assert max(len(b["input_word_ids"]) for b in batches) == 4   # the per-replica batch
    shares.append(_first_ids(batches))
  assert not set(shares[0]) & set(shares[1])
  assert sorted(shares[0] + shares[1]) == sorted(int(r["input_ids"][0]) for r in rows)


def test_atomic_writer_leaves_no_partial_file(tmp_path):
  path = str(tmp_path / "out" / "shard.tfrecord")
  record = writer.encode_example(schema.pretraining_features(SEQ, PRED), _rows(1)[0])
  with pytest.raises(RuntimeError):
    with writer.AtomicRecordWriter(path) as w:
      w.write(record)
      assert os.path.exists(w.tmp_path) and not os.path.exists(path)
      raise RuntimeError("crash mid-shard")
  assert os.listdir(tmp_path / "out") == []
  with writer.AtomicRecordWriter(path) as w:
    w.write(record)
  assert os.listdir(tmp_path / "out") == ["shard.tfrecord"]
  assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [record]


def test_a_damaged_file_met_while_reading_is_named_with_the_byte_offset(tmp_path):
  paths = _write_shards(tmp_path, _rows(40), 2)
  intact = open(paths[1], "rb").read()
  open(paths[1], "wb").write(intact[:-100])  # A copy cut short.
  with pytest.raises(datasets.DamagedRecordsError,
                     match=rf"^{paths[1]}: damaged: truncated record at byte \d+ \(the file was "
                           "cut short"):
    with datasets.naming_damaged_file(paths):
      list(datasets.pretraining_dataset(paths, SEQ, PRED, batch_size=8, is_training=False))
  flipped = bytearray(intact)
  flipped[len(intact) // 2] ^= 0xFF
  open(paths[1], "wb").write(flipped)
  with pytest.raises(datasets.DamagedRecordsError,
                     match=rf"^{paths[1]}: damaged: corrupted record at byte \d+"):
    with datasets.naming_damaged_file(paths):
      list(datasets.pretraining_dataset(paths, SEQ, PRED, batch_size=8, is_training=False))
  # A DataLossError that no record file explains passes as it is.
  with pytest.raises(tf.errors.DataLossError, match="elsewhere"):
    with datasets.naming_damaged_file(paths[:1]):
      raise tf.errors.DataLossError(None, None, "elsewhere")


def test_first_record_refuses_files_that_are_not_record_files(tmp_path):
  [path] = _write_shards(tmp_path, _rows(3), 1)
  assert tf.train.Example.FromString(datasets.first_record(path))
  stats = tmp_path / "data.stats.json"  # What create_pretraining_data writes beside its shards.
  stats.write_text('{\n  "documents": 3,\n  "instances": 3\n}\n')
  short = tmp_path / "short"
  short.write_bytes(b"{}\n")
  (tmp_path / "empty").write_bytes(b"")
  with pytest.raises(datasets.DamagedRecordsError,
                     match=f"^{stats}: not a TFRecord file \\(no record header at its start\\)"):
    datasets.first_record(str(stats))
  with pytest.raises(datasets.DamagedRecordsError,
                     match=f"^{short}: not a TFRecord file \\(3 bytes, less than one record"):
    datasets.first_record(str(short))
  assert datasets.first_record(str(tmp_path / "empty")) is None
