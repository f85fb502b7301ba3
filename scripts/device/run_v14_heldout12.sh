#!/usr/bin/env bash
# v14: a twelfth held-out set (HELD-OUT-12, validation/SPLIT.md, declared before this capture).
# It judges the engine as it stands (no engine change since HELD-OUT-11's judgement, only speed
# with every report byte-identical) on two model families new to the matrix:
#   PART=a: HF generate() on Phi (partial rotary, attention and MLP in parallel) with a waking CPU
#           neighbour of a new shape (nice 0, busy 2 ms of every 5): run_v8_heldout6.sh's protocol
#           (Kineto single session with every subset; nsys toll alone, and nsys toll + neighbour
#           with every subset, each over 6 interleaved rounds of ranges).
#   PART=b: HF generate() on Falcon (multi-query attention, parallel attention / MLP): the toll
#           spun before each launch and after it (Kineto), and before it under nsys (6 rounds).
# Two device calls (PART=a, then PART=b). Writes $OUT/v14{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only. PART=b is run_v13_heldout11.sh's PART=b on
# Falcon.
PART=${PART:-a}
if [ "$PART" = a ]; then
  ARCH=phi CCDIAG_EMU_CPU_NICE=0 CCDIAG_EMU_CPU_DUTY=2/5 SET=v14a KBUDGET=210 DEADLINE=540 \
    exec bash scripts/device/run_v8_heldout6.sh
fi
ARCH=falcon PREFIX=hf_generate_falcon SET=v14b exec bash scripts/device/run_v13_heldout11.sh
