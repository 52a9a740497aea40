"""The one text reader every task uses (`bert_tf.finetuning.text_files`): a UTF-8 BOM dropped in
every task's files, the same one-line errors for a missing file and invalid UTF-8 (file and
line), and extract_features' invalid UTF-8 dropped as the original does, with one warning."""
import json
import logging

import pytest

from bert_tf.common.errors import DataError
from bert_tf.tasks import feature_extraction as fe
from bert_tf.tasks.classification import glue
from bert_tf.tasks.ner import task as ner
from bert_tf.tasks.squad import task as squad
from bert_tf.tasks import multiple_choice as mc
from bert_tf.tasks.squad import scoring as squad_eval

BOM = "\ufeff"
SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
    {"context": "Ada wrote it.", "qas": [{"id": "q1", "question": "Who wrote it?",
                                          "answers": [{"text": "Ada", "answer_start": 0}]}]}]}]}


def _write(path, text: str, encoding="utf-8") -> str:
  path.write_bytes(text.encode(encoding))
  return str(path)


def _squad_examples(path: str):
  return squad.SquadTask(squad.SquadConfig(), predict_file=path).read_examples("predict")


# What each task reads its files with, each a function of the path.
READERS = {
    "conll": ner.read_conll,
    "squad": _squad_examples,
    "squad_eval": squad_eval.read_json,
    "glue": lambda p: list(glue.read_rows(p)),
    "multiple_choice": lambda p: mc.read_rows(p)[2],
    "extract_features": fe.read_examples,
}


def test_a_bom_is_dropped_in_every_task(tmp_path):
  # CoNLL: the BOM used to glue onto -DOCSTART-, which then was a word (a false entity, the
  # document boundary lost).
  conll = _write(tmp_path / "train.txt", BOM + "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\n"
                 "rejects VBZ B-VP O\n")
  [sentence] = ner.read_conll(conll)
  assert (sentence.words, sentence.tags, sentence.doc_start) == (["EU", "rejects"],
                                                                  ["B-ORG", "O"], True)
  # SQuAD: the BOM used to be refused with Python's json message.
  path = _write(tmp_path / "dev.json", BOM + json.dumps(SQUAD))
  [example] = _squad_examples(path)
  assert (example.qas_id, example.doc_tokens) == ("q1", ["Ada", "wrote", "it."])
  assert squad_eval.read_json(path) == SQUAD
  # TSV (GLUE, multiple choice) and extract_features' lines.
  tsv = _write(tmp_path / "train.tsv", BOM + "context\tending0\tending1\tlabel\nA\tb\tc\t1\n")
  assert mc.read_rows(tsv)[2] == ["context", "ending0", "ending1", "label"]
  assert list(glue.read_rows(tsv))[0] == (1, ["context", "ending0", "ending1", "label"])
  lines = _write(tmp_path / "input.txt", BOM + "Hello there ||| Hi\n")
  assert [(e.text_a, e.text_b) for e in fe.read_examples(lines)] == [("Hello there", "Hi")]


@pytest.mark.parametrize("reader", READERS)
def test_a_missing_file_is_one_message_for_every_reader(tmp_path, reader):
  path = str(tmp_path / "absent.txt")
  with pytest.raises(DataError, match=f"^{path}: file not found$"):
    READERS[reader](path)
  with pytest.raises(DataError, match=f"^{tmp_path}: file not found$"):  # A folder.
    READERS[reader](str(tmp_path))


@pytest.mark.parametrize("reader", [r for r in READERS if r != "extract_features"])
def test_invalid_utf8_is_refused_naming_file_and_line(tmp_path, reader):
  path = _write(tmp_path / "latin1.txt", "EU B-ORG\nZ\xfcrich B-LOC\n", encoding="latin-1")
  with pytest.raises(DataError, match=f"^{path}:2: not valid UTF-8 \\(invalid start byte at "
                     "byte 10\\)$"):
    READERS[reader](path)


def test_extract_features_drops_invalid_utf8_with_one_warning(tmp_path, caplog):
  path = tmp_path / "input.txt"
  path.write_bytes("Hello\n".encode() + "M\xfcller says hi\n".encode("latin-1") +
                   b"x \xff\xfe y ||| \xe2\x82 z\n" + "Zürich\n".encode())
  with caplog.at_level(logging.WARNING):
    examples = fe.read_examples(str(path))
  # The original's text: each invalid sequence dropped (Python's errors="ignore").
  assert [(e.text_a, e.text_b) for e in examples] == [
      ("Hello", None), ("Mller says hi", None), ("x  y", " z"), ("Zürich", None)]
  warnings = [r.getMessage() for r in caplog.records if "not valid UTF-8" in r.getMessage()]
  assert warnings == [f"{path}:2: not valid UTF-8: 5 invalid byte(s) on 2 line(s) dropped (the "
                      "first here), as google-research/bert decodes its input"]
  from bert_tf.finetuning import text_files  # pylint: disable=g-import-not-at-top  (4a9272d had none)
  assert text_files.read_text(str(path), "drop") == path.read_bytes().decode("utf-8", "ignore")


def test_the_reader_refuses_an_unknown_mode(tmp_path):
  from bert_tf.finetuning import text_files  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="invalid='replace': must be 'error' or 'drop'"):
    text_files.read_text(_write(tmp_path / "a.txt", "a"), invalid="replace")
