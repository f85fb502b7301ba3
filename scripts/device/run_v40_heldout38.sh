#!/usr/bin/env bash
# v40: a thirty-eighth held-out set (HELD-OUT-38, validation/SPLIT.md, declared before this
# capture): NEW CAPTURES OF WORKLOAD CODE ALREADY SEEN with 6 rounds of 5 timed steps a phase
# (5 settle steps before each block), judging the engine of d625cc1, unchanged:
#   tv_train_settled_r6: TUNE's ResNet-18 loop (tv_train defaults: batch 256, 6 workers), the toll
#                     before each launch, the copy pad on the host, every subset of launch + copies;
#   tv_train_mobilenetv2_gpu_r6: HELD-OUT-31's MobileNetV2 loop (8 workers, batch 128), the copy
#                     pad on the GPU side (CCDIAG_EMU_COPY_PAD_AT=gpu), the same subsets.
# Every round's steps shipped. One device call. Writes $OUT/v40_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-500}
W=/tmp/v40h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v40.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5"
R6="$R6 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_settled_r6 200 X=1 -- tv_train $R6
job tv_train_mobilenetv2_gpu_r6 280 CCDIAG_EMU_COPY_PAD_AT=gpu -- tv_train --kw model=mobilenet_v2 \
  --kw workers=8 --kw batch=128 $R6
pack_out v40
t done
