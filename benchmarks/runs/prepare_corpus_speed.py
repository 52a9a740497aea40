"""prepare_corpus's throughput on real Wikipedia text: MB of dump XML a second, 1 and 2 workers.

The real English excerpt (wikipedia/enwiki-table-markup.xml.bz2: 5 articles with tables,
templates, references, 252 KB of XML) is too small to keep two workers busy, so its pages are
repeated --copies times under new page ids, as a multistream dump with its index (the form the
whole English Wikipedia comes in, split across workers by stream) and as a plain .xml.bz2 (read
by the main process). Each run is the library call (`data_gen.corpus.pipeline.prepare_corpus`),
timed by its stats (the job, not the interpreter's start); one line of JSON each.

  BERT_TF_DATA=../shared/data nice .venv/bin/python -m benchmarks.runs.prepare_corpus_speed \\
    --copies=40 --sentence_splitter=pysbd
"""
import bz2
import json
import os
import re
import resource
import sys
import tempfile

from absl import app
from absl import flags

from benchmarks import data_root
from data_gen.corpus import pipeline
from data_gen.corpus import sentences
from data_gen.corpus import sources
from data_gen.corpus.config import CorpusConfig

flags.DEFINE_string("dump", None, "The English excerpt (default: $BERT_TF_DATA/wikipedia/"
                    "enwiki-table-markup.xml.bz2).")
flags.DEFINE_integer("copies", 40, "Times the excerpt's pages are repeated.")
flags.DEFINE_enum("sentence_splitter", sentences.DEFAULT, sentences.NAMES, "The splitter.")
flags.DEFINE_list("num_workers", ["1", "2"], "Worker counts to run.")
flags.DEFINE_list("forms", ["multistream", "bz2"], "Dump forms to run.")
FLAGS = flags.FLAGS
# Wikimedia's dumps have 100 pages a stream, but millions of streams; the sample's ~1000 pages
# get 10 a stream, so that two workers have many to share.
PAGES_PER_STREAM = 10


def _dumps(excerpt: str, copies: int, folder: str) -> dict[str, str]:
  """The excerpt's pages `copies` times, as a multistream dump (+ index) and a plain bz2."""
  with bz2.open(excerpt, "rt", encoding="utf-8") as f:
    xml = f.read()
  header = xml[:xml.index("<page>")]
  pages = re.findall(r"<page>.*?</page>\n", xml, flags=re.S)
  repeated = []
  for copy in range(copies):
    for i, page in enumerate(pages):
      repeated.append(re.sub(r"<id>\d+</id>", f"<id>{copy * len(pages) + i + 1}</id>", page,
                             count=1))
  streams, index = [bz2.compress(header.encode())], []
  for start in range(0, len(repeated), PAGES_PER_STREAM):
    chunk = repeated[start:start + PAGES_PER_STREAM]
    offset = sum(map(len, streams))
    index += [f"{offset}:{start + i + 1}:Page\n" for i in range(len(chunk))]
    streams.append(bz2.compress("".join(chunk).encode()))
  streams.append(bz2.compress(b"</mediawiki>\n"))
  multistream = os.path.join(folder, "enwiki-copies-pages-articles-multistream.xml.bz2")
  with open(multistream, "wb") as f:
    f.write(b"".join(streams))
  with open(multistream.replace(sources.MULTISTREAM_SUFFIX, sources.INDEX_SUFFIX), "wb") as f:
    f.write(bz2.compress("".join(index).encode()))
  plain = os.path.join(folder, "enwiki-copies.xml.bz2")
  with open(plain, "wb") as f:
    f.write(bz2.compress((header + "".join(repeated) + "</mediawiki>\n").encode()))
  return {"multistream": multistream, "bz2": plain}


def _cpu_seconds() -> float:
  """CPU time of this process and its ended children, user and system."""
  return sum(getattr(resource.getrusage(who), field)
             for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
             for field in ("ru_utime", "ru_stime"))


def main(unused_argv):
  excerpt = FLAGS.dump or data_root.path("wikipedia", "enwiki-table-markup.xml.bz2")
  if not excerpt:
    sys.exit(f"--dump: not given, and ${data_root.ENV} is unset")
  config = CorpusConfig(sentence_splitter=FLAGS.sentence_splitter, num_output_shards=4)
  with tempfile.TemporaryDirectory(prefix="prepare_corpus_speed-") as folder:
    dumps = _dumps(excerpt, FLAGS.copies, folder)
    for form in FLAGS.forms:
      for workers in map(int, FLAGS.num_workers):
        out = os.path.join(folder, f"out-{form}-{workers}", "wiki.txt")
        before = _cpu_seconds()
        stats = pipeline.prepare_corpus([dumps[form]], out, config, workers)
        cpu = _cpu_seconds() - before  # (the job's own workers have ended: counted)
        print(json.dumps({
            "form": form, "num_workers": workers, "splitter": FLAGS.sentence_splitter,
            "xml_mb": round(stats["source_bytes"] / 1e6, 2),
            "seconds": round(stats["seconds"], 2),
            "xml_mb_per_second": round(stats["source_mb_per_second"], 3),
            # Per CPU second of the main process and the workers: what a busy machine (other
            # jobs on its cores) leaves comparable.
            "cpu_seconds": round(cpu, 1),
            "xml_mb_per_cpu_second": round(stats["source_bytes"] / 1e6 / cpu, 3),
            "documents": stats["documents_out"], "sentences": stats["sentences"]}),
              flush=True)


if __name__ == "__main__":
  app.run(main)
