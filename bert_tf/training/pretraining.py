"""Pretraining BERT (masked LM + next sentence prediction) on google-research/bert's records,
callable without flags:

    pretrain(PretrainArgs(bert_config_file=..., input_file="data/*.tfrecord",
                          output_dir=..., do_train=True), strategy)

output_dir receives `ckpt-<step>` checkpoints (a re-run resumes from the latest), a copy of
bert_config.json beside them (so the checkpoints load as `--init_checkpoint` elsewhere),
run_settings.json (a re-run with other settings is refused, not resumed; one with a larger
num_train_steps trains on to it, the linear decay rebuilt over the new total), TensorBoard
summaries, and with do_eval eval_results.txt. While a run writes there, a second one on the
same output_dir is refused (`output_lock`).
"""
import dataclasses
import functools
import os

from absl import logging
import tensorflow as tf
import tf_keras

from bert_tf.common import output_lock
from bert_tf.modeling import checkpoints
from bert_tf.modeling import encoder
from bert_tf.modeling import pretrainer
from bert_tf.modeling.configs import BertConfig
from bert_tf.training import distribute
from bert_tf.training import loop
from bert_tf.training import optimization
from bert_tf.training.dynamic_masking import DynamicMasker
from tfrecords import datasets
from tfrecords import schema
from tfrecords.masked_lm import MaskingRules


@dataclasses.dataclass
class PretrainArgs:
  """The plain arguments of a run: run_pretraining's flags of the same names."""
  bert_config_file: str
  input_file: str
  output_dir: str
  init_checkpoint: str | None = None
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  do_train: bool = False
  do_eval: bool = False
  train_batch_size: int = 32
  eval_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_steps: int = 100000
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

  def masking_rules(self) -> MaskingRules:
    return MaskingRules(self.max_predictions_per_seq, self.masked_lm_prob,
                        self.do_whole_word_mask, self.mask_token_prob, self.random_token_prob)

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
    self.masker = (DynamicMasker(args.masking_rules(), args.vocab_file, config.vocab_size)
                   if args.dynamic_masking else None)

  def dataset(self, batch_size: int, is_training: bool,
              ctx: tf.distribute.InputContext) -> tf.data.Dataset:
    """Model-ready batches (`datasets.pretraining_dataset`'s), masked here when dynamic.
    Evaluation keeps whole batches only, as the original: one static shape for XLA and TPUs."""
    args = self.args
    ds = datasets.record_dataset(self.files, args.record_layout(), batch_size, is_training,
                                 input_context=ctx, seed=args.seed if is_training else None,
                                 drop_remainder=True)
    return self.masker.apply(ds) if self.masker else ds

  def model_fn(self):
    args = self.args
    with encoder.recomputed_blocks(args.recompute_layers):  # Acts in training only.
      return pretrainer.build_pretrainer(self.config, args.max_seq_length,
                                         args.max_predictions_per_seq, objective=args.objective,
                                         nsp=args.nsp)

  def init_fn(self):
    if not self.args.init_checkpoint:
      return None
    def init(model):
      parts = checkpoints.load_into_pretrainer(model, self.args.init_checkpoint)
      logging.info("initialized %s from %s", ", ".join(parts), self.args.init_checkpoint)
    return init

  def train(self) -> None:
    args = self.args
    dataset_fn = functools.partial(self.dataset, args.train_batch_size, True)
    optimizer_fn = functools.partial(
        optimization.create_optimizer, args.learning_rate, args.num_train_steps,
        args.num_warmup_steps, optimizer=args.optimizer,
        loss_scaling=args.mixed_precision == "fp16")
    loop.train(self.strategy, self.model_fn, optimizer_fn, self.loss_fn, dataset_fn,
               args.output_dir, args.num_train_steps, steps_per_loop=args.iterations_per_loop,
               save_checkpoints_steps=args.save_checkpoints_steps, init_fn=self.init_fn(),
               jit_compile=args.jit_compile)

  def evaluate(self) -> dict:
    args = self.args
    dataset_fn = functools.partial(self.dataset, args.eval_batch_size, False)
    results = loop.evaluate(self.strategy, self.model_fn, self.loss_fn, dataset_fn,
                            args.output_dir, max_steps=args.max_eval_steps,
                            init_fn=self.init_fn())
    if distribute.is_chief(self.strategy):
      path = os.path.join(args.output_dir, "eval_results.txt")
      loop.write_eval_results(path, results)
      logging.info("***** Eval results *****\n%s",
                   "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))
    return results


def _run_settings(args: PretrainArgs, config: BertConfig, files: list[str]) -> dict:
  """What defines the pretrained model (see `loop.check_run_settings`)."""
  return {"bert_config": config.to_dict(), "input_files": files,
          **{name: getattr(args, name) for name in (
              "init_checkpoint", "max_seq_length", "max_predictions_per_seq",
              "train_batch_size", "learning_rate", "num_train_steps", "num_warmup_steps",
              "optimizer", "objective", "nsp", "seed", "mixed_precision", "dynamic_masking",
              "masked_lm_prob", "do_whole_word_mask", "mask_token_prob", "random_token_prob")}}


def _log_extended_schedule(args: PretrainArgs, old_steps: int, new_steps: int) -> None:
  """A re-run with a larger --num_train_steps goes on to it, as the original's: the linear
  decay is rebuilt over the new total, so the learning rate jumps up where training resumes."""
  step = loop.checkpoint_step(args.output_dir)
  schedule = optimization.learning_rate_schedule(args.learning_rate, new_steps,
                                                 args.num_warmup_steps)
  logging.info("num_train_steps %d -> %d: training on from global step %d to %d; the "
               "learning rate decays linearly to 0 at step %d (was %d): %.4g at step %d",
               old_steps, new_steps, step, new_steps, new_steps, old_steps,
               float(schedule(step)), step)


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
  config = checkpoints.config_from_file(args.bert_config_file)
  files = datasets.list_files(args.input_file)
  # After the strategy: multi-worker setup must come first. Keras's seed too: it seeds the
  # dropout generators (`encoder.generator_dropout`).
  tf_keras.utils.set_random_seed(args.seed)
  check_records(files, args.record_layout(), config.vocab_size)
  tf.io.gfile.makedirs(args.output_dir)
  is_chief = distribute.is_chief(strategy)
  with (output_lock.lock_output_dir(args.output_dir, is_chief),
        datasets.naming_damaged_file(files)):
    if is_chief:
      _write_config(config, args)
    run = _Pretraining(args, strategy, config, files)
    if args.do_train:
      extended = loop.check_run_settings(
          args.output_dir, _run_settings(args, config, files), is_chief,
          extendable=("num_train_steps",))
      if extended:
        _log_extended_schedule(args, *extended["num_train_steps"])
      run.train()
    return run.evaluate() if args.do_eval else {}
