"""Smoke test of workloads on the GPU machine: setup, warm-up, then the median step time
(no emulator, no profiler). Usage: python3 scripts/device/smoke_workloads.py NAME key=value ..."""

import statistics
import sys
import time

import torch

from ccdiag.emulate import workloads


def main() -> None:
    name, kw = sys.argv[1], workloads.options(sys.argv[2:])
    wl = workloads.WORKLOADS[name](**kw)
    t0 = time.perf_counter()
    wl.setup()
    for i in range(5):
        wl.step(i)
    torch.cuda.synchronize()
    times = []
    for i in range(5, 25):
        t = time.perf_counter()
        wl.step(i)
        times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    print(
        name,
        kw,
        f"setup+warmup {time.perf_counter() - t0:.1f} s, median step "
        f"{statistics.median(times) * 1e3:.2f} ms, p90 {sorted(times)[17] * 1e3:.2f} ms",
        getattr(wl, "found", ""),
    )


if __name__ == "__main__":
    main()
