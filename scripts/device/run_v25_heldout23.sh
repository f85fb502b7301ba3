#!/usr/bin/env bash
# v25: a twenty-third held-out set (HELD-OUT-23, validation/SPLIT.md, declared before this
# capture). It judges the engine of 2026-12-06 night (f5fb43e's attribution; the refactors after
# it change no number) on a model family new to the matrix:
#   HF generate() on XGLM (fairseq-style: sinusoidal positions, scaled embeddings, pre-LayerNorm,
#   GELU FFN): the toll spun before each launch and after it (Kineto), and before it under nsys
#   (6 interleaved rounds): run_v13_heldout11.sh's PART=b protocol.
# One device call. Writes $OUT/v25_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
ARCH=xglm PREFIX=hf_generate_xglm SET=v25 DEADLINE=${DEADLINE:-330} PART=b \
  exec bash scripts/device/run_v13_heldout11.sh
