#!/usr/bin/env bash
# Check ccdiag's Nsight Systems readers against Nsight Systems itself, on real reports.
#
#   bash scripts/nsys_rep_check.sh record DIR [REPORT.nsys-rep ...]   # on the GPU machine
#   bash scripts/nsys_rep_check.sh compare DIR                        # where ccdiag is installed
#   bash scripts/nsys_rep_check.sh all DIR [REPORT.nsys-rep ...]      # both, on one machine
#
# record (needs nsys; torch to record a workload; NOT ccdiag's dependencies):
#   - without REPORTs, profiles a small PyTorch workload twice into DIR: run.nsys-rep (CUDA graphs
#     traced whole, unified-memory page faults on) and run_node.nsys-rep (graphs traced node by
#     node). The workload: 10 NVTX-ranged steps of eager kernels, a pageable H2D copy, a pinned
#     non_blocking D2H copy, a CUDA graph replay and a stream sync; then managed memory (CuPy)
#     touched by the GPU, the CPU and the GPU again, and a memset. REPORTs given are copied in.
#   - converts each report exactly as ccdiag does: parsers/_nsys_export.py, ccdiag's own export
#     code (stdlib only), running the real `nsys export`; the export lands next to the report;
#   - writes nsys's own view of the same run: `nsys stats` CSV reports cuda_api_trace,
#     cuda_gpu_trace, cuda_api_sum, cuda_gpu_kern_sum as DIR/<report>_*.csv.gz, and
#     DIR/nsys_version.txt.
# compare (needs ccdiag): python scripts/nsys_rep_check.py DIR - for every report, ccdiag's reading
#   of the .nsys-rep (the real conversion when nsys is here too) and of its SQLite export vs its
#   reading of the nsys stats CSVs vs nsys's own sums; prints PASS/FAIL lines, exits 1 on a FAIL.
#
# nsys is $NSYS, else `nsys` on PATH, else the copy inside Nsight Compute under /opt/nvidia; when
# .debs/ holds libdw1 and libelf1 they are unpacked for its importer (../shared/tools/NSYS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: nsys_rep_check.sh record|compare|all DIR [REPORT ...]}
DIR=${2:?usage: nsys_rep_check.sh record|compare|all DIR [REPORT ...]}
shift 2
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

find_nsys() {
  if [ -n "${NSYS:-}" ]; then echo "$NSYS"; return; fi
  if command -v nsys >/dev/null 2>&1; then command -v nsys; return; fi
  find /opt/nvidia -name nsys -type f -path '*target-linux-x64*' 2>/dev/null | head -1
}

workload() {
  # the workload that recorded tests/data/h200_nsys/ (kept with those fixtures)
  cp "$(dirname "${BASH_SOURCE[0]}")/../tests/data/h200_nsys/workload.py" "$DIR/workload.py"
}

record() {
  local nsys; nsys=$(find_nsys)
  if [ -z "$nsys" ]; then echo "no nsys found (set NSYS=/path/to/nsys)" >&2; exit 2; fi
  if ls .debs/libdw1_*.deb >/dev/null 2>&1; then
    mkdir -p /tmp/ccdiag_dw && for f in .debs/*.deb; do dpkg -x "$f" /tmp/ccdiag_dw; done
    export LD_LIBRARY_PATH=/tmp/ccdiag_dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  fi
  export NSYS=$nsys
  "$nsys" --version | tee "$DIR/nsys_version.txt"
  if [ $# -eq 0 ]; then
    workload
    local common=(-t cuda,nvtx,osrt -s none --cpuctxsw=none --force-overwrite true)
    echo "== profile run (graphs whole, UVM page faults)"
    "$nsys" profile "${common[@]}" --cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true \
      -o "$DIR/run" python3 "$DIR/workload.py" \
      || "$nsys" profile "${common[@]}" -o "$DIR/run" python3 "$DIR/workload.py"
    echo "== profile run_node (graphs node by node)"
    "$nsys" profile "${common[@]}" --cuda-graph-trace=node -o "$DIR/run_node" \
      python3 "$DIR/workload.py" || echo "FAILED: node-mode profile"
  else
    for rep in "$@"; do cp "$rep" "$DIR/"; done
  fi
  for rep in "$DIR"/*.nsys-rep; do
    local stem=${rep%.nsys-rep}
    echo "== export $(basename "$rep") with ccdiag's export code"
    local sqlite; sqlite=$(python3 parsers/_nsys_export.py "$rep")
    echo "   -> $(basename "$sqlite")"
    echo "== nsys stats"
    local reports=cuda_api_trace,cuda_gpu_trace,cuda_api_sum,cuda_gpu_kern_sum
    "$nsys" stats -r "$reports" -f csv --force-overwrite true -o "$stem" "$sqlite" \
      || "$nsys" stats -r "$reports" -f csv -o "$stem" "$sqlite" \
      || echo "FAILED: nsys stats on $sqlite"
    gzip -f "$stem"_cuda_*.csv 2>/dev/null || true
  done
  ls -la "$DIR"
}

case "$MODE" in
  record) record "$@" ;;
  compare) python3 scripts/nsys_rep_check.py "$DIR" ;;
  all) record "$@"; python3 scripts/nsys_rep_check.py "$DIR" ;;
  *) echo "usage: nsys_rep_check.sh record|compare|all DIR [REPORT ...]" >&2; exit 2 ;;
esac
