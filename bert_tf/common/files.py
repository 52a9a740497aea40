"""Files on any of tf.io.gfile's file systems (gs://, ram://) or local: a file written whole or
not at all, under a temporary name beside it renamed to its own name when complete, so a reader
(or a rerun) never sees half of it; the files an --input_file's globs name.

A local path goes through the standard library, and TensorFlow (~5 CPU s to import) loads only
for a path of another file system: prepare_corpus, which writes local files, never loads it.
"""
import contextlib
import glob
import json
import os
import shutil
from typing import Iterator


class _LocalFiles:
  """The calls of tf.io.gfile used here, for a local path, by the standard library."""
  exists = staticmethod(os.path.exists)
  isdir = staticmethod(os.path.isdir)
  remove = staticmethod(os.remove)
  rmtree = staticmethod(shutil.rmtree)

  @staticmethod
  def makedirs(path: str) -> None:
    os.makedirs(path, exist_ok=True)

  @staticmethod
  def rename(src: str, dst: str, overwrite: bool) -> None:
    del overwrite  # os.replace replaces dst: what the one call here asks for
    os.replace(src, dst)

  @staticmethod
  def GFile(path: str, mode: str):  # pylint: disable=invalid-name  (tf.io.gfile's name)
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))

  @staticmethod
  def glob(pattern: str) -> list[str]:
    return glob.glob(pattern, include_hidden=True)  # tf.io.gfile.glob matches dot files too


def gfile(path: str):
  """tf.io.gfile for a path of its other file systems (scheme://...), the standard library's
  equivalents for a local one (whose errors are OSErrors, not tf.errors.OpErrors)."""
  if "://" not in path:
    return _LocalFiles
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (see bert_tf.common)
  return tf.io.gfile


def read_json(path: str):
  """The JSON value in `path`; ValueError naming the file when it is not valid JSON."""
  with gfile(path).GFile(path, "r") as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON ({e})") from None


@contextlib.contextmanager
def temporary_path(path: str | os.PathLike, tag: str | None = None) -> Iterator[str]:
  """Yields `<path>.tmp-<tag>` (the process id by default) for the block to write (a file or a
  folder); renamed to `path` (replacing a file) when the block succeeds, removed when it fails.
  Creates the folder it is in. `path` may be an os.PathLike, as tf.io.gfile takes."""
  path = os.fspath(path)
  fs = gfile(path)
  if os.path.dirname(path):
    fs.makedirs(os.path.dirname(path))
  tmp = f"{path}.tmp-{tag or os.getpid()}"
  try:
    yield tmp
  except BaseException:
    if fs.isdir(tmp):
      fs.rmtree(tmp)
    elif fs.exists(tmp):
      fs.remove(tmp)
    raise
  fs.rename(tmp, path, overwrite=True)


def write_text(path: str | os.PathLike, text: str) -> None:
  """Writes `text` to `path` whole (see `temporary_path`)."""
  with temporary_path(path) as tmp:
    with gfile(tmp).GFile(tmp, "w") as f:
      f.write(text)


def list_files(input_patterns: str | list[str], file_system=gfile) -> list[str]:
  """Expands comma-separated globs (the original's `--input_file` syntax), sorted.

  file_system: a pattern -> the file system that matches it (its glob and isdir): `gfile`'s,
  or another's (a Beam job's: `beam_files.input_file_system`).

  Raises FileNotFoundError naming the first pattern that matches nothing, and IsADirectoryError
  naming a directory that a pattern matched (its files are not read: a glob says which).
  """
  if isinstance(input_patterns, str):
    input_patterns = [p for p in input_patterns.split(",") if p.strip()]
  files = []
  for pattern in input_patterns:
    fs = file_system(pattern.strip())
    matched = fs.glob(pattern.strip())
    if not matched:
      raise FileNotFoundError(f"no file matches {pattern!r}")
    for path in matched:
      if fs.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give its files, e.g. "
                                f"'{path.rstrip('/')}/*'")
    files.extend(matched)
  return sorted(set(files))
