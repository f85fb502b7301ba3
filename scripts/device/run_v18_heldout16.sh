#!/usr/bin/env bash
# v18: a sixteenth held-out set (HELD-OUT-16, validation/SPLIT.md, declared before this capture).
# It judges the engine unchanged since HELD-OUT-15's judgement (the commits since changed only
# how reports are printed) on two model families new to the matrix, with run_v13_heldout11.sh's
# PART=b protocol (the toll spun before each launch and after it under Kineto, and before it
# under nsys over 6 interleaved rounds):
#   HF generate() on Qwen3 (RMSNorm on each head's queries and keys), then on Granite
#   (muP-style multipliers on embeddings, residuals, attention and logits).
# One device call. Writes $OUT/v18{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
ARCH=qwen3 PREFIX=hf_generate_qwen3 SET=v18a DEADLINE=280 PART=b \
  bash scripts/device/run_v13_heldout11.sh
ARCH=granite PREFIX=hf_generate_granite SET=v18b DEADLINE=280 PART=b \
  bash scripts/device/run_v13_heldout11.sh
