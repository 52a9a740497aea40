"""What prepare_corpus leaves of a wiki's files and categories in other languages: the shared
minidumps (real German, French, Russian and Spanish articles behind English Wikipedia's
<siteinfo>), cleaned as a run without --language does (the siteinfo says en: English names
hidden only, as before issue 54) and with --language=L (the wiki's names and aliases too).

Per language and way it prints one line of JSON: the passages' lines and words, the lines
holding a `|` (what an unhidden file link leaves: `mini|links|caption`), and the count of each
file, media or category name of the language's (the namespace table's) or English followed by a
colon in the text (`Datei:`, `Kategorie:`, `Fichier:`, `Категория:`). The cleaning is the
workers' code (`units.process_unit`) in this process, the names decided as the job decides them
(`pipeline.wikis`).

  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python -m benchmarks.runs.corpus_languages
"""
import argparse
import collections
import json
import re

from benchmarks import data_root
from data_gen.corpus import namespaces
from data_gen.corpus import pipeline
from data_gen.corpus import sources
from data_gen.corpus import units
from data_gen.corpus.config import CorpusConfig

LANGUAGES = ("de", "fr", "ru", "es")


def text(path: str, language: str | None) -> str:
  """The output's text of the dump at `path` (documents one after another)."""
  kinds = {path: "wikipedia"}
  wikis = pipeline.wikis([path], kinds, CorpusConfig(language=language))
  return "".join(doc.text.decode("utf-8")
                 for unit in sources.plan_units(0, path, "wikipedia",
                                                hidden_names=wikis.hidden_names[path])
                 for doc in units.process_unit(unit, wikis.config).documents)


def leaks(output: str, language: str) -> dict:
  """What of the wiki's files and categories is left in `output`."""
  names = sorted(namespaces.hidden_names((language,)), key=len, reverse=True)
  colon = re.compile(r"(?<!\w)(" + "|".join(map(re.escape, names)) + r")\s*:", re.IGNORECASE)
  lines = output.split("\n")
  return {"lines": sum(1 for line in lines if line),
          "words": len(output.split()),
          "lines_with_pipe": sum("|" in line for line in lines),
          "namespace_colon": dict(collections.Counter(m.group(1) for m in colon.finditer(output)))}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--minidumps", default=data_root.path("wikipedia", "minidumps"))
  parser.add_argument("--languages", default=",".join(LANGUAGES))
  args = parser.parse_args()
  if not args.minidumps:
    parser.error("--minidumps: not given and BERT_TF_DATA unset")
  for language in args.languages.split(","):
    path = f"{args.minidumps}/{language}.xml.bz2"
    for way, flag in (("siteinfo (en)", None), (f"--language={language}", language)):
      print(json.dumps({"dump": language, "way": way, **leaks(text(path, flag), language)},
                       ensure_ascii=False), flush=True)


if __name__ == "__main__":
  main()
