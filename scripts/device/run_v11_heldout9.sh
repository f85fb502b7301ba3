#!/usr/bin/env bash
# v11: a ninth held-out set (HELD-OUT-9, validation/SPLIT.md, declared before this capture): the
# lost-time-slices claim and its LOST_SHARE veto on workloads other than HF generate(): a
# vLLM-style eager serving loop with async readback (a steady CPU neighbour at nice 5) and HF BERT
# training with a pinned DataLoader (a neighbour at nice 10), each with the launch toll, the
# neighbour, and both in one Kineto session (every subset); the serving loop also under nsys with
# 6 interleaved rounds of every phase's range. One device call; writes $OUT/v11_* (15 MB parts)
# and a log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-540}
SET=v11
W=/tmp/${SET}h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_${SET}.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
R="--rounds 3 --block-steps 10 --warmup 5 --no-record-shapes --ship-steps 10"
SHIP="--ship baseline,treatment,only_launch,only_cpu"
job serve_eager_nb 120 CCDIAG_EMU_CPU_NICE=5 -- serving --kw mode=eager --kw readback=async \
  --mechanisms launch,cpu --all-subsets $R $SHIP
job hf_bert_train_nb 200 CCDIAG_EMU_CPU_NICE=10 -- hf_bert_train --mechanisms launch,cpu \
  --all-subsets $R $SHIP
export CCDIAG_EMU_CPU_NICE=5
KEEP=5 nsys_pair serve_eager_nb_nsys_il 130 serving --kw mode=eager --kw readback=async \
  --rounds 6 --steps 10 --warmup 3 --mechanisms launch,cpu
nsys_rounds serve_eager_nb_nsys_il
pack_out $SET
t done
