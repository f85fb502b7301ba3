#!/usr/bin/env bash
# v20b: HELD-OUT-18's RegNetY-400MF training loop without a profiler (after its judgement, to
# read the miss, not to re-judge): every subset of launch toll + copies, 4 interleaved rounds in
# one session, so the per-phase step times say whether the mechanisms slow the unprofiled loop as
# much as the profiled session's truths say (toll alone +15 ms for 5.5 injected). One device call.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-300}
W=/tmp/v20b; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v20b.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
job it_tv_train_regnet 260 X=1 -- tv_train --kw model=regnet_y_400mf --kw workers=12 --kw batch=128 \
  --backend none --session single --mechanisms launch,copy --all-subsets --rounds 4 \
  --block-steps 10 --settle-steps 10 --warmup 5
cp $W/it_tv_train_regnet/ground_truth.json $OUT/it_tv_train_regnet_truth.json 2>/dev/null
cp $W/it_tv_train_regnet.log $OUT/ 2>/dev/null
t done
