"""Distillation (`bert_tf.finetuning.distillation`): the soft loss's arithmetic, a student
initialised from chosen teacher layers, and run_classifier's flags end to end: a student from
a toy teacher trains, evaluates and exports as any run, and each mistake is one line.

That every task's student moves to its teacher's outputs is a clause of the task contract
(task_contract.py), held by every built-in task; here also by regression (STS-B's score)."""
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import entry_points
from task_contract import Case, assert_a_student_moves_to_its_teacher
from bert_tf import finetuning
from bert_tf.finetuning import distillation
from bert_tf.modeling import encoder
from bert_tf.modeling.configs import BertConfig
from bert_tf.tasks import multiple_choice
from toys import VOCAB, make_sst2, make_stsb, tiny_config


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_the_soft_loss_is_the_kl_at_a_temperature_times_its_square():
  rng = np.random.default_rng(0)
  teacher, student = rng.normal(size=[2, 5, 3]) * 3
  temperature = 2.0
  log_t, log_s = _log_softmax(teacher / temperature), _log_softmax(student / temperature)
  kl = (np.exp(log_t) * (log_t - log_s)).sum(-1) * temperature ** 2  # [5, 3] -> [5]
  counts = {"records": tf.constant(5.0), "tokens": tf.constant(2.0)}
  classes = distillation.SoftTarget("classes", tf.constant(student, tf.float32))
  got = distillation.soft_loss(classes, tf.constant(teacher, tf.float32), temperature, counts)
  np.testing.assert_allclose(got.numpy(), kl.mean(), rtol=1e-5)
  # Zero where the student matches; a score is a squared error.
  same = distillation.soft_loss(classes, classes.logits, temperature, counts)
  assert abs(float(same)) < 1e-6
  score = distillation.SoftTarget("score", tf.constant(student[:, :1], tf.float32))
  np.testing.assert_allclose(
      distillation.soft_loss(score, tf.constant(teacher[:, :1], tf.float32), 1.0, counts),
      np.square(student[:, 0] - teacher[:, 0]).mean(), rtol=1e-5)
  # Per token: the teacher stored [classes, seq] (positions last) and read back as the
  # student's [seq, classes]; weighed positions only.
  weights = tf.constant([[1, 0, 1, 0, 0]] * 2)
  student_tokens = np.stack([student, student[::-1]])  # [2, 5, 3]
  teacher_tokens = np.stack([teacher, teacher[::-1]])
  tokens = distillation.SoftTarget("tokens", tf.constant(student_tokens, tf.float32),
                                   weights=weights, count="tokens")
  stored = tf.constant(teacher_tokens.transpose(0, 2, 1).reshape(2, -1), tf.float32)
  log_t, log_s = _log_softmax(teacher_tokens), _log_softmax(student_tokens)
  kl = (np.exp(log_t) * (log_t - log_s)).sum(-1) * weights.numpy()
  np.testing.assert_allclose(distillation.soft_loss(
      tokens, distillation.stored_logits(tokens, stored), 1.0, counts), kl.sum() / 2, rtol=1e-5)
  # Positions stored from a batch cut at 3 of 6 and read by one cut at 5: the padding past the
  # teacher's cut takes no mass, whatever the temperature.
  class Spans:
    def soft_targets(self, features, outputs):
      return {"start_logits": distillation.SoftTarget("positions", outputs)}
  teacher, student = rng.normal(size=[2, 4, 5]) * 3
  stored = distillation.TeacherOutputs(Spans(), 6)(
      {}, tf.constant(teacher[:, :3], tf.float32))["teacher_start_logits"]
  assert stored.shape == (4, 6)
  start = distillation.SoftTarget("positions", tf.constant(student, tf.float32))
  read = distillation.stored_logits(start, stored[:, :5])
  assert float(tf.reduce_max(tf.nn.softmax(read / 4.0)[:, 3:])) == 0.0
  log_t, log_s = _log_softmax(teacher[:, :3] / 4), _log_softmax(student / 4)
  np.testing.assert_allclose(  # The KL over the teacher's 3 positions.
      distillation.soft_loss(start, read, 4.0, {"records": 4.0}),
      (np.exp(log_t) * (log_t - log_s[:, :3])).sum(-1).mean() * 16, rtol=1e-5)


def test_gold_labels_mix_in_on_the_records_that_have_them():
  """With transfer examples, weight x the soft loss over every record + (1 - weight) x the
  task's cross-entropy over the records marked gold alone; exact over an update's parts (the
  update's counts), and 0 gold records make no gold loss, not a NaN."""
  task = finetuning.build("classification", {"task_name": "SST-2", "labels": ["0", "1"]})
  settings = distillation.Settings("teacher", temperature=2.0, weight=0.25, transfer_file="x")
  rng = np.random.default_rng(3)
  teacher, student = rng.normal(size=[2, 6, 2]) * 2
  labels = np.array([1, 0, 1, 1, 0, 0])
  gold = np.array([1, 1, 0, 1, 0, 0])
  features = {"label_ids": tf.constant(labels[:, None]),
              distillation.GOLD: tf.constant(gold[:, None]),
              "teacher_logits": tf.constant(teacher, tf.float32)}
  log_t, log_s = _log_softmax(teacher / 2), _log_softmax(student / 2)
  soft = (np.exp(log_t) * (log_t - log_s)).sum(-1).mean() * 4
  xent = -_log_softmax(student)[np.arange(6), labels]
  expected = 0.25 * soft + 0.75 * xent[gold == 1].mean()
  counts = distillation.count_fn(task, settings)(features)
  assert {k: float(v) for k, v in counts.items()} == {"records": 6.0, "gold records": 3.0}
  loss_fn = distillation.loss_fn(task, settings)
  loss, metrics = loss_fn(features, tf.constant(student, tf.float32), counts)
  np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
  np.testing.assert_allclose(float(metrics["soft_loss"]), soft, rtol=1e-5)
  halves = [loss_fn({k: v[part] for k, v in features.items()},
                    tf.constant(student[part], tf.float32), counts)[0]
            for part in (slice(0, 3), slice(3, 6))]
  np.testing.assert_allclose(float(halves[0] + halves[1]), expected, rtol=1e-5)
  # A batch of transfer examples alone, its own counts: the soft loss's part, finite.
  transfer = {k: v[4:] for k, v in features.items()}
  alone, _ = loss_fn(transfer, tf.constant(student[4:], tf.float32))
  log_t, log_s = log_t[4:], log_s[4:]
  np.testing.assert_allclose(
      float(alone), 0.25 * (np.exp(log_t) * (log_t - log_s)).sum(-1).mean() * 4, rtol=1e-5)


def test_a_student_takes_the_chosen_teacher_layers_and_the_rest_of_the_teacher():
  task = finetuning.build("classification", {"task_name": "SST-2", "labels": ["0", "1"]})
  config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=3,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
  tf.keras.utils.set_random_seed(1)
  teacher = task.build_model(config)
  student_config = distillation.student_config(config, None, (2, 0))
  assert student_config.num_hidden_layers == 2
  student = task.build_model(student_config)
  weights = distillation.layer_weights(teacher)
  distillation.init_from_teacher(student, weights, (2, 0))
  encoder = student.checkpoint_items["encoder"]
  for ours, theirs in (("transformer/layer_0", "transformer/layer_2"),
                       ("transformer/layer_1", "transformer/layer_0"),
                       ("pooler_transform", "pooler_transform"),
                       ("word_embeddings", "word_embeddings")):
    for a, b in zip(encoder.get_layer(ours).get_weights(), weights[theirs]):
      np.testing.assert_array_equal(a, b)
  head = distillation.layer_weights(student)["head"]
  assert len(head) == 2 and all(np.array_equal(a, b) for a, b in zip(head, weights["head"]))
  with pytest.raises(ValueError, match=r"the teacher has layers 0\.\.2, not 3"):
    distillation.student_config(config, None, (0, 3))
  with pytest.raises(ValueError, match="the student's hidden_size is 32, the teacher's 16"):
    distillation.student_config(config, BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16), (1,))


def test_intermediate_losses_compare_mapped_layers_over_real_tokens():
  """TinyBERT's losses by hand from the two encoders' own states: a 2-layer student of width 8
  against a 4-layer teacher of width 16 (the uniform map: teacher blocks 1 and 3; the
  student's states through its projection), means over the real tokens of an update's counts;
  the soft loss from the teacher beside it, as from stored targets; a student identical to its
  teacher has none; the projection learns."""
  task = finetuning.build("classification", {"task_name": "SST-2", "labels": ["0", "1"]})
  small = dict(vocab_size=100, num_attention_heads=2, max_position_embeddings=16)
  teacher_config = BertConfig(hidden_size=16, num_hidden_layers=4, intermediate_size=32, **small)
  config = BertConfig(hidden_size=8, num_hidden_layers=2, intermediate_size=16, **small)
  intermediate = distillation.Intermediate(hidden_weight=2.0, attention_weight=3.0)
  blocks = intermediate.teacher_blocks(4, 2)
  assert blocks == (1, 3)
  tf.keras.utils.set_random_seed(2)
  teacher = task.build_model(teacher_config)
  inside = {id(v) for v in teacher.checkpoint_items["encoder"].variables}
  for head in [v for v in teacher.variables if id(v) not in inside]:
    head.assign(head * 50)  # Logits far from a fresh student's: a soft loss to compare.
  student = distillation.Student(task.build_model(config), config, teacher, teacher_config,
                                 blocks)
  settings = distillation.Settings("teacher", weight=1.0, intermediate=intermediate)
  mask = np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]])
  features = {"input_word_ids": tf.constant(mask * 7 + 1), "input_mask": tf.constant(mask),
              "input_type_ids": tf.zeros_like(mask), "label_ids": tf.constant([[0], [1], [1]])}
  counts = distillation.count_fn(task, settings)(features)
  assert float(counts["input tokens"]) == 9.0
  outputs = student(features, training=False)
  # The soft targets come from the teacher beside the student, as the labelling pass would
  # have stored them (`TeacherOutputs`), which these records do not hold.
  features["teacher_logits"] = distillation.TeacherOutputs(task, 5)(
      features, teacher(features, training=False))["teacher_logits"]
  np.testing.assert_allclose(outputs["teacher_outputs"], features["teacher_logits"], rtol=1e-6)

  def states(model, features):  # [embeddings, block outputs], [attention probabilities].
    with encoder.recorded_blocks() as recorded:
      model(features, training=False)
    return ([recorded[0].input.numpy()] + [b.output.numpy() for b in recorded],
            [b.attention.numpy() for b in recorded])
  (s_hidden, s_attention), (t_hidden, t_attention) = states(student.checkpointed, features), \
      states(teacher, features)
  kernel, bias = (w.numpy() for w in student.projection.weights)
  pairs = [(0, 0), (1, 2), (2, 4)]  # Hidden states: embeddings, then blocks 0->1, 1->3.
  real = mask > 0
  hidden = np.mean([((s_hidden[i] @ kernel + bias - t_hidden[j]) ** 2).mean(-1)[real].sum() / 9
                    for i, j in pairs])
  attention = np.mean([((s_attention[i] - t_attention[j]) ** 2).sum(-1).mean(1)[real].sum() / 9
                       for i, j in ((0, 1), (1, 3))])
  loss_fn = distillation.loss_fn(task, settings)
  soft = float(distillation.loss_fn(task, distillation.Settings("teacher"))(
      features, outputs["outputs"], counts)[0])
  loss, metrics = loss_fn({k: v for k, v in features.items() if k != "teacher_logits"},
                          outputs, counts)
  assert soft > 0.01
  np.testing.assert_allclose(float(metrics["soft_loss"]), soft, rtol=1e-5)
  np.testing.assert_allclose(float(metrics["hidden_loss"]), hidden, rtol=1e-5)
  np.testing.assert_allclose(float(metrics["attention_loss"]), attention, rtol=1e-5)
  np.testing.assert_allclose(float(loss), soft + 2 * hidden + 3 * attention, rtol=1e-5)
  # The projection and the student learn; the teacher is no trainable weight of the student's.
  with tf.GradientTape() as tape:
    loss, _ = loss_fn(features, student(features, training=False), counts)
  grads = tape.gradient(loss, student.trainable_variables)
  assert len(student.trainable_variables) == len(
      student.checkpointed.trainable_variables) + 2
  assert all(g is not None for g in grads[-2:]) and float(tf.norm(grads[-1])) > 0
  assert "hidden_projection" in student.checkpoint_items
  # A student with its teacher's very layers (and the identity map) has nothing to learn.
  twin = task.build_model(teacher_config)
  twin.set_weights(teacher.get_weights())
  same = distillation.Student(twin, teacher_config, teacher, teacher_config, (0, 1, 2, 3))
  assert same.projection is None
  _, metrics = loss_fn(features, same(features, training=False), counts)
  assert float(metrics["hidden_loss"]) < 1e-10 and float(metrics["attention_loss"]) < 1e-10
  assert abs(float(metrics["soft_loss"])) < 1e-6
  # Multiple choice: records [batch, choices x seq], the encoder's rows each choice's.
  choices = multiple_choice.build_model(config, 2)
  twin = multiple_choice.build_model(config, 2)
  twin.set_weights([w + 0.01 for w in choices.get_weights()])
  rows = np.array([[1, 1, 1, 0, 1, 1, 0, 0], [1, 0, 0, 0, 1, 1, 1, 1]])  # 2 x [2 choices x 4].
  features = {"input_word_ids": tf.constant(rows * 5 + 2), "input_mask": tf.constant(rows),
              "input_type_ids": tf.zeros_like(rows)}
  outputs = distillation.Student(choices, config, twin, config, (0, 1))(features)
  (s_hidden, _), (t_hidden, _) = states(choices, features), states(twin, features)
  real = rows.reshape(4, 4) > 0
  hidden = np.mean([((s - t) ** 2).mean(-1)[real].sum() / 10
                    for s, t in zip(s_hidden, t_hidden)])
  np.testing.assert_allclose(float(distillation.intermediate_losses(
      features, outputs, {"input tokens": 10.0})["hidden_loss"]), hidden, rtol=1e-5)
  with pytest.raises(ValueError, match="--distill_layer_map: a student of 3 layers has no "
                                       "uniform map onto the teacher's 4"):
    intermediate.teacher_blocks(4, 3)
  with pytest.raises(ValueError, match=r"--distill_layer_map=0,4: the teacher has blocks "
                                       r"0\.\.3, not 4"):
    distillation.Intermediate(1.0, 0.0, (0, 4)).teacher_blocks(4, 2)


@pytest.mark.slow
def test_run_classifier_distils_exports_and_refuses_in_one_line(tmp_path):
  """A toy SST-2 teacher (2 layers), then its student from layer 1 (--do_eval, --export_dir,
  the test file's sentences as --transfer_file, half the loss the gold labels') in one
  process, and the mistakes: a teacher of other labels, a layer it has not, no student, no
  --do_train, another vocab, a layer that is not a number, transfer examples with the gold
  labels alone, transfer without a teacher."""
  make_sst2(tmp_path / "sst2", num_train=48, num_dev=16)
  make_stsb(tmp_path / "stsb")
  other_vocab = tmp_path / "vocab.txt"
  with open(VOCAB, encoding="utf-8") as f:
    other_vocab.write_text("".join(f.readlines()[:-1]), encoding="utf-8")
  teacher, student = tmp_path / "teacher", tmp_path / "student"
  common = ["--task_name=SST-2", f"--data_dir={tmp_path / 'sst2'}", "--max_seq_length=32",
            "--train_batch_size=8", "--learning_rate=5e-3"]
  distil = common + [f"--teacher_checkpoint={teacher}", "--do_train"]
  config = dict(vocab_size=30522, hidden_size=16, num_hidden_layers=1, intermediate_size=48,
                max_position_embeddings=64)
  BertConfig(num_attention_heads=2, **config).to_json_file(str(tmp_path / "narrow.json"))
  BertConfig(num_attention_heads=4, **config).to_json_file(str(tmp_path / "heads.json"))
  # TinyBERT's losses: a student half the teacher's width, its last layer's states learned.
  narrow = distil + [f"--output_dir={tmp_path / 'narrow'}", "--do_eval",
                     f"--bert_config_file={tmp_path / 'narrow.json'}", "--num_train_epochs=1",
                     "--distill_hidden_weight=1", "--distill_attention_weight=0.5"]
  runs = [
      common + [f"--output_dir={teacher}", f"--vocab_file={VOCAB}", "--do_train",
                f"--bert_config_file={tiny_config(tmp_path / 'config.json', 2)}",
                "--num_train_epochs=2"],
      distil + [f"--output_dir={student}", "--init_from_teacher_layers=1", "--do_eval",
                "--num_train_epochs=1", "--distill_temperature=2", "--distill_weight=0.5",
                f"--transfer_file={tmp_path / 'sst2' / 'test.tsv'}",
                f"--export_dir={tmp_path / 'serving'}"],
      distil + [f"--output_dir={tmp_path / 'gold'}", "--init_from_teacher_layers=1",
                "--num_train_epochs=1", "--distill_weight=0"],
      narrow, narrow,  # Trains; then, finished, restores its checkpoint and evaluates again.
      ["--task_name=STS-B", f"--data_dir={tmp_path / 'stsb'}", "--max_seq_length=32",
       f"--teacher_checkpoint={teacher}", "--do_train", "--init_from_teacher_layers=1",
       f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=0,2", f"--output_dir={tmp_path / 'refused'}"],
      distil + [f"--output_dir={tmp_path / 'refused'}"],
      common + [f"--teacher_checkpoint={teacher}", "--do_eval", "--init_from_teacher_layers=1",
                f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=1", f"--vocab_file={other_vocab}",
                f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=one", f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=1", "--distill_weight=0",
                f"--transfer_file={tmp_path / 'sst2' / 'test.tsv'}",
                f"--output_dir={tmp_path / 'refused'}"],
      common + ["--do_train", f"--vocab_file={VOCAB}", f"--transfer_file={tmp_path / 'x.tsv'}",
                f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=1", "--distill_layer_map=1",
                f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=1", "--distill_hidden_weight=1",
                "--distill_layer_map=2", f"--output_dir={tmp_path / 'refused'}"],
      distil + [f"--bert_config_file={tmp_path / 'heads.json'}", "--distill_attention_weight=1",
                f"--output_dir={tmp_path / 'refused'}"],
      common + ["--do_train", f"--vocab_file={VOCAB}", "--distill_hidden_weight=1",
                f"--output_dir={tmp_path / 'refused'}"],
      distil + ["--init_from_teacher_layers=1", "--distill_hidden_weight=1",
                "--recompute_layers", f"--output_dir={tmp_path / 'refused'}"],
  ]
  trained, distilled, gold, narrow, again, *refused = entry_points.run_cases(
      "bert_tf.scripts.run_classifier", runs)
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert distilled.returncode == 0, distilled.stderr[-3000:]
  with open(student / "bert_config.json", encoding="utf-8") as f:
    assert json.load(f)["num_hidden_layers"] == 1
  with open(student / "eval_results.json", encoding="utf-8") as f:
    assert json.load(f)["best"]["eval_accuracy"] >= 0  # Scored as any run.
  with open(student / "run_settings.json", encoding="utf-8") as f:
    assert json.load(f)["distillation"] == {
        "teacher": str(teacher), "temperature": 2.0, "weight": 0.5, "teacher_layers": [1],
        "transfer_file": str(tmp_path / "sst2" / "test.tsv"), "intermediate": None}
  # The training set's 48 sentences and the test file's 10, the teacher's outputs in each;
  # the gold labels' loss reads the 48 alone.
  records = [tf.train.Example.FromString(record.numpy()).features.feature
             for record in tf.data.TFRecordDataset(str(student / "train.tf_record"))]
  assert [r[distillation.GOLD].int64_list.value[0] for r in records] == [1] * 48 + [0] * 10
  assert len(records[-1]["teacher_logits"].float_list.value) == 2
  assert "the teacher's outputs (teacher_logits) of 58 training features" in distilled.stderr
  assert os.listdir(tmp_path / "serving") == ["1"]
  # --distill_weight=0: the teacher's layers, the gold labels alone, no teacher's outputs.
  assert gold.returncode == 0, gold.stderr[-3000:]
  example = tf.train.Example.FromString(
      next(iter(tf.data.TFRecordDataset(str(tmp_path / "gold" / "train.tf_record")))).numpy())
  assert "teacher_logits" not in example.features.feature
  assert "teacher_input.tf_record" not in os.listdir(student)
  # The narrow student trained beside its teacher, which gave the soft targets at each step:
  # no labelling pass, none in its records. Its checkpoints hold it as any model (it
  # evaluated and, run again, restored), and the projection besides, not the teacher.
  assert narrow.returncode == 0, narrow.stderr[-3000:]
  assert "the teacher's outputs" not in narrow.stderr
  example = tf.train.Example.FromString(
      next(iter(tf.data.TFRecordDataset(str(tmp_path / "narrow" / "train.tf_record")))).numpy())
  assert "teacher_logits" not in example.features.feature
  assert again.returncode == 0 and "already trained" in again.stderr, again.stderr[-3000:]
  with open(tmp_path / "narrow" / "run_settings.json", encoding="utf-8") as f:
    assert json.load(f)["distillation"]["intermediate"] == {
        "hidden_weight": 1.0, "attention_weight": 0.5, "layer_map": []}
  saved = [name for name, _ in tf.train.list_variables(str(tmp_path / "narrow"))]
  assert any(name.startswith("hidden_projection/") for name in saved), saved
  # The student's alone (width 16, inner 48): no teacher's variable (32 wide).
  sizes = {size for name, shape in tf.train.list_variables(str(tmp_path / "narrow"))
           if not name.startswith("hidden_projection/") for size in shape}
  assert 16 in sizes and 32 not in sizes, sizes
  with open(tmp_path / "narrow" / "eval_results.json", encoding="utf-8") as f:
    assert json.load(f)["best"]["eval_accuracy"] >= 0
  expected = [
      rf"--teacher_checkpoint={teacher}: .*: a teacher is a fine-tuned classification model",
      r"--init_from_teacher_layers=0,2: the teacher has layers 0\.\.1, not 2",
      rf"--teacher_checkpoint={teacher}: which student\? Give its --bert_config_file",
      rf"--teacher_checkpoint={teacher} without --do_train",
      rf"--teacher_checkpoint={teacher}: its vocab \(.*\) is not the student's",
      r"--init_from_teacher_layers=one: not a comma-separated list of layer numbers",
      r"--transfer_file with --distill_weight=0: the gold labels alone train, and its "
      r"examples have none",
      r"--transfer_file=.*x\.tsv without --teacher_checkpoint: a teacher labels its examples",
      r"--distill_layer_map=1 without --distill_hidden_weight or --distill_attention_weight",
      r"--distill_layer_map=2: the teacher has blocks 0\.\.1, not 2",
      r"--distill_attention_weight=1\.0: the student has 4 attention heads, the teacher 2",
      r"--distill_hidden_weight without --teacher_checkpoint: it compares the student's layers",
      r"--recompute_layers with --distill_hidden_weight or --distill_attention_weight",
  ]
  assert len(refused) == len(expected)
  for run, pattern in zip(refused, expected):
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert lines[-1].startswith("run_classifier: error: "), lines[-1]
    assert re.search(pattern, lines[-1]), (pattern, lines[-1])
  assert not os.path.exists(tmp_path / "refused")


def _stsb(folder: str) -> dict:
  make_stsb(folder, num_train=24, num_dev=8)
  return {"data_dir": folder}


@pytest.mark.slow
def test_a_regression_student_moves_to_its_teachers_score(tmp_path, vocab_file,
                                                          tiny_bert_config):
  """The contract's clause for a `score` soft target: STS-B's, with test.tsv as transfer."""
  assert_a_student_moves_to_its_teacher(
      Case("classification", {"task_name": "STS-B", "max_seq_length": 32}, _stsb), tmp_path,
      vocab_file, tiny_bert_config)
