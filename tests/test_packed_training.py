"""Packed pretraining (--pack_sequences) with what else a run switches on (issue 65, "What to
build" 4): recompute and XLA train the plain packed run's weights; bf16 trains close to them;
dynamic masking draws its masks in the pipeline, ahead of packing; MirroredStrategy over two
CPU replicas, each fed its own batch of packed rows, and MultiWorkerMirrored over two worker
processes update as one device; two accumulated micro-batches make the whole batch's update.
Resume and evaluation: test_run_pretraining.py.

Every run is `pretraining.pretrain` in this process (the Mirrored one in a process of its
own, below; the multi-worker one, run_pretraining's two processes), on short records that pack 2-3 to a row, from one initial checkpoint, dropout
off (tiny_pretraining's CONFIG): runs that see the same rows compute the same function.

Tolerances: Adam's step m / (sqrt(v) + eps) is about +-lr = 3e-3 a weight in the first
updates whatever the gradient's size, so gradients that agree to float32 rounding give
weights that agree to ~lr x 1e-6; a real difference (another gradient, another clipping
factor) shows at a percent of lr and more. atol 1e-5 (a third of a percent of one step)
tells them apart.

`python tests/test_packed_training.py DIR` is the Mirrored driver: it must split the CPU into
two logical devices before TensorFlow initialises, so it runs in a process of its own.
"""
import glob
import inspect
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import pretraining
import processes
from tiny_pretraining import (CONFIG, PREDS, SEQ, VOCAB_SIZE, assert_same_values,
                              checkpoint_values, write_init_checkpoint)
from tfrecords import datasets, schema, writer

pytestmark = pytest.mark.slow  # Every test here trains.

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
STEPS, ROWS, LR = 3, 8, 3e-3
CLS, SEP, MASK = 2, 3, 4  # write_vocab's special tokens ([PAD] 0, [UNK] 1).
NUM_RECORDS, SHORTEST, LONGEST = 48, 6, 20  # 13 tokens on average: 2-3 records a row of 32.
# The words' law, p ~ 1 / rank: something the masked LM learns in three steps (the unigram:
# 3.6 nats, where a fresh model's is log V = 4.6), so that a loss falls more than a batch's
# noise (uniform words leave nothing: their 4.55 is a fresh model's).
WORDS = np.arange(MASK + 1, VOCAB_SIZE)
ZIPF = 1 / np.arange(1, len(WORDS) + 1) / np.sum(1 / np.arange(1, len(WORDS) + 1))


def write_vocab(path: str) -> str:
  """VOCAB_SIZE tokens: the specials, then words, every fifth one a "##" piece."""
  words = [f"##w{i}" if i % 5 == 0 else f"w{i}" for i in range(VOCAB_SIZE - 5)]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
  return path


def write_short_records(path: str, masked: bool, seed: int = 0) -> str:
  """NUM_RECORDS records of SHORTEST to LONGEST tokens ([CLS] A [SEP] B [SEP], words of
  write_vocab by ZIPF), padded to SEQ: what packing packs. `masked`: masked offline by the
  original's count, round(n * 0.15) and at least 1, each target shown as [MASK] (the records
  of create_pretraining_data); else unmasked (its --dynamic_masking records)."""
  rng = np.random.default_rng(seed)
  pad = lambda values, width: np.pad(values, (0, width - len(values)))
  rows = []
  for _ in range(NUM_RECORDS):
    n = int(rng.integers(SHORTEST, LONGEST + 1))
    ids = rng.choice(WORDS, n, p=ZIPF)
    ids[[0, n // 2, n - 1]] = [CLS, SEP, SEP]
    row = dict(input_ids=pad(ids, SEQ), input_mask=pad(np.ones(n), SEQ),
               segment_ids=pad(np.arange(n) > n // 2, SEQ),
               next_sentence_labels=[rng.integers(0, 2)])
    if masked:
      words = np.setdiff1d(np.arange(1, n - 1), [n // 2])
      positions = np.sort(rng.choice(words, max(1, round(n * 0.15)), replace=False))
      row.update(masked_lm_positions=pad(positions, PREDS), masked_lm_ids=pad(ids[positions],
                                                                             PREDS),
                 masked_lm_weights=pad(np.ones(len(positions)), PREDS))
      row["input_ids"][positions] = MASK
    rows.append(row)
  layout = (schema.pretraining_features(SEQ, PREDS) if masked else
            schema.unmasked_pretraining_features(SEQ))
  writer.write_records(path, layout, rows)
  return path


def write_data(d: str) -> None:
  """What every run reads, in d: bert_config.json, the records either way, the vocab and the
  initial checkpoint (an unpacked pretrainer's: the packed one has the same variables),
  seeded: the same in every process."""
  tf_keras.utils.set_random_seed(0)
  CONFIG.to_json_file(os.path.join(d, "bert_config.json"))
  write_short_records(os.path.join(d, "masked.tfrecord"), masked=True)
  write_short_records(os.path.join(d, "unmasked.tfrecord"), masked=False)
  write_vocab(os.path.join(d, "vocab.txt"))
  write_init_checkpoint(os.path.join(d, "init", "ckpt"))


def run_args(d: str, name: str, **overrides) -> pretraining.PretrainArgs:
  """The packed run of STEPS updates of ROWS rows into d/name, a summary every step; the
  learning rate from its first step (no warm-up)."""
  values = dict(bert_config_file=os.path.join(d, "bert_config.json"),
                input_file=os.path.join(d, "masked.tfrecord"),
                init_checkpoint=os.path.join(d, "init", "ckpt"),
                output_dir=os.path.join(d, name), max_seq_length=SEQ,
                max_predictions_per_seq=PREDS, do_train=True, train_batch_size=ROWS,
                learning_rate=LR, num_train_steps=STEPS, num_warmup_steps=0,
                save_checkpoints_steps=STEPS, iterations_per_loop=1, pack_sequences=True,
                packing_buffer=64)
  return pretraining.PretrainArgs(**dict(values, **overrides))


def pretrain(args: pretraining.PretrainArgs, strategy_name: str = "one_device") -> dict:
  """pretrain(args); {"results": the training loop's last results, "dataset_fn": the
  pipeline it trained from, "replicas"}: pretrain itself returns evaluation's results only,
  so loop.train is wrapped for the call (by hand: the Mirrored driver has no monkeypatch)."""
  strategy = distribute.get_strategy(strategy_name)
  seen, train = {"replicas": strategy.num_replicas_in_sync}, loop.train

  def recording(*a, **kw):
    seen["dataset_fn"] = inspect.signature(train).bind(*a, **kw).arguments["dataset_fn"]
    seen["results"] = train(*a, **kw)
    return seen["results"]
  loop.train = recording
  try:
    pretraining.pretrain(args, strategy)
  finally:
    loop.train = train
  return seen


def summaries(output_dir: str) -> dict[str, list[float]]:
  """The training summaries the loop wrote (one a step here), each tag's values by step."""
  values = {}
  for path in glob.glob(os.path.join(output_dir, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        values.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
  return {tag: [by_step[s] for s in sorted(by_step)] for tag, by_step in values.items()}


def weights(d: str, name: str) -> dict[str, np.ndarray]:
  return checkpoint_values(os.path.join(d, name, f"ckpt-{STEPS}"))


@pytest.fixture(scope="module")
def plain(tmp_path_factory, request):
  """The data, and the plain packed run (float32, one device, no other switch) that the
  others are held to: {"dir", "results", "weights", "summaries", "mirrored": the Mirrored
  driver's process, or None when its test is not to run}."""
  d = str(tmp_path_factory.mktemp("packed"))
  write_data(d)
  # The Mirrored run's process starts now, beside this one's runs, rather than when its test
  # comes: ~4 s of its ~9 are Python's and TensorFlow's start, and two cores run both.
  mirrored = None
  if any(item.name.startswith("test_mirrored") for item in request.session.items):
    with open(os.path.join(d, "mirrored.log"), "w") as log:
      mirrored = subprocess.Popen([sys.executable, __file__, d], stdout=log,
                                  stderr=subprocess.STDOUT, env=ENV)
  try:
    run = pretrain(run_args(d, "plain"))
    values = weights(d, "plain")
    initial = checkpoint_values(os.path.join(d, "init", "ckpt"))
    # The steps moved (nearly) every weight: the comparisons below compare something.
    moved = [k for k in initial if k in values and not np.allclose(initial[k], values[k])]
    assert len(moved) > 20, moved
    yield dict(dir=d, results=run["results"], weights=values, mirrored=mirrored,
               summaries=summaries(os.path.join(d, "plain")))
  finally:
    if mirrored is not None:
      mirrored.kill()  # Done by now, unless its test failed or never waited for it.
      mirrored.wait()


def test_the_plain_packed_run_packs_and_learns(plain):
  """Sanity for the comparisons: each row held more than one record (the sequences the loop
  counted over its rows), and the masked-LM loss fell over the run's three updates (by
  0.14-0.18 in seven initialisations; the next-sentence loss, of random labels, only
  wavers)."""
  s = plain["summaries"]
  per_row = np.array(s["sequences_per_second"]) / np.array(s["examples_per_second"])
  assert (per_row > 1.5).all(), per_row
  losses = s["masked_lm_loss"]
  assert len(losses) == STEPS and losses[-1] < losses[0], losses


def test_recompute_trains_the_plain_runs_weights(plain):
  """--recompute_layers, packed (each block's block-diagonal attention and per-sequence
  positions run again in the backward pass): the plain packed run's weights after three
  updates, to the module's 1e-5 (0.0 measured: without dropout or XLA the second pass is
  the same ops)."""
  pretrain(run_args(plain["dir"], "recompute", recompute_layers=True))
  assert_same_values(weights(plain["dir"], "recompute"), plain["weights"], rtol=0, atol=1e-5)


def test_xla_trains_the_plain_runs_weights(plain):
  """--jit_compile, packed (the block-diagonal mask, the per-sequence positions and the
  row's masked-LM and [CLS] gathers compiled): the plain packed run's weights after three
  updates, to the module's 1e-5 (4e-7 measured: XLA orders its float32 sums its own way)."""
  pretrain(run_args(plain["dir"], "xla", jit_compile=True))
  assert_same_values(weights(plain["dir"], "xla"), plain["weights"], rtol=0, atol=1e-5)


def test_two_micro_batches_of_packed_rows_make_the_whole_batchs_update(plain):
  """--gradient_accumulation_steps=2, packed: each update's 8 rows taken as two micro-batches
  of 4 give the update of the 8 at once, as unpacked (test_gradient_accumulation: rtol 0,
  atol 1e-5): every loss term over its count in the whole update (the masked positions, and
  the sequences the rows hold, not the rows), the same Adam step. The rows differ in their
  targets and sequences, so a mean per micro-batch would not be the batch's. It holds the
  position embeddings' dense gradient (PackedPositionEmbedding): as a gather's IndexedSlices,
  the clipping norm counted repeated positions unsummed in the whole batch (1.8339) and summed
  under accumulation (1.8358), and the weights were 9e-5 apart after three updates."""
  pretrain(run_args(plain["dir"], "accumulated", gradient_accumulation_steps=2))
  assert_same_values(weights(plain["dir"], "accumulated"), plain["weights"], rtol=0, atol=1e-5)


def test_bf16_trains_close_to_float32(plain):
  """--mixed_precision=bf16, packed: a finite loss each step, within one bfloat16 rounding
  (2^-8) of float32's (at these small initial weights the logits are near 0, so the loss is
  near log V and moves little: 6e-5 measured), float32 weights, and updates that are not
  float32's (the policy acted: a gradient rounded across zero flips a weight's Adam step of
  about +-lr, 6e-3 measured) but point its way (cosine of the weights' moves 0.9998).
  Not fp16 as well (2.6 s more; measured alike: loss 2e-5, cosine 0.9999): its loss scaling
  is the loop's, packed or not (test_training, test_gradient_accumulation)."""
  loop.set_mixed_precision("bf16")
  try:
    run = pretrain(run_args(plain["dir"], "bf16", mixed_precision="bf16"))
  finally:
    loop.set_mixed_precision("none")
  losses = summaries(os.path.join(plain["dir"], "bf16"))["loss"]
  assert np.isfinite(losses).all() and len(losses) == STEPS, losses
  np.testing.assert_allclose(losses, plain["summaries"]["loss"], rtol=2.0 ** -8)
  assert run["results"]["loss"] == pytest.approx(plain["results"]["loss"], rel=2.0 ** -8)
  values = weights(plain["dir"], "bf16")
  assert all(v.dtype in (np.float32, np.int64) for v in values.values())
  initial = checkpoint_values(os.path.join(plain["dir"], "init", "ckpt"))
  names = [k for k in initial if k in values]
  moves = np.concatenate([(values[k] - initial[k]).ravel() for k in names])
  float32 = np.concatenate([(plain["weights"][k] - initial[k]).ravel() for k in names])
  assert np.abs(moves - float32).max() > 1e-4
  cosine = moves @ float32 / (np.linalg.norm(moves) * np.linalg.norm(float32))
  assert cosine > 0.99, cosine


def originals(batch: dict) -> list[tuple[tuple[int, ...], frozenset[int]]]:
  """Each sequence of each packed row: (its original tokens, the positions in it that are
  targets), from the row's ids with its targets given back their labels."""
  found = []
  for r, row_mask in enumerate(batch["input_mask"]):
    targets = batch["masked_lm_weights"][r] > 0
    positions = batch["masked_lm_positions"][r][targets]
    ids = batch["input_word_ids"][r].copy()
    ids[positions] = batch["masked_lm_ids"][r][targets]
    for j in range(1, row_mask.max() + 1):
      where = np.flatnonzero(row_mask == j)
      start = where[0]
      found.append((tuple(ids[where]), frozenset(int(p) - start for p in positions
                                                 if row_mask[p] == j)))
  return found


def test_dynamic_masking_masks_in_the_pipeline_ahead_of_packing(plain):
  """--dynamic_masking on unmasked records, packed: the run trains (a finite loss, the
  masked-LM loss falling: by 0.07-0.18 in seven initialisations) on rows of more than one
  record, and its pipeline masks each record afresh each epoch before packing it. Read 8
  batches (~3 epochs of the 48 records): every sequence of every row is one of the records,
  whole (its targets given back their labels), targets only on its words, and all 48 come;
  and a record's targets repeat from one reading to the next no more often than
  chance, 1 / C(words, budget) each time, a budget of round(0.15 words) and at least 1 (the
  short ones, 1 target of 3 to 9 words, repeat often: 11 repeats of 104 here, where chance
  gives 9.6; of 1,887 over 100 batches, 186 where it gives 184). Masks drawn once, offline,
  would repeat every time."""
  d = plain["dir"]
  run = pretrain(run_args(d, "dynamic", input_file=os.path.join(d, "unmasked.tfrecord"),
                          dynamic_masking=True, vocab_file=os.path.join(d, "vocab.txt")))
  s = summaries(os.path.join(d, "dynamic"))
  losses = s["masked_lm_loss"]
  assert np.isfinite(s["loss"]).all() and losses[-1] < losses[0], (s["loss"], losses)
  per_row = np.array(s["sequences_per_second"]) / np.array(s["examples_per_second"])
  assert (per_row > 1.5).all(), per_row

  [records] = datasets.record_dataset([os.path.join(d, "unmasked.tfrecord")],
                                      schema.unmasked_pretraining_features(SEQ), NUM_RECORDS,
                                      is_training=False).as_numpy_iterator()
  known = {tuple(ids[mask > 0]) for ids, mask in zip(records["input_word_ids"],
                                                     records["input_mask"])}
  assert len(known) == NUM_RECORDS
  readings = {}
  for batch in run["dataset_fn"](tf.distribute.InputContext()).take(8).as_numpy_iterator():
    assert batch["input_word_ids"].shape == (ROWS, SEQ)
    for tokens, targets in originals(batch):
      assert tokens in known
      assert targets and all(tokens[p] not in (CLS, SEP) for p in targets)
      readings.setdefault(tokens, []).append(targets)
  assert len(readings) == NUM_RECORDS
  pairs = [(len(tokens) - 3, a == b) for tokens, targets in readings.items()
           for a, b in zip(targets, targets[1:])]
  assert len(pairs) > 1.5 * NUM_RECORDS
  chance = sum(1 / math.comb(words, max(1, int(np.rint(0.15 * words)))) for words, _ in pairs)
  repeats = sum(same for _, same in pairs)
  assert repeats <= chance + 3 * math.sqrt(chance), (repeats, chance, len(pairs))


def test_mirrored_two_replicas_each_pack_their_rows_and_update_as_one_device(plain):
  """MirroredStrategy over two logical CPUs, packed: the pipeline gives each replica a batch
  of its own 4 packed rows (ROWS / 2), and the update of the two is the one device's of the
  8 (the masked positions and sequences counted across replicas): the plain run's weights,
  to test_distribute's unpacked tolerance (1e-7 measured)."""
  d = plain["dir"]
  returncode = plain["mirrored"].wait(timeout=900)
  with open(os.path.join(d, "mirrored.log"), encoding="utf-8") as f:
    assert returncode == 0, f.read()[-3000:]
  with open(os.path.join(d, "mirrored.json"), encoding="utf-8") as f:
    results = json.load(f)
  assert results["replicas"] == 2
  assert results["rows_per_replica"] == ROWS // 2
  assert results["loss"] == pytest.approx(plain["results"]["loss"], rel=1e-5)
  assert_same_values(weights(d, "mirrored"), plain["weights"], rtol=1e-4, atol=1e-6)


def test_multi_worker_two_processes_each_pack_their_rows_and_update_as_one_device(plain):
  """run_pretraining --pack_sequences under MultiWorkerMirrored, two worker processes on
  localhost (one CPU replica each, the collectives over gRPC): each worker packs its own
  pipeline's rows, and the all-reduced update is the one device's: the plain run's weights,
  to the Mirrored test's tolerance. The entry point as users start it, from TF_CONFIG."""
  d = plain["dir"]
  output_dir = os.path.join(d, "multi_worker")
  workers = processes.run_workers(
      ["-m", "bert_tf.scripts.run_pretraining",
       f"--bert_config_file={os.path.join(d, 'bert_config.json')}",
       f"--input_file={os.path.join(d, 'masked.tfrecord')}",
       f"--init_checkpoint={os.path.join(d, 'init', 'ckpt')}", f"--output_dir={output_dir}",
       f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}", "--do_train",
       f"--train_batch_size={ROWS}", f"--learning_rate={LR}", f"--num_train_steps={STEPS}",
       "--num_warmup_steps=0", f"--save_checkpoints_steps={STEPS}", "--iterations_per_loop=1",
       "--pack_sequences", "--packing_buffer=64",
       "--distribution_strategy=multi_worker_mirrored"], d)
  for returncode, err in workers:
    assert returncode == 0, err[-3000:]
    assert "multi_worker_mirrored with 2 replicas" in err, err[-3000:]
  assert_same_values(weights(d, "multi_worker"), plain["weights"], rtol=1e-4, atol=1e-6)


def _mirrored_driver(d: str) -> None:
  """The plain run's arguments under Mirrored over two CPUs, into d/mirrored; what the test
  checks besides the checkpoint into d/mirrored.json."""
  processes.two_cpu_devices()
  processes.tiny_model_settings()
  run = pretrain(run_args(d, "mirrored"), "mirrored")
  ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                   num_replicas_in_sync=2)
  [batch] = run["dataset_fn"](ctx).take(1)
  with open(os.path.join(d, "mirrored.json"), "w", encoding="utf-8") as f:
    json.dump(dict(replicas=run["replicas"], loss=run["results"]["loss"],
                   rows_per_replica=int(batch["input_word_ids"].shape[0])), f)


if __name__ == "__main__":
  _mirrored_driver(sys.argv[1])
