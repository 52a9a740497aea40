r"""The exported SQuAD model against run_squad's own predictions on the same questions.

Kind: a parity check (benchmarks/parity/): an export against its own model's
predictions.json.

After benchmarks/runs/squad.py (or run_squad --do_predict) has filled --model_dir:

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/parity/squad_export_parity.py \
      --model_dir=/tmp/bench_squad_v1 --predict_file=/tmp/squad_bench/eval-v1.1.json

exports the model (export/saved_model.py), loads the SavedModel, asks it every question of
--predict_file as raw text (batches of --batch_size), and prints the official scores of both
answer sets, how many answers are equal, and a few that differ.
"""
import json
import os
import tempfile
import time

from absl import app
from absl import flags
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import tensorflow as tf

from bert_tf.tasks.squad import scoring as squad_eval
from export import saved_model
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", scratch.path("bench_squad_v1"), "run_squad's output_dir.")
flags.DEFINE_string("predict_file", scratch.path("squad_bench", "eval-v1.1.json"),
                    "Its --predict_file.")
flags.DEFINE_integer("batch_size", 16, "Questions per request.")


def _scores(dataset: list, predictions: dict, na_probs: dict | None, version_2: bool) -> dict:
  if version_2:
    return squad_eval.evaluate_v2(dataset, predictions, na_probs)
  return squad_eval.evaluate_v1(dataset, predictions)


def main(argv):
  del argv
  with open(FLAGS.predict_file) as f:
    data = json.load(f)
  version_2 = any("is_impossible" in qa for article in data["data"]
                  for paragraph in article["paragraphs"] for qa in paragraph["qas"])
  questions = [(qa["id"], qa["question"], paragraph["context"]) for article in data["data"]
               for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
  with open(os.path.join(FLAGS.model_dir, "predictions.json")) as f:
    in_process = json.load(f)

  with tempfile.TemporaryDirectory() as export_dir:
    path = saved_model.export_from_output_dir(FLAGS.model_dir, export_dir)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    served, start = {}, time.time()
    for i in range(0, len(questions), FLAGS.batch_size):
      batch = questions[i:i + FLAGS.batch_size]
      out = serve(question=tf.constant([q for _, q, _ in batch]),
                  context=tf.constant([c for _, _, c in batch]))
      for (qid, _, _), answer in zip(batch, out["answer"].numpy()):
        served[qid] = answer.decode("utf-8")
    seconds = time.time() - start

  differing = [qid for qid in in_process if served.get(qid) != in_process[qid]]
  print(json.dumps({
      "questions": len(questions), "served_seconds": round(seconds, 1),
      "equal_answers": len(questions) - len(differing),
      "equal_share": round(1 - len(differing) / len(questions), 4),
      "predictions_json": _scores(data["data"], in_process, None, version_2),
      "served": _scores(data["data"], served, None, version_2),
      "examples_of_differences": [(qid, in_process[qid], served.get(qid))
                                  for qid in differing[:10]]}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
  app.run(main)
