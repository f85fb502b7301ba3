#!/usr/bin/env bash
# v19: a seventeenth held-out set (HELD-OUT-17, validation/SPLIT.md, declared before this
# capture; it replaces HELD-OUT-16, declared with the engine before and never captured). It
# judges the engine of 2026-12-05 morning (PyTorch's own attention kernels are runtime launches,
# not a math library's; HS01 reads the step's parts against their own estimator and takes no
# more of a gap than it grew beyond the tolled calls' constants) on two model families new to
# the matrix:
#   PART=a: HF generate() on Granite (muP-style multipliers on embeddings, residuals, attention
#           and logits) with a waking CPU neighbour of a new shape (nice 1, busy 2 ms of every
#           5): run_v8_heldout6.sh's protocol (Kineto single session with every subset; nsys
#           toll alone, and toll + neighbour with every subset, 6 interleaved rounds each) and a
#           Kineto pair with the toll spun after each launch (AFTER=1).
#   PART=b: HF generate() on Qwen3 (RMSNorm on each head's queries and keys): the toll spun
#           before each launch and after it (Kineto), and before it under nsys (6 interleaved
#           rounds): run_v13_heldout11.sh's PART=b.
# Two device calls (PART=a, then PART=b). Writes $OUT/v19{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
PART=${PART:-a}
if [ "$PART" = a ]; then
  ARCH=granite CCDIAG_EMU_CPU_NICE=1 CCDIAG_EMU_CPU_DUTY=2/5 SET=v19a KBUDGET=200 DEADLINE=560 \
    AFTER=1 exec bash scripts/device/run_v8_heldout6.sh
fi
ARCH=qwen3 PREFIX=hf_generate_qwen3 SET=v19b DEADLINE=300 PART=b \
  exec bash scripts/device/run_v13_heldout11.sh
