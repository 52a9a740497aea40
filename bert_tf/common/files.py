"""A file written whole or not at all: under a temporary name beside it, renamed to its own
name when complete, so a reader (or a rerun) never sees half of it. Any tf.io.gfile path
(gs://, ram://)."""
import contextlib
import os
from typing import Iterator


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (see bert_tf.common)
  return tf.io.gfile


@contextlib.contextmanager
def temporary_path(path: str, tag: str | None = None) -> Iterator[str]:
  """Yields `<path>.tmp-<tag>` (the process id by default) for the block to write (a file or a
  folder); renamed to `path` (replacing a file) when the block succeeds, removed when it fails.
  Creates the folder it is in."""
  gfile = _gfile()
  if os.path.dirname(path):
    gfile.makedirs(os.path.dirname(path))
  tmp = f"{path}.tmp-{tag or os.getpid()}"
  try:
    yield tmp
  except BaseException:
    if gfile.isdir(tmp):
      gfile.rmtree(tmp)
    elif gfile.exists(tmp):
      gfile.remove(tmp)
    raise
  gfile.rename(tmp, path, overwrite=True)


def write_text(path: str, text: str) -> None:
  """Writes `text` to `path` whole (see `temporary_path`)."""
  with temporary_path(path) as tmp:
    with _gfile().GFile(tmp, "w") as f:
      f.write(text)
