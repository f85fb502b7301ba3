#!/usr/bin/env bash
# v23: a twenty-first held-out set (HELD-OUT-21, validation/SPLIT.md, declared before this
# capture). It judges the engine of 2026-12-05 evening (e2f6914: a copy call and the sync right
# after it are one blocking copy call; a sync that returned while work queued before it still
# ran waits, in the attribution's replays, for what it waited for) on the serving loop under
# nsys, in two shapes no nsys pair had:
#   serve_eager_async_nsys_il: eager decode, async side-stream readback, the pad on the host;
#   serve_graph_drain_nsys_il: CUDA graph, drain-worker readback, the pad on the host.
# Every subset of launch toll + copies, 4 interleaved rounds of capture ranges, round 0's
# baseline and treatment ranges shipped, truths pooled. One device call. Writes $OUT/v23_part_*
# + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-520}
W=/tmp/v23h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v23.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
NV="--mechanisms launch,copy --all-subsets --rounds 4 --steps 10 --warmup 3"
KEEP=3 nsys_pair serve_graph_drain_nsys_il 200 serving --kw mode=graph --kw readback=drain $NV
KEEP=3 nsys_pair serve_eager_async_nsys_il 260 serving --kw mode=eager --kw readback=async $NV
nsys_rounds serve_graph_drain_nsys_il serve_eager_async_nsys_il
pack_out v23
t done
