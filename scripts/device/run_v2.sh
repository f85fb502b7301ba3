#!/usr/bin/env bash
# Sample pairs, second protocol: every phase of a sample in ONE profiler session (blocks of steps,
# interleaved), split into baseline/treatment traces afterwards. Runs on a 2-GPU machine.
# Writes $OUT/v2.tar.gz and $OUT/log_v2.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ccdiag_v2; rm -rf "$W"; mkdir -p "$W"
exec > >(tee -a "$OUT/log_v2.txt") 2>&1
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CCDIAG_EMU_MAX_CTAS=${CCDIAG_EMU_MAX_CTAS:-16}
t() { echo "=== $(date +%T) $*"; }
P="python3 -m ccdiag.emulate.pairs"
TR="python3 -m torch.distributed.run --standalone --nproc_per_node 2 -m ccdiag.emulate.pairs"
run() { t "$@"; timeout 240 $P "$@" || echo "FAILED: $*"; }
runm() { t "$@"; timeout 200 $TR "$@" || echo "FAILED: $*"; }
run decode --out $W/decode_eager --kw mode=eager --mechanisms launch,copy --host-only-treatment --rounds 3 --block-steps 10
run decode --out $W/decode_graph --kw mode=graph --mechanisms launch,copy --rounds 3 --block-steps 10
run kv_offload --out $W/kv_offload --mechanisms copy --rounds 3 --block-steps 10
run async_readback --out $W/async_readback --mechanisms copy --rounds 3 --block-steps 10
runm ddp --out $W/ddp_2gpu --mechanisms launch,copy,collective --rounds 3 --block-steps 8 --warmup 4 --kw bucket_cap_mb=25
runm ddp --out $W/ddp_2gpu_bucket200 --mechanisms launch,copy,collective --rounds 3 --block-steps 8 --warmup 4 --kw bucket_cap_mb=200
runm tp_decode --out $W/tp2_decode --mechanisms launch,collective --rounds 3 --block-steps 10
run tp_decode --out $W/tp1_decode --mechanisms launch,collective --rounds 3 --block-steps 10
t pack; ls -la $W/*
tar -C $W -czf $OUT/v2.tar.gz . ; ls -la $OUT
t done
