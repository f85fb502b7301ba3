#!/usr/bin/env bash
# v44: a forty-second held-out set (HELD-OUT-42, validation/SPLIT.md, declared before this
# capture). The first set judged by predict's same-form protocol (Shapley over the injected
# mechanisms, or the one mechanism alone; scripts/validate_predict_emulated.py SAME_FORM_FROM), and
# the attribution engine of d625cc1, unchanged, on torchvision training code never trained before:
#   tv_train_alexnet: AlexNet, pinned DataLoader (8 workers), batch 256, 160 px (little compute
#     for its input: a copy-heavy step);
#   tv_train_swint: Swin-T, 8 workers, batch 64, 160 px (a launch-heavy transformer step);
# both with non_blocking H2D, the toll before each launch, the copy pad on the host, every subset
# of launch + copies, ProfilerStep kept; truths from 6 rounds of 5 timed steps a phase (5 settle
# steps before each block). Every round's steps shipped. One device call. Writes $OUT/v44_part_*
# + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-570}
W=/tmp/v44h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v44.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5"
R6="$R6 --no-record-shapes --ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
job tv_train_alexnet 200 X=1 -- tv_train --kw model=alexnet --kw workers=8 --kw batch=256 $R6
job tv_train_swint 300 X=1 -- tv_train --kw model=swin_t --kw workers=8 --kw batch=64 $R6
pack_out v44
t done
