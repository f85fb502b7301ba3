#!/usr/bin/env bash
# v27: a twenty-fifth held-out set (HELD-OUT-25, validation/SPLIT.md, declared before this
# capture). It judges the engine of its declaration (45e741e's attribution) on two models new to
# the matrix, every pair shipping every round's timed steps (HELD-OUT-24's protocol):
#   hf_generate_codegen(_after): HF generate() on CodeGen (fused QKV split over shards, partial
#                                rotary, attention and MLP in parallel), the toll spun before /
#                                after each launch, 3 rounds of 6 timed steps, all 18 shipped.
#   tv_eval_squeezenet:          SqueezeNet 1.1 inference, pinned DataLoader, blocking .cpu()
#                                readback every batch, the toll before each launch, the copy
#                                costs on the host, every subset, 3 rounds of 10 timed steps.
# One device call. Writes $OUT/v27_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-400}
W=/tmp/v27h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v27.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import transformers, torch, torchvision; print(transformers.__version__, torch.__version__, torchvision.__version__)"
GEN="hf_generate --kw arch=codegen --mechanisms launch --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes"
job hf_generate_codegen 90 X=1 -- $GEN
job hf_generate_codegen_after 90 CCDIAG_EMU_TOLL_AT=after -- $GEN
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
SQ="tv_eval --kw model=squeezenet1_1 --kw workers=12 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes"
job tv_eval_squeezenet 200 X=1 -- $SQ $SHIP_ALL
pack_out v27
t done
