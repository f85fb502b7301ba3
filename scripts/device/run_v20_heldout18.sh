#!/usr/bin/env bash
# v20: an eighteenth held-out set (HELD-OUT-18, validation/SPLIT.md, declared before this
# capture). It judges the engine of 2026-12-05 afternoon on two torchvision model families new to
# the matrix, on a pinned-DataLoader loop (issue #12's interaction class: a blocking copy drains
# the queue and exposes the launch toll), every subset of launch + copies in one Kineto session:
#   tv_train_regnet: RegNetY-400MF training (grouped convolutions, squeeze-excitation), steady
#                    state (settle steps), the toll before each launch and the copy pad in the
#                    host call (run_v5_heldout3.sh's EfficientNet protocol, 2 rounds);
#   tv_eval_shufflenet: ShuffleNetV2 x1.0 inference with a blocking .cpu() readback every batch
#                    (channel shuffles), the toll spun *after* each launch and the copy pad placed
#                    on the GPU side (CCDIAG_EMU_COPY_PAD_AT=gpu): the other placement of both costs.
# One device call. Writes $OUT/v20_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-560}
W=/tmp/v20h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v20.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
RG="tv_train --kw model=regnet_y_400mf --kw workers=12 --kw batch=128 --mechanisms launch,copy --all-subsets --rounds 2 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes --ship-steps 10"
SH="tv_eval --kw model=shufflenet_v2_x1_0 --kw workers=12 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 6 --block-steps 10 --warmup 5 --no-record-shapes --ship-steps 10"
job tv_train_regnet 270 X=1 -- $RG $SHIP_ALL
job tv_eval_shufflenet 230 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- $SH $SHIP_ALL
pack_out v20
t done
