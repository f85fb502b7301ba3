#!/usr/bin/env bash
# v34: a thirty-second held-out set (HELD-OUT-32, validation/SPLIT.md, declared before this
# capture). It judges the engine as it stands (no engine change since HELD-OUT-31's judgement)
# on workload code new to the matrix:
#   hf_generate_phi3: HF generate() on Phi-3 (random weights) with the launch toll spun before
#                     each launch, a CPU neighbour process (nice 5, always busy) and both, one
#                     Kineto session, 6 rounds of 6 timed steps a phase;
#   hf_generate_biogpt_after: HF generate() on BioGPT, the toll spun after each launch, Kineto;
#   tv_train_convnext: torchvision ConvNeXt-Tiny training, pinned DataLoader (8 workers),
#                     non_blocking H2D, the toll before each launch and the copy pad on the host,
#                     every subset of launch + copies in one Kineto session, 3 rounds of 10 timed
#                     steps a phase, every round's steps shipped.
# Every round's timed steps shipped (HELD-OUT-24's protocol). One device call. Writes $OUT/v34_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-540}
W=/tmp/v34h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v34.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision, transformers; print(torch.__version__, torchvision.__version__, transformers.__version__)"
export CCDIAG_EMU_CPU_NICE=5; echo "cpu neighbour nice $CCDIAG_EMU_CPU_NICE, always busy"
job hf_generate_phi3 160 X=1 -- hf_generate --kw arch=phi3 --mechanisms launch,cpu --rounds 6 --block-steps 6 \
  --warmup 3 --no-record-shapes --ship baseline,treatment,only_launch,only_cpu
job hf_generate_biogpt_after 100 CCDIAG_EMU_TOLL_AT=after -- hf_generate --kw arch=biogpt --mechanisms launch \
  --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes
CX="tv_train --kw model=convnext_tiny --kw workers=8 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_train_convnext 250 X=1 -- $CX --ship baseline,treatment,only_launch,on_copy_pad+copy_sync
pack_out v34
t done
