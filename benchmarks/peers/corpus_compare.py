"""prepare_corpus beside the pipeline NVIDIA's and MLPerf's BERT use (WikiExtractor 3.x, then a
pretrained Punkt): end-to-end speed on the same dump at 1 and 2 workers, the markup left in each
output, and the sentence splitters' accuracy on pySBD's English Golden Rules.

Kind: a side-by-side driver (benchmarks/peers/): it runs our side (`python -m
data_gen.prepare_corpus`, in this venv) and the peer's (`python -m wikiextractor.WikiExtractor
--processes N`, then benchmarks/peers/punkt_peer.py --pretrained: nupunkt's shipped Punkt model
splitting WikiExtractor's text in one process, as the anchors call NLTK's pretrained
`sent_tokenize`; no training in the timed run) under --peer_python:
  python3.11 -m venv /tmp/corpusvenv && /tmp/corpusvenv/bin/pip install wikiextractor==3.1.0 nupunkt

The dump is built from real pages: every article (namespace 0, not a redirect) of the --dump
excerpts, by default the real wikitext under $BERT_TF_DATA/wikipedia: the English excerpt
(enwiki-table-markup.xml.bz2: 5 articles of 2017 with tables, templates, references) and the
German, French, Spanish and Russian minidumps (7 long articles of 2021, mostly each wiki's
"Berlin": prose with hundreds of references and templates each), 12 articles, 0.88 MB of XML. Their
page elements are copied unchanged --copies times, copy k under the title "T (k)" and the page id
+ k * 10**8 (a page's text unchanged), behind one English <siteinfo> (WikiExtractor reads up to
it before any page), written as one .xml.bz2 stream (--form=multistream: 100 pages a bz2 stream,
with the index beside it, as the whole English Wikipedia ships). Both sides read that file.
--copies=43 gives 516 pages, 37.78 MB of XML, about the size of issue 53's held-out sample
(36.5 MB).

Speed: MB of (uncompressed) XML per wall second of the whole command (start-up, bz2,
extraction, splitting, writing: everything between the dump and one-sentence-a-line text),
--rounds times, both sides at each worker count in turn; and per CPU second of the commands and
their workers, which a machine busy with other jobs leaves comparable. Each round's ratio, ours
over the peer's, is printed too.

Text quality, per MB of each side's output: `{{`, `[[`, `|`, `<ref`, HTML entities left as text
(`&nbsp;`, `&lt;`, ...), `=`-heading lines, list lines (`*`, `#`), lines that start with `=` or an
operator (what a dropped formula leaves), lines that are a section heading's text (the dump's
`== X ==` headings as bare lines, which WikiExtractor keeps), and lines of one or two words
(headings, list numbers, fragments: few are sentences); and the words kept, a copy.

  PYTHONPATH=. .venv/bin/python benchmarks/peers/corpus_compare.py --copies=43 --rounds=2 \
      --peer_python=/tmp/corpusvenv/bin/python
  PYTHONPATH=. .venv/bin/python benchmarks/peers/corpus_compare.py --sides=ours   # ours alone

Prints a line per run, then the speed, quality and sentence tables.
"""
import argparse
import bz2
import glob
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON
from benchmarks import splitter_eval  # pySBD's Golden Rules
from data_gen.corpus import sentences  # our default splitter
from data_gen.corpus import sources  # the multistream dump's and its index's names

HERE = os.path.dirname(os.path.abspath(__file__))  # benchmarks/peers
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository
PAGES_PER_STREAM = 100  # as Wikimedia's multistream dumps
# What a real English dump's <siteinfo> says of the namespaces WikiExtractor needs to know.
HEADER = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" \
xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>enwiki</dbname>
    <base>https://en.wikipedia.org/wiki/Main_Page</base>
    <generator>MediaWiki 1.31.0-wmf.12</generator>
    <case>first-letter</case>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="6" case="first-letter">File</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
      <namespace key="828" case="first-letter">Module</namespace>
    </namespaces>
  </siteinfo>
  """
DEFAULT_DUMPS = ("enwiki-table-markup.xml.bz2", "minidumps/de.xml.bz2", "minidumps/fr.xml.bz2",
                 "minidumps/es.xml.bz2", "minidumps/ru.xml.bz2")
MARKUP = {
    "{{": re.compile(r"\{\{"),
    "[[": re.compile(r"\[\["),
    "|": re.compile(r"\|"),
    "<ref": re.compile(r"<ref", re.I),
    "entities": re.compile(r"&(?:#\d+|#x[0-9a-f]+|[a-z]+\d*);", re.I),
    "=-headings": re.compile(r"^=+[^=\n].*=+[ \t]*$", re.M),
    "*/# lines": re.compile(r"^[*#]", re.M),
    # What a dropped <math> leaves: "<math>n_T</math> = total number of cases" -> "= total ...".
    "=/operator lines": re.compile(r"^[=+\-*/<>^×−]", re.M),
}


def article_pages(dumps: list[str]) -> list[str]:
  """The <page> elements (as XML text) of the articles in `dumps`: namespace 0, no redirect."""
  pages = []
  for dump in dumps:
    with bz2.open(dump, "rb") as f:
      xml = f.read().decode("utf-8")
    pages += [page for page in re.findall(r"<page>.*?</page>", xml, re.S)
              if "<ns>0</ns>" in page and "<redirect" not in page]
  return pages


def build_sample(dumps: list[str], copies: int, folder: str, multistream: bool) -> dict:
  """The articles of `dumps` `copies` times (copy k: title "T (k)", page id + k * 10**8) behind
  an English <siteinfo>, written in folder as .xml.bz2: a multistream dump (a bz2 stream for the
  header, then one a PAGES_PER_STREAM pages, and the index beside it) or one bz2 stream ->
  {"path", "xml_bytes", "pages", "headings"}: the section headings' texts, to find in the
  outputs."""
  pages = article_pages(dumps)
  copied = []
  for k in range(copies):
    for page in pages:
      page = re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} ({k})</title>", page,
                    count=1)
      page = re.sub(r"(</ns>\s*<id>)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + k * 10**8}",
                    page, count=1)
      copied.append(page + "\n  ")
  streams = [HEADER] + ["".join(copied[i:i + PAGES_PER_STREAM])
                        for i in range(0, len(copied), PAGES_PER_STREAM)] + ["</mediawiki>\n"]
  path = os.path.join(folder, "enwiki-sample" + (sources.MULTISTREAM_SUFFIX if multistream
                                                 else ".xml.bz2"))
  with open(path, "wb") as f:
    if not multistream:
      f.write(bz2.compress("".join(streams).encode("utf-8")))
    else:
      index = []
      for stream in streams:
        offset = f.tell()
        index += [f"{offset}:{page_id}:{title}\n" for title, page_id in re.findall(
            r"<title>(.*?)</title>\s*<ns>0</ns>\s*<id>(\d+)", stream)]
        f.write(bz2.compress(stream.encode("utf-8")))
      with open(path.replace(sources.MULTISTREAM_SUFFIX, sources.INDEX_SUFFIX),
                "wb") as f_index:
        f_index.write(bz2.compress("".join(index).encode("utf-8")))
  headings = {h.strip() for page in pages
              for h in re.findall(r"^=+([^=\n]+)=+[ \t]*$", page, re.M)}
  return {"path": path, "xml_bytes": len("".join(streams).encode("utf-8")),
          "pages": len(copied), "headings": headings}


def _children_cpu_seconds() -> float:
  """CPU time, user and system, of this process's ended children and their ended children."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def run(command: list[str], env: dict | None = None) -> tuple[float, float, str]:
  """(wall seconds, CPU seconds of it and its workers, stdout) of command; a failure ends the
  benchmark with its stderr."""
  start, cpu = time.perf_counter(), _children_cpu_seconds()
  done = subprocess.run(command, capture_output=True, text=True, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))
  seconds, cpu = time.perf_counter() - start, _children_cpu_seconds() - cpu
  if done.returncode:
    sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
  return seconds, cpu, done.stdout


def ours(args, dump: str, workers: int, work: str) -> tuple[float, float, str, dict]:
  """(wall s, CPU s, the output text, the stats) of prepare_corpus on the dump, into a new
  folder."""
  del args
  out = tempfile.mkdtemp(prefix=f"ours_{workers}_", dir=work)
  seconds, cpu, _ = run([sys.executable, "-m", "data_gen.prepare_corpus", f"--input_file={dump}",
                         f"--output_file={out}/wiki.txt", f"--num_workers={workers}"],
                        env={"PYTHONPATH": ROOT})
  text = ""
  for shard in sorted(glob.glob(f"{out}/wiki.txt*")):  # wiki.txt, or wiki.txt-0000i-of-0000N
    with open(shard, encoding="utf-8") as f:
      text += f.read()
  with open(f"{out}/wiki.stats.json", encoding="utf-8") as f:
    stats = json.load(f)
  return seconds, cpu, text, {k: stats[k] for k in ("documents_out", "skipped", "sentences",
                                                    "seconds") if k in stats}


def peer(args, dump: str, workers: int, work: str) -> tuple[float, float, str, dict]:
  """(wall s, CPU s, the output text, punkt_peer's JSON, each step's wall and CPU s) of
  WikiExtractor, then the pretrained Punkt, into a new folder."""
  extracted = tempfile.mkdtemp(prefix=f"peer_{workers}_", dir=work)
  extract_s, extract_cpu, _ = run([args.peer_python, "-m", "wikiextractor.WikiExtractor", dump,
                                   "--processes", str(workers), "-b", "1G", "-o", extracted])
  (extracted_file,) = glob.glob(f"{extracted}/*/wiki_*")
  output = os.path.join(extracted, "sentences.txt")
  split_s, split_cpu, stdout = run([args.peer_python, os.path.join(HERE, "punkt_peer.py"),
                                    "--pretrained", f"--input_file={extracted_file}",
                                    f"--output_file={output}"], env={"PYTHONPATH": ROOT})
  result = json.loads(stdout.strip().splitlines()[-1])
  result.update(extract_s=round(extract_s, 2), extract_cpu=round(extract_cpu, 2),
                punkt_s=round(split_s, 2), punkt_cpu=round(split_cpu, 2))
  with open(output, encoding="utf-8") as f:
    return extract_s + split_s, extract_cpu + split_cpu, f.read(), result


def quality(text: str, headings: set[str], copies: int) -> dict:
  """Per MB of text: each kind of markup left, lines that are a section heading's text, and
  lines of one or two words; and the words kept, a copy of the pages."""
  mb = len(text.encode("utf-8")) / 1e6
  counts = {name: len(pattern.findall(text)) for name, pattern in MARKUP.items()}
  lines = text.splitlines()
  counts["heading lines"] = sum(line.strip().rstrip(".") in headings for line in lines)
  counts["1-2 word lines"] = sum(0 < len(line.split()) < 3 for line in lines)
  figures = {name: round(count / mb, 1) for name, count in counts.items()}
  figures["words a copy"] = round(len(text.split()) / copies)
  return figures


def add_sample_flags(parser: argparse.ArgumentParser, copies: int) -> None:
  """--dump and --copies, the sample's flags, as every prepare_corpus benchmark takes them."""
  excerpts = data_root.path("wikipedia")
  parser.add_argument("--dump", default=",".join(os.path.join(excerpts, name)
                                                 for name in DEFAULT_DUMPS) if excerpts else None,
                      help="The excerpts whose articles make the sample, comma-separated.")
  parser.add_argument("--copies", type=int, default=copies, help="Times the articles repeat.")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  add_sample_flags(parser, 43)
  parser.add_argument("--form", choices=("multistream", "bz2"), default="bz2",
                      help="The sample as one bz2 stream (read by our main process), or as a "
                      "multistream dump with its index (split across our workers by stream).")
  parser.add_argument("--workers", default="1,2", help="Worker counts, comma-separated.")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--sides", default="ours,peer")
  peer_python.add_flag(parser, required=False)  # a python with wikiextractor and nupunkt
  parser.add_argument("--golden_rules", default=splitter_eval.GOLDEN_RULES)
  parser.add_argument("--work_dir", default=None, help="Where the sample and outputs go.")
  parser.add_argument("--keep_outputs", default=None,
                      help="A folder to copy each side's last output to (SIDE_WORKERS.txt).")
  args = parser.parse_args()
  if not args.dump or not args.golden_rules:
    parser.error("give --dump and --golden_rules, or set $BERT_TF_DATA")
  if "peer" in args.sides and not args.peer_python:
    parser.error(f"the peer needs --peer_python (or ${peer_python.ENV}): a python with "
                 "wikiextractor and nupunkt")
  work = args.work_dir or tempfile.mkdtemp(prefix="corpus_compare_")
  os.makedirs(work, exist_ok=True)
  sample = build_sample(args.dump.split(","), args.copies, work, args.form == "multistream")
  dump = sample["path"]
  mb = sample["xml_bytes"] / 1e6
  print(f"sample: {sample['pages']} pages, {mb:.2f} MB of XML ({dump})", flush=True)

  sides = {"ours": ours, "peer": peer}
  rates, cpu_rates, outputs, extras = {}, {}, {}, {}
  for round_ in range(1, args.rounds + 1):
    for workers in map(int, args.workers.split(",")):
      for side in args.sides.split(","):
        seconds, cpu, text, extra = sides[side](args, dump, workers, work)
        rates.setdefault((side, workers), []).append(mb / seconds)
        cpu_rates.setdefault((side, workers), []).append(mb / cpu)
        outputs[(side, workers)], extras[(side, workers)] = text, extra
        print(f"round {round_} | {side} | {workers} workers | {seconds:.2f} s | "
              f"{mb / seconds:.3f} MB/s | {cpu:.1f} CPU s | {mb / cpu:.3f} MB/CPU s | "
              f"{hashlib.sha256(text.encode()).hexdigest()[:12]} | {json.dumps(extra)}",
              flush=True)
  if args.keep_outputs:
    os.makedirs(args.keep_outputs, exist_ok=True)
    for (side, workers), text in outputs.items():
      with open(os.path.join(args.keep_outputs, f"{side}_{workers}.txt"), "w",
                encoding="utf-8") as f:
        f.write(text)

  print("\nspeed: MB of XML per wall second, per CPU second (each round)")
  for (side, workers), values in rates.items():
    print(f"  {side} {workers} workers: {', '.join(f'{v:.2f}' for v in values)} · "
          f"{', '.join(f'{v:.2f}' for v in cpu_rates[(side, workers)])}")
  if "ours" in args.sides and "peer" in args.sides:
    print("ratio ours / peer, each round: wall · CPU")
    for workers in map(int, args.workers.split(",")):
      wall = [o / p for o, p in zip(rates[("ours", workers)], rates[("peer", workers)])]
      cpu = [o / p for o, p in zip(cpu_rates[("ours", workers)], cpu_rates[("peer", workers)])]
      print(f"  {workers} workers: {', '.join(f'{r:.2f}x' for r in wall)} · "
            f"{', '.join(f'{r:.2f}x' for r in cpu)}")
  print("\nquality: per MB of output")
  for (side, workers), text in outputs.items():
    print(f"  {side} {workers} workers ({len(text.encode()) / 1e6:.2f} MB): "
          f"{json.dumps(quality(text, sample['headings'], args.copies))}")
  print("\nsentences: pySBD's English Golden Rules")
  rules = splitter_eval.load_golden_rules(args.golden_rules)
  print(f"  {sentences.default_splitter('en')} (both sides' splitter): "
        f"{json.dumps(splitter_eval.score(sentences.get_splitter(sentences.DEFAULT), rules))}")


if __name__ == "__main__":
  main()
