#!/usr/bin/env bash
# v9: a seventh held-out set (HELD-OUT-7, validation/SPLIT.md, declared before this capture):
# run_v8_heldout6.sh's protocol on HF BLOOM with a milder CPU neighbour (nice 10), to judge the
# changes made on HELD-OUT-6 after its judgement (net growth, bursty growth not the toll's).
ARCH=bloom CCDIAG_EMU_CPU_NICE=10 SET=v9 exec bash scripts/device/run_v8_heldout6.sh
