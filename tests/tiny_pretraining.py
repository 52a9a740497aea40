"""The tiny pretrainer that the training tests share: its config (dropout off), random
pretraining records, an initial checkpoint, a run of a few steps, and checkpoint comparisons."""
import os
import shutil

import numpy as np
import tensorflow as tf

from bert_tf.modeling import checkpoints
from bert_tf.modeling import configs
from bert_tf.modeling import pretrainer
from bert_tf.training import loop
from bert_tf.training import optimization
from tfrecords import datasets, schema, writer

SEQ, PREDS, VOCAB_SIZE, BATCH = 32, 5, 100, 8
TOTAL_STEPS = 8  # The schedule's length, whether a run stops earlier or not.
# Dropout off: runs that see the same data must compute the same numbers. One layer: the
# training tests are about the loop, the optimizer and the checkpoints, not the encoder's depth.
CONFIG = configs.BertConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)


def write_pretraining_records(path: str, num_records: int, seed: int = 0,
                              seq: int = SEQ, nan_from: int | None = None,
                              preds: int = PREDS) -> str:
  """Random pretraining records (all PREDS predictions real); from record `nan_from` on, the
  masked_lm_weights are NaN (a poisoned batch)."""
  rng = np.random.default_rng(seed)
  rows = []
  for i in range(num_records):
    weights = np.full(preds, np.nan if nan_from is not None and i >= nan_from else 1.0)
    rows.append(dict(input_ids=rng.integers(1, VOCAB_SIZE, seq), input_mask=np.ones(seq),
                     segment_ids=np.repeat([0, 1], seq // 2),
                     masked_lm_positions=rng.choice(np.arange(1, seq), preds, replace=False),
                     masked_lm_ids=rng.integers(1, VOCAB_SIZE, preds), masked_lm_weights=weights,
                     next_sentence_labels=[rng.integers(0, 2)]))
  writer.write_records(path, schema.pretraining_features(seq, preds), rows)
  return path


def write_init_checkpoint(prefix: str) -> str:
  """A freshly initialized tiny pretrainer, saved as this project's checkpoint_items."""
  model = pretrainer.build_pretrainer(CONFIG, SEQ, PREDS)
  return tf.train.Checkpoint(**model.checkpoint_items).write(prefix)


def train_tiny(strategy, records: str, init_prefix: str, output_dir: str, num_train_steps: int,
               jit_compile: bool = False, loss_scaling: bool = False, dataset_fn=None,
               steps_per_loop: int = 2, save_checkpoints_steps: int = 2, **train_kwargs):
  """Trains the tiny pretrainer from init_prefix: batches of 8, by default a checkpoint every 2
  steps (`train_kwargs`: loop.train's other arguments)."""
  # tf.data's shuffle order depends on the global seed as well as its own: pin it, so this
  # process and a resuming one agree whatever earlier tests in this process set it to.
  tf.random.set_seed(0)

  def seeded_dataset(ctx):
    return datasets.pretraining_dataset(records, SEQ, PREDS, BATCH, is_training=True,
                                        input_context=ctx, seed=1)
  return loop.train(
      strategy, lambda: pretrainer.build_pretrainer(CONFIG, SEQ, PREDS),
      lambda: optimization.create_optimizer(1e-3, TOTAL_STEPS, 2, loss_scaling=loss_scaling),
      pretrainer.pretraining_loss, dataset_fn or seeded_dataset, output_dir, num_train_steps,
      steps_per_loop=steps_per_loop, save_checkpoints_steps=save_checkpoints_steps,
      init_fn=lambda model: checkpoints.load_into_pretrainer(model, init_prefix),
      jit_compile=jit_compile, count_fn=pretrainer.pretraining_loss_counts, **train_kwargs)


def checkpoint_values(prefix: str) -> dict[str, np.ndarray]:
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def assert_same_values(a: dict, b: dict, rtol=1e-5, atol=1e-6):
  assert a.keys() == b.keys()
  for name in a:
    np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=atol, err_msg=name)


def checkpoint_steps(output_dir: str) -> list[int]:
  state = tf.train.get_checkpoint_state(output_dir)
  return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths] if state else []


def killed_copy(run_dir, step: int, killed_dir, files=("bert_config.json",)) -> None:
  """killed_dir as a run killed just after writing ckpt-<step> would have left it: that
  checkpoint (the newest of the checkpoint state) and run_dir's `files`, nothing later."""
  os.makedirs(killed_dir)
  for name in os.listdir(run_dir):
    if name.startswith(f"ckpt-{step}.") or name in files:
      shutil.copy(os.path.join(run_dir, name), killed_dir)
  tf.compat.v1.train.update_checkpoint_state(str(killed_dir), f"ckpt-{step}",
                                             all_model_checkpoint_paths=[f"ckpt-{step}"])
