r"""Latency and throughput of an exported model's raw-text signature: alone, a classifier's
(and the share of its latency spent tokenizing and packing in the graph); or as our side's
worker in a side-by-side comparison with transformers (peers/serving_compare.py).

Kind: a run of our product (benchmarks/runs/): an export from run_classifier --export_dir (or,
as a worker, any task's export).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/serving.py \
      --saved_model=/tmp/mrpc_serving/1 --data_dir=$BERT_TF_DATA/glue/MRPC --task_name=MRPC

The requests are the task's dev pairs. The tokenization share compares `serving_default` (text
in) with `serve_token_ids` (the same examples' ids in, packed by bert_tf's feature writer to
max_seq_length: the graph cuts a batch to its longest, so the ids signature here is also given
each batch cut to its longest): share = 1 - ids latency / text latency, at the median.
With --model_dir (run_classifier's output_dir), also checks the SavedModel's dev predictions
against the in-process model restored from that folder's checkpoint.
Prints one JSON line.

With --worker it is a server's process: it imports tensorflow and tensorflow_text only (bert_tf
nowhere: the standalone mode's imports wait in its functions), loads --saved_model and answers
requests for `serving_default` on stdin (benchmarks/serving_worker.py), each batch's inputs
as tf.string tensors; --threads sets TensorFlow's inter-op threads and --intra_op_threads its
intra-op threads (a server's settings: TF Serving's --tensorflow_inter_op_parallelism and
--tensorflow_intra_op_parallelism). --runtime picks how the worker calls the signature:
  function  the SavedModel loaded by tf.saved_model.load, its signature a TF2 function called
            from Python (what a Python program serving it does);
  session   the SavedModel loaded into a v1 Session (graph mode, Grappler and oneDNN as
            TensorFlow sets them), the signature's tensors fed and fetched by Session.run: what
            TF Serving's model server does in C++ (SavedModelBundle, Session::Run), here with
            Python's feed and fetch around it. The function call's own cost (its inputs
            converted, its outputs structured, eager dispatch) is then not in the time.
"""
import json
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import serving_worker

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "An exported version folder, e.g. /tmp/serving/1.")
flags.DEFINE_string("data_dir", data_root.path("glue", "MRPC"),
                    "The task's GLUE folder (required without $BERT_TF_DATA, but not --worker).")
flags.DEFINE_string("task_name", "MRPC", "The GLUE task.")
flags.DEFINE_integer("num_requests", 200, "Batch-1 requests timed.")
flags.DEFINE_integer("num_batches", 20, "Batch-32 requests timed.")
flags.DEFINE_integer("max_seq_length", 128, "The exported model's max_seq_length.")
flags.DEFINE_string("model_dir", None, "[Optional] The run_classifier output_dir exported: "
                    "compare the SavedModel's dev logits with the in-process model's.")
flags.DEFINE_bool("worker", False, "Answer requests on stdin instead (the module docstring).")
flags.DEFINE_integer("threads", 0, "TensorFlow's inter-op threads, and its intra-op threads "
                     "unless --intra_op_threads is given (0: its default).")
flags.DEFINE_integer("intra_op_threads", 0, "TensorFlow's intra-op threads (0: --threads).")
flags.DEFINE_enum("runtime", "function", ["function", "session"],
                  "With --worker: the signature called as a TF2 function, or run in a v1 "
                  "Session as TF Serving runs it (the module docstring).")


def _time(text_fn, ids_fn, text_requests, ids_requests) -> tuple[np.ndarray, np.ndarray]:
  """Seconds per call of each signature on the same examples, after an untimed warm-up call.
  The two are called alternately, so that a drift in the machine's speed hits both alike."""
  text_fn(**text_requests[0])
  ids_fn(**ids_requests[0])
  times = []
  for text, ids in zip(text_requests, ids_requests):
    pair = []
    for fn, request in ((text_fn, text), (ids_fn, ids)):
      start = time.perf_counter()
      fn(**request)
      pair.append(time.perf_counter() - start)
    times.append(pair)
  return tuple(np.array(times).T)


def _requests(examples, features, batch_size, count):
  """`count` (text request, ids request) pairs of batch_size consecutive dev examples."""
  text, ids = [], []
  for i in range(count):
    idx = [(i * batch_size + j) % len(examples) for j in range(batch_size)]
    request = {"text_a": tf.constant([examples[k].text_a for k in idx])}
    if examples[0].text_b is not None:
      request["text_b"] = tf.constant([examples[k].text_b for k in idx])
    text.append(request)
    # Cut to the batch's longest, as the text signature's packer cuts it.
    length = max(features[k]["input_mask"].sum() for k in idx)
    ids.append({name: tf.constant(np.stack([features[k][record][:length] for k in idx]),
                                  tf.int32)
                for name, record in (("input_word_ids", "input_ids"),
                                     ("input_mask", "input_mask"),
                                     ("input_type_ids", "segment_ids"))})
  return text, ids


def _parity(serve_text, examples, features) -> dict:
  """Max |logit difference| and label agreement, SavedModel (raw text) vs in-process model."""
  from bert_tf.finetuning import runner  # pylint: disable=import-outside-toplevel
  _, model, _ = runner.load_trained(FLAGS.model_dir)
  exported, in_process = [], []
  for i in range(0, len(examples), 32):
    text, ids = _requests(examples[i:i + 32], features[i:i + 32], min(32, len(examples) - i), 1)
    exported.append(serve_text(**text[0])["logits"].numpy())
    in_process.append(model(ids[0], training=False).numpy())
  exported, in_process = np.concatenate(exported), np.concatenate(in_process)
  return {"dev_examples": len(examples),
          "dev_max_abs_logit_diff": float(np.max(np.abs(exported - in_process))),
          "dev_label_agreement": float(np.mean(exported.argmax(1) == in_process.argmax(1)))}


def _plain(value: np.ndarray):
  """An output as JSON takes it: text decoded."""
  if value.dtype == object:
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value).tolist()
  return value.tolist()


def _function(signature):
  """{name: list} -> {name: numpy array}: the TF2 signature called from Python."""
  def serve(inputs: dict) -> dict:
    outputs = signature(**{name: tf.constant(values) for name, values in inputs.items()})
    return {name: value.numpy() for name, value in outputs.items()}
  return serve


def _session(saved_model: str, intra_op: int, inter_op: int):
  """{name: list} -> {name: numpy array}: serving_default run in a v1 Session, as TF Serving's
  SavedModelBundle runs it."""
  tf.compat.v1.disable_eager_execution()
  session = tf.compat.v1.Session(graph=tf.Graph(), config=tf.compat.v1.ConfigProto(
      intra_op_parallelism_threads=intra_op, inter_op_parallelism_threads=inter_op))
  signature = tf.compat.v1.saved_model.load(
      session, ["serve"], saved_model).signature_def["serving_default"]
  fetches = {name: tensor.name for name, tensor in signature.outputs.items()}
  feeds = {name: tensor.name for name, tensor in signature.inputs.items()}
  return lambda inputs: session.run(
      fetches, {feeds[name]: values for name, values in inputs.items()})


def _work(serve, threads: dict) -> None:
  """The worker: `serve` ({input name: list} -> {output name: array}) called on each batch, its
  outputs as plain lists."""
  def predict(batch: list[dict]) -> dict:
    outputs = serve({name: [r[name] for r in batch] for name in batch[0]})
    return {name: _plain(value) for name, value in outputs.items()}
  serving_worker.serve(predict, {
      "side": "bert_tf", "tensorflow": tf.__version__, "runtime": FLAGS.runtime,
      "threads": threads,
      # What a server would not have: none of it imported.
      "foreign_modules": sorted({m.split(".")[0] for m in sys.modules} & {
          "bert_tf", "export", "official", "tf_keras", "tfrecords", "torch", "transformers"})})


def main(argv):
  del argv
  threads = {"intra_op": FLAGS.intra_op_threads or FLAGS.threads, "inter_op": FLAGS.threads}
  if FLAGS.worker and FLAGS.runtime == "session":
    _work(_session(FLAGS.saved_model, threads["intra_op"], threads["inter_op"]), threads)
    return
  # Before the first op: TensorFlow fixes its thread pools then.
  tf.config.threading.set_intra_op_parallelism_threads(threads["intra_op"])
  tf.config.threading.set_inter_op_parallelism_threads(threads["inter_op"])
  model = tf.saved_model.load(FLAGS.saved_model)
  serve_text = model.signatures["serving_default"]
  if FLAGS.worker:
    _work(_function(serve_text), threads)
    return
  if not FLAGS.data_dir:
    raise app.UsageError("--data_dir is required ($BERT_TF_DATA is unset)")
  # Here, not at the top: a worker is a server's process, without bert_tf.
  # pylint: disable=import-outside-toplevel
  from bert_tf.tasks.classification import task as classification
  from bert_tf.tasks.classification import glue
  from bert_tf.tokenization import FullTokenizer
  serve_ids = model.signatures["serve_token_ids"]
  task = glue.get_task_data(FLAGS.task_name, FLAGS.data_dir)
  examples = task.get_examples(FLAGS.data_dir, task.eval_splits[0])
  tokenizer = FullTokenizer(f"{FLAGS.saved_model}/assets/vocab.txt", do_lower_case=True)
  features = classification.convert_examples(examples, task.label_list(FLAGS.data_dir),
                                             FLAGS.max_seq_length, tokenizer)

  text1, ids1 = _requests(examples, features, 1, FLAGS.num_requests)
  text_s, ids_s = _time(serve_text, serve_ids, text1, ids1)
  text32, ids32 = _requests(examples, features, 32, FLAGS.num_batches)
  text32_s, ids32_s = _time(serve_text, serve_ids, text32, ids32)
  ms = lambda x, q: round(float(np.percentile(x, q)) * 1000, 2)
  parity = _parity(serve_text, examples, features) if FLAGS.model_dir else {}
  print(json.dumps({
      **parity,
      "batch1_text_p50_ms": ms(text_s, 50), "batch1_text_p99_ms": ms(text_s, 99),
      "batch1_ids_p50_ms": ms(ids_s, 50), "batch1_ids_p99_ms": ms(ids_s, 99),
      "batch1_tokenization_share": round(1 - np.median(ids_s) / np.median(text_s), 3),
      "batch32_text_examples_per_s": round(32 / float(np.mean(text32_s)), 1),
      "batch32_ids_examples_per_s": round(32 / float(np.mean(ids32_s)), 1),
      "batch32_tokenization_share": round(1 - np.median(ids32_s) / np.median(text32_s), 3),
  }))


if __name__ == "__main__":
  flags.mark_flag_as_required("saved_model")
  app.run(main)
