"""A sixth task, defined here in one file as a user would add one outside the package:
single-sentence regression (a score per sentence). It registers by name and uses only the
shared pieces (the interface, packing, metrics, the readers, the classifier model), then runs
through the runner (train, evaluate, predict, export), exports again from its output_dir, is
served in a process without bert_tf, and holds to the task contract."""
import dataclasses
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf import finetuning
from bert_tf.common.files import write_text
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.task_models import build_classifier
from bert_tf.finetuning import losses, metrics, runner, text_files
from bert_tf.finetuning.inputs import IDS_SIGNATURE, TextPacker, ids_signature, pack
from bert_tf.finetuning.task import Features, FineTuningTask, TaskConfig
from bert_tf.training import distribute
from export import saved_model, tf_serving
from task_contract import Case, TaskContract
from tfrecords import schema
from toys import FILLER, tiny_config

FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}


@dataclasses.dataclass
class SentenceScoreConfig(TaskConfig):
  kind = "sentence_score"


@finetuning.register
class SentenceScoreTask(FineTuningTask):
  """data_dir's train.tsv, dev.tsv (`sentence<TAB>score`) and test.tsv (`sentence`)."""
  config_class = SentenceScoreConfig
  primary_metric = "pearson"

  def splits(self, mode):
    return {"train": ["train"], "eval": ["dev"], "predict": ["test"]}[mode]

  def split_file(self, split):
    return os.path.join(self.data_dir or "", FILES[split])

  def read_examples(self, split):
    return [(row[0], float(row[1]) if len(row) > 1 else 0.0)
            for _, row in text_files.read_rows(self.split_file(split))]

  def convert_examples(self, examples, tokenizer, is_training):
    ids = tokenizer.tokenize_ids([text for text, _ in examples])
    records = [dict(pack(np.asarray(i, np.int64), None, self.config.max_seq_length, tokenizer),
                    label_ids=score, is_real_example=1)
               for i, (_, score) in zip(ids, examples)]
    return Features(records, np.arange(len(records)))

  def record_layout(self, is_training):
    return schema.classifier_features(self.config.max_seq_length, regression=True)

  def build_model(self, bert_config: BertConfig) -> tf_keras.Model:
    return build_classifier(bert_config, 1)

  def loss(self, features, outputs, counts=None):
    labels = features["label_ids"][:, 0]
    error = tf.cast(outputs, tf.float32)[:, 0] - labels
    return losses.mean(tf.square(error), losses.records(counts, labels)), {}

  def postprocess(self, examples, features, outputs):
    return outputs["logits"][:, 0]

  def evaluate(self, examples, predictions):
    return metrics.compute(("pearson", "spearman"), np.array([s for _, s in examples]),
                           predictions)

  def write_predictions(self, output_dir, split, examples, predictions):
    path = os.path.join(output_dir, "test_scores.tsv")
    write_text(path, "".join(f"{text}\t{score:.4f}\n"
                             for (text, _), score in zip(examples, predictions)))
    return [path]

  def serving_module(self, model, tokenizer):
    return ScoreServing(model, TextPacker(tokenizer, self.config.max_seq_length))

  def warmup_inputs(self, examples=None):
    return [{"sentence": text} for text, _ in (examples or [("a good film", 0.0)])[:3]]


class ScoreServing(tf.Module):

  def __init__(self, model, packer):
    super().__init__()
    self.model, self.pack = model, packer

  def score(self, inputs):
    return {"score": tf.cast(self.model(inputs, training=False), tf.float32)[:, 0]}

  def signatures(self):
    text = tf.function(lambda sentence: self.score(self.pack(sentence)),
                       input_signature=[tf.TensorSpec([None], tf.string)])
    return {"serving_default": text.get_concrete_function(),
            IDS_SIGNATURE: ids_signature(self.score, [None, None])}


def make_scores(data_dir, num_train=96, num_dev=24, seed=0) -> dict:
  """The toy rule as a score: 1.0 per "good", 0 per "bad", among filler words."""
  rng = random.Random(seed)
  os.makedirs(data_dir, exist_ok=True)

  def sentence():
    words = [rng.choice(FILLER) for _ in range(rng.randint(2, 8))]
    goods = rng.randint(0, 2)
    for word in ["good"] * goods + ["bad"] * rng.randint(0, 1):
      words.insert(rng.randrange(len(words) + 1), word)
    return " ".join(words), float(goods)

  for split, n in (("train", num_train), ("dev", num_dev), ("test", 4)):
    rows = [sentence() for _ in range(n)]
    lines = [f"{t}\t{s}" if split != "test" else t for t, s in rows]
    with open(os.path.join(data_dir, FILES[split]), "w", encoding="utf-8") as f:
      f.write("\n".join(lines) + "\n")
  return {"data_dir": str(data_dir)}


class TestSentenceScoreContract(TaskContract):

  @pytest.fixture(scope="class")
  def case(self) -> Case:
    return Case("sentence_score", {"max_seq_length": 16}, make_scores)


@pytest.mark.slow
def test_the_toy_task_trains_exports_and_serves(tmp_path, vocab_file, serve_in_plain_tf):
  inputs = make_scores(tmp_path / "data")
  task = finetuning.build("sentence_score", {"max_seq_length": 16}, **inputs)
  args = runner.RunArgs(output_dir=str(tmp_path / "out"), vocab_file=vocab_file,
                        bert_config_file=tiny_config(tmp_path / "bert_config.json"),
                        do_train=True, do_eval=True, do_predict=True, train_batch_size=16,
                        learning_rates=(3e-3,), num_train_epochs=8,
                        export_dir=str(tmp_path / "serving"))
  results = runner.run(task, args, distribute.get_strategy("one_device"),
                       exporter=tf_serving.export)["best"]
  assert results["eval_pearson"] > 0.7, results  # It learned where "good" is.
  with open(tmp_path / "out" / "test_scores.tsv") as f:
    predicted = [line.split("\t") for line in f.read().splitlines()]
  assert len(predicted) == 4
  # Loaded back by its name from output_dir's task_config.json, as export_saved_model does,
  # and served without bert_tf: the scores the run predicted.
  again = saved_model.export_from_output_dir(str(tmp_path / "out"), str(tmp_path / "serving"),
                                             data=inputs["data_dir"])
  assert [os.path.basename(p) for p in (results["export_path"], again)] == ["1", "2"]
  served = serve_in_plain_tf(again, {"sentence": [text for text, _ in predicted]})
  np.testing.assert_allclose(served["score"], [float(s) for _, s in predicted], atol=1e-4)


def test_a_name_is_one_task():
  assert finetuning.task_class("sentence_score") is SentenceScoreTask
  assert "sentence_score" in finetuning.kinds() and "squad" in finetuning.kinds()

  class Other(SentenceScoreTask):
    pass
  with pytest.raises(ValueError, match="task 'sentence_score' is .*SentenceScoreTask already"):
    finetuning.register(Other)
  with pytest.raises(ValueError, match=r"x/task_config.json: unknown task 'nope'; known: "
                                       r"classification, multiple_choice, ner, sentence_score"):
    finetuning.task_class("nope", "x/task_config.json")
  with pytest.raises(TypeError, match="unknown inputs train_file; it takes data_dir"):
    finetuning.build("sentence_score", train_file="x")
