#!/usr/bin/env bash
# Probe of the nsys truth protocol: is the nsys pairs' delta (one capture range per phase:
# GPT-2 +19.4 ms/step and T5 +43.1 ms against 6.8 and 15.3 ms injected, GPT-NeoX +0.6 ms against
# 8.4 ms) the toll's doing or range-to-range noise of the profiler? The same workloads under nsys
# with 4 interleaved rounds (baseline and treatment ranges shuffled after round 0); each round's
# median step per phase is printed (timing_nsys.json: step_ns_median_per_round). No trace is kept
# and ccdiag analyzes nothing. Writes $OUT/nsys_rounds.json + log.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-480}
W=/tmp/nrp; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_nsys_rounds.txt") 2>&1
t start; nsys_setup
probe() {  # NAME BUDGET ARCH
  local name=$1 budget=$2 arch=$3
  local left=$((DEADLINE - (SECONDS - START)))
  if [ -z "$NSYS" ] || [ $left -lt $budget ]; then echo "SKIPPED $name"; return; fi
  t "$name"
  mkdir -p $W/$name/rep
  timeout $budget $NSYS profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi \
    --capture-range-end=repeat --force-overwrite true -o $W/$name/rep/pair \
    $P hf_generate --kw arch=$arch --mechanisms launch --phases baseline,treatment --rounds 4 --steps 8 --warmup 3 \
    --backend nsys --out $W/$name > $W/$name/run.log 2>&1 || echo "FAILED $name rc=$?"
  rm -rf $W/$name/rep
  python3 - $W/$name/timing_nsys.json $name <<'PY'
import json, sys
g = json.load(open(sys.argv[1])); r = g["step_ns_median_per_round"]
b, t = r["baseline"], r["treatment"]
print(sys.argv[2], "baseline ms", [round(x / 1e6, 2) for x in b], "treatment ms", [round(x / 1e6, 2) for x in t],
      "delta ms", [round((y - x) / 1e6, 2) for x, y in zip(b, t)], "injected ms", round(g["injected_ns_per_step"]["launch_toll"] / 1e6, 2))
PY
}
probe gpt2 150 gpt2
probe neox 150 gpt_neox
probe t5 150 t5
python3 -c "
import json, glob
out = {p.split('/')[-2]: json.load(open(p)) for p in glob.glob('$W/*/timing_nsys.json')}
json.dump(out, open('$OUT/nsys_rounds.json', 'w'), indent=1)"
t done
