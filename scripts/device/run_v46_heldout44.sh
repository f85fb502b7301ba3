#!/usr/bin/env bash
# v46: a forty-fourth held-out set (HELD-OUT-44, validation/SPLIT.md, declared before this
# capture), to judge the engine's reading of a copy pad beside a call no op issued
# (rules/_copies._beside, mended on HELD-OUT-43): a torchvision DataLoader training loop under
# Nsight Systems, on workload code never trained before:
#   tv_train_regnetx_nsys_il: RegNetX-400MF, pinned DataLoader (8 workers), batch 256, 160 px,
#     non_blocking H2D, the toll before each launch, the copy pad on the host, every subset of
#     launch + copies; one process, NVTX ccdiag_step ranges, 4 interleaved rounds of one capture
#     range per phase (8 steps a range), round 0's baseline, treatment, only_launch and copies
#     ranges exported (KEEP=9), the truth pooling every round (HELD-OUT-43's nsys protocol).
# No Kineto twin (HELD-OUT-43's ran past its budget). One device call. Writes $OUT/v46_part_* +
# log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-400}
W=/tmp/v46h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v46.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
nsys_setup
TV="tv_train --kw model=regnet_x_400mf --kw workers=8 --kw batch=256"
KEEP=9 nsys_pair tv_train_regnetx_nsys_il 300 $TV --mechanisms launch,copy --all-subsets \
  --rounds 4 --steps 8 --warmup 3
nsys_rounds tv_train_regnetx_nsys_il
pack_out v46
t done
