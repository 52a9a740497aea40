"""What the entry points share: the model, training and fine-tuning flags (google-research/bert's
names, defaults and meanings), the accelerator flags, and how a script turns its flags into
plain arguments and a user's mistake into one line.

Every entry point is one pattern: flags -> a plain arguments dataclass -> one library call.
Only bert_tf's entry points (scripts/) import this module: its define_* functions define
absl flags. Libraries take
the plain values (`runner.RunArgs`, `pretraining.PretrainArgs`, `distribute.get_strategy`).
"""
import dataclasses
import time
from typing import Callable

from absl import app
from absl import flags
import tensorflow as tf

from bert_tf.common import errors
from bert_tf.common import output_lock
from bert_tf import finetuning
from bert_tf.training import distribute
from bert_tf.finetuning import runner
from bert_tf.training import loop
from export import tf_serving

FLAGS = flags.FLAGS

def define_model_flags(max_seq_length: int, fine_tuning: bool = True) -> None:
  """The pre-trained model: its config and weights, and the input length. Fine-tuning also
  takes the vocabulary and its casing."""
  flags.DEFINE_string("bert_config_file", None,
                      "The config json file corresponding to the pre-trained BERT model. "
                      "Defaults to the config beside --init_checkpoint (a Hugging Face folder's "
                      "config.json, or bert_config.json beside a checkpoint). For a TF Hub "
                      "encoder, whose variables give the sizes: its activation and dropout "
                      "rates (else BERT's defaults).")
  flags.DEFINE_string("init_checkpoint", None,
                      "Initial checkpoint (usually from a pre-trained BERT model): a "
                      "google-research/bert TF1 checkpoint, one of this project's, a Hugging "
                      "Face BERT folder, or a TF Hub BERT encoder SavedModel folder.")
  flags.DEFINE_integer("max_seq_length", max_seq_length,
                       "The maximum total input sequence length after WordPiece tokenization. "
                       "Sequences longer than this will be truncated, and sequences shorter "
                       "than this will be padded.", lower_bound=3)
  if fine_tuning:
    flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was "
                        "trained on. Defaults to vocab.txt beside --init_checkpoint.")
    # None when not given: the library takes the casing the model states.
    flags.DEFINE_bool("do_lower_case", None, "Whether to lower case the input text. Should be "
                      "True for uncased models and False for cased models. Default: what the "
                      "model states (a Hugging Face folder's tokenizer.json or "
                      "tokenizer_config.json, a TF Hub SavedModel's do_lower_case, a trained "
                      "run's task_config.json), else True; a value that contradicts it is "
                      "refused.")


def define_training_flags(fine_tuning: bool = True) -> None:
  """Output, modes, batch sizes, checkpointing, the seed and recomputation; fine-tuning adds
  prediction, the epoch-based schedule, the paper's sweep and the export."""
  flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints "
                      "will be written.")
  flags.DEFINE_bool("do_train", False, "Whether to run training.")
  flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
  flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training: the global "
                       "batch of one optimizer update, whatever --gradient_accumulation_steps.",
                       lower_bound=1)
  flags.DEFINE_integer("gradient_accumulation_steps", 1, "Take each replica's share of "
                       "--train_batch_size in this many micro-batches, one forward and backward "
                       "pass each, their gradients summed into one update: the memory of "
                       "train_batch_size / (replicas x this) records, the update of the whole "
                       "batch (losses normalised over the whole batch; the schedule, "
                       "checkpoints and summaries count updates). It must divide the batch; "
                       "the three numbers are logged at the start.", lower_bound=1)
  flags.DEFINE_integer("num_accumulation_steps", None, "Not this project's: NVIDIA's name, "
                       "where --train_batch_size is the per-GPU micro-batch. Use "
                       "--gradient_accumulation_steps=N and --train_batch_size=<micro-batch x N "
                       "x GPUs>.")
  flags.register_validator(
      "num_accumulation_steps", lambda value: value is None,
      message="NVIDIA's --num_accumulation_steps takes --train_batch_size as the per-GPU "
      "micro-batch; here --train_batch_size is the global batch of one update: give "
      "--gradient_accumulation_steps=N and --train_batch_size=<micro-batch x N x GPUs> (NVIDIA's "
      "--train_batch_size=32 --num_accumulation_steps=4 on 8 GPUs: --train_batch_size=1024 "
      "--gradient_accumulation_steps=4)")
  flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.", lower_bound=1)
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model "
                       "checkpoint.", lower_bound=1)
  flags.DEFINE_integer("iterations_per_loop", 1000, "How many steps to make in each estimator "
                       "call (here: at most in each tf.function call of the training loop, and "
                       "between summaries; a progress line still comes every 30 s).",
                       lower_bound=1)
  flags.DEFINE_integer("seed", 12345, "Random seed: initialization, dropout and the order of "
                       "the input (so a resumed run reads on from where it stopped); restart k "
                       "of a fine-tuning sweep uses seed + k.")
  flags.DEFINE_bool("recompute_layers", False,
                    "Recompute each Transformer block's activations in the backward pass "
                    "instead of keeping them from the forward pass (tf.recompute_grad): less "
                    "memory, so a larger batch or sequence fits (google-research/bert's advice "
                    "for BERT-Large at sequence 384 on a 12 GB GPU), for about one more forward "
                    "pass per step. The same math and dropout masks, so checkpoints are the "
                    "same and a resumed run may switch it. Refused with dropout under several "
                    "replicas.")
  if not fine_tuning:
    return
  flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the "
                    "test set.")
  flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.", lower_bound=1)
  flags.DEFINE_list("learning_rate", ["5e-5"], "The initial learning rate for Adam; several "
                    "comma-separated values fine-tune once each, and the best on dev is kept.")
  flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
  flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear "
                     "learning rate warmup for. E.g., 0.1 = 10% of training.")
  flags.DEFINE_integer("length_buckets", None,
                       "Training batches of similar lengths, each padded only to the shortest of "
                       "this many lengths (multiples of max_seq_length / length_buckets, rounded "
                       "up to a multiple of 8; at max_seq_length or more, every length) that "
                       "holds it, instead of to max_seq_length: short sentences train faster; "
                       "evaluation and prediction batches likewise, of records in order of "
                       "length. Default: 16 with --jit_compile (one XLA program per length), "
                       "else each batch padded to its own longest (shapes cost nothing "
                       "uncompiled). 0: every batch padded to max_seq_length, as the original. "
                       "Off on TPUs (one program per loop needs one shape) and for tasks whose "
                       "loss reads the padding (SQuAD's softmax over every position, as the "
                       "original's).",
                       lower_bound=0)
  flags.DEFINE_bool("group_by_length", False,
                    "Training batches of similar lengths (megabatches of 50 batches sorted by "
                    "length, as transformers' --group_by_length), each cut to its longest: "
                    "faster, but batches homogeneous in length are not the random batches the "
                    "paper's recipe assumes, and cost quality (CoLA: see benchmarks/README.md). "
                    "Default: random batches, each cut to its longest. Ignored where the loss "
                    "is a mean over tokens (NER), which grouping would shift toward short "
                    "sentences.")
  flags.DEFINE_integer("num_restarts", 1, "Fine-tune this many times per learning rate, with "
                       "seeds seed, seed+1, ...; the best on dev is kept.", lower_bound=1)
  flags.DEFINE_string("export_dir", None, "If set, export the (best) model as a SavedModel for "
                      "TF Serving into <export_dir>/<next version>/.")
  define_distillation_flags()


def define_distillation_flags() -> None:
  """A fine-tuned teacher that the trained model (the student) learns from
  (`bert_tf.finetuning.distillation`)."""
  flags.DEFINE_string("teacher_checkpoint", None,
                      "Distil: a fine-tuned model of this task and labels (a run's "
                      "--output_dir or checkpoint, google-research/bert's fine-tuned TF1 "
                      "checkpoint, a transformers folder with its head) whose outputs the "
                      "model trained here learns: class probabilities, per-token or span "
                      "distributions, scores. The teacher runs once over the training "
                      "features. The student is --bert_config_file (and --init_checkpoint: a "
                      "pretrained compact model), or --init_from_teacher_layers.")
  flags.DEFINE_float("distill_temperature", 1.0,
                     "The softmax temperature of the teacher's and the student's "
                     "distributions (Hinton et al.; DistilBERT: 2); the soft loss is scaled by "
                     "its square.", lower_bound=1e-3)
  flags.DEFINE_float("distill_weight", 1.0,
                     "The soft loss's weight; the gold labels' loss gets 1 - it (1: the "
                     "teacher's outputs alone, as Turc et al.'s pre-trained distillation).",
                     lower_bound=0.0, upper_bound=1.0)
  flags.DEFINE_list("init_from_teacher_layers", [],
                    "Initialise the student from these teacher layers, one per student layer "
                    "(DistilBERT: every other one, 0,2,4,6,8,10), and the teacher's embeddings, "
                    "pooler and head; the student's config is the teacher's with that many "
                    "layers.")
  flags.DEFINE_string("transfer_file", None,
                      "Distil on these unlabelled examples too, beside the training set: a "
                      "file in the layout of the task's prediction input (its test file, "
                      "SQuAD's predict file; NER's words alone do), which the teacher labels "
                      "(Turc et al.'s transfer data); the gold labels' loss (1 - "
                      "--distill_weight) counts the training set's examples alone.")
  flags.DEFINE_float("distill_hidden_weight", 0.0,
                     "TinyBERT's hidden-state loss at this weight, beside the others: the mean "
                     "squared error of the embeddings and of each student layer's output "
                     "against its teacher layer's (through a learned projection where the "
                     "widths differ). The teacher then runs at every training step.",
                     lower_bound=0.0)
  flags.DEFINE_float("distill_attention_weight", 0.0,
                     "TinyBERT's attention loss at this weight: the mean squared error of "
                     "each student layer's attention probabilities against its teacher "
                     "layer's (the same number of heads). The teacher then runs at every "
                     "training step.", lower_bound=0.0)
  flags.DEFINE_list("distill_layer_map", [],
                    "The teacher layer (0-based) that each student layer learns in the "
                    "intermediate losses; default TinyBERT's uniform map (a 3-layer student "
                    "of a 6-layer teacher: 1,3,5).")


def define_accelerator_flags() -> None:
  """The original's TPU flags, plus --distribution_strategy, --mixed_precision, --jit_compile."""
  flags.DEFINE_bool("use_tpu", False, "Whether to use TPU.")
  flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training: a name or a "
                      "grpc://ip.address.of.tpu:8470 url.")
  flags.DEFINE_string("tpu_zone", None, "[Optional] GCE zone where the Cloud TPU is located.")
  flags.DEFINE_string("gcp_project", None, "[Optional] Project name for the Cloud TPU.")
  flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL (a TPU's grpc address).")
  flags.DEFINE_integer("num_tpu_cores", 8, "Only used if `use_tpu` is True: the TPU cores "
                       "expected (all of the TPU's cores are used).", lower_bound=1)
  flags.DEFINE_enum("distribution_strategy", "auto", list(distribute.STRATEGIES),
                    "auto: TPU when one is named (or --use_tpu), Mirrored with several GPUs, "
                    "else one device.")
  flags.DEFINE_enum("mixed_precision", "none", list(loop.PRECISIONS),
                    "Compute in bfloat16 or float16 (with loss scaling); variables stay float32.")
  flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")


def define_fine_tuning_flags(max_seq_length: int) -> None:
  """Everything a fine-tuning script shares: model, training, sweep, export, accelerator."""
  define_model_flags(max_seq_length)
  define_training_flags()
  define_accelerator_flags()


def learning_rates() -> tuple[float, ...]:
  """--learning_rate's comma-separated values."""
  try:
    rates = tuple(float(v) for v in FLAGS.learning_rate)
  except ValueError:
    raise ValueError(f"--learning_rate={','.join(FLAGS.learning_rate)}: not a "
                     "comma-separated list of numbers") from None
  if not rates or any(r <= 0 for r in rates):
    raise ValueError(f"--learning_rate={','.join(FLAGS.learning_rate)}: need positive values")
  return rates


def layer_numbers(flag: str) -> tuple[int, ...]:
  """A list flag's comma-separated layer numbers (--init_from_teacher_layers...)."""
  try:
    return tuple(int(v) for v in FLAGS[flag].value)
  except ValueError:
    raise ValueError(f"--{flag}={','.join(FLAGS[flag].value)}: not a comma-separated list "
                     "of layer numbers") from None


def check_data_outside_output(task, args) -> None:
  """Refuses a data file that the run's modes read (`task.split_file`) inside --output_dir:
  the run writes its records, checkpoints and the task's prediction files there (run_squad
  --predict_file=out/predictions.json --output_dir=out would overwrite its input). `task`: a
  tasks.task.FineTuningTask; `args`: its runner.RunArgs."""
  modes = [m for m in ("train", "eval", "predict") if getattr(args, f"do_{m}")]
  files = sorted({task.split_file(split) for mode in modes for split in task.splits(mode)})
  output_lock.check_not_input([args.output_dir], "--output_dir", [("", f) for f in files],
                              folder=True)


def fine_tune(kind: str) -> dict:
  """Runs the fine-tuning task registered as `kind` as the flags ask (`runner.run`): the task
  built from the flags of its config's fields and of its inputs, its data kept outside
  --output_dir, the SavedModel writer for --export_dir."""
  task_class = finetuning.task_class(kind)
  fields = [f.name for f in dataclasses.fields(task_class.config_class)]
  task = finetuning.build(kind, {name: FLAGS[name].value for name in fields if name in FLAGS},
                     **{name: FLAGS[name].value for name in task_class.input_args})
  args = args_from_flags(runner.RunArgs, learning_rates=learning_rates(),
                         init_from_teacher_layers=layer_numbers("init_from_teacher_layers"),
                         distill_layer_map=layer_numbers("distill_layer_map"))
  strategy = strategy_from_flags()
  check_data_outside_output(task, args)
  return runner.run(task, args, strategy, exporter=tf_serving.export)


def args_from_flags(cls, **values):
  """An arguments dataclass from the flags of its fields' names; `values` override. A field
  `flags_given` gets the names of the flags given on the command line (`given_flags`)."""
  fields = [f.name for f in dataclasses.fields(cls)]
  if "flags_given" in fields and "flags_given" not in values:
    values["flags_given"] = given_flags()
  names = [name for name in fields if name not in values and name in FLAGS]
  return cls(**{name: FLAGS[name].value for name in names}, **values)


def given_flags() -> tuple[str, ...]:
  """The flags given on the command line (the others hold their defaults): a fine-tuning run
  that does not train takes those settings from the trained model instead."""
  return tuple(sorted(name for name in FLAGS if FLAGS[name].present))


def strategy_from_flags() -> tf.distribute.Strategy:
  """The strategy the accelerator flags name; --use_tpu makes `auto` mean the TPU. Also sets
  --mixed_precision's policy: both come before any model is built."""
  name = FLAGS.distribution_strategy
  if FLAGS.use_tpu and name == "auto":
    name = "tpu"
  strategy = distribute.get_strategy(name, tpu=FLAGS.tpu_name or FLAGS.master,
                                     tpu_zone=FLAGS.tpu_zone, gcp_project=FLAGS.gcp_project,
                                     num_tpu_cores=FLAGS.num_tpu_cores)
  loop.set_mixed_precision(FLAGS.mixed_precision)
  return strategy


# Results that are bookkeeping, not a measure of the model.
_RUN_KEYS = ("global_step", "train_seconds", "examples_per_second", "export_path",
             "learning_rate", "seed")


def summary(program: str, results: dict, output_dir: str, seconds: float) -> str:
  """What a run did, in a few lines: wall time, steps and speed, the metrics, where it all is.
  `results`: a fine-tuning run's {"best": ...} or pretraining's evaluation results."""
  best = results.get("best", results)
  lines = [f"{program}: done in {seconds:,.0f} s; outputs in {output_dir}"]
  if "train_seconds" in best:
    lines.append(f"  trained to global step {best['global_step']} in "
                 f"{best['train_seconds']:,.0f} s ({best['examples_per_second']:.1f} "
                 "examples/s)")
  elif "global_step" in best:
    lines.append(f"  the model at global step {best['global_step']}")
  metrics = {k: v for k, v in sorted(best.items())
             if k not in _RUN_KEYS and isinstance(v, (int, float))}
  if metrics:
    lines.append("  " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
  if len(results.get("runs", [])) > 1:
    lines.append(f"  the best of {len(results['runs'])} runs: learning_rate "
                 f"{best['learning_rate']:g}, seed {best['seed']}")
  if "export_path" in best:
    lines.append(f"  exported for TF Serving to {best['export_path']}")
  return "\n".join(lines)


def run_main(program: str, main: Callable[[], dict | str], required: list[str]) -> None:
  """Parses the flags and runs main(), which returns the run's results (printed as their
  `summary`) or the text to print; a user's error exits non-zero with one line
  `<program>: error: <message>`, naming the flag, file or line."""
  def absl_main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    start = time.time()
    with errors.exit_on_user_error(program):
      results = main()
    print(results if isinstance(results, str) else
          summary(program, results or {}, FLAGS.output_dir, time.time() - start), flush=True)

  flags.mark_flags_as_required(required)
  app.run(absl_main)
