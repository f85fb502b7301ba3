#!/usr/bin/env bash
# v37: a thirty-fifth held-out set (HELD-OUT-35, validation/SPLIT.md, declared before this
# capture). It judges the engine of d625cc1, unchanged, on workload code never captured:
#   hf_generate_gemma2_after: HF generate() on Gemma 2 (sliding-window and global layers,
#                     soft-capped logits), random weights, the toll spun AFTER each launch,
#                     Kineto with ProfilerStep, 3 rounds of 6 steps;
#   hf_generate_gemma2_nostep: the same model, the toll before each launch, profiled WITHOUT
#                     step markers (ProfilerStep removed), 3 rounds of 6 steps.
# Every round's steps shipped. One device call. Writes $OUT/v37_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-260}
W=/tmp/v37h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v37.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision, transformers; print(torch.__version__, torchvision.__version__, transformers.__version__)"
job hf_generate_gemma2_after 110 CCDIAG_EMU_TOLL_AT=after -- hf_generate --kw arch=gemma2 --mechanisms launch \
  --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes
job hf_generate_gemma2_nostep 110 X=1 -- hf_generate --kw arch=gemma2 --mechanisms launch --rounds 3 \
  --block-steps 6 --warmup 3 --no-record-shapes --strip-step-markers
pack_out v37
t done
