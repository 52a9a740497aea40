"""How the original packs a task's text for the encoder (whose inputs are
`bert_tf.modeling.encoder.INPUT_NAMES`): `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` from token
ids, a pair truncated from the longer text (the original's `_truncate_seq_pair`), in numpy for
the records (`pack`) and in the serving graph from raw text (`TextPacker`, each batch cut to
its longest); a served batch run in chunks sorted by length (`call_by_length`); and the
signature that serves token ids."""
from typing import Callable

import numpy as np
from official.nlp.modeling import layers
import tensorflow as tf

from bert_tf.modeling.encoder import INPUT_NAMES
from bert_tf.finetuning import windows

# A served model's second signature: the encoder's three inputs, already packed.
IDS_SIGNATURE = "serve_token_ids"

# Rows (or windows) per model call in serving (`call_by_length`): chunks this small follow the
# lengths of a mixed batch closely, still give the matrix products a few hundred rows each,
# and let two chunks of a batch of 32 run side by side (`windows.call_in_chunks`; 64 windows
# a call left NER and SQuAD batches as one call: benchmarks/README.md, serving).
SERVING_CHUNK = 8


def truncate_pair(ids_a: np.ndarray, ids_b: np.ndarray, max_length: int):
  """Shortens the pair to at most `max_length` ids in total, one id at a time from the end
  of the longer (of `b` on a tie), so a long text loses more than a short one."""
  len_a, len_b = len(ids_a), len(ids_b)
  while len_a + len_b > max_length:
    if len_a > len_b:
      len_a -= 1
    else:
      len_b -= 1
  return ids_a[:len_a], ids_b[:len_b]


def pack(ids_a: np.ndarray, ids_b: np.ndarray | None, max_seq_length: int, tokenizer) -> dict:
  """One example's input_ids, input_mask, segment_ids: int64 [max_seq_length] each."""
  if ids_b is None:
    ids_a, ids_b = ids_a[:max_seq_length - 2], np.zeros([0], np.int64)
    segments = [[tokenizer.cls_id], ids_a, [tokenizer.sep_id]]
  else:
    ids_a, ids_b = truncate_pair(ids_a, ids_b, max_seq_length - 3)
    segments = [[tokenizer.cls_id], ids_a, [tokenizer.sep_id], ids_b, [tokenizer.sep_id]]
  ids = np.concatenate([np.asarray(s, np.int64) for s in segments])
  input_ids = np.full([max_seq_length], tokenizer.pad_id, np.int64)
  input_ids[:len(ids)] = ids
  input_mask = (np.arange(max_seq_length) < len(ids)).astype(np.int64)
  segment_ids = np.zeros([max_seq_length], np.int64)
  segment_ids[len(ids_a) + 2:len(ids)] = 1
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


class TextPacker(tf.Module):
  """In a serving graph: raw text → the encoder's three inputs, the ids `pack` gives the
  records (the tokenizer's TF module, which carries the vocabulary as an asset; the Model
  Garden's BertPackInputs, whose round-robin trimming keeps truncate_pair's ids)."""

  def __init__(self, tokenizer, max_seq_length: int):
    super().__init__(name="text_packer")
    self.tokenizer = tokenizer.module
    self.special_ids = dict(start_of_sequence_id=tokenizer.cls_id,
                            end_of_segment_id=tokenizer.sep_id, padding_id=tokenizer.pad_id)
    self.max_seq_length = max_seq_length

  def __call__(self, text_a: tf.Tensor, text_b: tf.Tensor | None = None) -> dict:
    """string [batch] (x2) → {INPUT_NAMES: int32 [batch, length]}, the batch cut to its
    longest packed text (length ≤ max_seq_length)."""
    segments = [self.tokenizer(text_a)]
    if text_b is not None:
      segments.append(self.tokenizer(text_b))
    packed = layers.BertPackInputs.bert_pack_inputs(
        segments, self.max_seq_length, truncator="round_robin", **self.special_ids)
    # Cut to the longest: the encoder's cost grows with the length, and a short request padded
    # to max_seq_length pays for all of it. The padding columns cut are masked out everywhere,
    # so the answers are the padded batch's (the mask is a prefix of ones, so its longest row
    # is the batch's length).
    # At least 1: an empty batch (TF Serving passes one through) has no longest (its maximum
    # is int32's smallest), and the encoder's [CLS] slice needs a column, even of no rows.
    length = tf.maximum(tf.reduce_max(tf.reduce_sum(packed["input_mask"], axis=1)), 1)
    # int32, as the token-ids signature takes them: the model then runs one graph for both.
    return {name: tf.cast(ids[:, :length], tf.int32) for name, ids in packed.items()}


def ids_signature(predict_ids: Callable[[dict], dict], shape: list):
  """IDS_SIGNATURE's concrete function: the encoder's three inputs (INPUT_NAMES), int32 of
  `shape` ([None, None], or [None, num_choices, None]) → predict_ids({name: ids})."""
  spec = tf.TensorSpec(shape, tf.int32)

  def serve(input_word_ids, input_mask, input_type_ids):
    # An empty batch may come with no columns either ([0, 0]): one padding column (masked out)
    # gives the encoder's [CLS] slice something to take, as TextPacker's packing does.
    missing = tf.maximum(1 - tf.shape(input_mask)[-1], 0)
    paddings = [[0, 0]] * (len(shape) - 1) + [[0, missing]]
    return predict_ids({name: tf.pad(ids, paddings) for name, ids in zip(
        INPUT_NAMES, (input_word_ids, input_mask, input_type_ids))})

  return tf.function(serve, input_signature=[spec] * len(INPUT_NAMES)).get_concrete_function()


def call_by_length(fn: Callable[[dict], tuple], inputs: dict, chunk_size: int, shapes: list,
                   per_position: tuple[bool, ...] = ()) -> tuple:
  """fn (the encoder's inputs → float32 outputs, one [rows, ...] tensor per entry of `shapes`,
  each the output's shape, None first) over a batch's rows ({INPUT_NAMES: [batch, width]}) in
  order of length, `chunk_size` rows a call, each chunk cut to its own longest; the outputs in
  the batch's order. An output marked in `per_position` ([rows, length, ...], one value per
  position) comes back as wide as the inputs, its cut positions 0.

  A batch of mixed lengths padded to its longest pays for the longest in every row: on 32
  consecutive SST-2 sentences, 19,520 positions, where chunks of 8 sorted rows hold 12,096.
  Each row's outputs are its own (the padding is masked out), so they are the padded batch's
  at every position that holds a token.
  """
  per_position = per_position or (False,) * len(shapes)
  width = tf.shape(inputs["input_mask"])[1]
  lengths = tf.reduce_sum(inputs["input_mask"], axis=1)

  def call(chunk):
    # At least 1: the empty chunk of an empty batch has no longest (its maximum is int32's
    # smallest).
    length = tf.maximum(tf.reduce_max(tf.reduce_sum(chunk["input_mask"], axis=1)), 1)
    outputs = fn({name: ids[:, :length] for name, ids in chunk.items()})
    return tuple(tf.pad(o, [[0, 0], [0, width - length]] + [[0, 0]] * (len(shape) - 2))
                 if cut else o for o, shape, cut in zip(outputs, shapes, per_position))

  order = tf.argsort(lengths, stable=True)
  outputs = windows.call_in_chunks(
      call, {name: tf.gather(ids, order) for name, ids in inputs.items()}, chunk_size, shapes)
  unsort = tf.math.invert_permutation(order)
  return tuple(tf.gather(o, unsort) for o in outputs)
