#!/usr/bin/env bash
# v7: a fifth held-out set (HELD-OUT-5, validation/SPLIT.md, declared before this capture): HF
# generate() under nsys with a truth from interleaved ranges. validation/nsys_rounds_probe/ showed
# that one capture range per phase holds the range's mode (GPT-2 per-round deltas -9.6 to +9.7 ms
# for a 6.76 ms toll), so each workload runs 4 rounds of a baseline and a treatment range (round 0
# baseline first, later rounds shuffled); the truth pools every round, round 0's two ranges are
# exported as the pair (the other ranges are deleted unexported). One device call. Writes
# $OUT/il.tar.gz + log. Assemble with validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-420}
W=/tmp/v7h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v7_heldout5.txt") 2>&1
t start; nsys_setup
nsys_il() {  # NAME BUDGET ARCH
  local name=$1 budget=$2 arch=$3
  local left=$((DEADLINE - (SECONDS - START)))
  if [ -z "$NSYS" ] || [ $left -lt $budget ]; then echo "SKIPPED $name (${left}s left)"; echo "$name" >> $W/SKIPPED; return; fi
  t "$name (nsys, 4 rounds): $arch"
  mkdir -p $W/$name/rep
  timeout $budget $NSYS profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi \
    --capture-range-end=repeat --force-overwrite true -o $W/$name/rep/pair \
    $P hf_generate --kw arch=$arch --mechanisms launch --phases baseline,treatment --rounds 4 --steps 8 --warmup 3 \
    --backend nsys --out $W/$name > $W/$name/run.log 2>&1 || echo "FAILED $name (nsys rc=$?)" | tee -a $W/FAILED
  for rep in $W/$name/rep/pair.*.nsys-rep; do
    n=$(basename $rep .nsys-rep); n=${n#pair.}
    if [ "$n" -gt 3 ]; then rm -f $rep; continue; fi
    timeout 60 $NSYS export --type sqlite --force-overwrite true -o ${rep%.nsys-rep}.sqlite $rep > /dev/null 2>&1 || echo "FAILED export $rep"
    python3 -c "import sys; from ccdiag.profiling import scrub_nsys_sqlite as s; s(sys.argv[1])" ${rep%.nsys-rep}.sqlite
    rm -f $rep
  done
  python3 -c "
import json; g = json.load(open('$W/$name/timing_nsys.json')); r = g['step_ns_median_per_round']
print('$name per-round delta ms', [round((y - x) / 1e6, 2) for x, y in zip(r['baseline'], r['treatment'])])"
  ls -la $W/$name/rep
}
nsys_il hf_generate_gpt2_nsys_il 100 gpt2
nsys_il hf_generate_t5_nsys_il 110 t5
nsys_il hf_generate_llama_nsys_il 100 llama
nsys_il hf_generate_neox_nsys_il 100 gpt_neox
t pack; cat $W/FAILED $W/SKIPPED 2>/dev/null
find $W -name '*.nsys-rep' -delete
tar -C $W -czf $OUT/il.tar.gz . ; ls -la $OUT
t done
