"""Every record layout, defined once.

The pretraining layout is google-research/bert's, byte for byte: the original's
`run_pretraining.py` reads our shards and we read its shards. Records keep the original's
feature names (`input_ids`, `segment_ids`); the Keras models use the Model Garden's names
(`input_word_ids`, `input_type_ids`). `MODEL_INPUT_NAMES` is the one place that maps them.
"""
import dataclasses

import tensorflow as tf

# Record feature name -> model input name. Names absent here are the same in both.
MODEL_INPUT_NAMES = {
    "input_ids": "input_word_ids",
    "input_mask": "input_mask",
    "segment_ids": "input_type_ids",
}


@dataclasses.dataclass(frozen=True)
class Feature:
  """One fixed-length feature of a record: name, dtype ("int64" | "float32"), length.

  `sequence_length` marks a per-token feature: one value per position of a zero-padded
  sequence of that length (`length` is a multiple of it: a multiple-choice record holds one
  sequence per ending). 0 for other features. Length-bucketed batches cut these, and only these,
  to the batch's bucket length (`tfrecords.datasets`).
  """
  name: str
  dtype: str
  length: int
  sequence_length: int = 0

  def parse_spec(self) -> tf.io.FixedLenFeature:
    return tf.io.FixedLenFeature([self.length], getattr(tf, self.dtype))


def token_features(max_seq_length: int, num_sequences: int = 1) -> list[Feature]:
  """input_ids, input_mask, segment_ids: int64 [num_sequences * max_seq_length], each sequence
  zero-padded to max_seq_length; the mask is 1 over each sequence's tokens, then 0."""
  return [Feature(name, "int64", num_sequences * max_seq_length, max_seq_length)
          for name in ("input_ids", "input_mask", "segment_ids")]


def pretraining_features(max_seq_length: int, max_predictions_per_seq: int) -> list[Feature]:
  """google-research/bert's pretraining record, in the original's feature order.

  input_ids, input_mask, segment_ids:           int64 [max_seq_length], zero-padded.
  masked_lm_positions, masked_lm_ids:           int64 [max_predictions_per_seq], zero-padded.
  masked_lm_weights:                            float [max_predictions_per_seq], 1.0 real, 0.0 pad.
  next_sentence_labels:                         int64 [1]; 0 = B is the actual next, 1 = random.
  """
  return token_features(max_seq_length) + [
      Feature("masked_lm_positions", "int64", max_predictions_per_seq),
      Feature("masked_lm_ids", "int64", max_predictions_per_seq),
      Feature("masked_lm_weights", "float32", max_predictions_per_seq),
      Feature("next_sentence_labels", "int64", 1),
  ]


def packed_pretraining_features(max_seq_length: int, max_predictions_per_seq: int,
                                max_sequences_per_pack: int) -> list[Feature]:
  """A packed pretraining row: up to k = max_sequences_per_pack pretraining records one after
  another in max_seq_length positions, then zero padding. Packed in tf.data from the records
  as they are (`tfrecords.packing.pack_dataset`), never written; P = max_predictions_per_seq.

  input_ids, segment_ids:               int64 [max_seq_length], each record's own.
  input_mask:                           int64 [max_seq_length]: the token's record's 1-based
                                        index in the row (1, 1, ..., 2, 2, ...), 0 at padding.
  input_positions:                      int64 [max_seq_length]: the token's position in its
                                        record (0 at its [CLS]), 0 at padding.
  masked_lm_positions, masked_lm_ids:   int64 [k * P, or fewer: pack_dataset's
                                        max_predictions_per_pack]: the row's targets first,
                                        record by record, positions counted in the row; then 0.
  masked_lm_weights:                    float [as those]: 1.0 real, 0.0 none.
  next_sentence_labels:                 int64 [k]: record i's label; 0 for an empty slot.
  next_sentence_positions:              int64 [k]: record i's [CLS] in the row (its offset).
  next_sentence_weights:                float [k]: 1.0 for a record, 0.0 for an empty slot.
  """
  k, predictions = max_sequences_per_pack, max_sequences_per_pack * max_predictions_per_seq
  return token_features(max_seq_length) + [
      Feature("input_positions", "int64", max_seq_length, max_seq_length),
      Feature("masked_lm_positions", "int64", predictions),
      Feature("masked_lm_ids", "int64", predictions),
      Feature("masked_lm_weights", "float32", predictions),
      Feature("next_sentence_labels", "int64", k),
      Feature("next_sentence_positions", "int64", k),
      Feature("next_sentence_weights", "float32", k),
  ]


def unmasked_pretraining_features(max_seq_length: int) -> list[Feature]:
  """The pretraining record without masked LM targets, for dynamic masking (drawn as the
  records are read: `bert_tf.training.dynamic_masking`): `pretraining_features` less its three
  masked_lm_* features, input_ids unmasked. Word starts come from the vocabulary ("##")."""
  return [f for f in pretraining_features(max_seq_length, 1)
          if not f.name.startswith("masked_lm_")]


def classifier_features(max_seq_length: int, regression: bool = False) -> list[Feature]:
  """google-research/bert's run_classifier record, in the original's feature order.

  input_ids, input_mask, segment_ids:  int64 [max_seq_length], zero-padded.
  label_ids:                           int64 [1], the label's index; float [1] for regression.
  is_real_example:                     int64 [1]; 0 for the padding examples that fill the
                                       last eval/predict batch to a static shape.
  """
  return token_features(max_seq_length) + [
      Feature("label_ids", "float32" if regression else "int64", 1),
      Feature("is_real_example", "int64", 1),
  ]


def multiple_choice_features(max_seq_length: int, num_choices: int) -> list[Feature]:
  """A multiple-choice example (SWAG): its num_choices sequences, one after another.

  input_ids, input_mask, segment_ids:  int64 [num_choices * max_seq_length]: choice i's
                                       `[CLS] context [SEP] ending_i [SEP]`, zero-padded, at
                                       [i * max_seq_length, (i + 1) * max_seq_length).
  label_ids:                           int64 [1], the correct ending's index (0 unlabelled).
  is_real_example:                     int64 [1]; 0 for the padding examples of the last
                                       eval/predict batch.
  """
  return token_features(max_seq_length, num_choices) + [
      Feature("label_ids", "int64", 1),
      Feature("is_real_example", "int64", 1),
  ]


def token_classification_features(max_seq_length: int) -> list[Feature]:
  """A token tagging record (NER): the Model Garden's tagging_data_lib layout.

  input_ids, input_mask, segment_ids:  int64 [max_seq_length], zero-padded.
  label_ids:                           int64 [max_seq_length]; each word's label at its first
                                       wordpiece, -1 at every other position (ignored).
  """
  return token_features(max_seq_length) + [
      Feature("label_ids", "int64", max_seq_length, max_seq_length),
  ]


def parse_spec(features: list[Feature]) -> dict[str, tf.io.FixedLenFeature]:
  return {f.name: f.parse_spec() for f in features}


def to_model_inputs(record: dict) -> dict:
  """Renames record features to model input names; int64 becomes int32 (TPUs want int32)."""
  out = {}
  for name, value in record.items():
    if value.dtype == tf.int64:
      value = tf.cast(value, tf.int32)
    out[MODEL_INPUT_NAMES.get(name, name)] = value
  return out


def squad_features(max_seq_length: int, is_training: bool) -> list[Feature]:
  """google-research/bert's run_squad record (its FeatureWriter), in the original's order.

  unique_ids:                          int64 [1]; the feature's id, from 1000000000 up.
  input_ids, input_mask, segment_ids:  int64 [max_seq_length], zero-padded;
                                       [CLS] question [SEP] passage window [SEP].
  Training only:
  start_positions, end_positions:      int64 [1]; the answer's first and last token, 0 ([CLS])
                                       when the window does not hold it or there is none.
  is_impossible:                       int64 [1]; 1 for a SQuAD v2.0 unanswerable question.
  """
  features = [Feature("unique_ids", "int64", 1)] + token_features(max_seq_length)
  if is_training:
    features += [
        Feature("start_positions", "int64", 1),
        Feature("end_positions", "int64", 1),
        Feature("is_impossible", "int64", 1),
    ]
  return features
