r"""What an export's signature runs after Grappler: the op types of one request's partition
graphs, counted, and the fusions oneDNN's remapper made (the `_Mkl*` and `_Fused*` ops) beside
the small ops it left (layer norms as moments + batch_normalization, the exact GELU's Erfc,
bias adds): where a served request's time beyond the matrix products goes (issue 55); with
--trace_runs, the time each op type took.

Kind: a run of our product (benchmarks/runs/): any task's export (run_* --export_dir).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/serving_ops.py \
      --saved_model=/tmp/sst2/export/1 [--signature=serving_default --text="a moving film ."]
  # a signature of several inputs (SQuAD's), op time summed over 50 traced requests:
  ... --saved_model=/tmp/squad/export/1 --input=question="Who won?" --input=context="..." \
      --trace_runs=50

The SavedModel is loaded in a v1 Session (as TF Serving loads one; --intra_op_threads, default
1, and two inter-op threads: the README's server line), with oneDNN's kernels on (as bert_tf and TF
Serving's CPU builds set them), and the request run twice with output_partition_graphs; the
nodes of the second run's graphs and of their functions are counted. Prints the 40 most
frequent op types, then (--trace_runs=N) each op type's time a request: the request run N
times more with a full trace (StepStats), each node's kernel time summed by op type and
divided by N (the kernels of two inter-op threads overlap, so the sum is more than the
request's wall time); last one JSON line with every count and time.
"""
import collections
import json
import os
import sys

from absl import app
from absl import flags

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "An exported version folder, e.g. /tmp/serving/1.")
flags.DEFINE_string("signature", "serving_default", "The signature to run.")
flags.DEFINE_string("text", "a gripping , funny and moving film .",
                    "The request's one text, for a signature of one input.")
flags.DEFINE_multi_string("input", [], "name=text: a request's input of a signature with several "
                          "(each one once); replaces --text.")
flags.DEFINE_integer("intra_op_threads", 1, "The session's intra-op threads (inter-op: 2).")
flags.DEFINE_integer("trace_runs", 0, "Requests traced for each op type's time (0: none).")
flags.mark_flag_as_required("saved_model")


def request(signature_def, signature: str, text: str, inputs: list[str]) -> dict:
  """{input tensor name: [text]} from --text or the --input pairs."""
  texts = dict(pair.split("=", 1) for pair in inputs if "=" in pair) if inputs else None
  names = set(signature_def.inputs)
  if texts is None and len(names) != 1:
    sys.exit(f"serving_ops: error: --signature={signature}: takes the inputs "
             f"{', '.join(sorted(names))}; give each as --input=name=text")
  if texts is not None and (len(texts) != len(inputs) or set(texts) != names):
    sys.exit(f"serving_ops: error: --input: give each of {', '.join(sorted(names))} once as "
             f"name=text, not {', '.join(inputs)}")
  if texts is None:
    texts = {name: text for name in names}
  return {signature_def.inputs[name].name: [value] for name, value in texts.items()}


def op_counts(saved_model: str, signature: str, text: str, inputs: list[str], trace_runs: int,
              intra_op_threads: int = 1) -> tuple[collections.Counter, collections.Counter]:
  """{op type: nodes} of the graphs one request to `signature` runs, and {op type: kernel
  microseconds a request} over `trace_runs` traced requests (empty for none)."""
  tf.compat.v1.disable_eager_execution()
  config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_op_threads,
                                    inter_op_parallelism_threads=2)
  micros = collections.Counter()
  with tf.compat.v1.Session(graph=tf.Graph(), config=config) as session:
    meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], saved_model)
    signature_def = meta_graph.signature_def[signature]
    feed = request(signature_def, signature, text, inputs)
    fetches = {name: output.name for name, output in signature_def.outputs.items()}
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    for _ in range(2):  # The first run optimizes; the second runs what serving runs.
      metadata = tf.compat.v1.RunMetadata()
      session.run(fetches, feed, options=options, run_metadata=metadata)
    trace = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    for _ in range(trace_runs):
      traced = tf.compat.v1.RunMetadata()
      session.run(fetches, feed, options=trace, run_metadata=traced)
      for device in traced.step_stats.dev_stats:
        for node in device.node_stats:
          # timeline_label: "name = OpType(inputs)"; nodes without one are the executor's own.
          op = node.timeline_label.split(" = ", 1)[-1].split("(", 1)[0] or node.node_name
          micros[op] += (node.op_end_rel_micros - node.op_start_rel_micros) / trace_runs
  counts = collections.Counter()
  for graph in metadata.partition_graphs:
    counts.update(node.op for node in graph.node)
    for function in graph.library.function:
      counts.update(node.op for node in function.node_def)
  return counts, micros


def main(argv):
  del argv
  if not tf.io.gfile.exists(os.path.join(FLAGS.saved_model, "saved_model.pb")):
    sys.exit(f"serving_ops: error: --saved_model={FLAGS.saved_model}: no saved_model.pb there")
  counts, micros = op_counts(FLAGS.saved_model, FLAGS.signature, FLAGS.text, FLAGS.input,
                             FLAGS.trace_runs, FLAGS.intra_op_threads)
  for op, count in counts.most_common(40):
    print(f"{count:6d}  {op}")
  if micros:
    print(f"kernel time a request, {FLAGS.trace_runs} traced requests: "
          f"{sum(micros.values()) / 1000:.2f} ms summed over the op types")
    for op, us in micros.most_common(25):
      print(f"{us / 1000:8.3f} ms  {op}")
  fused = {op: n for op, n in counts.items() if op.startswith(("_Mkl", "_Fused"))}
  print(json.dumps({"saved_model": FLAGS.saved_model, "signature": FLAGS.signature,
                    "nodes": sum(counts.values()), "fused": fused, "counts": dict(counts),
                    "trace_runs": FLAGS.trace_runs,
                    "ms_a_request": {op: round(us / 1000, 3) for op, us in micros.items()}}))


if __name__ == "__main__":
  app.run(main)
