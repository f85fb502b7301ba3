#!/usr/bin/env bash
# v47: a forty-fifth held-out set (HELD-OUT-45, validation/SPLIT.md, declared before this
# capture), to judge CP01's reading of a copy pad beside a call no op issued (rules/_copies:
# _beside, mended on HELD-OUT-43; counted in CP01's firing test, mended on HELD-OUT-44): a
# torchvision *inference* loop under Nsight Systems, on workload code never run before:
#   tv_eval_mnasnet_nsys_il: MNASNet 1.0 inference, pinned DataLoader (12 workers), batch 64,
#     160 px, non_blocking H2D and a blocking .cpu() readback of the predictions every batch,
#     the toll before each launch, the copy pad on the host, every subset of launch + copies;
#     one process, NVTX ccdiag_step ranges, 4 interleaved rounds of one capture range per phase
#     (8 steps a range), round 0's baseline, treatment, only_launch and copies ranges exported
#     (KEEP=9), the truth pooling every round (HELD-OUT-43's nsys protocol).
# No Kineto twin. One device call. Writes $OUT/v47_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-400}
W=/tmp/v47h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v47.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
nsys_setup
TV="tv_eval --kw model=mnasnet1_0 --kw workers=12 --kw batch=64"
KEEP=9 nsys_pair tv_eval_mnasnet_nsys_il 300 $TV --mechanisms launch,copy --all-subsets \
  --rounds 4 --steps 8 --warmup 3
nsys_rounds tv_eval_mnasnet_nsys_il
pack_out v47
t done
