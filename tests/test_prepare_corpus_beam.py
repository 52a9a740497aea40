"""prepare_corpus on Apache Beam (data_gen/corpus/beam.py): the local path's shards and stats,
byte for byte, from every source kind with shards, a held-out split and --dedup; the inputs
read through Beam's file systems (a test-only one, fakefs://); the local path's one-line
errors; the page time limit on a runner's thread. Runs on the FnApiRunner, offline
(DaskRunner: test_dask.py)."""
import bz2
import gzip
import json
import os
import shutil
import threading

import pytest

pytest.importorskip("apache_beam")

# pylint: disable=g-import-not-at-top  (after the skip: Beam is an optional extra)
from apache_beam.io import localfilesystem
from apache_beam.io.filesystem import FileMetadata

from bert_tf.common import files
from data_gen.corpus import beam as beam_job
from data_gen.corpus import pipeline
from data_gen.corpus import sources
from data_gen.corpus import units
from data_gen.corpus.config import CorpusConfig
from data_gen.jobs import beam_files
from data_gen.jobs import beam_options

HEADER = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">\n'
CONFIG = CorpusConfig(num_output_shards=3, holdout_fraction=0.25, num_holdout_shards=2,
                      dedup=True, min_sentences=2)
RUN_KEYS = ("seconds", "source_mb_per_second", "num_workers", "runner", "output_files")


def _page(page_id: int, text: str, ns: int = 0) -> str:
  return (f"<page><title>Page {page_id}</title><ns>{ns}</ns><id>{page_id}</id><revision>"
          f"<text>{text}</text></revision></page>\n")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  """A multistream dump with its index (two streams), a plain bz2 dump, a book, paragraphs;
  a page repeated (--dedup), a one-sentence page (--min_sentences), a project page."""
  folder = tmp_path_factory.mktemp("inputs")
  texts = {i: f"Page {i} is about [[thing {i}|things]]. It has two sentences. "
              + "Really. " * (i % 2) for i in range(1, 13)}
  pages = [_page(i, text) for i, text in texts.items()]
  pages += [_page(20, "Page 1 is about things. Once."), _page(21, "One sentence only."),
            _page(22, "Project page. Not an article.", ns=4), _page(23, texts[1])]
  streams, index = [bz2.compress(HEADER.encode())], []
  for start in (0, 8):
    index += [f"{sum(map(len, streams))}:{100 + i}:Page\n" for i in range(start, start + 8)]
    streams.append(bz2.compress("".join(pages[start:start + 8]).encode()))
  streams.append(bz2.compress(b"</mediawiki>\n"))
  dump = folder / "tiny-multistream.xml.bz2"
  dump.write_bytes(b"".join(streams))
  (folder / "tiny-multistream-index.txt.bz2").write_bytes(bz2.compress("".join(index).encode()))
  plain = folder / "other.xml.bz2"
  plain.write_bytes(bz2.compress((HEADER + "".join(_page(40 + i, f"Other {i}. Text {i}.")
                                                   for i in range(6)) +
                                  "</mediawiki>\n").encode()))
  book = folder / "book.txt"
  book.write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nCHAPTER I.\n\nIt began "
                  "here.\nIt went on.\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n",
                  encoding="utf-8")
  paragraphs = folder / "paragraphs.txt"
  paragraphs.write_text("A first. A second.\n\nB first. B second.\n\nA first. A second.\n",
                        encoding="utf-8")
  return [str(p) for p in (dump, plain, book, paragraphs)]


class FakeFileSystem(localfilesystem.LocalFileSystem):
  """fakefs:///PATH: the local file /PATH, reached only through Beam's FileSystems (the
  standard library's `open` cannot read it): a stand-in for gs:// and the like. Registered by
  being defined: FileSystems finds a file system among FileSystem's subclasses by scheme."""
  PREFIX = "fakefs://"

  @classmethod
  def scheme(cls):
    return "fakefs"

  def _local(self, path):
    return path.removeprefix(self.PREFIX)

  def _fake(self, metadata):
    return FileMetadata(self.PREFIX + metadata.path, metadata.size_in_bytes,
                        metadata.last_updated_in_seconds)

  def open(self, path, *args, **kwargs):
    return super().open(self._local(path), *args, **kwargs)

  def exists(self, path):
    return super().exists(self._local(path))

  def size(self, path):
    return super().size(self._local(path))

  def metadata(self, path):
    return self._fake(super().metadata(self._local(path)))

  def _list(self, dir_or_prefix):
    return map(self._fake, super()._list(self._local(dir_or_prefix)))


def _contents(folder):
  return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))
          if not name.endswith(".json")}


@pytest.mark.parametrize("beam_args", [
    ["--runner=FnApiRunner", "--direct_num_workers=1"],
    pytest.param(["--runner=FnApiRunner", "--direct_num_workers=2",
                  "--direct_running_mode=multi_processing"], marks=pytest.mark.slow),
], ids=["1-worker", "2-workers"])
def test_the_shards_and_stats_are_the_local_paths(tmp_path, inputs, beam_args):
  local = pipeline.prepare_corpus(inputs, str(tmp_path / "local" / "corpus.txt"), CONFIG,
                                  num_workers=2, unit_chars=64)
  beam = beam_job.prepare_corpus(inputs, str(tmp_path / "beam" / "corpus.txt"), CONFIG,
                                 beam_options.pipeline_options(beam_args), unit_chars=64)
  assert _contents(tmp_path / "beam") == _contents(tmp_path / "local")
  assert len(_contents(tmp_path / "local")) == 5
  assert {k: v for k, v in beam.items() if k not in RUN_KEYS} == \
      {k: v for k, v in local.items() if k not in RUN_KEYS}
  assert list(beam["output_files"].values()) == list(local["output_files"].values())
  assert local["skipped"] == {"duplicate": 2, "namespace": 1, "too_few_sentences": 1}
  assert beam["runner"] == "FnApiRunner"
  # Nothing left but the outputs and the stats (no scratch, no temporary file).
  assert sorted(os.listdir(tmp_path / "beam")) == sorted(
      list(_contents(tmp_path / "local")) + ["corpus.stats.json"])


def test_the_inputs_are_read_through_beams_file_systems(tmp_path, inputs):
  """Every input on fakefs:// (a multistream dump and its index, a .xml.bz2, a plain .xml, a
  book, gzipped paragraphs), matched by a glob as the command line does: the local run's
  shards and stats from the same files on their local paths."""
  folder = tmp_path / "inputs"
  folder.mkdir()
  for path in inputs + [sources.multistream_index(inputs[0])]:
    shutil.copy(path, folder)
  (folder / "plain.xml").write_text(
      HEADER + "".join(_page(60 + i, f"Plain {i} is here. It is plain.") for i in range(4)) +
      "</mediawiki>\n", encoding="utf-8")
  os.remove(folder / "paragraphs.txt")
  with gzip.open(folder / "paragraphs.txt.gz", "wt", encoding="utf-8") as f:
    f.write("C first. C second.\n\nD first. D second.\n")
  local_files = files.list_files(f"{folder}/*")
  fake_files = files.list_files(f"fakefs://{folder}/*", beam_files.input_file_system)
  assert fake_files == ["fakefs://" + p for p in local_files] and len(fake_files) == 6
  local = pipeline.prepare_corpus(local_files, str(tmp_path / "local" / "corpus.txt"), CONFIG,
                                  num_workers=1, unit_chars=64)
  beam = beam_job.prepare_corpus(fake_files, str(tmp_path / "beam" / "corpus.txt"), CONFIG,
                                 beam_options.pipeline_options(["--runner=FnApiRunner"]),
                                 unit_chars=64)
  assert _contents(tmp_path / "beam") == _contents(tmp_path / "local")
  assert len(beam["input_files"]) == 5 and beam["documents_out"] == local["documents_out"] > 20
  assert json.loads(json.dumps({k: v for k, v in beam.items() if k not in RUN_KEYS})
                    .replace("fakefs://", "")) == \
      {k: v for k, v in local.items() if k not in RUN_KEYS}


def test_a_missing_input_on_another_file_system_is_one_line(tmp_path):
  missing = f"fakefs://{tmp_path}/missing.xml.bz2"
  with pytest.raises(FileNotFoundError, match="^no file matches 'fakefs://.*/missing"):
    files.list_files(missing, beam_files.input_file_system)
  with pytest.raises(ValueError, match=f"^{missing}: no such file$"):
    beam_job.prepare_corpus([missing], str(tmp_path / "out" / "corpus.txt"), CONFIG,
                            beam_options.pipeline_options(["--runner=FnApiRunner"]))


@pytest.mark.parametrize("scheme", ["", "fakefs://"], ids=["local", "fakefs"])
def test_errors_are_the_local_paths_one_line(tmp_path, scheme):
  cut = tmp_path / "cut.xml.bz2"
  cut.write_bytes(bz2.compress((HEADER + _page(1, "Some text. More.") * 50 +
                                "</mediawiki>").encode())[:200])
  (tmp_path / "out").mkdir()
  with pytest.raises(ValueError, match=f"^{scheme}{cut}: truncated"):
    beam_job.prepare_corpus([f"{scheme}{cut}"], str(tmp_path / "out" / "corpus.txt"), CONFIG,
                            beam_options.pipeline_options(["--runner=FnApiRunner"]))
  assert os.listdir(tmp_path / "out") == []


def test_a_mistyped_beam_option_names_prepare_corpus():
  with pytest.raises(ValueError, match="^--direct_num_workerz: neither a flag of prepare_corpus "
                     "nor a Beam pipeline option$"):
    beam_options.pipeline_options(["--runner=FnApiRunner", "--direct_num_workerz=2"],
                                  "prepare_corpus")


def test_the_page_time_limit_holds_on_a_thread_that_is_not_the_main_one():
  """A Beam runner's worker runs a unit on a thread of its own, where no signal comes: the page
  that parses too long (2,000 unclosed links: ~0.3 CPU s) is still skipped and counted, the
  others kept, and nothing is raised after the unit is done."""
  fine = sources.RawPage("1", "Fine", 0, False, "A fine page. It has two sentences.")
  slow = sources.RawPage("2", "Slow", 0, False, "[[a|" * 2000)
  unit = sources.Unit((0, 0), "dump.xml", "wikipedia", items=[fine, slow, fine])
  done = {}

  def run():
    done["result"] = units.process_unit(unit, CorpusConfig(page_time_limit=0.05))
    done["after"] = sum(range(10**6))  # a pending PageTimeout would land here
  worker = threading.Thread(target=run)
  worker.start()
  worker.join()
  assert done["result"].counts == {"documents_in": 3, "skipped_page_timeout": 1}
  assert len(done["result"].documents) == 2 and "after" in done
