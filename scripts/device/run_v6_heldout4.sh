#!/usr/bin/env bash
# v6: a fourth held-out set (HELD-OUT-4, validation/SPLIT.md, declared before this capture): HF
# generate() on GPT-NeoX (Pythia-style: parallel residual, partial rotary, fused QKV), a decoder
# family new to the matrix, under Kineto with the toll before and after the call and under nsys.
# Same protocol as run_v5_heldout3.sh's T5 part (single session, interleaved blocks). One device
# call. Writes $OUT/neox.tar.gz + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-420}
W=/tmp/v6h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v6_heldout4.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import transformers, torch; print(transformers.__version__, torch.__version__)"
nsys_setup
NX="hf_generate --kw arch=gpt_neox --mechanisms launch --rounds 8 --block-steps 6 --warmup 3 --no-record-shapes --ship-steps 6"
job hf_generate_neox 110 X=1 -- $NX
nsys_pair hf_generate_neox_nsys 130 hf_generate --kw arch=gpt_neox --mechanisms launch --phases baseline,treatment --rounds 1 --steps 12 --warmup 3
job hf_generate_neox_after 110 CCDIAG_EMU_TOLL_AT=after -- $NX
t pack; ls $W; cat $W/FAILED $W/SKIPPED 2>/dev/null
find $W -name '*.nsys-rep' -delete
tar -C $W -czf $OUT/neox.tar.gz . ; ls -la $OUT
t done
