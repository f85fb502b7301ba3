#!/usr/bin/env bash
# v30: a twenty-eighth held-out set (HELD-OUT-28, validation/SPLIT.md, declared before this
# capture). It judges the engine of its declaration (the attribution code of b4e8d58; the
# declaration adds two workloads to ccdiag/emulate/workloads.py) on two workload kinds new to
# the matrix, every subset of launch + copies in one Kineto session, every round shipped:
#   tv_detect_frcnn:   torchvision Faster R-CNN (MobileNetV3-Large-320 FPN) inference, batch 4,
#                      random weights: data-dependent post-processing (proposal top-k, NMS,
#                      score filter) reads sizes back inside the forward, detections read back
#                      with .cpu(); the toll before each launch, the copy pad in the host call;
#   tv_train_amp_densenet: DenseNet-121 training with autocast float16 and a GradScaler (its
#                      step reads the found-inf flag back with .item() every step), pinned
#                      DataLoader; the toll spun *after* each launch, the copy pad on the GPU
#                      side (CCDIAG_EMU_COPY_PAD_AT=gpu).
# One device call. Writes $OUT/v30_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-560}
W=/tmp/v30h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v30.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
DT="tv_detect --kw batch=4 --kw workers=4 --mechanisms launch,copy --all-subsets --rounds 4 --block-steps 10 --settle-steps 5 --warmup 5 --no-record-shapes"
AMP="tv_train --kw model=densenet121 --kw batch=64 --kw size=128 --kw workers=8 --kw amp=1 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_detect_frcnn 290 X=1 -- $DT $SHIP_ALL
job tv_train_amp_densenet 250 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- $AMP $SHIP_ALL
pack_out v30
t done
