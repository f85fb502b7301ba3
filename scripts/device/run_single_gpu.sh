#!/usr/bin/env bash
# Runs on the GPU machine (repo root): single-GPU sample pairs, nsys pair, timing runs.
# Writes $OUT/single.tar.gz and $OUT/log_single.txt. Needs: python3 with torch, a C compiler,
# optionally .debs/libdw1+libelf1 for the bundled nsys (see ../shared/tools/NSYS.md).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ccdiag_work; rm -rf "$W"; mkdir -p "$W"
exec > >(tee -a "$OUT/log_single.txt") 2>&1
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1
t() { echo "=== $(date +%T) $*"; }
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.device_count())'
nproc
PAIRS="python3 -m ccdiag.emulate.pairs"
LAYER=auto
t smoke; if ! timeout 120 $PAIRS decode --out $W/smoke --backend none --steps 3 --warmup 1 --rounds 1 --mechanisms launch,copy; then
  echo "SMOKE FAILED with layer auto; falling back to runtime"; LAYER=runtime; fi
cat $W/smoke/timing_none.json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print("shim_calls", d["shim_calls"])' || true
run() { t "$@"; timeout 240 $PAIRS "$@" --layer $LAYER || echo "FAILED: $*"; }
R=${ROUNDS:-3}
run decode --out $W/decode_eager --kw mode=eager --mechanisms launch,copy --host-only-treatment --rounds $R
run decode --out $W/decode_graph --kw mode=graph --mechanisms launch,copy --rounds $R
run kv_offload --out $W/kv_offload --mechanisms copy --rounds $R
run async_readback --out $W/async_readback --mechanisms copy --rounds $R
[ -n "${ONLY_SAMPLES:-}" ] && { tar -C $W -czf $OUT/single.tar.gz --exclude='smoke' . ; exit 0; }
# B200 ratios without any profiler (issue 3): eager and graph decode, launch+copy
run decode --out $W/timing_eager --kw mode=eager --mechanisms launch,copy --backend none --steps 50 --rounds 3
run decode --out $W/timing_graph --kw mode=graph --mechanisms launch,copy --backend none --steps 50 --rounds 3
# Nsight Systems pair
NSYS=$(find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1)
if [ -n "$NSYS" ] && ls .debs/*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/dw && for f in .debs/*.deb; do dpkg -x $f /tmp/dw; done
  export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  N="$NSYS profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --force-overwrite true"
  mkdir -p $W/decode_eager_nsys
  # one process, two capture ranges (baseline, then emulated CC): one report per range
  t nsys; timeout 240 $N --capture-range-end=repeat -o $W/decode_eager_nsys/pair $PAIRS decode --out $W/decode_eager_nsys/meta \
      --kw mode=eager --mechanisms launch,copy --backend nsys --phases baseline,treatment --rounds 1 --steps 15 --layer $LAYER || echo "FAILED nsys"
  ls -la $W/decode_eager_nsys
  for rep in $W/decode_eager_nsys/*.nsys-rep; do
    t export $rep; timeout 120 $NSYS export --type sqlite --force-overwrite true -o ${rep%.nsys-rep}.sqlite $rep || echo "FAILED export $rep"
  done
  $NSYS --version
else echo "no nsys ($NSYS) or no .debs"; fi
t pack; ls -laR $W | head -80
tar -C $W -czf $OUT/single.tar.gz --exclude='smoke' . ; ls -la $OUT
t done
