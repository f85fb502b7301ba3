#!/usr/bin/env bash
# v25: a twenty-third held-out set (HELD-OUT-23, validation/SPLIT.md, declared before this
# capture). It judges the engine of 2026-12-06 night (f5fb43e's attribution; the refactors after
# it change no number) on a model family new to the matrix:
#   HF generate() on XGLM (fairseq-style: sinusoidal positions, scaled embeddings, pre-LayerNorm,
#   GELU FFN): the toll spun before each launch and after it (Kineto): run_v13_heldout11.sh's
#   PART=b protocol without its nsys pair (amended before any capture to fit the device budget).
# One device call. Writes $OUT/v25_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-200}
SET=v25
W=/tmp/${SET}h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_${SET}.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
GEN="hf_generate --kw arch=xglm --mechanisms launch"
job hf_generate_xglm 90 X=1 -- $GEN --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes \
  --ship-steps 6
job hf_generate_xglm_after 90 CCDIAG_EMU_TOLL_AT=after -- $GEN --rounds 3 --block-steps 6 \
  --warmup 3 --no-record-shapes --ship-steps 6
pack_out $SET
t done
