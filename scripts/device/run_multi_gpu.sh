#!/usr/bin/env bash
# Runs on a 2-GPU machine (repo root): collective calibration, DDP pair, TP1 vs TP2, DDP buckets.
# Writes $OUT/multi.tar.gz and $OUT/log_multi.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ccdiag_multi; rm -rf "$W"; mkdir -p "$W"
exec > >(tee -a "$OUT/log_multi.txt") 2>&1
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t() { echo "=== $(date +%T) $*"; }
LAYER=${LAYER:-auto}
TR="python3 -m torch.distributed.run --standalone --nproc_per_node 2"
if [ -z "${SKIP_CALIBRATION:-}" ]; then t calibrate; timeout 180 $TR -m ccdiag.emulate.calibrate --platform b200 | tee $W/calibration.txt; fi
CTAS=$(grep -o '"chosen_max_ctas": [0-9]*' $W/calibration.txt | head -1 | grep -o '[0-9]*$')
export CCDIAG_EMU_MAX_CTAS=${CTAS:-${CCDIAG_EMU_MAX_CTAS:-2}}; echo "using max_ctas=$CCDIAG_EMU_MAX_CTAS"
runm() { t "$@"; timeout ${RUN_TIMEOUT:-300} $TR -m ccdiag.emulate.pairs "$@" --layer $LAYER || echo "FAILED: $*"; }
runm ddp --out $W/ddp_2gpu --mechanisms launch,copy,collective --steps 12 --warmup 4 --kw bucket_cap_mb=25
runm ddp --out $W/ddp_2gpu_bucket200 --mechanisms launch,copy,collective --steps 12 --warmup 4 --kw bucket_cap_mb=200
if [ -z "${SKIP_TP:-}" ]; then
runm tp_decode --out $W/tp2_decode --mechanisms launch,collective --steps 20 --warmup 5
t tp1; timeout 240 python3 -m ccdiag.emulate.pairs tp_decode --out $W/tp1_decode --mechanisms launch,collective --steps 20 --warmup 5 --layer $LAYER || echo "FAILED tp1"
fi
t pack; ls -laR $W | head -60
tar -C $W -czf $OUT/multi.tar.gz . ; ls -la $OUT
t done
