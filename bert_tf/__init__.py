"""bert_tf: BERT on TensorFlow 2 (tf_keras + the Model Garden).

Cheap to import: heavy modules load on first use of the names below.
"""
import os

# tf.keras is tf_keras (Keras 2) in this project's processes: the project and the Model Garden
# use tf_keras only, and tensorflow_text's layers, which load with it, subclass tf.keras. Left
# as Keras 3, `import tensorflow` would also load all of Keras 3 (~90 MB, ~2 s) that nothing
# uses. Effective only before TensorFlow is first imported; a user's own setting wins.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# oneDNN's CPU kernels for matmul, einsum and friends. TensorFlow turns them on by itself only
# on CPUs with AVX-512 VNNI/BF16 or AMX; on an AVX2 laptop or CI box without them, a BERT
# training step runs on Eigen and is ~1.4x slower (MiniLM, batch 32 x 192: fwd+bwd 14.4 s ->
# 10.5 s on one core; the attention einsums 2.2x). Read once, when TensorFlow is imported.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
# TensorFlow's C++ INFO lines (that oneDNN is on, that no CUDA driver was found) are noise to a
# user of the scripts; its warnings and errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from bert_tf.modeling.configs import BertConfig, preset


def load_encoder(path: str, attention: str = "bidirectional"):
  """(BertConfig, tf_keras encoder) from a Hugging Face folder, a TF Hub encoder SavedModel, a
  google-research/bert TF1 checkpoint, this project's checkpoint, or a bert_config.json (fresh
  weights).

  See `bert_tf.modeling.checkpoints`; imported here on first use to keep `import bert_tf` cheap.
  """
  from bert_tf.modeling import checkpoints  # pylint: disable=g-import-not-at-top
  return checkpoints.load_encoder(path, attention)
