#!/usr/bin/env bash
# Noise probe: does the profiled eager decode slow down whenever the emulator is active?
set -uo pipefail
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1
P="python3 -m ccdiag.emulate.pairs decode --kw mode=eager --mechanisms copy --phases baseline,only_copy_pad,only_copy_sync --rounds 5 --steps 15 --warmup 3"
echo "== record_shapes";    timeout 200 $P --out /tmp/np1 | grep PHASES
echo "== no record_shapes"; timeout 200 $P --out /tmp/np2 --no-record-shapes | grep PHASES
echo "== no profiler";      timeout 200 $P --out /tmp/np3 --backend none | grep PHASES
