"""data_gen.jobs.corpus_files: a corpus glob over prepare_corpus's output reads its training
shards, not its held-out files nor its stats, unless a file is named without wildcards."""
import json
import os

import pytest

from data_gen.corpus import pipeline
from data_gen.corpus.config import CorpusConfig
from data_gen.jobs import corpus_files


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
  """prepare_corpus's own output, as README's step before create_pretraining_data writes it:
  corpus/de/wiki.txt (2 shards) beside 2 held-out shards and wiki.stats.json; and its
  stats."""
  folder = tmp_path_factory.mktemp("prepared")
  source = folder / "source.txt"
  source.write_text("".join("".join(f"Das ist Absatz {i} von Dokument {d}. Er hat zwei "
                                    "Sätze.\n" for i in range(3)) + "\n" for d in range(40)),
                    encoding="utf-8")
  config = CorpusConfig(source="paragraphs", language="de", num_output_shards=2,
                        holdout_fraction=0.3, num_holdout_shards=2)
  stats = pipeline.prepare_corpus([str(source)], str(folder / "corpus" / "de" / "wiki.txt"),
                                  config, num_workers=1)
  return folder / "corpus" / "de", stats


def test_a_glob_reads_the_shards_alone(prepared):
  folder, stats = prepared
  assert stats["holdout_documents"] > 0 and stats["train_documents"] > 0
  train = [f"{folder}/wiki.txt-0000{i}-of-00002" for i in range(2)]
  held_out = [f"{folder}/wiki.holdout.txt-0000{i}-of-00002" for i in range(2)]
  assert sorted(stats["output_files"]) == sorted(train + held_out)
  kept, skipped = corpus_files.list_files(f"{folder}/*")
  assert kept == train
  assert skipped == [*(corpus_files.Skipped(p, "held out") for p in held_out),
                     corpus_files.Skipped(f"{folder}/wiki.stats.json", "stats")]
  assert corpus_files.skipped_line("build_vocab", skipped) == (
      f"build_vocab: skipped 3 file(s) of our jobs' own that --input_file's globs matched: "
      f"{held_out[0]} (held out), {held_out[1]} (held out), {folder}/wiki.stats.json (stats); "
      "name a file without wildcards to read it")


def test_a_file_named_without_wildcards_is_read_as_asked(prepared):
  folder, _ = prepared
  held_out = f"{folder}/wiki.holdout.txt-00000-of-00002"
  kept, skipped = corpus_files.list_files(f"{held_out},{folder}/wiki.*")
  assert held_out in kept and f"{folder}/wiki.txt-00000-of-00002" in kept
  assert [s.path for s in skipped] == [f"{folder}/wiki.holdout.txt-00001-of-00002",
                                       f"{folder}/wiki.stats.json"]


def test_only_what_prepare_corpus_held_out_is_skipped(tmp_path):
  """A user's own *.holdout.txt is text: no stats beside it, or stats that do not list it."""
  (tmp_path / "notes.holdout.txt").write_text("A user's own sentence.\n", encoding="utf-8")
  (tmp_path / "wiki.holdout.txt").write_text("Another one.\n", encoding="utf-8")
  (tmp_path / "wiki.stats.json").write_text(json.dumps({"output_files": {"x/wiki.txt": 3}}),
                                            encoding="utf-8")
  kept, skipped = corpus_files.list_files(f"{tmp_path}/*.txt")
  assert kept == [f"{tmp_path}/notes.holdout.txt", f"{tmp_path}/wiki.holdout.txt"]
  assert skipped == []


def test_a_glob_of_nothing_but_skipped_files_is_an_error_naming_them(prepared):
  folder, _ = prepared
  with pytest.raises(ValueError) as raised:
    corpus_files.list_files(f"{folder}/*.json")
  assert str(raised.value) == (
      f"--input_file: '{folder}/*.json' matches only our jobs' own files, which no job "
      f"trains on: {folder}/wiki.stats.json (stats); name a file without wildcards to read it")
  assert os.path.exists(f"{folder}/wiki.stats.json")
