#!/usr/bin/env bash
# v42: a fortieth held-out set (HELD-OUT-40, validation/SPLIT.md, declared before this capture).
# It judges predict's change of 2026-12-07 afternoon (stand-ins for the unseen work each profiler
# window starts behind, cut where launches waited for room in the launch queue; medians over the
# steps that did not begin behind it) and the attribution engine of d625cc1, unchanged, on
# torchvision training code never trained before, GPU-bound loops whose host runs a queue ahead:
#   tv_train_resnet34:  ResNet-34, pinned DataLoader (8 workers), batch 256, 160 px;
#   tv_train_resnext50: ResNeXt-50 32x4d (grouped convolutions), 8 workers, batch 128, 160 px;
# both with non_blocking H2D, the toll before each launch, the copy pad on the host, every subset
# of launch + copies, ProfilerStep kept; truths from 6 rounds of 5 timed steps a phase (5 settle
# steps before each block). Every round's steps shipped. One device call. Writes $OUT/v42_part_*
# + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-570}
W=/tmp/v42h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v42.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5"
R6="$R6 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_resnet34 280 X=1 -- tv_train --kw model=resnet34 --kw workers=8 --kw batch=256 $R6
job tv_train_resnext50 270 X=1 -- tv_train --kw model=resnext50_32x4d --kw workers=8 \
  --kw batch=128 $R6
pack_out v42
t done
