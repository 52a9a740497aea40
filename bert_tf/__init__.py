"""bert_tf: BERT on TensorFlow 2 (tf_keras + the Model Garden).

Cheap to import: heavy modules load on first use of the names below.
"""
from bert_tf.configs import BertConfig, preset
