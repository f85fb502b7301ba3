#!/usr/bin/env bash
# decode_eager_cpu: the eager decode with the B200 launch toll and a CPU-bound neighbour on the
# main thread's core (ccdiag.emulate.pairs mechanism "cpu", nice ${CCDIAG_EMU_CPU_NICE:-5}): a
# host-code slowdown with known truth for HS01. Single-session protocol of run_v2.sh.
# Writes $OUT/v2cpu.tar.gz. Assemble: python scripts/assemble_samples.py --multi DIR --out sample_traces
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ccdiag_v2cpu; rm -rf "$W"; mkdir -p "$W"
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1 CCDIAG_EMU_CPU_NICE=${CCDIAG_EMU_CPU_NICE:-5}
timeout 300 python3 -m ccdiag.emulate.pairs decode --out $W/decode_eager_cpu --kw mode=eager \
  --mechanisms launch,cpu --rounds 3 --block-steps 10 || echo "FAILED decode_eager_cpu"
tar -C $W -czf $OUT/v2cpu.tar.gz . ; ls -la $OUT
