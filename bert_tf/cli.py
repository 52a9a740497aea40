"""What the entry points share: google-research/bert's TPU flags, the new strategy, precision
and XLA flags, and the strategy they select.

Only entry-point scripts (run_*.py) import this module: it defines absl flags. Libraries take
the plain values (see `bert_tf.distribute.get_strategy`).
"""
from absl import flags
import tensorflow as tf

from bert_tf import distribute
from bert_tf import training

FLAGS = flags.FLAGS


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
  flags.DEFINE_enum("mixed_precision", "none", list(training.PRECISIONS),
                    "Compute in bfloat16 or float16 (with loss scaling); variables stay float32.")
  flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")


def strategy_from_flags() -> tf.distribute.Strategy:
  """The strategy the accelerator flags name; --use_tpu makes `auto` mean the TPU."""
  name = FLAGS.distribution_strategy
  if FLAGS.use_tpu and name == "auto":
    name = "tpu"
  return distribute.get_strategy(name, tpu=FLAGS.tpu_name or FLAGS.master,
                                 tpu_zone=FLAGS.tpu_zone, gcp_project=FLAGS.gcp_project,
                                 num_tpu_cores=FLAGS.num_tpu_cores)
