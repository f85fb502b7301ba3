#!/usr/bin/env bash
# v3 truth matrix (issue 12), one H200: paired Kineto / nsys traces of third-party workload code
# under the B200 emulation, single-session ablation truth (baseline | treatment | every subset of
# the mechanisms, interleaved blocks of steps, 3 rounds). GROUP=a (HF generate, torchvision
# training, KV), GROUP=b (serving loop, HF BERT training), GROUP=all. Placement by environment:
# CCDIAG_EMU_TOLL_AT=after (toll in the gap after the call), CCDIAG_EMU_COPY_PAD_AT=gpu (copy
# padding as a delay kernel on the copy's stream). Writes $OUT/v3_truth_$GROUP.tar.gz + log.
# Assemble the pairs with: python validation/make_pairs.py --raw DIR --out validation
source scripts/device/_v3_env.sh
GROUP=${GROUP:-all}
W=/tmp/v3t_$GROUP; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_truth_$GROUP.txt") 2>&1
t start $GROUP; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nsys_setup
R="--rounds 3 --block-steps 10 --warmup 5"
HF="hf_generate --mechanisms launch --rounds 3 --block-steps 6 --warmup 3 --no-record-shapes --ship-steps 6"
TV="tv_train --mechanisms launch,copy --all-subsets $R --no-record-shapes --ship-steps 10"
SV="--mechanisms launch,copy --all-subsets $R --ship-steps 10"
SHIP_ALL="--ship baseline,treatment,only_launch,on_copy_pad+copy_sync"
if [ $GROUP = a ] || [ $GROUP = all ]; then
  job hf_generate_llama 120 X=1 -- $HF
  job tv_train 150 X=1 -- $TV $SHIP_ALL
  job hf_generate_llama_after 120 CCDIAG_EMU_TOLL_AT=after -- $HF
  job tv_train_after 150 CCDIAG_EMU_TOLL_AT=after -- $TV
  nsys_pair hf_generate_llama_nsys 150 hf_generate --mechanisms launch --phases baseline,treatment --rounds 1 --steps 8 --warmup 3
  job tv_train_nostep 150 X=1 -- $TV --strip-step-markers
  job tv_train_gpu 150 CCDIAG_EMU_COPY_PAD_AT=gpu -- $TV
  job kv_offload_gpu 60 CCDIAG_EMU_COPY_PAD_AT=gpu -- kv_offload --mechanisms copy $R --ship-steps 10
  job time_tv_train 60 X=1 -- tv_train --backend none --steps 30 --warmup 5 --rounds 2 --phases baseline,treatment --mechanisms launch,copy
fi
if [ $GROUP = b ] || [ $GROUP = all ]; then
  job serve_graph_async 60 X=1 -- serving --kw mode=graph --kw readback=async $SV $SHIP_ALL
  job hf_bert_train 150 X=1 -- hf_bert_train --mechanisms launch,copy --all-subsets $R --no-record-shapes --ship-steps 10 $SHIP_ALL
  job serve_graph_async_after 60 CCDIAG_EMU_TOLL_AT=after -- serving --kw mode=graph --kw readback=async $SV
  job serve_graph_sync 60 X=1 -- serving --kw mode=graph --kw readback=sync $SV
  job serve_graph_drain 60 X=1 -- serving --kw mode=graph --kw readback=drain $SV
  job serve_eager_async 90 X=1 -- serving --kw mode=eager --kw readback=async $SV --no-record-shapes
  job hf_bert_train_nostep 150 X=1 -- hf_bert_train --mechanisms launch,copy --all-subsets $R --no-record-shapes --ship-steps 10 --strip-step-markers
fi
t pack; ls $W; cat $W/FAILED $W/SKIPPED 2>/dev/null
find $W -name '*.nsys-rep' -delete
tar -C $W -czf $OUT/v3_truth_$GROUP.tar.gz . ; ls -la $OUT
t done
