"""prepare_corpus's work on one unit, in a worker process: raw documents -> their sentences,
filtered and placed.

Each raw document becomes paragraphs (`wikitext`, `gutenberg`, or as written), each paragraph
sentences (the `sentences` registry's splitter, built once a process), and the document its
text in create_pretraining_data's format: one sentence a line, then a blank line. A document
goes to a training or a held-out shard by a hash of its identity (the source kind and the page
id, file name or index: never its position in the job), so the same input gives the same shards
whatever the workers, the units, or the runner.

A Wikipedia page's parse runs under a limit of CPU time (`page_time_limit`): a pathological
page is interrupted, skipped and counted. CPU time, not wall time, so that which pages are
skipped does not depend on the machine's load. On a process's main thread, where the local
job's workers run units, a timer's signal (SIGPROF) interrupts it, mwparserfromhell's C
tokenizer included (it checks for signals); on another thread (a Beam runner's worker, see
`beam`), a watchdog of the thread's CPU clock, at the parse's next Python step.

No TensorFlow: this runs in the workers.
"""
import collections
from collections.abc import Callable
import ctypes
import dataclasses
import hashlib
import os
import re
import signal
import threading
import time

from data_gen.corpus import gutenberg
from data_gen.corpus import sentences as sentences_lib
from data_gen.corpus import sources
from data_gen.corpus import wikitext
from data_gen.corpus.config import CorpusConfig

TRAIN, HOLDOUT = 0, 1
# A WikiExtractor heading line: a section title, to which WikiExtractor adds a full stop: a
# few words, no other sentence punctuation. (A one-line paragraph that short goes with them.)
EXTRACTOR_HEADING = re.compile(r"^[^.!?;:]{1,60}\.?$")
EXTRACTOR_HEADING_WORDS = 4
# WikiExtractor's stand-ins for what it dropped (formula_7, codice_2): the line is not prose.
EXTRACTOR_PLACEHOLDER = re.compile(r"\b(?:formula|codice)_\d+\b")

_splitters: dict[tuple[str, str], sentences_lib.Splitter] = {}  # by (name, language)
# Each dump's test of its links (`wikitext.hidden_link_test`), made once a process.
_link_tests: dict[frozenset[str], Callable[[str], bool]] = {}


@dataclasses.dataclass
class PlacedDocument:
  """A document's output: `text` (UTF-8: its sentences, one a line, then a blank line) for
  shard `shard` of split TRAIN or HOLDOUT; `digest` its text's hash (for --dedup)."""
  split: int
  shard: int
  text: bytes
  digest: bytes
  sentences: int
  words: int


@dataclasses.dataclass
class UnitResult:
  """A unit's documents in input order, and what it counted: documents_in, skipped_<reason>
  (namespace, redirect, disambiguation, page_timeout, empty, too_few_sentences,
  too_few_words), books_without_markers; source_bytes; warnings to print (file names)."""
  documents: list[PlacedDocument]
  counts: collections.Counter
  source_bytes: int
  warnings: list[str]


class PageTimeout(Exception):
  """A page took more CPU time than the limit to parse."""


class _TimeLimit:
  """Raises PageTimeout in the block after `seconds` of CPU time (0: none).

  On the main thread (the local job's workers run units there), the timer of the process's
  CPU time signals (SIGPROF), which interrupts the block wherever it is, in C code that checks
  for signals too. A signal reaches the main thread only, and a Beam runner runs bundles on
  threads of workers that may start no process of their own (Dask's are daemonic); there a
  watchdog thread reads the block's thread's CPU clock and raises PageTimeout in that thread
  (`PyThreadState_SetAsyncExc`), which lands at its next Python step: a long call into C (the
  tokenizer's) runs to its end first, then the page is skipped and counted alike.
  """

  def __init__(self, seconds: float):
    self.seconds = seconds

  def __enter__(self):
    if self.seconds <= 0:
      self.mode = None
    elif threading.current_thread() is threading.main_thread():
      self.mode = "signal"
      self.previous = signal.signal(signal.SIGPROF, self._expire)
      signal.setitimer(signal.ITIMER_PROF, self.seconds)
    else:
      self.mode = "watchdog"
      self.thread, self.fired = threading.get_ident(), False
      self.done, self.lock = threading.Event(), threading.Lock()
      clock = time.pthread_getcpuclockid(self.thread)
      deadline = time.clock_gettime(clock) + self.seconds
      threading.Thread(target=self._watch, args=(clock, deadline), daemon=True,
                       name="page-time-limit").start()

  def __exit__(self, exc_type, *unused):
    if self.mode == "signal":
      signal.setitimer(signal.ITIMER_PROF, 0)
      signal.signal(signal.SIGPROF, self.previous)
    elif self.mode == "watchdog":
      with self.lock:
        self.done.set()
        if self.fired and exc_type is None:  # not landed yet: the block is over, withdrawn
          _async_raise(self.thread, None)

  def _watch(self, clock: int, deadline: float) -> None:
    # A thread's CPU time grows no faster than wall time: wait what is left, then look again.
    while (left := deadline - time.clock_gettime(clock)) > 0:
      if self.done.wait(left):
        return
    with self.lock:
      if not self.done.is_set():
        _async_raise(self.thread, PageTimeout)
        self.fired = True

  @staticmethod
  def _expire(unused_signum, unused_frame):
    raise PageTimeout


def _async_raise(thread: int, exception: type[BaseException] | None) -> None:
  """Has `exception` raised in thread `thread` at its next Python step (None: withdraws one
  not raised yet)."""
  ctypes.pythonapi.PyThreadState_SetAsyncExc(
      ctypes.c_ulong(thread), ctypes.py_object(exception) if exception else None)


def placement(identity: str, config: CorpusConfig) -> tuple[int, int]:
  """(split, shard) of the document `identity` names: a hash of it alone."""
  digest = hashlib.blake2b(identity.encode("utf-8"), digest_size=16).digest()
  shard_key = int.from_bytes(digest[:8], "little")
  if int.from_bytes(digest[8:], "little") < config.holdout_fraction * 2.0**64:
    return HOLDOUT, shard_key % config.num_holdout_shards
  return TRAIN, shard_key % (config.num_output_shards or 1)


def _splitter(name: str, language: str | None) -> sentences_lib.Splitter:
  # None: a unit cleaned outside the pipeline, which resolves the language: English, as the
  # pipeline takes a source without a <siteinfo>.
  key = (name, language or "en")
  if key not in _splitters:
    _splitters[key] = sentences_lib.get_splitter(*key)
  return _splitters[key]


def _link_test(names: frozenset[str]) -> Callable[[str], bool]:
  if names not in _link_tests:
    _link_tests[names] = wikitext.hidden_link_test(names)
  return _link_tests[names]


def _wikipedia_paragraphs(page: sources.RawPage, config: CorpusConfig,
                          counts: collections.Counter,
                          hidden_link: Callable[[str], bool]) -> list[str] | None:
  """The page's passages, or None (counted) when it is not an article or takes too long."""
  if page.ns != 0:
    counts["skipped_namespace"] += 1
    return None
  if page.redirect or wikitext.is_redirect(page.text):
    counts["skipped_redirect"] += 1
    return None
  try:
    with _TimeLimit(config.page_time_limit):
      code = wikitext.parse(page.text, hidden_link)
      if wikitext.is_disambiguation(code):
        counts["skipped_disambiguation"] += 1
        return None
      return wikitext.passages(code)
  except PageTimeout:
    counts["skipped_page_timeout"] += 1
    return None


def _extractor_paragraphs(lines: list[str]) -> list[str]:
  """A WikiExtractor document's paragraphs: its title line and heading lines dropped."""
  paragraphs = [line.strip() for line in lines[1:] if line.strip()]
  return [p for p in paragraphs
          if not (EXTRACTOR_HEADING.match(p) and len(p.split()) <= EXTRACTOR_HEADING_WORDS)
          and not EXTRACTOR_PLACEHOLDER.search(p)]


def _raw_documents(unit: sources.Unit, config: CorpusConfig, result: UnitResult, files):
  """(identity, paragraphs or None) for each raw document of the unit."""
  counts = result.counts
  if unit.kind == "wikipedia":
    pages = unit.items
    if unit.stream_range is not None:
      pages, result.source_bytes = sources.read_streams(unit.path, unit.stream_range,
                                                        files)
    hidden_link = _link_test(unit.hidden_names)
    for page in pages:
      yield f"wikipedia:{page.page_id}", _wikipedia_paragraphs(page, config, counts,
                                                               hidden_link)
  elif unit.kind == "wikiextractor":
    for doc_id, lines in unit.items:
      yield f"wikipedia:{doc_id}", _extractor_paragraphs(lines)
  elif unit.kind == "books":
    lines = [line for _, line in sources.text_lines(unit.path, files)]
    result.source_bytes = sum(len(line.encode("utf-8")) + 1 for line in lines)
    body, found = gutenberg.strip_licence(lines)
    if not found:
      counts["books_without_markers"] += 1
      result.warnings.append(f"{unit.path}: no Project Gutenberg START/END markers: the book "
                             "is taken whole, licence text and all")
    yield f"books:{os.path.basename(unit.path)}", gutenberg.paragraphs(body)
  else:
    for doc_index, lines in unit.items:
      yield f"paragraphs:{os.path.basename(unit.path)}:{doc_index}", lines


def process_unit(unit: sources.Unit, config: CorpusConfig,
                 files=sources.LocalFiles) -> UnitResult:
  """The unit's documents, in input order, as they go to the output (see the module doc); what
  the worker reads itself (a book, a multistream range) read through `files` (`sources`)."""
  split = _splitter(config.sentence_splitter, config.language)
  result = UnitResult(documents=[], counts=collections.Counter(),
                      source_bytes=unit.source_bytes, warnings=[])
  counts = result.counts
  for identity, paragraphs in _raw_documents(unit, config, result, files):
    counts["documents_in"] += 1
    if paragraphs is None:
      continue
    lines, words = [], 0  # each sentence's words split once, for its line and the count
    for sentence in (s.split() for p in paragraphs for s in split(p)):
      if sentence:
        lines.append(" ".join(sentence))
        words += len(sentence)
    if not lines:
      counts["skipped_empty"] += 1
    elif len(lines) < config.min_sentences:
      counts["skipped_too_few_sentences"] += 1
    elif words < config.min_words:
      counts["skipped_too_few_words"] += 1
    else:
      text = ("\n".join(lines) + "\n\n").encode("utf-8")
      result.documents.append(PlacedDocument(
          *placement(identity, config), text=text,
          digest=hashlib.blake2b(text, digest_size=16).digest(), sentences=len(lines),
          words=words))
  return result
