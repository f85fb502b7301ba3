#!/usr/bin/env bash
# v35: a thirty-third held-out set (HELD-OUT-33, validation/SPLIT.md, declared before this
# capture). It judges the engine after the replay's block fix (a block of steps keeps every GPU
# row its calls launched; a GPU-bound baseline's counterfactual floored at its GPU's busy share),
# found and tuned on HELD-OUT-32's ConvNeXt, on a torchvision model never captured:
#   tv_train_resnet50: torchvision ResNet-50 training, pinned DataLoader (8 workers),
#                     non_blocking H2D, the toll before each launch and the copy pad on the host,
#                     every subset of launch + copies in one Kineto session, 2 rounds of 10 timed
#                     steps a phase, every round's steps shipped.
# One device call. Writes $OUT/v35_part_* + log (archive kept at /tmp/v35.tgz on the device).
# Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-250}
W=/tmp/v35h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v35.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
RX="tv_train --kw model=resnet50 --kw workers=8 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 2 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_train_resnet50 220 X=1 -- $RX --ship baseline,treatment,only_launch,on_copy_pad+copy_sync
pack_out v35
t done
