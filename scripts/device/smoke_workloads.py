"""Smoke test of workloads on the GPU machine: setup, warm-up, then the median step time
(no emulator, no profiler). Usage: python3 scripts/device/smoke_workloads.py NAME key=value ..."""

import statistics
import sys
import time

import torch

from ccdiag.emulate import workloads


def main() -> None:
    name, kv = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
    kw = {k: (float(v) if "." in v else int(v) if v.isdigit() else v) for k, v in kv.items()}
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
    print(name, kw, f"setup+warmup {time.perf_counter() - t0:.1f} s, median step "
          f"{statistics.median(times) * 1e3:.2f} ms, p90 {sorted(times)[17] * 1e3:.2f} ms",
          getattr(wl, "found", ""))


if __name__ == "__main__":
    main()
