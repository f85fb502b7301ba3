"""Build small event frames for rule cases: compact rows, or a parameterized step workload.

Everything goes through :func:`ccdiag.schema.conform` and :func:`ccdiag.steps.assign_steps`, so
the frames are valid by construction and steps are found the way real traces' are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ccdiag.schema import Trace, TraceMeta, conform
from ccdiag.steps import assign_steps

HOST = {"pid": 1, "tid": 1}
GPU = {"pid": 1, "device": 0, "stream": 7}
US = 1000


def rows_trace(rows: list[list[Any]], source: str = "case") -> Trace:
    """A trace from compact rows ``[kind, name, start_us, dur_us, {extra columns}]``."""
    cols: dict[str, list[Any]] = {}
    for i, r in enumerate(rows):
        kind, name, start, dur = r[:4]
        extra = dict(r[4]) if len(r) > 4 else {}
        base = dict(
            GPU if kind in ("kernel", "memcpy", "memset", "collective", "uvm_fault") else HOST
        )
        base.update(kind=kind, name=name, start_ns=int(start * US), dur_ns=int(dur * US), **extra)
        for k in set(cols) | set(base):
            cols.setdefault(k, [None] * i).append(base.get(k))
    meta = TraceMeta(source=source, format="kineto", profiler="torch.profiler", gpu="NVIDIA H200")
    return assign_steps(Trace(events=conform(cols), meta=meta))


@dataclass
class Workload:
    """One stream, one host thread: per step ``launches`` kernels, then an optional copy and a sync.

    Times in µs. ``toll_gap_us`` is host time spun before each launch (an emulator's toll);
    ``copy`` keys: bytes, gpu_us, call_us, blocking, pad_us, kind, src, dst, after_us,
    gpu_gap_us (idle GPU time between the queued work and the copy);
    ``collective`` keys: n, us, bytes (on stream 8, waited for by the sync);
    ``uvm`` keys: n, us (migrations at the start of each kernel burst; kernels also grow);
    ``setup`` keys: api, us (one setup call per step).
    ``query_api``: a state query (e.g. ``cuKernelGetName``, as Nsight records) right before each
    launch, after the gap; ``gap_pattern``: multipliers cycled over the launches' gaps (host code
    varies); ``launch_pattern``: multipliers cycled over the launch calls' durations; ``host_factor``: all host gaps scaled (slower host code); ``copy_first``: the copy is
    issued at the start of the step, before the launches; ``work_us``: host work after the
    launches, before the copy and the sync; ``host_ops``: cpu_ops that make no CUDA call after
    each step's sync (view / empty / as_strided, 3 µs each, scaled by ``host_factor``: the
    host-code control that Kineto traces carry and Nsight traces lack). ``lost_us``: a time
    slice lost in the gap before one launch of each of the first ``lost_steps`` steps (all when
    None), a different launch in each step (a CPU-bound neighbour preempting the thread).
    """

    steps: int = 6
    launches: int = 40
    launch_us: float = 5.0
    gap_us: float = 20.0
    toll_gap_us: float = 0.0
    kernel_us: float = 3.0
    sync_us: float = 10.0
    tail_us: float = 30.0
    copy: dict[str, Any] | None = None
    collective: dict[str, Any] | None = None
    uvm: dict[str, Any] | None = None
    setup: dict[str, Any] | None = None
    query_api: str | None = None
    gap_pattern: list[float] | None = None
    launch_pattern: list[float] | None = None
    host_factor: float = 1.0
    copy_first: bool = False
    work_us: float = 0.0
    host_ops: int = 0
    lost_us: float = 0.0
    lost_steps: int | None = None
    rows: list[list[Any]] = field(default_factory=list)

    def build(self, source: str = "workload") -> Trace:
        t, corr = 100.0, 1
        for step in range(self.steps):
            lost = self.lost_steps is None or step < self.lost_steps
            lost_at = (step * 7 + 3) % self.launches if self.lost_us and lost else -1
            t0, gpu_free = t, t
            if self.setup:
                self.rows.append(["runtime", self.setup["api"], t, self.setup["us"], HOST])
                t += self.setup["us"] + 2
            if self.uvm:
                for _ in range(self.uvm["n"]):
                    self.rows.append(
                        [
                            "uvm_fault",
                            "[CUDA memcpy Unified Host-to-Device]",
                            gpu_free,
                            self.uvm["us"],
                            {"bytes": 65536, "correlation": 0},
                        ]
                    )
                    gpu_free += self.uvm["us"]
            if self.copy and self.copy_first:
                t, gpu_free, corr = self._copy(t, gpu_free, corr)
            for i in range(self.launches):
                pattern = self.gap_pattern[i % len(self.gap_pattern)] if self.gap_pattern else 1.0
                t += self.gap_us * pattern * self.host_factor + self.toll_gap_us
                t += self.lost_us if i == lost_at else 0.0
                if self.query_api:
                    self.rows.append(["driver", self.query_api, t, 0.1, HOST])
                    t += 0.3
                lp = (
                    self.launch_pattern[i % len(self.launch_pattern)]
                    if self.launch_pattern
                    else 1.0
                )
                launch_us = self.launch_us * lp
                self.rows.append(
                    ["runtime", "cudaLaunchKernel", t, launch_us, {"correlation": corr}]
                )
                start = max(t + launch_us + 1, gpu_free)
                self.rows.append(
                    ["kernel", "gemm_kernel", start, self.kernel_us, {"correlation": corr}]
                )
                gpu_free, t, corr = start + self.kernel_us, t + launch_us, corr + 1
            if self.collective:
                c = self.collective
                for _ in range(c["n"]):
                    self.rows.append(
                        [
                            "collective",
                            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                            gpu_free,
                            c["us"],
                            {"stream": 8, "bytes": c["bytes"]},
                        ]
                    )
                    gpu_free += c["us"]
            t += self.work_us
            if self.copy and not self.copy_first:
                t, gpu_free, corr = self._copy(t, gpu_free, corr)
            t += 5
            end = max(t + self.sync_us, gpu_free + 2)
            self.rows.append(["runtime", "cudaStreamSynchronize", t, end - t, HOST])
            for k in range(self.host_ops):
                op = ("aten::view", "aten::empty", "aten::as_strided")[k % 3]
                self.rows.append(["cpu_op", op, end + 1 + 4.5 * k, 3.0 * self.host_factor, HOST])
            t = end + max(self.tail_us, 1 + 4.5 * self.host_ops)
            self.rows.append(["annotation", "step", t0, t - t0, HOST])
            t += 10
        return rows_trace(self.rows, source)

    def _copy(self, t: float, gpu_free: float, corr: int) -> tuple[float, float, int]:
        c = self.copy or {}
        start = max(t + 2, gpu_free + c.get("gpu_gap_us", 0.0))
        gpu = {
            "correlation": corr,
            "bytes": c.get("bytes", 64),
            "copy_kind": c.get("kind", "DtoH"),
            "src_mem": c.get("src", "device"),
            "dst_mem": c.get("dst", "pinned"),
        }
        self.rows.append(
            ["memcpy", "Memcpy DtoH (Device -> Pinned)", start, c.get("gpu_us", 2.0), gpu]
        )
        end_gpu = start + c.get("gpu_us", 2.0)
        call = c.get("call_us", 8.0)
        dur = max(call, end_gpu - t) + c.get("pad_us", 0.0) if c.get("blocking") else call
        self.rows.append(["runtime", "cudaMemcpyAsync", t, dur, {"correlation": corr}])
        return t + dur + c.get("after_us", 20.0), end_gpu, corr + 1


def case_trace(spec: dict[str, Any], shared: Path, source: str) -> Trace:
    """A trace from a YAML case side: ``rows``, ``workload`` or ``trace`` (+ ``inject``)."""
    if "rows" in spec:
        return rows_trace(spec["rows"], source)
    if "workload" in spec:
        return Workload(**spec["workload"]).build(source)
    from ccdiag import api
    from ccdiag.replay import Injection, synthesize

    trace = api.load_trace(shared / spec["trace"])
    return (
        synthesize(trace, Injection(**spec.get("inject", {})), source)
        if "inject" in spec
        else trace
    )


def frame(trace: Trace) -> pl.DataFrame:
    """The events of a trace (handy in asserts)."""
    return trace.events
