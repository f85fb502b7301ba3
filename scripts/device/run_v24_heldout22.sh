#!/usr/bin/env bash
# v24: a twenty-second held-out set (HELD-OUT-22, validation/SPLIT.md, declared before this
# capture). It judges the engine of f5fb43e (2026-12-05 night: CP01 takes out a copy cost an
# interposer places on the GPU as a padding kernel, its launch and the host's wait for it) on a
# torchvision model new to the matrix, with the copy pad placed on the GPU:
#   tv_eval_mobilenet_gpu: MobileNetV3-Small inference with a pinned DataLoader and a blocking
#                          .cpu() readback every batch, the toll before each launch, the copy pad
#                          on the GPU (CCDIAG_EMU_COPY_PAD_AT=gpu), every subset of launch + copies
#                          in one Kineto session, 4 rounds.
# One device call. Writes $OUT/v24_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-250}
W=/tmp/v24h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v24.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
MB="tv_eval --kw model=mobilenet_v3_small --kw workers=12 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 4 --block-steps 10 --warmup 5 --no-record-shapes --ship-steps 10"
job tv_eval_mobilenet_gpu 200 CCDIAG_EMU_COPY_PAD_AT=gpu -- $MB $SHIP_ALL
pack_out v24
t done
