#!/usr/bin/env bash
# v5: a third held-out set (HELD-OUT-3, validation/SPLIT.md, declared before this capture): an
# encoder-decoder generate() (Hugging Face T5: cross-attention, relative position buckets) under
# Kineto and nsys with the toll before and after the call, and a second torchvision training
# family (EfficientNet-B0: SiLU, squeeze-excitation, depthwise convolutions) in steady state, every
# subset of launch + copies. Same protocol as run_v3_truth.sh (single session, interleaved blocks).
# Two device calls, as captured (the whole does not fit one call's 600 s, and $OUT files come back
# at most 16 MiB each): `PART=t5` (the three T5 pairs) and `PART=effnet` (3 rounds: 5 ran past
# the budget, SPLIT.md). Writes $OUT/$PART.tar.gz + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
PART=${PART:?set PART=t5 or PART=effnet}
DEADLINE=${DEADLINE:-560}
W=/tmp/v5h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v5_heldout3.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import transformers, torch, torchvision; print(transformers.__version__, torch.__version__, torchvision.__version__)"
nsys_setup
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
T5="hf_generate --kw arch=t5 --mechanisms launch --rounds 8 --block-steps 6 --warmup 3 --no-record-shapes --ship-steps 6"
EN="tv_train --kw model=efficientnet_b0 --kw workers=12 --kw batch=128 --mechanisms launch,copy --all-subsets --rounds 3 --block-steps 10 --settle-steps 10 --warmup 5 --no-record-shapes --ship-steps 10"
if [ "$PART" = t5 ]; then
  job hf_generate_t5 110 X=1 -- $T5
  nsys_pair hf_generate_t5_nsys 130 hf_generate --kw arch=t5 --mechanisms launch --phases baseline,treatment --rounds 1 --steps 12 --warmup 3
  job hf_generate_t5_after 110 CCDIAG_EMU_TOLL_AT=after -- $T5
else
  job tv_train_effnet 330 X=1 -- $EN $SHIP_ALL
fi
t pack; ls $W; cat $W/FAILED $W/SKIPPED 2>/dev/null
find $W -name '*.nsys-rep' -delete
tar -C $W -czf $OUT/$PART.tar.gz . ; ls -la $OUT
t done
