"""Classification examples → features → `{train,eval,predict}.tf_record` → tf.data batches.

Features are google-research/bert's: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids
0 for `[CLS] a [SEP]` and 1 for `b [SEP]`, a pair truncated by popping from the longer text
(the original's `_truncate_seq_pair`, which is what the serving graph's round-robin trimmer
computes too), zero-padded to max_seq_length.
"""
import numpy as np
import tensorflow as tf

from bert_tf.tasks.glue import InputExample
from tfrecords import datasets, schema, writer


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


def label_id(example: InputExample, label_list: list[str] | None) -> float | int:
  """The label's index (its float value for regression); 0 for unlabelled test examples."""
  if example.label is None:
    return 0
  return float(example.label) if label_list is None else label_list.index(example.label)


def convert_examples(examples: list[InputExample], label_list: list[str] | None,
                     max_seq_length: int, tokenizer) -> list[dict]:
  """Feature dicts (see `schema.classifier_features`), one per example, in order."""
  ids_a = tokenizer.tokenize_ids([e.text_a for e in examples])
  pairs = [i for i, e in enumerate(examples) if e.text_b is not None]
  ids_b = [None] * len(examples)
  if pairs:
    for i, ids in zip(pairs, tokenizer.tokenize_ids([examples[i].text_b for i in pairs])):
      ids_b[i] = ids
  features = []
  for example, a, b in zip(examples, ids_a, ids_b):
    feature = pack(np.asarray(a, np.int64), None if b is None else np.asarray(b, np.int64),
                   max_seq_length, tokenizer)
    feature["label_ids"] = label_id(example, label_list)
    feature["is_real_example"] = 1
    features.append(feature)
  return features


def padding_features(num_real: int, batch_size: int, max_seq_length: int) -> list[dict]:
  """All-zero features with is_real_example 0 that fill the last batch, so evaluation and
  prediction see static batch shapes (what TPUs and XLA need) yet count only real examples."""
  zeros = np.zeros([max_seq_length], np.int64)
  feature = {"input_ids": zeros, "input_mask": zeros, "segment_ids": zeros, "label_ids": 0,
             "is_real_example": 0}
  return [feature] * (-num_real % batch_size)


def write_records(path: str, features: list[dict], max_seq_length: int,
                  regression: bool) -> int:
  """Writes the features to the TFRecord file `path`, atomically. Returns the count."""
  return writer.write_records(path, schema.classifier_features(max_seq_length, regression),
                              features)


def dataset(path: str, max_seq_length: int, regression: bool, batch_size: int,
            is_training: bool, input_context: tf.distribute.InputContext | None = None,
            seed: int | None = None) -> tf.data.Dataset:
  """Batches of the records in `path`: input_word_ids, input_mask, input_type_ids
  [batch, max_seq_length] int32; label_ids [batch, 1] (int32, float32 for regression);
  is_real_example [batch, 1] int32. Training repeats and shuffles; otherwise one pass, in order.
  """
  return datasets.record_dataset([path], schema.classifier_features(max_seq_length, regression),
                                 batch_size, is_training, input_context=input_context, seed=seed,
                                 drop_remainder=True)
