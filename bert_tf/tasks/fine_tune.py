"""Fine-tuning a classifier on a task, as google-research/bert's run_classifier.py, plus the
paper's recipe: several learning rates and restarts, each evaluated on dev, the best kept.

output_dir receives (the original's names first):
  train.tf_record, eval.tf_record, predict.tf_record      the features (one per extra split:
                                                           eval_<split>.tf_record, ...)
  ckpt-<step>                                              the model (the best run's, in a sweep)
  eval_results.txt, eval_results.json                      dev metrics of the best run
  test_results.tsv                                         class probabilities, a line per example
  <TASK>.tsv (e.g. MRPC.tsv, MNLI-m.tsv)                   GLUE server submission: index, label
  sweep_results.tsv                                        every run's dev metrics
  bert_config.json, vocab.txt, classifier_config.json      what export and later runs need
  runs/lr<lr>_seed<seed>/                                  each run's checkpoints, in a sweep
"""
import dataclasses
import json
import os
import shutil

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf import checkpoints
from bert_tf import distribute
from bert_tf import optimization
from bert_tf import training
from bert_tf.configs import BertConfig
from bert_tf.modeling.classifier import build_classifier
from bert_tf.tasks import classification
from bert_tf.tasks import glue
from bert_tf.tasks import metrics as metrics_lib
from bert_tf.tokenization import FullTokenizer

CLASSIFIER_CONFIG = "classifier_config.json"


@dataclasses.dataclass
class ClassifierConfig:
  """What a fine-tuned classifier is beyond its encoder: read back by export and predict-only
  runs. `labels` None means regression."""
  task_name: str
  labels: list[str] | None
  is_pair: bool
  max_seq_length: int
  do_lower_case: bool

  def to_json_file(self, path: str) -> None:
    _write_text(path, json.dumps(dataclasses.asdict(self), indent=2) + "\n")

  @classmethod
  def from_json_file(cls, path: str) -> "ClassifierConfig":
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f"{path}: not found (written by run_classifier into output_dir)")
    with tf.io.gfile.GFile(path) as f:
      return cls(**json.load(f))


@dataclasses.dataclass
class FineTuneArgs:
  """The plain arguments of a run; run_classifier's flags of the same names."""
  task_name: str
  data_dir: str
  output_dir: str
  bert_config_file: str | None = None
  vocab_file: str | None = None
  init_checkpoint: str | None = None
  do_lower_case: bool = True
  max_seq_length: int = 128
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  learning_rates: tuple[float, ...] = (5e-5,)
  num_restarts: int = 1
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 1000
  seed: int = 12345
  mixed_precision: str = "none"
  jit_compile: bool = False
  xnli_language: str = "zh"


def _write_text(path: str, text: str) -> None:
  """Writes `text` to `path` under a temporary name first, as every result file here."""
  tmp = f"{path}.tmp-{os.getpid()}"
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(text)
  tf.io.gfile.rename(tmp, path, overwrite=True)


def resolve_files(args: FineTuneArgs) -> tuple[BertConfig, str]:
  """(BertConfig, vocab file): from the flags, else from beside --init_checkpoint (a Hugging
  Face folder's config.json and vocab.txt, or a checkpoint's bert_config.json and vocab.txt)."""
  if args.bert_config_file:
    config = BertConfig.from_json_file(args.bert_config_file)
  elif args.init_checkpoint:
    config = checkpoints.load_config(args.init_checkpoint)
  else:
    raise ValueError("--bert_config_file is required (or an --init_checkpoint with its config)")
  vocab_file = args.vocab_file
  if not vocab_file and args.init_checkpoint:
    folder = (args.init_checkpoint if tf.io.gfile.isdir(args.init_checkpoint)
              else os.path.dirname(args.init_checkpoint))
    vocab_file = os.path.join(folder, "vocab.txt")
    if not tf.io.gfile.exists(vocab_file):
      raise FileNotFoundError(f"--vocab_file is required: no vocab.txt beside "
                              f"--init_checkpoint={args.init_checkpoint}")
  if not vocab_file:
    raise ValueError("--vocab_file is required (or an --init_checkpoint with vocab.txt beside it)")
  if args.max_seq_length > config.max_position_embeddings:
    raise ValueError(f"--max_seq_length={args.max_seq_length} is longer than the model's "
                     f"max_position_embeddings={config.max_position_embeddings}")
  return config, vocab_file


def _record_name(kind: str, index: int, split: glue.Split) -> str:
  """The original's names for the first split of a kind; the split's name after others."""
  return f"{kind}.tf_record" if index == 0 else f"{kind}_{split.name}.tf_record"


def write_split_records(task: glue.Task, args: FineTuneArgs, tokenizer: FullTokenizer,
                        kind: str, splits, batch_size: int) -> list[tuple]:
  """Features of each split to `<kind>[_<split>].tf_record` in output_dir; eval and predict
  records are padded with is_real_example 0 to whole batches.

  Returns (split, examples, record path) per split.
  """
  labels = task.label_list(args.data_dir)
  out = []
  for index, split in enumerate(splits):
    examples = task.get_examples(args.data_dir, split)
    features = classification.convert_examples(examples, labels, args.max_seq_length,
                                               tokenizer)
    if kind != "train":
      features += classification.padding_features(len(features), batch_size,
                                                  args.max_seq_length)
    path = os.path.join(args.output_dir, _record_name(kind, index, split))
    classification.write_records(path, features, args.max_seq_length, task.is_regression)
    logging.info("%s: %d examples (%d with padding) -> %s", split.columns.file, len(examples),
                 len(features), path)
    out.append((split, examples, path))
  return out


def loss_fn(regression: bool):
  """(features, logits) -> (mean loss, {"accuracy"}): cross-entropy, or squared error."""
  def fn(features, logits):
    labels = features["label_ids"][:, 0]
    if regression:
      return tf.reduce_mean(tf.square(logits[:, 0] - labels)), {}
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32)
    return loss, {"accuracy": tf.reduce_mean(hits)}
  return fn


def predict_logits(strategy: tf.distribute.Strategy, model: tf_keras.Model,
                   dataset: tf.data.Dataset) -> dict[str, np.ndarray]:
  """logits float [N, num_labels], label_ids [N], is_real_example [N] over the dataset, in its
  order: each global batch is split across replicas in order and gathered back."""
  @tf.function
  def step(features):
    def replica_fn(f):
      return {"logits": model(f, training=False), "label_ids": f["label_ids"][:, 0],
              "is_real_example": f["is_real_example"][:, 0]}
    return tf.nest.map_structure(lambda t: strategy.gather(t, axis=0),
                                 strategy.run(replica_fn, args=(features,)))
  batches = [step(b) for b in distribute.distribute_dataset(strategy, dataset)]
  return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


def compute_metrics(task: glue.Task, out: dict) -> dict[str, float]:
  """The task's metrics and the mean loss over the real examples of `predict_logits`' out."""
  real = out["is_real_example"] == 1
  logits, labels = out["logits"][real], out["label_ids"][real]
  if task.is_regression:
    predictions = logits[:, 0]
    loss = np.mean(np.square(predictions - labels))
  else:
    labels = labels.astype(np.int64)
    predictions = np.argmax(logits, -1)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
  results = metrics_lib.compute(task.metrics, labels, predictions)
  results["loss"] = float(loss)
  return results


def restore_classifier(model: tf_keras.Model, checkpoint: str) -> int:
  """Restores a classifier checkpoint (training's, with optimizer state, or a sweep's best)
  into `model`. Returns its global step. Raises ValueError naming the checkpoint when a
  variable of the model is not in it."""
  try:
    tf.train.Checkpoint(model=model).read(checkpoint).expect_partial() \
        .assert_existing_objects_matched()
  except AssertionError as e:
    raise ValueError(f"{checkpoint}: does not match the classifier: {e}") from e
  step = tf.Variable(0, dtype=tf.int64)
  tf.train.Checkpoint(global_step=step).read(checkpoint).expect_partial()
  return int(step.numpy())


class FineTuner:
  """One run_classifier invocation: records, the runs of the sweep, results files."""

  def __init__(self, args: FineTuneArgs, strategy: tf.distribute.Strategy):
    if not (args.do_train or args.do_eval or args.do_predict):
      raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    runs = len(args.learning_rates) * args.num_restarts
    if runs > 1 and args.do_train and not args.do_eval:
      raise ValueError(f"{runs} runs (--learning_rate values x --num_restarts) need --do_eval: "
                       "the best on dev is kept")
    self.args = args
    self.strategy = strategy
    self.task = glue.get_task(args.task_name, args.data_dir, args.xnli_language)
    self.bert_config, vocab_file = resolve_files(args)
    self.tokenizer = FullTokenizer(vocab_file, args.do_lower_case)
    self._check_files()
    self.labels = self.task.label_list(args.data_dir)
    self.is_chief = distribute.is_chief(strategy)
    tf.io.gfile.makedirs(args.output_dir)
    if self.is_chief:
      self._write_model_files(vocab_file)

  def _check_files(self) -> None:
    """Fails before any training when a split that the run will need has no file."""
    wanted = {"--do_train": [self.task.train] if self.args.do_train else [],
              "--do_eval": self.task.eval_splits if self.args.do_eval else [],
              "--do_predict": self.task.predict_splits if self.args.do_predict else []}
    for flag, splits in wanted.items():
      for split in splits:
        path = os.path.join(self.args.data_dir, split.columns.file)
        if not tf.io.gfile.exists(path):
          raise glue.DataError(f"{path}: file not found (the {split.name} split, for {flag})")

  def _write_model_files(self, vocab_file: str) -> None:
    """bert_config.json and vocab.txt beside the checkpoints (so they load as an
    --init_checkpoint, and export finds everything in one folder), and classifier_config.json."""
    out = self.args.output_dir
    self.bert_config.to_json_file(os.path.join(out, "bert_config.json"))
    if os.path.abspath(vocab_file) != os.path.abspath(os.path.join(out, "vocab.txt")):
      tf.io.gfile.copy(vocab_file, os.path.join(out, "vocab.txt"), overwrite=True)
    ClassifierConfig(self.task.name, self.labels, self.task.is_pair, self.args.max_seq_length,
                     self.args.do_lower_case).to_json_file(os.path.join(out, CLASSIFIER_CONFIG))

  def model_fn(self) -> tf_keras.Model:
    return build_classifier(self.bert_config, 1 if self.labels is None else len(self.labels))

  def init_fn(self, model) -> None:
    """Loads --init_checkpoint into the encoder (the output layer stays freshly drawn)."""
    if self.args.init_checkpoint:
      checkpoints.load_into_encoder(model.encoder, self.args.init_checkpoint)
      logging.info("initialized the encoder from %s", self.args.init_checkpoint)

  def dataset(self, path: str, batch_size: int, is_training: bool, seed=None, ctx=None):
    return classification.dataset(path, self.args.max_seq_length, self.task.is_regression,
                                  batch_size, is_training, input_context=ctx, seed=seed)

  def train(self, path: str, num_examples: int, learning_rate: float, seed: int,
            run_dir: str) -> tuple[tf_keras.Model, int]:
    """One fine-tuning run in run_dir (resuming from its latest checkpoint). Returns the
    trained model and the global step."""
    args = self.args
    num_train_steps = int(num_examples / args.train_batch_size * args.num_train_epochs)
    if num_train_steps < 1:
      raise ValueError(f"{num_examples} training examples make no step of "
                       f"--train_batch_size={args.train_batch_size}")
    num_warmup_steps = int(num_train_steps * args.warmup_proportion)
    tf_keras.utils.set_random_seed(seed)
    built = []

    def model_fn():
      built.append(self.model_fn())
      return built[-1]

    results = training.train(
        self.strategy, model_fn,
        lambda: optimization.create_optimizer(
            learning_rate, num_train_steps, num_warmup_steps,
            loss_scaling=args.mixed_precision == "fp16"),
        loss_fn(self.task.is_regression),
        lambda ctx: self.dataset(path, args.train_batch_size, True, seed, ctx),
        run_dir, num_train_steps, steps_per_loop=args.iterations_per_loop,
        save_checkpoints_steps=args.save_checkpoints_steps, init_fn=self.init_fn,
        jit_compile=args.jit_compile)
    return built[-1], results["global_step"]

  def restore(self) -> tuple[tf_keras.Model, int]:
    """The model of output_dir's latest checkpoint, else --init_checkpoint's encoder."""
    with self.strategy.scope():
      model = self.model_fn()
    latest = tf.train.latest_checkpoint(self.args.output_dir)
    if latest:
      logging.info("restoring %s", latest)
      return model, restore_classifier(model, latest)
    if not self.args.init_checkpoint:
      raise FileNotFoundError(f"no checkpoint in {self.args.output_dir} and no "
                              "--init_checkpoint: nothing to evaluate or predict with")
    self.init_fn(model)
    return model, 0

  def evaluate(self, model, eval_records) -> dict[str, float]:
    """Dev metrics, named as the original's eval_results.txt: `eval_<metric>` for the first
    dev split, `eval_<split>_<metric>` for others (MNLI's dev_mismatched)."""
    results = {}
    for index, (split, _, path) in enumerate(eval_records):
      out = predict_logits(self.strategy, model, self.dataset(path, self.args.eval_batch_size,
                                                              False))
      prefix = "eval_" if index == 0 else f"eval_{split.name}_"
      results.update({prefix + k: v for k, v in compute_metrics(self.task, out).items()})
    return results

  def run(self) -> dict:
    """Does what the arguments ask; returns the results written to eval_results.json."""
    args = self.args
    eval_records = (write_split_records(self.task, args, self.tokenizer, "eval",
                                        self.task.eval_splits, args.eval_batch_size)
                    if args.do_eval else [])
    if args.do_train:
      [(_, train_examples, train_path)] = write_split_records(
          self.task, args, self.tokenizer, "train", [self.task.train], args.train_batch_size)
      model, results, runs = self.sweep(train_path, len(train_examples), eval_records)
    else:
      model, step = self.restore()
      results, runs = {"global_step": step}, []
      if args.do_eval:
        results.update(self.evaluate(model, eval_records))
    if args.do_eval and self.is_chief:
      self.write_eval_results(results, runs)
    if args.do_predict:
      self.predict(model)
    return {"best": results, "runs": runs}

  def sweep(self, train_path: str, num_examples: int, eval_records):
    """Fine-tunes once per (learning rate, restart); keeps the best on the task's primary
    metric on the first dev split. Returns (best model, its results, every run's results)."""
    args = self.args
    single = len(args.learning_rates) * args.num_restarts == 1
    best_model, best, runs = None, None, []
    for learning_rate in args.learning_rates:
      for restart in range(args.num_restarts):
        seed = args.seed + restart
        run_dir = (args.output_dir if single else
                   os.path.join(args.output_dir, "runs", f"lr{learning_rate:g}_seed{seed}"))
        model, step = self.train(train_path, num_examples, learning_rate, seed, run_dir)
        results = {"learning_rate": learning_rate, "seed": seed, "global_step": step}
        if eval_records:
          results.update(self.evaluate(model, eval_records))
          logging.info("run lr=%g seed=%d: %s", learning_rate, seed, results)
        runs.append(results)
        key = f"eval_{self.task.primary_metric}"
        if best is None or (key in results and results[key] > best[key]):
          best_model, best = model, results
    if not single and self.is_chief:
      # The best run's weights become output_dir's checkpoint, for predict and export.
      step = tf.Variable(best["global_step"], dtype=tf.int64)
      tf.train.CheckpointManager(tf.train.Checkpoint(model=best_model, global_step=step),
                                 args.output_dir, max_to_keep=1, checkpoint_name="ckpt").save(
                                     checkpoint_number=best["global_step"])
    return best_model, best, runs

  def write_eval_results(self, results: dict, runs: list[dict]) -> None:
    out = self.args.output_dir
    training.write_eval_results(os.path.join(out, "eval_results.txt"), results)
    _write_text(os.path.join(out, "eval_results.json"), json.dumps(
        {"task": self.task.name, "primary_metric": self.task.primary_metric, "best": results,
         "runs": runs}, indent=2) + "\n")
    logging.info("***** Eval results *****\n%s",
                 "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))
    if len(runs) > 1:
      columns = sorted({k for r in runs for k in r}, key=lambda k: (k != "learning_rate",
                                                                    k != "seed", k))
      table = ["\t".join(columns)] + ["\t".join(f"{r.get(c, '')}" for c in columns)
                                      for r in runs]
      _write_text(os.path.join(out, "sweep_results.tsv"), "\n".join(table) + "\n")
      logging.info("***** All runs *****\n%s", "\n".join(table))

  def predict(self, model) -> None:
    """test_results.tsv (the original's: class probabilities, tab-separated, a line per
    example; the score for regression) and the GLUE submission file, per test split."""
    args = self.args
    records = write_split_records(self.task, args, self.tokenizer, "predict",
                                  self.task.predict_splits, args.predict_batch_size)
    for index, (split, examples, path) in enumerate(records):
      out = predict_logits(self.strategy, model,
                           self.dataset(path, args.predict_batch_size, False))
      logits = out["logits"][out["is_real_example"] == 1]
      if not self.is_chief:
        continue
      name = "test_results.tsv" if index == 0 else f"test_results_{split.name}.tsv"
      if self.task.is_regression:
        lines, labels = [f"{s:.6f}" for s in logits[:, 0]], [f"{s:.3f}" for s in logits[:, 0]]
      else:
        probabilities = tf.nn.softmax(logits).numpy()
        lines = ["\t".join(f"{p:.6f}" for p in row) for row in probabilities]
        labels = [self.labels[i] for i in np.argmax(logits, -1)]
      _write_text(os.path.join(args.output_dir, name), "\n".join(lines) + "\n")
      if split.submission:
        rows = [f"{e.guid}\t{label}" for e, label in zip(examples, labels)]
        _write_text(os.path.join(args.output_dir, split.submission),
                    "\n".join(["index\tprediction"] + rows) + "\n")
      logging.info("%s: %d predictions -> %s", split.columns.file, len(lines), name)
