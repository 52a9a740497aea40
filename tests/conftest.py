"""Imported by pytest before any test module: `import bert_tf` sets its process defaults
(tf_keras as tf.keras, oneDNN kernels) before a test imports TensorFlow, as in the entry points,
where bert_tf is always imported first."""
import bert_tf  # noqa: F401  pylint: disable=unused-import
