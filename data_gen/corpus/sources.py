"""prepare_corpus's readers: input files -> units of work, in input order, streamed.

A unit is what one worker does at a time: a batch of raw documents read here (about
UNIT_CHARS characters of them), or, for work a worker reads itself, a whole book or a byte range
of a multistream Wikipedia dump. Its `order` (file index, unit index in the file) is the order
the job writes its documents in, whatever process ran it.

The sources (`detect` tells them apart by their first bytes, then by name):
  wikipedia      a MediaWiki XML dump (.xml, .xml.bz2, .xml.gz; UTF-8 or UTF-16 with its BOM),
                 read as a stream (iterparse, each page cleared once read). Beside
                 `NAME-multistream.xml.bz2`, an index `NAME-multistream-index.txt.bz2` (lines
                 `offset:page_id:title`) splits the dump into its bz2 streams (100 pages each),
                 which the workers read and decompress themselves: no single process reads the
                 whole dump. The pages and their order are the same either way.
  wikiextractor  WikiExtractor's output: `<doc id=... title=...>` blocks.
  books          one book a file (Project Gutenberg text; see `gutenberg`).
  paragraphs     one paragraph a line, a blank line between documents.
A dump's <siteinfo> (`read_siteinfo`) gives its language and its namespaces' names: the names its
links to files and categories go by (`namespaces`), which each of its units carries.
Text files must be UTF-8 (a BOM is dropped). .bz2 and .gz files are decompressed as read.

Every read of an input goes through a `files` argument (open for reading, size, exists): this
machine's disk by default (`LocalFiles`); a Beam job passes Beam's file systems
(`beam_files.InputFiles`: gs://, s3://, ...), which every worker of a distributed runner reaches.
"""
import bz2
import contextlib
import dataclasses
import gzip
import io
import os
import re
from typing import BinaryIO, Iterator
import xml.etree.ElementTree as ET
import zlib

from bert_tf.common.errors import DataError
from data_gen.corpus import gutenberg
from data_gen.corpus import namespaces

# ~1 MB of raw text a unit: big enough to amortize handing it to a worker, small enough that
# a few per worker in flight cost little memory.
UNIT_CHARS = 1 << 20
SNIFF_BYTES = 1 << 16
MULTISTREAM_SUFFIX = "-multistream.xml.bz2"
INDEX_SUFFIX = "-multistream-index.txt.bz2"
DOC_START = re.compile(r'^<doc\s+id="([^"]*)"[^>]*>\s*$')
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error)
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


@dataclasses.dataclass
class RawPage:
  """A page of a dump as it is there: its namespace, whether it redirects, its wikitext."""
  page_id: str
  title: str
  ns: int
  redirect: bool
  text: str


@dataclasses.dataclass
class Unit:
  """One worker's piece of the job.

  order:        (file index, unit index in the file): the order of its documents in the output.
  kind:         the source kind (wikipedia, wikiextractor, books, paragraphs).
  items:        the raw documents read here: RawPage (wikipedia), (doc id, lines)
                (wikiextractor), (index of the document in its file, lines) (paragraphs); None
                when the worker reads them itself (a book, a multistream range).
  stream_range: [start, end) bytes of a multistream dump: the bz2 streams to read.
  source_bytes: the (decompressed) bytes of the input the items came from.
  hidden_names: the names a Wikipedia page's links to files, media and categories go by
                (`namespaces.hidden_names`): such a link shows no text.
  """
  order: tuple[int, int]
  path: str
  kind: str
  items: list | None = None
  stream_range: tuple[int, int] | None = None
  source_bytes: int = 0
  hidden_names: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Siteinfo:
  """What a dump says of its wiki: `language` (<mediawiki xml:lang>), `dbname` (dewiki), and
  the names of the namespaces whose links show no text (`namespaces.HIDDEN_NAMESPACES`'
  keys: the local name, and the canonical one where the dump gives it)."""
  language: str | None = None
  dbname: str | None = None
  hidden_namespace_names: tuple[str, ...] = ()


class _Counting(io.RawIOBase):
  """A read-only stream that counts the bytes read through it."""

  def __init__(self, stream: BinaryIO):
    super().__init__()
    self.stream, self.count = stream, 0

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    data = self.stream.read(len(buffer))
    buffer[:len(data)] = data
    self.count += len(data)
    return len(data)


class LocalFiles:
  """The reads of the inputs, on this machine's disk: a file's bytes as they are there
  (seekable), its size, whether it is there."""

  @staticmethod
  def open(path: str) -> BinaryIO:
    return open(path, "rb")  # pylint: disable=consider-using-with  (the caller closes it)

  size = staticmethod(os.path.getsize)
  exists = staticmethod(os.path.exists)


def _open_raw(path: str, files) -> BinaryIO:
  """`path`'s bytes as they are (`files.open`); DataError naming it when it is not there."""
  try:
    return files.open(path)
  except Exception:  # each file system has its own error for a missing file
    if files.exists(path):
      raise
    raise DataError(f"{path}: no such file") from None


@contextlib.contextmanager
def _open(path: str, files) -> Iterator[BinaryIO]:
  """`path` for reading, decompressed when it is bz2 or gzip (by its first bytes)."""
  with _open_raw(path, files) as raw:
    magic = raw.read(3)
    raw.seek(0)
    if magic == b"BZh":
      with bz2.BZ2File(raw, "rb") as f:
        yield f
    elif magic[:2] == b"\x1f\x8b":
      with gzip.GzipFile(fileobj=raw, mode="rb") as f:
        yield f
    else:
      yield raw


def _decompression_error(path: str, error: Exception, where: str = "") -> DataError:
  if isinstance(error, EOFError):
    return DataError(f"{path}: {where}truncated: the compressed data ends before its end "
                     f"marker ({error})")
  return DataError(f"{path}: {where}damaged or not what its name says ({error})")


def detect(path: str, files=LocalFiles) -> str:
  """The source kind of `path`, from its first bytes (decompressed), else its name."""
  try:
    with _open(path, files) as f:
      head = f.read(SNIFF_BYTES)
  except DECOMPRESSION_ERRORS:
    head = b""  # the reader names the damage
  if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
    text = head.decode("utf-16", errors="ignore")
  else:
    text = head.decode("utf-8", errors="ignore")
  text = text.lstrip("\ufeff \t\r\n")
  if text.startswith(("<mediawiki", "<?xml")):
    return "wikipedia"
  if DOC_START.match(text.split("\n", 1)[0]):
    return "wikiextractor"
  if any(gutenberg.START.match(line) for line in text.splitlines()):
    return "books"
  if ".xml" in os.path.basename(path):
    return "wikipedia"
  return "paragraphs"


def multistream_index(path: str, files=LocalFiles) -> str | None:
  """The index beside a multistream dump, if there is one."""
  if not path.endswith(MULTISTREAM_SUFFIX):
    return None
  index = path[:-len(MULTISTREAM_SUFFIX)] + INDEX_SUFFIX
  return index if files.exists(index) else None


def without_indexes(paths: list[str], files=LocalFiles) -> list[str]:
  """`paths` less the multistream indexes of dumps among them (a glob 'dumps/*' takes both)."""
  indexes = {multistream_index(p, files) for p in paths}
  return [p for p in paths if p not in indexes]


# ------------------------------------------------------------------ Wikipedia XML

def _local(tag: str) -> str:
  return tag.rsplit("}", 1)[-1]


def _page(element: ET.Element) -> RawPage:
  ns = element.findtext("{*}ns")
  return RawPage(page_id=element.findtext("{*}id") or "",
                 title=element.findtext("{*}title") or "",
                 ns=int(ns) if ns and ns.strip().lstrip("-").isdigit() else 0,
                 redirect=element.find("{*}redirect") is not None,
                 text=element.findtext("{*}revision/{*}text") or "")


def _xml_pages(stream: BinaryIO, path: str, where: str = "") -> Iterator[RawPage]:
  """The pages of a MediaWiki XML stream, each cleared from memory once yielded.

  Raises DataError naming `path` (`where` in it: a multistream range) and the line: not XML,
  not a MediaWiki dump, an encoding the XML does not declare, compressed data cut short.
  """
  root, last_title = None, None
  try:
    for event, element in ET.iterparse(stream, events=("start", "end")):
      if root is None:
        root = element
        if _local(root.tag) != "mediawiki":
          raise DataError(f"{path}: {where}not a MediaWiki XML dump: its root element is "
                          f"<{_local(root.tag)}>, not <mediawiki>")
      elif event == "end" and _local(element.tag) == "page":
        page = _page(element)
        last_title = page.title
        root.clear()
        yield page
  except ET.ParseError as e:
    after = f" (after the page {last_title!r})" if last_title is not None else ""
    if root is None and e.code == 3:  # XML_ERROR_NO_ELEMENTS: nothing at all
      raise DataError(f"{path}: {where}empty: not a MediaWiki XML dump") from None
    hint = (" (is it in the encoding its XML declaration names, UTF-8 if none?)"
            if "invalid token" in str(e) else "")
    raise DataError(f"{path}: {where}line {e.position[0]}: not well-formed XML: "
                    f"{str(e).split(':')[0]}{hint}{after}") from None
  except DECOMPRESSION_ERRORS as e:
    raise _decompression_error(path, e, where) from None


def read_siteinfo(path: str, files=LocalFiles) -> Siteinfo:
  """The <siteinfo> of the dump at `path` (read up to its end, or the first <page>); an empty
  one where it has none or the head is damaged (the reader names the damage)."""
  language, dbname, names = None, None, []
  try:
    with _open(path, files) as f:
      for event, element in ET.iterparse(f, events=("start", "end")):
        tag = _local(element.tag)
        if event == "start" and tag == "mediawiki":
          language = element.get(XML_LANG)
        elif event == "start" and tag == "page" or event == "end" and tag == "siteinfo":
          break
        elif event == "end" and tag == "dbname":
          dbname = (element.text or "").strip() or None
        elif event == "end" and tag == "namespace":
          key = element.get("key", "")
          if key.lstrip("-").isdigit() and int(key) in namespaces.HIDDEN_NAMESPACES:
            names += [name for name in (element.text, element.get("canonical")) if name]
  except (ET.ParseError, *DECOMPRESSION_ERRORS):
    pass
  return Siteinfo(language, dbname, tuple(names))


def _plan_xml(file_index: int, path: str, unit_chars: int, files,
              hidden_names: frozenset[str]) -> Iterator[Unit]:
  with _open(path, files) as raw:
    stream = _Counting(raw)
    batch, chars, index, counted = [], 0, 0, 0
    for page in _xml_pages(stream, path):
      batch.append(page)
      chars += len(page.text)
      if chars >= unit_chars:
        yield Unit((file_index, index), path, "wikipedia", batch,
                   source_bytes=stream.count - counted, hidden_names=hidden_names)
        batch, chars, index, counted = [], 0, index + 1, stream.count
    if batch:
      yield Unit((file_index, index), path, "wikipedia", batch,
                 source_bytes=stream.count - counted, hidden_names=hidden_names)
    elif index == 0:
      raise DataError(f"{path}: a MediaWiki dump without a single <page>")


def _stream_offsets(index: str, files) -> list[int]:
  """The start of every page stream a multistream index lists, in order."""
  offsets = set()
  try:
    with _open_raw(index, files) as raw, bz2.open(raw, "rt", encoding="utf-8") as f:
      for line_number, line in enumerate(f, start=1):
        offset = line.split(":", 1)[0]
        if not offset.isdigit():
          raise DataError(f"{index}:{line_number}: not a multistream index line "
                          "'offset:page_id:title'")
        offsets.add(int(offset))
  except (*DECOMPRESSION_ERRORS, UnicodeDecodeError) as e:
    raise _decompression_error(index, e) from None
  return sorted(offsets)


def _plan_multistream(file_index: int, path: str, index: str, unit_chars: int,
                      files, hidden_names: frozenset[str]) -> Iterator[Unit]:
  offsets = _stream_offsets(index, files)
  if not offsets:
    raise DataError(f"{index}: an empty multistream index")
  size = files.size(path)
  if offsets[-1] >= size:
    raise DataError(f"{index}: lists a stream at byte {offsets[-1]}, past the end of {path} "
                    f"({size} bytes): the index of another dump?")
  # Compressed bytes a unit: wikitext compresses about 4:1.
  unit_bytes = max(unit_chars // 4, 1)
  ends = offsets[1:] + [size]
  start, unit = offsets[0], 0
  for end in ends:
    if end - start >= unit_bytes or end == size:
      yield Unit((file_index, unit), path, "wikipedia", stream_range=(start, end),
                 hidden_names=hidden_names)
      start, unit = end, unit + 1


def read_streams(path: str, stream_range: tuple[int, int],
                 files=LocalFiles) -> tuple[list[RawPage], int]:
  """The pages in the bz2 streams at bytes [start, end) of a multistream dump, and their
  decompressed size."""
  start, end = stream_range
  where = f"bytes {start}-{end}: "
  with _open_raw(path, files) as f:
    f.seek(start)
    data = f.read(end - start)
  try:
    xml = bz2.decompress(data)
  except DECOMPRESSION_ERRORS as e:
    raise _decompression_error(path, e, where) from None
  # The streams hold <page> elements; the dump's last one also its closing tag.
  body = b"<mediawiki>" + xml.replace(b"</mediawiki>", b"") + b"</mediawiki>"
  return list(_xml_pages(io.BytesIO(body), path, where)), len(xml)


# ------------------------------------------------------------------ text files

def text_lines(path: str, files=LocalFiles) -> Iterator[tuple[int, str]]:
  """(line number, line without its newline) of a UTF-8 text file; DataError naming the file
  and line where it is not UTF-8, or its compressed data are damaged."""
  try:
    with _open(path, files) as f:
      for line_number, raw in enumerate(f, start=1):
        if line_number == 1:
          raw = raw.removeprefix(b"\xef\xbb\xbf")
          if b"\0" in raw:
            raise DataError(f"{path}: not UTF-8 text: NUL bytes on its first line (UTF-16? "
                            "convert it: iconv -f UTF-16 -t UTF-8)")
        try:
          line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
          raise DataError(f"{path}:{line_number}: not UTF-8 text ({e.reason} at byte {e.start} "
                          "of the line); convert it: iconv -f ENCODING -t UTF-8") from None
        yield line_number, line.rstrip("\r\n")
  except DECOMPRESSION_ERRORS as e:
    if isinstance(e, FileNotFoundError | PermissionError | IsADirectoryError):
      raise
    raise _decompression_error(path, e) from None


def _batches(file_index: int, path: str, kind: str, documents: Iterator[tuple[object, list]],
             unit_chars: int) -> Iterator[Unit]:
  """Units of about unit_chars characters of `documents`, (key, lines) each."""
  batch, chars, index = [], 0, 0
  for key, lines in documents:
    batch.append((key, lines))
    chars += sum(map(len, lines))
    if chars >= unit_chars:
      yield Unit((file_index, index), path, kind, batch, source_bytes=chars)
      batch, chars, index = [], 0, index + 1
  if batch:
    yield Unit((file_index, index), path, kind, batch, source_bytes=chars)


def _wikiextractor_documents(path: str, files) -> Iterator[tuple[str, list[str]]]:
  doc_id, lines, opened_at = None, [], 0
  for line_number, line in text_lines(path, files):
    if doc_id is None:
      match = DOC_START.match(line)
      if match:
        doc_id, lines, opened_at = match.group(1), [], line_number
      elif line.strip():
        raise DataError(f"{path}:{line_number}: text outside a <doc ...> block: not "
                        "WikiExtractor output (--source=paragraphs for plain text)")
    elif line.strip() == "</doc>":
      yield doc_id, lines
      doc_id = None
    else:
      lines.append(line)
  if doc_id is not None:
    raise DataError(f"{path}:{opened_at}: a <doc> block without its </doc>: the file is cut "
                    "short")


def _paragraph_documents(path: str, files) -> Iterator[tuple[int, list[str]]]:
  lines, count = [], 0
  for _, line in text_lines(path, files):
    if line.strip():
      lines.append(line.strip())
    elif lines:
      yield count, lines
      lines, count = [], count + 1
  if lines:
    yield count, lines


def plan_units(file_index: int, path: str, kind: str, unit_chars: int = UNIT_CHARS,
               files=LocalFiles,
               hidden_names: frozenset[str] = namespaces.ENGLISH) -> Iterator[Unit]:
  """The units of work of one input file of source `kind` (not "auto": see `detect`), read
  through `files` (see the module doc); a dump's carry `hidden_names`."""
  if kind == "wikipedia":
    index = multistream_index(path, files)
    if index:
      return _plan_multistream(file_index, path, index, unit_chars, files, hidden_names)
    return _plan_xml(file_index, path, unit_chars, files, hidden_names)
  if kind == "books":
    return iter([Unit((file_index, 0), path, kind)])
  if kind == "wikiextractor":
    return _batches(file_index, path, kind, _wikiextractor_documents(path, files), unit_chars)
  return _batches(file_index, path, kind, _paragraph_documents(path, files), unit_chars)
