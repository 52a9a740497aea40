"""Packed pretraining batches: up to k instances a row of max_seq_length, no padding computed
where another instance fits (Krell et al. 2021, "Efficient Sequence Packing without
Cross-contamination"). The model reads a packed row as the unpacked instances (block-diagonal
attention, positions restarting at each [CLS]: `bert_tf.modeling.pretrainer`); the packed
layout is `schema.packed_pretraining_features`.

Two parts: which instances share a row (`pack_lengths`, numpy, over the lengths of a buffer
of instances), and the packed batches themselves (`pack_dataset`, tf.data: the gathering in
the graph). Packing comes last in the pipeline, after batching and dynamic masking, and the
packed stream is a pure function of the stream of unpacked instances (no state, no seed): the
same input order gives the same packs, so a resumed run that skips the batches it consumed
sees the packs it would have seen, and each pipeline of a distributed input packs its own
shard alone. A row's masked-LM targets come first in its slots, which can be far fewer than
k times one record's (`predictions_bound`: each slot costs a projection onto the vocabulary);
a pack that would hold more targets than its slots is split, so none is ever lost.

The packer ("fill the longest"): a buffer's lengths as a histogram; the longest instance left
opens a pack, whose room is then filled by the pair of instances left that fills it most (two
preferred to one at equal fill, then the pair whose longer member is longest, so the other is
the shortest that completes the fill: short instances go beside long ones, where packs of
three need them), again while it has room and slots. A pack of that composition is then taken
as many times as its lengths last, so the work grows with the number of distinct compositions
(hundreds), not instances. Measured on the full-Wikipedia histogram of MLPerf's
records at 512 (`benchmarks/runs/padding_share.py`, benchmarks/README.md's "Packing"): at k = 3
it fills 99.2-99.5% of the packed tokens over buffers of 4k-16k instances (the speed-up's
bound is 2.00x), where shortest-pack-first histogram packing (SPFHP, the paper's), which puts
each length into the emptiest pack, fills 89.5%: with three instances a pack, the short
instances must go with the long ones, and SPFHP's descending pass leaves them to fill packs
of their own at the end.
"""
import numpy as np
import tensorflow as tf

# The features of a masked, unpacked batch (model names: `schema.to_model_inputs`) that
# `pack_dataset` packs.
UNPACKED_INPUTS = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions",
                   "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")

DEFAULT_BUFFER_SIZE = 4096
DEFAULT_SEQUENCES_PER_PACK = 3


def pack_lengths(lengths: np.ndarray, max_seq_length: int, max_sequences_per_pack: int,
                 predictions: np.ndarray | None = None,
                 max_predictions_per_pack: int | None = None) -> np.ndarray:
  """Which instances share a row: [n] lengths (each <= max_seq_length) -> int32 [packs, k],
  each pack's instance indices ascending, -1 in its empty slots (last), k =
  max_sequences_per_pack; each pack's lengths sum to at most max_seq_length. Every instance of
  length > 0 is in exactly one pack; one of length 0 (nothing to train on) in none. The packs
  come in a fixed pseudo-random order (`_scrambled`); a pure function of its arguments.

  predictions: [n] each instance's masked-LM targets, none more than max_predictions_per_pack;
  a pack holding more than that in all is split (`_split_over`)."""
  lengths = np.asarray(lengths, np.int64)
  if lengths.size and (lengths.min() < 0 or lengths.max() > max_seq_length):
    raise ValueError(f"instance lengths must be in [0, {max_seq_length}]; got "
                     f"{lengths.min()}..{lengths.max()}")
  if max_sequences_per_pack < 1:
    raise ValueError(f"max_sequences_per_pack must be at least 1, not {max_sequences_per_pack}")
  histogram = np.bincount(lengths, minlength=max_seq_length + 1)
  histogram[0] = 0
  # Each length's instances in input order: a composition's copies take the next ones.
  by_length = np.argsort(lengths, kind="stable")
  next_of_length = np.cumsum(histogram) - histogram + np.count_nonzero(lengths == 0)
  blocks = []
  for count, composition in _compositions(histogram, max_seq_length, max_sequences_per_pack):
    block = np.full([count, max_sequences_per_pack], -1, np.int64)
    for slot, length in enumerate(composition):
      block[:, slot] = by_length[next_of_length[length]:next_of_length[length] + count]
      next_of_length[length] += count
    blocks.append(block)
  if not blocks:
    return np.zeros([0, max_sequences_per_pack], np.int32)
  packs = np.concatenate(blocks)
  # Members in input order, the empty slots (-1) after them.
  packs = np.sort(np.where(packs < 0, lengths.size, packs), axis=1)
  packs = np.where(packs == lengths.size, -1, packs)
  if predictions is not None:
    packs = _split_over(packs, np.asarray(predictions, np.int64), max_predictions_per_pack)
  return packs[np.argsort(_scrambled(packs[:, 0]), kind="stable")].astype(np.int32)


def _split_over(packs: np.ndarray, predictions: np.ndarray,
                max_predictions_per_pack: int) -> np.ndarray:
  """`packs` with each one whose members hold more than max_predictions_per_pack masked-LM
  targets in all split: its members in order, a new pack opened where the next would
  overflow. The packer packs by length alone, and a row's targets are bounded by its length
  (`predictions_bound`): at that width nothing splits; at a narrower one, only the rows that
  need it."""
  held = np.where(packs >= 0, predictions[np.maximum(packs, 0)], 0)
  over = held.sum(axis=1) > max_predictions_per_pack
  if not over.any():
    return packs
  split = []
  for pack in packs[over]:
    members, total = [], 0
    for i in pack[pack >= 0]:
      if total + predictions[i] > max_predictions_per_pack:
        split.append(members)
        members, total = [], 0
      members.append(i)
      total += predictions[i]
    split.append(members)
  new = np.full([len(split), packs.shape[1]], -1, packs.dtype)
  for row, members in zip(new, split):
    row[:len(members)] = members
  return np.concatenate([packs[~over], new])


def _scrambled(first: np.ndarray) -> np.ndarray:
  """Each pack's sort key: its first instance's index through a multiplicative hash. The
  packer makes packs grouped by composition (the full-length rows, then the pairs, ...), and
  by first index alone packs of three would come early (the least of three random indices is
  small); either would make a batch's composition depend on its place in the buffer."""
  return (first.astype(np.uint64) * np.uint64(0x9E3779B1)) % np.uint64(1 << 32)


def _compositions(histogram: np.ndarray, max_seq_length: int, max_sequences_per_pack: int):
  """The packer of the module docstring: yields (count, lengths of one pack) until the
  histogram [max_seq_length + 1] of lengths is spent."""
  left = histogram.copy()
  while True:
    present = np.flatnonzero(left)
    if not present.size:
      return
    longest = int(present[-1])
    left[longest] -= 1
    pack = [longest]
    room, slots = max_seq_length - longest, max_sequences_per_pack - 1
    while room > 0 and slots > 0:
      fill = _best_fill(left, room, two=slots >= 2)
      if not fill:
        break
      for length in fill:
        left[length] -= 1
      pack += fill
      room -= sum(fill)
      slots -= len(fill)
    for length in pack:
      left[length] += 1
    # The same pack again while its lengths last: each choice above depended only on which
    # lengths were left, and taking more copies only removes others' options.
    uses = np.bincount(pack, minlength=left.size)
    count = int(np.min(left[uses > 0] // uses[uses > 0]))
    left -= count * uses
    yield count, pack


def _best_fill(left: np.ndarray, room: int, two: bool) -> list[int]:
  """One or (when `two`) two lengths of those `left` (a histogram) that fill `room` most: of
  equal fills two before one, then the one whose longer length is longest; [] if none fits."""
  available = left > 0
  # largest[x]: the longest length left that is <= x (0: none).
  largest = np.maximum.accumulate(np.where(available, np.arange(left.size), 0))
  best, key = [], -1
  single = int(largest[room])
  if single:
    best, key = [single], (2 * single) * (room + 1) + single
  if two:
    firsts = np.flatnonzero(available[1:room]) + 1               # [m] the longer member
    # The second: the longest that fits beside the first and is no longer (the first itself
    # only if two of its length are left).
    seconds = largest[np.minimum(room - firsts, firsts)]
    lone = (seconds == firsts) & (left[firsts] < 2)
    seconds = np.where(lone, largest[np.minimum(room - firsts, firsts - 1)], seconds)
    pair = seconds > 0
    if pair.any():
      firsts, seconds = firsts[pair], seconds[pair]
      keys = (2 * (firsts + seconds) + 1) * (room + 1) + firsts
      j = int(np.argmax(keys))
      if keys[j] > key:
        best = [int(firsts[j]), int(seconds[j])]
  return best


def predictions_bound(max_seq_length: int, max_predictions_per_seq: int,
                      max_sequences_per_pack: int, masked_lm_prob: float) -> int:
  """The most masked-LM targets a packed row can hold when its instances were masked by
  google-research/bert's rule: num_to_predict = min(max_predictions_per_seq, max(1,
  round(len(tokens) * masked_lm_prob))), tokens counting [CLS] and the [SEP]s (the
  dynamic masker counts fewer: neither), and never more masked than that (whole words
  that would overshoot are skipped). round(x) <= x + 1/2, and max(1, .) adds nothing once
  n p >= 1/2 (the original's instances hold 5 tokens and more, [CLS] a [SEP] b [SEP]: 0.75
  at 0.15); a row's lengths sum to at most S over at most k instances: floor(S p + k/2), and
  at most k P. Not below P, one record's width (S = 512, P = 80: 78 -> 80). S = 128, P = 20,
  k = 3 at 0.15: 20 slots of 60, as many as one record; each slot costs a projection onto
  the vocabulary, empty or not (run_pretraining at L=2 H=128 B=32, vocab 30522, lengths half
  padding: packed at 60 slots 0.85x the real tokens/s of unpacked, at 22 1.8x). Records
  masked at a higher rate, or of shorter instances, still pack right: a row over the width
  is split (`_split_over`), at some cost in fill."""
  k, p = max_sequences_per_pack, max_predictions_per_seq
  # The epsilon: S p + k/2 computed in floating point just below a whole number (0.29 * 100).
  return min(k * p, max(p, int(max_seq_length * masked_lm_prob + k / 2 + 1e-9)))


def prediction_slots(max_predictions_per_seq: int, max_sequences_per_pack: int,
                     max_predictions_per_pack: int | None) -> int:
  """A packed row's masked-LM slots (`pack_dataset`'s max_predictions_per_pack): k P when
  None; ValueError outside [P, k P] (below P, one record would not fit a row)."""
  most = max_sequences_per_pack * max_predictions_per_seq
  slots = max_predictions_per_pack or most
  if not max_predictions_per_seq <= slots <= most:
    raise ValueError(f"--max_predictions_per_pack={slots}: a packed row's masked LM slots "
                     f"go from {max_predictions_per_seq} (--max_predictions_per_seq, one "
                     f"record's) to {most} (x --max_sequences_per_pack)")
  return slots


def pack_dataset(batches: tf.data.Dataset, batch_size: int,
                 max_sequences_per_pack: int = DEFAULT_SEQUENCES_PER_PACK,
                 buffer_size: int = DEFAULT_BUFFER_SIZE,
                 drop_remainder: bool = True,
                 max_predictions_per_pack: int | None = None) -> tf.data.Dataset:
  """Unpacked, masked batches -> packed batches of `batch_size` rows.

  Args:
    batches: a dataset of dicts of `UNPACKED_INPUTS` (what `datasets.record_dataset` yields
      for `schema.pretraining_features`, or dynamic masking's output), batches of any size:
      input_word_ids, input_mask (1 on the tokens, then 0), input_type_ids: int32 [n, S];
      masked_lm_positions, masked_lm_ids: int32 [n, P]; masked_lm_weights: float32 [n, P];
      next_sentence_labels: int32 [n, 1]. S and P static.
    batch_size: rows per packed batch (under tf.distribute, the pipeline's own share, as
      `InputContext.get_per_replica_batch_size` gives).
    max_sequences_per_pack: k, the most instances a row holds.
    buffer_size: instances packed together (`pack_lengths` over their lengths): more packs
      fuller, and costs memory and the wait for the first batch.
    drop_remainder: as tf.data's batch: True gives a static batch dimension (training's
      endless stream); False keeps a finite stream's last, smaller batch (evaluation).
    max_predictions_per_pack: N, the masked-LM slots of a row (from P, one instance's, to
      k*P, the default, which never splits): a row holds its instances' targets first, and
      a pack over N is split (`_split_over`). `predictions_bound` never splits the original's
      records masked at its rate, at a fraction of k*P's cost.

  Returns:
    A dataset of dicts (`schema.packed_pretraining_features`, model names), B = batch_size:
    input_word_ids, input_type_ids: int32 [B, S], 0 at padding;
    input_mask: int32 [B, S], the token's 1-based instance index in its row, 0 at padding;
    input_positions: int32 [B, S], the token's position in its instance, 0 at padding;
    masked_lm_positions, masked_lm_ids: int32 [B, N]; masked_lm_weights: float32 [B, N]:
      the row's targets first, instance by instance, each instance's in its record's order,
      positions shifted to the row; then 0/0/0.0 (an entry of weight 0 is no target);
    next_sentence_labels, next_sentence_positions (its [CLS]'s index in the row): int32
      [B, k]; next_sentence_weights: float32 [B, k], 1.0 for an instance, 0.0 an empty slot.
  """
  missing = set(UNPACKED_INPUTS) - set(batches.element_spec)
  extra = set(batches.element_spec) - set(UNPACKED_INPUTS)
  if missing or extra:
    raise ValueError(f"packing takes masked pretraining batches of {list(UNPACKED_INPUTS)}; "
                     f"missing {sorted(missing)}, not packable {sorted(extra)}")
  max_seq_length = batches.element_spec["input_word_ids"].shape[1]
  per_instance = batches.element_spec["masked_lm_ids"].shape[1]
  if max_seq_length is None or per_instance is None:
    raise ValueError("packing needs the batches' sequence and prediction lengths static")
  slots = prediction_slots(per_instance, max_sequences_per_pack, max_predictions_per_pack)

  def pack(batch: dict) -> dict:
    lengths = tf.reduce_sum(tf.cast(batch["input_mask"] > 0, tf.int32), axis=1)
    predictions = tf.reduce_sum(tf.cast(batch["masked_lm_weights"] != 0, tf.int32), axis=1)
    packs = tf.numpy_function(
        lambda n, m: pack_lengths(n, max_seq_length, max_sequences_per_pack, m, slots),
        [lengths, predictions], tf.int32, stateful=False)
    packs.set_shape([None, max_sequences_per_pack])
    return gather_packs(batch, lengths, packs, slots)

  buffers = batches.rebatch(buffer_size, drop_remainder=False)
  # One buffer at a time, packed when the prefetch below reaches it: a parallel map packs
  # buffers ahead of need, thousands of instances each, and on a CPU that shares its cores
  # with training, that took 16% of a step's time at 512 (L=4/H=256, 2 cores, the rows
  # otherwise as fast as unpacked ones). The prefetch still hides a buffer's packing.
  packed = buffers.map(tf.autograph.experimental.do_not_convert(pack))
  return packed.rebatch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


def gather_packs(batch: dict, lengths: tf.Tensor, packs: tf.Tensor,
                 max_predictions_per_pack: int) -> dict:
  """The packed rows of `pack_dataset`'s Returns, [m, ...] for the m packs of `packs`
  (int32 [m, k], `pack_lengths`'s) over the unpacked `batch` ([n, ...], `lengths` [n] its
  instances' token counts), max_predictions_per_pack masked-LM slots a row."""
  max_seq_length = batch["input_word_ids"].shape[1]
  k = packs.shape[1]
  real = packs >= 0                                                   # [m, k]
  index = tf.maximum(packs, 0)
  member_lengths = tf.where(real, tf.gather(lengths, index), 0)
  ends = tf.cumsum(member_lengths, axis=1)
  starts = ends - member_lengths                                      # [m, k] offsets
  position = tf.range(max_seq_length)
  # Each position's member: how many members end at or before it (k past the last one, the
  # empty slots ending there too).
  member = tf.reduce_sum(tf.cast(position[None, :, None] >= ends[:, None, :], tf.int32), -1)
  token = member < k                                                  # [m, S]
  member = tf.minimum(member, k - 1)
  within = position[None, :] - tf.gather(starts, member, batch_dims=1)
  source = tf.stack([tf.gather(index, member, batch_dims=1),
                     tf.where(token, within, 0)], axis=-1)            # [m, S, 2]
  out = {name: tf.where(token, tf.gather_nd(batch[name], source), 0)
         for name in ("input_word_ids", "input_type_ids")}
  out["input_mask"] = tf.where(token, member + 1, 0)
  out["input_positions"] = tf.where(token, within, 0)

  # An entry of weight 0 is no prediction: 0/0/0.0, as an empty slot's. The row's
  # predictions first (a stable sort keeps their order), cut to the slots.
  weights = tf.gather(batch["masked_lm_weights"], index)              # [m, k, P]
  width = k * batch["masked_lm_ids"].shape[1]
  predicted = tf.reshape(real[:, :, None] & (weights != 0), [-1, width])
  check = tf.debugging.assert_less_equal(
      tf.reduce_sum(tf.cast(predicted, tf.int32), axis=1), max_predictions_per_pack,
      message=f"a packed row holds more masked LM targets than --max_predictions_per_pack="
              f"{max_predictions_per_pack}")
  with tf.control_dependencies([check]):
    order = tf.argsort(tf.cast(~predicted, tf.int32), axis=1,
                       stable=True)[:, :max_predictions_per_pack]
  kept = tf.gather(predicted, order, batch_dims=1)
  shifted = tf.gather(batch["masked_lm_positions"], index) + starts[:, :, None]
  for name, values in (("masked_lm_positions", shifted),
                       ("masked_lm_ids", tf.gather(batch["masked_lm_ids"], index)),
                       ("masked_lm_weights", weights)):
    values = tf.gather(tf.reshape(values, [-1, width]), order, batch_dims=1)
    out[name] = tf.where(kept, values, tf.zeros_like(values))
  labels = tf.gather(batch["next_sentence_labels"][:, 0], index)
  out["next_sentence_labels"] = tf.where(real, labels, 0)
  out["next_sentence_positions"] = tf.where(real, starts, 0)
  out["next_sentence_weights"] = tf.cast(real, tf.float32)
  return out


def padding_share(lengths: np.ndarray, max_seq_length: int) -> float:
  """The share of positions that are padding when each instance has a row of its own."""
  lengths = np.asarray(lengths, np.int64)
  return float(1.0 - lengths.sum() / (lengths.size * max_seq_length))


def packing_stats(lengths: np.ndarray, max_seq_length: int,
                  max_sequences_per_pack: int = DEFAULT_SEQUENCES_PER_PACK,
                  buffer_size: int = DEFAULT_BUFFER_SIZE) -> dict:
  """What packing a stream of instances gives, packed buffer by buffer as `pack_dataset`
  packs it: [n] lengths in stream order -> sequences, packs, padding_share (unpacked),
  efficiency (real tokens over the packs' positions), speed_up (rows unpacked over rows
  packed: the instances a packed row holds on average, and the real tokens a step more at a
  step's cost per row), bound (the speed-up without any padding: positions unpacked over
  real tokens; speed_up = bound x efficiency)."""
  lengths = np.asarray(lengths, np.int64)
  lengths = lengths[lengths > 0]
  packs = sum(len(pack_lengths(lengths[i:i + buffer_size], max_seq_length,
                               max_sequences_per_pack))
              for i in range(0, lengths.size, buffer_size))
  tokens = int(lengths.sum())
  return dict(sequences=int(lengths.size), packs=packs,
              padding_share=padding_share(lengths, max_seq_length),
              efficiency=tokens / (packs * max_seq_length),
              speed_up=lengths.size / packs,
              bound=lengths.size * max_seq_length / tokens)
