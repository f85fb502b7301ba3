#!/usr/bin/env bash
# v12: a tenth held-out set (HELD-OUT-10, validation/SPLIT.md, declared before this capture). It
# judges the gaps' shift-or-stretch test (rules/_tolls.stretched: gaps beside every launch path
# that stretched and did not shift are slower host code, not a toll) where a CPU neighbour that
# wakes (nice 0, busy 1 ms of every 4) shares the main thread's core, under Nsight Systems:
#   PART=a: HF generate() on Mistral (a model family new to the matrix): run_v8_heldout6.sh's
#           protocol (Kineto single session with every subset; nsys toll alone, and nsys toll +
#           neighbour with every subset, each over 6 interleaved rounds of ranges).
#   PART=b: HF BERT training (pinned DataLoader) and the eager serving loop (async readback) under
#           nsys, toll + neighbour with every subset over 6 interleaved rounds (the ranges of
#           round 0's baseline, treatment, only_launch and only_cpu exported).
# Two device calls (PART=a, then PART=b). Writes $OUT/v12{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
PART=${PART:-a}
if [ "$PART" = a ]; then
  ARCH=mistral CCDIAG_EMU_CPU_NICE=0 CCDIAG_EMU_CPU_DUTY=1/4 SET=v12a KBUDGET=230 DEADLINE=540 \
    exec bash scripts/device/run_v8_heldout6.sh
fi
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-540}
SET=v12b
W=/tmp/${SET}h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_${SET}.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
export CCDIAG_EMU_CPU_NICE=0 CCDIAG_EMU_CPU_DUTY=1/4
echo "cpu neighbour nice $CCDIAG_EMU_CPU_NICE duty $CCDIAG_EMU_CPU_DUTY"
KEEP=5 nsys_pair hf_bert_train_wake_nsys_il 260 hf_bert_train --rounds 6 --steps 8 --warmup 3 \
  --mechanisms launch,cpu
KEEP=5 nsys_pair serve_eager_wake_nsys_il 180 serving --kw mode=eager --kw readback=async \
  --rounds 6 --steps 10 --warmup 3 --mechanisms launch,cpu
nsys_rounds hf_bert_train_wake_nsys_il serve_eager_wake_nsys_il
pack_out $SET
t done
