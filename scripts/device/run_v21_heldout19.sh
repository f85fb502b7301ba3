#!/usr/bin/env bash
# v21: a nineteenth held-out set (HELD-OUT-19, validation/SPLIT.md, declared before this
# capture). It judges the engine of 2026-12-05 afternoon (unchanged since HELD-OUT-18's
# judgement) on issue #12's class 5 (the serving loop's async side-stream readback that blocks
# under CC) with the copy pad placed on the GPU side (CCDIAG_EMU_COPY_PAD_AT=gpu), a placement
# no serving pair had: every subset of launch toll + copies in one Kineto session, 6 rounds.
#   serve_graph_gpu:       CUDA-graph decode, the toll before each (graph) launch;
#   serve_eager_gpu_after: eager decode, the toll spun after each launch.
# One device call. Writes $OUT/v21_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-300}
W=/tmp/v21h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v21.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
SV="--kw readback=async --mechanisms launch,copy --all-subsets --rounds 6 --block-steps 10 --warmup 5 --ship-steps 10"
job serve_graph_gpu 140 CCDIAG_EMU_COPY_PAD_AT=gpu -- serving --kw mode=graph $SV $SHIP_ALL
job serve_eager_gpu_after 150 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- serving --kw mode=eager $SV --no-record-shapes $SHIP_ALL
pack_out v21
t done
