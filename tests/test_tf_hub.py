"""TF Hub's BERT SavedModels both ways (`export.tf_hub`, `checkpoints`' "hub" source): our
export loads in `tensorflow_hub.KerasLayer` and answers as our model does, a tf_keras model on
it fine-tunes (also under MirroredStrategy); the Model Garden's export_tfhub_lib, from the same
weights, writes the same signatures and outputs; both read back as an --init_checkpoint.
"""
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
import tf_keras

from bert_tf.modeling import checkpoints
from bert_tf.modeling import pretrainer as pretrainer_lib
from bert_tf.finetuning.inputs import TextPacker
from bert_tf.tokenization import FullTokenizer
from export import tf_hub
from entry_points import run_cases
from toys import classifier_runner, make_sst2

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = 16
TEXTS = ["The quick brown fox jumps.", "Unaffable HELLO, world!", "a"]
POSITIONS = [[1, 2], [3, 0], [1, 1]]
ATOL = 1e-5


def _packed(tokenizer, length: int, *texts) -> dict:
  """Our serving graphs' packing of `texts` (TextPacker, which cuts a batch to its longest),
  padded back to `length`: a Hub preprocessor's inputs are [batch, seq_length]."""
  packed = TextPacker(tokenizer, length)(*(tf.constant(t) for t in texts))
  return {name: tf.pad(ids, [[0, 0], [0, length - tf.shape(ids)[1]]])
          for name, ids in packed.items()}


@pytest.fixture(scope="module")
def ours(tmp_path_factory, tiny_bert_config, vocab_file, tokenizer):
  """A fresh tiny pretrainer saved as our checkpoint (bert_config.json and vocab.txt beside
  it), its TF Hub export by the entry point, a batch of the encoder's inputs, and the entry
  point's run on that export with a user's mistake (`refused`, for
  test_a_users_mistake_is_one_line: one process for both runs)."""
  tmp = tmp_path_factory.mktemp("tf_hub")
  tf_keras.utils.set_random_seed(0)  # Its weights the same each run: the fine-tuning test's.
  model = pretrainer_lib.build_pretrainer(tiny_bert_config, SEQ, 2, nsp=False)
  prefix = tf.train.Checkpoint(**model.checkpoint_items).write(str(tmp / "ckpt" / "model"))
  tiny_bert_config.to_json_file(str(tmp / "ckpt" / "bert_config.json"))
  shutil.copy(vocab_file, tmp / "ckpt" / "vocab.txt")
  paths = {name: str(tmp / "hub" / name) for name in ("encoder", "preprocessor")}
  exported, refused = run_cases(
      "bert_tf.scripts.export_saved_model",
      [["--format=tf_hub", f"--init_checkpoint={prefix}", f"--export_dir={tmp / 'hub'}",
        f"--max_seq_length={SEQ}"],
       ["--format=tf_hub", f"--init_checkpoint={paths['encoder']}", "--do_lower_case=False",
        f"--max_seq_length={SEQ}", f"--export_dir={tmp / 'refused'}"]], env=ENV, cwd=ROOT)
  assert exported.stdout.splitlines()[-2:] == [
      f"{name}: {path}" for name, path in paths.items()], exported.stderr
  inputs = _packed(tokenizer, SEQ, TEXTS)
  return dict(model=model, paths=paths, inputs=inputs, tmp=tmp, refused=refused)


def _encoder_outputs(model, inputs) -> dict:
  """Our pretrainer's encoder and masked-LM head on `inputs`, named as the Hub's outputs."""
  out = dict(model.encoder(inputs, training=False))
  out["default"] = out["pooled_output"]
  out["mlm_logits"] = model.masked_lm(out["sequence_output"],
                                      masked_positions=tf.constant(POSITIONS))
  return out


def _assert_close(got: dict, want: dict) -> None:
  assert set(got) == set(want)
  for key in want:
    np.testing.assert_allclose(np.array(got[key]), np.array(want[key]), atol=ATOL, err_msg=key)


def _call(encoder, inputs) -> dict:
  """A loaded Hub encoder's outputs and its mlm's on `inputs`."""
  out = dict(encoder(inputs, training=False))
  out["mlm_logits"] = encoder.mlm(dict(inputs, masked_lm_positions=tf.constant(POSITIONS)),
                                  training=False)["mlm_logits"]
  return out


@pytest.mark.slow
def test_keras_layer_loads_both_and_answers_as_ours(ours, tokenizer, vocab_file,
                                                   tiny_bert_config):
  inputs, paths = ours["inputs"], ours["paths"]
  want = _encoder_outputs(ours["model"], inputs)

  # The preprocessor: text -> our packing of it.
  preprocessor = hub.KerasLayer(paths["preprocessor"])
  _assert_close(preprocessor(tf.constant(TEXTS)), inputs)
  loaded = hub.load(paths["preprocessor"])
  words = loaded.tokenize(tf.constant(TEXTS))  # [batch, (words), (pieces)]
  assert words.ragged_rank == 2
  assert words.merge_dims(1, 2).to_list() == [list(ids) for ids in
                                              tokenizer.tokenize_ids(TEXTS)]
  assert {k: int(v) for k, v in loaded.tokenize.get_special_tokens_dict().items()} == dict(
      vocab_size=len(tokenizer.vocab), start_of_sequence_id=tokenizer.cls_id,
      end_of_segment_id=tokenizer.sep_id, padding_id=tokenizer.pad_id,
      mask_id=tokenizer.mask_id)
  pairs = loaded.bert_pack_inputs([words, loaded.tokenize(tf.constant(TEXTS[::-1]))],
                                  seq_length=tf.constant(8))
  _assert_close(pairs, _packed(tokenizer, 8, TEXTS, TEXTS[::-1]))
  served = loaded.signatures["serving_default"](sentences=tf.constant(TEXTS))
  _assert_close(served, inputs)

  # The encoder: our outputs, every layer's; the masked-LM head as `mlm`; the vocab and
  # casing; dropout when training.
  encoder = hub.KerasLayer(paths["encoder"], trainable=True)
  got = _call(encoder.resolved_object, inputs)
  assert len(got["encoder_outputs"]) == tiny_bert_config.num_hidden_layers
  _assert_close(got, want)
  _assert_close(encoder(inputs, training=False),
                {k: v for k, v in want.items() if k != "mlm_logits"})
  assert len(encoder.trainable_weights) == len(ours["model"].encoder.trainable_weights)
  dropped = encoder(inputs, training=True)["sequence_output"]
  assert np.abs(dropped - want["sequence_output"]).max() > 0.1
  obj = encoder.resolved_object
  assert bool(obj.do_lower_case.numpy())
  with open(obj.vocab_file.asset_path.numpy(), "rb") as f, open(vocab_file, "rb") as v:
    assert f.read() == v.read()


def _table_name(variable) -> str:
  """A variable's name without its model's scope: what the Model Garden's and ours share."""
  return re.sub(r"^.*?(?=cls/)", "", variable.name)


@pytest.fixture(scope="module")
def model_garden(ours, tiny_bert_config, vocab_file):
  """The Model Garden's export_tfhub_lib.export_model (with the `mlm` head) of our weights."""
  # Imported here: 7 s that the fast tier (`-m "not slow"`) should not pay at collection. The
  # module defines no flags of its own (only absl's and TensorFlow's, through its imports).
  from official.legacy.bert import configs as legacy  # pylint: disable=import-outside-toplevel
  from official.modeling import tf_utils  # pylint: disable=import-outside-toplevel
  from official.nlp.modeling import models  # pylint: disable=import-outside-toplevel
  from official.nlp.tools import export_tfhub_lib  # pylint: disable=import-outside-toplevel
  config = legacy.BertConfig.from_dict(tiny_bert_config.to_dict())
  pretrainer = models.BertPretrainerV2(
      encoder_network=export_tfhub_lib.get_bert_encoder(config),
      mlm_activation=tf_utils.get_activation(config.hidden_act))
  pretrainer(dict(ours["inputs"], masked_lm_positions=tf.constant(POSITIONS)))
  weights = {_table_name(v): v for v in ours["model"].variables}
  for variable in pretrainer.variables:
    variable.assign(weights[_table_name(variable)])
  # save, not write: export_model's restore asks for the save counter too.
  prefix = tf.train.Checkpoint(**pretrainer.checkpoint_items).save(
      str(ours["tmp"] / "model_garden_ckpt" / "model"))
  path = str(ours["tmp"] / "model_garden")
  export_tfhub_lib.export_model(path, bert_config=config, model_checkpoint_path=prefix,
                                with_mlm=True, vocab_file=vocab_file, do_lower_case=True)
  return path


@pytest.mark.slow
def test_the_model_gardens_export_has_our_signatures_and_outputs(ours, model_garden):
  theirs, mine = tf.saved_model.load(model_garden), tf.saved_model.load(ours["paths"]["encoder"])
  assert set(theirs.signatures) == set(mine.signatures) == {"serving_default"}
  signatures = [obj.signatures["serving_default"] for obj in (theirs, mine)]
  assert signatures[0].structured_input_signature == signatures[1].structured_input_signature
  # tf_keras names its signature's outputs after the encoder's layer (bert_encoder_1 ...);
  # ours, by what they are: the same values.
  mine_served = signatures[1](**ours["inputs"])
  assert sorted(mine_served) == sorted(["pooled_output", "default", "sequence_output",
                                        "encoder_outputs_0", "encoder_outputs_1"])
  theirs_served = signatures[0](**ours["inputs"])
  assert len(theirs_served) == len(mine_served)
  for name, value in theirs_served.items():
    assert any(v.shape == value.shape and np.allclose(v, value, atol=ATOL)
               for v in mine_served.values()), name
  _assert_close(_call(theirs, ours["inputs"]), _call(mine, ours["inputs"]))
  for obj in (theirs, mine):
    assert bool(obj.do_lower_case.numpy())
    assert len(obj.trainable_variables) == len(ours["model"].encoder.trainable_variables)


@pytest.mark.slow
@pytest.mark.parametrize("saved_model", ["encoder", "preprocessor"])
def test_every_op_is_one_tf_serving_links(saved_model, ours, ops_outside_tf_serving):
  problems = ops_outside_tf_serving(ours["paths"][saved_model])
  assert not problems, problems


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["ours", "model_garden"])
def test_init_checkpoint_reads_a_hub_encoder(exporter, ours, model_garden, tiny_bert_config,
                                             tmp_path):
  path = ours["paths"]["encoder"] if exporter == "ours" else model_garden
  want = _encoder_outputs(ours["model"], ours["inputs"])
  # Sizes from the variables, the rest BERT's defaults (the tiny config's own).
  config, vocab = checkpoints.resolve_files(None, None, path, SEQ)
  assert config == tiny_bert_config
  assert vocab == os.path.join(path, "assets", "vocab.txt")
  # Its variables/ folder is a TF2 checkpoint too, but not ours.
  assert checkpoints.resolve(os.path.join(path, "variables", "variables")) == ("hub", path)
  model = pretrainer_lib.build_pretrainer(config, SEQ, 2, nsp=False)
  assert checkpoints.load_into_pretrainer(model, path) == ["encoder", "pooler", "masked_lm"]
  _assert_close(_encoder_outputs(model, ours["inputs"]), want)
  # The casing is the SavedModel's; what its variables cannot tell, a config file's.
  with pytest.raises(ValueError, match=r"vocab\.txt: do_lower_case=False contradicts the "
                     r"do_lower_case variable of .*, which says do_lower_case=True"):
    FullTokenizer(vocab, do_lower_case=False)
  config_file = str(tmp_path / "bert_config.json")
  dataclasses.replace(tiny_bert_config, hidden_act="relu",
                      hidden_dropout_prob=0.0).to_json_file(config_file)
  config, _ = checkpoints.resolve_files(config_file, None, path, SEQ)
  assert (config.hidden_act, config.hidden_dropout_prob) == ("relu", 0.0)
  dataclasses.replace(tiny_bert_config, num_hidden_layers=3).to_json_file(config_file)
  with pytest.raises(ValueError, match=r"bert_config\.json: num_hidden_layers 3 contradicts "
                     r"the TF Hub SavedModel .*, whose variables say 2$"):
    checkpoints.resolve_files(config_file, None, path, SEQ)


@pytest.mark.slow
def test_fine_tuning_starts_from_a_hub_encoder(ours, tmp_path):
  """A fine-tuning run (the runner every run_* script goes through) takes its config, vocab
  and encoder weights from a Hub encoder given as --init_checkpoint; its head is drawn fresh."""
  make_sst2(tmp_path / "data", num_dev=8)
  args = dict(task_name="SST-2", data_dir=str(tmp_path / "data"),
              output_dir=str(tmp_path / "out"), init_checkpoint=ours["paths"]["encoder"],
              max_seq_length=SEQ, do_train=True, do_eval=True)
  with pytest.raises(ValueError, match="a TF Hub encoder fills the encoder only"):
    classifier_runner(dict(args, do_train=False))
  model, step = classifier_runner(args).restore()
  assert step == 0
  _assert_close(model.checkpoint_items["encoder"](ours["inputs"], training=False),
                ours["model"].encoder(ours["inputs"], training=False))


@pytest.mark.slow
def test_a_users_mistake_is_one_line(ours):
  encoder, preprocessor = ours["paths"]["encoder"], ours["paths"]["preprocessor"]
  refused = ours["refused"]
  assert refused.returncode == 1, refused.stderr[-3000:]
  assert refused.stderr.strip().splitlines()[-1] == (
      f"export_saved_model: error: {encoder}/assets/vocab.txt: do_lower_case=False contradicts "
      f"the do_lower_case variable of {encoder}, which says do_lower_case=True (the model is "
      "uncased); leave --do_lower_case out, or pass --do_lower_case=True")
  assert not (ours["tmp"] / "refused").exists()
  with pytest.raises(ValueError, match=f"^{preprocessor}: a SavedModel without a BERT "
                     "encoder's word_embeddings/embeddings, not a TF Hub BERT encoder$"):
    checkpoints.load_encoder(preprocessor)
  with pytest.raises(FileExistsError, match="hub/encoder already exists; remove it or choose "
                     "another --export_dir"):
    tf_hub.export(encoder, os.path.dirname(encoder))


# A tf_keras model on the exported encoder (trainable, dropout on), fine-tuned on one device
# and on 2 mirrored CPU devices, in a process of its own (the CPU is split into two logical
# devices before TensorFlow initialises) where bert_tf and the Model Garden cannot be imported:
# a TF Hub user's. Prints each run's losses as JSON.
_FINE_TUNE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub
    import tf_keras

    class Forbid:
      def find_spec(self, name, *args):
        if name.split(".")[0] in ("bert_tf", "official"):
          raise ImportError(f"the SavedModel needed {name}")
    sys.meta_path.insert(0, Forbid())

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    # The same losses whatever the load beside it (kernels and the mirrored run's reductions
    # may otherwise take their order from timing).
    tf.config.experimental.enable_op_determinism()
    encoder_path, data_path = sys.argv[1:]
    data = dict(np.load(data_path))
    labels = data.pop("labels")
    losses = {}
    for name, strategy in (("one_device", tf.distribute.get_strategy()),
                           ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
      with strategy.scope():
        tf_keras.utils.set_random_seed(0)
        inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k) for k in data}
        encoded = hub.KerasLayer(encoder_path, trainable=True)(inputs)
        model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(encoded["pooled_output"]))
        model.compile(tf_keras.optimizers.Adam(3e-3),
                      tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
      history = model.fit(data, labels, batch_size=8, epochs=8, verbose=0)
      losses[name] = dict(loss=history.history["loss"], replicas=strategy.num_replicas_in_sync)
    print(json.dumps(losses))
    """)


@pytest.mark.slow
def test_a_keras_model_on_it_fine_tunes_also_mirrored(ours, tokenizer, tmp_path):
  # Its inputs as the exported preprocessor makes them (the first test: our TextPacker's).
  texts = ["a good film", "a bad film", "good fun", "bad news"] * 4
  data = {k: v.numpy() for k, v in _packed(tokenizer, SEQ, texts).items()}
  np.savez(tmp_path / "data.npz", labels=np.array([1, 0, 1, 0] * 4), **data)
  env = dict(ENV)
  env.pop("PYTHONPATH", None)
  result = subprocess.run([sys.executable, "-c", _FINE_TUNE, ours["paths"]["encoder"],
                           str(tmp_path / "data.npz")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  losses = json.loads(result.stdout.strip().splitlines()[-1])
  assert losses["mirrored"]["replicas"] == 2
  for name, run in losses.items():
    # Seeded and deterministic: ~0.70 -> 0.06 (over encoder seeds 0-3: 0.04-0.18).
    assert run["loss"][-1] < 0.5 * run["loss"][0], (name, run)
