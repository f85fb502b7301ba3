"""Pick the NCCL CTA cap that slows collectives like CC does, on this machine.

    torchrun --nproc_per_node 2 -m ccdiag.emulate.calibrate --platform b200

Measures all-reduce bus bandwidth (64 MiB and 1 MiB) in the default group and in groups capped at
1, 2, 4, 8 and 16 CTAs, and prints JSON with the cap whose 64 MiB bandwidth ratio is closest to the
platform's published ratio (B200: 156/185 GB/s).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist

from ccdiag.emulate.platforms import get_platform
from ccdiag.emulate.workloads import make_emulated_group


def busbw(group: object, nbytes: int, iters: int = 20) -> float:
    """All-reduce bus bandwidth in GB/s (NCCL-tests convention: 2(n-1)/n x bytes / time)."""
    x = torch.ones(nbytes // 4, device="cuda")
    for _ in range(3):
        dist.all_reduce(x, group=group)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    end.record()
    torch.cuda.synchronize()
    n = dist.get_world_size()
    seconds = start.elapsed_time(end) / 1e3 / iters
    return 2 * (n - 1) / n * nbytes / seconds / 1e9


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--platform", default="b200")
    args = p.parse_args()
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    target = get_platform(args.platform).collective_bandwidth_ratio.value
    caps: dict[int, dict[str, float]] = {}
    result: dict[str, object] = {"target_ratio": target, "caps": caps}
    base = {size: busbw(None, size) for size in (64 << 20, 1 << 20)}
    result["default_gbps"] = {str(k): round(v, 1) for k, v in base.items()}
    for cap in (1, 2, 4, 8, 16):
        g = make_emulated_group(cap)
        if g is None:
            break
        bw = {size: busbw(g, size) for size in (64 << 20, 1 << 20)}
        caps[cap] = {str(k): round(v, 1) for k, v in bw.items()}
    if caps:
        best = min(caps, key=lambda c: abs(caps[c][str(64 << 20)] / base[64 << 20] - target))
        result["chosen_max_ctas"] = best
        result["chosen_ratio"] = round(caps[best][str(64 << 20)] / base[64 << 20], 3)
    if rank == 0:
        print("CALIBRATION " + json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
