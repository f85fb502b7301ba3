#!/usr/bin/env bash
# v33: a thirty-first held-out set (HELD-OUT-31, validation/SPLIT.md, declared before this
# capture). It judges the engine that moved CP02's (blocked non_blocking copies) wait past an
# interposer's GPU-side copy padding, on two torchvision models new to the matrix, both with
# the copy pad on the GPU side (the placement the change is about):
#   tv_train_mobilenetv2_gpu: MobileNetV2 training, pinned DataLoader (8 workers), non_blocking
#                     H2D, the toll before each launch, the copy pad on the GPU, every subset of
#                     launch + copies in one Kineto session, 3 rounds of 10 timed steps a phase;
#   tv_eval_resnet50_gpu_after: ResNet-50 inference, pinned DataLoader (12 workers), the toll
#                     spun after each launch, the copy pad on the GPU, every subset, 3 rounds.
# Every round's timed steps shipped. One device call. Writes $OUT/v33_part_* + log.
# Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-560}
W=/tmp/v33h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v33.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
MV="tv_train --kw model=mobilenet_v2 --kw workers=8 --kw batch=128 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_train_mobilenetv2_gpu 270 CCDIAG_EMU_COPY_PAD_AT=gpu -- $MV $SHIP_ALL
RN="tv_eval --kw model=resnet50 --kw workers=12 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_eval_resnet50_gpu_after 230 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- $RN $SHIP_ALL
pack_out v33
t done
