# Sourced by run_v3_*.sh (repo root, on the GPU machine). Environment, nsys set-up, job helper.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD CCDIAG_CACHE=/tmp/ccd PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
START=$SECONDS
DEADLINE=${DEADLINE:-540}   # seconds after start: no job starts later than DEADLINE - its budget
t() { echo "=== +$((SECONDS - START))s $(date +%T) $*"; }
P="python3 -m ccdiag.emulate.pairs"
# job NAME BUDGET_S ENV... -- ARGS...: run one pairs.py process with `timeout BUDGET`, skipped when
# the deadline would be passed; its output folder is $W/NAME.
job() {
  local name=$1 budget=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local left=$((DEADLINE - (SECONDS - START)))
  if [ $left -lt $budget ]; then echo "SKIPPED $name (budget ${budget}s, ${left}s left)"; echo "$name" >> $W/SKIPPED; return; fi
  t "$name: ${envs[*]} $*"
  local t0=$SECONDS
  env "${envs[@]}" timeout $budget $P "$@" --out $W/$name > $W/$name.log 2>&1
  local rc=$?
  tail -4 $W/$name.log | grep -v '^USDT\|^STAGE\|^WARNING' | cut -c1-300
  echo "rc=$rc ${name} $((SECONDS - t0))s"
  [ $rc -eq 0 ] || echo "FAILED $name rc=$rc" | tee -a $W/FAILED
  mkdir -p $W/$name && mv $W/$name.log $W/$name/run.log
}
nsys_setup() {
  NSYS=$(find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1)
  if [ -n "$NSYS" ] && ls .debs/*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/dw && for f in .debs/*.deb; do dpkg -x $f /tmp/dw; done
    export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
    echo "nsys: $NSYS $($NSYS --version 2>&1 | head -1)"
  else NSYS=""; echo "no nsys ($NSYS) or no .debs"; fi
}
# nsys_pair NAME BUDGET ARGS...: baseline and treatment capture ranges of one process under nsys,
# each exported to SQLite (the .nsys-rep files stay behind: they embed the environment). With
# KEEP=N set, only ranges pair.1..N are exported (interleaved rounds: round 0's), the rest deleted.
nsys_pair() {
  local name=$1 budget=$2; shift 2
  local left=$((DEADLINE - (SECONDS - START)))
  if [ -z "$NSYS" ] || [ $left -lt $budget ]; then echo "SKIPPED $name (nsys='$NSYS', ${left}s left)"; echo "$name" >> $W/SKIPPED; return; fi
  t "$name (nsys): $*"
  mkdir -p $W/$name/rep
  timeout $budget $NSYS profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi \
    --capture-range-end=repeat --force-overwrite true -o $W/$name/rep/pair \
    $P "$@" --backend nsys --out $W/$name > $W/$name/run.log 2>&1 || echo "FAILED $name (nsys rc=$?)" | tee -a $W/FAILED
  tail -3 $W/$name/run.log | cut -c1-300
  for rep in $W/$name/rep/*.nsys-rep; do
    [ -e "$rep" ] || continue
    local n=$(basename $rep .nsys-rep); n=${n#pair.}
    if [ -n "${KEEP:-}" ] && [ "$n" -gt "$KEEP" ]; then rm -f $rep; continue; fi
    timeout 120 $NSYS export --type sqlite --force-overwrite true -o ${rep%.nsys-rep}.sqlite $rep > /dev/null 2>&1 || echo "FAILED export $rep"
    python3 -c "import sys; from ccdiag.profiling import scrub_nsys_sqlite as s; print('scrubbed', s(sys.argv[1]))" ${rep%.nsys-rep}.sqlite
    rm -f $rep
  done
  ls -la $W/$name/rep
}
# nsys_rounds NAME...: each interleaved nsys pair's per-round step deltas against the baseline's
# ranges (timing_nsys.json) and its pooled delta and Shapley values, printed for the log.
nsys_rounds() {
  local n
  for n in "$@"; do
    python3 - "$W/$n/timing_nsys.json" "$n" <<'PY' || echo "no timing for $n"
import json, sys
g = json.load(open(sys.argv[1])); r = g["step_ns_median_per_round"]
d = {p: [round((y - x) / 1e6, 3) for x, y in zip(r["baseline"], v)] for p, v in r.items() if p != "baseline"}
print(sys.argv[2], "per-round delta ms vs baseline", d)
print("  delta", g["delta_ns_per_step"], "shapley", g.get("shapley_ns_per_step"))
PY
  done
}
# pack_out SET: $W without its .nsys-rep files (they embed the environment), as 15 MB parts
# $OUT/SET_part_* (the device returns files of at most 16 MiB; a 61 MB archive did not come back).
# Reassemble with: cat SET_part_* | tar -xzf -
pack_out() {
  t pack; cat $W/FAILED $W/SKIPPED 2>/dev/null
  find $W -name '*.nsys-rep' -delete
  tar -C $W -czf /tmp/$1.tgz . && split -b 15M /tmp/$1.tgz $OUT/$1_part_
  ls -la $OUT
}
