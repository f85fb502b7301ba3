"""Probe: does a thread's host code run slower around the emulator's spun toll?

HELD-OUT-33 and 34 (validation/SPLIT.md) showed the main thread's own C++ ops (aten::empty,
aten::view) 1.5-2.5x slower in the toll-only phase of a torchvision training loop, far from any
launch as well, which ccdiag reads as host_slowdown. This probe times the same small ops on the
main thread in a loop of units (a few ops, one kernel launch) with the toll modelled three ways
beside each launch: none, the shim's own busy wait (``ccdiag_emu_busy_ns`` of the shim that
``ccdiag.emulate.shim.build_shim`` builds: clock reads and `pause`), and a sleep of the same
length (the thread leaves the core). Interleaved rounds; with and without
torch.profiler; optionally with busy neighbour processes (a DataLoader's workers).
Prints per-op ns (median of per-unit means) per mode, and the ratios to `none`.
Run on the GPU machine: python3 scripts/device/probe_spin_hangover.py
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import statistics
import sys
import time

DEV = os.environ.get("DEV", "cuda")
UNITS = int(os.environ.get("UNITS", "3000"))


def lib() -> ctypes.CDLL:
    """The emulator's own shim, built as the captures build it; its busy wait is the toll's."""
    from ccdiag.emulate.shim import build_shim

    so = ctypes.CDLL(str(build_shim()))
    so.ccdiag_emu_busy_ns.argtypes = [ctypes.c_longlong]
    return so


def burn(stop: mp.Event) -> None:  # a busy neighbour process (a DataLoader worker decoding)
    x = 0
    while not stop.is_set():
        for i in range(100000):
            x += i * i


def run(mode: str, units: int, toll_ns: int, clib, torch, prof: bool) -> dict[str, float]:
    x = torch.zeros(1024, device=DEV)
    per = {"empty": [], "view": [], "empty_like": [], "launch": []}
    pc = time.perf_counter_ns
    ctx = (
        torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        )
        if prof
        else None
    )
    if ctx:
        ctx.__enter__()
    for _ in range(units):
        t0 = pc()
        for _ in range(8):
            torch.empty(4096, device=DEV)
        t1 = pc()
        for _ in range(8):
            x.view(-1)
        t2 = pc()
        for _ in range(8):
            torch.empty_like(x)
        t3 = pc()
        if mode == "spin":
            clib.ccdiag_emu_busy_ns(toll_ns)
        elif mode == "sleep":
            time.sleep(toll_ns / 1e9)
        t4 = pc()
        x.add_(1)
        t5 = pc()
        per["empty"].append((t1 - t0) / 8)
        per["view"].append((t2 - t1) / 8)
        per["empty_like"].append((t3 - t2) / 8)
        per["launch"].append(t5 - t4)
    if DEV == "cuda":
        torch.cuda.synchronize()
    if ctx:
        ctx.__exit__(None, None, None)
    return {k: statistics.median(v) for k, v in per.items()}


def main() -> None:
    import torch

    clib = lib()
    toll = int(os.environ.get("TOLL_NS", "12250"))
    units, rounds = UNITS, 5
    for neighbours in (0, int(os.environ.get("NEIGHBOURS", "8"))):
        stop = mp.Event()
        ps = [mp.Process(target=burn, args=(stop,)) for _ in range(neighbours)]
        for p in ps:
            p.start()
        for prof in (False, True):
            res: dict[str, list[dict[str, float]]] = {"none": [], "spin": [], "sleep": []}
            run("none", 500, toll, clib, torch, False)  # warm up
            for _ in range(rounds):
                for mode in res:
                    res[mode].append(run(mode, units, toll, clib, torch, prof))
            base = {k: statistics.median(r[k] for r in res["none"]) for k in res["none"][0]}
            for mode, rs in res.items():
                med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                line = "  ".join(f"{k} {med[k]:7.0f} ns ({med[k] / base[k]:.2f}x)" for k in med)
                print(f"neighbours {neighbours} profiler {int(prof)} {mode:5s}: {line}", flush=True)
        stop.set()
        for p in ps:
            p.join()


if __name__ == "__main__":
    sys.exit(main())
