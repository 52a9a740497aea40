"""GLUE, XNLI and the user's own TSV/CSV data: files → `InputExample`s, and each dataset's
description (`TaskData`); the classification task (`task.py`) reads them.

A dataset knows its files (in the standard GLUE layout, one folder per task), its label set (None
for the STS-B regression), the metrics it reports, the one metric that picks the best of several
fine-tuning runs (the paper's Table 1 choice), and the GLUE server's name for its predictions.

Rows are read as google-research/bert reads them (tab-separated, no quoting: MRPC and QQP hold
unbalanced quotes), with a UTF-8 BOM dropped (MRPC's and SST-2's files start with one), by
`text_files.read_rows`. A malformed file is a `DataError` naming the file and line.
"""
import dataclasses
import os
import re

# The rows as every task reads its files (tf.io.gfile on first use: the GLUE peer benchmark,
# transformers on torch, reads its data through this module without TensorFlow).
from bert_tf.common.errors import DataError
from bert_tf.common import files as files_lib
from bert_tf.finetuning.text_files import read_rows

# GLUE's test files carry no labels; examples read from them get this placeholder.
NO_LABEL = None


@dataclasses.dataclass(frozen=True)
class InputExample:
  """One example: `guid` (the test file's index for predictions), one or two texts, a label
  (a label name; a float for regression; None for unlabelled test data), and its language
  where the dataset has several (XNLI)."""
  guid: str
  text_a: str
  text_b: str | None = None
  label: str | float | None = NO_LABEL
  language: str | None = None


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where one split's fields are in its file: 0-based column indices, None when absent.

  guid None numbers the rows instead (`<split>-<n>`, as the original does).
  """
  file: str
  text_a: int
  text_b: int | None = None
  label: int | None = None
  guid: int | None = None
  header: bool = True

  def min_columns(self) -> int:
    return 1 + max(c for c in (self.text_a, self.text_b, self.label, self.guid) if c is not None)


@dataclasses.dataclass(frozen=True)
class Split:
  """A named split: its columns, and for test splits the GLUE server's submission file."""
  name: str
  columns: Columns
  submission: str | None = None


class TaskData:
  """A sentence (pair) classification dataset read from `data_dir` in its standard layout.

  labels None means regression (one float output). `metrics` are reported on dev;
  `primary_metric` picks the best of several fine-tuning runs. `by_language`: the metrics
  are also reported per language (`<metric>_<language>`), the dataset's own then being their
  mean over the languages.
  """
  by_language = False

  def __init__(self, name: str, labels: list[str] | None, metrics: tuple[str, ...],
               primary_metric: str, train: Split, eval_splits: tuple[Split, ...],
               predict_splits: tuple[Split, ...]):
    self.name = name
    self.labels = labels
    self.is_regression = labels is None
    self.metrics = metrics
    self.primary_metric = primary_metric
    self.train = train
    self.eval_splits = eval_splits
    self.predict_splits = predict_splits

  @property
  def is_pair(self) -> bool:
    """Whether the task classifies sentence pairs (then serving takes text_b too)."""
    return self.train.columns.text_b is not None

  def label_list(self, data_dir: str) -> list[str] | None:
    """The label names, in the order of the classifier's outputs (None for regression)."""
    del data_dir  # Fixed for GLUE; the generic task reads them from its training file.
    return self.labels

  def split_path(self, data_dir: str, split: Split) -> str:
    """The file a split is read from (the first, for a split of several files)."""
    return os.path.join(data_dir, split.columns.file)

  def split_paths(self, data_dir: str, split: Split) -> list[str]:
    """Every file a split is read from, in order."""
    return [self.split_path(data_dir, split)]

  def get_examples(self, data_dir: str, split: Split) -> list[InputExample]:
    """Reads one split; raises DataError naming file and line on a malformed row."""
    labels = self.label_list(data_dir)
    examples = []
    for path in self.split_paths(data_dir, split):
      for line, row in self._rows(path, split):
        examples.append(self._example(path, line, row, split, len(examples), labels))
    if not examples:
      raise DataError(f"{self.split_path(data_dir, split)}: no examples")
    return examples

  def _rows(self, path: str, split: Split):
    rows = read_rows(path)
    if split.columns.header:
      next(rows, None)
    return rows

  def _example(self, path, line, row, split, index, labels) -> InputExample:
    cols = split.columns
    if len(row) < cols.min_columns():
      raise DataError(f"{path}:{line}: {len(row)} columns, expected at least "
                      f"{cols.min_columns()}")
    guid = row[cols.guid] if cols.guid is not None else f"{split.name}-{index}"
    text_b = row[cols.text_b] if cols.text_b is not None else None
    label = None
    if cols.label is not None:
      label = self._parse_label(path, line, row[cols.label], labels)
    return InputExample(guid, row[cols.text_a], text_b, label)

  def _parse_label(self, path, line, value, labels):
    value = value.strip()
    if labels is None:
      try:
        return float(value)
      except ValueError:
        raise DataError(f"{path}:{line}: label {value!r} is not a number") from None
    if value not in labels:
      raise DataError(f"{path}:{line}: label {value!r} is not one of {labels}")
    return value


def _glue_task(name, labels, metrics, primary, train, dev, test, eval_names=("dev",),
               predict_names=("test",), submissions=None) -> TaskData:
  """A GLUE task from its column layouts (train, the dev split(s), the test split(s))."""
  dev = dev if isinstance(dev, tuple) else (dev,)
  test = test if isinstance(test, tuple) else (test,)
  submissions = submissions or (f"{name}.tsv",)
  return TaskData(name, labels, metrics, primary, Split("train", train),
              tuple(Split(n, c) for n, c in zip(eval_names, dev)),
              tuple(Split(n, c, s) for n, c, s in zip(predict_names, test, submissions)))


_BINARY = ["0", "1"]
_NLI = ["contradiction", "entailment", "neutral"]
_RTE = ["entailment", "not_entailment"]

# Column layouts of the GLUE benchmark's files (gluebenchmark.com's download).
COLA = _glue_task(
    "CoLA", _BINARY, ("mcc", "accuracy"), "mcc",
    Columns("train.tsv", text_a=3, label=1, header=False),
    Columns("dev.tsv", text_a=3, label=1, header=False),
    Columns("test.tsv", text_a=1, guid=0))
SST2 = _glue_task(
    "SST-2", _BINARY, ("accuracy",), "accuracy",
    Columns("train.tsv", text_a=0, label=1), Columns("dev.tsv", text_a=0, label=1),
    Columns("test.tsv", text_a=1, guid=0))
MRPC = _glue_task(
    "MRPC", _BINARY, ("accuracy", "f1"), "f1",
    Columns("train.tsv", text_a=3, text_b=4, label=0),
    Columns("dev.tsv", text_a=3, text_b=4, label=0),
    Columns("test.tsv", text_a=3, text_b=4, guid=0))
STSB = _glue_task(
    "STS-B", None, ("pearson", "spearman"), "spearman",
    Columns("train.tsv", text_a=7, text_b=8, label=9),
    Columns("dev.tsv", text_a=7, text_b=8, label=9),
    Columns("test.tsv", text_a=7, text_b=8, guid=0))
QQP = _glue_task(
    "QQP", _BINARY, ("accuracy", "f1"), "f1",
    Columns("train.tsv", text_a=3, text_b=4, label=5),
    Columns("dev.tsv", text_a=3, text_b=4, label=5),
    Columns("test.tsv", text_a=1, text_b=2, guid=0))
MNLI = _glue_task(
    "MNLI", _NLI, ("accuracy",), "accuracy",
    Columns("train.tsv", text_a=8, text_b=9, label=11),
    (Columns("dev_matched.tsv", text_a=8, text_b=9, label=15),
     Columns("dev_mismatched.tsv", text_a=8, text_b=9, label=15)),
    (Columns("test_matched.tsv", text_a=8, text_b=9, guid=0),
     Columns("test_mismatched.tsv", text_a=8, text_b=9, guid=0)),
    eval_names=("dev_matched", "dev_mismatched"),
    predict_names=("test_matched", "test_mismatched"),
    submissions=("MNLI-m.tsv", "MNLI-mm.tsv"))
QNLI = _glue_task(
    "QNLI", _RTE, ("accuracy",), "accuracy",
    Columns("train.tsv", text_a=1, text_b=2, label=3),
    Columns("dev.tsv", text_a=1, text_b=2, label=3),
    Columns("test.tsv", text_a=1, text_b=2, guid=0))
RTE = _glue_task(
    "RTE", _RTE, ("accuracy",), "accuracy",
    Columns("train.tsv", text_a=1, text_b=2, label=3),
    Columns("dev.tsv", text_a=1, text_b=2, label=3),
    Columns("test.tsv", text_a=1, text_b=2, guid=0))
WNLI = _glue_task(
    "WNLI", _BINARY, ("accuracy",), "accuracy",
    Columns("train.tsv", text_a=1, text_b=2, label=3),
    Columns("dev.tsv", text_a=1, text_b=2, label=3),
    Columns("test.tsv", text_a=1, text_b=2, guid=0))


ALL_LANGUAGES = "all"


class XNLIData(TaskData):
  """XNLI (Conneau et al. 2018) in one language or in all, in either of two layouts:

  google-research/bert's  the XNLI-1.0 and XNLI-MT-1.0 downloads in one folder: training on
                          the machine-translated MultiNLI (`multinli/multinli.train.<lang>.tsv`,
                          a header, label "contradictory" for contradiction), evaluation on the
                          rows of `xnli.dev.tsv` (predictions: `xnli.test.tsv`) whose first
                          column is the language;
  per language            the public copies' (XTREME's): `train-en.tsv`, `dev-<lang>.tsv`,
                          `test-<lang>.tsv`, each premise, hypothesis, label, no header.

  One language (`zh`, as the original's XnliProcessor) trains and evaluates on that language.
  "all" is the zero-shot transfer: training on English, evaluation on every language present,
  the accuracy per language (`accuracy_<lang>`) and their mean (`accuracy`); a sweep keeps the
  run best on English dev, the training language (no target-language data picks the model).
  """
  PER_LANGUAGE_FILE = re.compile(r"(train|dev|test)-(.+)\.tsv")

  def __init__(self, language: str = "zh", data_dir: str = ""):
    if language != ALL_LANGUAGES and not re.fullmatch(r"[a-z]{2,3}([-_][A-Za-z0-9]+)*",
                                                      language):
      raise ValueError(f"--xnli_language={language}: not a language code (zh, de, ...) or "
                       f"{ALL_LANGUAGES!r}")
    self.language = language
    self.by_language = language == ALL_LANGUAGES
    self.train_language = "en" if self.by_language else language
    self.per_language = self._per_language_layout(data_dir)
    if self.per_language:
      files = "*" if self.by_language else language
      train = Columns(f"train-{self.train_language}.tsv", text_a=0, text_b=1, label=2,
                      header=False)
      dev = Columns(f"dev-{files}.tsv", text_a=0, text_b=1, label=2, header=False)
      test = Columns(f"test-{files}.tsv", text_a=0, text_b=1, header=False)
    else:
      train = Columns(f"multinli/multinli.train.{self.train_language}.tsv", text_a=0,
                      text_b=1, label=2)
      dev = Columns("xnli.dev.tsv", text_a=6, text_b=7, label=1)
      test = Columns("xnli.test.tsv", text_a=6, text_b=7)
    super().__init__("XNLI", _NLI, ("accuracy",), "accuracy", Split("train", train),
                     (Split("dev", dev),), (Split("test", test),))

  @classmethod
  def _per_language_layout(cls, data_dir: str) -> bool:
    """Whether data_dir holds the per-language files and not google-research/bert's
    xnli.dev.tsv (the original's layout, when neither is there: errors name its files)."""
    if not data_dir:
      return False
    names = [os.path.basename(path) for path in
             files_lib.gfile(data_dir).glob(os.path.join(data_dir, "*.tsv"))]
    return "xnli.dev.tsv" not in names and any(map(cls.PER_LANGUAGE_FILE.fullmatch, names))

  def split_paths(self, data_dir: str, split: Split) -> list[str]:
    pattern = super().split_path(data_dir, split)
    if not (self.per_language and self.by_language and split is not self.train):
      return [pattern]
    return sorted(files_lib.gfile(data_dir).glob(pattern))

  def split_path(self, data_dir: str, split: Split) -> str:
    # The pattern itself while no file matches it: what "file not found" names.
    return next(iter(self.split_paths(data_dir, split)), super().split_path(data_dir, split))

  def _rows(self, path, split):
    for line, row in super()._rows(path, split):
      if (split is self.train or self.per_language or self.by_language or
          (row and row[0] == self.language)):
        yield line, row

  def _example(self, path, line, row, split, index, labels) -> InputExample:
    example = super()._example(path, line, row, split, index, labels)  # Checks the columns.
    if split is self.train:
      language = self.train_language
    elif self.per_language:
      language = self.PER_LANGUAGE_FILE.fullmatch(os.path.basename(path)).group(2)
    else:
      language = row[0]
    return dataclasses.replace(example, language=language)

  def get_examples(self, data_dir: str, split: Split) -> list[InputExample]:
    examples = super().get_examples(data_dir, split)
    if self.by_language and split.name == "dev":
      languages = {e.language for e in examples}
      self.primary_metric = "accuracy_en" if "en" in languages else "accuracy"
    return examples

  def _parse_label(self, path, line, value, labels):
    # The translated MultiNLI spells one label differently from XNLI.
    value = "contradiction" if value.strip() == "contradictory" else value
    return super()._parse_label(path, line, value, labels)


class GenericData(TaskData):
  """The user's own data: `train`, `dev` and `test` files (`.tsv` or `.csv`) in `data_dir`
  whose header names the columns `text_a`, `label` and optionally `text_b` and `guid` (test
  files need no label). The labels are those found in the training file, sorted.
  """

  def __init__(self, data_dir: str):
    self._data_dir = data_dir
    self._labels = None
    files = {}
    for split in ("train", "dev", "test"):
      found = [f"{split}{ext}" for ext in (".tsv", ".csv")
               if files_lib.gfile(data_dir).exists(os.path.join(data_dir, f"{split}{ext}"))]
      files[split] = found[0] if found else f"{split}.tsv"
    super().__init__("generic", None, ("accuracy", "macro_f1"), "accuracy",
                     Split("train", self._columns(files["train"])),
                     (Split("dev", self._columns(files["dev"])),),
                     (Split("test", self._columns(files["test"])),))
    self.is_regression = False  # Its labels come from the training file, on first use.

  def _columns(self, file: str) -> Columns:
    path = os.path.join(self._data_dir, file)
    if not files_lib.gfile(path).exists(path):
      return Columns(file, text_a=0)  # Reading it will report the missing file.
    header = next(read_rows(path, _delimiter(file)), (1, []))[1]
    names = [h.strip() for h in header]
    if "text_a" not in names:
      raise DataError(f"{path}:1: header {names} has no 'text_a' column")
    index = {n: names.index(n) if n in names else None
             for n in ("text_a", "text_b", "label", "guid")}
    return Columns(file, **index)

  def label_list(self, data_dir: str) -> list[str]:
    if self._labels is None:
      path = os.path.join(data_dir, self.train.columns.file)
      if self.train.columns.label is None and files_lib.gfile(path).exists(path):
        raise DataError(f"{path}:1: header has no 'label' column")
      rows = self._rows(path, self.train)
      found = sorted({row[self.train.columns.label].strip() for _, row in rows
                      if len(row) > self.train.columns.label})
      if not found:
        raise DataError(f"{path}: no examples")
      self._labels = found
    return self._labels

  def _rows(self, path, split):
    rows = read_rows(path, _delimiter(split.columns.file))
    next(rows, None)
    return rows


def _delimiter(file: str) -> str:
  return "," if file.endswith(".csv") else "\t"


_GLUE = (COLA, SST2, MRPC, STSB, QQP, MNLI, QNLI, RTE, WNLI)
TASK_NAMES = tuple(t.name.lower() for t in _GLUE) + ("xnli", "generic")


def get_task_data(task_name: str, data_dir: str = "", xnli_language: str = "zh") -> TaskData:
  """The dataset of the task named `task_name` (case-insensitive; "sts-b" or "stsb", "sst-2" or "sst2").

  Raises ValueError listing the known names for an unknown one.
  """
  key = task_name.lower().replace("-", "")
  for task in _GLUE:
    if task.name.lower().replace("-", "") == key:
      return task
  if key == "xnli":
    return XNLIData(xnli_language, data_dir)
  if key == "generic":
    return GenericData(data_dir)
  raise ValueError(f"unknown task {task_name!r}; known: {', '.join(TASK_NAMES)}")
