#!/usr/bin/env bash
# v45: a forty-third held-out set (HELD-OUT-43, validation/SPLIT.md, declared before this
# capture): a torchvision training loop with a pinned DataLoader under Nsight Systems for the
# first time (the copy mechanisms of a DataLoader loop read from an nsys SQLite export), with its
# Kineto twin, on workload code never trained before:
#   tv_train_mnv3s: MobileNetV3-Small, pinned DataLoader (8 workers), batch 256, 160 px
#     (little compute, many launches, 19.7 MB of H2D a step), non_blocking H2D;
# launch toll before each launch, copy pad on the host, every subset of launch + copies.
#   Kineto: ProfilerStep kept, truths from 6 rounds of 5 timed steps a phase (5 settle steps);
#   nsys: one process, NVTX ccdiag_step ranges, 4 interleaved rounds of one capture range per
#     phase (8 steps a range), round 0's baseline, treatment, only_launch and copies ranges
#     exported (KEEP=9), the truth pooling every round.
# One device call. Writes $OUT/v45_part_* + log. Assemble with validation/make_pairs.py --raw DIR
# --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-560}
W=/tmp/v45h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v45.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
nsys_setup
TV="tv_train --kw model=mobilenet_v3_small --kw workers=8 --kw batch=256"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5"
R6="$R6 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_mnv3s 200 X=1 -- $TV $R6
KEEP=9 nsys_pair tv_train_mnv3s_nsys_il 300 $TV --mechanisms launch,copy --all-subsets \
  --rounds 4 --steps 8 --warmup 3
nsys_rounds tv_train_mnv3s_nsys_il
pack_out v45
t done
