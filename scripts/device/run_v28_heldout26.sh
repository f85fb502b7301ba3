#!/usr/bin/env bash
# v28: a twenty-sixth held-out set (HELD-OUT-26, validation/SPLIT.md, declared before this
# capture). It judges the engine of its declaration (host threads that run beside the main
# thread left off its timeline; a path's gap toll bounded by its raw growth where it has too few
# calls to check it across the step) on the serving loop's drain-worker readback, with
# parameters no pair of the matrix had, every pair shipping every round's timed steps:
#   serve_graph_drain_l6_after: CUDA graph, 6 layers, batch 4, 400 us of scheduling work a
#                               step, drain-worker readback, the toll spun after each launch,
#                               the copy costs on the host; every subset, 6 rounds of 10 steps.
#   serve_eager_drain:          eager decode (hundreds of launches a step), drain-worker
#                               readback, the toll spun before each launch, the copy costs on
#                               the host; every subset, 6 rounds of 10 steps.
# One device call. Writes $OUT/v28_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-400}
W=/tmp/v28h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v28.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print(torch.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
SV="--mechanisms launch,copy --all-subsets --rounds 6 --block-steps 10 --warmup 5"
job serve_graph_drain_l6_after 150 CCDIAG_EMU_TOLL_AT=after -- serving --kw mode=graph \
  --kw readback=drain --kw layers=6 --kw batch=4 --kw cpu_us=400 $SV $SHIP_ALL
job serve_eager_drain 200 X=1 -- serving --kw mode=eager --kw readback=drain $SV \
  --no-record-shapes $SHIP_ALL
pack_out v28
t done
