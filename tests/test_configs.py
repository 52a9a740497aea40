"""BertConfig reads and writes google-research/bert's bert_config.json; presets are the paper's."""
import json

import pytest

from bert_tf.configs import PRESETS, BertConfig, preset

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
