"""BertConfig reads and writes google-research/bert's bert_config.json; presets are the paper's."""
import json

import pytest

from bert_tf.modeling.configs import PRESETS, BertConfig, preset

# google-research/bert's uncased_L-12_H-768_A-12/bert_config.json, verbatim.
BERT_BASE_JSON = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
    "type_vocab_size": 2, "vocab_size": 30522,
}


def test_reads_and_writes_the_original_json(tmp_path):
  src = tmp_path / "bert_config.json"
  src.write_text(json.dumps(BERT_BASE_JSON))
  config = BertConfig.from_json_file(str(src))
  assert config == preset("bert_base")
  out = tmp_path / "out.json"
  config.to_json_file(str(out))
  assert json.loads(out.read_text()) == BERT_BASE_JSON


def test_presets_follow_the_paper():
  large = preset("bert_large")
  assert (large.num_hidden_layers, large.hidden_size, large.num_attention_heads) == (24, 1024, 16)
  assert large.intermediate_size == 4 * 1024
  small = [n for n in PRESETS if n.startswith("small_bert_")]
  assert len(small) == 24  # L in {2,4,6,8,10,12} x H in {128,256,512,768}
  tiny = preset("small_bert_L2_H128")
  assert (tiny.num_hidden_layers, tiny.hidden_size, tiny.num_attention_heads) == (2, 128, 2)
  assert preset("table6_L6_H768_A3").num_attention_heads == 3
  assert preset("bert_base", vocab_size=100).vocab_size == 100


def test_bad_configs_name_the_problem(tmp_path):
  with pytest.raises(ValueError, match="multiple of num_attention_heads"):
    BertConfig(vocab_size=10, hidden_size=100, num_attention_heads=12)
  with pytest.raises(ValueError, match="hidden_act"):
    BertConfig(vocab_size=10, hidden_act="sigmoid")
  broken = tmp_path / "broken.json"
  broken.write_text("{not json")
  with pytest.raises(ValueError, match="broken.json"):
    BertConfig.from_json_file(str(broken))
  with pytest.raises(KeyError, match="unknown preset"):
    preset("bert_huge")


@pytest.mark.parametrize("change, message", [
    ({"hiden_size": 64}, "unknown key 'hiden_size' (did you mean 'hidden_size'?)"),
    ({"hidden_size": 100}, "hidden_size 100 is not a multiple of num_attention_heads 12"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer, got 0"),
    ({"vocab_size": -3}, "vocab_size must be a positive integer, got -3"),
    ({"intermediate_size": 3072.5}, "intermediate_size must be a positive integer"),
    ({"hidden_dropout_prob": 1.0}, "hidden_dropout_prob must be in [0, 1), got 1.0"),
    ({"initializer_range": 0}, "initializer_range must be positive"),
])
def test_configs_that_are_not_a_bert_are_refused_naming_the_file_and_key(tmp_path, change,
                                                                         message):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(dict(BERT_BASE_JSON, **change)))
  with pytest.raises(ValueError) as e:
    BertConfig.from_json_file(str(path))
  assert str(e.value) == f"{path}: {message}" or str(e.value).startswith(f"{path}: {message}")


def test_the_multilingual_configs_extra_keys_are_accepted(tmp_path):
  # google-research/bert's multi_cased_L-12_H-768_A-12/bert_config.json carries these.
  extra = {"directionality": "bidi", "pooler_fc_size": 768, "pooler_num_attention_heads": 12,
           "pooler_num_fc_layers": 3, "pooler_size_per_head": 128,
           "pooler_type": "first_token_transform", "vocab_size": 119547}
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(dict(BERT_BASE_JSON, **extra)))
  assert BertConfig.from_json_file(str(path)) == preset("bert_base", vocab_size=119547)
