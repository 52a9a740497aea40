"""The text files of a corpus glob: what `--input_file`'s globs match, less the files our jobs
write beside a corpus that are no training text.

prepare_corpus --output_file=corpus/de/wiki.txt --holdout_fraction=0.2 writes, beside the
shards, corpus/de/wiki.holdout.txt (or its shards, wiki.holdout.txt-0000i-of-0000M) and
corpus/de/wiki.stats.json; a glob as README's `de:corpus/de/*` matches all three. Read as
text, the held-out documents would be trained on (and no longer held out) and the JSON would be
a document, its keys words of the vocab. So, of what a wildcard matched, these are skipped:

  - every `*.stats.json`: the stats each of our jobs writes beside its output
    (`outputs.stats_path`), never text;
  - a held-out file: named as prepare_corpus names one (`<stem>.holdout<ext>`, sharded or not)
    AND listed in the `output_files` of the `<stem>.stats.json` beside it. The name alone
    could be a user's own file; the stats are prepare_corpus's record of having written it
    there (compared by file name: the stats hold the paths as that run was given them, from
    its working folder, and the folder may have moved since).

A file named without wildcards is read as asked: a held-out file given on purpose (to train
on it after all, or a job over the held-out documents) is the user's choice. What was skipped
is said in one line (`skipped_line`).

The standard library only (and `bert_tf.common.files`, which loads TensorFlow for a gs://...
path alone): create_pretraining_data lists its inputs in its main process.
"""
import dataclasses
import os
import re

from bert_tf.common import files as files_lib
from data_gen.jobs import outputs

STATS_SUFFIX = ".stats.json"
# prepare_corpus's held-out name (`corpus.pipeline.holdout_prefix`: out/wiki.txt ->
# out/wiki.holdout.txt), its shard suffix removed: the stem, then the extension if any.
_HOLDOUT = re.compile(r"^(?P<stem>.+)\.holdout(?P<ext>\.[^./]*)?$")
# What makes a pattern a glob, to tf.io.gfile and the standard library's glob alike.
_WILDCARD = re.compile(r"[*?[]")
# The most skipped files the line names one by one; the rest it counts.
MAX_NAMED = 5


@dataclasses.dataclass(frozen=True)
class Skipped:
  """A file a wildcard matched that is not read, and why ("held out", "stats")."""
  path: str
  why: str


def _held_out(path: str, stats_cache: dict) -> bool:
  """Whether `path` is a held-out file of prepare_corpus's (see the module doc)."""
  match = _HOLDOUT.match(outputs.SHARD_SUFFIX.sub("", path))
  if not match:
    return False
  stats_path = match["stem"] + STATS_SUFFIX
  if stats_path not in stats_cache:
    written = set()
    if files_lib.gfile(stats_path).exists(stats_path):
      try:
        stats = files_lib.read_json(stats_path)
      except (ValueError, OSError):  # no stats of ours: nothing says it was held out
        stats = None
      if isinstance(stats, dict) and isinstance(stats.get("output_files"), dict):
        written = {os.path.basename(p) for p in stats["output_files"]}
    stats_cache[stats_path] = written
  return os.path.basename(path) in stats_cache[stats_path]


def list_files(patterns: str, flag: str = "--input_file") -> tuple[list[str], list[Skipped]]:
  """(the files to read, the files skipped) of comma-separated `patterns`, as
  `bert_tf.common.files.list_files` expands them, less what a wildcard matched of our jobs'
  stats and prepare_corpus's held-out files. A file a pattern names without wildcards is kept.

  Raises what `list_files` raises, and ValueError naming `patterns` when every file they
  match is skipped.
  """
  pattern_list = [p.strip() for p in patterns.split(",") if p.strip()]
  matched = files_lib.list_files(pattern_list)
  named = {os.path.normpath(p) for p in pattern_list if not _WILDCARD.search(p)}
  kept, skipped, stats_cache = [], [], {}
  for path in matched:
    if os.path.normpath(path) in named:
      kept.append(path)
    elif path.endswith(STATS_SUFFIX):
      skipped.append(Skipped(path, "stats"))
    elif _held_out(path, stats_cache):
      skipped.append(Skipped(path, "held out"))
    else:
      kept.append(path)
  if not kept:
    raise ValueError(f"{flag}: {patterns!r} matches only our jobs' own files, which no job "
                     f"trains on: {_named(skipped)}; name a file without wildcards to read it")
  return kept, skipped


def _named(skipped: list[Skipped]) -> str:
  named = ", ".join(f"{s.path} ({s.why})" for s in skipped[:MAX_NAMED])
  more = len(skipped) - MAX_NAMED
  return named + (f" and {more} more" if more > 0 else "")


def skipped_line(program: str, skipped: list[Skipped], flag: str = "--input_file") -> str:
  """The one line that says what was skipped."""
  return (f"{program}: skipped {len(skipped)} file(s) of our jobs' own that {flag}'s globs "
          f"matched: {_named(skipped)}; name a file without wildcards to read it")
