#!/usr/bin/env bash
# v22: a twentieth held-out set (HELD-OUT-20, validation/SPLIT.md, declared before this
# capture). It judges the engine of 2026-12-05 evening (attribution code of 147e105: the
# pairing fix for GPU-side copy pads after HELD-OUT-19) on the serving loop's two other readback
# modes, which no held-out set had, and on its async readback under nsys:
#   serve_graph_sync_gpu:    CUDA graph, synchronous readback (blocking D2H on the main stream:
#                            no overlap to lose), the copy pad on the GPU, the toll before;
#   serve_graph_drain_after: CUDA graph, drain-worker readback (the copy blocks a worker thread,
#                            not the main one), the toll spun after each launch, the pad on the host;
#   serve_eager_sync_gpu:    eager, synchronous readback, the copy pad on the GPU, the toll before;
#   serve_graph_async_nsys_il: CUDA graph, async side-stream readback under nsys, every subset,
#                            4 interleaved rounds of ranges, round 0's baseline/treatment shipped.
# Kineto sets: every subset of launch toll + copies in one session, 6 rounds. One device call.
# Writes $OUT/v22_part_* + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-560}
W=/tmp/v22h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v22.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
SV="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 10 --warmup 5 --ship-steps 10"
job serve_graph_sync_gpu 120 CCDIAG_EMU_COPY_PAD_AT=gpu -- serving --kw mode=graph \
  --kw readback=sync $SV $SHIP_ALL
job serve_graph_drain_after 120 CCDIAG_EMU_TOLL_AT=after -- serving --kw mode=graph \
  --kw readback=drain $SV $SHIP_ALL
job serve_eager_sync_gpu 150 CCDIAG_EMU_COPY_PAD_AT=gpu -- serving --kw mode=eager \
  --kw readback=sync $SV --no-record-shapes $SHIP_ALL
KEEP=3 nsys_pair serve_graph_async_nsys_il 200 serving --kw mode=graph --kw readback=async \
  --mechanisms launch,copy --all-subsets --rounds 4 --steps 10 --warmup 3
nsys_rounds serve_graph_async_nsys_il
pack_out v22
t done
