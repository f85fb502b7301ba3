#!/usr/bin/env bash
# v10: an eighth held-out set (HELD-OUT-8, validation/SPLIT.md, declared before this capture):
# run_v8_heldout6.sh's protocol on HF GPT-J (a model family new to the matrix) with a CPU
# neighbour of another shape (nice 0, busy 1 ms of every 4 ms: a waking sleeper that preempts the
# main thread, not a steady spinner), plus a Kineto toll-only pair with the toll spun after each
# launch. It judges the lost-time-slices claim (HS01) and the gap model without bursts.
ARCH=gptj CCDIAG_EMU_CPU_NICE=0 CCDIAG_EMU_CPU_DUTY=1/4 SET=v10 AFTER=1 DEADLINE=560 \
  exec bash scripts/device/run_v8_heldout6.sh
