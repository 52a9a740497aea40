"""Where prepare_corpus's time goes on real Wikipedia pages: MB of dump XML per CPU second of each
stage, in one process.

The sample is benchmarks/peers/corpus_compare.py's (the real articles of the excerpts under
$BERT_TF_DATA/wikipedia, repeated --copies times under new titles and ids, one .xml.bz2 stream).
The stages, each timed by this process's CPU clock over every page:
  read      bz2 and the XML: the pages out of the dump (`sources.plan_units`)
  parse     `wikitext.parse`: the page's wikitext parsed (the prefilter, then mwparserfromhell)
  render    the parse to paragraphs (`wikitext.is_disambiguation`, `wikitext.passages`)
  split     the paragraphs to sentences (the default splitter)
  write     the document's text, its placement and hash (`units.process_unit`'s rest), and the
            bytes written to a file
--profile prints cProfile's top functions (by their own time) over the same run.

  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python \\
      -m benchmarks.runs.prepare_corpus_stages --copies=4
"""
import argparse
import cProfile
import hashlib
import json
import os
import pstats
import tempfile
import time

from benchmarks import data_root
from benchmarks.peers import corpus_compare  # the sample
from data_gen.corpus import sentences
from data_gen.corpus import sources
from data_gen.corpus import units
from data_gen.corpus import wikitext
from data_gen.corpus.config import CorpusConfig


def stages(path: str, output: str) -> dict:
  """CPU seconds of each stage over the dump at `path`, writing its text to `output`."""
  seconds = dict.fromkeys(("read", "parse", "render", "split", "write"), 0.0)
  config = CorpusConfig()
  split = sentences.get_splitter(config.sentence_splitter)
  clock = time.process_time
  with open(output, "wb") as out:
    started = clock()
    pages = [page for unit in sources.plan_units(0, path, "wikipedia") for page in unit.items]
    seconds["read"] = clock() - started
    for page in pages:
      started = clock()
      parsed_page = wikitext.parse(page.text)
      parsed = clock()
      paragraphs = (None if wikitext.is_disambiguation(parsed_page)
                    else wikitext.passages(parsed_page))
      rendered = clock()
      lines = [" ".join(s.split()) for p in paragraphs or () for s in split(p)]
      done_split = clock()
      text = ("\n".join(line for line in lines if line) + "\n\n").encode("utf-8")
      units.placement(f"wikipedia:{page.page_id}", config)
      hashlib.blake2b(text, digest_size=16).digest()
      out.write(text)
      seconds["parse"] += parsed - started
      seconds["render"] += rendered - parsed
      seconds["split"] += done_split - rendered
      seconds["write"] += clock() - done_split
  return seconds


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  corpus_compare.add_sample_flags(parser, 4)
  parser.add_argument("--profile", action="store_true")
  args = parser.parse_args()
  if not args.dump:
    parser.error(f"give --dump, or set ${data_root.ENV}")
  with tempfile.TemporaryDirectory(prefix="prepare_corpus_stages-") as folder:
    sample = corpus_compare.build_sample(args.dump.split(","), args.copies, folder, False)
    output = os.path.join(folder, "out.txt")
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
      profiler.enable()
    seconds = stages(sample["path"], output)
    if profiler:
      profiler.disable()
    mb = sample["xml_bytes"] / 1e6
    total = sum(seconds.values())
    print(json.dumps({"pages": sample["pages"], "xml_mb": round(mb, 2),
                      "output_mb": round(os.path.getsize(output) / 1e6, 2),
                      "cpu_seconds": round(total, 2), "xml_mb_per_cpu_second": round(mb / total, 2),
                      "stages": {name: {"cpu_s": round(s, 2), "xml_mb_per_cpu_s": round(mb / s, 1),
                                        "share": round(s / total, 3)}
                                 for name, s in seconds.items()}}))
    if profiler:
      pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
  main()
