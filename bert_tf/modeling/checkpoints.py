"""Weights from elsewhere into our encoder and pretraining heads.

Three sources, told apart by what `path` holds:
  ours:     a tf.train.Checkpoint of `BertPretrainer.checkpoint_items` (`encoder`, `masked_lm`,
            `next_sentence`), with bert_config.json beside it;
  tf1:      google-research/bert's TF1 checkpoints (`bert_model.ckpt`: `bert/...`, `cls/...`),
            with bert_config.json beside them;
  hf:       a Hugging Face BERT folder: config.json + model.safetensors or pytorch_model.bin
            (read without torch by a restricted unpickler that rebuilds only tensors); its
            vocab.txt, or transformers 5's tokenizer.json alone (the vocab the tokenizer
            reads, vocab and casing from its WordPiece model and BertNormalizer);
  hub:      a TF Hub BERT encoder SavedModel folder (`export.tf_hub`'s, the Model Garden's
            export_tfhub_lib's, the ones TF Hub and Kaggle publish): its variables by their
            names, sizes from their shapes, vocab.txt among its assets, and with the masked-LM
            head when it has the `mlm` sub-object;
  config:   a bert_config.json alone: a freshly initialized model.

The TF1, HF and Hub sources go through one name map each (the tables below). A part (encoder body,
pooler, masked-LM head, next-sentence head) is loaded when the source has any of its variables,
and then must have all of them at the right shapes; anything else is an error naming the
variable. The encoder body is always required.

A Hugging Face folder's task head (HF_ARCHITECTURES: classifier, qa_outputs) goes into a task's
output layer (`load_hf_head`), as the original's fine-tuned TF1 output layers do (TF1_HEADS).
The HF table also runs backwards: `hf_state_dict` and `hf_config_dict` are what
`export.huggingface` writes, so that what is exported reads back bit for bit.
"""
import collections
import dataclasses
import gc
import io
import json
import os
import pickle
import re
import zipfile
from typing import Callable

import ml_dtypes
import numpy as np
import tensorflow as tf
from absl import logging
from google.protobuf import message
from safetensors import numpy as safetensors_numpy
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder

PARTS = ("encoder", "pooler", "masked_lm", "next_sentence")
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
# A Hugging Face folder's tokenizer as the `tokenizers` library saves it; transformers 5 writes
# it without vocab.txt, and the tokenizer reads it as its vocab (`tokenization.load_vocab`).
HF_TOKENIZER = "tokenizer.json"


@dataclasses.dataclass(frozen=True)
class NameMap:
  """Our variable names <- one source's names, per part; rows are (ours, theirs, transposed).

  `layer` rows are relative to `layer_prefix` = (ours, theirs), "{i}" the layer index.
  `transposed`: the source stores the matrix as [out, in] (torch's Linear).
  Our attention kernels are the Model Garden's einsum layout — query/key/value [H, heads,
  head_size], output [heads, head_size, H] — which both sources store with the head axes merged;
  `_assign` reshapes them.
  """
  embeddings: tuple
  layer_prefix: tuple
  layer: tuple
  pooler: tuple
  masked_lm: tuple
  next_sentence: tuple
  layer_pattern: str  # A regex whose group(1) is the layer index of a source name.

  def rows(self, part: str, num_layers: int) -> list[tuple]:
    if part != "encoder":
      return list(getattr(self, part))
    ours, theirs = self.layer_prefix
    return list(self.embeddings) + [
        (ours.format(i=i) + o, theirs.format(i=i) + t, transposed)
        for i in range(num_layers) for o, t, transposed in self.layer]


TF1 = NameMap(
    embeddings=(
        ("word_embeddings/embeddings", "bert/embeddings/word_embeddings", False),
        ("position_embedding/embeddings", "bert/embeddings/position_embeddings", False),
        ("type_embeddings/embeddings", "bert/embeddings/token_type_embeddings", False),
        ("embeddings/layer_norm/gamma", "bert/embeddings/LayerNorm/gamma", False),
        ("embeddings/layer_norm/beta", "bert/embeddings/LayerNorm/beta", False),
    ),
    layer_prefix=("transformer/layer_{i}/", "bert/encoder/layer_{i}/"),
    layer=(
        ("self_attention/query/kernel", "attention/self/query/kernel", False),
        ("self_attention/query/bias", "attention/self/query/bias", False),
        ("self_attention/key/kernel", "attention/self/key/kernel", False),
        ("self_attention/key/bias", "attention/self/key/bias", False),
        ("self_attention/value/kernel", "attention/self/value/kernel", False),
        ("self_attention/value/bias", "attention/self/value/bias", False),
        ("self_attention/attention_output/kernel", "attention/output/dense/kernel", False),
        ("self_attention/attention_output/bias", "attention/output/dense/bias", False),
        ("self_attention_layer_norm/gamma", "attention/output/LayerNorm/gamma", False),
        ("self_attention_layer_norm/beta", "attention/output/LayerNorm/beta", False),
        ("intermediate/kernel", "intermediate/dense/kernel", False),
        ("intermediate/bias", "intermediate/dense/bias", False),
        ("output/kernel", "output/dense/kernel", False),
        ("output/bias", "output/dense/bias", False),
        ("output_layer_norm/gamma", "output/LayerNorm/gamma", False),
        ("output_layer_norm/beta", "output/LayerNorm/beta", False),
    ),
    pooler=(
        ("pooler_transform/kernel", "bert/pooler/dense/kernel", False),
        ("pooler_transform/bias", "bert/pooler/dense/bias", False),
    ),
    masked_lm=(
        ("cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/kernel",
         False),
        ("cls/predictions/transform/dense/bias", "cls/predictions/transform/dense/bias", False),
        ("cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/LayerNorm/gamma",
         False),
        ("cls/predictions/transform/LayerNorm/beta", "cls/predictions/transform/LayerNorm/beta",
         False),
        ("cls/predictions/output_bias/bias", "cls/predictions/output_bias", False),
    ),
    next_sentence=(
        ("cls/seq_relationship/kernel", "cls/seq_relationship/output_weights", True),
        ("cls/seq_relationship/bias", "cls/seq_relationship/output_bias", False),
    ),
    layer_pattern=r"^bert/encoder/layer_(\d+)/",
)

# Names after `_hf_name`: no "bert." prefix, LayerNorm gamma/beta spelled weight/bias.
HF = NameMap(
    embeddings=(
        ("word_embeddings/embeddings", "embeddings.word_embeddings.weight", False),
        ("position_embedding/embeddings", "embeddings.position_embeddings.weight", False),
        ("type_embeddings/embeddings", "embeddings.token_type_embeddings.weight", False),
        ("embeddings/layer_norm/gamma", "embeddings.LayerNorm.weight", False),
        ("embeddings/layer_norm/beta", "embeddings.LayerNorm.bias", False),
    ),
    layer_prefix=("transformer/layer_{i}/", "encoder.layer.{i}."),
    layer=(
        ("self_attention/query/kernel", "attention.self.query.weight", True),
        ("self_attention/query/bias", "attention.self.query.bias", False),
        ("self_attention/key/kernel", "attention.self.key.weight", True),
        ("self_attention/key/bias", "attention.self.key.bias", False),
        ("self_attention/value/kernel", "attention.self.value.weight", True),
        ("self_attention/value/bias", "attention.self.value.bias", False),
        ("self_attention/attention_output/kernel", "attention.output.dense.weight", True),
        ("self_attention/attention_output/bias", "attention.output.dense.bias", False),
        ("self_attention_layer_norm/gamma", "attention.output.LayerNorm.weight", False),
        ("self_attention_layer_norm/beta", "attention.output.LayerNorm.bias", False),
        ("intermediate/kernel", "intermediate.dense.weight", True),
        ("intermediate/bias", "intermediate.dense.bias", False),
        ("output/kernel", "output.dense.weight", True),
        ("output/bias", "output.dense.bias", False),
        ("output_layer_norm/gamma", "output.LayerNorm.weight", False),
        ("output_layer_norm/beta", "output.LayerNorm.bias", False),
    ),
    pooler=(
        ("pooler_transform/kernel", "pooler.dense.weight", True),
        ("pooler_transform/bias", "pooler.dense.bias", False),
    ),
    masked_lm=(
        ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight",
         True),
        ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", False),
        ("cls/predictions/transform/LayerNorm/gamma",
         "cls.predictions.transform.LayerNorm.weight", False),
        ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias",
         False),
        ("cls/predictions/output_bias/bias", "cls.predictions.bias", False),
    ),
    next_sentence=(
        ("cls/seq_relationship/kernel", "cls.seq_relationship.weight", True),
        ("cls/seq_relationship/bias", "cls.seq_relationship.bias", False),
    ),
    layer_pattern=r"^encoder\.layer\.(\d+)\.",
)

# TF Hub's BERT encoders are the Model Garden's BertEncoder (and BertPretrainerV2's masked-LM
# head), whose variable names ours keep layer for layer: the TF1 table's left column, twice.
HUB = NameMap(
    **{part: tuple((ours, ours, False) for ours, _, _ in getattr(TF1, part))
       for part in ("embeddings", "layer", "pooler", "masked_lm", "next_sentence")},
    layer_prefix=(TF1.layer_prefix[0],) * 2,
    layer_pattern=r"^transformer/layer_(\d+)/")

# google-research/bert's fine-tuned checkpoints carry their task's output layer beside the
# encoder, stored [outputs, hidden] as its matmul(..., transpose_b=True) reads it; ours is a
# Dense's kernel [hidden, outputs]. (kernel, bias) -> the script that wrote them.
TF1_HEADS = {("output_weights", "output_bias"): "run_classifier",
             ("cls/squad/output_weights", "cls/squad/output_bias"): "run_squad"}

# Hugging Face's hidden_act -> BertConfig's: HF "gelu" is the exact erf form. Written back
# (`hf_config_dict`) as each of ours' first name here; "gelu_new", ours too, as it is.
HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                  "relu": "relu", "tanh": "tanh", "swish": "swish", "silu": "swish"}

# BertModel's own parts (encoder, pooler) sit under this prefix in every BertFor* model.
HF_PREFIX = "bert."


@dataclasses.dataclass(frozen=True)
class HfArchitecture:
  """A transformers BERT class: the PARTS of ours its file holds (by the HF table) and its
  task head, one torch Linear (weight [outputs, hidden], bias [outputs]) by its names."""
  parts: tuple[str, ...]
  head: tuple[str, str] | None = None


# What each class's model.safetensors holds, as transformers' save_pretrained writes it: the
# classes without a pooler (add_pooling_layer=False) have none, and the masked-LM decoder is
# tied to the word embeddings (its weight and bias are not in the file). Reading a folder takes
# what it has; `export.huggingface` writes these.
HF_ARCHITECTURES = {
    "BertModel": HfArchitecture(("encoder", "pooler")),
    "BertForPreTraining": HfArchitecture(PARTS),
    "BertForMaskedLM": HfArchitecture(("encoder", "masked_lm")),
    "BertForSequenceClassification": HfArchitecture(("encoder", "pooler"),
                                                    ("classifier.weight", "classifier.bias")),
    "BertForTokenClassification": HfArchitecture(("encoder",),
                                                 ("classifier.weight", "classifier.bias")),
    "BertForQuestionAnswering": HfArchitecture(("encoder",),
                                               ("qa_outputs.weight", "qa_outputs.bias")),
    "BertForMultipleChoice": HfArchitecture(("encoder", "pooler"),
                                            ("classifier.weight", "classifier.bias")),
}


# ---------------------------------------------------------------------------------------------
# Finding the source and its config.

def saved_model_folder(path: str) -> str | None:
  """The SavedModel folder that `path` is, or whose variables/ folder or variables/variables
  checkpoint it is (a TF2 checkpoint as ours are, told apart by the saved_model.pb above it);
  None for anything else."""
  path = os.fspath(path).rstrip("/")
  candidates = [path]
  while os.path.basename(candidates[-1]) == "variables" and len(candidates) < 3:
    candidates.append(os.path.dirname(candidates[-1]))
  return next((folder for folder in candidates
               if tf.io.gfile.exists(os.path.join(folder, "saved_model.pb"))), None)


def resolve(path: str) -> tuple[str, str]:
  """(kind, location): ("hf" | "hub", folder), ("tf1" | "ours", checkpoint prefix) or
  ("config", file).

  Raises FileNotFoundError or ValueError naming `path` when it is none of these.
  """
  folder = saved_model_folder(path)
  if folder:
    if not tf.io.gfile.exists(os.path.join(folder, "variables", "variables.index")):
      raise FileNotFoundError(f"{path}: a SavedModel without variables "
                              "(variables/variables.index), not a TF Hub BERT encoder")
    return "hub", folder
  prefix = path
  if tf.io.gfile.isdir(path):
    if (tf.io.gfile.exists(os.path.join(path, "config.json")) and
        any(tf.io.gfile.exists(os.path.join(path, f)) for f in HF_WEIGHTS)):
      return "hf", path
    indexes = tf.io.gfile.glob(os.path.join(path, "*.index"))
    prefix = tf.train.latest_checkpoint(path) or (
        indexes[0][:-len(".index")] if len(indexes) == 1 else None)
    if prefix is None:
      raise FileNotFoundError(
          f"{path}: neither a Hugging Face folder (config.json and one of {HF_WEIGHTS}) nor a "
          f"folder with one TF checkpoint ({len(indexes)} *.index files)")
  elif path.endswith(".json"):
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f"{path}: no such config file")
    return "config", path
  if not tf.io.gfile.exists(prefix + ".index"):
    raise FileNotFoundError(f"{path}: no checkpoint here ({prefix}.index does not exist)")
  names = {name for name, _ in tf.train.list_variables(prefix)}
  if "_CHECKPOINTABLE_OBJECT_GRAPH" in names:
    return "ours", prefix
  if any(name.startswith("bert/") for name in names):
    return "tf1", prefix
  raise ValueError(f"{prefix}: neither google-research/bert's names (bert/...) nor a "
                   "tf.train.Checkpoint of this project")


def hf_config(path: str) -> BertConfig:
  """A Hugging Face BERT config.json as a BertConfig (hidden_act translated)."""
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      d = json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from e
  unsupported = {"model_type": (d.get("model_type", "bert"), "bert"),
                 "position_embedding_type": (d.get("position_embedding_type", "absolute"),
                                             "absolute"),
                 "layer_norm_eps": (d.get("layer_norm_eps", 1e-12), 1e-12)}
  for key, (value, supported) in unsupported.items():
    if value != supported:
      raise ValueError(f"{path}: {key} {value!r} is not supported (only {supported!r})")
  act = d.get("hidden_act", "gelu")
  if act not in HF_ACTIVATIONS:
    raise ValueError(f"{path}: hidden_act {act!r} is not one of {sorted(HF_ACTIVATIONS)}")
  try:
    # A transformers config carries dozens of keys of its own (architectures, torch_dtype...).
    return BertConfig.from_dict(dict(d, hidden_act=HF_ACTIVATIONS[act]),
                                ignored=set(d) - {f.name for f in dataclasses.fields(BertConfig)})
  except (TypeError, ValueError) as e:
    raise ValueError(f"{path}: {e}") from e


def hf_config_dict(config: BertConfig) -> dict:
  """A BertConfig as a Hugging Face config.json's model keys, the reverse of `hf_config`:
  model_type bert, hidden_act as transformers names it (HF_ACTIVATIONS)."""
  names = {}
  for theirs, ours in HF_ACTIVATIONS.items():
    names.setdefault(ours, theirs)
  return dict(config.to_dict(), model_type="bert", layer_norm_eps=1e-12,
              position_embedding_type="absolute",
              hidden_act=names.get(config.hidden_act, config.hidden_act))


def hf_architecture(path: str) -> str | None:
  """The transformers class a Hugging Face folder's config.json names (`architectures`), if
  it is one of HF_ARCHITECTURES; None for other sources and folders that name none."""
  kind, folder = resolve(path)
  if kind != "hf":
    return None
  config_file = os.path.join(folder, "config.json")
  with tf.io.gfile.GFile(config_file, "r") as f:
    try:
      names = json.load(f).get("architectures") or []
    except (json.JSONDecodeError, AttributeError) as e:
      raise ValueError(f"{config_file}: not a JSON object ({e})") from e
  return next((name for name in names if name in HF_ARCHITECTURES), None)


def hf_labels(config_file: str) -> list[str] | None:
  """What a Hugging Face task head's outputs are, from its config.json: id2label's names in
  the order of their ids (transformers' LABEL_0, LABEL_1 where it has none), or None for a
  regression (problem_type "regression", or one label and no problem_type, which
  transformers trains as one)."""
  with tf.io.gfile.GFile(config_file, "r") as f:
    config = json.load(f)
  id2label = config.get("id2label") or {str(i): f"LABEL_{i}"
                                        for i in range(config.get("num_labels", 2))}
  problem_type = config.get("problem_type")
  if problem_type == "regression" or (problem_type is None and len(id2label) == 1):
    return None
  return [id2label[key] for key in sorted(id2label, key=int)]


def hub_config(path: str, bert_config_file: str | None = None) -> BertConfig:
  """A TF Hub BERT encoder's config: its sizes from its variables' shapes; what they cannot
  tell (activation, dropout rates, initializer range) from `bert_config_file` when given (its
  sizes must agree), else BERT's defaults, said in the log."""
  _, folder = resolve(path)
  reader, keys = _hub_variables(folder)
  shapes = reader.get_variable_to_shape_map()

  def shape(name: str) -> list[int]:
    if name not in keys:
      raise ValueError(f"{folder}: a SavedModel without a BERT encoder's {name}, not a TF Hub "
                       "BERT encoder")
    return shapes[keys[name]]

  vocab_size, hidden_size = shape("word_embeddings/embeddings")
  sizes = dict(vocab_size=vocab_size, hidden_size=hidden_size,
               num_hidden_layers=_num_layers(keys, HUB.layer_pattern),
               num_attention_heads=shape("transformer/layer_0/self_attention/query/kernel")[1],
               intermediate_size=shape("transformer/layer_0/intermediate/kernel")[1],
               max_position_embeddings=shape("position_embedding/embeddings")[0],
               type_vocab_size=shape("type_embeddings/embeddings")[0])
  if bert_config_file:
    config = config_from_file(bert_config_file)
    for key, value in sizes.items():
      if getattr(config, key) != value:
        raise ValueError(f"{bert_config_file}: {key} {getattr(config, key)} contradicts the TF "
                         f"Hub SavedModel {folder}, whose variables say {value}")
    return config
  config = BertConfig(**sizes)
  logging.info("%s: a TF Hub SavedModel does not say its activation and dropout rates: BERT's "
               "defaults hidden_act=%s, hidden_dropout_prob=%g, "
               "attention_probs_dropout_prob=%g (--bert_config_file for others)", folder,
               config.hidden_act, config.hidden_dropout_prob,
               config.attention_probs_dropout_prob)
  return config


def config_from_file(path: str) -> BertConfig:
  """A --bert_config_file: the original's bert_config.json (unknown keys refused, naming the
  closest known one), or a Hugging Face config.json (it names a `model_type`)."""
  if tf.io.gfile.exists(path):
    try:
      with tf.io.gfile.GFile(path, "r") as f:
        is_hf = "model_type" in json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError):
      is_hf = False  # BertConfig.from_json_file says what is wrong with it.
    if is_hf:
      return hf_config(path)
  return BertConfig.from_json_file(path)


def beside(checkpoint: str, name: str) -> str:
  """The file `name` beside a checkpoint (a prefix) or in a checkpoint's folder."""
  folder = checkpoint if tf.io.gfile.isdir(checkpoint) else os.path.dirname(checkpoint)
  return os.path.join(folder, name)


def resolve_files(bert_config_file: str | None, vocab_file: str | None,
                  init_checkpoint: str | None, max_seq_length: int,
                  trained_dir: str | None = None) -> tuple[BertConfig, str]:
  """(BertConfig, vocab file): from the flags, else from beside --init_checkpoint (a Hugging
  Face folder's config.json and vocab.txt, or its tokenizer.json where it has no vocab.txt:
  transformers 5's; or a checkpoint's bert_config.json and vocab.txt),
  or from `trained_dir` (the --output_dir of a trained model that a run which does not train
  uses) when given. A TF Hub SavedModel's config is `hub_config`'s, its vocab among its
  assets."""
  source, flag = init_checkpoint, "--init_checkpoint"
  if trained_dir:
    source, flag = trained_dir, "--output_dir"
  hub = saved_model_folder(source) if source else None
  if hub:
    config = hub_config(hub, bert_config_file)
  elif bert_config_file:
    config = config_from_file(bert_config_file)
  elif source:
    config = load_config(source)
  else:
    raise ValueError("--bert_config_file is required (or an --init_checkpoint with its config)")
  if not vocab_file and source:
    vocab_file = os.path.join(hub, "assets", "vocab.txt") if hub else beside(source, "vocab.txt")
    tokenizer_json = beside(source, HF_TOKENIZER)
    if not hub and not tf.io.gfile.exists(vocab_file) and tf.io.gfile.exists(tokenizer_json):
      vocab_file = tokenizer_json
    if not tf.io.gfile.exists(vocab_file):
      raise FileNotFoundError(f"--vocab_file is required: no vocab.txt (nor {HF_TOKENIZER}) "
                              f"beside {flag}={source}")
  if not vocab_file:
    raise ValueError("--vocab_file is required (or an --init_checkpoint with vocab.txt beside it)")
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={max_seq_length} is longer than the model's "
                     f"max_position_embeddings={config.max_position_embeddings}")
  return config, vocab_file


def load_config(path: str) -> BertConfig:
  """The BertConfig of whatever `path` holds (see `resolve`): config.json in a Hugging Face
  folder, a TF Hub SavedModel's `hub_config`, else bert_config.json itself or beside the
  checkpoint."""
  kind, location = resolve(path)
  if kind == "hf":
    return hf_config(os.path.join(location, "config.json"))
  if kind == "hub":
    return hub_config(location)
  if kind == "config":
    return config_from_file(location)
  config_file = os.path.join(os.path.dirname(location), "bert_config.json")
  if not tf.io.gfile.exists(config_file):
    raise FileNotFoundError(f"{path}: no bert_config.json beside the checkpoint ({config_file})")
  return BertConfig.from_json_file(config_file)


# ---------------------------------------------------------------------------------------------
# Reading the source's arrays.

@dataclasses.dataclass
class _Weights:
  """A source's arrays by name; `path` names the source in errors."""
  path: str
  names: set
  get: Callable[[str], np.ndarray]


def _tf1_weights(prefix: str) -> _Weights:
  reader = tf.train.load_checkpoint(prefix)
  return _Weights(prefix, set(reader.get_variable_to_shape_map()), reader.get_tensor)


def _hf_name(name: str) -> str:
  """Hugging Face names as the HF table spells them (BertModel's, under the BertFor* models'
  HF_PREFIX; older files call LayerNorm's weight and bias gamma and beta)."""
  name = name[len(HF_PREFIX):] if name.startswith(HF_PREFIX) else name
  return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight",
                re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))


def _hf_weights(folder: str) -> _Weights:
  safetensors_file = os.path.join(folder, "model.safetensors")
  if tf.io.gfile.exists(safetensors_file):
    with tf.io.gfile.GFile(safetensors_file, "rb") as f:
      path, arrays = safetensors_file, safetensors_numpy.load(f.read())
  else:
    path = os.path.join(folder, "pytorch_model.bin")
    arrays = read_torch_state_dict(path)
  arrays = {_hf_name(name): value for name, value in arrays.items()}
  return _Weights(path, set(arrays), arrays.__getitem__)


def _hub_variables(folder: str) -> tuple[object, dict[str, str]]:
  """A TF Hub SavedModel's variables: its checkpoint's reader (tf.train.load_checkpoint's) and
  {HUB table name: checkpoint key}. The SavedModel's object graph holds each variable's name,
  its checkpoint the same graph (less the functions) with each variable's key: the two are
  walked together by child names. Variables that no table names (do_lower_case, dropout's
  generator states) are left out."""
  path = os.path.join(folder, "saved_model.pb")
  with tf.io.gfile.GFile(path, "rb") as f:
    try:
      objects = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0].object_graph_def
    except (message.DecodeError, IndexError) as e:
      raise ValueError(f"{path}: not a SavedModel ({e or 'no graph'})") from e
  prefix = os.path.join(folder, "variables", "variables")
  graph = _object_graph(prefix)
  names = []  # (the variable's full name, its checkpoint key)
  pending, seen = [(0, 0)], set()
  while pending:
    node_id, checkpoint_id = pending.pop()
    if node_id in seen:
      continue
    seen.add(node_id)
    node, checkpointed = objects.nodes[node_id], graph.nodes[checkpoint_id]
    for attribute in checkpointed.attributes:
      if node.WhichOneof("kind") == "variable" and attribute.name == "VARIABLE_VALUE":
        names.append((node.variable.name, attribute.checkpoint_key))
    children = {child.local_name: child.node_id for child in node.children}
    pending += [(children[child.local_name], child.node_id) for child in checkpointed.children
                if child.local_name in children]
  num_layers = _num_layers([name for name, _ in names], r"^(?:.*/)?transformer/layer_(\d+)/")
  known = {row[0] for part in PARTS for row in HUB.rows(part, num_layers)}
  keys = {}
  for name, key in names:
    table_name = _table_name(name, known)
    if table_name in keys and keys[table_name] != key:
      raise ValueError(f"{folder}: more than one variable is named {table_name}")
    if table_name:
      keys[table_name] = key
  return tf.train.load_checkpoint(prefix), keys


def _hub_weights(folder: str) -> _Weights:
  reader, keys = _hub_variables(folder)
  return _Weights(folder, set(keys), lambda name: reader.get_tensor(keys[name]))


# torch's storage classes -> numpy dtypes (ml_dtypes, which TensorFlow uses, has bfloat16).
_TORCH_STORAGES = {
    "FloatStorage": np.float32, "HalfStorage": np.float16, "DoubleStorage": np.float64,
    "BFloat16Storage": ml_dtypes.bfloat16, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


def _rebuild_tensor(storage, offset, size, stride, *unused_args):
  """torch._utils._rebuild_tensor_v2: a strided view of a storage, here of a numpy array."""
  return np.lib.stride_tricks.as_strided(
      storage[offset:], shape=tuple(size),
      strides=tuple(s * storage.itemsize for s in stride)).copy()


class _TorchUnpickler(pickle.Unpickler):
  """Unpickles a torch state dict, allowing only what rebuilds tensors: no code runs."""

  _ALLOWED = {
      ("collections", "OrderedDict"): collections.OrderedDict,
      ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
      ("torch._utils", "_rebuild_parameter"): lambda data, *unused_args: data,
  }

  def __init__(self, archive: zipfile.ZipFile, root: str, path: str):
    super().__init__(archive.open(f"{root}/data.pkl"))
    self.archive, self.root, self.path = archive, root, path
    self.storages = {}

  def find_class(self, module, name):
    if module == "torch" and name in _TORCH_STORAGES:
      return _TORCH_STORAGES[name]
    if (module, name) in self._ALLOWED:
      return self._ALLOWED[(module, name)]
    raise pickle.UnpicklingError(
        f"{self.path}: {module}.{name} is not a tensor; this reader rebuilds only plain "
        "tensors — convert the file to model.safetensors")

  def persistent_load(self, pid):
    # ("storage", dtype, key, location, numel): the storage's bytes are data/<key>.
    _, dtype, key, _, _ = pid
    if key not in self.storages:
      self.storages[key] = np.frombuffer(self.archive.read(f"{self.root}/data/{key}"), dtype)
    return self.storages[key]


def read_torch_state_dict(path: str) -> dict[str, np.ndarray]:
  """A `torch.save`d state dict (the zip format of torch >= 1.6) as numpy arrays, without
  torch. Raises ValueError naming the file for other formats or objects."""
  with tf.io.gfile.GFile(path, "rb") as f:
    data = io.BytesIO(f.read())
  if not zipfile.is_zipfile(data):
    raise ValueError(f"{path}: not torch's zip format (a pre-1.6 torch file?); convert it to "
                     "model.safetensors")
  with zipfile.ZipFile(data) as archive:
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
    if len(pickles) != 1:
      raise ValueError(f"{path}: expected one data.pkl in the archive, found {len(pickles)}")
    root = pickles[0][:-len("/data.pkl")]
    if f"{root}/byteorder" in archive.namelist():
      if archive.read(f"{root}/byteorder").decode() != "little":
        raise ValueError(f"{path}: big-endian tensors are not supported")
    state = _TorchUnpickler(archive, root, path).load()
  if not isinstance(state, dict):
    raise ValueError(f"{path}: holds a {type(state).__name__}, not a state dict")
  return dict(state)


# ---------------------------------------------------------------------------------------------
# Assigning.

def our_variables(targets: dict, name_map: NameMap, num_layers: int) -> dict:
  """Our variables by their table name. A variable's full name may carry outer scopes (e.g.
  the pretrainer's name), so the longest suffix that is a table name is its name."""
  known = {row[0] for part in PARTS for row in name_map.rows(part, num_layers)}
  found = {}
  for target in targets.values():
    for variable in target.variables:
      name = _table_name(variable.name, known)
      if not name:
        raise ValueError(f"our variable {variable.name} has no entry in the name map")
      found[name] = variable
  return found


def _table_name(name: str, known: set) -> str | None:
  """The longest suffix of a variable's name that is in `known` (its outer scopes, such as a
  model's name, dropped), or None."""
  parts = name.split(":")[0].split("/")
  return next((suffix for suffix in ("/".join(parts[k:]) for k in range(len(parts)))
               if suffix in known), None)


def _num_layers(names, pattern: str) -> int:
  layers = {int(m.group(1)) for m in map(re.compile(pattern).match, names) if m}
  return max(layers) + 1 if layers else 0


def _assign(variable, value: np.ndarray, ours: str, theirs: str, path: str,
            transposed: bool) -> None:
  stored = np.asarray(value)
  value = stored.T if transposed else stored
  shape = tuple(variable.shape)
  if value.shape != shape:
    # Attention kernels: the source merges the head axes that our einsum layout splits.
    if value.ndim != len(shape) - 1 or value.size != np.prod(shape):
      raise ValueError(f"{path}: {theirs} has shape {stored.shape}"
                       f"{' (stored transposed)' if transposed else ''}, which does not fit "
                       f"our {ours} of shape {shape}")
    value = value.reshape(shape)
  variable.assign(value.astype(np.float32))


def _load_mapped(weights: _Weights, name_map: NameMap, targets: dict) -> list[str]:
  """Fills `targets` ({"encoder": ..., heads...}) from `weights`. Returns the parts loaded."""
  num_layers = _num_layers([v.name for v in targets["encoder"].variables],
                           r"^(?:.*/)?transformer/layer_(\d+)/")
  theirs_layers = _num_layers(weights.names, name_map.layer_pattern)
  if theirs_layers != num_layers:
    raise ValueError(f"{weights.path}: has {theirs_layers} Transformer layers, our model "
                     f"{num_layers}")
  ours = our_variables(targets, name_map, num_layers)
  wanted = ["encoder", "pooler"] + [p for p in ("masked_lm", "next_sentence") if p in targets]
  loaded = []
  for part in wanted:
    rows = name_map.rows(part, num_layers)
    if part != "encoder" and not any(theirs in weights.names for _, theirs, _ in rows):
      logging.warning("%s: no %s weights; %s keeps its initialization", weights.path, part, part)
      continue
    for our_name, theirs, transposed in rows:
      if theirs not in weights.names:
        raise ValueError(f"{weights.path}: {theirs} is missing (for our {our_name})")
      _assign(ours[our_name], weights.get(theirs), our_name, theirs, weights.path, transposed)
    loaded.append(part)
  return loaded


class CorruptCheckpointError(ValueError):
  """A checkpoint whose files are truncated, missing or fail their checksums."""


# What TensorFlow raises reading a damaged checkpoint: a truncated file or a failed checksum,
# a missing data shard (IndexError: its checkpoint reader's "Read less bytes than requested").
_DAMAGE = (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.NotFoundError,
           IndexError)


def read_checkpoint(checkpoint: tf.train.Checkpoint, prefix: str, partial: bool = False) -> None:
  """Restores `prefix` into `checkpoint`, naming it in any error: CorruptCheckpointError when
  its files are damaged, ValueError when it holds another model.

  partial: the checkpoint may hold more than `checkpoint` asks for (an optimizer, heads).
  """
  # A failed read leaves TensorFlow's restore bookkeeping behind, which logs a warning for
  # every value of the checkpoint it did not restore when it is freed: hundreds of lines after
  # the error, at exit. Freed here, with TensorFlow's warnings off, the error is the last line.
  tf_logger = tf.get_logger()
  level = tf_logger.level
  tf_logger.setLevel("ERROR")
  try:
    try:
      status = checkpoint.read(prefix)
      if partial:
        status.expect_partial()
      status.assert_existing_objects_matched()
    except _DAMAGE as e:
      error = _damaged(prefix, e)
    except (AssertionError, ValueError, tf.errors.OpError) as e:
      error = ValueError(f"{prefix}: does not match the model: {_mismatch(e)}")
    else:
      return
    gc.collect()
  finally:
    tf_logger.setLevel(level)
  raise error


def _mismatch(error: Exception) -> str:
  """TensorFlow's restore error on one line: a list of unmatched variables (it prints each
  with its values, hundreds of lines) becomes their count and first names."""
  message = str(error)
  names = sorted(set(re.findall(r"<tf\.Variable '([^']+)'", message)))
  if not names:
    return " ".join(message.split())
  shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
  return f"{len(names)} of the model's variables are not in the checkpoint: {shown}"


def _damaged(prefix: str, error: Exception) -> CorruptCheckpointError:
  return CorruptCheckpointError(
      f"{prefix}: the checkpoint is damaged (truncated, or changed since it was saved): "
      f"{getattr(error, 'message', error)}")


def _object_graph(prefix: str) -> trackable_object_graph_pb2.TrackableObjectGraph:
  """The object graph a TF2 checkpoint was saved with."""
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  try:
    graph.ParseFromString(
        tf.train.load_checkpoint(prefix).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  except _DAMAGE as e:
    raise _damaged(prefix, e) from e
  return graph


def _checkpoint_items(prefix: str) -> set[str]:
  """The names a tf.train.Checkpoint was saved with (its root object's children)."""
  return {child.local_name for child in _object_graph(prefix).nodes[0].children}


def _load_ours(prefix: str, targets: dict) -> list[str]:
  """Restores the `targets` a tf.train.Checkpoint of checkpoint_items holds (encoder
  required); optimizer state and absent heads are left alone."""
  saved = _checkpoint_items(prefix)
  present = {k: v for k, v in targets.items() if k in saved}
  if "encoder" not in present:
    raise ValueError(f"{prefix}: this checkpoint has no 'encoder' (it has {sorted(saved)})")
  for missing in targets.keys() - present.keys():
    logging.warning("%s: no %s; it keeps its initialization", prefix, missing)
  read_checkpoint(tf.train.Checkpoint(**present), prefix, partial=True)
  return list(present)


def _load(targets: dict, path: str) -> list[str]:
  kind, location = resolve(path)
  if kind == "ours":
    return _load_ours(location, targets)
  if kind == "tf1":
    return _load_mapped(_tf1_weights(location), TF1, targets)
  if kind == "hf":
    return _load_mapped(_hf_weights(location), HF, targets)
  if kind == "hub":
    return _load_mapped(_hub_weights(location), HUB, targets)
  raise ValueError(f"{path}: a config file holds no weights to load")


def tf1_heads(path: str) -> list[tuple[str, str]]:
  """The TF1_HEADS (kernel, bias) names that a google-research/bert checkpoint at `path`
  holds (a fine-tuned one's output layer); [] for any other source."""
  kind, location = resolve(path)
  if kind != "tf1":
    return []
  names = {name for name, _ in tf.train.list_variables(location)}
  return [head for head in TF1_HEADS if head[0] in names]


def _load_head(kernel, bias, weights: _Weights, names: tuple[str, str]) -> None:
  """A source's output layer, stored [outputs, hidden] and [outputs] by `names`, into our
  Dense's `kernel` [hidden, outputs] and `bias` [outputs]."""
  for variable, theirs, transposed in ((kernel, names[0], True), (bias, names[1], False)):
    if theirs not in weights.names:
      raise ValueError(f"{weights.path}: {theirs} is missing (for our {variable.name})")
    _assign(variable, weights.get(theirs), variable.name, theirs, weights.path, transposed)


def load_tf1_head(kernel, bias, path: str, names: tuple[str, str]) -> None:
  """Assigns google-research/bert's fine-tuned output layer `names` (see TF1_HEADS) at `path`
  to our Dense's `kernel` [hidden, outputs] and `bias` [outputs]; ValueError naming the
  variable whose shape does not fit (another number of labels)."""
  _load_head(kernel, bias, _tf1_weights(resolve(path)[1]), names)


def load_hf_head(kernel, bias, path: str) -> None:
  """Assigns the task head of the Hugging Face folder at `path` (its class's
  HF_ARCHITECTURES head: classifier or qa_outputs) to our Dense's `kernel` [hidden, outputs]
  and `bias` [outputs]; ValueError naming the weight whose shape does not fit."""
  architecture = hf_architecture(path)
  if architecture is None or HF_ARCHITECTURES[architecture].head is None:
    raise ValueError(f"{path}: not a Hugging Face model with a task head "
                     f"({architecture or 'no known architectures entry'})")
  _load_head(kernel, bias, _hf_weights(resolve(path)[1]), HF_ARCHITECTURES[architecture].head)


def head_arrays(path: str) -> tuple[np.ndarray, np.ndarray]:
  """The task head that the source at `path` holds, as it stores it: weight [outputs, hidden]
  and bias [outputs] of a Hugging Face folder's class (HF_ARCHITECTURES) or of
  google-research/bert's fine-tuned output layer (TF1_HEADS). ValueError without one."""
  kind, location = resolve(path)
  architecture = hf_architecture(path)
  if architecture and HF_ARCHITECTURES[architecture].head:
    weights, names = _hf_weights(location), HF_ARCHITECTURES[architecture].head
  elif tf1_heads(path):
    weights, names = _tf1_weights(location), tf1_heads(path)[0]
  else:
    raise ValueError(f"{path}: holds no task head")
  missing = [name for name in names if name not in weights.names]
  if missing:
    raise ValueError(f"{weights.path}: {missing[0]} is missing")
  return tuple(np.asarray(weights.get(name), np.float32) for name in names)


# ---------------------------------------------------------------------------------------------
# Writing Hugging Face's names: the HF table read backwards.

def stored_value(value: np.ndarray, ours: str, transposed: bool) -> np.ndarray:
  """Our variable `ours`'s value as a table's source stores it, the reverse of `_assign`: the
  attention's head axes merged (query/key/value kernels [H, heads, head_size] -> [H, H], their
  biases [heads, head_size] -> [H]; the output kernel [heads, head_size, H] -> [H, H]), then
  [in, out] -> torch's [out, in] where `transposed`."""
  if value.ndim == 3:
    value = (value.reshape(-1, value.shape[-1]) if "attention_output" in ours
             else value.reshape(value.shape[0], -1))
  elif value.ndim == 2 and ours.endswith("/bias"):
    value = value.reshape(-1)
  return np.ascontiguousarray(value.T if transposed else value, dtype=np.float32)


def hf_state_dict(targets: dict, architecture: str) -> dict[str, np.ndarray]:
  """Our `targets` ({"encoder": ..., "masked_lm": ..., "next_sentence": ...}, as
  `load_into_pretrainer` fills them) as the tensors of the HF_ARCHITECTURES class
  `architecture` holds for its PARTS, by the HF table's names (BertModel's parts under
  HF_PREFIX in a BertFor* class): float32 arrays, [out, in] matrices, heads merged. Its task
  head, if any, is the caller's."""
  num_layers = _num_layers([v.name for v in targets["encoder"].variables],
                           r"^(?:.*/)?transformer/layer_(\d+)/")
  ours = our_variables(targets, HF, num_layers)
  prefix = "" if architecture == "BertModel" else HF_PREFIX
  arrays = {}
  for part in HF_ARCHITECTURES[architecture].parts:
    for our_name, theirs, transposed in HF.rows(part, num_layers):
      name = prefix + theirs if part in ("encoder", "pooler") else theirs
      arrays[name] = stored_value(ours[our_name].numpy(), our_name, transposed)
  return arrays


# ---------------------------------------------------------------------------------------------
# The public entry points.

def load_into_encoder(encoder, path: str) -> None:
  """Fills a `build_encoder` model from any source (see the module doc)."""
  _load({"encoder": encoder}, path)


def load_into_pretrainer(pretrainer, path: str) -> list[str]:
  """Fills a `BertPretrainer`'s encoder, and its heads where the source has them.

  Returns the parts loaded, e.g. ["encoder", "pooler", "masked_lm", "next_sentence"] (for
  our own checkpoints: the checkpoint_items names).
  """
  return _load(dict(pretrainer.checkpoint_items), path)


def load_encoder(path: str, attention: str = "bidirectional"):
  """(BertConfig, encoder) from a Hugging Face folder, a TF Hub encoder SavedModel, a TF1
  checkpoint (prefix or folder), our own checkpoint, or a bert_config.json (then freshly
  initialized)."""
  config = load_config(path)
  encoder = build_encoder(config, attention)
  if resolve(path)[0] != "config":
    load_into_encoder(encoder, path)
  return config, encoder
