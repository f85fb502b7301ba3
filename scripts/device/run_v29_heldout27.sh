#!/usr/bin/env bash
# v29: a twenty-seventh held-out set (HELD-OUT-27, validation/SPLIT.md, declared before this
# capture). It judges the engine of its declaration (f087952: a thread that launches no kernel
# while the main thread does, or whose calls overlap the main thread's, is left off the main
# thread's timeline) on three more drain-worker serving loops, every pair shipping every
# round's timed steps:
#   serve_graph_drain_l8_before: CUDA graph, 8 layers, batch 16, 300 us of scheduling work a
#                                step, the toll spun before each launch;
#   serve_graph_drain_short:     CUDA graph, 10 layers, 50 us of scheduling work: the main
#                                thread waits for the worker's readback every step;
#   serve_eager_drain_l4_after:  eager, 4 layers, 300 us of scheduling work, the toll spun
#                                after each launch;
# all with the copy costs on the host, every subset, 6 rounds of 10 steps. One device call.
# Writes $OUT/v29_part_* + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-400}
W=/tmp/v29h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v29.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print(torch.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
SV="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 10 --warmup 5"
job serve_graph_drain_l8_before 120 X=1 -- serving --kw mode=graph --kw readback=drain \
  --kw layers=8 --kw batch=16 --kw cpu_us=300 $SV $SHIP_ALL
job serve_graph_drain_short 120 X=1 -- serving --kw mode=graph --kw readback=drain \
  --kw cpu_us=50 $SV $SHIP_ALL
job serve_eager_drain_l4_after 150 CCDIAG_EMU_TOLL_AT=after -- serving --kw mode=eager \
  --kw readback=drain --kw layers=4 --kw cpu_us=300 $SV --no-record-shapes $SHIP_ALL
pack_out v29
t done
