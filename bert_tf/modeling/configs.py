"""BertConfig: google-research/bert's `bert_config.json`, as a dataclass; and named presets."""
import dataclasses
import json

from bert_tf.common import files
from bert_tf.common.json_config import check_known_keys

# The original's hidden_act "gelu" is the tanh approximation; Hugging Face's "gelu" is the
# exact erf form. Checkpoint loaders translate names into these unambiguous ones.
ACTIVATIONS = ("gelu", "gelu_exact", "gelu_new", "relu", "tanh", "swish")

# Keys of google-research/bert's released configs that the encoder does not use (the
# multilingual models' pooler_* and directionality): accepted and ignored.
ORIGINAL_UNUSED_KEYS = ("directionality", "pooler_fc_size", "pooler_num_attention_heads",
                        "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type")


@dataclasses.dataclass
class BertConfig:
  """The encoder's hyper-parameters, field for field as in google-research/bert's JSON.

  hidden_act "gelu" means google-research/bert's tanh approximation; "gelu_exact" the erf form
  (what Hugging Face configs call "gelu").
  """
  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02

  def __post_init__(self):
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      if not 0 <= getattr(self, name) < 1:
        raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
    if not self.initializer_range > 0:
      raise ValueError(f"initializer_range must be positive, got {self.initializer_range!r}")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of "
                       f"num_attention_heads {self.num_attention_heads}")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(f"hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}")

  @classmethod
  def from_dict(cls, d: dict, ignored=ORIGINAL_UNUSED_KEYS) -> "BertConfig":
    """Refuses unknown keys (naming the closest known one), except the `ignored` ones, which
    the original's JSON may carry and the encoder does not use."""
    names = [f.name for f in dataclasses.fields(cls)]
    check_known_keys({k: v for k, v in d.items() if k not in ignored}, names)
    if "vocab_size" not in d:
      raise ValueError("vocab_size is missing")
    return cls(**{k: v for k, v in d.items() if k in names})

  @classmethod
  def from_json_file(cls, path: str) -> "BertConfig":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (keeps `import bert_tf` cheap)
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f"{path}: no such config file")
    try:
      with tf.io.gfile.GFile(path, "r") as f:
        d = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON ({e})") from e
    try:
      return cls.from_dict(d)
    except (TypeError, ValueError) as e:
      raise ValueError(f"{path}: {e}") from e

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  def to_json_file(self, path: str) -> None:
    """Written under a temporary name first; any tf.io.gfile path (gs://, ram://)."""
    files.write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")


def _sized(layers: int, hidden: int, vocab_size: int = 30522) -> BertConfig:
  """A BERT of L layers and H hidden units, with A = H/64 heads and a 4H feed-forward."""
  return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden)


def _presets() -> dict[str, BertConfig]:
  presets = {
      "bert_base": _sized(12, 768),
      "bert_large": _sized(24, 1024),
  }
  # Google's 24 small BERTs (Turc et al. 2019): L in {2..12} x H in {128..768}.
  for layers in (2, 4, 6, 8, 10, 12):
    for hidden in (128, 256, 512, 768):
      presets[f"small_bert_L{layers}_H{hidden}"] = _sized(layers, hidden)
  # The paper's Table 6 ablation over model size (L, H, A), A given explicitly there.
  for layers, hidden, heads in ((3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 768, 12),
                                (12, 1024, 16), (24, 1024, 16)):
    presets[f"table6_L{layers}_H{hidden}_A{heads}"] = dataclasses.replace(
        _sized(layers, hidden), num_attention_heads=heads)
  return presets


PRESETS = _presets()


def preset(name: str, **overrides) -> BertConfig:
  """A named preset (see `PRESETS`), with any field overridden."""
  if name not in PRESETS:
    raise KeyError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}")
  return dataclasses.replace(PRESETS[name], **overrides)
