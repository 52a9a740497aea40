"""Makes data_gen/corpus/namespaces.json, the table of the names each wiki hides links under
(run once; committed): per wiki, the local names and aliases of its namespaces Media (-2), File
(6) and Category (14), the ones a link to shows no text (`data_gen/corpus/namespaces.py`).

Kind: a generator (benchmarks/): it writes a file the package ships. Its input is
$BERT_TF_DATA/wikipedia/namespaces.tsv (`wiki id canonical name kind`: every namespace name and
alias of 111 Wikipedias, from their MediaWiki siteinfo, as DBpedia's extraction framework
stores it at e3dfe8bb8dbc: core/src/main/settings/{xx}wiki-configuration.xml). The other
namespaces are left out: a link to a user or help page shows its text.

  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python -m benchmarks.make_namespace_table

Prints the wikis and names written.
"""
import argparse
import collections
import csv
import json
import os

from benchmarks import data_root
from bert_tf.common import files
from data_gen.corpus import namespaces

SOURCE = ("MediaWiki siteinfo (<namespaces>, <namespacealiases>) of each wiki, as DBpedia's "
          "extraction-framework e3dfe8bb8dbc stores it (core/src/main/settings/"
          "{xx}wiki-configuration.xml); made by benchmarks/make_namespace_table.py")


def table(tsv: str) -> dict[str, dict[str, list[str]]]:
  """{wiki: {canonical name: [its local names and aliases, sorted]}} of the hidden namespaces
  (a wiki whose only names are the English ones: {})."""
  names = collections.defaultdict(lambda: collections.defaultdict(set))
  with open(tsv, encoding="utf-8", newline="") as f:
    for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
      kinds = names[row["wiki"]]
      canonical = namespaces.HIDDEN_NAMESPACES.get(int(row["id"]))
      if canonical and row["name"] and row["name"] != canonical:
        kinds[canonical].add(row["name"])
  return {wiki: {canonical: sorted(kinds[canonical]) for canonical in sorted(kinds)}
          for wiki, kinds in sorted(names.items())}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--namespaces_tsv", default=data_root.path("wikipedia", "namespaces.tsv"))
  parser.add_argument("--output", default=namespaces.TABLE)
  args = parser.parse_args()
  if not args.namespaces_tsv or not os.path.exists(args.namespaces_tsv):
    parser.error(f"--namespaces_tsv={args.namespaces_tsv}: no such file (set BERT_TF_DATA)")
  wikis = table(args.namespaces_tsv)
  files.write_text(args.output, json.dumps({"source": SOURCE, "wikis": wikis},
                                           ensure_ascii=False, indent=1) + "\n")
  print(f"{args.output}: {len(wikis)} wikis, "
        f"{sum(len(n) for kinds in wikis.values() for n in kinds.values())} names")


if __name__ == "__main__":
  main()
