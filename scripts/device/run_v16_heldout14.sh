#!/usr/bin/env bash
# v16: a fourteenth held-out set (HELD-OUT-14, validation/SPLIT.md, declared before this capture).
# It judges the engine unchanged since HELD-OUT-13's judgement on two model families new to the
# matrix, with run_v13_heldout11.sh's PART=b protocol (the toll spun before each launch and after
# it under Kineto, and before it under nsys over 6 interleaved rounds):
#   HF generate() on GPT-Neo (global / local attention in alternate layers), then on StableLM
#   (partial rotary, LayerNorm, grouped-query attention).
# One device call. Writes $OUT/v16{a,b}_part_* + logs. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
ARCH=gpt_neo PREFIX=hf_generate_gptneo SET=v16a DEADLINE=270 PART=b \
  bash scripts/device/run_v13_heldout11.sh
ARCH=stablelm PREFIX=hf_generate_stablelm SET=v16b DEADLINE=270 PART=b \
  bash scripts/device/run_v13_heldout11.sh
