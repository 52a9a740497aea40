"""run_swag's multiple-choice task: SWAG's and the generic layout's readers and their errors,
the features (four sequences, segment ids, truncation), a tiny fresh BERT learning a toy choice
through the runner (its files), the export's raw-text signature against the Python path, and
the CLI's one-line errors. Small files written here.

The toy choice: of four endings of filler words, the right one holds "good" and the others
"bad"; a fresh tiny BERT learns it in a few dozen steps (matching a word of the context, the
harder rule, takes it several times as many).
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.common.errors import DataError
from bert_tf.tasks import multiple_choice as mc
from bert_tf.finetuning import runner
from bert_tf.finetuning.inputs import truncate_pair
from bert_tf.training import distribute
from export import tf_serving
from toys import SWAG_HEADER, VOCAB, make_swag, swag_rows, tiny_config, write_csv

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


# --- Readers. ---------------------------------------------------------------------------------

def test_swag_layout(tmp_path):
  rows = [["0", "lsmdc1", "19", "Someone, then someone walks in.", "Someone, then someone",
           "walks in.", "gold", "He sits.", "She, smiling, waves.", "It rains.", "A \"dog\" barks.",
           "1"]]
  write_csv(tmp_path / "val.csv", SWAG_HEADER, rows)
  write_csv(tmp_path / "test.csv", SWAG_HEADER[:-1], [rows[0][:-1]])
  task = finetuning.build("multiple_choice", {"task_name": "SWAG"}, data_dir=str(tmp_path))
  assert task.config.num_choices == 4
  assert task.splits("train") == ["train"] and task.splits("eval") == ["val"]
  assert task.splits("predict") == ["test"]
  [example] = task.read_examples("val")
  # sent1 is the context; sent2 starts every ending (CSV quoting kept the commas and quotes).
  assert example == mc.ChoiceExample(
      "val-0", "Someone, then someone",
      ("walks in. He sits.", "walks in. She, smiling, waves.", "walks in. It rains.",
       "walks in. A \"dog\" barks."), 1)
  # The test file has no label column.
  assert task.read_examples("test")[0].label is None


def test_generic_layout_takes_n_from_the_header(tmp_path):
  with open(tmp_path / "train.tsv", "w") as f:
    f.write("guid\tcontext\tending0\tending1\tending2\tlabel\n"
            "q1\tThe sky is\tblue.\tloud.\tsalty.\t0\n"
            "q2\tFire is\tcold.\thot.\twet.\t1\n")
  with open(tmp_path / "test.tsv", "w") as f:
    # A blank label in a test file reads as none.
    f.write("context\tending0\tending1\tending2\tlabel\nIce is\tcold.\thot.\tloud.\t\n")
  task = finetuning.build("multiple_choice", {"task_name": "generic", "max_seq_length": 16},
                     data_dir=str(tmp_path))
  assert (task.config.num_choices, task.splits("eval")) == (3, ["dev"])
  assert task.read_examples("train") == [
      mc.ChoiceExample("q1", "The sky is", ("blue.", "loud.", "salty."), 0),
      mc.ChoiceExample("q2", "Fire is", ("cold.", "hot.", "wet."), 1)]
  assert task.read_examples("test") == [
      mc.ChoiceExample("test-0", "Ice is", ("cold.", "hot.", "loud."), None)]
  assert task.record_layout(True)[0].length == 3 * 16
  with pytest.raises(DataError, match=r"dev\.tsv: file not found \(the dev split, for --do_eval"):
    task.check_inputs(["train", "eval"])


@pytest.mark.parametrize("edit,message", [
    (lambda h, r: (h, [r[0][:9]]), r"train\.csv:2: 9 columns, expected 12"),
    (lambda h, r: (h, [r[0][:10] + ["", "0"]]),
     r"train\.csv:2: ending3 is empty: each row needs 4 endings"),
    (lambda h, r: (h, r[:1] + [r[1][:-1] + ["4"]]),
     r"train\.csv:3: label '4' is not one of 0\.\.3"),
    (lambda h, r: (h, [r[0][:-1] + ["-1"]]), r"train\.csv:2: label '-1' is not one of 0\.\.3"),
    (lambda h, r: ([n if n != "sent2" else "sent_2" for n in h], r),
     r"train\.csv:1: header has no 'sent2' column"),
    (lambda h, r: (h[:-1], [x[:-1] for x in r]), r"train\.csv:1: header has no 'label' column"),
    (lambda h, r: (h, []), r"train\.csv: no examples"),
])
def test_swag_errors_name_file_and_line(tmp_path, edit, message):
  header, rows = edit(list(SWAG_HEADER), swag_rows(2, 0))
  write_csv(tmp_path / "train.csv", header, rows)
  task = finetuning.build("multiple_choice", {"task_name": "swag"}, data_dir=str(tmp_path))
  with pytest.raises(DataError, match=message):
    task.read_examples("train")


def test_generic_errors(tmp_path):
  with open(tmp_path / "train.csv", "w") as f:
    f.write("context,ending0,label\nA,b,0\n")
  with pytest.raises(DataError, match=r"train\.csv:1: header .* names 1 ending column"):
    finetuning.build("multiple_choice", {"task_name": "generic"}, data_dir=str(tmp_path))
  with open(tmp_path / "train.csv", "w") as f:
    f.write("context,ending0,ending1,ending2,label\nA,b,c,d,2\n")
  with open(tmp_path / "dev.csv", "w") as f:
    f.write("context,ending0,ending1,label\nA,b,c,1\n")
  task = finetuning.build("multiple_choice", {"task_name": "generic"}, data_dir=str(tmp_path))
  assert task.read_examples("train")[0].label == 2
  with pytest.raises(DataError, match=r"dev\.csv:1: header has no 'ending2' column"):
    task.read_examples("dev")
  with pytest.raises(DataError, match=r"train\.tsv: file not found \(nor the dev and test"):
    finetuning.build("multiple_choice", {"task_name": "generic"}, data_dir=str(tmp_path / "absent"))
  with pytest.raises(ValueError, match="--task_name=race: one of swag, generic"):
    finetuning.build("multiple_choice", {"task_name": "race"}, data_dir=str(tmp_path))


def test_a_row_of_more_columns_than_the_header_is_refused(tmp_path):
  """A tab inside an ending used to shift the columns after it (endings cut and shifted, the
  last dropped): refused like a short row, naming file and line."""
  with open(tmp_path / "train.tsv", "w") as f:
    f.write("context\tending0\tending1\tlabel\nA\tb\tc\t1\nB\tb, then\tx\tc\t0\n")
  task = finetuning.build("multiple_choice", {"task_name": "generic"}, data_dir=str(tmp_path))
  with pytest.raises(DataError, match=r"train\.tsv:3: 5 columns, expected 4 as the header \(a "
                     r"tab inside a text\?\)$"):
    task.read_examples("train")
  rows = swag_rows(2, 0)
  rows[1].insert(8, "an ending cut by an unquoted comma")
  write_csv(tmp_path / "train.csv", SWAG_HEADER, rows)
  task = finetuning.build("multiple_choice", {"task_name": "swag"}, data_dir=str(tmp_path))
  with pytest.raises(DataError, match=r"train\.csv:3: 13 columns, expected 12 as the header "
                     r"\(a comma inside a text\?\)$"):
    task.read_examples("train")


def test_a_split_of_other_endings_is_refused(tmp_path):
  """A dev file of 5 endings used to be scored as 4-way, its last ending ignored."""
  with open(tmp_path / "train.tsv", "w") as f:
    f.write("context\tending0\tending1\tending2\tending3\tlabel\nA\tb\tc\td\te\t1\n")
  with open(tmp_path / "dev.tsv", "w") as f:
    f.write("context\tending0\tending1\tending2\tending3\tending4\tlabel\n"
            "A\tb\tc\td\te\tf\t4\n")
  task = finetuning.build("multiple_choice", {"task_name": "generic"}, data_dir=str(tmp_path))
  assert task.config.num_choices == 4
  with pytest.raises(DataError, match=r"dev\.tsv:1: header names 5 ending columns; the task has "
                     r"4 \(ending0 \.\.\. ending3\): every file of a task needs the same endings"):
    task.read_examples("dev")
  # SWAG's layout too: its files have 4.
  write_csv(tmp_path / "val.csv", SWAG_HEADER[:-1] + ["ending4", "label"],
            [r[:-1] + ["more", r[-1]] for r in swag_rows(2, 1)])
  with pytest.raises(DataError, match=r"val\.csv:1: header names 5 ending columns; the task has 4"):
    finetuning.build("multiple_choice", {"task_name": "swag"},
                data_dir=str(tmp_path)).read_examples("val")


# --- Features. --------------------------------------------------------------------------------

def test_features_are_four_packed_sequences(tokenizer):
  example = mc.ChoiceExample("0", "The man walks in.", ("He sits down.", "A dog", "x y", "Fine"),
                             2)
  [feature] = mc.convert_examples([example], 16, tokenizer)
  assert feature["label_ids"] == 2 and feature["is_real_example"] == 1
  ids = feature["input_ids"].reshape(4, 16)
  segments = feature["segment_ids"].reshape(4, 16)
  mask = feature["input_mask"].reshape(4, 16)
  for i, ending in enumerate(example.endings):
    n = int(mask[i].sum())
    tokens = tokenizer.convert_ids_to_tokens(ids[i, :n])
    assert tokens == (["[CLS]"] + tokenizer.tokenize(example.context) + ["[SEP]"] +
                      tokenizer.tokenize(ending) + ["[SEP]"])
    assert (ids[i, n:] == 0).all() and mask[i, :n].all()
    first_b = tokens.index("[SEP]") + 1
    assert (segments[i, :first_b] == 0).all() and (segments[i, first_b:n] == 1).all()
    assert (segments[i, n:] == 0).all()


def test_truncation_pops_from_the_longer(tokenizer):
  context = " ".join(f"w{i}" for i in range(30))
  endings = ("short end", " ".join(["long"] * 40), "a b c d e f g h", "")
  [feature] = mc.convert_examples([mc.ChoiceExample("0", context, endings, 0)], 24, tokenizer)
  ids = feature["input_ids"].reshape(4, 24)
  context_ids = tokenizer.tokenize_ids([context])[0]
  for i, ending in enumerate(endings):
    ending_ids = tokenizer.tokenize_ids([ending])[0]
    a, b = truncate_pair(context_ids, ending_ids, 24 - 3)
    expected = [tokenizer.cls_id, *a, tokenizer.sep_id, *b, tokenizer.sep_id]
    assert ids[i].tolist() == expected + [0] * (24 - len(expected))
  # The long ending and the long context share the room; the short ending is whole.
  assert ids[1].tolist().count(tokenizer.vocab["long"]) == 10
  assert feature["input_mask"].reshape(4, 24).sum(1).tolist() == [24, 24, 24, 24]


# --- Training through the runner, files, export. ----------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A tiny fresh BERT fine-tuned on the toy SWAG (train, eval, predict): (args, results)."""
  tmp = tmp_path_factory.mktemp("swag")
  make_swag(tmp / "data")
  args = runner.RunArgs(
      output_dir=str(tmp / "out"), bert_config_file=tiny_config(tmp / "bert_config.json"),
      vocab_file=VOCAB, do_train=True, do_eval=True, do_predict=True, train_batch_size=16,
      eval_batch_size=16, predict_batch_size=4, learning_rates=(3e-3,), num_train_epochs=4,
      iterations_per_loop=64, export_dir=str(tmp / "serving"))
  task = finetuning.build("multiple_choice", {"task_name": "swag", "max_seq_length": 20},
                     data_dir=str(tmp / "data"))
  return task, args, runner.run(task, args, distribute.get_strategy("one_device"),
                                tf_serving.export)


@pytest.mark.slow
def test_fine_tuning_learns_the_toy_choice(trained):
  _, args, results = trained
  best = results["best"]
  assert best["global_step"] == 256 // 16 * 4
  assert best["eval_accuracy"] >= 0.9, best  # Chance is 0.25.
  with open(os.path.join(args.output_dir, "eval_results.txt")) as f:
    assert f"eval_accuracy = {best['eval_accuracy']}" in f.read().splitlines()


@pytest.mark.slow
def test_test_results_hold_four_probabilities(trained):
  task, args, _ = trained
  probabilities = np.loadtxt(os.path.join(args.output_dir, "test_results.tsv"))
  assert probabilities.shape == (6, 4)  # The 2 padding examples of the last batch are gone.
  np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
  # The test file's labels (cut from it) are those of swag_rows(6, 2).
  labels = [int(r[-1]) for r in swag_rows(6, 2)]
  assert (np.argmax(probabilities, 1) == labels).mean() >= 5 / 6
  assert task.read_examples("test")[0].label is None


@pytest.mark.slow
def test_export_round_trip(trained, tokenizer):
  """The run's export (--export_dir) answers raw text as the restored model answers features."""
  task, args, results = trained
  path = results["best"]["export_path"]
  _, model, _ = runner.load_trained(args.output_dir)
  examples = task.read_examples("val")[:5] + [mc.ChoiceExample(
      "long", "red " * 50, ("blue", "red " * 30, "", "green green"), 0)]
  features = mc.convert_examples(examples, 20, tokenizer)
  inputs = {name: tf.constant(np.stack([f[record] for f in features]), tf.int32)
            for record, name in (("input_ids", "input_word_ids"), ("input_mask", "input_mask"),
                                 ("segment_ids", "input_type_ids"))}
  expected = model(inputs, training=False).numpy()
  assert expected.shape == (6, 4) and np.ptp(expected) > 1e-2

  loaded = tf.saved_model.load(path)
  text = loaded.signatures[tf_serving.TEXT_SIGNATURE]
  assert sorted(text.structured_input_signature[1]) == [
      "context", "ending0", "ending1", "ending2", "ending3"]
  out = text(context=tf.constant([e.context for e in examples]),
             **{f"ending{i}": tf.constant([e.endings[i] for e in examples]) for i in range(4)})
  np.testing.assert_allclose(out["logits"], expected, atol=1e-5)
  np.testing.assert_allclose(out["probabilities"], tf.nn.softmax(expected), atol=1e-6)
  assert out["label"].numpy().tolist() == np.argmax(expected, 1).tolist()
  ids = loaded.signatures[mc.IDS_SIGNATURE](
      **{k: tf.reshape(v, [6, 4, 20]) for k, v in inputs.items()})
  np.testing.assert_allclose(ids["logits"], expected, atol=1e-5)
  # Warm-up requests: the first dev examples, each alone, then together.
  first = {"context": examples[0].context,
           **{f"ending{i}": t for i, t in enumerate(examples[0].endings)}}
  warmup = [r.numpy() for r in tf.data.TFRecordDataset(os.path.join(path, tf_serving.WARMUP_FILE))]
  assert len(warmup) == 4 and warmup[0] == tf_serving.prediction_log(
      "bert", tf_serving.TEXT_SIGNATURE,
      {k: np.array([v.encode()], dtype=object) for k, v in first.items()})


# --- The command line. ------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_exits_with_one_line(tmp_path):
  make_swag(tmp_path / "data", num_train=4, num_val=4)
  rows = swag_rows(4, 1)
  rows[1][-1] = "5"
  write_csv(tmp_path / "data" / "val.csv", SWAG_HEADER, rows)
  result = subprocess.run(
      [sys.executable, "-m", "bert_tf.scripts.run_swag", f"--data_dir={tmp_path / 'data'}",
       f"--output_dir={tmp_path / 'out'}",
       f"--bert_config_file={tiny_config(tmp_path / 'bert_config.json')}",
       f"--vocab_file={VOCAB}", "--max_seq_length=16", "--do_train", "--do_eval",
       "--do_predict"],
      capture_output=True, text=True, timeout=900, env=ENV)
  assert result.returncode == 1
  lines = [l for l in result.stderr.splitlines() if "run_swag: error:" in l]
  assert lines == [f"run_swag: error: {tmp_path / 'data' / 'val.csv'}:3: label '5' is not one "
                   "of 0..3"], result.stderr[-2000:]
  assert "Traceback" not in result.stderr
