"""Where prepare_corpus's CPU time goes by process: the main process (bz2, XML, handing the pages
over, writing) and each worker (its start-up, then cleaning and splitting), in the job itself.

The sample is benchmarks/peers/corpus_compare.py's (the real articles of the excerpts under
$BERT_TF_DATA/wikipedia, repeated --copies times under new titles and ids, one .xml.bz2 stream).
The job is `pipeline.prepare_corpus` on a pool of spawned workers as the command starts them;
each worker's CPU clock is read when its start-up is done, around each unit it cleans, and as it
exits; the main process's around the job. Each run prints one JSON line. Beside
runs/prepare_corpus_stages.py (the same work in one process), the difference is what the
processes cost each other on a machine whose cores are all busy.

  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python \\
      -m benchmarks.runs.prepare_corpus_processes --copies=43 --workers=1,2
"""
import argparse
import atexit
import concurrent.futures
import json
import multiprocessing
import os
import resource
import tempfile
import time

from benchmarks import data_root
from benchmarks.peers import corpus_compare  # the sample
from data_gen.corpus import pipeline
from data_gen.corpus import units
from data_gen.corpus.config import CorpusConfig


def _cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def _timed_worker(report: str) -> None:
  """A worker's initializer: times each unit it cleans and writes its CPU seconds to `report`
  (a JSON line) as it exits."""
  start_up, in_units = _cpu(), [0.0]
  process_unit = units.process_unit

  def timed(unit, config):
    started = _cpu()
    try:
      return process_unit(unit, config)
    finally:
      in_units[0] += _cpu() - started

  units.process_unit = timed  # the pool's calls name it: they find this one

  def write():
    with open(report, "a", encoding="utf-8") as f:
      f.write(json.dumps({"start_up": round(start_up, 2), "units": round(in_units[0], 2),
                          "total": round(_cpu(), 2)}) + "\n")
  atexit.register(write)


def run(dump: str, workers: int, folder: str) -> dict:
  """CPU seconds of the main process and of each worker over the job."""
  report = os.path.join(folder, f"workers_{workers}.jsonl")
  pool = concurrent.futures.ProcessPoolExecutor(
      workers, mp_context=multiprocessing.get_context("spawn"), initializer=_timed_worker,
      initargs=(report,))
  for _ in range(workers):  # all started before the job, as jobs.workers starts them
    pool.submit(int)
  started, wall = _cpu(), time.monotonic()
  pipeline.prepare_corpus([dump], os.path.join(folder, f"out_{workers}", "wiki.txt"),
                          CorpusConfig(), workers, workers=pool)
  main, seconds = _cpu() - started, time.monotonic() - wall
  pool.shutdown(wait=True)
  with open(report, encoding="utf-8") as f:
    per_worker = [json.loads(line) for line in f]
  return {"workers": workers, "wall_s": round(seconds, 2), "main_cpu_s": round(main, 2),
          "worker_cpu_s": per_worker,
          "all_cpu_s": round(main + sum(w["total"] for w in per_worker), 2)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  corpus_compare.add_sample_flags(parser, 43)
  parser.add_argument("--workers", default="1,2", help="Worker counts, comma-separated.")
  args = parser.parse_args()
  if not args.dump:
    parser.error(f"give --dump, or set ${data_root.ENV}")
  with tempfile.TemporaryDirectory(prefix="prepare_corpus_processes-") as folder:
    sample = corpus_compare.build_sample(args.dump.split(","), args.copies, folder, False)
    print(json.dumps({"pages": sample["pages"], "xml_mb": round(sample["xml_bytes"] / 1e6, 2),
                      "load": os.getloadavg()[0]}))
    for workers in map(int, args.workers.split(",")):
      print(json.dumps(run(sample["path"], workers, folder)), flush=True)


if __name__ == "__main__":
  main()
