"""prepare_corpus's memory on a dump 1x and 10x as large: the peak RSS of the whole job (the main
process and its workers), which streaming keeps flat whatever the dump's size.

The dumps are benchmarks/peers/corpus_compare.py's sample (the real articles of the excerpts under
$BERT_TF_DATA/wikipedia, repeated under new titles and ids, one .xml.bz2 stream, or --form=
multistream), --copies and 10x --copies times. Each run is the command (`python -m
data_gen.prepare_corpus --num_workers=N`); its RSS is sampled every 0.2 s
(benchmarks/runs/data_gen.py's sampler: the main process, the largest worker, and their sum).

  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python \\
      -m benchmarks.runs.prepare_corpus_memory --copies=8
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import data_root
from benchmarks.peers import corpus_compare  # the sample
from benchmarks.runs.data_gen import _MemorySampler  # pylint: disable=protected-access

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def peak_rss(dump: str, workers: int, folder: str) -> dict:
  """The run's wall seconds and peak RSS (MB): main, largest worker, main and workers together."""
  start = time.perf_counter()
  with subprocess.Popen([sys.executable, "-m", "data_gen.prepare_corpus", f"--input_file={dump}",
                         f"--output_file={folder}/wiki.txt", f"--num_workers={workers}"],
                        env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True) as job:
    sampler = _MemorySampler(job.pid)
    sampler.start()
    _, stderr = job.communicate()
    sampler.done.set()
    sampler.join()
  if job.returncode:
    sys.exit(f"prepare_corpus failed:\n{stderr[-3000:]}")
  return {"seconds": round(time.perf_counter() - start, 1),
          "peak_total_mb": round(sampler.peak_total / 1e6), "peak_main_mb": round(
              sampler.peak_main / 1e6), "peak_worker_mb": round(sampler.peak_worker / 1e6)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  corpus_compare.add_sample_flags(parser, 8)
  parser.add_argument("--form", choices=("multistream", "bz2"), default="bz2")
  parser.add_argument("--workers", type=int, default=2)
  args = parser.parse_args()
  if not args.dump:
    parser.error(f"give --dump, or set ${data_root.ENV}")
  with tempfile.TemporaryDirectory(prefix="prepare_corpus_memory-") as folder:
    for scale in (1, 10):
      work = os.path.join(folder, f"x{scale}")
      os.makedirs(work)
      sample = corpus_compare.build_sample(args.dump.split(","), args.copies * scale, work,
                                           args.form == "multistream")
      print(json.dumps({"scale": scale, "xml_mb": round(sample["xml_bytes"] / 1e6, 1),
                        "workers": args.workers,
                        **peak_rss(sample["path"], args.workers, work)}), flush=True)


if __name__ == "__main__":
  main()
