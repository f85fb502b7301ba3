#!/usr/bin/env bash
# v31: a twenty-ninth held-out set (HELD-OUT-29, validation/SPLIT.md, declared before this
# capture): HELD-OUT-28's mixed-precision training job, which ran out of its 250 s budget there,
# with a budget and a size set from that failure alone (no result of it was seen):
#   tv_train_amp_densenet: DenseNet-121 training with autocast float16 and a GradScaler (its
#                      step reads the found-inf flag back with .item() every step), batch 32 at
#                      96 px, pinned DataLoader; the toll spun *after* each launch, the copy pad
#                      on the GPU side (CCDIAG_EMU_COPY_PAD_AT=gpu); 2 rounds.
# The job's folder alone is packed (HELD-OUT-28's archive held a failed job's partial output and
# went over the return limit). One device call. Writes $OUT/v31_part_* + log. Assemble with
# validation/make_pairs.py --raw DIR --pairs-only.
source scripts/device/_v3_env.sh
DEADLINE=${DEADLINE:-585}
W=/tmp/v31h; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_v31.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__)"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
AMP="tv_train --kw model=densenet121 --kw batch=32 --kw size=96 --kw workers=8 --kw amp=1 --mechanisms launch,copy --all-subsets --rounds 2 --block-steps 10 --settle-steps 5 --warmup 5 --no-record-shapes"
job tv_train_amp_densenet 500 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- $AMP $SHIP_ALL
find $W -maxdepth 2 | head -40; du -sh $W/tv_train_amp_densenet
# the pair's own files only (its folder's top level), not the raw traces below it
(cd $W && tar -czf /tmp/v31.tgz $(find tv_train_amp_densenet -maxdepth 1 -type f) $(ls FAILED SKIPPED 2>/dev/null))
ls -la /tmp/v31.tgz
split -b 15M /tmp/v31.tgz $OUT/v31_part_
t done
