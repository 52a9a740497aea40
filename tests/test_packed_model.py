"""The packed pretraining model is the unpacked one: the same instances packed several to a row
give each sequence the masked-LM and next-sentence outputs, losses and gradients it gets alone
in a row, no sequence of a pack sees another, and the checkpoints are interchangeable."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bert_tf.modeling import checkpoints, encoder
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.pretrainer import (PACKED_ENCODER_INPUTS, build_pretrainer,
                                         pretraining_loss, pretraining_loss_counts)

# Dropout off: the packed and unpacked passes compute the same function.
CONFIG = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=48, max_position_embeddings=32, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
SEQ, PREDS, PACK = 24, 3, 3  # max_seq_length, max_predictions_per_seq, max_sequences_per_pack
CLS, MASK_ID = 2, 3
LENGTHS = [10, 7, 13, 5, 11, 18]
# The instances of each packed row: two (and an empty slot), three, and one alone.
ROWS = [[2, 0], [1, 3, 4], [5]]


def _instances(seed=0) -> list[dict]:
  """Records as create_pretraining_data makes them, each unpadded: [CLS] first, sentence B
  from its middle, up to PREDS masked positions (instance 1 has 2), an NSP label."""
  rng = np.random.default_rng(seed)
  instances = []
  for i, n in enumerate(LENGTHS):
    original = rng.integers(5, CONFIG.vocab_size, n)
    original[0] = CLS
    positions = np.sort(rng.choice(np.arange(1, n), 2 if i == 1 else PREDS, replace=False))
    ids = original.copy()
    ids[positions] = MASK_ID
    types = (np.arange(n) >= n // 2).astype(np.int32)
    instances.append(dict(ids=ids, types=types, positions=positions,
                          labels=original[positions], nsp_label=i % 2))
  return instances


def _unpacked(instances: list[dict]) -> dict:
  """One instance a row, padded to SEQ and PREDS: today's batch."""
  b = len(instances)
  f = dict(input_word_ids=np.zeros((b, SEQ)), input_mask=np.zeros((b, SEQ)),
           input_type_ids=np.zeros((b, SEQ)), masked_lm_positions=np.zeros((b, PREDS)),
           masked_lm_ids=np.zeros((b, PREDS)), masked_lm_weights=np.zeros((b, PREDS)),
           next_sentence_labels=np.zeros((b, 1)))
  for r, inst in enumerate(instances):
    n, p = len(inst["ids"]), len(inst["positions"])
    f["input_word_ids"][r, :n] = inst["ids"]
    f["input_mask"][r, :n] = 1
    f["input_type_ids"][r, :n] = inst["types"]
    f["masked_lm_positions"][r, :p] = inst["positions"]
    f["masked_lm_ids"][r, :p] = inst["labels"]
    f["masked_lm_weights"][r, :p] = 1.0
    f["next_sentence_labels"][r, 0] = inst["nsp_label"]
  return _tensors(f)


def _packed(instances: list[dict], rows: list[list[int]]) -> tuple[dict, dict]:
  """The instances concatenated into rows of SEQ per the packer's contract (see the
  pretrainer's module doc), and where each landed: {instance: (row, slot, offset,
  its masked-LM slots in the row)}."""
  b = len(rows)
  f = dict(input_word_ids=np.zeros((b, SEQ)), input_mask=np.zeros((b, SEQ)),
           input_type_ids=np.zeros((b, SEQ)), input_positions=np.zeros((b, SEQ)),
           masked_lm_positions=np.zeros((b, PACK * PREDS)),
           masked_lm_ids=np.zeros((b, PACK * PREDS)),
           masked_lm_weights=np.zeros((b, PACK * PREDS)),
           next_sentence_labels=np.zeros((b, PACK)), next_sentence_positions=np.zeros((b, PACK)),
           next_sentence_weights=np.zeros((b, PACK)))
  where = {}
  for r, row in enumerate(rows):
    offset, lm_slot = 0, 0
    for slot, i in enumerate(row):
      inst = instances[i]
      n, p = len(inst["ids"]), len(inst["positions"])
      tokens = slice(offset, offset + n)
      f["input_word_ids"][r, tokens] = inst["ids"]
      f["input_mask"][r, tokens] = slot + 1
      f["input_type_ids"][r, tokens] = inst["types"]
      f["input_positions"][r, tokens] = np.arange(n)
      lm_slots = slice(lm_slot, lm_slot + p)
      f["masked_lm_positions"][r, lm_slots] = offset + inst["positions"]
      f["masked_lm_ids"][r, lm_slots] = inst["labels"]
      f["masked_lm_weights"][r, lm_slots] = 1.0
      f["next_sentence_labels"][r, slot] = inst["nsp_label"]
      f["next_sentence_positions"][r, slot] = offset
      f["next_sentence_weights"][r, slot] = 1.0
      where[i] = (r, slot, offset, lm_slots)
      offset, lm_slot = offset + n, lm_slot + p
    assert offset <= SEQ
  return _tensors(f), where


def _tensors(features: dict) -> dict:
  return {name: tf.constant(value, tf.float32 if name.endswith("weights") else tf.int32)
          for name, value in features.items()}


def _xent(logits, labels) -> np.ndarray:
  """Softmax cross-entropy in float64: logits [..., V], labels [...] -> [...]."""
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(-1, keepdims=True)
  log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  return -np.take_along_axis(log_softmax, np.asarray(labels)[..., None], -1)[..., 0]


def _save(model, prefix: str) -> str:
  """As the trainer saves: the model and its checkpoint_items."""
  return tf.train.Checkpoint(model=model, **model.checkpoint_items).write(prefix)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple:
  """(unpacked, packed) pretrainers with the same weights: the packed one loaded from the
  unpacked one's checkpoint."""
  tf_keras.utils.set_random_seed(1)
  unpacked = build_pretrainer(CONFIG, SEQ, PREDS)
  packed = build_pretrainer(CONFIG, SEQ, PREDS, max_sequences_per_pack=PACK)
  prefix = _save(unpacked, str(tmp_path_factory.mktemp("unpacked") / "ckpt"))
  assert checkpoints.load_into_pretrainer(packed, prefix) == [
      "encoder", "masked_lm", "next_sentence"]
  return unpacked, packed


def test_each_sequence_gets_its_unpacked_outputs_and_losses(models):
  unpacked, packed = models
  instances = _instances()
  features_u = _unpacked(instances)
  features_p, where = _packed(instances, ROWS)
  outputs_u, outputs_p = unpacked(features_u), packed(features_p)
  assert outputs_p["mlm_logits"].shape == (len(ROWS), PACK * PREDS, CONFIG.vocab_size)
  assert outputs_p["nsp_logits"].shape == (len(ROWS), PACK, 2)

  xent_u = _xent(outputs_u["mlm_logits"], features_u["masked_lm_ids"])
  xent_p = _xent(outputs_p["mlm_logits"], features_p["masked_lm_ids"])
  nsp_u = _xent(outputs_u["nsp_logits"], features_u["next_sentence_labels"][:, 0])
  nsp_p = _xent(outputs_p["nsp_logits"], features_p["next_sentence_labels"])
  for i, inst in enumerate(instances):
    r, slot, _, lm_slots = where[i]
    p = len(inst["positions"])
    # Per masked token.
    np.testing.assert_allclose(xent_p[r, lm_slots], xent_u[i, :p], atol=1e-5)
    np.testing.assert_allclose(outputs_p["nsp_logits"][r, slot], outputs_u["nsp_logits"][i],
                               atol=1e-5)
    np.testing.assert_allclose(nsp_p[r, slot], nsp_u[i], atol=1e-5)

  # Fewer masked-LM slots, as long as they hold every target, give the same logits.
  used = int(np.max(np.sum(features_p["masked_lm_weights"], axis=1)))
  assert used < PACK * PREDS
  cut = dict(features_p, **{name: features_p[name][:, :used] for name in (
      "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")})
  np.testing.assert_allclose(packed(cut)["mlm_logits"], outputs_p["mlm_logits"][:, :used],
                             atol=1e-6)


def test_the_loss_and_its_gradients_equal_the_unpacked_batchs(models):
  """The same masked-token mean and the same sequence mean: the packed batch's loss, metrics
  and every gradient are the unpacked batch's of the same instances."""
  unpacked, packed = models
  instances = _instances()
  features_p, _ = _packed(instances, ROWS)
  counts_p = pretraining_loss_counts(features_p)
  # The next-sentence mean is over the sequences, not the rows.
  assert float(counts_p["records"]) == len(instances)
  assert float(counts_p["lm targets"]) == sum(len(inst["positions"]) for inst in instances)

  results = []
  for model, features in ((unpacked, _unpacked(instances)), (packed, features_p)):
    with tf.GradientTape() as tape:
      loss, metrics = pretraining_loss(features, model(features, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    results.append((loss, metrics, {v.name: tf.convert_to_tensor(g).numpy().astype(np.float64)
                                    for v, g in zip(model.trainable_variables, grads)}))
  (loss_u, metrics_u, grads_u), (loss_p, metrics_p, grads_p) = results
  np.testing.assert_allclose(loss_p, loss_u, atol=1e-5)
  for name, value in metrics_u.items():
    np.testing.assert_allclose(metrics_p[name], value, atol=1e-5, err_msg=name)
  assert grads_p.keys() == grads_u.keys()
  for name, grad in grads_u.items():
    assert np.abs(grad).max() > 0, name  # Every variable is reached.
    np.testing.assert_allclose(grads_p[name], grad, atol=1e-5, err_msg=name)


def test_a_sequence_changes_no_output_of_its_neighbours(models):
  _, packed = models
  instances = _instances()
  features, where = _packed(instances, ROWS)
  changed_instances = _instances()
  middle = ROWS[1][1]  # Instance 3, between 1 and 4 in row 1.
  changed_instances[middle] = _instances(seed=7)[middle]
  changed_instances[middle]["nsp_label"] = 1 - instances[middle]["nsp_label"]
  changed, _ = _packed(changed_instances, ROWS)
  assert not np.array_equal(changed["input_word_ids"], features["input_word_ids"])

  def outputs(f):
    encoded = packed.encoder({name: f[name] for name in PACKED_ENCODER_INPUTS})
    return encoded["sequence_output"].numpy(), {k: v.numpy() for k, v in packed(f).items()}

  (sequence, heads), (sequence_changed, heads_changed) = outputs(features), outputs(changed)
  for i in (ROWS[1][0], ROWS[1][2]):
    r, slot, offset, lm_slots = where[i]
    tokens = slice(offset, offset + len(instances[i]["ids"]))
    np.testing.assert_allclose(sequence_changed[r, tokens], sequence[r, tokens], atol=1e-6)
    np.testing.assert_allclose(heads_changed["mlm_logits"][r, lm_slots],
                               heads["mlm_logits"][r, lm_slots], atol=1e-6)
    np.testing.assert_allclose(heads_changed["nsp_logits"][r, slot],
                               heads["nsp_logits"][r, slot], atol=1e-6)
  # The changed sequence's own outputs did change.
  r, _, offset, _ = where[middle]
  tokens = slice(offset, offset + len(instances[middle]["ids"]))
  assert np.abs(sequence_changed[r, tokens] - sequence[r, tokens]).max() > 1e-3


def test_checkpoints_load_packed_into_unpacked_and_back(tmp_path):
  tf_keras.utils.set_random_seed(2)
  packed = build_pretrainer(CONFIG, SEQ, PREDS, max_sequences_per_pack=PACK)
  unpacked = build_pretrainer(CONFIG, SEQ, PREDS)
  values = lambda model: {v.name: v.numpy() for v in model.variables}
  assert values(packed).keys() == values(unpacked).keys()
  assert any(not np.array_equal(values(packed)[k], v) for k, v in values(unpacked).items())

  checkpoints.load_into_pretrainer(unpacked, _save(packed, str(tmp_path / "packed")))
  for name, value in values(packed).items():
    np.testing.assert_array_equal(values(unpacked)[name], value, err_msg=name)

  # And back: a fresh packed model from an unpacked one's checkpoint.
  tf_keras.utils.set_random_seed(3)
  trained_unpacked = build_pretrainer(CONFIG, SEQ, PREDS)
  checkpoints.load_into_pretrainer(packed, _save(trained_unpacked, str(tmp_path / "unpacked")))
  for name, value in values(trained_unpacked).items():
    np.testing.assert_array_equal(values(packed)[name], value, err_msg=name)


def test_packing_is_bidirectional_mlm_only():
  with pytest.raises(ValueError, match="causal .* does not take packed rows"):
    encoder.build_encoder(CONFIG, "causal", packed=True)
  with pytest.raises(ValueError, match="max_sequences_per_pack 3 needs objective 'mlm'"):
    build_pretrainer(CONFIG, SEQ, PREDS, objective="ltr", nsp=False,
                     max_sequences_per_pack=PACK)
  # The unpacked encoder reads what it did: no input_positions.
  assert sorted(encoder.build_encoder(CONFIG).input) == sorted(encoder.INPUT_NAMES)
