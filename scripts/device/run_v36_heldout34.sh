#!/usr/bin/env bash
# v36: a thirty-fourth held-out set (HELD-OUT-34, validation/SPLIT.md, declared before this
# capture). It judges the engine of 7ff66c1, unchanged, on loops profiled WITHOUT step markers
# (ProfilerStep removed from the shipped traces: a torch.profiler.profile() without a schedule),
# on workload code never captured:
#   hf_generate_mixtral_nostep: HF generate() on Mixtral (sparse mixture of experts, 4 experts,
#                     2 a token), random weights, the toll before each launch, 3 rounds of 6 steps;
#   tv_train_mnv3l_nostep: torchvision MobileNetV3-Large training, pinned DataLoader (8 workers),
#                     non_blocking H2D, the toll before each launch and the copy pad on the host,
#                     every subset of launch + copies, 2 rounds of 10 timed steps a phase.
# Every round's steps shipped. One device call. Writes $OUT/v36_part_* + log (archive kept at
# /tmp/v36.tgz on the device). Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-360}
W=/tmp/v36h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v36.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision, transformers; print(torch.__version__, torchvision.__version__, transformers.__version__)"
job hf_generate_mixtral_nostep 120 X=1 -- hf_generate --kw arch=mixtral --mechanisms launch --rounds 3 \
  --block-steps 6 --warmup 3 --no-record-shapes --strip-step-markers
MX="tv_train --kw model=mobilenet_v3_large --kw workers=8 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 2 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes --strip-step-markers"
job tv_train_mnv3l_nostep 200 X=1 -- $MX --ship baseline,treatment,only_launch,on_copy_pad+copy_sync
pack_out v36
t done
