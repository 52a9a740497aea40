"""prepare_corpus's sentence splitters (data_gen/corpus/sentences.py) per language: boundary F1
on the Universal Dependencies dev treebanks (zh, ja, de) and on pySBD's English Golden Rules,
and MB per CPU second, each splitter alternated in one run. What `sentences.default_splitter`
is chosen by.

Kind: a run of our product (benchmarks/runs/): the registry's splitters, built for each
language as prepare_corpus builds them (`sentences.get_splitter(name, language)`).

Accuracy: a UD file's gold sentences (its `# text = ` lines) in runs of --paragraph_sentences,
each run joined into one paragraph as a wiki's text has them (no space between sentences in
zh and ja, one space elsewhere); a boundary inside a paragraph found at the same place (counted
in non-space characters) is a hit, the paragraph's own ends are not counted
(splitter_eval.boundaries). English: the 48 Golden Rules' texts against their sentences (the
same F1, and the rules passed whole). Speed: each language's paragraphs (English: the Gutenberg
novels' paragraphs under $BERT_TF_DATA/books, the first --english_mb) split in a fresh process
per splitter per round, the splitters in turn within each round: MB of UTF-8 text per CPU
second on the second half after the first (splitter_eval.speed), the median over the rounds.
A splitter with no rules for a language, or whose library is missing, is left out of its rows.

  PYTHONPATH=. .venv/bin/python benchmarks/runs/sentence_languages.py

Prints a line per measurement, then the table: a row per language and splitter, the best F1
of each language in bold and the splitter `default_splitter` picks marked.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import splitter_eval  # the Golden Rules, boundary F1, the speed on paragraphs

# This script's folder holds a data_gen.py: put the repository's package first on the path.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from data_gen.corpus import sentences  # pylint: disable=g-import-not-at-top

BOOKS = data_root.path("books")
UD = {"zh": "zh_gsdsimp-ud-dev.conllu", "ja": "ja_gsd-ud-dev.conllu", "de": "de_gsd-ud-dev.conllu"}
UNSPACED = frozenset({"zh", "ja"})  # written without a space between sentences

flags.DEFINE_string("ud_dir", data_root.path("sentences", "ud"),
                    "The UD dev treebanks (" + ", ".join(UD.values()) + ").")
flags.DEFINE_string("golden_rules", splitter_eval.GOLDEN_RULES,
                    "pySBD's english_golden_rules.py.")
flags.DEFINE_list("text", [os.path.join(BOOKS, f) for f in sorted(os.listdir(BOOKS))]
                  if BOOKS and os.path.isdir(BOOKS) else None,
                  "English text to time the splitters on (paragraphs at blank lines).")
flags.DEFINE_float("english_mb", 0.5, "How much of --text to time on (pysbd splits 0.1 MB/s).")
flags.DEFINE_list("languages", ["zh", "ja", "de", "en"], "Which languages to measure.")
flags.DEFINE_list("splitters", ["nupunkt", "punkt", "icu", "pysbd", "sentencex", "blingfire",
                                "syntok"], "Names of data_gen/corpus/sentences.py's registry.")
flags.DEFINE_integer("paragraph_sentences", 10, "Gold sentences joined into one paragraph.")
flags.DEFINE_integer("rounds", 3, "Timed runs per splitter and language, alternated.")
flags.DEFINE_string("time_one", None, "(Internal) time this splitter on --paragraph_file in "
                    "this process and print its JSON line.")
flags.DEFINE_string("language", None, "(Internal) the language of --time_one.")
flags.DEFINE_string("paragraph_file", None, "(Internal) one paragraph a line.")

FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ud_cases(language: str) -> list[tuple[str, list[str]]]:
  """(paragraph, its gold sentences): runs of --paragraph_sentences gold sentences."""
  gold = splitter_eval.conllu_sentences(os.path.join(FLAGS.ud_dir, UD[language]))
  joiner = "" if language in UNSPACED else " "
  size = FLAGS.paragraph_sentences
  return [(joiner.join(gold[i:i + size]), gold[i:i + size]) for i in range(0, len(gold), size)]


def english_paragraphs() -> list[str]:
  """The first --english_mb of --text's paragraphs."""
  kept, size = [], 0
  for paragraph in splitter_eval.paragraphs(FLAGS.text):
    if size >= FLAGS.english_mb * 1e6:
      break
    kept.append(paragraph)
    size += len(paragraph.encode("utf-8"))
  return kept


def time_one(name: str, language: str, paragraph_file: str) -> dict:
  with open(paragraph_file, encoding="utf-8") as f:
    texts = [line.strip() for line in f if line.strip()]
  return splitter_eval.speed(sentences.get_splitter(name, language), texts)


def timed(name: str, language: str, paragraph_file: str) -> dict:
  """time_one in a fresh process: the JSON line it prints last."""
  command = [sys.executable, __file__, f"--time_one={name}", f"--language={language}",
             f"--paragraph_file={paragraph_file}"]
  done = subprocess.run(command, capture_output=True, text=True, check=False,
                        env=dict(os.environ, PYTHONPATH=ROOT))
  if done.returncode:
    sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv):
  del argv
  if FLAGS.time_one:
    print(json.dumps(time_one(FLAGS.time_one, FLAGS.language, FLAGS.paragraph_file)))
    return
  if not FLAGS.ud_dir or not FLAGS.golden_rules or not FLAGS.text:
    sys.exit("sentence_languages: give --ud_dir, --golden_rules and --text, or set "
             "$BERT_TF_DATA")
  rules = splitter_eval.load_golden_rules(FLAGS.golden_rules)
  scratch = tempfile.mkdtemp(prefix="sentence_languages_")
  results, files = {}, {}
  for language in FLAGS.languages:
    cases = rules if language == "en" else ud_cases(language)
    texts = english_paragraphs() if language == "en" else [text for text, _ in cases]
    files[language] = os.path.join(scratch, f"{language}.txt")
    with open(files[language], "w", encoding="utf-8") as f:
      f.write("\n".join(texts) + "\n")
    size = sum(len(t.encode("utf-8")) for t in texts)
    print(f"{language}: {len(cases)} cases, {sum(len(s) for _, s in cases)} gold sentences; "
          f"speed on {len(texts)} paragraphs, {size / 1e6:.3f} MB", flush=True)
    for name in FLAGS.splitters:
      try:
        split = sentences.get_splitter(name, language)
      except ValueError as error:
        print(f"{language} | {name}: left out: {error}")
        continue
      result = splitter_eval.boundaries(split, cases)
      if language == "en":
        result["rules"] = splitter_eval.score(split, rules)["passed"]
      results[language, name] = {**result, "runs": []}
      print(f"{language} | {name} | {json.dumps(result)}", flush=True)

  for round_ in range(1, FLAGS.rounds + 1):
    for (language, name), result in results.items():
      run = timed(name, language, files[language])
      result["runs"].append(run)
      print(f"round {round_} | {language} | {name} | {json.dumps(run)}", flush=True)

  print("| language | splitter | boundary F1 | precision | recall | Golden Rules passed | "
        "MB / CPU s (cold) |")
  print("|---|---|---|---|---|---|---|")
  for language in FLAGS.languages:
    rows = {name: result for (lang, name), result in results.items() if lang == language}
    best = max(result["f1"] for result in rows.values())
    for name, result in rows.items():
      median = lambda key: statistics.median(run[key] for run in result["runs"])  # pylint: disable=cell-var-from-loop
      f1 = f"**{result['f1']:.3f}**" if result["f1"] == best else f"{result['f1']:.3f}"
      default = " (default)" if sentences.default_splitter(language) == name else ""
      altered = f", text altered in {result['altered']}" if result["altered"] else ""
      print(f"| {language} | {name}{default} | {f1} | {result['precision']:.3f} | "
            f"{result['recall']:.3f} | {result.get('rules', '')} | {median('mb_per_s'):.2f} "
            f"({median('cold_mb_per_s'):.2f}){altered} |")


if __name__ == "__main__":
  app.run(main)
