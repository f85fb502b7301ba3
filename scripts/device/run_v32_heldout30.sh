#!/usr/bin/env bash
# v32: a thirtieth held-out set (HELD-OUT-30, validation/SPLIT.md, declared before this capture)
# and the fewer_sync_copies fix applied for real (issue 13), one device call:
#   flag_reads:        ccdiag's FlagReads loop (24 layers of 512x2048 @ 2048x2048 bf16 + tanh;
#                      every 2nd layer `if (h.abs().amax() > 0.5):` reads a flag back mid-step,
#                      12 a step; the step's result read back once at its end); every subset of
#                      the launch toll (spun before the call) and the copy costs (host pad + sync)
#   flag_reads_after:  the same loop, the toll spun after the call, the copy pad on the GPU side
#   it_flag_reads / it_flag_reads_gpu: step times without a profiler (interleaved phases), the
#                      loop and its fix (on_gpu=1: flags kept on the GPU, one readback a step)
# Only the pairs' top-level files and the timing json are packed. Writes $OUT/v32_part_* + log.
# Assemble: make_pairs.py --raw DIR --pairs-only, then --timing-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-560}
W=/tmp/v32h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v32.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print(torch.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
FR="flag_reads --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --warmup 5"
A="--backend none --session single --rounds 4 --block-steps 10 --warmup 5 --mechanisms launch,copy"
job flag_reads 150 X=1 -- $FR $SHIP_ALL
job flag_reads_after 150 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- $FR $SHIP_ALL
job it_flag_reads 90 X=1 -- flag_reads $A
job it_flag_reads_gpu 90 X=1 -- flag_reads --kw on_gpu=1 $A
du -sh $W/*
(cd $W && tar -czf /tmp/v32.tgz $(find flag_reads flag_reads_after -maxdepth 1 -type f) \
  $(find it_flag_reads it_flag_reads_gpu -maxdepth 1 -name 'timing_none.json') $(ls FAILED SKIPPED 2>/dev/null))
ls -la /tmp/v32.tgz
split -b 15M /tmp/v32.tgz $OUT/v32_part_
t done
