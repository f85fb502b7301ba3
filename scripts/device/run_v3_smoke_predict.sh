#!/usr/bin/env bash
# v3, device call 1 (one H200, ~9 min): (1) smoke: every new workload, shim placement and nsys at
# tiny size; (2) issue 13: step times WITHOUT a profiler, CC off vs emulated B200 CC, same process
# (per-phase protocol, 2 rounds x 30 steps per phase, after a discarded warm-up phase), for every
# workload and for three fixes applied for real; (3) issue 14: repeated runs of the eager decode
# (3 processes, each a baseline and a treatment profiler session).
# Writes $OUT/v3_call1.tar.gz and $OUT/log_call1.txt.
source scripts/device/_v3_env.sh
W=/tmp/v3c1; rm -rf $W; mkdir -p $W
exec > >(tee -a "$OUT/log_call1.txt") 2>&1
t start; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c 'import torch, transformers, torchvision; print(torch.__version__, torch.version.cuda, transformers.__version__, torchvision.__version__)'
nsys_setup
S="--rounds 1 --block-steps 2 --warmup 2"
# ---- (1) smoke
job smoke_hf 90 X=1 -- hf_generate --mechanisms launch $S --no-record-shapes --ship-steps 2
job smoke_tv_gpu_after 100 CCDIAG_EMU_TOLL_AT=after CCDIAG_EMU_COPY_PAD_AT=gpu -- tv_train --mechanisms launch,copy --all-subsets $S --no-record-shapes --ship baseline,treatment,only_launch --strip-step-markers
job smoke_serve_graph 60 X=1 -- serving --kw mode=graph --kw readback=async --mechanisms launch,copy --all-subsets $S
job smoke_serve_drain 60 CCDIAG_EMU_COPY_PAD_AT=gpu -- serving --kw mode=eager --kw readback=drain --mechanisms launch,copy $S
job smoke_bert 80 X=1 -- hf_bert_train --mechanisms launch,copy $S --no-record-shapes
nsys_pair smoke_nsys 120 hf_generate --mechanisms launch --phases baseline,treatment --rounds 1 --steps 3 --warmup 2
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob("/tmp/v3c1/smoke_*/ground_truth.json")) + sorted(glob.glob("/tmp/v3c1/smoke_*/timing_*.json")):
    d = json.load(open(f)); name = f.split("/")[3]
    print(name, "calls", d.get("shim_calls"))
    for ph, v in d.get("phases", {}).items():
        print(f"  {ph:28s} step_ms {[round(x/1e6,2) for x in v['step_ns']]} shim {v['shim_per_step_median']}")
    for ph, v in d.get("step_ns", {}).items():
        print(f"  {ph:28s} median_ms {v.get('median',0)/1e6:.2f}")
for f in sorted(glob.glob("/tmp/v3c1/smoke_*/*.json.gz")):
    print(f, os.path.getsize(f))
PY
# ---- (2) issue 13: no profiler, CC off vs emulated B200 (launch + copies), >= 30 steps per phase
T="--backend none --steps 30 --warmup 5 --rounds 2 --phases baseline,treatment --mechanisms launch,copy"
job time_decode_eager 45 X=1 -- decode --kw mode=eager $T
job time_decode_graph 45 X=1 -- decode --kw mode=graph $T
job time_kv_offload 45 X=1 -- kv_offload $T
job time_kv_offload_batched 45 X=1 -- kv_offload --kw blocks=1 --kw block_mib=8 $T
job time_kv_offload_resident 45 X=1 -- kv_offload --kw resident=1 $T
job time_serve_graph_async 45 X=1 -- serving --kw mode=graph --kw readback=async $T
job time_serve_graph_drain 45 X=1 -- serving --kw mode=graph --kw readback=drain $T
job time_serve_graph_sync 45 X=1 -- serving --kw mode=graph --kw readback=sync $T
job time_serve_eager_async 45 X=1 -- serving --kw mode=eager --kw readback=async $T
job time_hf_generate 60 X=1 -- hf_generate $T
job time_tv_train 60 X=1 -- tv_train $T
job time_hf_bert_train 60 X=1 -- hf_bert_train $T
# ---- (3) issue 14: repeated runs, separate processes; each: a baseline session then a treatment session
for r in 1 2 3; do
  job rep_decode_eager_run$r 45 X=1 -- decode --kw mode=eager --mechanisms launch,copy --session per-phase --phases baseline,treatment --rounds 1 --steps 20 --warmup 5
done
t pack; ls $W; cat $W/FAILED $W/SKIPPED 2>/dev/null
find $W -name '*.nsys-rep' -delete
tar -C $W -czf $OUT/v3_call1.tar.gz . ; ls -la $OUT
t done
