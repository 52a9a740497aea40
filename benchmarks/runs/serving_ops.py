r"""What an export's signature runs after Grappler: the op types of one request's partition
graphs, counted, and the fusions oneDNN's remapper made (the `_Mkl*` and `_Fused*` ops) beside
the small ops it left (layer norms as moments + batch_normalization, the exact GELU's Erfc,
bias adds): where a served request's time beyond the matrix products goes (issue 55).

Kind: a run of our product (benchmarks/runs/): an export from run_classifier --export_dir (or
any task's export whose signature takes one string tensor).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/serving_ops.py \
      --saved_model=/tmp/sst2/export/1 [--signature=serving_default --text="a moving film ."]

The SavedModel is loaded in a v1 Session (as TF Serving loads one), with oneDNN's kernels on
(as bert_tf and TF Serving's CPU builds set them), and the request run twice with
output_partition_graphs; the nodes of the second run's graphs and of their functions are
counted. Prints the 40 most frequent op types, then one JSON line with every count.
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
flags.DEFINE_string("text", "a gripping , funny and moving film .", "The request's one text.")
flags.mark_flag_as_required("saved_model")


def op_counts(saved_model: str, signature: str, text: str) -> collections.Counter:
  """{op type: nodes} of the graphs one request to `signature` runs."""
  tf.compat.v1.disable_eager_execution()
  with tf.compat.v1.Session(graph=tf.Graph()) as session:
    meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], saved_model)
    signature_def = meta_graph.signature_def[signature]
    if len(signature_def.inputs) != 1:
      sys.exit(f"serving_ops: error: --signature={signature}: takes "
               f"{len(signature_def.inputs)} inputs; this run sends one string tensor")
    [tensor] = signature_def.inputs.values()
    fetches = {name: output.name for name, output in signature_def.outputs.items()}
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    for _ in range(2):  # The first run optimizes; the second runs what serving runs.
      metadata = tf.compat.v1.RunMetadata()
      session.run(fetches, {tensor.name: [text]}, options=options, run_metadata=metadata)
  counts = collections.Counter()
  for graph in metadata.partition_graphs:
    counts.update(node.op for node in graph.node)
    for function in graph.library.function:
      counts.update(node.op for node in function.node_def)
  return counts


def main(argv):
  del argv
  if not tf.io.gfile.exists(os.path.join(FLAGS.saved_model, "saved_model.pb")):
    sys.exit(f"serving_ops: error: --saved_model={FLAGS.saved_model}: no saved_model.pb there")
  counts = op_counts(FLAGS.saved_model, FLAGS.signature, FLAGS.text)
  for op, count in counts.most_common(40):
    print(f"{count:6d}  {op}")
  fused = {op: n for op, n in counts.items() if op.startswith(("_Mkl", "_Fused"))}
  print(json.dumps({"saved_model": FLAGS.saved_model, "signature": FLAGS.signature,
                    "nodes": sum(counts.values()), "fused": fused, "counts": dict(counts)}))


if __name__ == "__main__":
  app.run(main)
