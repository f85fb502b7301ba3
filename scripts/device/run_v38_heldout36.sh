#!/usr/bin/env bash
# v38: a thirty-sixth held-out set (HELD-OUT-36, validation/SPLIT.md, declared before this
# capture), then two probes that are not judged. It judges the engine of d625cc1, unchanged, on
# workload code never trained before:
#   tv_train_shufflenet: torchvision ShuffleNetV2 (x1.0) training, pinned DataLoader (8 workers),
#                     non_blocking H2D, the toll before each launch and the copy pad on the host,
#                     every subset of launch + copies, ProfilerStep kept; truths from 6 rounds of
#                     5 timed steps a phase (5 untimed settle steps before each block), where
#                     earlier DataLoader sets had 2 rounds of 10: phase-to-phase host speed is
#                     sampled 6 times a phase instead of twice.
# Probes (already-seen code; for docs/host_speed_between_phases.md, never a judgement):
#   tv_train_resnet50_rounds: HELD-OUT-33's ResNet-50 loop, same options, 6 rounds of 5;
#   probe_spin_hangover.py: the spin probe again, with the shim's own busy wait (build_shim).
# Every round's steps shipped. One device call. Writes $OUT/v38_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-540}
W=/tmp/v38h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v38.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
R6="--kw workers=8 --kw batch=64 --mechanisms launch,copy --all-subsets --rounds 6 --block-steps 5 --settle-steps 5 --warmup 5 --no-record-shapes"
job tv_train_shufflenet 240 X=1 -- tv_train --kw model=shufflenet_v2_x1_0 $R6 \
  --ship baseline,treatment,only_launch,on_copy_pad+copy_sync
job tv_train_resnet50_rounds 230 X=1 -- tv_train --kw model=resnet50 $R6 --ship baseline,only_launch
if [ $((DEADLINE - (SECONDS - START))) -ge 70 ]; then
  t probe; timeout 70 python3 scripts/device/probe_spin_hangover.py > $W/probe_spin_hangover.txt 2>&1
  echo "rc=$? probe"; grep '^neighbours' $W/probe_spin_hangover.txt
else echo "SKIPPED probe" | tee -a $W/SKIPPED; fi
pack_out v38
t done
