#!/usr/bin/env bash
# v15: a thirteenth held-out set (HELD-OUT-13, validation/SPLIT.md, declared before this capture).
# It judges two engine changes made on opened sets (the toll's side effect claimed from the
# smallest host-code growth HS01 calls one; a path vouches for the others' gap constants only
# with a gap toll of its own) on two model families new to the matrix:
#   PART=a: HF generate() on Gemma with a waking CPU neighbour (nice 2, busy 1 ms of every 3):
#           run_v8_heldout6.sh's protocol (Kineto single session with every subset; nsys toll
#           alone, and nsys toll + neighbour with every subset, each over 6 interleaved rounds).
#   PART=b: HF generate() on StarCoder2: the toll spun before each launch and after it (Kineto),
#           and before it under nsys (6 interleaved rounds): run_v13_heldout11.sh's PART=b.
# Two device calls (PART=a, then PART=b). Writes $OUT/v15{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
PART=${PART:-a}
if [ "$PART" = a ]; then
  ARCH=gemma CCDIAG_EMU_CPU_NICE=2 CCDIAG_EMU_CPU_DUTY=1/3 SET=v15a KBUDGET=210 DEADLINE=540 \
    exec bash scripts/device/run_v8_heldout6.sh
fi
ARCH=starcoder2 PREFIX=hf_generate_starcoder2 SET=v15b exec bash scripts/device/run_v13_heldout11.sh
