"""tf.data readers for fixed-length records.

Static shapes by default (`drop_remainder` on training batches) so XLA and TPUs compile one
program. Training batches may instead be cut (`length_buckets`), so short sentences do not pay
for max_seq_length of padding: each random batch to a bucket length (or to its longest), or as
micro-batches of its records sorted by length, each cut to its own (`micro_batches`), or, on
request, batches grouped by length (`group_by_length`); the sequence dimension is then
dynamic, with at most `length_buckets` values (one compiled program each under XLA).

Under tf.distribute, pass the `InputContext` the strategy hands to
`distribute_datasets_from_function`: each input pipeline then reads its own subset of files
(or of records, when there are fewer files than pipelines) and batches its per-replica share.

TensorFlow's reader names no file when a record is damaged ("truncated record at 9802"):
`first_record` and `naming_damaged_file` turn that into an error naming the file.
"""
import contextlib
import re

from absl import logging
import tensorflow as tf

from bert_tf.common.files import list_files
from tfrecords import schema


# tf.data's autotuning model thread off. In TF 2.20, destroying an iterator that runs one can
# block (holding the GIL) for the rest of the thread's sleep, up to a minute: the thread is
# woken to stop before the stop is recorded and goes back to sleep. Measured here: 0-30 s lost
# at the end of most fine-tuning runs. Without it, AUTOTUNE parallelism means all cores and
# prefetch buffers still grow as needed: what this pipeline (parsing fixed-length records)
# wants anyway.
NO_AUTOTUNE_THREAD = tf.data.Options()
NO_AUTOTUNE_THREAD.autotune.enabled = False


class DamagedRecordsError(ValueError):
  """A file that is not a TFRecord file, or whose records are cut short or changed."""


# What TensorFlow's record reader says (inside a longer message) about a damaged file.
_DAMAGE = re.compile(r"(truncated|corrupted) record at (\d+)")


def _damaged(path: str, error: tf.errors.DataLossError) -> DamagedRecordsError:
  """The reader's error, naming the file and saying what the damage means."""
  found = _DAMAGE.search(error.message)
  if not found:
    return DamagedRecordsError(f"{path}: damaged ({error.message})")
  kind, offset = found.group(1), int(found.group(2))
  if kind == "corrupted" and offset == 0:
    # Its first 12 bytes are no record header (their checksum fails): e.g. the stats JSON
    # that create_pretraining_data writes beside its shards, matched by an `out/*` glob.
    return DamagedRecordsError(f"{path}: not a TFRecord file (no record header at its start); "
                               "give only record files")
  return DamagedRecordsError(f"{path}: damaged: {kind} record at byte {offset} (the file was "
                             "cut short, or changed since it was written)")


def first_record(path: str) -> bytes | None:
  """The first record of a TFRecord file; None when it holds none. Raises DamagedRecordsError
  naming the file when it is no TFRecord file or its first record is damaged: the cheap check
  of a file at the start of a run (one record read). Checked by content, whatever the name, and
  refused rather than skipped: a glob that matched a stats JSON or a vocab may match other
  wrong files too, and the user, told which, narrows it."""
  try:
    for record in tf.data.TFRecordDataset(path).take(1):
      return record.numpy()
  except tf.errors.DataLossError as e:
    raise _damaged(path, e) from None
  # TensorFlow reads a file shorter than one record header as holding no record.
  size = tf.io.gfile.stat(path).length
  if size:
    raise DamagedRecordsError(f"{path}: not a TFRecord file ({size} bytes, less than one "
                              "record header)")
  return None


def check_record_file(path: str) -> None:
  """Reads every record of `path` (in TensorFlow's C++, at disk speed); raises
  DamagedRecordsError naming the file and the byte offset of the first damaged record."""
  try:
    tf.data.TFRecordDataset(path).reduce(0, lambda count, _: count + 1)
  except tf.errors.DataLossError as e:
    raise _damaged(path, e) from None


@contextlib.contextmanager
def naming_damaged_file(files: list[str]):
  """Turns a DataLossError raised inside the block (a truncated or corrupted record, met
  somewhere in a training or evaluation loop reading `files`) into a DamagedRecordsError
  naming the file and where. The files are read through on that error path only, so the normal
  path costs nothing; a DataLossError that none of them explains passes unchanged."""
  try:
    yield
  except tf.errors.DataLossError:
    logging.warning("a record file is damaged; reading the %d input files through to find "
                    "which", len(files))
    for path in files:
      check_record_file(path)
    raise


def record_dataset(files: list[str],
                   features: list[schema.Feature],
                   batch_size: int,
                   is_training: bool,
                   input_context: tf.distribute.InputContext | None = None,
                   shuffle_buffer: int = 10000,
                   cycle_length: int = 8,
                   seed: int | None = None,
                   drop_remainder: bool | None = None,
                   length_buckets: int = 0,
                   records_per_epoch: int | None = None,
                   group_by_length: bool = True,
                   micro_batches: int = 1,
                   least_padding: bool = False) -> tf.data.Dataset:
  """Batches of parsed records, renamed to model input names (see `schema.to_model_inputs`).

  Args:
    files: TFRecord paths (see `list_files`).
    features: the record layout (e.g. `schema.pretraining_features(...)`).
    batch_size: the GLOBAL batch size; with an input_context, each pipeline batches its share.
    is_training: shuffle files and records, repeat forever, and drop the last partial batch.
    input_context: from `strategy.distribute_datasets_from_function`, or None.
    drop_remainder: defaults to `is_training`; evaluation keeps every record unless asked.
    length_buckets: with N > 0, each batch's per-token features cut to one of N lengths
      (see `bucket_width`). Training: batches of similar lengths (see `length_bucketed`).
      Evaluation: the records' order kept, each batch cut to its longest sequence's bucket
      (records written in order of length, as the runner writes them, then pad little).
    records_per_epoch: with length_buckets, the number of records in `files`, if known: a
      megabatch then holds at most an epoch (a small dataset's would hold each record
      several times, and sorting would put the copies in one batch).
    group_by_length: with length_buckets in training, batches of similar lengths; False: the
      shuffled stream's batches as they come, each only cut (for a loss that is a mean over
      tokens, whose weights grouping would shift toward short sequences).
    micro_batches: with length_buckets in training and group_by_length False, each batch
      as a tuple of this many micro-batches: its records sorted by length, split, each part
      cut to its own bucket (see `sorted_micro_batches`). The same records as the random
      batch, with about the padding of grouped ones.
    least_padding: with micro_batches, parts of the sizes that pad least (speed) rather
      than equal ones (gradient accumulation: each part's memory bounded).

  Returns:
    A dataset of dicts: each feature's tensor of shape [batch, length] (int32 for int64
    features, float32 for float features); per-token features [batch, None] when bucketed;
    with micro_batches > 1, of tuples of such dicts.
  """
  if drop_remainder is None:
    drop_remainder = is_training
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0

  shard_files = len(files) >= num_pipelines
  ds = tf.data.Dataset.from_tensor_slices(files)
  if shard_files and num_pipelines > 1:
    ds = ds.shard(num_pipelines, pipeline_id)
  if is_training:
    ds = ds.shuffle(len(files), seed=seed)
  ds = ds.interleave(tf.data.TFRecordDataset,
                     cycle_length=cycle_length,
                     num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=not is_training or seed is not None)
  if not shard_files and num_pipelines > 1:
    ds = ds.shard(num_pipelines, pipeline_id)
  if is_training:
    # Shuffled, then repeated: every record once per epoch, in a new order each epoch (files
    # too). Repeated first, a buffer larger than the data would mix epochs and draw some
    # records twice before others once, which costs fine-tuning on small tasks (MRPC) points.
    ds = ds.shuffle(shuffle_buffer, seed=seed).repeat()

  if length_buckets and is_training and not group_by_length and micro_batches > 1:
    spec = schema.parse_spec(features)
    split = sorted_micro_batches(features, length_buckets, batch_size, micro_batches,
                                 least_padding)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(_plain(lambda records: tuple(schema.to_model_inputs(part) for part in split(
        tf.io.parse_example(records, spec)))), num_parallel_calls=tf.data.AUTOTUNE)
  elif length_buckets and is_training:
    megabatch_batches = MEGABATCH_BATCHES if group_by_length else 1
    if records_per_epoch:
      megabatch_batches = max(1, min(megabatch_batches,
                                     records_per_epoch // num_pipelines // batch_size))
    ds = length_bucketed(ds, features, batch_size, length_buckets, seed, megabatch_batches)
    ds = ds.map(_plain(schema.to_model_inputs), num_parallel_calls=tf.data.AUTOTUNE)
  else:
    spec = schema.parse_spec(features)
    cut = cut_in_order(features, length_buckets) if length_buckets else lambda batch: batch
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    parse = lambda records: schema.to_model_inputs(cut(tf.io.parse_example(records, spec)))
    ds = ds.map(_plain(parse), num_parallel_calls=tf.data.AUTOTUNE)
  return ds.prefetch(tf.data.AUTOTUNE).with_options(NO_AUTOTUNE_THREAD)


def _plain(fn):
  """fn as a tf.data function traces it, without AutoGraph: the functions here branch and loop
  on Python values only, and converting them took ~0.8 s of each training start (a random
  batch in sorted parts, MRPC: building the dataset 1.09 s -> 0.34 s)."""
  return tf.autograph.experimental.do_not_convert(fn)


# Batches whose records are sorted by length together, as Hugging Face's LengthGroupedSampler
# does (its megabatches of 50 batches): enough that neighbours in the sorted order have close
# lengths, few enough that the order stays random at the scale of an epoch.
MEGABATCH_BATCHES = 50


def bucket_width(sequence_length: int, length_buckets: int) -> int:
  """The step between bucket lengths: sequence_length / length_buckets rounded up, so there
  are at most length_buckets of them; then up to a multiple of 8 (what matrix units tile by)
  unless it is 1: length_buckets >= sequence_length cuts each batch to its exact longest."""
  width = -(-sequence_length // length_buckets)
  return width if width == 1 else -(-width // 8) * 8


def length_bucketed(records: tf.data.Dataset, features: list[schema.Feature], batch_size: int,
                    length_buckets: int, seed: int | None,
                    megabatch_batches: int = MEGABATCH_BATCHES) -> tf.data.Dataset:
  """Serialized training records (a shuffled, repeated stream) -> parsed batches of similar
  lengths.

  Each run of megabatch_batches * batch_size records of the stream (a megabatch) is sorted by
  length, cut into batches, and the batches put in a random order (seeded), so lengths do not
  rise in a saw-tooth: a megabatch's batches hold exactly its records, and every record is
  drawn as often as unbucketed. Each batch's per-token features (`Feature.sequence_length`) are
  cut to the shortest multiple of `bucket_width` that holds its longest sequence: positions
  past a sequence's mask, which attention ignores and no loss reads, are all that is dropped.
  """
  sequence_length = _sequence_length(features)
  width = bucket_width(sequence_length, length_buckets)
  spec = schema.parse_spec(features)

  def sorted_batches(shuffle_seed, serialized):
    """A megabatch -> (each batch's longest sequence [M], its batches [M, batch_size, ...])."""
    batch = tf.io.parse_example(serialized, spec)
    lengths = _longest_sequences(batch["input_mask"], sequence_length)
    by_length = tf.argsort(lengths, stable=True)
    batch_order = tf.random.experimental.stateless_shuffle(
        tf.range(megabatch_batches), tf.stack([shuffle_seed, 0]))
    # [M, batch_size] record indices, each row one batch in sorted order: its last is its longest.
    order = tf.gather(tf.reshape(by_length, [megabatch_batches, batch_size]), batch_order)
    return tf.gather(lengths, order[:, -1]), {name: tf.gather(value, order)
                                              for name, value in batch.items()}

  megabatches = records.batch(megabatch_batches * batch_size, drop_remainder=True)
  ds = tf.data.Dataset.zip(tf.data.Dataset.random(seed=seed), megabatches)
  ds = ds.map(_plain(sorted_batches), num_parallel_calls=tf.data.AUTOTUNE).unbatch()
  return ds.map(_plain(lambda longest, batch: _cut_to_bucket(batch, features, longest, width)),
                num_parallel_calls=tf.data.AUTOTUNE)


def cut_in_order(features: list[schema.Feature], length_buckets: int):
  """A parsed batch -> the same records, their per-token features cut to the bucket (see
  `bucket_width`) of the batch's longest sequence: evaluation's cut, which keeps the order."""
  sequence_length = _sequence_length(features)
  width = bucket_width(sequence_length, length_buckets)

  def cut(batch: dict) -> dict:
    longest = tf.reduce_max(_longest_sequences(batch["input_mask"], sequence_length))
    return _cut_to_bucket(batch, features, longest, width)
  return cut


def sorted_micro_batches(features: list[schema.Feature], length_buckets: int, batch_size: int,
                         micro_batches: int, least_padding: bool = False):
  """A parsed batch of `batch_size` records -> a tuple of min(micro_batches, batch_size)
  micro-batches: the records sorted by their longest sequence, split into parts, each part's
  per-token features cut to the bucket of its own longest. Parts of (nearly) equal sizes, or
  with least_padding of the sizes that cut the fewest positions in all (`_least_padding_sizes`).

  A loss that is a mean over records, taken over each part and weighted by the part's share
  of the records, is the batch's loss: the same gradient as the random batch, computed on
  less padding (positions per sentence of a random batch of 32 SST-2 sentences, 13.4 of them
  real: cut to its longest, ~41; in 4 equal sorted parts, ~18.5; in the 4 that pad least,
  ~16; batches grouped by length, ~14)."""
  sequence_length = _sequence_length(features)
  width = bucket_width(sequence_length, length_buckets)
  count = min(micro_batches, batch_size)
  equal = [batch_size // count + (i < batch_size % count) for i in range(count)]

  def split(batch: dict) -> tuple[dict, ...]:
    lengths = _longest_sequences(batch["input_mask"], sequence_length)
    by_length = tf.argsort(lengths, stable=True)
    sizes = equal
    if least_padding:
      cut = tf.minimum(-(-tf.gather(lengths, by_length) // width) * width, sequence_length)
      sizes = _least_padding_sizes(cut, count)
    parts = []
    for rows in tf.split(by_length, sizes, num=count):
      part = {name: tf.gather(value, rows) for name, value in batch.items()}
      parts.append(_cut_to_bucket(part, features, tf.gather(lengths, rows[-1]), width))
    return tuple(parts)
  return split


def _least_padding_sizes(cut: tf.Tensor, count: int) -> tf.Tensor:
  """[n] ascending lengths each record is cut to -> [count] sizes (each >= 1, summing to n)
  of consecutive parts that minimise the positions computed, the sum over parts of its size
  times its last (longest) length: a dynamic programme over the part ends, O(count n^2)."""
  n = cut.shape[0]
  cut = tf.cast(cut, tf.int64)
  ends = tf.range(n + 1, dtype=tf.int64)
  # cost[m, i]: one part of the sorted records m..i-1 (none unless m < i).
  infinite = tf.constant(2**40, tf.int64)
  last = tf.concat([[0], cut], 0)
  cost = tf.where(ends[:, None] < ends[None, :], (ends[None, :] - ends[:, None]) * last, infinite)
  best = tf.where(ends == 0, tf.constant(0, tf.int64), infinite)  # Of the first i, in 0 parts.
  starts = []
  for _ in range(count):
    total = best[:, None] + cost
    # Ties go to the earliest start, explicitly: argmin does not promise which it returns.
    starts.append(tf.argmin(total * (n + 1) + ends[:, None], axis=0))
    best = tf.minimum(tf.reduce_min(total, axis=0), infinite)
  bounds = [tf.constant(n, tf.int64)]
  for start in reversed(starts):
    bounds.append(tf.gather(start, bounds[-1]))
  bounds.reverse()  # bounds[0] is 0 and bounds[count] is n.
  return tf.cast(tf.stack([bounds[j + 1] - bounds[j] for j in range(count)]), tf.int32)


def _cut_to_bucket(batch: dict, features: list[schema.Feature], longest: tf.Tensor,
                   width: int) -> dict:
  """A parsed batch's per-token features cut to the shortest multiple of `width` that holds
  `longest` pieces (at least one width, at most the layout's sequence length)."""
  length = tf.clip_by_value(-(-longest // width) * width, width, _sequence_length(features))
  return {f.name: _cut(batch[f.name], f, length) if f.sequence_length else batch[f.name]
          for f in features}


def _sequence_length(features: list[schema.Feature]) -> int:
  """The one sequence length of the layout's per-token features; ValueError if there is none
  (nothing to bucket by) or several."""
  lengths = {f.sequence_length for f in features if f.sequence_length}
  names = {f.name for f in features if f.sequence_length}
  if len(lengths) != 1 or "input_mask" not in names:
    raise ValueError(f"length buckets need per-token features of one sequence length, "
                     f"input_mask among them; this layout has {sorted(names)} ({lengths})")
  return lengths.pop()


def _longest_sequences(mask: tf.Tensor, sequence_length: int) -> tf.Tensor:
  """[batch, n * sequence_length] masks -> [batch]: each record's longest sequence."""
  per_sequence = tf.reshape(mask, [tf.shape(mask)[0], -1, sequence_length])
  return tf.reduce_max(tf.reduce_sum(per_sequence, -1), -1)


def _cut(values: tf.Tensor, feature: schema.Feature, length: tf.Tensor) -> tf.Tensor:
  """[batch, n * sequence_length] -> [batch, n * length]: each of the n sequences cut."""
  num_sequences = feature.length // feature.sequence_length
  if num_sequences == 1:
    return values[:, :length]
  batch = values.shape[0] or -1  # Static where known (training): the reshapes keep it so.
  per_sequence = tf.reshape(values, [batch, num_sequences, feature.sequence_length])
  return tf.reshape(per_sequence[:, :, :length], [batch, num_sequences * length])


def pretraining_dataset(input_patterns: str | list[str],
                        max_seq_length: int,
                        max_predictions_per_seq: int,
                        batch_size: int,
                        is_training: bool,
                        input_context: tf.distribute.InputContext | None = None,
                        seed: int | None = None) -> tf.data.Dataset:
  """google-research/bert pretraining records as model-ready batches.

  Each element: input_word_ids, input_mask, input_type_ids [batch, max_seq_length] int32;
  masked_lm_positions, masked_lm_ids [batch, max_predictions_per_seq] int32;
  masked_lm_weights [batch, max_predictions_per_seq] float32; next_sentence_labels [batch, 1].
  """
  return record_dataset(list_files(input_patterns),
                        schema.pretraining_features(max_seq_length, max_predictions_per_seq),
                        batch_size, is_training, input_context=input_context, seed=seed)
