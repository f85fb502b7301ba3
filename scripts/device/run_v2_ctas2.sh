#!/usr/bin/env bash
# The two 2-CTA DDP pairs (bucket_cap_mb 25 and 200) in the single-session protocol of
# run_v2.sh (all phases in one profiler session, interleaved blocks), replacing the earlier
# per-phase-session captures. Runs on a 2-GPU machine; writes $OUT/v2c.tar.gz.
# Assemble: python scripts/assemble_samples.py --multi DIR --multi-suffix _ctas2 --out sample_traces
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ccdiag_v2c; rm -rf "$W"; mkdir -p "$W"
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CCDIAG_EMU_MAX_CTAS=2
TR="python3 -m torch.distributed.run --standalone --nproc_per_node 2 -m ccdiag.emulate.pairs"
runm() { echo "=== $(date +%T) $*"; timeout 250 $TR "$@" || echo "FAILED: $*"; }
runm ddp --out $W/ddp_2gpu --mechanisms launch,copy,collective --rounds ${ROUNDS:-3} --block-steps 8 --warmup 4 --kw bucket_cap_mb=25
runm ddp --out $W/ddp_2gpu_bucket200 --mechanisms launch,copy,collective --rounds ${ROUNDS:-3} --block-steps 8 --warmup 4 --kw bucket_cap_mb=200
tar -C $W -czf $OUT/v2c.tar.gz . ; ls -la $OUT; echo "=== $(date +%T) done"
