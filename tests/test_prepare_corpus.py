"""prepare_corpus: Wikipedia dumps (plain, bz2, multistream with its index, UTF-16),
WikiExtractor output, Gutenberg books and paragraphs -> create_pretraining_data's input; the
same bytes whatever the workers; filters, held-out split, stats; bad input as one line naming
the file, nothing left behind. Every fixture is made here, tiny, by hand."""
import bz2
import os
import re
import subprocess
import sys
import unicodedata
from xml.sax import saxutils

import pytest

from bert_tf.common.errors import DataError
from data_gen.corpus import pipeline
from data_gen.corpus import prefilter
from data_gen.corpus import sources
from data_gen.corpus import units
from data_gen.corpus import wikitext
from data_gen.corpus.config import CorpusConfig
from data_gen.jobs.outputs import stats_path
from data_gen.jobs.workers import start_workers
from data_gen.pretraining_data.config import PretrainingDataConfig
from data_gen.pretraining_data.pipeline import create_pretraining_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
          'xml:lang="en">\n  <siteinfo>\n    <sitename>Wikipedia</sitename>\n  </siteinfo>\n')

# An article with every kind of markup the paper's "text passages" leave out.
ALPHA = """{{Infobox letter|name=Alpha|size={{convert|3|m}}}}
'''Alpha''' is a [[letter]] of the [[Greek alphabet|Greek alphabet]].<ref>{{cite web|url=http://x.org}}</ref> It has a long history.&nbsp;Scholars agree.
[[File:Alpha.svg|thumb|An alpha [[glyph]]]]
<!-- a hidden note -->
== History ==
The letter came from <span class="x">Phoenician</span> writing.
* A list item.
# A numbered item.
: An indented line.
{| class="wikitable"
| cell || cell
|}
See [http://example.com the site] for more.

[[Category:Letters]]
[[de:Alpha]]"""
ALPHA_SENTENCES = ["Alpha is a letter of the Greek alphabet.", "It has a long history.",
                   "Scholars agree.", "The letter came from Phoenician writing.",
                   "See the site for more."]
# (id, title, ns, redirect, wikitext)
PAGES = [
    ("10", "Alpha", 0, False, ALPHA),
    ("11", "Beta", 0, False, "Beta is the second letter. It follows [[Alpha|alpha]].\n\n"
                             "Beta has a sound."),
    ("12", "Bet", 0, True, "#REDIRECT [[Beta]]"),
    ("13", "Gamma (disambiguation)", 0, False, "Gamma may refer to:\n* [[Gamma ray]]\n"
                                               "{{disambiguation}}"),
    ("14", "Wikipedia:About", 4, False, "This page is about the project."),
    ("15", "Delta", 0, False, "Delta is a letter. Delta is also a river mouth."),
]
DUMP_TEXT = ("\n".join(ALPHA_SENTENCES) + "\n\n"
             "Beta is the second letter.\nIt follows alpha.\nBeta has a sound.\n\n"
             "Delta is a letter.\nDelta is also a river mouth.\n\n")

WIKIEXTRACTOR = """<doc id="10" url="https://en.wikipedia.org/wiki?curid=10" title="Alpha">
Alpha

Alpha is a letter. It is old.

History.

The letter came from Phoenician writing.
formula_7,
</doc>
<doc id="11" url="https://en.wikipedia.org/wiki?curid=11" title="Beta">
Beta

Beta is the second letter.
</doc>
"""
BOOK = """\ufeffThe Project Gutenberg EBook of Tiny Tales, by A. Writer

This eBook is for the use of anyone anywhere at no cost and with
almost no restrictions whatsoever.

*** START OF THIS PROJECT GUTENBERG EBOOK TINY TALES ***

Produced by Some Volunteer

TINY TALES

by A. Writer

CONTENTS

CHAPTER I.    The Beginning
CHAPTER II.   The End

CHAPTER I.

The Beginning

It was a dark and stormy
night. The rain fell in
torrents.

Nobody came to the door.

CHAPTER II.

The End

The sun rose over the
hills. Everyone was glad.

End of the Project Gutenberg EBook of Tiny Tales, by A. Writer

*** END OF THIS PROJECT GUTENBERG EBOOK TINY TALES ***

This file should be named tiny.txt. Project Gutenberg-tm License: you may copy it.
"""
BOOK_TEXT = ("It was a dark and stormy night.\nThe rain fell in torrents.\n"
             "Nobody came to the door.\nThe sun rose over the hills.\nEveryone was glad.\n\n")
PARAGRAPHS = "First document, first paragraph. A second sentence.\nA second paragraph.\n\n" \
             "Second document.\n"


def _page_xml(page) -> str:
  page_id, title, ns, redirect, text = page
  redirect_tag = f'    <redirect title="{saxutils.escape(title)}" />\n' if redirect else ""
  return (f"  <page>\n    <title>{saxutils.escape(title)}</title>\n    <ns>{ns}</ns>\n"
          f"    <id>{page_id}</id>\n{redirect_tag}    <revision>\n      <id>9{page_id}</id>\n"
          f'      <text xml:space="preserve">{saxutils.escape(text)}</text>\n'
          "    </revision>\n  </page>\n")


def _dump(pages=PAGES) -> str:
  return HEADER + "".join(map(_page_xml, pages)) + "</mediawiki>\n"


def _write(path, data) -> str:
  mode = "wb" if isinstance(data, bytes) else "w"
  with open(path, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
    f.write(data)
  return str(path)


def _multistream(folder, pages=PAGES, per_stream=2) -> str:
  """A multistream dump as Wikimedia makes them: the header in a bz2 stream of its own, then
  `per_stream` pages a stream, then the closing tag's stream; and its index (offset:id:title)."""
  streams, index = [bz2.compress(HEADER.encode())], []
  offset = len(streams[0])
  for i in range(0, len(pages), per_stream):
    chunk = pages[i:i + per_stream]
    streams.append(bz2.compress("".join(map(_page_xml, chunk)).encode()))
    index += [f"{offset}:{page[0]}:{page[1]}\n" for page in chunk]
    offset += len(streams[-1])
  streams.append(bz2.compress(b"</mediawiki>\n"))
  _write(folder / "tinywiki-pages-articles-multistream-index.txt.bz2",
         bz2.compress("".join(index).encode()))
  return _write(folder / "tinywiki-pages-articles-multistream.xml.bz2", b"".join(streams))


@pytest.fixture(scope="module")
def pool():
  """Two workers the tests share (each job's own would cost a spawn each)."""
  with start_workers(2) as workers:
    yield workers


def _run(inputs, out, pool=None, num_workers=2, unit_chars=100, **settings) -> dict:
  """The job on `pool` (a fixture's), or on `num_workers` of its own."""
  config = CorpusConfig(**settings)
  return pipeline.prepare_corpus(inputs, str(out), config, num_workers, workers=pool,
                                        unit_chars=unit_chars)


def _read(path) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def test_wikitext_keeps_the_prose_and_drops_the_markup():
  code = wikitext.parse(ALPHA)
  assert wikitext.passages(code) == [
      "Alpha is a letter of the Greek alphabet. It has a long history. Scholars agree.",
      "The letter came from Phoenician writing.", "See the site for more."]
  assert not wikitext.is_disambiguation(code)
  assert wikitext.is_disambiguation(wikitext.parse("X may be:\n{{Disambiguation|geo}}"))
  # A template emptied a parenthesis; a link to a category with a leading colon is text.
  assert wikitext.passages(wikitext.parse(
      "Tallinn ({{lang-et|x}}; {{IPA|y}}) is a city. See [[:Category:Cities]].")) == \
      ["Tallinn is a city. See Category:Cities."]


def test_tables_are_cut_before_parsing_nested_ones_too():
  assert prefilter.without_tables("Before.\n{| a\n| x\n:{|\n| nested\n|}\n| y\n |}\nAfter.") == \
      "Before.\nAfter."
  assert prefilter.without_tables("A.\n{|\n| left open") == "A.\n{|\n| left open"


def test_a_dump_becomes_one_document_per_article_one_sentence_a_line(tmp_path, pool):
  dump = _write(tmp_path / "tiny.xml", _dump())
  stats = _run([dump], tmp_path / "out" / "wiki.txt", pool)
  assert _read(tmp_path / "out" / "wiki.txt") == DUMP_TEXT
  assert stats["documents_in"] == 6 and stats["documents_out"] == 3
  assert stats["skipped"] == {"redirect": 1, "disambiguation": 1, "namespace": 1}
  assert stats["sentences"] == 10 and stats["words"] == len(DUMP_TEXT.split())
  assert stats["bytes_out"] == len(DUMP_TEXT.encode()) and stats["bytes_in"] == \
      os.path.getsize(dump) == stats["source_bytes"]
  assert stats["input_files"] == {dump: "wikipedia"}
  assert stats_path(str(tmp_path / "out" / "wiki.txt")).endswith("wiki.stats.json")
  assert sorted(os.listdir(tmp_path / "out")) == ["wiki.stats.json", "wiki.txt"]


def test_bz2_multistream_and_utf16_dumps_give_the_same_bytes(tmp_path, pool):
  """The plain dump, its .bz2, the multistream dump split by its index into one unit per
  stream (read by the workers), and the dump in UTF-16: one output."""
  text = _dump()
  dumps = {
      "xml": _write(tmp_path / "a.xml", text),
      "bz2": _write(tmp_path / "b.xml.bz2", bz2.compress(text.encode())),
      "multistream": _multistream(tmp_path),
      "utf16": _write(tmp_path / "d.xml", text.replace(
          "<mediawiki", '<?xml version="1.0" encoding="UTF-16"?>\n<mediawiki', 1)
          .encode("utf-16")),
  }
  index = sources.multistream_index(dumps["multistream"])
  assert index and sources.without_indexes([dumps["multistream"], index]) == \
      [dumps["multistream"]]
  planned = list(sources.plan_units(0, dumps["multistream"], "wikipedia", unit_chars=4))
  assert len(planned) == 3 and all(u.stream_range and not u.items for u in planned)
  for name, dump in dumps.items():
    stats = _run([dump], tmp_path / name / "wiki.txt", pool)
    assert _read(tmp_path / name / "wiki.txt") == DUMP_TEXT, name
    assert stats["skipped"] == {"redirect": 1, "disambiguation": 1, "namespace": 1}, name


def test_a_decomposed_dump_hides_its_files_and_categories_as_its_composed_twin(tmp_path, pool):
  # Vietnamese Wikipedia's names (namespaces.json's viwiki row: `Tập tin`, `Thể loại`), a dump
  # with no <namespaces> of its own, once in NFC as MediaWiki stores it and once in NFD (each
  # ậ, ể a letter and its combining marks): its caption (`nhỏ|300px|...`) and category show in
  # neither. Its text stays as written: NFD out of NFD.
  header = HEADER.replace('xml:lang="en"', 'xml:lang="vi"').replace(
      "</sitename>", "</sitename>\n    <dbname>viwiki</dbname>")
  page = ("1", "Berlin", 0, False,
          "'''Berlin''' là thủ đô của [[Đức]]. Thành phố có 3,8 triệu dân.\n"
          "[[Tập tin:Berlin 1737.jpg|nhỏ|300px|Berlin năm 1737]]\n"
          "Năm 1737, Berlin còn nhỏ.\n[[Thể loại:Thủ đô châu Âu]]")
  expected = ("Berlin là thủ đô của Đức.\nThành phố có 3,8 triệu dân.\n"
              "Năm 1737, Berlin còn nhỏ.\n\n")
  for form in ("NFC", "NFD"):
    dump = _write(tmp_path / f"{form}.xml",
                  unicodedata.normalize(form, header + _page_xml(page) + "</mediawiki>\n"))
    _run([dump], tmp_path / form / "wiki.txt", pool)
    assert _read(tmp_path / form / "wiki.txt") == unicodedata.normalize(form, expected), form


def test_each_language_is_split_by_its_default_and_thai_keeps_its_paragraphs(tmp_path, pool):
  # --sentence_splitter=auto (the default) is the language's (sentences.default_splitter): no
  # space between Chinese sentences; Thai, with no sentence punctuation, one paragraph a line,
  # which the stats and the summary say.
  chinese = _write(tmp_path / "zh.txt", "北京是中国的首都。它很大！你去过吗？\n")
  stats = _run([chinese], tmp_path / "zh" / "out.txt", pool, source="paragraphs", language="zh")
  assert _read(tmp_path / "zh" / "out.txt") == "北京是中国的首都。\n它很大！\n你去过吗？\n\n"
  assert (stats["sentence_splitter"], stats["one_paragraph_a_line"]) == ("punkt", False)
  thai = "ประเทศไทยมีประชากรมาก กรุงเทพมหานครเป็นเมืองหลวง"
  path = _write(tmp_path / "th.txt", f"{thai}\nอากาศร้อน. ฝนตกบ่อย\n")
  stats = _run([path], tmp_path / "th" / "out.txt", pool, source="paragraphs", language="th")
  assert _read(tmp_path / "th" / "out.txt") == f"{thai}\nอากาศร้อน. ฝนตกบ่อย\n\n"
  assert (stats["sentence_splitter"], stats["one_paragraph_a_line"]) == ("paragraph", True)
  assert "paragraphs (one a line: no sentence punctuation) 2" in pipeline.summary(stats)


def test_wikiextractor_books_and_paragraphs(tmp_path, caplog, pool):
  extracted = _write(tmp_path / "wiki_00", WIKIEXTRACTOR)
  book = _write(tmp_path / "tiny.txt", BOOK)
  bare = _write(tmp_path / "bare.txt", "It was a dark night. Nobody came.\n")
  paragraphs = _write(tmp_path / "paragraphs.txt", PARAGRAPHS)
  assert [sources.detect(p) for p in (extracted, book, paragraphs)] == \
      ["wikiextractor", "books", "paragraphs"]
  stats = _run([extracted], tmp_path / "w" / "out.txt", pool)
  assert _read(tmp_path / "w" / "out.txt") == (
      "Alpha is a letter.\nIt is old.\nThe letter came from Phoenician writing.\n\n"
      "Beta is the second letter.\n\n")
  stats = _run([book], tmp_path / "b" / "out.txt", pool)
  assert _read(tmp_path / "b" / "out.txt") == BOOK_TEXT and stats["books_without_markers"] == 0
  # A book without the markers: taken whole, with a warning naming it.
  stats = _run([bare], tmp_path / "bare" / "out.txt", pool, source="books")
  assert _read(tmp_path / "bare" / "out.txt") == "It was a dark night.\nNobody came.\n\n"
  assert stats["books_without_markers"] == 1 and bare in stats["warnings"][0]
  assert any(bare in r.getMessage() and "markers" in r.getMessage() for r in caplog.records)
  _run([paragraphs], tmp_path / "p" / "out.txt", pool)
  assert _read(tmp_path / "p" / "out.txt") == (
      "First document, first paragraph.\nA second sentence.\nA second paragraph.\n\n"
      "Second document.\n\n")


@pytest.fixture(scope="module")
def mixed_inputs(tmp_path_factory):
  """Every source kind at once: a multistream dump, a bz2 dump of other pages, WikiExtractor
  output (the same article ids as the dump: the same shards), a book, paragraphs, and
  duplicates for --dedup."""
  folder = tmp_path_factory.mktemp("mixed")
  more = [(str(100 + i), f"Page {i}", 0, False,
           f"Page {i} is short. It has {i} words or so. " * (1 + i % 3)) for i in range(30)]
  more.append(("200", "Copy of Delta", 0, False, PAGES[-1][4]))  # Delta's exact text again
  return [_multistream(folder),
          _write(folder / "more.xml.bz2", bz2.compress(_dump(more).encode())),
          _write(folder / "wiki_00", WIKIEXTRACTOR), _write(folder / "tiny.txt", BOOK),
          _write(folder / "paragraphs.txt", (PARAGRAPHS + "\n") * 3)]


SHARDED = dict(num_output_shards=3, holdout_fraction=0.25, num_holdout_shards=2, dedup=True)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, mixed_inputs):
  folder = tmp_path_factory.mktemp("local")
  stats = _run(mixed_inputs, folder / "corpus.txt", num_workers=2, **SHARDED)
  return folder, stats


def _contents(folder) -> dict[str, bytes]:
  return {name: open(os.path.join(folder, name), "rb").read()  # pylint: disable=consider-using-with
          for name in sorted(os.listdir(folder)) if not name.endswith(".json")}


def _same_stats(a: dict, b: dict) -> bool:
  """Whether two runs counted the same (their timing, workers and output folders aside)."""
  run = ("seconds", "source_mb_per_second", "num_workers", "runner", "output_files")
  return ({k: v for k, v in a.items() if k not in run} ==
          {k: v for k, v in b.items() if k not in run} and
          list(a["output_files"].values()) == list(b["output_files"].values()))


def test_shards_holdout_and_dedup_by_identity_the_same_for_1_and_2_workers(
    tmp_path, local_run, mixed_inputs):
  folder, stats = local_run
  one = _run(mixed_inputs, tmp_path / "corpus.txt", num_workers=1, unit_chars=10_000,
             **SHARDED)
  assert _contents(tmp_path) == _contents(folder)
  assert sorted(_contents(folder)) == [
      "corpus.holdout.txt-00000-of-00002", "corpus.holdout.txt-00001-of-00002",
      "corpus.txt-00000-of-00003", "corpus.txt-00001-of-00003", "corpus.txt-00002-of-00003"]
  assert _same_stats(one, stats)
  # Each document where its identity's hash puts it: Delta (page 15) and the WikiExtractor
  # Alpha (id 10) by their page ids.
  config = CorpusConfig(**SHARDED)
  for page_id, first_line in (("15", "Delta is a letter."), ("10", "Alpha is a letter.")):
    split, shard = units.placement(f"wikipedia:{page_id}", config)
    names = [n for n in _contents(folder) if ("holdout" in n) == (split == 1)]
    assert first_line in _contents(folder)[names[shard]].decode().split("\n")
  # Page 200 repeats Delta's text after it in input order: dropped; so are the paragraphs
  # file's repeats.
  assert stats["skipped"]["duplicate"] == 1 + 2 * 2
  assert stats["documents_out"] == stats["train_documents"] + stats["holdout_documents"]
  assert 0 < stats["holdout_documents"] < stats["train_documents"]
  assert sum(stats["output_files"].values()) == stats["documents_out"]
  written = b"".join(_contents(folder).values()).decode()
  assert written.count("Delta is also a river mouth.") == 1


def test_a_rerun_replaces_its_shards_and_refuses_another_shard_count(tmp_path, pool):
  paragraphs = _write(tmp_path / "p.txt", PARAGRAPHS)
  out = tmp_path / "out"
  out.mkdir()
  (out / "c.txt-00000-of-00002.tmp-4242").write_text("half a shard")  # a killed run's
  _run([paragraphs], out / "c.txt", pool, num_output_shards=2)
  first = _contents(out)
  _run([paragraphs], out / "c.txt", pool, num_output_shards=2)
  assert _contents(out) == first and len(first) == 2
  with pytest.raises(ValueError, match="c.txt-00000-of-00002.*output of another run"):
    _run([paragraphs], out / "c.txt", pool, num_output_shards=3)


def test_a_worker_holds_no_tensorflow(tmp_path):
  """The workers parse and split (mwparserfromhell, the splitter) and never load TensorFlow,
  which would cost each seconds to start and ~700 MB."""
  unit = next(sources.plan_units(0, _write(tmp_path / "d.xml", _dump()), "wikipedia"))
  with start_workers(1) as worker:
    assert len(worker.submit(units.process_unit, unit, CorpusConfig()).result()
               .documents) == 3
    loaded = worker.submit(eval, "{m.split('.')[0] for m in __import__('sys').modules}")
    assert "mwparserfromhell" in loaded.result()
    assert not loaded.result() & {"tensorflow", "tf_keras", "keras", "official"}


# The console script's run() in a process of its own, then the top-level modules it loaded.
_RUN_AND_LIST_MODULES = """
import sys
from data_gen import prepare_corpus
sys.argv[0] = "prepare_corpus"
try:
  prepare_corpus.run()
except SystemExit as e:
  assert not e.code, e.code
print("modules:", *sorted({m.split(".")[0] for m in sys.modules}))
"""


def test_a_run_loads_no_tensorflow_in_its_main_process(tmp_path):
  """The main process plans the units and writes the shards and stats (the standard library):
  TensorFlow there would be ~5 CPU s of start-up for nothing (the workers: the test above)."""
  dump = _write(tmp_path / "tiny.xml", _dump())
  run = subprocess.run(
      [sys.executable, "-c", _RUN_AND_LIST_MODULES, f"--input_file={dump}",
       f"--output_file={tmp_path / 'out' / 'wiki.txt'}", "--num_workers=1"],
      capture_output=True, text=True, cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
      timeout=900, check=False)
  assert run.returncode == 0, run.stderr
  assert _read(tmp_path / "out" / "wiki.txt") == DUMP_TEXT
  loaded = run.stdout.splitlines()[-1].split()[1:]
  assert "data_gen" in loaded and "mwparserfromhell" in loaded
  assert [m for m in loaded if m.startswith("tensorflow") or
          m in {"tf_keras", "keras", "official"}] == []


def test_filters_count_what_they_drop(tmp_path, mixed_inputs, pool):
  stats = _run(mixed_inputs[1:2], tmp_path / "out.txt", pool, min_sentences=3, min_words=12)
  # Pages with i % 3 == 0 have 2 sentences, all the others 4 or 6 (and 5+ words a sentence).
  assert stats["skipped"] == {"too_few_sentences": 11}
  stats = _run(mixed_inputs[1:2], tmp_path / "words.txt", pool, min_words=20)
  assert stats["skipped"] == {"too_few_words": 11}
  assert all(len(doc.split()) >= 20 for doc in _read(tmp_path / "words.txt").split("\n\n")
             if doc)


def test_create_pretraining_data_reads_the_output(tmp_path, local_run, tokenizer):
  folder, _ = local_run
  shards = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                  if n.startswith("corpus.txt-"))
  outputs = [str(tmp_path / "pretrain.tfrecord")]
  stats = create_pretraining_data(
      shards, outputs, tokenizer, PretrainingDataConfig(max_seq_length=32, dupe_factor=1,
                                                        max_predictions_per_seq=5), 1)
  train_documents = sum(n for path, n in local_run[1]["output_files"].items()
                        if "holdout" not in path)
  assert stats["documents"] == train_documents and stats["instances"] > train_documents
  assert stats["unk_rate"] < 0.01


def test_a_page_that_parses_too_long_is_skipped_and_counted(tmp_path, pool):
  """mwparserfromhell takes seconds over thousands of unclosed links (6,000: 1.75 CPU s on a
  2-core AMD EPYC; a normal page here, milliseconds); the CPU-time limit interrupts it (its C
  tokenizer checks for signals) and the job goes on, whatever the machine's load."""
  slow = ("16", "Slow", 0, False, "[[a|" * 6000)
  dump = _write(tmp_path / "slow.xml", _dump(PAGES[:2] + [slow] + PAGES[5:]))
  stats = _run([dump], tmp_path / "out" / "wiki.txt", pool, page_time_limit=0.1)
  assert stats["skipped"] == {"page_timeout": 1}
  assert _read(tmp_path / "out" / "wiki.txt") == DUMP_TEXT


@pytest.mark.parametrize("name, data, settings, message", [
    ("cut.xml.bz2", bz2.compress(_dump().encode())[:150], {}, "truncated"),
    ("notes.xml", "Just some notes.\nNot XML at all.\n", {},
     "line 1: not well-formed XML: syntax error"),
    ("page.html", "<html><body>Hello</body></html>\n", {"source": "wikipedia"},
     "not a MediaWiki XML dump: its root element is <html>"),
    ("latin1.xml", _dump().replace("Beta has", "B\xe9ta has").encode("latin-1"), {},
     r"line \d+: not well-formed XML: not well-formed \(invalid token\) \(is it in the "
     r"encoding its XML declaration names, UTF-8 if none\?\) \(after the page 'Alpha'\)"),
    ("latin1.txt", "Fine.\nCaf\xe9 au lait.\n".encode("latin-1"), {},
     ":2: not UTF-8 text"),
    ("utf16.txt", "Some text.\n".encode("utf-16"), {}, "not UTF-8 text: NUL bytes"),
    ("empty.xml", b"", {}, "empty: not a MediaWiki XML dump"),
    ("nopages.xml", HEADER + "</mediawiki>\n", {}, "a MediaWiki dump without a single <page>"),
    ("cut_doc", WIKIEXTRACTOR[:-7], {}, ":11: a <doc> block without its </doc>"),
])
def test_bad_input_is_one_error_naming_the_file_and_nothing_is_left(tmp_path, pool, name,
                                                                    data, settings, message):
  path = _write(tmp_path / name, data)
  good = _write(tmp_path / "good.txt", PARAGRAPHS)
  out = tmp_path / "out"
  with pytest.raises(DataError, match="^" + re.escape(path) + ".*" + message):
    # (A good file first: its shards are open when the bad one fails.)
    _run([path] if settings else [good, path], out / "corpus.txt", pool, num_output_shards=2,
         **settings)
  assert os.listdir(out) == []


@pytest.mark.slow
def test_the_command_line_one_line_errors_and_a_run(tmp_path):
  """The console script: a bad dump is one line on stderr and exit status 1; a good run
  writes its shards and stats."""
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  cut = _write(tmp_path / "cut.xml.bz2", bz2.compress(_dump().encode())[:150])
  command = [sys.executable, "-m", "data_gen.prepare_corpus", "--num_workers=1",
             f"--output_file={tmp_path / 'out' / 'corpus.txt'}"]
  bad = subprocess.run(command + [f"--input_file={cut}"], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=900, check=False)
  assert bad.returncode == 1 and "Traceback" not in bad.stderr
  assert bad.stderr.strip().splitlines()[-1].startswith(f"prepare_corpus: error: {cut}: "
                                                        "truncated")
  dump = _write(tmp_path / "tiny.xml", _dump())
  good = subprocess.run(command + [f"--input_file={dump}", "--num_output_shards=2"],
                        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
                        check=False)
  assert good.returncode == 0, good.stderr
  assert "documents 6 read, 3 written" in good.stdout
  assert sorted(os.listdir(tmp_path / "out")) == [
      "corpus.stats.json", "corpus.txt-00000-of-00002", "corpus.txt-00001-of-00002"]


@pytest.mark.parametrize("settings, message", [
    ({"source": "web"}, "--source=web: must be one of auto, wikipedia"),
    ({"sentence_splitter": "regex"}, "--sentence_splitter=regex: must be one of"),
    ({"num_output_shards": 0}, "--num_output_shards=0: must be >= 1"),
    ({"holdout_fraction": 1.0}, r"--holdout_fraction=1.0: must be in \[0, 1\)"),
    ({"num_holdout_shards": 0}, "--num_holdout_shards=0: must be >= 1"),
    ({"min_sentences": 0}, "--min_sentences=0: must be >= 1"),
    ({"min_words": -1}, "--min_words=-1: must be >= 0"),
    ({"page_time_limit": -1}, "--page_time_limit=-1: must be >= 0"),
])
def test_a_bad_setting_names_its_flag(settings, message):
  with pytest.raises(ValueError, match="^" + message):
    CorpusConfig(**settings)


def test_the_settings_round_trip_through_json_and_refuse_an_unknown_key():
  config = CorpusConfig(**SHARDED, min_words=3)
  assert CorpusConfig.from_json(config.to_json()) == config
  with pytest.raises(ValueError, match=r"^unknown key 'min_word' \(did you mean 'min_words'\?\)"):
    CorpusConfig.from_dict({"min_word": 3})
