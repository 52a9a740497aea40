"""Fine-tuning end to end on toy tasks a tiny fresh BERT learns in a few dozen steps.

The toy rule: a sentence of filler words holds "good" (label 1) or "bad" (label 0) somewhere;
the [CLS] output must find it through attention.

The trained run's model is also the --init_checkpoint of later runs (issue 30, part A): it
restores its head (ours, or google-research/bert's TF1 output layer), nothing untrained
predicts, and a task of other labels (STS-B) draws a fresh head.
"""
import glob
import json
import logging
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from bert_tf import finetuning
from bert_tf.modeling import checkpoints
from bert_tf.modeling.configs import BertConfig
from bert_tf.scripts import cli
from bert_tf.tasks.classification import glue
from bert_tf.finetuning import runner
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import distribute
import entry_points
from toys import MINILM, VOCAB, classifier_runner, make_sst2, make_stsb, tiny_config, toy_args


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """One fine-tuning run on the toy SST-2 (train, eval, predict): (args, results)."""
  tmp = str(tmp_path_factory.mktemp("toy"))
  make_sst2(os.path.join(tmp, "data"))
  # Two layers: from one, STS-B's fresh regression head (test_regression_task_...) reaches a
  # Pearson of 0.88 in its 16 epochs, not 0.95.
  args = toy_args(tmp, os.path.join(tmp, "data"), os.path.join(tmp, "out"), do_train=True,
                  do_eval=True, do_predict=True,
                  bert_config_file=tiny_config(os.path.join(tmp, "two_layers.json"), 2))
  return args, classifier_runner(args).run()


@pytest.mark.slow
def test_fine_tuning_learns_the_toy_rule(trained):
  args, results = trained
  best = results["best"]
  assert best["global_step"] == 256 // 16 * 6
  assert best["eval_accuracy"] >= 0.95, best
  assert best["eval_loss"] < 0.3, best
  # eval_results.txt as the original's: sorted "key = value" lines.
  with open(os.path.join(args['output_dir'], "eval_results.txt")) as f:
    lines = f.read().splitlines()
  assert lines == sorted(lines) and f"eval_accuracy = {best['eval_accuracy']}" in lines
  with open(os.path.join(args['output_dir'], "eval_results.json")) as f:
    assert json.load(f)["best"]["eval_accuracy"] == best["eval_accuracy"]


@pytest.mark.slow
def test_predictions_files(trained):
  args, _ = trained
  probabilities = np.loadtxt(os.path.join(args['output_dir'], "test_results.tsv"))
  assert probabilities.shape == (10, 2)  # The 2 padding examples of the last batch are gone.
  np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-5)
  with open(os.path.join(args['output_dir'], "SST-2.tsv")) as f:
    rows = [line.split("\t") for line in f.read().splitlines()]
  assert rows[0] == ["index", "prediction"]
  assert [r[0] for r in rows[1:]] == [str(i) for i in range(10)]
  # Test sentence i holds "good" when i is odd.
  predicted = [int(r[1]) for r in rows[1:]]
  assert sum(p == i % 2 for i, p in enumerate(predicted)) >= 9
  assert predicted == np.argmax(probabilities, 1).tolist()
  with open(os.path.join(args['output_dir'], runner.TASK_CONFIG)) as f:
    assert json.load(f) == dict(task="classification", task_name="SST-2", labels=["0", "1"],
                                is_pair=False, max_seq_length=32, do_lower_case=True)


@pytest.mark.slow
def test_predict_only_run_restores_the_checkpoint(trained, tmp_path):
  args, _ = trained
  with open(os.path.join(args['output_dir'], "test_results.tsv")) as f:
    before = f.read()
  again = (dict(args, do_train=False, do_eval=True,
                                        do_predict=True))
  results = classifier_runner(again).run()
  with open(os.path.join(args['output_dir'], "test_results.tsv")) as f:
    assert f.read() == before
  assert results["best"]["eval_accuracy"] >= 0.95


@pytest.mark.slow
def test_rerun_with_other_settings_is_refused_and_with_the_same_resumes(trained):
  args, results = trained
  out = args["output_dir"]
  before = {name: open(os.path.join(out, name)).read()
            for name in ("eval_results.txt", "task_config.json", "bert_config.json")}
  with pytest.raises(ValueError) as e:
    classifier_runner(dict(args, learning_rates=(1e-3,))).run()
  assert str(e.value).startswith(f"{out}/run_settings.json: --output_dir holds a run trained "
                                 "with other settings (learning_rates [0.003] -> [0.001]). ")
  # Unset, length_buckets is max_seq_length (each batch cut to its longest): it moves too.
  with pytest.raises(ValueError, match=r"\(length_buckets 32 -> 24; task.max_seq_length 32 -> 24; "
                     r"train_records_sha256 '[0-9a-f]{64}' -> '[0-9a-f]{64}'\)"):
    classifier_runner(dict(args, max_seq_length=24)).run()
  # Refused before anything was written: the old run is whole.
  assert before == {name: open(os.path.join(out, name)).read() for name in before}
  # The same settings resume: the run is complete, so it only evaluates again.
  again = classifier_runner(dict(args, do_predict=False)).run()["best"]
  assert again["global_step"] == results["best"]["global_step"]
  assert again["eval_accuracy"] == results["best"]["eval_accuracy"]


# The trained run's model as --init_checkpoint (issue 30, part A).
@pytest.mark.slow
def test_a_fine_tuned_init_checkpoint_predicts_with_its_head(trained, tmp_path, caplog):
  sst2, _ = trained
  caplog.set_level(logging.INFO, logger="absl")  # Whatever verbosity an earlier test left.
  args = dict(sst2, do_train=False, do_eval=False, output_dir=str(tmp_path / "new"),
              init_checkpoint=sst2["output_dir"], bert_config_file=None, vocab_file=None)
  classifier_runner(args).run()
  with open(tmp_path / "new" / "test_results.tsv") as new, open(
      os.path.join(sst2["output_dir"], "test_results.tsv")) as old:
    assert new.read() == old.read()
  assert "initialized the whole model, head included" in caplog.text
  # At the trained model's global step, as its checkpoint says.
  latest = tf.train.latest_checkpoint(sst2["output_dir"])
  _, step = classifier_runner(dict(args, output_dir=str(tmp_path / "new2"))).restore()
  assert step > 0 and latest.endswith(f"ckpt-{step}")


def _as_tf1(output_dir: str, folder, head: tuple[str, str]) -> str:
  """A trained classifier's weights under google-research/bert's names, its head under
  `head` (kernel [outputs, hidden], bias), with bert_config.json and vocab.txt: the prefix."""
  task = finetuning.build("classification", {"task_name": "SST-2", "max_seq_length": 32},
                     data_dir=os.path.join(os.path.dirname(output_dir), "data"))
  config = checkpoints.load_config(output_dir)
  model = task.build_model(config)
  runner.restore(model, tf.train.latest_checkpoint(output_dir))
  encoder = model.checkpoint_items["encoder"]
  ours = checkpoints.our_variables({"encoder": encoder}, checkpoints.TF1,
                                   config.num_hidden_layers)
  arrays = {}
  for part in ("encoder", "pooler"):
    for our_name, theirs, transposed in checkpoints.TF1.rows(part, config.num_hidden_layers):
      arrays[theirs] = checkpoints.stored_value(ours[our_name].numpy(), our_name, transposed)
  kernel, bias = (v.numpy() for v in sorted(
      (v for v in model.variables if "sentence_prediction" in v.name), key=lambda v: -len(v.shape)))
  arrays[head[0]], arrays[head[1]] = kernel.T, bias
  os.makedirs(folder)
  prefix = str(folder / "model.ckpt-8")
  names = sorted(arrays)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(arrays[n]) for n in names])
  config.to_json_file(str(folder / "bert_config.json"))
  shutil.copy(VOCAB, folder / "vocab.txt")
  return prefix


@pytest.mark.slow
def test_the_originals_fine_tuned_tf1_checkpoint_predicts_with_its_head(trained, tmp_path):
  sst2, _ = trained
  prefix = _as_tf1(sst2["output_dir"], tmp_path / "tf1", ("output_weights", "output_bias"))
  args = dict(sst2, do_train=False, do_eval=False, output_dir=str(tmp_path / "new"),
              init_checkpoint=prefix, bert_config_file=None, vocab_file=None)
  classifier_runner(args).run()
  np.testing.assert_allclose(np.loadtxt(tmp_path / "new" / "test_results.tsv"),
                             np.loadtxt(os.path.join(sst2["output_dir"], "test_results.tsv")),
                             atol=2e-6)
  # run_squad's output layer is no classifier: refused, named.
  prefix = _as_tf1(sst2["output_dir"], tmp_path / "squad",
                   ("cls/squad/output_weights", "cls/squad/output_bias"))
  with pytest.raises(ValueError, match="its head is run_squad's cls/squad/output_weights, not "
                     "a classification head, so without --do_train"):
    classifier_runner(dict(args, init_checkpoint=prefix, output_dir=str(tmp_path / "new2")))


@pytest.mark.slow
def test_nothing_untrained_predicts(trained, tmp_path):
  sst2, _ = trained
  args = dict(sst2, do_train=False, do_eval=False, output_dir=str(tmp_path / "new"),
              bert_config_file=None, vocab_file=None)
  with pytest.raises(ValueError, match=f"^--init_checkpoint={MINILM}: a Hugging Face model "
                     "fills the encoder only, so without --do_train the classification head "
                     "would be untrained"):
    classifier_runner(dict(args, init_checkpoint=MINILM))
  # A checkpoint with no task_config.json beside it: a pretraining one.
  pretrained = tmp_path / "pretrained"
  shutil.copytree(sst2["output_dir"], pretrained,
                  ignore=shutil.ignore_patterns("task_config.json", "*.tf_record"))
  with pytest.raises(ValueError, match="no task_config.json beside it"):
    classifier_runner(dict(args, init_checkpoint=str(pretrained)))


@pytest.mark.slow
def test_regression_task_from_a_classifier_with_a_fresh_head(trained, tmp_path, caplog):
  """STS-B from the toy SST-2 run's model: its encoder is taken, its head (other labels) is
  drawn fresh and learns the regression."""
  caplog.set_level(logging.INFO, logger="absl")  # Whatever verbosity an earlier test left.
  make_stsb(tmp_path / "data")
  args = toy_args(str(tmp_path), tmp_path / "data", tmp_path / "out", task_name="STS-B",
                  do_train=True, do_eval=True, do_predict=True, num_train_epochs=16,
                  init_checkpoint=trained[0]["output_dir"],
                  bert_config_file=trained[0]["bert_config_file"])
  best = classifier_runner(args).run()["best"]
  fresh = [r.getMessage() for r in caplog.records if "head is drawn fresh" in r.getMessage()]
  assert len(fresh) == 1 and "the trained model has ['0', '1']" in fresh[0], fresh
  # Labels take two values, so Spearman tops out at ~0.87 even for perfect predictions.
  assert best["eval_pearson"] > 0.95 and best["eval_spearman"] > 0.8, best
  assert best["eval_loss"] < 0.1, best  # The squared error: the scale is learned too.
  with open(tmp_path / "out" / "STS-B.tsv") as f:
    rows = [line.split("\t") for line in f.read().splitlines()[1:]]
  scores = np.array([float(r[1]) for r in rows])
  # Test sentence i holds "good" (score 4.5) when i is odd, "bad" (0.5) when even.
  np.testing.assert_allclose(scores, [0.5, 4.5] * 3, atol=0.5)


# A Hugging Face encoder folder (BertModel: encoder and pooler, as MiniLM's): transformers' own,
# tiny, of tests/fixtures/hf_heads. MiniLM itself (6 layers, H=384) cost this test ~20 CPU s for
# what a folder of 2 layers shows as well.
HF_ENCODER = os.path.join(os.path.dirname(__file__), "fixtures", "hf_heads", "bert_model")


@pytest.mark.slow
def test_init_checkpoint_hf_folder_supplies_config_vocab_and_weights(tmp_path):
  make_sst2(tmp_path / "data", num_dev=8)
  args = dict(task_name="sst-2", data_dir=str(tmp_path / "data"),
              output_dir=str(tmp_path / "out"), init_checkpoint=HF_ENCODER, max_seq_length=16,
              do_train=True, do_eval=True, num_train_epochs=0.125)  # One step.
  config, vocab_file = checkpoints.resolve_files(None, None, HF_ENCODER, 16)
  assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size,
          config.hidden_act) == (32, 2, 37, "gelu_exact")
  assert vocab_file == os.path.join(HF_ENCODER, "vocab.txt")
  # Its head is untrained: evaluating it without --do_train is refused.
  with pytest.raises(ValueError, match="a Hugging Face model fills the encoder only"):
    classifier_runner(dict(args, do_train=False))
  tuner = classifier_runner(args)
  model, step = tuner.restore()
  assert step == 0
  hf = safetensors_numpy.load_file(os.path.join(HF_ENCODER, "model.safetensors"))
  ours = model.checkpoint_items["encoder"].get_layer("word_embeddings").embeddings.numpy()
  theirs = hf.get("embeddings.word_embeddings.weight", hf.get("bert.embeddings.word_embeddings"
                                                              ".weight"))
  np.testing.assert_array_equal(ours, theirs)
  assert 0 <= tuner.run()["best"]["eval_accuracy"] <= 1


@pytest.mark.slow
def test_bad_inputs_raise_naming_the_file(tmp_path):
  make_sst2(tmp_path / "data", num_dev=8)
  args = toy_args(str(tmp_path), tmp_path / "data", tmp_path / "out", do_predict=True,
                  do_train=True)
  with open(tmp_path / "data" / "train.tsv", "a") as f:
    f.write("no label column here\n")
  with pytest.raises(glue.DataError, match=r"train\.tsv:258: 1 columns"):
    classifier_runner(args).run()
  os.remove(tmp_path / "data" / "test.tsv")
  # Before any training: a missing split file fails the run at once.
  with pytest.raises(glue.DataError, match=r"test\.tsv: file not found .*--do_predict"):
    classifier_runner(args)
  with pytest.raises(ValueError, match="unknown task 'sst3'"):
    classifier_runner((dict(args, task_name="sst3")))
  with pytest.raises(ValueError, match="2 runs .* need --do_eval"):
    classifier_runner((dict(args, learning_rates=(1e-5, 2e-5))))
  with pytest.raises(ValueError, match="At least one of"):
    classifier_runner((dict(args, do_train=False, do_predict=False)))
  with pytest.raises(ValueError, match="max_seq_length=128 is longer"):
    classifier_runner((dict(args, max_seq_length=128)))
  small = str(tmp_path / "small_vocab.json")
  BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=64).to_json_file(small)
  with pytest.raises(ValueError, match=r"vocab\.txt has 30522 tokens, but the bert config's "
                     r"vocab_size is 1000"):
    classifier_runner((dict(args, bert_config_file=small)))


@pytest.mark.slow
def test_cli_exits_non_zero_with_the_file_and_line(tmp_path):
  make_sst2(tmp_path / "data", num_train=4, num_dev=4)
  with open(tmp_path / "data" / "dev.tsv", "a") as f:
    f.write("a sentence\t7\n")
  result = subprocess.run(
      [sys.executable, "-m", "bert_tf.scripts.run_classifier", "--task_name=SST-2",
       f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'out'}",
       f"--bert_config_file={tiny_config(str(tmp_path / 'bert_config.json'))}",
       f"--vocab_file={VOCAB}", "--max_seq_length=16", "--do_train", "--do_eval"],
      capture_output=True, text=True, timeout=900,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode != 0
  assert "run_classifier: error:" in result.stderr
  assert f"{tmp_path / 'data' / 'dev.tsv'}:6: label '7' is not one of ['0', '1']" in (
      result.stderr)
  assert not (tmp_path / "out").exists()  # Refused before it wrote anything: no folder left.


def test_the_run_summary_says_what_a_sweep_did():
  results = {"best": {"learning_rate": 3e-5, "seed": 12346, "global_step": 345,
                      "train_seconds": 402.3, "examples_per_second": 27.4,
                      "eval_accuracy": 0.7745, "eval_f1": 0.8497, "export_path": "/s/1"},
             "runs": [{}, {}, {}]}
  assert cli.summary("run_classifier", results, "/tmp/mrpc", 1234.5) == (
      "run_classifier: done in 1,234 s; outputs in /tmp/mrpc\n"
      "  trained to global step 345 in 402 s (27.4 examples/s)\n"
      "  eval_accuracy 0.7745, eval_f1 0.8497\n"
      "  the best of 3 runs: learning_rate 3e-05, seed 12346\n"
      "  exported for TF Serving to /s/1")


# A transformers 5 classifier folder: transformers' own NLI head of tests/fixtures/hf_heads.
HF_NLI = os.path.join(os.path.dirname(__file__), "fixtures", "hf_heads",
                      "sequence_classification_nli")


def tokenizer_json(vocab: list[str], lowercase: bool, strip_accents=None) -> dict:
  """tokenizer.json as the `tokenizers` library (0.23, under transformers 5.24) saves a
  BertTokenizer's (BertNormalizer, BertPreTokenizer, the [CLS]/[SEP] template, WordPiece;
  the special tokens as added tokens): equal, for the uncased fixture, to the file transformers
  wrote in tests/fixtures/hf_heads."""
  special = lambda token: {"id": vocab.index(token), "content": token, "single_word": False,
                           "lstrip": False, "rstrip": False, "normalized": False,
                           "special": True}
  piece = lambda kind, name, type_id: {kind: {"id": name, "type_id": type_id}}
  return {
      "version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [special(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")],
      "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                     "strip_accents": strip_accents, "lowercase": lowercase},
      "pre_tokenizer": {"type": "BertPreTokenizer"},
      "post_processor": {
          "type": "TemplateProcessing",
          "single": [piece("SpecialToken", "[CLS]", 0), piece("Sequence", "A", 0),
                     piece("SpecialToken", "[SEP]", 0)],
          "pair": [piece("SpecialToken", "[CLS]", 0), piece("Sequence", "A", 0),
                   piece("SpecialToken", "[SEP]", 0), piece("Sequence", "B", 1),
                   piece("SpecialToken", "[SEP]", 1)],
          "special_tokens": {t: {"id": t, "ids": [vocab.index(t)], "tokens": [t]}
                             for t in ("[CLS]", "[SEP]")}},
      "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
      "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(vocab)}}}


def transformers5_folder(folder, **normalizer) -> str:
  """HF_NLI as transformers 5's save_pretrained writes it: no vocab.txt."""
  os.makedirs(folder)
  for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
    shutil.copy(os.path.join(HF_NLI, name), folder)
  with open(os.path.join(HF_NLI, "vocab.txt"), encoding="utf-8") as f:
    vocab = f.read().split()
  with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tokenizer_json(vocab, **{"lowercase": True, **normalizer}), f, indent=2)
  return str(folder)


def test_transformers5_folder_gives_vocab_and_casing_from_tokenizer_json(tmp_path):
  folder = transformers5_folder(tmp_path / "uncased")
  with open(os.path.join(HF_NLI, "vocab.txt"), encoding="utf-8") as f:
    vocab = f.read()
  with open(os.path.join(HF_NLI, "tokenizer.json"), encoding="utf-8") as f:
    assert tokenizer_json(vocab.split(), True) == json.load(f)
  # The tokenizer reads tokenizer.json itself, so messages name the user's file; the vocab.txt
  # a SavedModel carries and a run copies is in memory (ram://), none on disk.
  _, vocab_file = checkpoints.resolve_files(None, None, folder, 12)
  assert vocab_file == os.path.join(folder, "tokenizer.json")
  tokenizer = FullTokenizer(vocab_file)
  assert tokenizer.do_lower_case and tokenizer.inv_vocab == vocab.split()
  assert tokenizer.vocab_txt.startswith("ram://")
  with tf.io.gfile.GFile(tokenizer.vocab_txt) as f:
    assert f.read() == vocab
  with pytest.raises(ValueError, match=f"^{re.escape(vocab_file)}: do_lower_case=False "
                     "contradicts its normalizer, which says do_lower_case=True"):
    FullTokenizer(vocab_file, do_lower_case=False)
  # Cased: its normalizer decides (the tokenizer_config.json copied beside it says otherwise).
  cased = checkpoints.resolve_files(
      None, None, transformers5_folder(tmp_path / "cased", lowercase=False), 12)[1]
  assert not FullTokenizer(cased).do_lower_case
  assert FullTokenizer(cased).tokenize("Story story") == ["[UNK]", "story"]
  with pytest.raises(ValueError, match=r"cased/tokenizer\.json: do_lower_case=True contradicts "
                     r"its normalizer, which says do_lower_case=False \(the model is cased\)"):
    FullTokenizer(cased, True)
  # What google-research/bert's tokenizer does not do is refused, naming the file.
  odd = transformers5_folder(tmp_path / "odd", strip_accents=False)
  with pytest.raises(ValueError, match=r"odd/tokenizer\.json: normalizer lowercase True with "
                     r"strip_accents False: .* give --vocab_file"):
    FullTokenizer(checkpoints.resolve_files(None, None, odd, 12)[1])
  os.remove(os.path.join(odd, "tokenizer.json"))
  with pytest.raises(FileNotFoundError, match=r"no vocab\.txt \(nor tokenizer\.json\) beside"):
    checkpoints.resolve_files(None, None, odd, 12)


@pytest.mark.slow
def test_a_transformers5_folders_casing_decides_and_a_flag_against_it_is_refused(tmp_path):
  """run_classifier --init_checkpoint=<a cased transformers 5 folder>: without --do_lower_case,
  the folder's casing (task_config.json records it); with a --do_lower_case that contradicts
  it, one line naming the folder's tokenizer.json, and no --output_dir made. No temporary
  files either way."""
  cased = transformers5_folder(tmp_path / "cased", lowercase=False)
  make_sst2(tmp_path / "data", num_train=4, num_dev=4)
  temp = tmp_path / "temp"
  os.makedirs(temp)
  run = ["--task_name=SST-2", f"--data_dir={tmp_path / 'data'}", f"--init_checkpoint={cased}",
         "--max_seq_length=16", "--do_train", "--train_batch_size=4", "--num_train_epochs=1"]
  trained, refused = entry_points.run_cases("bert_tf.scripts.run_classifier", [
      run + [f"--output_dir={tmp_path / 'out'}"],
      run + [f"--output_dir={tmp_path / 'refused'}", "--do_lower_case"]],
      env=dict(entry_points.ENV, TMPDIR=str(temp)))
  assert trained.returncode == 0, trained.stderr[-3000:]
  with open(tmp_path / "out" / runner.TASK_CONFIG, encoding="utf-8") as f:
    assert json.load(f)["do_lower_case"] is False
  with open(tmp_path / "out" / "vocab.txt", encoding="utf-8") as f, open(
      os.path.join(HF_NLI, "vocab.txt"), encoding="utf-8") as g:
    assert f.read() == g.read()
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      f"run_classifier: error: {cased}/tokenizer.json: do_lower_case=True contradicts its "
      "normalizer, which says do_lower_case=False (the model is cased); leave --do_lower_case "
      "out, or pass --do_lower_case=False")
  assert not (tmp_path / "refused").exists()
  assert glob.glob(str(temp / "bert_tf*")) == []


@pytest.mark.slow
def test_xnli_every_language_from_a_transformers5_folder(tmp_path):
  """run_classifier --task_name=XNLI --xnli_language=all --init_checkpoint=<a transformers 5
  folder>, no --vocab_file: an accuracy per language in eval_results.txt, and predictions on
  raw text equal to transformers' logits (expected.npz: its inputs are these texts' ids)."""
  folder = transformers5_folder(tmp_path / "hf")
  # The words of expected.npz's three rows (its ids are whole words), in mixed case.
  pairs = [("Story this BAD this Rollo", "Woman movie story Paris"),
           ("Said Bob quite", "When movie is"), ("Globex sits", "It")]
  expected = np.load(os.path.join(HF_NLI, "expected.npz"))["logits"]
  labels = ["contradiction", "entailment", "neutral"]
  answers = [labels[i] for i in np.argmax(expected, -1)]
  data = tmp_path / "xnli"
  os.makedirs(data)
  rows = lambda chosen: "".join(f"{a}\t{b}\t{label}\n" for a, b, label in chosen)
  (data / "dev-en.tsv").write_text(rows([(*pairs[0], answers[0]), (*pairs[1], "neutral"
                                          if answers[1] != "neutral" else "entailment")]))
  (data / "dev-de.tsv").write_text(rows([(*pairs[2], answers[2])]))
  (data / "test-en.tsv").write_text(rows([(a, b, "-") for a, b in pairs]))
  task = finetuning.build("classification", {"task_name": "XNLI", "max_seq_length": 12},
                          data_dir=str(data), xnli_language="all")
  args = runner.RunArgs(output_dir=str(tmp_path / "out"), init_checkpoint=folder,
                        do_eval=True, do_predict=True, eval_batch_size=2, predict_batch_size=2)
  best = runner.run(task, args, distribute.get_strategy("one_device"))["best"]
  assert (best["eval_accuracy_en"], best["eval_accuracy_de"], best["eval_accuracy"]) == (
      0.5, 1.0, 0.75)
  with open(tmp_path / "out" / "eval_results.txt") as f:
    assert "eval_accuracy_de = 1.0\n" in f.read()
  probabilities = np.loadtxt(tmp_path / "out" / "test_results.tsv")
  np.testing.assert_allclose(probabilities, tf.nn.softmax(expected).numpy(), atol=2e-6)
