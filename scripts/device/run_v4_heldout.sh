#!/usr/bin/env bash
# v4: a second held-out set (HELD-OUT-2, validation/SPLIT.md, declared before this capture): a
# workload family never analyzed before (torchvision MobileNetV3 inference with a pinned
# DataLoader and a blocking .cpu() readback every batch, tv_eval) and Hugging Face generate() on
# GPT-2 (Kineto and nsys), with the toll in the gap before and after the call. Same protocol as
# run_v3_truth.sh (single session, every subset of the mechanisms, interleaved blocks).
# Writes $OUT/v4_heldout.tar.gz + log. Assemble with validation/make_pairs.py --raw DIR.
source scripts/device/_v3_env.sh
W=/tmp/v4h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v4_heldout.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
R="--rounds 8 --block-steps 10 --warmup 5"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
EV="tv_eval --kw workers=12 --kw batch=64 --mechanisms launch,copy --all-subsets $R --no-record-shapes --ship-steps 10"
G2="hf_generate --kw arch=gpt2 --mechanisms launch --rounds 8 --block-steps 6 --warmup 3 --no-record-shapes --ship-steps 6"
job tv_eval 130 X=1 -- $EV $SHIP_ALL
job hf_generate_gpt2 110 X=1 -- $G2
nsys_pair hf_generate_gpt2_nsys 140 hf_generate --kw arch=gpt2 --mechanisms launch --phases baseline,treatment --rounds 1 --steps 12 --warmup 3
job tv_eval_after 120 CCDIAG_EMU_TOLL_AT=after -- $EV
job tv_eval_nostep 120 X=1 -- $EV --strip-step-markers
t pack; ls $W; cat $W/FAILED $W/SKIPPED 2>/dev/null
find $W -name '*.nsys-rep' -delete
tar -C $W -czf $OUT/v4_heldout.tar.gz . ; ls -la $OUT
t done
