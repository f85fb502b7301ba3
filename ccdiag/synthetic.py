"""Synthetic treatments with known injected CC costs, written as Kineto JSON.

Used by the validation (``scripts/validate_samples.py``), the rule cases and the tests while real
CC traces are scarce. **Synthetic**: a real CC-off trace replayed by :mod:`ccdiag.replay` with
costs injected (a toll per launch, blocking and slower host copies, a stall per sync, slower
collectives); the ground truth of each mechanism is measured by ablation through the same model.

    write_kineto(trace, path)          a Trace -> Kineto Chrome-trace JSON (.json / .json.gz)
    synthetic_pair(base, inj, dir)     baseline + treatment files + ground_truth.json
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ccdiag.replay import Injection, synthesize
from ccdiag.schema import KINETO_CATEGORY, Trace

#: The kinds written (what the replay produces), under ``schema.KINETO_CATEGORY``.
_WRITTEN = ("cpu_op", "annotation", "runtime", "driver", "kernel", "collective", "memcpy", "memset")
_MEM = {"pageable": "Pageable", "pinned": "Pinned", "device": "Device", "managed": "Managed"}
#: Injection fields that switch each mechanism off (for the ablation ground truth).
OFF: dict[str, dict[str, Any]] = {
    "launch_toll": {"launch_toll_ns": 0},
    "serialized_copies": {"copy_toll_ns": 0, "copy_gbps": 0.0},
    "blocked_non_blocking": {"copies_blocking": False},
    "sync_stall": {"sync_toll_ns": 0},
    "encrypted_collectives": {"collective_factor": 1.0},
}


def _copy_name(r: dict[str, Any]) -> str:
    src, dst = _MEM.get(r["src_mem"] or "", "Device"), _MEM.get(r["dst_mem"] or "", "Device")
    return f"Memcpy {r['copy_kind'] or 'DtoD'} ({src} -> {dst})"


def write_kineto(trace: Trace, path: str | Path) -> Path:
    """Write the trace's events as Kineto JSON (what ``parsers/kineto.py`` reads back)."""
    ev = trace.events.filter(pl.col("kind").cast(pl.String).is_in(list(_WRITTEN)))
    ev = ev.with_columns(
        pl.col(c).cast(pl.String) for c in ("kind", "copy_kind", "src_mem", "dst_mem")
    )
    out = []
    for r in ev.iter_rows(named=True):
        gpu = r["kind"] in ("kernel", "collective", "memcpy", "memset") or (
            r["kind"] == "annotation" and r["device"] is not None
        )
        args: dict[str, Any] = {}
        if r["external_id"] is not None:
            args["External id"] = r["external_id"]
        if r["correlation"] is not None:
            args["correlation"] = r["correlation"]
        if gpu:
            args.update(device=r["device"] or 0, stream=r["stream"] or 7)
        if r["bytes"] is not None:
            args["bytes"] = r["bytes"]
        name = _copy_name(r) if r["kind"] == "memcpy" else r["name"]
        cat = (
            "gpu_user_annotation"
            if r["kind"] == "annotation" and gpu
            else KINETO_CATEGORY[r["kind"]]
        )
        out.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": (r["device"] or 0) if gpu else r["pid"],
                "tid": (r["stream"] or 7) if gpu else r["tid"],
                "ts": r["start_ns"] / 1000.0,
                "dur": r["dur_ns"] / 1000.0,
                "args": args,
            }
        )
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": trace.meta.gpu or "NVIDIA H200"}],
        "displayTimeUnit": "ms",
        "traceEvents": out,
    }
    p = Path(path)
    data = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(data, 6) if p.suffix == ".gz" else data)
    return p


def mechanisms(inj: Injection) -> list[str]:
    """The mechanisms an injection switches on."""
    return [m for m, off in OFF.items() if any(getattr(inj, k) != v for k, v in off.items())]


def ground_truth(base: Trace, inj: Injection) -> dict[str, Any]:
    """Per mechanism, ns per step by ablation through the replay model.

    ``impact_ns_per_step``: only that mechanism on minus none (as the emulator's ground truth);
    ``shapley_ns_per_step``: its average marginal effect over all orders (these add up to the
    total delta, interactions split evenly). Both are per-step means.
    """
    mechs = mechanisms(inj)
    cache: dict[frozenset[str], np.ndarray] = {}

    def steps(on: frozenset[str]) -> np.ndarray:
        if on not in cache:
            kw = {k: v for m in mechs if m not in on for k, v in OFF[m].items()}
            t = synthesize(base, dataclasses.replace(inj, **kw))
            cache[on] = t.steps["dur_ns"].to_numpy().astype(float)
        return cache[on]

    none = steps(frozenset())
    k = len(mechs)
    shap = {}
    for m in mechs:
        others = [x for x in mechs if x != m]
        acc = np.zeros_like(none)
        for r in range(k):
            for sub in itertools.combinations(others, r):
                w = math.factorial(r) * math.factorial(k - r - 1) / math.factorial(k)
                acc += w * (steps(frozenset(sub) | {m}) - steps(frozenset(sub)))
        shap[m] = acc
    return {
        "mechanisms": mechs,
        "delta_per_step": (steps(frozenset(mechs)) - none).tolist(),
        "impact_ns_per_step": {m: float(np.mean(steps(frozenset({m})) - none)) for m in mechs},
        "shapley_per_step": {m: v.tolist() for m, v in shap.items()},
    }


def synthetic_pair(base: Trace, inj: Injection, out: str | Path, name: str) -> Path:
    """Write ``out/name/{baseline,treatment}.json.gz`` and ``ground_truth.json`` (synthetic)."""
    d = Path(out) / name
    d.mkdir(parents=True, exist_ok=True)
    plain = synthesize(base, Injection())  # the baseline through the same model (identical times)
    write_kineto(plain, d / "baseline.json.gz")
    write_kineto(synthesize(base, inj), d / "treatment.json.gz")
    truth = ground_truth(base, inj)
    truth.update(synthetic=True, injection=dataclasses.asdict(inj))
    (d / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return d
