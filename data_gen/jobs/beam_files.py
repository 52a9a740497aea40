"""A Beam job's files, on any of Beam's file systems (`FileSystems`: local paths, gs://, s3://,
hdfs://...): the workers of a distributed runner share no disk, so what one step writes for
another (the scratch files) goes, as the outputs do, to the output's file system, which every
worker and the driver reach; and the inputs are read there too (`InputFiles`).

Bytes as written: no compression guessed from a name (FileSystems' default would gzip a
`corpus.txt.gz` output, or read a scratch file back through gunzip).
"""
import json
import uuid
from typing import Iterable

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from bert_tf.common import files
from data_gen.jobs import outputs


def open_read(path: str):
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def open_write(path: str):
  """`path` for writing from its start (a retried step rewrites it whole)."""
  return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def write_whole(path: str, data: Iterable[bytes]) -> None:
  """`data` to `path` under a name of its own, renamed when complete: a reader (a later step,
  while a runner's duplicate attempt rewrites it) never sees half of it."""
  tmp = f"{path}.tmp-{uuid.uuid4().hex}"
  with open_write(tmp) as f:
    for block in data:
      f.write(block)
  FileSystems.rename([tmp], [path])


def write_json(path: str, value: dict) -> None:
  """`value` to `path` as indented JSON, whole or not at all."""
  write_whole(path, [(json.dumps(value, indent=2) + "\n").encode("utf-8")])


def read_json(path: str) -> dict:
  with open_read(path) as f:
    return json.loads(f.read().decode("utf-8"))


class RemoteFiles:
  """`outputs.check_no_other_shards`'s and `outputs.remove_leftovers`' file operations on an
  object store, through FileSystems: a folder is the prefix of its files."""

  @staticmethod
  def glob(pattern: str) -> list[str]:
    found, inside = FileSystems.match([pattern, FileSystems.join(pattern, "*")])
    return sorted({m.path for m in found.metadata_list} |
                  {FileSystems.split(m.path)[0] for m in inside.metadata_list})

  exists = staticmethod(FileSystems.exists)

  @staticmethod
  def remove(path: str) -> None:
    FileSystems.delete([path])

  @staticmethod
  def rmtree(path: str) -> None:
    FileSystems.delete([path.rstrip("/") + "/"])  # a trailing slash: the prefix, recursively


def files_for(path: str):
  """The file operations for outputs beside `path`: a local path's through the standard
  library (FileSystems' matching lists no folder there), another file system's through
  FileSystems."""
  return outputs.LocalFiles if "://" not in path else RemoteFiles



class InputFiles:
  """The inputs, read through FileSystems on any worker: `sources`' reads (a file's bytes as
  they are, seekable: `sources` sniffs the compression itself; its size; whether it is there),
  and `files.list_files`' matching of an input glob (files only: an object store has no
  folders)."""
  open = staticmethod(open_read)
  exists = staticmethod(FileSystems.exists)

  @staticmethod
  def size(path: str) -> int:
    return FileSystems.get_filesystem(path).size(path)

  @staticmethod
  def glob(pattern: str) -> list[str]:
    return [m.path for m in FileSystems.match([pattern])[0].metadata_list]

  @staticmethod
  def isdir(path: str) -> bool:
    del path  # `glob` matched files only
    return False


def input_file_system(pattern: str):
  """`files.list_files`' file system for an input pattern of a Beam job: a local one's the
  standard library's (which names a folder it matches), another's FileSystems' (gs://...,
  which the workers read, not tf.io.gfile's)."""
  return files.gfile(pattern) if "://" not in pattern else InputFiles
