#!/usr/bin/env bash
# The multi-GPU part of run_v2.sh alone (DDP at two bucket sizes, TP2). The *_ctas2 pairs:
#   CCDIAG_EMU_MAX_CTAS=2 SKIP_TP=1 bash scripts/device/run_v2_multi.sh
# then python scripts/assemble_samples.py --multi DIR --multi-suffix _ctas2 --out sample_traces
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ccdiag_v2m; rm -rf "$W"; mkdir -p "$W"
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CCDIAG_EMU_MAX_CTAS=${CCDIAG_EMU_MAX_CTAS:-16}
TR="python3 -m torch.distributed.run --standalone --nproc_per_node 2 -m ccdiag.emulate.pairs"
runm() { echo "=== $(date +%T) $*"; timeout ${RUN_TIMEOUT:-150} $TR "$@" || echo "FAILED: $*"; }
runm ddp --out $W/ddp_2gpu --mechanisms launch,copy,collective --rounds 3 --block-steps 8 --warmup 4 --kw bucket_cap_mb=25
runm ddp --out $W/ddp_2gpu_bucket200 --mechanisms launch,copy,collective --rounds 3 --block-steps 8 --warmup 4 --kw bucket_cap_mb=200
[ -n "${SKIP_TP:-}" ] || runm tp_decode --out $W/tp2_decode --mechanisms launch,collective --rounds 3 --block-steps 10
tar -C $W -czf $OUT/v2m.tar.gz . ; ls -la $OUT
