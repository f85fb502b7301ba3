#!/usr/bin/env bash
# v8: a sixth held-out set (HELD-OUT-6, validation/SPLIT.md, declared before this capture): HF
# generate() on OPT (BLOOM if this transformers lacks OPT) with the launch toll, a real host
# slowdown (the CPU neighbour, mechanism cpu) and both; Kineto single session, and nsys with 6
# interleaved rounds of every phase's range (round 0 in order; only round 0's ranges exported).
# It judges the side-effect claim (host-gap growth beside tolled launches is LA01's) where it could
# swallow a genuine host slowdown. One device call. Writes $OUT/${SET}_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
# Later sets reuse it with other values (run_v9_heldout7.sh, run_v10_heldout8.sh): ARCH (default:
# opt, else bloom), CCDIAG_EMU_CPU_NICE (default 5), CCDIAG_EMU_CPU_DUTY (the neighbour's BUSY/PERIOD
# ms; default always busy), PREFIX (default hf_generate_<arch>), SET (default v8), AFTER=1 (last: a
# Kineto toll-only pair with the toll spun after each launch, ${PREFIX}_after), KBUDGET (the
# Kineto session's seconds, default 170).
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-480}
SET=${SET:-v8}
W=/tmp/${SET}h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_${SET}.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ARCH=${ARCH:-$(python3 -c "import transformers as t; print('opt' if hasattr(t, 'OPTForCausalLM') else 'bloom')")}
PREFIX=${PREFIX:-hf_generate_$ARCH}
python3 -c "import transformers, torch; print(transformers.__version__, torch.__version__)"; echo "arch=$ARCH prefix=$PREFIX"
nsys_setup
export CCDIAG_EMU_CPU_NICE=${CCDIAG_EMU_CPU_NICE:-5}; echo "cpu neighbour nice $CCDIAG_EMU_CPU_NICE duty ${CCDIAG_EMU_CPU_DUTY:-always}"
job $PREFIX ${KBUDGET:-170} X=1 -- hf_generate --kw arch=$ARCH --mechanisms launch,cpu --rounds 8 --block-steps 6 \
  --warmup 3 --no-record-shapes --ship-steps 6 --ship baseline,treatment,only_launch,only_cpu
GEN="hf_generate --kw arch=$ARCH --rounds 6 --steps 8 --warmup 3"
KEEP=3 nsys_pair ${PREFIX}_nsys_il 110 $GEN --mechanisms launch --phases baseline,treatment
KEEP=5 nsys_pair ${PREFIX}_cpu_nsys_il 150 $GEN --mechanisms launch,cpu
nsys_rounds ${PREFIX}_nsys_il ${PREFIX}_cpu_nsys_il
if [ "${AFTER:-}" = 1 ]; then
  job ${PREFIX}_after 110 CCDIAG_EMU_TOLL_AT=after -- hf_generate --kw arch=$ARCH --mechanisms launch \
    --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes --ship-steps 6
fi
pack_out $SET
t done
