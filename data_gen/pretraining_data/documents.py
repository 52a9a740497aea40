"""The corpus, streamed: text files -> documents -> chunks of documents -> wordpiece ids.

Input format (google-research/bert's): one sentence per line, a blank line between documents.
The end of a file also ends a document. Lines are stripped; whitespace-only lines are blank.
A file whose name ends in .gz is decompressed as it is read. A file that is not UTF-8 text is
refused (`_check_text`).

Memory stays bounded whatever the corpus size: documents are grouped into chunks of about
`chunk_chars` characters, and a document longer than that (a corpus without blank lines, say)
is cut into pieces of that size, each then a document of its own.

The Beam pipeline (`beam`) splits the same work in two: `document_extents`
scans a file for its documents' byte extents, `extent_documents` reads a chunk's back.
"""
import dataclasses
import gzip
import io
from typing import BinaryIO, Callable, Iterable, Iterator
import unicodedata
import zlib

import numpy as np
import tensorflow as tf

from data_gen.pretraining_data.instances import TokenizedChunk

# ~1 MB of text: ~250k wordpieces, ~2000 sequences of 128 per pass; a few hundred documents of
# the usual size to draw "random next" sentences from.
CHUNK_CHARS = 1 << 20
# Sentences per call of the tokenizer: big enough to amortize the call, small enough that
# TensorFlow's intermediate tensors stay a few MB.
TOKENIZE_BATCH = 2048
# Invalid UTF-8 lines whose file and line number are kept for the report.
MAX_REPORTED_LINES = 5
# A file is refused as not text when its first SNIFF_BYTES (decompressed) hold a NUL byte
# (never in UTF-8 text; in UTF-16 text and most binary formats) or more than
# MAX_INVALID_SHARE of them are not valid UTF-8 (random or compressed data: about 40%; a text
# corpus with a few broken lines: well under 1%). Only the head is judged: reading stays one
# pass, and a bad file fails before it has cost anything.
SNIFF_BYTES = 1 << 16
MAX_INVALID_SHARE = 0.1
GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass
class ReadStats:
  """What reading the corpus met: files, lines, their bytes of text (decompressed), and the
  lines that were not valid UTF-8 (decoded with U+FFFD replacements, never dropped; the first
  few as "file:line")."""
  files: int = 0
  lines: int = 0
  text_bytes: int = 0
  invalid_utf8_lines: int = 0
  invalid_utf8_examples: list[str] = dataclasses.field(default_factory=list)


def _check_text(path: str, head: bytes) -> None:
  """Raises ValueError naming `path` when `head`, its first bytes, is not UTF-8 text (see
  SNIFF_BYTES)."""
  if head.startswith(GZIP_MAGIC):
    raise ValueError(f"{path}: gzip-compressed, not text; name it *.gz to have it decompressed")
  if b"\0" in head:
    problem = "NUL bytes (binary data, or UTF-16 text)"
  else:
    invalid = len(head) - len(head.decode("utf-8", errors="ignore").encode("utf-8"))
    if invalid <= MAX_INVALID_SHARE * len(head):
      return
    problem = f"{invalid / len(head):.0%} of the bytes invalid UTF-8"
  raise ValueError(f"{path}: not UTF-8 text: {problem} in its first {SNIFF_BYTES // 1024} KiB "
                   f"(a corpus file may have no NUL byte and at most {MAX_INVALID_SHARE:.0%} "
                   "invalid UTF-8 there)")


def _lines(path: str) -> Iterator[bytes]:
  """The lines of `path` (any path tf.io.gfile reads), gunzipped if its name ends in .gz,
  once `_check_text` has passed its head."""
  with tf.io.gfile.GFile(path, "rb") as f:
    stream = gzip.GzipFile(fileobj=f) if path.endswith(".gz") else f
    try:
      head = stream.read(SNIFF_BYTES)
      _check_text(path, head)
      if not head.endswith(b"\n"):
        head += stream.readline()  # The rest of the head's last line.
      yield from io.BytesIO(head)
      yield from stream
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
      raise ValueError(f"{path}: not a valid gzip file ({e})") from e


def _documents(lines: Iterable[bytes], path: str, stats: ReadStats,
               max_document_chars: int) -> Iterator[tuple[list[str], int, int]]:
  """The documents of one file's `lines`, each with its extent: (lines, start, end), the
  bytes [start, end) of the file's (decompressed) text from its first non-blank line to the
  end of its last. Re-reading an extent alone gives that document back."""
  document, chars, start, offset = [], 0, 0, 0
  for line_number, raw in enumerate(lines, start=1):
    line_start, offset = offset, offset + len(raw)
    stats.lines += 1
    stats.text_bytes += len(raw)
    try:
      line = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
      line = raw.decode("utf-8", errors="replace").strip()
      stats.invalid_utf8_lines += 1
      if len(stats.invalid_utf8_examples) < MAX_REPORTED_LINES:
        stats.invalid_utf8_examples.append(f"{path}:{line_number}")
    if line:
      if not document:
        start = line_start
      document.append(line)
      chars += len(line)
    if document and (not line or chars >= max_document_chars):
      yield document, start, offset if line else line_start
      document, chars = [], 0
  if document:
    yield document, start, offset


def read_documents(files: list[str], stats: ReadStats,
                   max_document_chars: int = CHUNK_CHARS) -> Iterator[list[str]]:
  """Yields each document of `files` in order, as its non-empty stripped lines.

  Updates `stats` as it goes. Any path tf.io.gfile reads works (local, gs://, ...).

  Raises:
    ValueError: a file is not text (`_check_text`) or not valid gzip.
  """
  for path in files:
    stats.files += 1
    for document, _, _ in _documents(_lines(path), path, stats, max_document_chars):
      yield document


def count_sentences(files: list[str], chunk_chars: int = CHUNK_CHARS) -> tuple[int, int]:
  """(sentences, chunks) of `files`: their non-blank lines, a language's size, whose shares the
  smoothed sampling weighs, and the chunks `chunk_documents` cuts them into, whose order
  interleaves the languages (see `pipeline`)."""
  sentences = 0

  def sizes():
    nonlocal sentences
    for document in read_documents(files, ReadStats(), chunk_chars):
      sentences += len(document)
      yield _characters(document)

  chunks = sum(1 for _ in chunk_documents(sizes(), chunk_chars, size=lambda chars: chars))
  return sentences, chunks


def document_extents(path: str, stats: ReadStats, max_document_chars: int = CHUNK_CHARS,
                     copy: BinaryIO | None = None) -> Iterator[tuple[int, int, int]]:
  """(start, end, characters) of each document of `path`, as `read_documents` cuts them; with
  `copy`, the file's (decompressed) text is written to it as it is read, so that the extents
  can be read back from the copy (a .gz file cannot seek)."""
  stats.files += 1
  lines = _lines(path) if copy is None else _written(_lines(path), copy)
  for document, start, end in _documents(lines, path, stats, max_document_chars):
    yield start, end, _characters(document)


def _written(lines: Iterable[bytes], copy: BinaryIO) -> Iterator[bytes]:
  for raw in lines:
    copy.write(raw)
    yield raw


def extent_documents(path: str, start: int, end: int,
                     max_document_chars: int = CHUNK_CHARS) -> Iterator[list[str]]:
  """The documents within the bytes [start, end) of the plain text file `path`, an extent
  (or consecutive extents) of `document_extents`: the same documents `read_documents` gives."""
  with tf.io.gfile.GFile(path, "rb") as f:
    f.seek(start)
    text = f.read(end - start)
  for document, _, _ in _documents(io.BytesIO(text), path, ReadStats(), max_document_chars):
    yield document


def _characters(document: list[str]) -> int:
  return sum(len(line) for line in document)


def chunk_documents(documents: Iterable, chunk_chars: int = CHUNK_CHARS,
                    size: Callable[[object], int] = _characters) -> Iterator[list]:
  """Groups consecutive documents into chunks of at least `chunk_chars` characters.

  The last chunk is at least half that: a smaller tail joins the chunk before it, so that no
  chunk is too small a window to draw random next sentences from. `size`: a document's
  characters (its lines' by default; the Beam pipeline groups `document_extents` instead).
  """
  pending, current, chars = None, [], 0
  for document in documents:
    current.append(document)
    chars += size(document)
    if chars >= chunk_chars:
      if pending is not None:
        yield pending
      pending, current, chars = current, [], 0
  if pending is not None and chars < chunk_chars // 2:
    yield pending + current
    return
  if pending is not None:
    yield pending
  if current:
    yield current


def tokenize_chunk(tokenizer, documents: list[list[str]]) -> TokenizedChunk:
  """Tokenizes a chunk, TOKENIZE_BATCH sentences at a time (`tokenizer.tokenize_ids`, a
  `FullTokenizer`).

  Sentences with no wordpieces (only control characters, say) are dropped, then documents
  left with no sentence, as in the original.

  Text is tokenized as it is, not normalized (the original's tokenizer does not), but text
  in another Unicode form than the vocab's (NFD's decomposed accents against a cased vocab's
  NFC pieces) is [UNK] where it need not be, which the report should say: the sentences not
  in NFC are counted, and those of them with an [UNK] tokenized again in NFC, to count the
  [UNK] that NFC would spare (none to tokenize in NFC text, as most is).
  """
  sentences = [line for document in documents for line in document]
  ids = _tokenize(tokenizer, sentences)
  # isascii first: ASCII is NFC, and the check costs a fraction of is_normalized's.
  not_nfc = [i for i, line in enumerate(sentences) if len(ids[i]) and not line.isascii()
             and not unicodedata.is_normalized("NFC", line)]
  unk = tokenizer.unk_id
  with_unk = [i for i in not_nfc if (ids[i] == unk).any()]
  in_nfc = _tokenize(tokenizer, [unicodedata.normalize("NFC", sentences[i]) for i in with_unk])
  spared = sum(max(int((ids[i] == unk).sum() - (nfc == unk).sum()), 0)
               for i, nfc in zip(with_unk, in_nfc))
  lengths = np.fromiter((len(x) for x in ids), np.int64, count=len(ids))
  kept = lengths > 0
  first_lines = np.cumsum([0] + [len(d) for d in documents[:-1]])
  per_document = np.add.reduceat(kept.astype(np.int64), first_lines)
  per_document = per_document[per_document > 0]
  return TokenizedChunk(
      token_ids=np.concatenate(ids).astype(np.int32),
      sentence_starts=np.concatenate([[0], np.cumsum(lengths[kept])]),
      document_starts=np.concatenate([[0], np.cumsum(per_document)]),
      sentences_not_nfc=len(not_nfc), unk_tokens_not_nfc=spared)


def _tokenize(tokenizer, sentences: list[str]) -> list[np.ndarray]:
  """`tokenizer.tokenize_ids` of `sentences`, TOKENIZE_BATCH at a time."""
  return [piece_ids for start in range(0, len(sentences), TOKENIZE_BATCH)
          for piece_ids in tokenizer.tokenize_ids(sentences[start:start + TOKENIZE_BATCH])]
