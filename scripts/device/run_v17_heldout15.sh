#!/usr/bin/env bash
# v17: a fifteenth held-out set (HELD-OUT-15, validation/SPLIT.md, declared before this capture).
# It judges the engine of a9dd964 (first committed as 92522fa, a commit that never landed) (the toll's side effect claimed however small; cpu_ops that
# grew between tolled launches no veto where the gaps beside no explaining call did not grow) on
# two model families new to the matrix:
#   PART=a: HF generate() on OLMo (LayerNorm without parameters) with a waking CPU neighbour of
#           a new shape (nice 3, busy 3 ms of every 4): run_v8_heldout6.sh's protocol (Kineto
#           single session with every subset; nsys toll alone, and toll + neighbour with every
#           subset, 6 interleaved rounds each) and a Kineto pair with the toll spun after each
#           launch (AFTER=1).
#   PART=b: HF generate() on Cohere (attention and MLP in parallel, scaled logits): the toll
#           spun before each launch and after it (Kineto), and before it under nsys (6
#           interleaved rounds): run_v13_heldout11.sh's PART=b.
# Two device calls (PART=a, then PART=b). Writes $OUT/v17{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
PART=${PART:-a}
if [ "$PART" = a ]; then
  ARCH=olmo CCDIAG_EMU_CPU_NICE=3 CCDIAG_EMU_CPU_DUTY=3/4 SET=v17a KBUDGET=200 DEADLINE=560 \
    AFTER=1 exec bash scripts/device/run_v8_heldout6.sh
fi
ARCH=cohere PREFIX=hf_generate_cohere SET=v17b DEADLINE=300 PART=b \
  exec bash scripts/device/run_v13_heldout11.sh
