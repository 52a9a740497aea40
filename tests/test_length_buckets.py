"""Length-bucketed training batches (`tfrecords.datasets.length_bucketed`): every record drawn
as often as unbucketed, each batch cut to its bucket and nothing else, seeded; random batches
as sorted micro-batches with the padded batch's loss and gradient; evaluation batches keep
their records' order, each cut; the runner's choice of buckets. That each task's cut batch
has its padded loss, and predicts in order of length as fully padded, is the task contract's
(test_task_contract.py)."""
import collections
import itertools

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.modeling.configs import BertConfig
from bert_tf.finetuning import runner
from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask
from bert_tf.tasks.multiple_choice import MultipleChoiceConfig, MultipleChoiceTask
from bert_tf.tasks.squad.task import SquadConfig, SquadTask
from bert_tf.training import distribute
from bert_tf.training import loop
from tfrecords import datasets, schema, writer
from toys import VOCAB, make_sst2, tiny_config

SEQ = 32


def _token_columns(rng, lengths: list[int], seq: int, record_id: int) -> dict:
  """input_ids (record_id * 1000 + position + 1 over each sequence's tokens), input_mask,
  segment_ids for sequences of the given lengths, each zero-padded to seq."""
  ids, mask, segments = (np.zeros(len(lengths) * seq, np.int64) for _ in range(3))
  for i, length in enumerate(lengths):
    span = slice(i * seq, i * seq + length)
    ids[span] = record_id * 1000 + np.arange(length) + 1
    mask[span] = 1
    segments[span] = rng.integers(0, 2, length)
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _write_choice_records(path: str, num_records: int, num_choices: int = 2) -> list[dict]:
  rng = np.random.default_rng(0)
  records = []
  for r in range(num_records):
    lengths = rng.integers(2, SEQ + 1, num_choices).tolist()
    records.append({**_token_columns(rng, lengths, SEQ, r), "label_ids": np.array([r]),
                    "is_real_example": np.array([1])})
  writer.write_records(path, schema.multiple_choice_features(SEQ, num_choices), records)
  return records


def test_each_record_is_drawn_once_per_epoch_and_each_batch_is_cut_to_its_bucket(tmp_path):
  # 200 records in batches of 4: a megabatch of 50 batches is an epoch, so over whole epochs
  # the counts are exact (a megabatch's batches come out in a random order).
  num_records, batch, epochs, buckets = 200, 4, 3, 4
  path = str(tmp_path / "train.tf_record")
  records = _write_choice_records(path, num_records)
  layout = schema.multiple_choice_features(SEQ, 2)
  ds = datasets.record_dataset([path], layout, batch, True, seed=7, length_buckets=buckets)
  assert ds.element_spec["input_word_ids"].shape.as_list() == [batch, None]
  width = datasets.bucket_width(SEQ, buckets)
  assert width == 8
  drawn, lengths = collections.Counter(), collections.Counter()
  for features in ds.take(num_records * epochs // batch):
    cut = features["input_word_ids"].shape[1] // 2
    lengths[cut] += 1
    longest = 0
    for row in range(batch):
      record = records[int(features["label_ids"][row, 0])]
      drawn[int(features["label_ids"][row, 0])] += 1
      for name, model_name in schema.MODEL_INPUT_NAMES.items():
        expected = record[name].reshape(2, SEQ)[:, :cut].reshape(-1)
        np.testing.assert_array_equal(features[model_name][row].numpy(), expected)
      longest = max(longest, record["input_mask"].reshape(2, SEQ).sum(-1).max())
    # The shortest bucket length that holds the batch's longest sequence.
    assert cut == -(-longest // width) * width
  assert set(drawn.values()) == {epochs} and len(drawn) == num_records
  # Sorting megabatches makes most batches shorter than max_seq_length.
  assert set(lengths) == {8, 16, 24, 32} and lengths[SEQ] < sum(lengths.values()) / 2


def test_bucket_widths_are_multiples_of_8_or_exact():
  assert [datasets.bucket_width(128, n) for n in (1, 4, 16, 32, 64)] == [128, 32, 8, 8, 8]
  assert datasets.bucket_width(384, 16) == 24
  assert datasets.bucket_width(128, 128) == datasets.bucket_width(128, 500) == 1


def test_with_a_bucket_per_length_each_batch_is_cut_to_its_longest(tmp_path):
  path = str(tmp_path / "train.tf_record")
  records = _write_choice_records(path, 200)
  ds = datasets.record_dataset([path], schema.multiple_choice_features(SEQ, 2), 4, True,
                               seed=5, length_buckets=SEQ)
  cuts = set()
  for features in ds.take(100):
    longest = max(records[int(label)]["input_mask"].reshape(2, SEQ).sum(-1).max()
                  for label in features["label_ids"][:, 0])
    cut = features["input_word_ids"].shape[1] // 2
    assert cut == longest
    cuts.add(cut)
  assert len(cuts) > 8  # Lengths that are not multiples of 8 among them.


def test_without_grouping_each_batch_of_the_stream_is_only_cut(tmp_path):
  """group_by_length=False (a loss that is a mean over tokens): the batches hold the records
  that unbucketed batches of the same seed hold, each batch cut to its longest."""
  path = str(tmp_path / "train.tf_record")
  records = _write_choice_records(path, 200)
  layout = schema.multiple_choice_features(SEQ, 2)
  kwargs = dict(seed=3, records_per_epoch=200)
  cut = datasets.record_dataset([path], layout, 4, True, length_buckets=SEQ,
                                group_by_length=False, **kwargs)
  padded = datasets.record_dataset([path], layout, 4, True, **kwargs)
  lengths = set()
  for a, b in zip(cut.take(60), padded.take(60)):
    rows = a["label_ids"][:, 0].numpy().tolist()
    assert sorted(rows) == sorted(b["label_ids"][:, 0].numpy().tolist())
    longest = max(records[r]["input_mask"].reshape(2, SEQ).sum(-1).max() for r in rows)
    assert a["input_word_ids"].shape[1] // 2 == longest
    lengths.add(longest)
  assert len(lengths) > 1


def _labels_in_order(ds: tf.data.Dataset, steps: int) -> list[int]:
  return [int(x) for f in ds.take(steps) for x in f["label_ids"][:, 0]]


def test_batches_follow_the_seed(tmp_path):
  path = str(tmp_path / "train.tf_record")
  _write_choice_records(path, 200)
  layout = schema.multiple_choice_features(SEQ, 2)

  def order(seed):
    return _labels_in_order(datasets.record_dataset(
        [path], layout, 4, True, seed=seed, length_buckets=4), 100)

  assert order(3) == order(3)
  assert order(3) != order(4)


def test_a_small_datasets_megabatch_holds_each_record_once(tmp_path):
  """200 records in batches of 8 would make 400-record megabatches: every record twice,
  the copies sorted side by side into one batch; one epoch per megabatch at most instead."""
  path = str(tmp_path / "train.tf_record")
  _write_choice_records(path, 200)
  ds = datasets.record_dataset([path], schema.multiple_choice_features(SEQ, 2), 8, True,
                               seed=1, length_buckets=4, records_per_epoch=200)
  for features in ds.take(50):
    labels = features["label_ids"][:, 0].numpy().tolist()
    assert len(set(labels)) == len(labels), labels


@pytest.mark.parametrize("buckets", [SEQ, 4])
def test_evaluation_batches_keep_the_order_each_cut_to_its_bucket(tmp_path, buckets):
  path = str(tmp_path / "eval.tf_record")
  records = _write_choice_records(path, 10)
  ds = datasets.record_dataset([path], schema.multiple_choice_features(SEQ, 2), 4, False,
                               length_buckets=buckets)
  width = datasets.bucket_width(SEQ, buckets)
  labels = []
  for features in ds:  # 4, 4 and the last 2: nothing dropped.
    rows = features["label_ids"][:, 0].numpy().tolist()
    longest = max(records[r]["input_mask"].reshape(2, SEQ).sum(-1).max() for r in rows)
    cut = features["input_word_ids"].shape[1] // 2
    assert cut == -(-longest // width) * width
    for row, r in enumerate(rows):
      for name, model_name in schema.MODEL_INPUT_NAMES.items():
        expected = records[r][name].reshape(2, SEQ)[:, :cut].reshape(-1)
        np.testing.assert_array_equal(features[model_name][row].numpy(), expected)
    labels += rows
  assert labels == list(range(10))


def _task_records(kind: str, rng, num_records: int) -> list[dict]:
  """Training records of classification's or multiple choice's layout, every sequence at most
  SEQ // 2 tokens (so the bucketed batch is cut)."""
  records = []
  for r in range(num_records):
    num_sequences = 4 if kind == "multiple_choice" else 1
    lengths = rng.integers(3, SEQ // 2 + 1, num_sequences).tolist()
    record = _token_columns(rng, lengths, SEQ, 0)
    record["input_ids"] = np.where(record["input_mask"] == 1,
                                   rng.integers(1000, 2000, record["input_ids"].shape), 0)
    record["label_ids"] = rng.integers(0, num_sequences if num_sequences > 1 else 2, [1])
    record["is_real_example"] = np.array([1])
    records.append(record)
  return records


# Tasks of the padding's three kinds: a loss that ignores it, one per choice, one that reads it
# (every task holds to the task contract: test_task_contract.py).
TASKS = {
    "classification": lambda: ClassificationTask(ClassificationConfig(
        max_seq_length=SEQ, labels=["0", "1"])),
    "squad": lambda: SquadTask(SquadConfig(max_seq_length=SEQ, doc_stride=8,
                                           max_query_length=8)),
    "multiple_choice": lambda: MultipleChoiceTask(MultipleChoiceConfig(
        max_seq_length=SEQ, num_choices=4)),
}


@pytest.mark.parametrize("jit_compile,flag,expected", [
    (False, None, SEQ),  # Uncompiled, a batch length costs nothing: each cut to its longest.
    (True, None, runner.COMPILED_LENGTH_BUCKETS),  # One XLA program per length: few lengths.
    (False, 4, 4), (True, 0, 0)])
def test_the_runner_buckets_by_exact_lengths_unless_compiled(jit_compile, flag, expected):
  strategy = distribute.get_strategy("one_device")
  args = runner.RunArgs(output_dir="unused", jit_compile=jit_compile, length_buckets=flag)
  assert runner.batch_length_buckets(args, TASKS["classification"](), strategy) == expected
  assert runner.batch_length_buckets(args, TASKS["squad"](), strategy) == 0


def test_sorted_micro_batches_hold_the_random_batch_each_part_cut_to_its_longest(tmp_path):
  """Random batches (not grouped) as micro-batches: together the records of the batch the
  stream gives without them (same seed), sorted by length, split into near-equal parts, each
  cut to its own longest."""
  path = str(tmp_path / "train.tf_record")
  records = _write_choice_records(path, 200)
  layout = schema.multiple_choice_features(SEQ, 2)
  kwargs = dict(seed=3, records_per_epoch=200, length_buckets=SEQ, group_by_length=False)
  split = datasets.record_dataset([path], layout, 8, True, micro_batches=3, **kwargs)
  whole = datasets.record_dataset([path], layout, 8, True, **kwargs)
  longest = lambda r: records[r]["input_mask"].reshape(2, SEQ).sum(-1).max()
  for parts, batch in zip(split.take(30), whole.take(30)):
    assert [p["label_ids"].shape[0] for p in parts] == [3, 3, 2]
    rows = [r for p in parts for r in p["label_ids"][:, 0].numpy().tolist()]
    assert sorted(rows) == sorted(batch["label_ids"][:, 0].numpy().tolist())
    assert [longest(r) for r in rows] == sorted(longest(r) for r in rows)
    for part in parts:
      cut = part["input_word_ids"].shape[1] // 2
      part_rows = part["label_ids"][:, 0].numpy().tolist()
      assert cut == max(longest(r) for r in part_rows)
      for row, r in enumerate(part_rows):
        for name, model_name in schema.MODEL_INPUT_NAMES.items():
          expected = records[r][name].reshape(2, SEQ)[:, :cut].reshape(-1)
          np.testing.assert_array_equal(part[model_name][row].numpy(), expected)


@pytest.mark.parametrize("buckets", [SEQ, 4])
def test_least_padding_parts_hold_the_random_batch_and_compute_fewest_positions(
    tmp_path, buckets):
  """least_padding: the same records as the random batch, sorted and each part cut to its
  bucket, in the consecutive parts (any sizes) whose positions in all are fewest: checked
  against every way to cut the sorted batch, and fewer than equal parts compute."""
  path = str(tmp_path / "train.tf_record")
  records = _write_choice_records(path, 200)
  layout = schema.multiple_choice_features(SEQ, 2)
  kwargs = dict(seed=3, records_per_epoch=200, length_buckets=buckets, group_by_length=False)
  least = datasets.record_dataset([path], layout, 8, True, micro_batches=3, least_padding=True,
                                  **kwargs)
  equal = datasets.record_dataset([path], layout, 8, True, micro_batches=3, **kwargs)
  width = datasets.bucket_width(SEQ, buckets)
  bucket = lambda r: -(-records[r]["input_mask"].reshape(2, SEQ).sum(-1).max() // width) * width
  positions = lambda parts: sum(p["input_word_ids"].shape[0] * p["input_word_ids"].shape[1]
                                for p in parts)
  fewer = 0
  for parts, equal_parts in zip(least.take(30), equal.take(30)):
    rows = [r for p in parts for r in p["label_ids"][:, 0].numpy().tolist()]
    assert sorted(rows) == sorted(r for p in equal_parts
                                  for r in p["label_ids"][:, 0].numpy().tolist())
    cuts = [bucket(r) for r in rows]
    assert cuts == sorted(cuts) and all(p["label_ids"].shape[0] >= 1 for p in parts)
    for part in parts:
      part_rows = part["label_ids"][:, 0].numpy().tolist()
      assert part["input_word_ids"].shape[1] == 2 * max(bucket(r) for r in part_rows)
    every_cut = [sum((j - i) * 2 * cuts[j - 1] for i, j in zip((0, *ends), (*ends, 8)))
                 for ends in itertools.combinations(range(1, 8), 2)]
    assert positions(parts) == min(every_cut) <= positions(equal_parts)
    fewer += positions(parts) < positions(equal_parts)
  assert fewer > 0


@pytest.mark.parametrize("name", ["classification", "multiple_choice"])
def test_sorted_micro_batches_give_the_loss_and_gradient_of_the_padded_batch(name, tmp_path):
  """What the training step computes from micro-batches (`loop.accumulated_gradients`: one
  pass each, each part's loss over the batch's counts, summed) is the loss, metrics and
  gradient of the same records as one batch padded to max_seq_length (no dropout)."""
  task = TASKS[name]()
  num_records = 12
  path = str(tmp_path / "train.tf_record")
  layout = task.record_layout(True)
  writer.write_records(path, layout, _task_records(name, np.random.default_rng(4), num_records))
  config = BertConfig(vocab_size=2000, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
  tf.keras.utils.set_random_seed(0)
  model = task.build_model(config)

  def loss_and_gradients(**kwargs):
    [batch] = datasets.record_dataset([path], layout, num_records, True, seed=0,
                                      records_per_epoch=num_records, **kwargs).take(1)
    counts = loop.update_counts(task.loss_counts, batch)
    loss, metrics, grads = loop.accumulated_gradients(model, task.loss, batch, counts,
                                                      training=False)
    return batch, loss, metrics, [tf.convert_to_tensor(g) for g in grads if g is not None]

  parts, loss, metrics, grads = loss_and_gradients(length_buckets=SEQ, group_by_length=False,
                                                   micro_batches=4, least_padding=True)
  _, padded_loss, padded_metrics, padded_grads = loss_and_gradients()
  num_sequences = 4 if name == "multiple_choice" else 1
  # Every sequence is at most SEQ // 2 long: each part is cut, the shortest more.
  lengths = [p["input_word_ids"].shape[1] // num_sequences for p in parts]
  assert len(parts) == 4 and max(lengths) <= SEQ // 2 and lengths == sorted(lengths)
  assert int(loop.batch_size(parts)) == num_records
  np.testing.assert_allclose(loss, padded_loss, rtol=1e-5)
  for key in padded_metrics:
    np.testing.assert_allclose(metrics[key], padded_metrics[key], rtol=1e-5)
  assert len(grads) == len(padded_grads)
  for g, padded in zip(grads, padded_grads):
    np.testing.assert_allclose(g, padded, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("extra,parts", [({}, 4), ({"group_by_length": True}, 0),
                                         ({"jit_compile": True}, 0),
                                         ({"sorted_micro_batches": 2}, 2)])
def test_the_runners_training_batches_are_random_sorted_micro_batches_by_default(
    tmp_path, extra, parts):
  """Default: each random batch as 4 sorted micro-batches; one batch (a dict) when grouped by
  length, or compiled (each part's length would be one more XLA program)."""
  make_sst2(tmp_path / "data", num_train=32, num_dev=8, num_test=4)
  task = finetuning.build("classification", {"task_name": "SST-2", "max_seq_length": 16},
                     data_dir=str(tmp_path / "data"))
  args = runner.RunArgs(output_dir=str(tmp_path / "out"), do_train=True, vocab_file=VOCAB,
                        bert_config_file=tiny_config(str(tmp_path / "c.json")), **extra)
  run = runner.Runner(task, args, distribute.get_strategy("one_device"))
  [records] = run.write_records("train", 8)
  spec = run.dataset(records, 8, True, seed=1).element_spec
  if parts:
    assert isinstance(spec, tuple) and len(spec) == parts
  else:
    assert isinstance(spec, dict)
