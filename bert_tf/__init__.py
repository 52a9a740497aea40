"""bert_tf: BERT on TensorFlow 2 (tf_keras + the Model Garden).

Cheap to import: heavy modules load on first use of the names below.
"""
from bert_tf.configs import BertConfig, preset


def load_encoder(path: str, attention: str = "bidirectional"):
  """(BertConfig, tf_keras encoder) from a Hugging Face folder, a google-research/bert TF1
  checkpoint, this project's checkpoint, or a bert_config.json (fresh weights).

  See `bert_tf.checkpoints`; imported here on first use to keep `import bert_tf` cheap.
  """
  from bert_tf import checkpoints  # pylint: disable=g-import-not-at-top
  return checkpoints.load_encoder(path, attention)
