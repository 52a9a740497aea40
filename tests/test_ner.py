"""NER task: the readers (both layouts, -DOCSTART-, IOB1/IOB2, errors naming file:line), the
features (first-piece labels, document-context windows, long sentences split), conlleval's
scores, and a tiny fresh BERT that learns a toy tagging task through the runner, with its
files re-scored; run_ner's one-line errors."""
import logging
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from seqeval.metrics import accuracy_score, f1_score

from bert_tf import finetuning
from bert_tf.common.errors import DataError
from bert_tf.tasks.ner import task as ner
from bert_tf.finetuning import runner, task_class
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import distribute
from entry_points import run_cases
from toys import VOCAB, make_conll, tiny_config

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O
"""
# The same sentences in IOB1: I- starts an entity, B- only between two of one type.
CONLL_IOB1 = (CONLL.replace("B-ORG", "I-ORG").replace("B-MISC", "I-MISC")
              .replace("B-PER", "I-PER").replace("B-LOC", "I-LOC")
              + "\nthe O O O\nU.S. NNP B-NP I-LOC\nCanada NNP I-NP B-LOC\n")


def _write(path, text: str) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


@pytest.fixture(scope="module")
def tokenizer():
  return FullTokenizer(VOCAB, True)


def _task(tmp_path, train: str = CONLL, **kwargs) -> ner.NerTask:
  _write(tmp_path / "train.txt", train)
  return finetuning.build("ner", kwargs, data_dir=str(tmp_path))


# Reading.
def test_reads_conll_documents(tmp_path):
  task = _task(tmp_path, CONLL.replace("\n", "\r\n"))  # Windows line ends too.
  sentences = task.read_examples("train")
  assert [(s.words, s.tags, s.document, s.line, s.doc_start) for s in sentences] == [
      (["EU", "rejects", "German", "call", "."], ["B-ORG", "O", "B-MISC", "O", "O"], 0, 3,
       True),
      (["Peter", "Blackburn"], ["B-PER", "I-PER"], 0, 9, False),
      (["BRUSSELS", "1996-08-22"], ["B-LOC", "O"], 1, 14, True)]
  assert task.config.labels == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
  assert task.config.scheme == "iob2"
  # What export reads back: task_config.json names the task and its labels.
  config = ner.NerConfig.from_dict(task.config.to_dict())
  assert config == task.config and task_class(config.to_dict()["task"]) is ner.NerTask


def test_reads_word_tab_tag(tmp_path):
  """The user's own layout: no -DOCSTART- (the file is one document), words may hold spaces."""
  path = _write(tmp_path / "mine.txt", "New York\tB-LOC\nis\tO\n\n\nAda\tB-PER\n")
  sentences = ner.read_conll(path)
  assert [(s.words, s.tags, s.document, s.line, s.doc_start) for s in sentences] == [
      (["New York", "is"], ["B-LOC", "O"], 0, 1, False), (["Ada"], ["B-PER"], 0, 5, False)]


def test_scheme_detected_or_checked(tmp_path):
  iob1 = _write(tmp_path / "iob1.txt", CONLL_IOB1)
  iob2 = _write(tmp_path / "iob2.txt", CONLL)
  assert ner.check_scheme(iob1, ner.read_conll(iob1), "auto") == "iob1"
  assert ner.check_scheme(iob2, ner.read_conll(iob2), "auto") == "iob2"
  # B-LOC after I-LOC separates two locations: IOB1's only B-, allowed.
  assert ner.check_scheme(iob1, ner.read_conll(iob1), "iob1") == "iob1"
  with pytest.raises(DataError, match=r"iob2\.txt:3: B-ORG starts an entity, which IOB1 "
                     r"forbids .*--scheme=iob2"):
    ner.check_scheme(iob2, ner.read_conll(iob2), "iob1")
  with pytest.raises(DataError, match=r"iob1\.txt:3: I-ORG starts an entity, which IOB2 "
                     r"forbids .*--scheme=iob1"):
    ner.check_scheme(iob1, ner.read_conll(iob1), "iob2")
  mixed = _write(tmp_path / "mixed.txt", CONLL + "\nx y z I-PER\n")
  with pytest.raises(DataError, match=r"mixed\.txt:17: I-PER starts an entity \(IOB1\), but so "
                     r"does B-ORG at line 3 \(IOB2\)"):
    ner.check_scheme(mixed, ner.read_conll(mixed), "auto")
  # dev.txt must follow the training file's scheme.
  task = _task(tmp_path)
  _write(tmp_path / "dev.txt", CONLL_IOB1)
  with pytest.raises(DataError, match=r"dev\.txt:3: I-ORG starts an entity, which IOB2"):
    task.read_examples("dev")


@pytest.mark.parametrize("text,error", [
    ("EU NNP B-NP B-ORG\nrejects VBZ O\n", r"bad\.txt:2: 3 column\(s\); the file's lines have 4 "
                                           r"\(the word first, the tag last; separated by tabs "
                                           r"or spaces\), as its first, line 1"),
    ("EU\tB-ORG\nrejects VBZ O\n", r"bad\.txt:2: 3 column\(s\); the file's lines have 2 "),
    ("EU\n", r"bad\.txt:1: 1 column"),
    ("EU B_ORG\n", r"bad\.txt:1: tag 'B_ORG' is not O, B-<type> or I-<type>"),
    ("\n\n \tO\n", r"bad\.txt:3: an empty word"),
])
def test_bad_lines_are_named(tmp_path, text, error):
  with pytest.raises(DataError, match=error):
    ner.read_conll(_write(tmp_path / "bad.txt", text))


def test_tab_separated_columns_of_any_number(tmp_path):
  """Word first, tag last, whatever separates the columns: a tab-separated CoNLL file (4
  columns) used to be refused as `word<TAB>tag` measured against its own line."""
  tabs = ner.read_conll(_write(tmp_path / "tabs.txt", "-DOCSTART-\t-X-\t-X-\tO\n\n"
                               "EU\tNNP\tB-NP\tB-ORG\nrejects\tVBZ\tB-VP\tO\n"))
  spaces = ner.read_conll(_write(tmp_path / "spaces.txt", "-DOCSTART- -X- -X- O\n\n"
                                 "EU  NNP B-NP   B-ORG\nrejects VBZ B-VP O\n"))
  assert tabs == spaces and tabs[0].words == ["EU", "rejects"] and tabs[0].doc_start
  with pytest.raises(DataError, match=r"bad\.txt:3: 2 column\(s\); the file's lines have 4 "
                     r"\(the word first, the tag last; separated by tabs or spaces\), as its "
                     r"first, line 2$"):
    ner.read_conll(_write(tmp_path / "bad.txt", "\nEU\tNNP\tB-NP\tB-ORG\nrejects\tO\n"))


def test_untagged_reading_takes_each_lines_first_column(tmp_path):
  """A transfer file (`NerTask.transfer_examples`): words alone, or a tagged file's words; the
  tags are the teacher's to give, so none is read or checked."""
  words = ner.read_conll(_write(tmp_path / "words.txt", "-DOCSTART-\n\nEU\nrejects\n\nPeter\n"),
                         tagged=False)
  tagged = ner.read_conll(_write(tmp_path / "tagged.txt", "-DOCSTART- -X- O\n\nEU NNP B_BAD\n"
                                 "rejects VBZ O\n\nPeter NNP B-PER\n"), tagged=False)
  assert [s.words for s in words] == [["EU", "rejects"], ["Peter"]] == [s.words for s in tagged]
  assert [s.tags for s in tagged] == [["O", "O"], ["O"]] and words[0].doc_start
  with pytest.raises(DataError, match=r"tagged\.txt:3: tag 'B_BAD' is not O"):
    ner.read_conll(str(tmp_path / "tagged.txt"))


def test_bad_files_are_named(tmp_path):
  with pytest.raises(DataError, match=r"nothere\.txt: file not found"):
    ner.read_conll(str(tmp_path / "nothere.txt"))
  (tmp_path / "latin1.txt").write_bytes("Z\xfcrich B-LOC\n".encode("latin-1"))
  with pytest.raises(DataError, match=r"latin1\.txt:1: not valid UTF-8"):
    ner.read_conll(str(tmp_path / "latin1.txt"))
  task = _task(tmp_path)
  with pytest.raises(DataError, match=r"test\.txt: file not found \(the test split, for "
                     r"--do_predict\)"):
    task.check_inputs(["train", "predict"])


def test_a_tag_only_in_dev_is_a_warning_and_a_miss(tmp_path, tokenizer, caplog):
  task = _task(tmp_path)
  _write(tmp_path / "dev.txt", "Euro NN B-NP B-EVENT\n2000 CD I-NP I-EVENT\nin IN O O\n"
                               "Paris NNP B-NP B-LOC\n")
  with caplog.at_level(logging.WARNING):
    sentences = task.read_examples("dev")
  assert "dev.txt:1: tag B-EVENT is not in the training file's label set (2 words" in caplog.text
  features = task.convert_examples(sentences, tokenizer, False)
  labels = features.records[0]["label_ids"]
  assert labels[features.extras[0].positions].tolist() == [-1, -1, 0, 1]
  scores = task.evaluate(sentences, [["O", "O", "O", "B-LOC"]])
  assert scores["recall"] == 50 and scores["precision"] == 100 and scores["f1_EVENT"] == 0


# Features.
def _pieces(tokenizer, record) -> list[str]:
  return tokenizer.convert_ids_to_tokens(record["input_ids"][record["input_mask"] == 1].tolist())


def test_first_piece_carries_the_label(tmp_path, tokenizer):
  text = ("U.S. NNP B-NP B-LOC\nembassy NN I-NP O\nreopened VBD B-VP O\n1996-08-30 CD B-NP O\n"
          "Schwarzenegger NNP B-NP B-PER\nLos NNP B-NP B-LOC\nAngeles NNP I-NP I-LOC\n")
  task = _task(tmp_path, text, max_seq_length=24, document_context=False)
  [sentence] = task.read_examples("train")
  features = task.convert_examples([sentence], tokenizer, True)
  [record] = features.records
  assert features.extras is None  # Training features: nothing to post-process.
  pieces = _pieces(tokenizer, record)
  assert pieces == ["[CLS]", "u", ".", "s", ".", "embassy", "reopened", "1996", "-", "08", "-",
                    "30", "schwarz", "##ene", "##gger", "los", "angeles", "[SEP]"]
  label = {t: i for i, t in enumerate(task.config.labels)}
  expected = np.full(24, -1)
  expected[[1, 5, 6, 7, 12, 15, 16]] = [label[t] for t in sentence.tags]
  # A word's later basic tokens (u|.|s|. and 1996|-|08|-|30) carry its continuation tag, for
  # serving, which tags the reference tokenizer's words; ##-pieces stay ignored.
  expected[[2, 3, 4]] = label["I-LOC"]
  expected[[8, 9, 10, 11]] = label["O"]
  np.testing.assert_array_equal(record["label_ids"], expected)
  assert record["segment_ids"].tolist() == [0] * 24 and record["input_ids"][18:].sum() == 0


def test_a_continuation_tag_outside_the_label_set_is_ignored(tmp_path, tokenizer):
  task = _task(tmp_path, "U.S. NNP B-NP B-LOC\nsaid VBD B-VP O\n", max_seq_length=16,
               document_context=False)
  [record] = task.convert_examples(task.read_examples("train"), tokenizer, True).records
  assert record["label_ids"][:7].tolist() == [-1, task.config.labels.index("B-LOC"), -1, -1, -1,
                                              task.config.labels.index("O"), -1]
  assert [ner.continuation(t) for t in ("O", "B-LOC", "I-LOC")] == ["O", "I-LOC", "I-LOC"]


def _document(num_sentences: int, words_per_sentence: int, offset: int = 0) -> str:
  """A document whose words are distinct single pieces ("w0", "w1" ... are not; numbers are),
  so positions can be traced: word k of the document is the number 100 + offset + k."""
  lines, k = ["-DOCSTART- -X- -X- O", ""], offset
  for _ in range(num_sentences):
    for i in range(words_per_sentence):
      lines.append(f"{100 + k} CD O {'B-PER' if i == 0 else 'O'}")
      k += 1
    lines.append("")
  return "\n".join(lines) + "\n"


def test_document_context_fills_the_window_balanced(tmp_path, tokenizer):
  text = _document(7, 5) + _document(1, 5, offset=100)
  task = _task(tmp_path, text, max_seq_length=16)
  sentences = task.read_examples("train")
  features = task.convert_examples(sentences, tokenizer, False)
  assert len(features) == 8 and features.example_index.tolist() == list(range(8))
  for index, (record, extra) in enumerate(zip(features.records, features.extras)):
    pieces = _pieces(tokenizer, record)[1:-1]
    words = [int(p) - 100 for p in pieces]
    own = [int(w) - 100 for w in sentences[index].words]
    # A contiguous stretch of its own document only, holding the whole sentence.
    assert words == list(range(words[0], words[0] + len(words)))
    assert set(own) <= set(words) and len({w // 100 for w in words}) == 1
    # Labels on the sentence's own words only, at their positions.
    assert [int(p) - 100 for p in np.array(pieces)[extra.positions - 1]] == own
    assert np.flatnonzero(record["label_ids"] >= 0).tolist() == extra.positions.tolist()
    if index < 7:  # The 35-word document fills the window: 14 pieces.
      assert len(words) == 14
      left, right = own[0] - words[0], words[-1] - own[-1]
      if 0 < words[0] and words[-1] < 34:  # Context on both sides: balanced.
        assert (left, right) == (4, 5)
    else:  # A document of one sentence has no context to add.
      assert words == own
  task.config.document_context = False
  alone = task.convert_examples(sentences, tokenizer, False)
  assert [len(_pieces(tokenizer, r)) for r in alone.records] == [7] * 8


@pytest.mark.parametrize("document_context", [True, False])
def test_a_long_sentence_is_split_and_every_word_predicted_once(tmp_path, tokenizer,
                                                                 document_context):
  # 40 words of 1-3 pieces, and one of 30 pieces (longer than the window: cut).
  rng = random.Random(0)
  words = [rng.choice(["a", "1996-08", "don't", "ab-cd-ef"]) for _ in range(40)]
  words[17] = "-".join(["x"] * 15)
  tags = [rng.choice(["O", "B-LOC", "B-PER"]) for _ in words]
  text = "\n".join(f"{w} {t}" for w, t in zip(words, tags)) + "\n\nshort B-PER\nend O\n"
  task = _task(tmp_path, text, max_seq_length=16, document_context=document_context)
  sentences = task.read_examples("train")
  features = task.convert_examples(sentences, tokenizer, False)
  assert len(features) > 5
  predicted = []
  for index, extra in zip(features.example_index, features.extras):
    predicted += [(int(index), extra.first_word + k) for k in range(len(extra.positions))]
  assert sorted(predicted) == [(0, k) for k in range(40)] + [(1, 0), (1, 1)]
  assert len(set(predicted)) == len(predicted)
  for record, extra in zip(features.records, features.extras):
    # Continuation labels too stay among the feature's own words: after its first word's
    # first piece, before [SEP].
    labelled = np.flatnonzero(record["label_ids"] >= 0)
    assert labelled.min() == extra.positions[0] and labelled.max() < record["input_mask"].sum() - 1
  # The gold label ids as the model's output come back as the gold tags.
  outputs = {"label_ids": np.maximum(np.array([r["label_ids"] for r in features.records]), 0)}
  assert task.postprocess(sentences, features, outputs) == [s.tags for s in sentences]
  assert max(r["input_mask"].sum() for r in features.records) == 16


# Loss and scores.
def test_loss_is_the_mean_over_labelled_positions(tmp_path):
  task = _task(tmp_path)
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, 6)).astype(np.float32)
  labels = np.array([[-1, 2, -1, 0, -1], [-1, 5, 1, -1, -1]], np.int32)
  loss, metrics = task.loss({"label_ids": tf.constant(labels)},
                            {"logits": tf.constant(logits, tf.bfloat16)})
  logits = tf.cast(tf.cast(logits, tf.bfloat16), tf.float32).numpy()
  log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  labelled = np.argwhere(labels >= 0)
  expected = -np.mean([log_p[b, s, labels[b, s]] for b, s in labelled])
  assert loss.dtype == tf.float32 and abs(float(loss) - expected) < 1e-5
  hits = [logits[b, s].argmax() == labels[b, s] for b, s in labelled]
  assert float(metrics["accuracy"]) == pytest.approx(np.mean(hits))


def test_scores_and_report_are_conllevals():
  """Hand-made predictions; the report is the original conlleval script's output for the
  predictions.txt they make (run once with perl)."""
  sentences = [ner.Sentence(["Alice", "Smith", "visited", "Paris"],
                            ["B-PER", "I-PER", "O", "B-LOC"], 0, 3, True),
               ner.Sentence(["the", "UN", "and", "EU"], ["I-ORG", "I-ORG", "B-ORG", "O"], 0, 8)]
  predictions = [["B-PER", "I-PER", "O", "B-ORG"], ["I-ORG", "O", "B-ORG", "O"]]
  scores = ner.ConllScores.of(sentences, predictions)
  assert scores.report() == (
      "processed 9 tokens with 4 phrases; found: 4 phrases; correct: 2.\n"
      "accuracy:  77.78%; precision:  50.00%; recall:  50.00%; FB1:  50.00\n"
      "              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  0\n"
      "              ORG: precision:  33.33%; recall:  50.00%; FB1:  40.00  3\n"
      "              PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n")
  metrics = scores.metrics()
  assert metrics["f1"] == 50 and metrics["accuracy"] == pytest.approx(700 / 9)
  assert metrics["f1_ORG"] == pytest.approx(40) and metrics["recall_LOC"] == 0


# The toy task, end to end.
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """One run on the toy task (train, eval, predict) through runner.run: (output_dir, results)."""
  tmp = tmp_path_factory.mktemp("toy")
  make_conll(tmp / "data", {"train": 40, "dev": 12})
  task = finetuning.build("ner", {"max_seq_length": 32}, data_dir=str(tmp / "data"))
  args = runner.RunArgs(output_dir=str(tmp / "out"), bert_config_file=tiny_config(
      tmp / "bert_config.json"), vocab_file=VOCAB, do_train=True, do_eval=True, do_predict=True,
      train_batch_size=16, eval_batch_size=16, predict_batch_size=16, learning_rates=(5e-3,),
      num_train_epochs=8, iterations_per_loop=100)
  return str(tmp / "out"), runner.run(task, args, distribute.get_strategy("one_device"))


def _read_predictions(path) -> tuple[list[list[str]], list[list[str]]]:
  """predictions.txt's gold and predicted tag sequences, a sentence (or -DOCSTART-) each."""
  gold, guess = [], []
  with open(path, encoding="utf-8") as f:
    blocks = f.read().split("\n\n")
  for block in filter(None, (b.strip("\n") for b in blocks)):
    rows = [line.split(" ") for line in block.split("\n")]
    assert all(len(r) == 3 for r in rows)
    gold.append([r[1] for r in rows])
    guess.append([r[2] for r in rows])
  return gold, guess


@pytest.mark.slow
def test_the_toy_task_is_learned_and_its_files_rescore(trained):
  out, results = trained
  best = results["best"]
  # The tags follow from the words; a random tag per word scores an F1 near 0.
  assert best["eval_f1"] > 90, best
  assert {"eval_precision", "eval_recall", "eval_accuracy", "eval_f1_PER", "eval_f1_LOC",
          "eval_f1_ORG"} <= set(best)
  with open(os.path.join(out, "eval_results.txt")) as f:
    assert f"eval_f1 = {best['eval_f1']}" in f.read().splitlines()
  # predictions.txt (test.txt is dev.txt) re-scored by seqeval directly gives the numbers the
  # run reported, -DOCSTART- lines counted as tokens as conlleval counts them.
  gold, guess = _read_predictions(os.path.join(out, "predictions.txt"))
  assert gold[0] == ["O"] and sum(g == ["O"] for g in gold) >= 12  # The -DOCSTART- lines.
  assert 100 * f1_score(gold, guess) == pytest.approx(best["eval_f1"], abs=1e-9)
  assert 100 * accuracy_score(gold, guess) == pytest.approx(best["eval_accuracy"], abs=1e-9)
  with open(os.path.join(out, "conlleval_results.txt")) as f:
    report = f.read()
  assert f"FB1: {best['eval_f1']:6.2f}\n" in report
  assert f"PER: precision: {best['eval_precision_PER']:6.2f}%" in report


@pytest.mark.slow
def test_a_predict_only_run_restores_the_tagger(trained, tmp_path):
  out, results = trained
  data = os.path.join(os.path.dirname(out), "data")
  task = finetuning.build("ner", {"max_seq_length": 32}, data_dir=data)
  with open(os.path.join(out, "predictions.txt")) as f:
    before = f.read()
  # The model files the run wrote beside its checkpoint; eval batches of another size.
  args = runner.RunArgs(output_dir=out, bert_config_file=os.path.join(out, "bert_config.json"),
                        vocab_file=os.path.join(out, "vocab.txt"), do_eval=True,
                        do_predict=True, eval_batch_size=5, predict_batch_size=3)
  again = runner.run(task, args, distribute.get_strategy("one_device"))["best"]
  assert again["eval_f1"] == results["best"]["eval_f1"]
  with open(os.path.join(out, "predictions.txt")) as f:
    assert f.read() == before
  assert task.warmup_inputs(task.read_examples("dev"))[0]["text"]
  assert [r["text"] for r in task.warmup_inputs()][2] == ""


@pytest.mark.slow
def test_cli_exits_non_zero_naming_the_line_or_the_flag(tmp_path):
  """run_ner's one-line errors, both runs in one process: a tag the scheme forbids (its file
  and line), a --feature_based name that is none of Table 7's."""
  os.makedirs(tmp_path / "data")
  _write(tmp_path / "data" / "train.txt", CONLL)
  flags = [f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'out'}",
           f"--bert_config_file={tiny_config(tmp_path / 'c.json')}", f"--vocab_file={VOCAB}",
           "--max_seq_length=16", "--do_train"]
  bad_tag, bad_name = run_cases("bert_tf.scripts.run_ner",
                                [[*flags, "--scheme=iob1"],
                                 [*flags, "--feature_based=last_four_concat"]])
  train = tmp_path / "data" / "train.txt"
  for result in bad_tag, bad_name:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
  [line] = [line for line in bad_tag.stderr.splitlines() if "run_ner: error:" in line]
  assert line.startswith(f"run_ner: error: {train}:3: B-") and "which IOB1 forbids" in line
  assert [line for line in bad_name.stderr.splitlines() if "run_ner: error:" in line] == [
      "run_ner: error: --feature_based=last_four_concat: must be one of embeddings, "
      "second_to_last, last, sum_last_four, concat_last_four, sum_all (or empty: fine-tuning)"]
