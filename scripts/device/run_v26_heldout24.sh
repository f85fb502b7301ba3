#!/usr/bin/env bash
# v26: a twenty-fourth held-out set (HELD-OUT-24, validation/SPLIT.md, declared before this
# capture). It judges the engine of 381942a (behaviour unchanged since; 022fece and 207dbc6 change
# no number) on a torchvision model new to the matrix, and it is the first set whose shipped pairs
# hold EVERY timed step of every round (no --ship-steps), so that ccdiag reads the steps the truth
# pools (the "shipped round vs pooled truth" class of HELD-OUT-21/-22):
#   tv_train_mnasnet: MNASNet-0.5 training, pinned DataLoader (8 workers), non_blocking H2D, the
#                     toll before each launch, the copy costs on the host, every subset of launch
#                     + copies in one Kineto session, 3 rounds of 10 timed steps a phase.
# One device call (after run_v25_heldout23.sh in the same call). Writes $OUT/v26_part_* + log.
# Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-230}
W=/tmp/v26h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v26.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
MN="tv_train --kw model=mnasnet0_5 --kw workers=8 --kw batch=128 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_train_mnasnet 210 X=1 -- $MN $SHIP_ALL
pack_out v26
t done
