#!/usr/bin/env bash
# v3, issue 13: step times WITHOUT a profiler, single-session interleaved protocol (the phases
# baseline | treatment | only_launch | only_copy_pad | only_copy_sync alternate in blocks of 10
# steps over 4 rounds, round 0 in order, later rounds shuffled; 40 timed steps per phase), emulated
# B200, every workload and the three fixes applied for real. Interleaving matters: run per phase
# (run_v3_predict_ablation.sh) the same workload's phases drifted by up to 25 % on this host.
# Writes $OUT/v3_timing.tar.gz. Assemble: python validation/make_pairs.py --raw ...
source scripts/device/_v3_env.sh
W=/tmp/v3tim; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_timing.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
A="--backend none --session single --rounds 4 --block-steps 10 --warmup 5 --mechanisms launch,copy"
job it_decode_eager 40 X=1 -- decode --kw mode=eager $A
job it_decode_graph 40 X=1 -- decode --kw mode=graph $A
job it_serve_graph_async 40 X=1 -- serving --kw mode=graph --kw readback=async $A
job it_serve_graph_drain 40 X=1 -- serving --kw mode=graph --kw readback=drain $A
job it_serve_graph_sync 40 X=1 -- serving --kw mode=graph --kw readback=sync $A
job it_kv_offload 40 X=1 -- kv_offload $A
job it_kv_offload_batched 40 X=1 -- kv_offload --kw blocks=1 --kw block_mib=8 $A
job it_kv_offload_resident 40 X=1 -- kv_offload --kw resident=1 $A
job it_hf_generate 60 X=1 -- hf_generate $A
job it_tv_train 60 X=1 -- tv_train $A
job it_serve_eager_async 40 X=1 -- serving --kw mode=eager --kw readback=async $A
job it_hf_bert_train 60 X=1 -- hf_bert_train $A
t pack; cat $W/FAILED $W/SKIPPED 2>/dev/null
tar -C $W -czf $OUT/v3_timing.tar.gz . ; ls -la $OUT
t done
