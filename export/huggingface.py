"""Any checkpoint `--init_checkpoint` reads as a Hugging Face transformers folder, which
`AutoModel...from_pretrained` loads with no missing or unexpected weight:

    export_dir/
      config.json              model_type bert, `architectures` [the class below], hidden_act
                               as transformers names it (`checkpoints.hf_config_dict`); a
                               classifier's or tagger's labels as id2label / label2id, in the
                               order of its outputs; a regression (STS-B-like) classifier:
                               one label, problem_type "regression"
      model.safetensors        float32 tensors by transformers' names: the HF table of
                               `bert_tf.modeling.checkpoints`, read backwards (`hf_state_dict`),
                               and the task head (`HF_ARCHITECTURES`)
      vocab.txt, tokenizer_config.json (do_lower_case: the casing the model was trained with)

The class follows what the checkpoint holds:
  a run_classifier run (task_config.json beside it)  BertForSequenceClassification
  a run_ner run (fine-tuning; first-piece labels)    BertForTokenClassification
  a run_squad run                                    BertForQuestionAnswering
  a run_swag run                                     BertForMultipleChoice
  a pretraining checkpoint: both heads               BertForPreTraining
                            the masked-LM head only  BertForMaskedLM (no NSP: no pooler)
  an encoder alone (a TF Hub encoder without `mlm`)  BertModel
  a Hugging Face folder                              its own class, its head and labels
  google-research/bert's fine-tuned TF1 checkpoint   its head's class (run_classifier's labels
                                                     unnamed: LABEL_0, LABEL_1...)
A head transformers has no class for is refused: the feature-based BiLSTM tagger of Table 7,
the left-to-right ablation (a causal encoder). `checkpoints` reads every such folder back as an
--init_checkpoint, heads included.
"""
import dataclasses
import json
import os

import numpy as np
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from bert_tf.common import files
from bert_tf.modeling import checkpoints
from bert_tf.modeling import pretrainer as pretrainer_lib
from bert_tf.modeling.configs import BertConfig
from bert_tf.finetuning import runner
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import loop

# google-research/bert's fine-tuned heads (checkpoints.TF1_HEADS' scripts) -> their class.
TF1_ARCHITECTURES = {"run_classifier": "BertForSequenceClassification",
                     "run_squad": "BertForQuestionAnswering"}
# The config.json keys that say what a head's outputs are.
LABEL_KEYS = ("id2label", "label2id", "problem_type")


@dataclasses.dataclass
class HfModel:
  """What an export folder holds: the class, the encoder's config, the tensors by
  transformers' names, the labels' config.json keys (LABEL_KEYS), vocab and casing."""
  architecture: str
  config: BertConfig
  tensors: dict[str, np.ndarray]
  labels: dict
  vocab_file: str
  do_lower_case: bool


def label_keys(labels: list[str] | None) -> dict:
  """config.json's keys for a head whose outputs are `labels` in order; None: one output, a
  regression (transformers' own name for its label: LABEL_0)."""
  if labels is None:
    return dict(id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0},
                problem_type="regression")
  return dict(id2label={str(i): label for i, label in enumerate(labels)},
              label2id={label: i for i, label in enumerate(labels)})


def from_fine_tuning_run(init_checkpoint: str, prefix: str, do_lower_case: bool | None) -> HfModel:
  """A fine-tuning run's model (output_dir or checkpoint `prefix`, task_config.json beside
  it) as its task's class, the head's outputs named by the run's labels."""
  model_dir = init_checkpoint if tf.io.gfile.isdir(init_checkpoint) else os.path.dirname(
      init_checkpoint)
  source = os.path.join(model_dir, runner.TASK_CONFIG)
  trained = runner.read_task_config(source)
  if getattr(trained, "feature_based", ""):
    raise ValueError(f"{source}: the feature-based tagger (--feature_based="
                     f"{trained.feature_based}, a BiLSTM on a frozen encoder) has no "
                     "transformers class; a fine-tuned run_ner model exports")
  if do_lower_case is not None and do_lower_case != trained.do_lower_case:
    raise ValueError(f"--do_lower_case={do_lower_case}: the trained model has do_lower_case "
                     f"{trained.do_lower_case} ({source}); leave the flag out")
  task, model, tokenizer = runner.load_trained(model_dir, prefix)
  architecture = task.hf_architecture
  if architecture is None:
    raise ValueError(f"{source}: a {trained.kind} model, whose head has no transformers class")
  tensors = checkpoints.hf_state_dict(model.checkpoint_items, architecture)
  kernel, bias = runner.head_variables(model)
  weight_name, bias_name = checkpoints.HF_ARCHITECTURES[architecture].head
  tensors[weight_name] = np.ascontiguousarray(kernel.numpy().T)  # torch's [outputs, hidden]
  tensors[bias_name] = bias.numpy()
  labels = (label_keys(task.config.labels) if "labels" in task.config.head_fields else {})
  config = BertConfig.from_json_file(os.path.join(model_dir, "bert_config.json"))
  return HfModel(architecture, config, tensors, labels, tokenizer.vocab_file,
                 task.config.do_lower_case)


def _source_head(init_checkpoint: str) -> tuple[str, tuple[np.ndarray, np.ndarray], dict] | None:
  """(class, (weight [outputs, hidden], bias [outputs]), label keys) of the task head that a
  Hugging Face folder or a google-research/bert TF1 checkpoint holds; None without one."""
  architecture = checkpoints.hf_architecture(init_checkpoint)
  if architecture and checkpoints.HF_ARCHITECTURES[architecture].head:
    with tf.io.gfile.GFile(os.path.join(checkpoints.resolve(init_checkpoint)[1],
                                        "config.json")) as f:
      config = json.load(f)
    return (architecture, checkpoints.head_arrays(init_checkpoint),
            {key: config[key] for key in LABEL_KEYS if key in config})
  tf1_heads = checkpoints.tf1_heads(init_checkpoint)
  if tf1_heads:
    architecture = TF1_ARCHITECTURES[checkpoints.TF1_HEADS[tf1_heads[0]]]
    weight, bias = checkpoints.head_arrays(init_checkpoint)
    labels = ({} if architecture == "BertForQuestionAnswering" else
              label_keys([f"LABEL_{i}" for i in range(len(bias))]))
    return architecture, (weight, bias), labels
  return None


def from_checkpoint(init_checkpoint: str, bert_config_file: str | None,
                    vocab_file: str | None, do_lower_case: bool | None) -> HfModel:
  """Any other source `checkpoints.resolve` reads (a pretraining run, google-research/bert's,
  a TF Hub encoder, a Hugging Face folder): its encoder and what heads it has."""
  settings_file = checkpoints.beside(init_checkpoint, loop.RUN_SETTINGS)
  if tf.io.gfile.exists(settings_file):
    with tf.io.gfile.GFile(settings_file) as f:
      objective = json.load(f).get("objective")
    if objective == "ltr":
      raise ValueError(f"{init_checkpoint}: a left-to-right pretraining run (objective ltr, "
                       f"{settings_file}): its causal encoder has no transformers BERT class")
  config, vocab_file = checkpoints.resolve_files(bert_config_file, vocab_file, init_checkpoint,
                                                 max_seq_length=1)
  # The casing the model states where do_lower_case is None; one it or its vocab denies refused.
  do_lower_case = FullTokenizer(vocab_file, do_lower_case).do_lower_case
  pretrainer = pretrainer_lib.build_pretrainer(config, 2, 1, nsp=True)
  parts = checkpoints.load_into_pretrainer(pretrainer, init_checkpoint)
  head = _source_head(init_checkpoint)
  labels = {}
  if head:
    architecture, (weight, bias), labels = head
  elif "masked_lm" in parts:
    architecture = "BertForPreTraining" if "next_sentence" in parts else "BertForMaskedLM"
  else:
    architecture = "BertModel"
  tensors = checkpoints.hf_state_dict(pretrainer.checkpoint_items, architecture)
  if head:
    weight_name, bias_name = checkpoints.HF_ARCHITECTURES[architecture].head
    tensors.update({weight_name: weight, bias_name: bias})
  return HfModel(architecture, config, tensors, labels, vocab_file, do_lower_case)


def write(model: HfModel, export_dir: str) -> None:
  """The folder (see the module doc), under a temporary name renamed when complete."""
  tokenizer = FullTokenizer(model.vocab_file, model.do_lower_case)
  config = dict(checkpoints.hf_config_dict(model.config), architectures=[model.architecture],
                pad_token_id=tokenizer.pad_id, tie_word_embeddings=True, **model.labels)
  # transformers' BertTokenizer: the reference's basic tokenization and WordPiece, as ours.
  tokenizer_config = dict(
      tokenizer_class="BertTokenizer", do_lower_case=model.do_lower_case, strip_accents=None,
      tokenize_chinese_chars=True, model_max_length=model.config.max_position_embeddings,
      unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]",
      mask_token="[MASK]")
  with files.temporary_path(export_dir) as tmp:
    tf.io.gfile.makedirs(tmp)
    for name, value in (("config.json", config), ("tokenizer_config.json", tokenizer_config)):
      with tf.io.gfile.GFile(os.path.join(tmp, name), "w") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    with tf.io.gfile.GFile(os.path.join(tmp, "model.safetensors"), "wb") as f:
      # transformers refuses a safetensors file whose metadata names no framework.
      f.write(safetensors_numpy.save(model.tensors, metadata={"format": "pt"}))
    tf.io.gfile.copy(tokenizer.vocab_txt, os.path.join(tmp, "vocab.txt"))


def export(init_checkpoint: str, export_dir: str, bert_config_file: str | None = None,
           vocab_file: str | None = None, do_lower_case: bool | None = None) -> str:
  """Writes `export_dir` (which must not exist) from any source `checkpoints.resolve` reads;
  see the module doc for the class. A fine-tuning run's own bert_config.json, vocab.txt and
  casing decide (bert_config_file, vocab_file refused; a do_lower_case that disagrees
  refused); for other sources they are found as `checkpoints.resolve_files` finds them,
  do_lower_case None meaning the casing the model states, else True. Returns export_dir."""
  if tf.io.gfile.exists(export_dir):
    raise FileExistsError(f"{export_dir} already exists; remove it or choose another "
                          "--export_dir")
  kind, location = checkpoints.resolve(init_checkpoint)
  if kind == "config":
    raise ValueError(f"{init_checkpoint}: a config file holds no weights to export")
  if kind == "ours" and tf.io.gfile.exists(
      checkpoints.beside(init_checkpoint, runner.TASK_CONFIG)):
    given = [flag for flag, value in (("bert_config_file", bert_config_file),
                                      ("vocab_file", vocab_file)) if value]
    if given:
      raise ValueError(f"--{given[0]}: a fine-tuning run's own (beside {init_checkpoint}) "
                       "is exported; leave the flag out")
    model = from_fine_tuning_run(init_checkpoint, location, do_lower_case)
  else:
    model = from_checkpoint(init_checkpoint, bert_config_file, vocab_file, do_lower_case)
  write(model, export_dir)
  return export_dir
