#!/usr/bin/env bash
# v43: a forty-first held-out set (HELD-OUT-41, validation/SPLIT.md, declared before this
# capture). It judges predict's queue waits found by the queue's depth (2026-12-07, developed on
# HELD-OUT-40) and the attribution engine of d625cc1, unchanged, on torchvision training code
# never trained before, GPU-bound loops:
#   tv_train_wrn50: Wide ResNet-50-2, pinned DataLoader (8 workers), batch 96, 160 px;
#   tv_train_vgg11: VGG-11 with batch norm, 8 workers, batch 128, 160 px;
# both with non_blocking H2D, the toll before each launch, the copy pad on the host, every subset
# of launch + copies, ProfilerStep kept; truths from 6 rounds of 5 timed steps a phase (5 settle
# steps before each block). Every round's steps shipped. One device call. Writes $OUT/v43_part_*
# + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-570}
W=/tmp/v43h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v43.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5"
R6="$R6 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_wrn50 290 X=1 -- tv_train --kw model=wide_resnet50_2 --kw workers=8 --kw batch=96 $R6
# amended before any capture (validation/SPLIT.md): JOBS=wrn50 runs the first job only
[ "${JOBS:-all}" = wrn50 ] || job tv_train_vgg11 260 X=1 -- tv_train --kw model=vgg11_bn --kw workers=8 --kw batch=128 $R6
pack_out v43
t done
