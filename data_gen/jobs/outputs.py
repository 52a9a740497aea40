"""The files both jobs write beside their output: the shards' names, the scratch directory,
what a killed run left, the stats file.

Names, and local file operations through the standard library: no TensorFlow, which
prepare_corpus never loads. The Beam jobs check and clean an output on another file system
(gs://...) through Beam's (`beam_files.files_for`), in the calls that take `files`.
`write_json` writes a gs://... path too, loading tf.io.gfile for it alone
(`bert_tf.common.files`).
"""
import glob
import json
import os
import re
import shutil

from bert_tf.common import files


def shard_paths(output_files: list[str], num_output_shards: int | None) -> list[str]:
  """The files to write: `output_files` as given (the original's round-robin over them), or
  with num_output_shards > 1 and one output file, `<file>-00000-of-0000N` and so on."""
  if num_output_shards is None or num_output_shards == len(output_files):
    return list(output_files)
  if num_output_shards < 1:
    raise ValueError(f"--num_output_shards={num_output_shards}: must be >= 1")
  if len(output_files) != 1:
    raise ValueError(f"--num_output_shards={num_output_shards} with {len(output_files)} "
                     "--output_file names: give one name, or as many as shards")
  return [f"{output_files[0]}-{i:05d}-of-{num_output_shards:05d}"
          for i in range(num_output_shards)]


def stats_path(output_file: str) -> str:
  """Where the stats of a run whose first --output_file is `output_file` go:
  out/pretrain.tfrecord -> out/pretrain.stats.json (outside a `*.tfrecord*` glob)."""
  return os.path.splitext(output_file)[0] + ".stats.json"


SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


class LocalFiles:
  """The file operations `check_no_other_shards` and `remove_leftovers` use, on local paths."""
  glob = staticmethod(glob.glob)
  exists = staticmethod(os.path.exists)
  remove = staticmethod(os.remove)
  rmtree = staticmethod(shutil.rmtree)


def check_no_other_shards(output_files: list[str], files=LocalFiles) -> None:
  """Refuses to write beside shards of another set (a run with another --num_output_shards):
  the `<file>*` glob that reads the new set would read the old one too. Refused rather than
  deleted: they may be the only copy of a long run's output."""
  new = set(output_files)
  for base in sorted({SHARD_SUFFIX.sub("", p) for p in output_files}):
    others = sorted(p for p in files.glob(glob.escape(base) + "-[0-9]*-of-[0-9]*")
                    if SHARD_SUFFIX.search(p) and p not in new)
    if files.exists(base) and base not in new:
      others.insert(0, base)
    if others:
      more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
      raise ValueError(f"{others[0]}{more}: output of another run with other shards is "
                       f"there, and a {base}* glob would read it with the new shards; "
                       "remove it or choose another --output_file")


def scratch_dir(output_file: str, pid: str) -> str:
  """The scratch directory of process `pid` (or a Beam job, `beam-<id>`) writing
  `output_file`: hidden beside it (out of an `output_file*` glob), so that a re-run for the
  same output finds one a killed run left."""
  head, tail = os.path.split(output_file)
  return os.path.join(head, f".{tail}.tmp-{pid}")


def remove_leftovers(paths: list[str], files=LocalFiles) -> None:
  """Deletes the temporary files and the scratch directory a killed run left beside `paths`."""
  for path in paths:
    for leftover in files.glob(glob.escape(path) + ".tmp-*"):
      files.remove(leftover)
  for scratch in files.glob(scratch_dir(glob.escape(paths[0]), "*")):
    files.rmtree(scratch)


def write_json(path: str, value: dict) -> None:
  """`value` to `path` (local or gs://...) as indented JSON, whole or not at all."""
  files.write_text(path, json.dumps(value, indent=2) + "\n")
