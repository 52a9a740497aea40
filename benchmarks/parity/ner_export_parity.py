r"""The exported NER model against run_ner's own predictions on the same sentences.

Kind: a parity check (benchmarks/parity/): an export against its own model, in process.

After benchmarks/runs/ner.py (or run_ner --do_train) has filled --model_dir with a tagger trained
without document context:

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/parity/ner_export_parity.py \
      --model_dir=/tmp/bench_ner/document_context_False --data_dir=$BERT_TF_DATA/conll2003

predicts --split's sentences in process (the task's features, the model, the task's
post-processing: run_ner's predictions), exports the model (export/saved_model.py), loads the
SavedModel and sends it each sentence as raw text (its words joined by spaces, batches of
--batch_size), and prints one JSON line: sentences, how many get the same entities (type and
character span) both ways, entities in each and in common, the entity F1 of each against the
gold tags (conlleval's rules over character spans), and how many sentences hold a word the
tokenizer splits ("U.S.": one word to the task, several to the signature) and how many of
those agree. A few that differ are printed after it.
"""
import json
import tempfile

from absl import app
from absl import flags
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import numpy as np
from seqeval.metrics.sequence_labeling import get_entities
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.finetuning import runner
from export import saved_model
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", scratch.path("bench_ner", "document_context_False"),
                    "run_ner's output_dir (a tagger trained with --nodocument_context).")
flags.DEFINE_string("data_dir", data_root.path("conll2003"), "Holds the split's file.")
if data_root.path("conll2003") is None:
  flags.mark_flag_as_required("data_dir")  # $BERT_TF_DATA unset.
flags.DEFINE_enum("split", "dev", ["dev", "test"], "Which file's sentences.")
flags.DEFINE_integer("batch_size", 64, "Sentences per model call and per request.")
flags.DEFINE_integer("show", 5, "How many differing sentences to print.")


def python_predictions(task, model, tokenizer, sentences) -> list[list[str]]:
  """run_ner's tags for the sentences: the task's features, the model, its post-processing."""
  features = task.convert_examples(sentences, tokenizer, False)
  names = {"input_ids": "input_word_ids", "input_mask": "input_mask",
           "segment_ids": "input_type_ids"}
  label_ids = []
  for begin in range(0, len(features.records), FLAGS.batch_size):
    batch = features.records[begin:begin + FLAGS.batch_size]
    inputs = {name: tf.constant(np.stack([r[key] for r in batch]), tf.int32)
              for key, name in names.items()}
    label_ids.append(task.predict_outputs({}, model(inputs, training=False))["label_ids"].numpy())
  return task.postprocess(sentences, features, {"label_ids": np.concatenate(label_ids)})


def char_entities(words: list[str], tags: list[str]) -> set[tuple[str, int, int]]:
  """(type, start, end) in characters of " ".join(words) for conlleval's entities of tags."""
  starts = np.cumsum([0] + [len(w) + 1 for w in words])
  return {(kind, int(starts[first]), int(starts[last] + len(words[last])))
          for kind, first, last in get_entities(tags)}


def f1(gold: list[set], found: list[set]) -> float:
  correct = sum(len(g & f) for g, f in zip(gold, found))
  total_gold, total_found = sum(map(len, gold)), sum(map(len, found))
  return 200 * correct / (total_gold + total_found) if total_gold + total_found else 0.0


def main(argv):
  del argv
  task, model, tokenizer = runner.load_trained(FLAGS.model_dir, data=FLAGS.data_dir)
  if task.config.document_context:
    raise SystemExit(f"{FLAGS.model_dir}: trained with document context, where the task's "
                     "features and the signature's windows differ by design; give a "
                     "--nodocument_context run")
  sentences = task.read_examples(FLAGS.split)
  texts = [" ".join(s.words) for s in sentences]
  in_process = [char_entities(s.words, tags)
                for s, tags in zip(sentences, python_predictions(task, model, tokenizer,
                                                                 sentences))]
  gold = [char_entities(s.words, s.tags) for s in sentences]

  with tempfile.TemporaryDirectory() as export_dir:
    path = saved_model.export_from_output_dir(FLAGS.model_dir, export_dir)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    served = []
    for begin in range(0, len(texts), FLAGS.batch_size):
      out = {k: v.numpy() for k, v in serve(text=tf.constant(texts[begin:begin + FLAGS.batch_size])
                                            ).items()}
      for row, count in enumerate(out["num_entities"]):
        served.append({(out["entity_type"][row, i].decode(), int(out["start"][row, i]),
                        int(out["end"][row, i])) for i in range(count)})

  distinct = sorted({w for s in sentences for w in s.words})
  counts = tokenization.split_words(tf.constant(distinct), task.config.do_lower_case).row_lengths()
  split = {w for w, n in zip(distinct, counts.numpy()) if n > 1}
  split_words = [any(w in split for w in s.words) for s in sentences]
  equal = [a == b for a, b in zip(in_process, served)]
  print(json.dumps({
      "sentences": len(sentences), "equal": sum(equal),
      "equal_share": round(100 * sum(equal) / len(sentences), 2),
      "entities_in_process": sum(map(len, in_process)), "entities_served": sum(map(len, served)),
      "entities_in_common": sum(len(a & b) for a, b in zip(in_process, served)),
      "f1_in_process": round(f1(gold, in_process), 2), "f1_served": round(f1(gold, served), 2),
      "sentences_with_split_words": sum(split_words),
      "equal_among_them": sum(e for e, s in zip(equal, split_words) if s)}), flush=True)
  shown = 0
  for text, a, b in zip(texts, in_process, served):
    if a != b and shown < FLAGS.show:
      shown += 1
      print(json.dumps({"text": text[:200], "only_in_process": sorted(a - b),
                        "only_served": sorted(b - a)}))


if __name__ == "__main__":
  app.run(main)
