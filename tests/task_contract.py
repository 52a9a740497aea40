"""The contract every fine-tuning task keeps (`bert_tf.finetuning.task.FineTuningTask`), as a test
class to subclass: a task's test module gives a class-scoped `case` fixture (a `Case`: the
task's name, its settings, and toy data to build it on) and inherits one test per clause:

  - the task is built by name from its settings and data (`bert_tf.finetuning.build`);
  - its features' records round-trip through the record files (`tfrecords`) unchanged;
  - its model's training loss on them is finite, and a batch cut to its longest sequence
    has the loss of the batch padded, exactly when the task says its loss ignores the
    padding (`loss_reads_padding`: the runner never cuts the batches of one that reads it);
  - records evaluated in order of length, batches cut (as the runner does), predict what
    they predict in order and fully padded;
  - its warm-up requests pass its serving signature;
  - the export loads and answers, as in process, where only tensorflow and tensorflow_text
    can be imported;
  - every signature of the export answers an empty batch (TF Serving passes one through) with
    0 rows of every output;
  - every op of the export is one stock TF Serving 2.20 links, and none needs XLA;
  - a student distilled from a fine-tuned teacher of the task (`finetuning.distillation`)
    moves its outputs to the teacher's: its soft loss against the teacher's outputs falls to
    a fraction of a fresh student's, on every output the task distils; where the task reads
    transfer data, its prediction file's examples train beside the training set; the teacher
    run beside the student (for the intermediate losses) gives the soft targets that the
    records hold (once a task kind: a case may distil as another of its kind,
    `Case.distils_as`).
"""
import dataclasses
from typing import Callable
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import finetuning
from bert_tf.finetuning import distillation, runner
from bert_tf.finetuning.task import FineTuningTask
from bert_tf.training import distribute
from export import tf_serving
from tfrecords import datasets, schema, writer


@dataclasses.dataclass
class Case:
  """A task to hold to the contract: `kind` (its registered name), `settings` (its config's
  fields) and `make_data(folder) -> inputs` that writes toy data and says where it is.
  `distils_as`: another case of the same kind whose distillation clause stands for this one's
  (a task's soft targets are its kind's, whatever the settings; the clause trains two models)."""
  kind: str
  settings: dict
  make_data: Callable[[str], dict]
  distils_as: str | None = None


def _batches(path: str, layout, batch_size: int, **kwargs) -> list[dict]:
  return list(datasets.record_dataset([path], layout, batch_size, False, **kwargs))


def _assert_close(a, b, where=""):
  """Nested predictions (arrays, dicts, lists, numbers, strings) equal up to float error."""
  if dataclasses.is_dataclass(a):
    a, b = dataclasses.asdict(a), dataclasses.asdict(b)
  if isinstance(a, dict):
    assert a.keys() == b.keys(), where
    for key in a:
      _assert_close(a[key], b[key], f"{where}[{key!r}]")
  elif isinstance(a, (list, tuple)) and not (a and isinstance(a[0], (int, float))):
    assert len(a) == len(b), where
    for i, (x, y) in enumerate(zip(a, b)):
      _assert_close(x, y, f"{where}[{i}]")
  elif isinstance(a, str):
    assert a == b, where
  else:
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=1e-4, atol=1e-5, err_msg=where)


def _plain(value):
  """A tensor's tolist() with its bytes decoded, as serve_in_plain_tf answers."""
  if isinstance(value, bytes):
    return value.decode()
  return [_plain(v) for v in value] if isinstance(value, list) else value


class TaskContract:
  """Subclass as `class Test...(TaskContract)` beside a `case` fixture."""

  @pytest.fixture(scope="class")
  def built(self, case, tmp_path_factory, tokenizer, tiny_bert_config):
    """(task, its eval examples, their features, the model): the model fresh and seeded; one
    for all the clauses of a case (none changes it)."""
    data = tmp_path_factory.mktemp("data")
    task = finetuning.build(case.kind, case.settings, **case.make_data(str(data / case.kind)))
    assert type(task) is finetuning.task_class(case.kind)
    examples = task.read_examples(task.splits("eval")[0])
    features = task.convert_examples(examples, tokenizer, is_training=False)
    tf.keras.utils.set_random_seed(0)
    return task, examples, features, task.build_model(tiny_bert_config)

  def test_records_round_trip(self, built, tmp_path, tokenizer):
    task, _, _, _ = built
    examples = task.read_examples(task.splits("train")[0])
    records = task.convert_examples(examples, tokenizer, is_training=True).records
    layout = task.record_layout(True)
    path = str(tmp_path / "train.tf_record")
    writer.write_records(path, layout, records)
    [batch] = _batches(path, layout, len(records))
    names = {**{name: name for name in records[0]}, **schema.MODEL_INPUT_NAMES}
    for name in records[0]:
      expected = np.stack([np.reshape(r[name], -1) for r in records])
      read = batch[names[name]].numpy().reshape(len(records), -1)
      np.testing.assert_array_equal(read, expected, err_msg=name)

  def test_loss_is_finite_and_a_cut_batch_keeps_it(self, built, tmp_path, tokenizer):
    task, _, _, model = built
    examples = task.read_examples(task.splits("train")[0])
    records = task.convert_examples(examples, tokenizer, is_training=True).records[:16]
    layout = task.record_layout(True)
    path = str(tmp_path / "train.tf_record")
    writer.write_records(path, layout, records)
    losses = {}
    for length_buckets in (0, task.config.max_seq_length):
      [batch] = _batches(path, layout, len(records), length_buckets=length_buckets)
      losses[length_buckets], metrics = task.loss(batch, model(batch, training=False))
      assert np.isfinite(losses[length_buckets].numpy())
      assert all(np.isfinite(v.numpy()) for v in metrics.values())
    padded, cut = losses.values()
    assert batch["input_word_ids"].shape[1] < len(records[0]["input_ids"])  # Cut it was.
    # Equal, unless the task says its loss reads the padding (then the runner never cuts).
    same = np.allclose(cut.numpy(), padded.numpy(), rtol=1e-5)
    assert same != task.loss_reads_padding, (cut, padded)

  def test_predictions_in_order_of_length_equal_the_padded_ones(self, built, tmp_path):
    task, examples, features, model = built
    layout = task.record_layout(False)
    if task.loss_reads_padding:  # Its outputs at the padding count (SQuAD's n-best over
      # every position, as the original's): the runner never cuts its batches.
      args = runner.RunArgs(output_dir="unused", length_buckets=8)
      assert runner.batch_length_buckets(args, task, distribute.get_strategy("one_device")) == 0
      return

    def predict(order, length_buckets):
      path = str(tmp_path / f"eval_{length_buckets}.tf_record")
      writer.write_records(path, layout, [features.records[i] for i in order])
      outputs = [task.predict_outputs(b, model(b, training=False))
                 for b in _batches(path, layout, 4, length_buckets=length_buckets)]
      outputs = {k: np.concatenate([o[k].numpy() for o in outputs]) for k in outputs[0]}
      return task.postprocess(examples, features, runner.in_feature_order(outputs, order))

    order = runner.by_length(features.records, layout)
    padded = predict(np.arange(len(features)), 0)
    _assert_close(predict(order, task.config.max_seq_length), padded)
    metrics = task.evaluate(examples, padded)
    assert task.primary_metric in metrics and np.isfinite(metrics[task.primary_metric])

  @pytest.fixture(scope="class")
  def serving(self, built, tokenizer):
    """(its serving module, its signatures): traced once for the clauses that call them in
    process (tracing a serving graph takes seconds)."""
    task, _, _, model = built
    module = task.serving_module(model, tokenizer)
    return module, module.signatures()

  @pytest.mark.slow
  def test_warmup_requests_pass_the_signature(self, built, serving):
    task, examples, _, _ = built
    serve = serving[1][tf_serving.TEXT_SIGNATURE]
    for request in task.warmup_inputs(examples) + task.warmup_inputs():
      outputs = serve(**{k: tf.constant([v]) for k, v in request.items()})
      assert outputs and all(v.shape[0] == 1 for v in outputs.values()), request

  @pytest.fixture(scope="class")
  def exported(self, built, serving, tmp_path_factory):
    """(the warm-up requests, the export's path): one export a case, which the clauses below
    share (exporting takes seconds)."""
    task, examples, _, _ = built
    requests = task.warmup_inputs(examples)
    module, signatures = serving
    # export asks the module for its signatures, which traces them anew: the fixture's traces
    # instead (the same functions; NER's take seconds to trace).
    with mock.patch.object(module, "signatures", lambda: signatures):
      return requests, tf_serving.export(module, str(tmp_path_factory.mktemp("serving")),
                                         requests)

  @pytest.mark.slow
  def test_the_export_answers_in_a_process_without_bert_tf(self, serving, exported,
                                                          serve_in_plain_tf):
    requests, path = exported
    inputs = {k: [r[k] for r in requests] for k in requests[0]}
    served = serve_in_plain_tf(path, inputs)
    expected = serving[1][tf_serving.TEXT_SIGNATURE](
        **{k: tf.constant(v) for k, v in inputs.items()})
    assert served.keys() == expected.keys()
    for key, value in expected.items():
      value = value.numpy()
      if value.dtype == object:  # Text: the same strings.
        assert served[key] == _plain(value.tolist()), key
      else:
        np.testing.assert_allclose(served[key], value, rtol=1e-5, atol=1e-5, err_msg=key)

  @pytest.fixture(scope="class")
  def loaded(self, exported):
    """The export's signatures, loaded here once for the widths below."""
    return tf.saved_model.load(exported[1]).signatures

  @pytest.mark.slow
  @pytest.mark.parametrize("width", [0, 8])
  def test_every_signature_answers_an_empty_batch_with_empty_outputs(self, loaded, width):
    # 0 rows; a [batch, seq] input `width` wide (0: nothing at all, as an empty text batch packs).
    for name, serve in loaded.items():
      inputs = {key: tf.zeros([0] + [width if d is None else d for d in spec.shape[1:]],
                              spec.dtype)
                for key, spec in serve.structured_input_signature[1].items()}
      outputs = serve(**inputs)
      assert outputs, name
      for key, value in outputs.items():
        assert value.shape[0] == 0, (name, key, value.shape)

  @pytest.mark.slow
  def test_every_exported_op_is_one_tf_serving_links(self, exported, ops_outside_tf_serving):
    problems = ops_outside_tf_serving(exported[1])
    assert not problems, problems

  @pytest.mark.slow
  def test_a_distilled_student_moves_to_its_teachers_outputs(self, case, tmp_path, vocab_file,
                                                            tiny_bert_config):
    if case.distils_as:
      pytest.skip(f"distilled as the {case.distils_as!r} case")
    assert_a_student_moves_to_its_teacher(case, tmp_path, vocab_file, tiny_bert_config)


def assert_a_student_moves_to_its_teacher(case: Case, tmp_path, vocab_file: str,
                                          tiny_bert_config) -> None:
  """The contract's distillation clause (also for tasks outside the contract's cases: a
  regression's score, test_distillation.py): a toy teacher trained hard, then a one-layer
  student distilled from it (on the prediction file too where the task reads transfer data):
  the student's soft loss on its records falls below 0.3 of a fresh student's."""
  strategy = distribute.get_strategy("one_device")
  data = case.make_data(str(tmp_path / "data"))
  task = finetuning.build(case.kind, case.settings, **data)
  reads_transfer = type(task).transfer_examples is not FineTuningTask.transfer_examples
  transfer = task.split_file(task.splits("predict")[0]) if reads_transfer else None
  student_config = dataclasses.replace(tiny_bert_config, num_hidden_layers=1)
  student_file = str(tmp_path / "student_config.json")
  student_config.to_json_file(student_file)
  common = dict(vocab_file=vocab_file, do_train=True, train_batch_size=8,
                iterations_per_loop=1000)
  args = runner.RunArgs(output_dir=str(tmp_path / "student"), bert_config_file=student_file,
                        teacher_checkpoint=str(tmp_path / "teacher"), num_train_epochs=12,
                        learning_rates=(1e-2,), seed=7, transfer_file=transfer, **common)
  if type(task).soft_targets is FineTuningTask.soft_targets:  # It does not say: refused.
    with pytest.raises(ValueError, match="cannot be distilled"):
      runner.Runner(task, args, strategy)
    return
  config_file = str(tmp_path / "teacher_config.json")
  tiny_bert_config.to_json_file(config_file)
  # A teacher whose outputs differ from a fresh model's near-uniform ones: a high rate.
  runner.run(finetuning.build(case.kind, case.settings, **data), runner.RunArgs(
      output_dir=args.teacher_checkpoint, bert_config_file=config_file, num_train_epochs=8,
      learning_rates=(1e-2,), **common), strategy)
  student = runner.Runner(task, args, strategy)
  student.run()
  # The records the student read (the teacher's outputs in them), and its soft loss on them
  # before training (the same seed's fresh student) and after.
  [records] = student.write_records("train", 1)
  train = len(task.convert_examples(task.read_examples(task.splits("train")[0]),
                                    student.tokenizer, True))
  assert records.num_features == train + (len(task.convert_examples(
      task.transfer_examples(transfer), student.tokenizer, False)) if transfer else 0)
  [batch] = _batches(records.path, records.layout, records.num_features)
  tf.keras.utils.set_random_seed(args.seed)
  fresh = task.build_model(student_config)
  trained = runner.load_trained(args.output_dir)[1]
  for name in task.soft_targets(batch, fresh(batch, training=False)):
    targets = [task.soft_targets(batch, model(batch, training=False))[name]
               for model in (fresh, trained)]
    before, after = (float(distillation.soft_loss(
        target, distillation.stored_logits(target, batch[distillation.PREFIX + name]), 1.0,
        task.loss_counts(batch))) for target in targets)
    assert after < 0.3 * before, (name, before, after)
  # With the intermediate losses the teacher runs beside the student (`distillation.Student`)
  # and its soft targets come from there: the same as the records', on the positions a loss
  # reads (past the labelling batch's cut a stored position is padding, with no mass).
  teacher = runner.load_trained(args.teacher_checkpoint)[1]
  beside = distillation.Student(trained, student_config, teacher, tiny_bert_config, (0,))
  for name, target in task.soft_targets(batch, beside(batch)["teacher_outputs"]).items():
    stored = distillation.stored_logits(target, batch[distillation.PREFIX + name]).numpy()
    read = np.ones(stored.shape, bool)
    if target.kind == "positions":
      read = batch["input_mask"].numpy() > 0
    elif target.kind == "tokens":
      read = np.broadcast_to(target.weights.numpy()[..., None], stored.shape)
    np.testing.assert_allclose(target.logits.numpy()[read], stored[read], atol=1e-4)
