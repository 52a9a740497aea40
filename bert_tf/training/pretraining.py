"""Pretraining BERT (masked LM + next sentence prediction) on google-research/bert's records,
callable without flags:

    pretrain(PretrainArgs(bert_config_file=..., input_file="data/*.tfrecord",
                          output_dir=..., do_train=True), strategy)

output_dir receives `ckpt-<step>` checkpoints (a re-run resumes from the latest), a copy of
bert_config.json beside them (so the checkpoints load as `--init_checkpoint` elsewhere),
run_settings.json (a re-run with other settings is refused, not resumed; one with a larger
num_train_steps trains on to it, the linear decay rebuilt over the new total), TensorBoard
summaries, and with do_eval eval_results.txt. stop_at_step stops training at that global step
while the schedule (warm-up, linear decay) runs over num_train_steps; it is no run setting: a
re-run with a larger one (or none) trains on. While a run writes there, a second one on the
same output_dir is refused (`output_lock`).

The paper's two phases (90% of the steps at length 128, the rest at 512 on records of their
own): phase 1 with num_train_steps=<total> and stop_at_step=<switch>, phase 2 in a new
output_dir from phase 1's, either way:
  continue_from   phase 1's output_dir or one of its ckpt-N: its model, optimizer state and
                  global step S, the one schedule going on to num_train_steps (the total);
                  learning_rate, num_warmup_steps, optimizer and num_train_steps must be
                  phase 1's. Phase 2's
                  own records are read from their start: a resumed phase 2 skips only what it
                  consumed (S is kept in its run_settings.json as input_start_step).
  init_checkpoint phase 1's weights only (encoder and both heads): a schedule of its own from
                  step 0, warming up again (NVIDIA's two LAMB phases).
Nothing is resized: the position table holds max_position_embeddings rows in both phases,
and the rows past phase 1's length first train in phase 2.

pack_sequences: training packs up to max_sequences_per_pack records (3) into each row of
max_seq_length, from the records as they are (`tfrecords.packing`, last in the input
pipeline), and trains the packed pretrainer: the unpacked model's math and variables, no
compute on the padding that packing removes. train_batch_size counts rows (packs): the static
shape, the memory and the update; num_train_steps counts updates. A row then holds k records
on average (sequences_per_second / examples_per_second in the progress lines, beside
tokens_per_second, the real tokens), and for the paper's batch of records, give
train_batch_size / k (Graphcore's convention). Not MLPerf's (a batch of so many records,
packs of them counted as their records): under the static shapes XLA and TPUs need, a batch
of rows holds a varying number of records, so a step could not be a fixed count of them.
Evaluation runs unpacked (see `_Pretraining.evaluate`); the checkpoints are any run's.
"""
import dataclasses
import functools
import json
import os

from absl import logging
import tensorflow as tf
import tf_keras

from bert_tf.common import output_lock
from bert_tf.common.files import list_files
from bert_tf.modeling import checkpoints
from bert_tf.modeling import encoder
from bert_tf.modeling import pretrainer
from bert_tf.modeling.configs import BertConfig
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization
from bert_tf.training.dynamic_masking import DynamicMasker
from tfrecords import datasets
from tfrecords import packing
from tfrecords import schema
from tfrecords.masked_lm import MaskingRules


@dataclasses.dataclass
class PretrainArgs:
  """The plain arguments of a run: run_pretraining's flags of the same names."""
  bert_config_file: str
  input_file: str
  output_dir: str
  init_checkpoint: str | None = None
  # Another pretraining run (its output_dir or a ckpt-N in it) to go on from, optimizer state
  # and step included: the paper's phase 2 (see the module's docstring).
  continue_from: str | None = None
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  do_train: bool = False
  do_eval: bool = False
  train_batch_size: int = 32  # The global batch of one update.
  gradient_accumulation_steps: int = 1  # Micro-batches a replica takes its batch in.
  eval_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_steps: int = 100000  # The schedule's length (and where training stops).
  # Stop training at this global step, the schedule still over num_train_steps (phase 1).
  stop_at_step: int | None = None
  num_warmup_steps: int = 10000
  save_checkpoints_steps: int = 1000
  iterations_per_loop: int = 1000
  max_eval_steps: int = 100
  optimizer: str = "adamw"
  objective: str = "mlm"
  nsp: bool = True
  seed: int = 12345
  mixed_precision: str = "none"
  jit_compile: bool = False
  recompute_layers: bool = False  # Not a run setting: the same math (`encoder.recomputed_blocks`).
  # Dynamic masking: records without masked LM targets, masked as they are read.
  dynamic_masking: bool = False
  vocab_file: str | None = None
  masked_lm_prob: float = 0.15
  do_whole_word_mask: bool = False
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1
  # Packing (module docstring): training's rows each hold up to max_sequences_per_pack records.
  pack_sequences: bool = False
  max_sequences_per_pack: int = packing.DEFAULT_SEQUENCES_PER_PACK
  max_predictions_per_pack: int | None = None  # None: `packing.predictions_bound`'s.
  packing_buffer: int = packing.DEFAULT_BUFFER_SIZE

  def masking_rules(self) -> MaskingRules:
    return MaskingRules(self.max_predictions_per_seq, self.masked_lm_prob,
                        self.do_whole_word_mask, self.mask_token_prob, self.random_token_prob)

  def predictions_per_pack(self) -> int:
    """A packed row's masked-LM slots: the flag's, else the most that records masked at
    masked_lm_prob by the original's rule can put in a row (more would split a pack)."""
    bound = packing.predictions_bound(self.max_seq_length, self.max_predictions_per_seq,
                                      self.max_sequences_per_pack, self.masked_lm_prob)
    return packing.prediction_slots(self.max_predictions_per_seq, self.max_sequences_per_pack,
                                    self.max_predictions_per_pack or bound)

  def record_layout(self) -> list[schema.Feature]:
    if self.dynamic_masking:
      return schema.unmasked_pretraining_features(self.max_seq_length)
    return schema.pretraining_features(self.max_seq_length, self.max_predictions_per_seq)


# Record features -> the flag that sets their length.
LENGTH_FLAGS = {"input_ids": "max_seq_length", "input_mask": "max_seq_length",
                "segment_ids": "max_seq_length", "masked_lm_positions": "max_predictions_per_seq",
                "masked_lm_ids": "max_predictions_per_seq",
                "masked_lm_weights": "max_predictions_per_seq"}

# Features holding token ids, which must be below the model's vocab_size.
TOKEN_ID_FEATURES = ("input_ids", "masked_lm_ids")


def check_records(files: list[str], features: list[schema.Feature], vocab_size: int) -> None:
  """Raises ValueError when the first record of a file disagrees with the flags' lengths or
  holds a token id past the model's vocab_size: parsing would fail later, deep inside the
  training loop, with a less helpful message; and on accelerators an id past the embedding
  table reads zeros instead of failing. A file that is no record file (a stats JSON that an
  `out/*` glob matched) is refused here too, by name (`datasets.DamagedRecordsError`)."""
  for path in files:
    serialized = datasets.first_record(path)
    if serialized is not None:
      example = tf.train.Example.FromString(serialized).features.feature
      _check_masking_kind(path, example, features)
      for f in features:
        if f.name not in example:
          raise ValueError(f"{path}: the records have no feature {f.name!r}")
        kind = example[f.name].WhichOneof("kind")
        length = len(getattr(example[f.name], kind).value)
        if length != f.length:
          flag = LENGTH_FLAGS.get(f.name)
          raise ValueError(f"{path}: feature {f.name!r} has length {length} in the records, "
                           f"but {f'--{flag}=' if flag else 'the layout says '}{f.length}")
        ids = getattr(example[f.name], kind).value if f.name in TOKEN_ID_FEATURES else ()
        if ids and max(ids) >= vocab_size:
          raise ValueError(f"{path}: feature {f.name!r} holds token id {max(ids)}, but the "
                           f"bert config's vocab_size is {vocab_size}: the records were made "
                           "with a larger vocab than the model's")


def _check_masking_kind(path: str, example, features: list[schema.Feature]) -> None:
  """Masked-offline records given to a dynamic-masking run, or the reverse: the record layout
  tells them apart (only offline-masked records hold masked_lm_positions)."""
  wanted = any(f.name == "masked_lm_positions" for f in features)
  if "masked_lm_positions" in example and not wanted:
    raise ValueError(f"{path}: the records hold masked LM targets (create_pretraining_data "
                     "without --dynamic_masking); run without --dynamic_masking")
  if "masked_lm_positions" not in example and wanted and "next_sentence_labels" in example:
    raise ValueError(f"{path}: the records hold no masked LM targets (create_pretraining_data "
                     "--dynamic_masking); run with --dynamic_masking and --vocab_file")


class _Pretraining:
  """One run: the model, optimizer and input that the args describe."""

  def __init__(self, args: PretrainArgs, strategy: tf.distribute.Strategy, config: BertConfig,
               files: list[str]):
    self.args = args
    self.strategy = strategy
    self.config = config
    self.files = files
    self.loss_fn = functools.partial(pretrainer.pretraining_loss, objective=args.objective,
                                     nsp=args.nsp)
    self.count_fn = functools.partial(pretrainer.pretraining_loss_counts,
                                      objective=args.objective)
    self.masker = (DynamicMasker(args.masking_rules(), args.vocab_file, config.vocab_size)
                   if args.dynamic_masking else None)

  def dataset(self, batch_size: int, is_training: bool,
              ctx: tf.distribute.InputContext) -> tf.data.Dataset:
    """Model-ready batches (`datasets.pretraining_dataset`'s), masked here when dynamic, and
    in training packed last when packing. Evaluation keeps whole batches only, as the
    original: one static shape for XLA and TPUs."""
    args = self.args
    ds = datasets.record_dataset(self.files, args.record_layout(), batch_size, is_training,
                                 input_context=ctx, seed=args.seed if is_training else None,
                                 drop_remainder=True)
    ds = self.masker.apply(ds) if self.masker else ds
    if not (is_training and args.pack_sequences):
      return ds
    # A replica's batch of rows, as record_dataset's of records: each pipeline feeds its
    # replicas one batch each a step (what `loop._skip_consumed` counts on resuming); the
    # packs are a function of the pipeline's own records, so a resumed run sees the same.
    return packing.pack_dataset(ds, ctx.get_per_replica_batch_size(batch_size),
                                args.max_sequences_per_pack, args.packing_buffer,
                                max_predictions_per_pack=args.predictions_per_pack())

  def model_fn(self, packed: bool = True):
    """The pretrainer; packed (when packing) for training only: see `evaluate`."""
    args = self.args
    k = args.max_sequences_per_pack if args.pack_sequences and packed else 0
    with encoder.recomputed_blocks(args.recompute_layers):  # Acts in training only.
      return pretrainer.build_pretrainer(self.config, args.max_seq_length,
                                         args.max_predictions_per_seq, objective=args.objective,
                                         nsp=args.nsp, max_sequences_per_pack=k)

  def throughput(self) -> dict:
    """What a step held besides its rows (`loop.train`'s throughput): the sequences (a
    packed row's real ones) and the real tokens."""
    return {"sequences": lambda features: self.count_fn(features)["records"],
            "tokens": lambda features: tf.reduce_sum(
                tf.cast(features["input_mask"] > 0, tf.float32))}

  def init_fn(self):
    if not self.args.init_checkpoint:
      return None
    def init(model):
      parts = checkpoints.load_into_pretrainer(model, self.args.init_checkpoint)
      logging.info("initialized %s from %s", ", ".join(parts), self.args.init_checkpoint)
    return init

  def train(self, continued: tuple[str, int] | None) -> None:
    """continued: (the checkpoint, its global step) that continue_from names."""
    args = self.args
    continue_from, input_start_step = continued or (None, 0)
    dataset_fn = functools.partial(self.dataset, args.train_batch_size, True)
    optimizer_fn = functools.partial(
        optimization.create_optimizer, args.learning_rate, args.num_train_steps,
        args.num_warmup_steps, optimizer=args.optimizer,
        loss_scaling=args.mixed_precision == "fp16")
    if args.stop_at_step:
      logging.info("training to global step %d (--stop_at_step) of a schedule over %d steps",
                   args.stop_at_step, args.num_train_steps)
    loop.train(self.strategy, self.model_fn, optimizer_fn, self.loss_fn, dataset_fn,
               args.output_dir, args.stop_at_step or args.num_train_steps, steps_per_loop=args.iterations_per_loop,
               save_checkpoints_steps=args.save_checkpoints_steps, init_fn=self.init_fn(),
               jit_compile=args.jit_compile, count_fn=self.count_fn,
               micro_batches=args.gradient_accumulation_steps, continue_from=continue_from,
               input_start_step=input_start_step, throughput=self.throughput())

  def evaluate(self) -> dict:
    """Always unpacked (the same variables): loop.evaluate reports the mean of its batches'
    means and reads max_eval_steps batches, so packed batches (other records per batch,
    other targets per batch, other records cut off) would report other numbers for the same
    records and model; unpacked, a packed run's eval reads as any other's."""
    args = self.args
    dataset_fn = functools.partial(self.dataset, args.eval_batch_size, False)
    model_fn = functools.partial(self.model_fn, packed=False)
    results = loop.evaluate(self.strategy, model_fn, self.loss_fn, dataset_fn,
                            args.output_dir, max_steps=args.max_eval_steps,
                            init_fn=self.init_fn())
    if distribute.is_chief(self.strategy):
      path = os.path.join(args.output_dir, "eval_results.txt")
      loop.write_eval_results(path, results)
      logging.info("***** Eval results *****\n%s",
                   "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))
    return results


def _run_settings(args: PretrainArgs, config: BertConfig, files: list[str],
                  continued: tuple[str, int] | None) -> dict:
  """What defines the pretrained model (see `loop.check_run_settings`). A continued run's
  keys only where it continues: older files, which lack them, still match. Not stop_at_step:
  where a run stops is not what it trains."""
  continuation = {} if continued is None else {
      "continue_from": args.continue_from, "continue_checkpoint": continued[0],
      "input_start_step": continued[1]}
  # Packing's keys only when packing, alike: it changes every batch of the run.
  packed = {} if not args.pack_sequences else {
      "pack_sequences": True, "max_sequences_per_pack": args.max_sequences_per_pack,
      "max_predictions_per_pack": args.predictions_per_pack(),
      "packing_buffer": args.packing_buffer}
  return {"bert_config": config.to_dict(), "input_files": files, **continuation, **packed,
          **{name: getattr(args, name) for name in (
              "init_checkpoint", "max_seq_length", "max_predictions_per_seq",
              "train_batch_size", "learning_rate", "num_train_steps", "num_warmup_steps",
              "optimizer", "objective", "nsp", "seed", "mixed_precision", "dynamic_masking",
              "masked_lm_prob", "do_whole_word_mask", "mask_token_prob", "random_token_prob")}}


def _check_packing(args: PretrainArgs) -> None:
  if not args.pack_sequences:
    return
  if args.max_sequences_per_pack < 2:
    raise ValueError(f"--max_sequences_per_pack={args.max_sequences_per_pack}: "
                     "--pack_sequences packs at least 2 records a row")
  if args.objective != "mlm":
    raise ValueError(f"--pack_sequences trains --objective=mlm only (not "
                     f"{args.objective}): a left-to-right LM reads every position of its row")
  if args.packing_buffer < 1:
    raise ValueError(f"--packing_buffer={args.packing_buffer}: must be at least 1")
  slots = args.predictions_per_pack()
  if args.do_train:
    logging.info("packing up to %d records a row of %d tokens (%d masked LM slots, packs "
                 "made over %d records): --train_batch_size=%d counts rows; the progress "
                 "lines' sequences_per_second / examples_per_second is the records a row",
                 args.max_sequences_per_pack, args.max_seq_length, slots, args.packing_buffer,
                 args.train_batch_size)


# The flags that define the one schedule a continued run goes on with: num_train_steps, its
# length, is the total, which phase 1 stopped short of (stop_at_step).
SCHEDULE_FLAGS = ("learning_rate", "num_warmup_steps", "optimizer", "num_train_steps")


def _check_continue_flags(args: PretrainArgs) -> None:
  if not args.continue_from:
    return
  if args.init_checkpoint:
    raise ValueError(f"--continue_from={args.continue_from} and --init_checkpoint="
                     f"{args.init_checkpoint}: give one (--continue_from goes on with the "
                     "run's optimizer state, step and schedule; --init_checkpoint takes "
                     "weights only)")
  if not args.do_train:
    raise ValueError(f"--continue_from={args.continue_from} continues training: give "
                     "--do_train (to evaluate a checkpoint, give it as --init_checkpoint)")


def _continuation(args: PretrainArgs) -> tuple[str, int] | None:
  """(checkpoint prefix, its global step) that args.continue_from names, checked against the
  run it belongs to; None without continue_from. A rerun of a continued run that has
  checkpoints of its own keeps what its run_settings.json recorded (phase 1 may have trained
  on since, or be gone): it resumes from its own checkpoints."""
  if not args.continue_from:
    return None
  given = f"--continue_from={args.continue_from}"
  own = _read_settings(args.output_dir)
  if (tf.train.latest_checkpoint(args.output_dir) and own and
      own.get("continue_from") == args.continue_from):
    return own["continue_checkpoint"], own["input_start_step"]
  path = args.continue_from.rstrip("/")
  if tf.io.gfile.isdir(path):
    folder, prefix = path, tf.train.latest_checkpoint(path)
  else:
    folder = os.path.dirname(path)
    prefix = path if tf.io.gfile.exists(path + ".index") else None
  settings = _read_settings(folder)
  if prefix is None or settings is None or any(k not in settings for k in SCHEDULE_FLAGS):
    missing = "no checkpoint" if prefix is None else f"no pretraining {loop.RUN_SETTINGS}"
    raise ValueError(f"{given}: not a run_pretraining output_dir or one of its checkpoints "
                     f"({missing} in {folder or '.'})")
  if os.path.realpath(folder) == os.path.realpath(args.output_dir):
    raise ValueError(f"{given} is in --output_dir={args.output_dir}: a continued run "
                     "(phase 2) needs an --output_dir of its own")
  for name in SCHEDULE_FLAGS:
    if settings[name] != getattr(args, name):
      total = (" (--num_train_steps is the total of both phases: run phase 1 with "
               "--num_train_steps=<total> --stop_at_step=<switch>)"
               if name == "num_train_steps" else "")
      raise ValueError(f"--{name}={getattr(args, name)}, but the run {given} continues was "
                       f"trained with {settings[name]} ({folder}/{loop.RUN_SETTINGS}): a "
                       f"continued run goes on with its schedule{total} (for a schedule of "
                       "its own, give the checkpoint as --init_checkpoint)")
  step = tf.Variable(0, dtype=tf.int64)
  checkpoints.read_checkpoint(tf.train.Checkpoint(global_step=step), prefix, partial=True)
  step = int(step.numpy())
  if args.num_train_steps <= step:
    raise ValueError(f"--num_train_steps={args.num_train_steps}, but {prefix} is at global "
                     f"step {step}: the run {given} continues has already reached its total "
                     "(run phase 1 with --num_train_steps=<total> --stop_at_step=<switch>)")
  stop = args.stop_at_step or args.num_train_steps
  if stop <= step:
    raise ValueError(f"--stop_at_step={stop}, but {prefix} is at global step {step}: a "
                     f"continued run trains on past {step}")
  schedule = optimization.learning_rate_schedule(args.learning_rate, args.num_train_steps,
                                                 args.num_warmup_steps)
  logging.info("continuing %s at global step %d to %d on its schedule over %d steps (the "
               "learning rate now %.4g), on this run's records from their start",
               prefix, step, stop, args.num_train_steps, float(schedule(step)))
  return prefix, step


def _read_settings(folder: str) -> dict | None:
  path = os.path.join(folder, loop.RUN_SETTINGS)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def _log_extended_schedule(args: PretrainArgs, old_steps: int, new_steps: int) -> None:
  """A re-run with a larger --num_train_steps goes on to it, as the original's: the linear
  decay is rebuilt over the new total, so the learning rate jumps up where training resumes."""
  step = loop.checkpoint_step(args.output_dir)
  schedule = optimization.learning_rate_schedule(args.learning_rate, new_steps,
                                                 args.num_warmup_steps)
  logging.info("num_train_steps %d -> %d: training on from global step %d to %d; the "
               "learning rate decays linearly to 0 at step %d (was %d): %.4g at step %d",
               old_steps, new_steps, step, args.stop_at_step or new_steps, new_steps,
               old_steps, float(schedule(step)), step)


def _write_config(config: BertConfig, args: PretrainArgs) -> None:
  """bert_config.json beside the checkpoints, so that they load as an --init_checkpoint
  elsewhere. Refuses to replace another config that checkpoints were written with."""
  path = os.path.join(args.output_dir, "bert_config.json")
  if tf.train.latest_checkpoint(args.output_dir) and tf.io.gfile.exists(path):
    if BertConfig.from_json_file(path) != config:
      raise ValueError(f"{path}: the checkpoints in --output_dir were made with this config, "
                       f"which differs from --bert_config_file {args.bert_config_file}")
    return
  config.to_json_file(path)  # Written under a temporary name, then renamed.


def pretrain(args: PretrainArgs, strategy: tf.distribute.Strategy) -> dict:
  """Runs what args ask for; returns the eval results (empty without do_eval). Raises
  ValueError / FileNotFoundError / FloatingPointError with a message for the user, naming a
  damaged record file (`datasets.DamagedRecordsError`), and output_lock.OutputBusyError while
  another job writes output_dir.

  The strategy comes first (multi-worker collectives must be set up before any TF op), with
  the mixed-precision policy already set (`loop.set_mixed_precision`).
  """
  if not args.do_train and not args.do_eval:
    raise ValueError("At least one of `do_train` or `do_eval` must be True.")
  if args.dynamic_masking and not args.vocab_file:
    raise ValueError("--dynamic_masking needs --vocab_file (the [MASK] id, the special tokens "
                     "and the word pieces)")
  if args.stop_at_step is not None and not 1 <= args.stop_at_step <= args.num_train_steps:
    raise ValueError(f"--stop_at_step={args.stop_at_step}, but --num_train_steps="
                     f"{args.num_train_steps}: training stops at a step from 1 to "
                     "num_train_steps, the schedule's length")
  if args.do_train:
    loop.micro_batch_size(args.train_batch_size, strategy.num_replicas_in_sync,
                          args.gradient_accumulation_steps)
  _check_continue_flags(args)
  _check_packing(args)
  config = checkpoints.config_from_file(args.bert_config_file)
  files = list_files(args.input_file)
  # After the strategy: multi-worker setup must come first. Keras's seed too: it seeds the
  # dropout generators (`encoder.generator_dropout`).
  tf_keras.utils.set_random_seed(args.seed)
  check_records(files, args.record_layout(), config.vocab_size)
  is_chief = distribute.is_chief(strategy)
  with (output_lock.lock_output_dir(args.output_dir, is_chief),
        datasets.naming_damaged_file(files)):
    # Under the lock, which removes it again if the run leaves it empty (see `Runner.run`).
    tf.io.gfile.makedirs(args.output_dir)
    continued = _continuation(args) if args.do_train else None
    if is_chief:
      _write_config(config, args)
    run = _Pretraining(args, strategy, config, files)
    if args.do_train:
      extended = loop.check_run_settings(
          args.output_dir, _run_settings(args, config, files, continued), is_chief,
          extendable=("num_train_steps",))
      if extended:
        _log_extended_schedule(args, *extended["num_train_steps"])
      run.train(continued)
    return run.evaluate() if args.do_eval else {}
