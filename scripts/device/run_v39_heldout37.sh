#!/usr/bin/env bash
# v39: a thirty-seventh held-out set (HELD-OUT-37, validation/SPLIT.md, declared before this
# capture): NEW CAPTURES OF WORKLOAD CODE ALREADY SEEN, with the truth protocol of HELD-OUT-36
# (6 rounds of 5 timed steps a phase, 5 settle steps before each block), to judge the engine of
# d625cc1, unchanged, on the two DataLoader loops whose 2-round captures missed the most:
#   tv_train_regnet_r6: HELD-OUT-18's RegNetY-400MF loop (12 workers, batch 128), toll before
#                     each launch, copy pad on the host, every subset of launch + copies;
#   tv_train_mnv3l_r6:  HELD-OUT-34's MobileNetV3-Large loop (8 workers, batch 64), the same,
#                     profiled WITHOUT step markers as HELD-OUT-34 was.
# Every round's steps shipped. One device call. Writes $OUT/v39_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-540}
W=/tmp/v39h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v39.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_mnv3l_r6 240 X=1 -- tv_train --kw model=mobilenet_v3_large --kw workers=8 --kw batch=64 $R6 \
  --strip-step-markers
job tv_train_regnet_r6 280 X=1 -- tv_train --kw model=regnet_y_400mf --kw workers=12 --kw batch=128 $R6
pack_out v39
t done
