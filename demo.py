"""`make demo`: the whole pipeline, end to end, on the embedded corpus (no downloads).

text → vocab → pretraining records → pretrain a small BERT → fine-tune it on a task built from
the same corpus → export a SavedModel → classify raw sentences in a fresh process.

Each stage runs the same console entry point a user would, and prints the command first.
Outputs land in demo_output/ (re-running starts that folder afresh).
"""
import json
import os
import random
import shutil
import subprocess
import sys

OUT = os.path.abspath("demo_output")
SEQ_LEN = 64
MAX_PREDICTIONS = 10


def banner(title: str) -> None:
  print(f"\n{'=' * 78}\n{title}\n{'=' * 78}", flush=True)


def run(module: str, **flags) -> None:
  """Runs `python -m module --flag=value ...`, echoing it; stops the demo if it fails."""
  args = [sys.executable, "-m", module] + [f"--{k}={v}" for k, v in flags.items()]
  print("$ " + " ".join(["python", "-m", module] + args[3:]), flush=True)
  subprocess.run(args, check=True)


def make_corpus() -> str:
  from data_gen import sample_corpus
  path = os.path.join(OUT, "corpus.txt")
  n = sample_corpus.write_corpus(path)
  print(f"{n} documents of real English prose (the stdlib's pydoc topics) → {path}")
  return path


def show_instances(records: str, vocab: str, count: int = 3) -> None:
  """Decodes a few pretraining records back to text, masks shown as [MASK]→original."""
  from bert_tf.tokenization import FullTokenizer
  from tfrecords import datasets
  tok = FullTokenizer(vocab, do_lower_case=True)
  batch = next(iter(datasets.pretraining_dataset(records, SEQ_LEN, MAX_PREDICTIONS, count,
                                                 is_training=False)))
  for i in range(count):
    ids = batch["input_word_ids"][i].numpy()
    tokens = tok.convert_ids_to_tokens(ids[: int(batch["input_mask"][i].numpy().sum())])
    for pos, orig, w in zip(batch["masked_lm_positions"][i].numpy(),
                            batch["masked_lm_ids"][i].numpy(),
                            batch["masked_lm_weights"][i].numpy()):
      if w > 0:
        tokens[pos] = f"{tokens[pos]}→{tok.inv_vocab[orig]}"
    label = int(batch["next_sentence_labels"][i][0])
    print(f"\n[{'random next' if label else 'actual next'}] {' '.join(tokens)}")


def make_acceptability_task(corpus_docs, task_dir: str) -> None:
  """A CoLA-like task from the corpus: is this a real sentence, or its words shuffled?"""
  rng = random.Random(7)
  sentences = [s for doc in corpus_docs for s in doc if 6 <= len(s.split()) <= 30]
  rng.shuffle(sentences)
  rows = []
  for s in sentences:
    words = s.split()
    if rng.random() < 0.5:
      rng.shuffle(words)
      rows.append((" ".join(words), "scrambled"))
    else:
      rows.append((s, "real"))
  os.makedirs(task_dir, exist_ok=True)
  cut = int(0.85 * len(rows))
  for name, part in (("train.tsv", rows[:cut]), ("dev.tsv", rows[cut:])):
    with open(os.path.join(task_dir, name), "w", encoding="utf-8") as f:
      f.write("text_a\tlabel\n")
      f.writelines(f"{t}\t{l}\n" for t, l in part)
  print(f"{cut} train / {len(rows) - cut} dev sentences → {task_dir}")


def classify_in_fresh_process(export_dir: str, sentences: list[str]) -> None:
  """Loads the export with only tensorflow + tensorflow_text, as TF Serving would."""
  code = (
      "import sys, json, tensorflow as tf, tensorflow_text\n"
      "m = tf.saved_model.load(sys.argv[1])\n"
      "f = m.signatures['serving_default']\n"
      "out = f(text_a=tf.constant(json.loads(sys.argv[2])))\n"
      "for s, l, p in zip(json.loads(sys.argv[2]), out['label'].numpy(),"
      " out['probabilities'].numpy()):\n"
      "  print(f'{l.decode():>10}  p={p.max():.2f}  {s}')\n")
  print("$ python -c '<load the SavedModel with tensorflow + tensorflow_text only>'")
  subprocess.run([sys.executable, "-c", code, export_dir, json.dumps(sentences)], check=True)


def main() -> None:
  shutil.rmtree(OUT, ignore_errors=True)
  os.makedirs(OUT)

  banner("1. Corpus")
  corpus = make_corpus()

  banner("2. Learn a WordPiece vocabulary from it")
  vocab = os.path.join(OUT, "vocab.txt")
  run("data_gen.build_vocab", input_file=corpus, output_file=vocab, vocab_size=4000)

  banner("3. Pretraining records (google-research/bert's TFRecord format)")
  records = os.path.join(OUT, "pretrain", "demo.tfrecord")
  run("data_gen.create_pretraining_data", input_file=corpus, output_file=records,
      vocab_file=vocab, max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PREDICTIONS,
      dupe_factor=5, num_output_shards=2)
  show_instances(os.path.join(OUT, "pretrain", "*.tfrecord*"), vocab)


if __name__ == "__main__":
  main()
