#!/usr/bin/env bash
# v41: a thirty-ninth held-out set (HELD-OUT-39, validation/SPLIT.md, declared before this
# capture). It judges the engine of d625cc1, unchanged, on workload code never trained before:
#   tv_train_squeezenet: torchvision SqueezeNet 1.1 training (fire modules, no batch norm; until
#                     now captured only in evaluation), pinned DataLoader (8 workers), batch 64,
#                     non_blocking H2D, the toll before each launch, the copy pad on the host,
#                     every subset of launch + copies, ProfilerStep kept; truths from 6 rounds of
#                     5 timed steps a phase (5 settle steps before each block).
# Every round's steps shipped. One device call. Writes $OUT/v41_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-300}
W=/tmp/v41h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v41.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5"
R6="$R6 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_squeezenet 240 X=1 -- tv_train --kw model=squeezenet1_1 --kw workers=8 --kw batch=64 $R6
pack_out v41
t done
