r"""How much of pretraining's input is padding, and how much of it packing recovers
(`tfrecords.packing`): the padding share of each instance in a row of its own, and the
packer's efficiency (real tokens over the packed rows' positions) against the bound (the
speed-up with no padding at all), for pretraining record files and for a length histogram.

Kind: a run of our product (benchmarks/runs/); beside it, with --compare_spfhp, the paper's
shortest-pack-first histogram packing (SPFHP: Krell et al. 2021, each length, longest first,
into the pack with the most room that has a slot left) on the same buffers.

  # The full-Wikipedia histogram (MLPerf's records at 512): its 16.3M lengths in a random order.
  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python benchmarks/runs/padding_share.py
  # Records (create_pretraining_data's or google-research/bert's), a row per glob:
  PYTHONPATH=. .venv/bin/python benchmarks/runs/padding_share.py --histogram_file= \
      --input_file='out128/*.tfrecord,out512/*.tfrecord'
  # The packer's grid and its pipeline's rate (packed rows/s, CPU a packed batch):
  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python benchmarks/runs/padding_share.py \
      --max_sequences_per_pack=2,3,4 --buffer_sizes=1024,4096,16384 --compare_spfhp \
      --histogram_sequences=2000000 --pipeline_lengths=128,512

A record file's lengths are its input_mask's sums, its sequence length its first record's;
the histogram's stream packs as `packing.pack_dataset` would pack records in that order.
--pipeline_lengths times `pack_dataset` itself on in-memory batches of 32 instances whose
lengths follow the histogram (scaled to each length), against the same batches unpacked.
Prints a JSON line a measurement, then markdown tables.
"""
import json
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import data_root

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", [], "Globs of pretraining record files: a row each.")
flags.DEFINE_string("histogram_file", data_root.path("packing", "wikipedia_512_lengths.tsv"),
                    "A TSV of length<TAB>sequences (a header line first), its sequence length "
                    "the longest length; empty for none.")
flags.DEFINE_integer("histogram_sequences", 0, "Lengths drawn from the histogram (0: all of "
                     "its sequences, in a random order).")
flags.DEFINE_list("max_sequences_per_pack", ["3"], "k: the most instances a packed row holds.")
flags.DEFINE_list("buffer_sizes", None, "Instances packed together (default: the packer's).")
flags.DEFINE_bool("compare_spfhp", False, "Also pack the same buffers with SPFHP.")
flags.DEFINE_list("pipeline_lengths", [], "Sequence lengths to time pack_dataset at.")
flags.DEFINE_integer("pipeline_batches", 300, "Packed batches timed at each length.")
flags.DEFINE_integer("seed", 0, "The histogram stream's order and the pipeline's data.")


def record_lengths(pattern: str) -> tuple[np.ndarray, int]:
  """Each record's length (its input_mask's sum) in the files of `pattern`, and their
  sequence length (the first record's input_mask's)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_tf.common.files import list_files  # pylint: disable=g-import-not-at-top
  from tfrecords import datasets, schema  # pylint: disable=g-import-not-at-top
  files = list_files(pattern)
  first = tf.train.Example.FromString(datasets.first_record(files[0]))
  max_seq_length = len(first.features.feature["input_mask"].int64_list.value)
  [mask] = [f for f in schema.token_features(max_seq_length) if f.name == "input_mask"]
  batches = datasets.record_dataset(files, [mask], 4096, is_training=False)
  lengths = [tf.reduce_sum(batch["input_mask"], 1).numpy() for batch in batches]
  return np.concatenate(lengths), max_seq_length


def histogram_lengths(path: str, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """The histogram [S + 1] (sequences of each length) in `path`, and `count` of its lengths
  (0: all of them) in a random order."""
  rows = np.loadtxt(path, delimiter="\t", skiprows=1, dtype=np.int64, ndmin=2)
  histogram = np.zeros(rows[:, 0].max() + 1, np.int64)
  histogram[rows[:, 0]] = rows[:, 1]
  rng = np.random.default_rng(seed)
  if count:
    return histogram, rng.choice(histogram.size, count, p=histogram / histogram.sum())
  return histogram, rng.permutation(np.repeat(np.arange(histogram.size, dtype=np.int16),
                                              histogram))


def spfhp_packs(lengths: np.ndarray, max_seq_length: int, max_sequences_per_pack: int) -> int:
  """How many packs SPFHP makes of `lengths`: each length, longest first, into the open pack
  with the most room (a pack closes when full or at k), a new pack where none has room; done
  on the histogram, packs of one composition as one group."""
  histogram = np.bincount(lengths, minlength=max_seq_length + 1)
  open_groups = {}  # room -> [[count, members]], the newest last
  closed = 0
  for length in range(max_seq_length, 0, -1):
    left = int(histogram[length])
    while left:
      rooms = [room for room in open_groups if room >= length]
      if rooms:
        room = max(rooms)
        group = open_groups[room][-1]
        taken = min(group[0], left)
        group[0] -= taken
        if not group[0]:
          open_groups[room].pop()
          if not open_groups[room]:
            del open_groups[room]
        members = group[1] + 1
      else:
        room, taken, members = max_seq_length, left, 1
      left -= taken
      if room - length == 0 or members == max_sequences_per_pack:
        closed += taken
      else:
        open_groups.setdefault(room - length, []).append([taken, members])
  return closed + sum(group[0] for groups in open_groups.values() for group in groups)


def measure(name: str, lengths: np.ndarray, max_seq_length: int) -> list[dict]:
  """The padding share and each (k, buffer) packing of `lengths`: a JSON line each."""
  from tfrecords import packing  # pylint: disable=g-import-not-at-top
  rows = []
  for k in map(int, FLAGS.max_sequences_per_pack):
    for buffer_size in map(int, FLAGS.buffer_sizes or [packing.DEFAULT_BUFFER_SIZE]):
      start = time.process_time()
      row = dict(data=name, max_seq_length=max_seq_length, max_sequences_per_pack=k,
                 buffer_size=buffer_size,
                 **packing.packing_stats(lengths, max_seq_length, k, buffer_size))
      row["packer_cpu_us_per_sequence"] = round(
          (time.process_time() - start) / row["sequences"] * 1e6, 2)
      if FLAGS.compare_spfhp:
        packs = sum(spfhp_packs(lengths[i:i + buffer_size], max_seq_length, k)
                    for i in range(0, lengths.size, buffer_size))
        row["spfhp_efficiency"] = float(lengths.sum()) / (packs * max_seq_length)
        row["spfhp_speed_up"] = lengths.size / packs
      print(json.dumps(row), flush=True)
      rows.append(row)
  return rows


def pipeline_rate(histogram: np.ndarray, max_seq_length: int, k: int) -> dict:
  """`pack_dataset`'s packed rows a second (batches of 32 rows) and process CPU a packed batch,
  against iterating the same unpacked batches of 32; in-memory instances, lengths from the
  histogram scaled to `max_seq_length`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfrecords import packing  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(FLAGS.seed)
  n, predictions = 16384, max(1, round(max_seq_length * 0.15))
  scale = max_seq_length / (histogram.size - 1)
  drawn = rng.choice(histogram.size, n, p=histogram / histogram.sum())
  lengths = np.clip(np.ceil(drawn * scale), 3, max_seq_length).astype(np.int64)
  token = np.arange(max_seq_length)[None, :] < lengths[:, None]
  positions = np.sort(rng.integers(1, lengths[:, None], [n, predictions]), axis=1)
  instances = dict(
      input_word_ids=np.where(token, rng.integers(1, 30000, token.shape), 0).astype(np.int32),
      input_mask=token.astype(np.int32),
      input_type_ids=(token & (np.arange(max_seq_length) >= lengths[:, None] // 2)).astype(
          np.int32),
      masked_lm_positions=positions.astype(np.int32),
      masked_lm_ids=rng.integers(1, 30000, [n, predictions]).astype(np.int32),
      masked_lm_weights=np.ones([n, predictions], np.float32),
      next_sentence_labels=rng.integers(0, 2, [n, 1]).astype(np.int32))
  unpacked = tf.data.Dataset.from_tensor_slices(instances).repeat().batch(
      32, drop_remainder=True)
  result = dict(max_seq_length=max_seq_length, max_sequences_per_pack=k, batch_size=32,
                buffer_size=packing.DEFAULT_BUFFER_SIZE)
  for way, ds in (("unpacked", unpacked), ("packed", packing.pack_dataset(unpacked, 32, k))):
    iterator = iter(ds)
    for _ in range(packing.DEFAULT_BUFFER_SIZE // 16):  # The first buffers: start-up.
      next(iterator)
    wall, cpu = time.time(), time.process_time()
    sequences = 0
    for _ in range(FLAGS.pipeline_batches):
      batch = next(iterator)
      sequences += (int(batch["next_sentence_weights"].numpy().sum()) if way == "packed"
                    else 32)
    wall, cpu = time.time() - wall, time.process_time() - cpu
    result[f"{way}_rows_per_s"] = FLAGS.pipeline_batches * 32 / wall
    result[f"{way}_sequences_per_s"] = sequences / wall
    result[f"{way}_cpu_ms_per_batch"] = cpu / FLAGS.pipeline_batches * 1e3
  print(json.dumps(result), flush=True)
  return result


def main(_):
  rows = []
  for pattern in FLAGS.input_file:
    lengths, max_seq_length = record_lengths(pattern)
    rows += measure(pattern, lengths, max_seq_length)
  histogram = None
  if FLAGS.histogram_file:
    histogram, lengths = histogram_lengths(FLAGS.histogram_file, FLAGS.histogram_sequences,
                                           FLAGS.seed)
    rows += measure(FLAGS.histogram_file.rsplit("/", 1)[-1], lengths, histogram.size - 1)
  spfhp = " SPFHP efficiency |" if FLAGS.compare_spfhp else ""
  print(f"\n| data | sequence length | sequences | padding share | bound | k | buffer | "
        f"efficiency | speed-up (sequences a row) |{spfhp}")
  print("|---" * (9 + bool(spfhp)) + "|")
  for r in rows:
    extra = f" {r['spfhp_efficiency']:.4f} |" if spfhp else ""
    print(f"| {r['data']} | {r['max_seq_length']} | {r['sequences']:,} | "
          f"{r['padding_share']:.3f} | {r['bound']:.3f}x | {r['max_sequences_per_pack']} | "
          f"{r['buffer_size']} | {r['efficiency']:.4f} | {r['speed_up']:.3f}x |{extra}")
  if FLAGS.pipeline_lengths:
    if histogram is None:
      raise app.UsageError("--pipeline_lengths draws lengths from --histogram_file")
    rates = [pipeline_rate(histogram, int(s), int(FLAGS.max_sequences_per_pack[0]))
             for s in FLAGS.pipeline_lengths]
    print("\n| sequence length | k | packed rows/s | packed sequences/s | CPU ms a packed "
          "batch of 32 | unpacked rows/s | CPU ms an unpacked batch of 32 |")
    print("|---" * 7 + "|")
    for r in rates:
      print(f"| {r['max_seq_length']} | {r['max_sequences_per_pack']} | "
            f"{r['packed_rows_per_s']:,.0f} | {r['packed_sequences_per_s']:,.0f} | "
            f"{r['packed_cpu_ms_per_batch']:.2f} | {r['unpacked_rows_per_s']:,.0f} | "
            f"{r['unpacked_cpu_ms_per_batch']:.2f} |")


if __name__ == "__main__":
  app.run(main)
