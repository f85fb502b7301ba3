"""Cut one Kineto trace into several, by profiler step (standard library only).

The paired-run driver profiles baseline and emulated-CC steps in *one* profiler session
(alternating blocks of steps), because on the H200 used for the samples the PyTorch profiler's
overhead differs between sessions by up to 2x while staying steady within one. This module then
writes one trace per phase holding only that phase's steps.

Kept for a phase: every metadata event; host events (any category) that start inside one of the
phase's ``ProfilerStep#N`` windows on the profiled process; GPU events whose correlation id
belongs to a kept host event (GPU events without a correlation, by time); flow events of kept
correlations. Trace-wide spans are dropped.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from pathlib import Path
from typing import Any

GPU_CATS = {
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_sync",
    "Kernel",
    "Memcpy",
    "Memset",
}
STEP = re.compile(r"ProfilerStep#(\d+)$")


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def step_windows(doc: dict[str, Any]) -> dict[int, tuple[float, float]]:
    """ProfilerStep number -> (start, end) in the trace's time unit."""
    out = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            m = STEP.match(str(e.get("name", "")))
            if m:
                out[int(m.group(1))] = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
    return out


def split_trace(
    src: Path, parts: dict[str, list[int]], out_dir: Path, suffix: str = ".json.gz"
) -> dict[str, Path]:
    """Write one trace per part, each holding the given ProfilerStep numbers.

    Args:
        src: the session trace (Kineto JSON, plain or .gz).
        parts: part name -> ProfilerStep numbers to keep.
        out_dir: where to write ``<part><suffix>``.

    Returns:
        Part name -> written path.
    """
    doc = _load(src)
    windows = step_windows(doc)
    events = doc["traceEvents"]
    written = {}
    host_pids = {e.get("pid") for e in events if e.get("cat") == "user_annotation"}
    for name, steps in parts.items():
        spans = sorted(windows[s] for s in steps if s in windows)
        starts = [a for a, _ in spans]

        def inside(ts: float, spans: list = spans, starts: list = starts) -> bool:
            i = bisect.bisect_right(starts, ts) - 1
            return i >= 0 and spans[i][0] <= ts <= spans[i][1]

        kept: list[dict[str, Any]] = []
        corr: set[int] = set()
        for e in events:
            ph, cat = e.get("ph"), e.get("cat")
            if ph == "M":
                kept.append(e)
            elif ph == "X" and cat not in GPU_CATS and cat != "Trace" and e.get("pid") in host_pids:
                if inside(float(e["ts"])):
                    kept.append(e)
                    c = (e.get("args") or {}).get("correlation")
                    if c is not None:
                        corr.add(int(c))
        for e in events:
            ph, cat = e.get("ph"), e.get("cat")
            if ph == "X" and cat in GPU_CATS:
                c = (e.get("args") or {}).get("correlation")
                if (c is not None and int(c) in corr) or (
                    c in (None, 0, -1) and inside(float(e["ts"]))
                ):
                    kept.append(e)
            elif ph in ("s", "f") and cat == "ac2g" and int(e.get("id", -1)) in corr:
                kept.append(e)
        part = {k: v for k, v in doc.items() if k != "traceEvents"}
        part["traceEvents"] = kept
        if "traceName" in part:
            part["traceName"] = f"{name}{suffix}"
        path = out_dir / f"{name}{suffix}"
        opener = gzip.open if suffix.endswith(".gz") else open
        with opener(path, "wt") as fh:
            json.dump(part, fh)
        written[name] = path
    return written


def strip_step_markers(path: Path) -> int:
    """Remove the ``ProfilerStep#N`` annotations (host and GPU side) from a written trace, as if it
    had been profiled without a schedule; returns how many were removed."""
    doc = _load(path)
    events = doc["traceEvents"]
    kept = [e for e in events if not STEP.match(str(e.get("name", "")))]
    doc["traceEvents"] = kept
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as fh:
        json.dump(doc, fh)
    return len(events) - len(kept)
