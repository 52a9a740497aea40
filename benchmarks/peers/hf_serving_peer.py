r"""The peer's serving worker in the side-by-side latency comparison (serving_compare.py, which
starts it): transformers answering raw-text requests on stdin (benchmarks/serving_worker.py).

Kind: the peer's side (benchmarks/peers/): torch and transformers only, in the peer's venv.

  PYTHONPATH=. /tmp/refvenv/bin/python benchmarks/peers/hf_serving_peer.py --task=classifier \
      --model_dir=/tmp/l32/hf_classifier --max_seq_length=64 --threads=2

--model_dir is a Hugging Face folder (serving_compare.py writes it from our fine-tuned run).
What a request's batch holds and what it answers, by --task:
  classifier  {"text_a"} → {"logits"}: the fast tokenizer (truncation=True, max_length,
              padding=True: each batch padded to its longest), BertForSequenceClassification
  squad       {"question", "context"} → {"answer"}: transformers 5 has no question-answering
              pipeline any more, so its run_qa example's way, as hf_squad_peer.py runs it
              (windows every --doc_stride pieces, google-research/bert's meaning, questions cut
              to --max_query_length, utils_qa's n-best decoding: 20 best starts and ends,
              answers up to 30 pieces), each batch's windows cut to their longest as
              padding=True would pad them, then BertForQuestionAnswering
  ner         {"text"} → {"entities": [[type, start, end], ...]}: the token-classification
              pipeline, aggregation_strategy="first"
--threads sets torch's intra- and inter-op threads (the fast tokenizer's own pool is
RAYON_NUM_THREADS, set by the driver). Prints what serving_worker.serve prints.

With --stages=requests.json (a classifier's list of {"text_a"}; serving_stages.py writes it),
it times instead each request alone at batch 1 through the classifier's stages, every request
once untimed first: the fast tokenizer's call (tensors made), the encoder (`model.bert`), the
model, the whole predict; prints one JSON line of p50 ms: tokenizer, encoder, head (the model
less the encoder), total.
"""
import argparse
import json
import sys


import torch
import transformers

from benchmarks import serving_worker
from benchmarks.peers import hf_squad_peer


def _classifier(args, stages: dict | None = None):
  """The classifier's predict; `stages`, when given, gets its parts by name (stage_times)."""
  tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
  model = transformers.BertForSequenceClassification.from_pretrained(args.model_dir).eval()

  def tokenize(batch):
    return tokenizer([r["text_a"] for r in batch], truncation=True,
                     max_length=args.max_seq_length, padding=True, return_tensors="pt")

  def predict(batch):
    inputs = tokenize(batch)
    with torch.inference_mode():
      return {"logits": model(**inputs).logits.tolist()}
  if stages is not None:
    stages.update(tokenize=tokenize, model=model)
  return predict


def stage_times(args) -> dict:
  """{stage: p50 ms} over --stages' requests, one at a time (the module docstring)."""
  with open(args.stages) as f:
    requests = [[r] for r in json.load(f)]
  parts = {}
  predict = _classifier(args, parts)
  tokenize, model = parts["tokenize"], parts["model"]
  inputs = [tokenize(batch) for batch in requests]

  def run(fn, i):
    with torch.inference_mode():
      return fn(**inputs[i])
  stages = {"tokenizer": lambda i: tokenize(requests[i]),
            "encoder": lambda i: run(model.bert, i),
            "model": lambda i: run(model, i),
            "total": lambda i: predict(requests[i])}
  for i in range(len(requests)):  # Warm-up.
    for stage in stages.values():
      stage(i)
  p50 = serving_worker.stage_p50_ms(stages, len(requests))
  p50["head"] = round(p50["model"] - p50["encoder"], 3)
  return p50


def _squad(args):
  tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
  model = transformers.BertForQuestionAnswering.from_pretrained(args.model_dir).eval()
  settings = argparse.Namespace(
      max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
      max_query_length=args.max_query_length, n_best_size=20, max_answer_length=30,
      version_2_with_negative=False, null_score_diff_threshold=0.0)

  def predict(batch):
    examples = [hf_squad_peer.Example(str(i), r["question"], r["context"], [])
                for i, r in enumerate(batch)]
    features = hf_squad_peer.convert_examples(tokenizer, examples, settings, is_training=False)
    inputs = hf_squad_peer.tensors(features, is_training=False)
    width = int(inputs["attention_mask"].sum(1).max())
    with torch.inference_mode():
      out = model(**{name: ids[:, :width] for name, ids in inputs.items()})
    answers, _ = hf_squad_peer.postprocess(examples, features, out.start_logits.numpy(),
                                           out.end_logits.numpy(), settings)
    return {"answer": [answers[e.qid] for e in examples]}
  return predict


def _ner(args):
  tagger = transformers.pipeline("token-classification", model=args.model_dir, device="cpu",
                                 aggregation_strategy="first")

  def predict(batch):
    found = tagger([r["text"] for r in batch], batch_size=len(batch))
    return {"entities": [[[e["entity_group"], e["start"], e["end"]] for e in sentence]
                         for sentence in found]}
  return predict


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--task", choices=("classifier", "squad", "ner"), required=True)
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--max_seq_length", type=int, required=True)
  parser.add_argument("--doc_stride", type=int, default=128)
  parser.add_argument("--max_query_length", type=int, default=64)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--stages", help="A classifier's requests (JSON) to time by stage.")
  args = parser.parse_args()
  torch.set_num_threads(args.threads)
  torch.set_num_interop_threads(args.threads)
  if args.stages:
    print(json.dumps(stage_times(args)))
    return
  predict = {"classifier": _classifier, "squad": _squad, "ner": _ner}[args.task](args)
  serving_worker.serve(predict, {
      "side": "transformers", "transformers": transformers.__version__,
      "torch": torch.__version__,
      "threads": {"intra_op": torch.get_num_threads(),
                  "inter_op": torch.get_num_interop_threads()},
      "foreign_modules": sorted({m.split(".")[0] for m in sys.modules} & {
          "bert_tf", "tensorflow", "tf_keras"})})


if __name__ == "__main__":
  main()
