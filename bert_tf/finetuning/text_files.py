"""The one reader of the tasks' text files (and extract_features'): every task treats a missing
file, a UTF-8 byte order mark and invalid UTF-8 the same way.

  read_text(path)                   the file's text, a UTF-8 BOM dropped (Windows editors write
                                    one; MRPC's and SST-2's files start with one); DataError
                                    naming the file when it is missing, and the file and line
                                    when it is not UTF-8
  read_text(path, invalid="drop")   invalid UTF-8 dropped instead, as google-research/bert's
                                    extract_features decodes (`errors="ignore"`), with one
                                    warning for the file naming its first such line and counts
  read_rows(path, delimiter)        a TSV/CSV file's non-blank rows with their line numbers

Any tf.io.gfile path (gs:// too). No TensorFlow for a local path (`bert_tf.common.files`): the
GLUE peer benchmark (transformers on torch) reads its data through `glue` and this module, and
squad_evaluate through SQuAD's scoring.
"""
import codecs
import csv
import io
import re

from absl import logging

from bert_tf.common import files
from bert_tf.common.errors import DataError

# What the "surrogateescape" decoding makes of each byte of an invalid UTF-8 sequence.
_ESCAPED = re.compile("[\udc80-\udcff]")


def read_text(path: str, invalid: str = "error") -> str:
  """The text of the file at `path`, a UTF-8 BOM dropped. Invalid UTF-8: a DataError naming
  the file and line (`invalid="error"`), or dropped with one warning (`invalid="drop"`)."""
  if invalid not in ("error", "drop"):
    raise ValueError(f"invalid={invalid!r}: must be 'error' or 'drop'")
  gfile = files.gfile(path)
  try:
    if not gfile.exists(path) or gfile.isdir(path):
      raise DataError(f"{path}: file not found")
    with gfile.GFile(path, "rb") as f:
      data = f.read()
  except OSError as e:  # A local file: permission denied, ...
    raise DataError(f"{path}: {e.strerror}") from None
  except Exception as e:  # A path of TensorFlow's, which is then loaded: a bucket out of reach...
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if isinstance(e, tf.errors.OpError):
      raise DataError(f"{path}: {e.message}") from None
    raise
  bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
  try:
    return data[bom:].decode("utf-8")
  except UnicodeDecodeError as e:
    if invalid == "error":
      line = data.count(b"\n", 0, bom + e.start) + 1
      raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason} at byte "
                      f"{bom + e.start})") from None
  # Each invalid byte escaped as one code point: dropping those is errors="ignore"'s text.
  text = data[bom:].decode("utf-8", "surrogateescape")
  bad_lines = [n for n, line in enumerate(text.split("\n"), start=1) if _ESCAPED.search(line)]
  logging.warning("%s:%d: not valid UTF-8: %d invalid byte(s) on %d line(s) dropped (the "
                  "first here), as google-research/bert decodes its input", path, bad_lines[0],
                  len(_ESCAPED.findall(text)), len(bad_lines))
  return _ESCAPED.sub("", text)


def read_rows(path: str, delimiter: str = "\t"):
  """Yields (line_number, row) for each non-blank line of a TSV/CSV file (`read_text`'s text).

  TSV is read without quoting (the original's `quotechar=None`: MRPC and QQP hold unbalanced
  quotes); CSV with standard quoting. DataError naming the file for a malformed CSV.
  """
  quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
  text = read_text(path)
  try:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
    for row in reader:
      if any(cell.strip() for cell in row):
        yield reader.line_num, row
  except csv.Error as e:
    raise DataError(f"{path}: {e}") from e
