#!/usr/bin/env bash
# v3, issue 13: per-mechanism ablation WITHOUT a profiler (baseline | treatment | only_launch |
# only_copy_pad | only_copy_sync; per-phase protocol, 2 rounds x 30 steps after a discarded
# warm-up phase), emulated B200, for every workload of measured_stepTimes.json.
# Writes $OUT/v3_ablation.tar.gz. Assemble: python validation/make_pairs.py --raw ... (reads
# abl_*/timing_none.json into measured_stepTimes.json).
source scripts/device/_v3_env.sh
W=/tmp/v3abl; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_ablation.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
A="--backend none --steps 30 --warmup 5 --rounds 2 --mechanisms launch,copy"
job abl_decode_eager 40 X=1 -- decode --kw mode=eager $A
job abl_serve_graph_async 40 X=1 -- serving --kw mode=graph --kw readback=async $A
job abl_hf_generate 60 X=1 -- hf_generate $A
job abl_tv_train 60 X=1 -- tv_train $A
job abl_kv_offload 40 X=1 -- kv_offload $A
job abl_decode_graph 40 X=1 -- decode --kw mode=graph $A
job abl_serve_eager_async 40 X=1 -- serving --kw mode=eager --kw readback=async $A
job abl_serve_graph_drain 40 X=1 -- serving --kw mode=graph --kw readback=drain $A
job abl_serve_graph_sync 40 X=1 -- serving --kw mode=graph --kw readback=sync $A
job abl_hf_bert_train 60 X=1 -- hf_bert_train $A
job abl_kv_offload_batched 40 X=1 -- kv_offload --kw blocks=1 --kw block_mib=8 $A
t pack; cat $W/FAILED $W/SKIPPED 2>/dev/null
tar -C $W -czf $OUT/v3_ablation.tar.gz . ; ls -la $OUT
t done
