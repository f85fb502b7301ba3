#!/usr/bin/env bash
# v13: an eleventh held-out set (HELD-OUT-11, validation/SPLIT.md, declared before this capture).
# It judges the gap model's constants for the kernel keys the gaps identify only
# (ccdiag.ledger.align.identified_keys), on two model families new to the matrix:
#   PART=a: HF generate() on Qwen2 with a steady CPU neighbour (nice 5): run_v8_heldout6.sh's
#           protocol (Kineto single session with every subset; nsys toll alone, and nsys toll +
#           neighbour with every subset, each over 6 interleaved rounds of ranges).
#   PART=b: HF generate() on GPT-BigCode (multi-query attention): the toll spun before each
#           launch and after it (Kineto), and before it under nsys (6 interleaved rounds).
# Two device calls (PART=a, then PART=b). Writes $OUT/v13{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
# PART=b takes ARCH (default gpt_bigcode), PREFIX (default hf_generate_bigcode) and SET (default
# v13b): run_v14_heldout12.sh reuses it on another family.
PART=${PART:-a}
if [ "$PART" = a ]; then
  ARCH=qwen2 CCDIAG_EMU_CPU_NICE=5 SET=v13a KBUDGET=210 DEADLINE=540 \
    exec bash scripts/device/run_v8_heldout6.sh
fi
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-540}
SET=${SET:-v13b}
ARCH=${ARCH:-gpt_bigcode}
PREFIX=${PREFIX:-hf_generate_bigcode}
W=/tmp/${SET}h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_${SET}.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
GEN="hf_generate --kw arch=$ARCH --mechanisms launch"
job $PREFIX 130 X=1 -- $GEN --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes \
  --ship-steps 6
job ${PREFIX}_after 130 CCDIAG_EMU_TOLL_AT=after -- $GEN --rounds 3 --block-steps 6 \
  --warmup 3 --no-record-shapes --ship-steps 6
KEEP=3 nsys_pair ${PREFIX}_nsys_il 130 $GEN --rounds 6 --steps 8 --warmup 3 \
  --phases baseline,treatment
nsys_rounds ${PREFIX}_nsys_il
pack_out $SET
t done
