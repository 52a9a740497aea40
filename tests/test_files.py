"""bert_tf.common.files: a local path through the standard library, another file system's
(ram://, as gs://) through tf.io.gfile, alike: whole files or none, the globs of --input_file."""
import os

import pytest
import tensorflow as tf

from bert_tf.common import files


@pytest.mark.parametrize("as_path", [str, lambda p: p], ids=["str", "pathlib"])
def test_write_text_writes_the_whole_file_and_makes_its_folder(tmp_path, as_path):
  path = as_path(tmp_path / "new" / "out.txt")
  files.write_text(path, "one\ntwo\n")
  assert (tmp_path / "new" / "out.txt").read_text() == "one\ntwo\n"
  assert os.listdir(tmp_path / "new") == ["out.txt"]


@pytest.mark.parametrize("root", ["local", "ram://files_test"])
def test_a_failed_write_leaves_neither_the_file_nor_its_temporary(tmp_path, root):
  folder = str(tmp_path) if root == "local" else root
  path = f"{folder}/out.txt"
  with pytest.raises(RuntimeError):
    with files.temporary_path(path) as tmp:
      with tf.io.gfile.GFile(tmp, "w") as f:
        f.write("half")
      raise RuntimeError("disk full")
  assert tf.io.gfile.listdir(folder) == []
  files.write_text(path, "whole")
  with tf.io.gfile.GFile(path) as f:
    assert f.read() == "whole"
  assert tf.io.gfile.listdir(folder) == ["out.txt"]


def test_list_files_expands_comma_separated_globs_sorted_dot_files_too(tmp_path):
  for name in ("b.txt", "a.txt", ".hidden.txt", "c.json"):
    (tmp_path / name).write_text(name)
  got = files.list_files(f"{tmp_path}/*.txt, {tmp_path}/c.json,")
  assert got == sorted(str(tmp_path / n) for n in (".hidden.txt", "a.txt", "b.txt", "c.json"))
  # The same as tf.io.gfile's glob (which matches dot files too).
  assert got[:3] == sorted(tf.io.gfile.glob(f"{tmp_path}/*.txt"))


def test_list_files_names_a_pattern_that_matches_nothing_and_a_folder(tmp_path):
  (tmp_path / "d").mkdir()
  with pytest.raises(FileNotFoundError, match="no file matches .*nothing"):
    files.list_files(f"{tmp_path}/nothing*")
  with pytest.raises(IsADirectoryError, match="is a directory; give its files"):
    files.list_files(f"{tmp_path}/d")
