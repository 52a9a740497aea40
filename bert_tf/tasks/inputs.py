"""How the original packs a task's text for the encoder (whose inputs are
`bert_tf.modeling.encoder.INPUT_NAMES`): `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` from token
ids, a pair truncated from the longer text (the original's `_truncate_seq_pair`); and the name
of the signature that serves token ids."""
import numpy as np

# A served model's second signature: the encoder's three inputs, already packed.
IDS_SIGNATURE = "serve_token_ids"


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

