#!/usr/bin/env bash
# v3: the torchvision training pairs again with 10 untimed "settle" steps before every block of 10
# timed steps (--settle-steps 10): the loop does not sync inside a step, so after the
# block-boundary sync its host runs ahead of the GPU for a few steps; run_v3_truth.sh's tv_train_*
# pairs measured those transients (the GPU, 25 ms busy per step, fell 55 ms behind the host over a
# 10-step block). Here every timed step is in the steady state. Writes $OUT/v3_settled.tar.gz.
source scripts/device/_v3_env.sh
W=/tmp/v3set; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_settled.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
TVS="tv_train --mechanisms launch,copy --all-subsets --rounds 2 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes --ship-steps 10"
job tv_train_settled 110 X=1 -- $TVS --ship baseline,treatment,only_launch,on_copy_pad+copy_sync
job it_tv_train_settled 35 X=1 -- tv_train --backend none --session single --rounds 4 --block-steps 10 --settle-steps 10 --warmup 5 --mechanisms launch,copy
job tv_train_settled_after 110 CCDIAG_EMU_TOLL_AT=after -- $TVS
t pack; cat $W/FAILED $W/SKIPPED 2>/dev/null
tar -C $W -czf $OUT/v3_settled.tar.gz . ; ls -la $OUT
t done
