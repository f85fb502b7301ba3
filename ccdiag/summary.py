"""Counts and totals of one trace: the ``ccdiag summary --json`` contract.

Keys (all times Int64 ns, sizes bytes):

- trace facts: ``source``, ``format``, ``profiler``, ``gpu``, ``gpus``, versions, ``rank``,
  ``world_size``, ``ranks``, ``host_only``, ``cc_mode``;
- ``n_events`` (rows read), ``skipped`` (events not read, by reason), ``kinds`` (rows per kind);
- ``steps`` {count, marker, from, why, median_ns, p10_ns, p90_ns}: ``from`` is where the steps
  came from (``--step``, ``ProfilerStep#N``, ``repeating annotation``, ``repeating op sequence``,
  ``whole trace``) and ``why`` says in a sentence why that marker was used (``ccdiag.steps``); a
  step's duration is its host window; with several ranks, the slowest rank's window for each
  step index;
- ``summaries`` {report: {rows, count, total_ns}}: the summary tables the trace came with
  (``nsys stats`` ``*_sum`` reports: ``Trace.summaries``), empty for other formats;
- ``per_step`` {kernels, launches, graph_launches}: medians over steps of the counts per step
  (per rank);
- ``kernels`` {count, total_ns, graph}: every GPU kernel, collectives included;
- ``launches`` {count, total_ns, graph_launches}: host launch calls (``ccdiag.apis.LAUNCH_APIS``:
  kernel and graph launches, runtime and driver);
- ``memcpy`` {count, bytes, total_ns, by_kind: {HtoD|DtoH|DtoD|PtoP|HtoH: {count, bytes,
  total_ns}}}; ``memset`` {count, bytes, total_ns};
- ``sync`` {count, total_ns, gpu_records}: host calls that block on the GPU
  (``ccdiag.apis.SYNC_APIS``), and the number of GPU-side sync records;
- ``collectives`` {count, total_ns, bytes}.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ccdiag import apis
from ccdiag.schema import Trace

SUMMARY_VERSION = 1
_KERNELS = ["kernel", "collective"]
_API = ["runtime", "driver"]


def summarize(trace: Trace) -> dict[str, Any]:
    """Counts and totals of one trace (see the module docstring for the keys).

    Args:
        trace: a parsed trace, with steps assigned.

    Returns:
        A JSON-ready dict.
    """
    ev, meta = trace.events, trace.meta
    out: dict[str, Any] = {"summary_version": SUMMARY_VERSION}
    out.update(
        {
            k: getattr(meta, k)
            for k in (
                "source",
                "format",
                "profiler",
                "gpu",
                "gpus",
                "driver_version",
                "cuda_runtime",
                "cuda_driver",
                "torch_version",
                "nccl_version",
                "schema_version",
                "cc_mode",
                "rank",
                "world_size",
                "ranks",
                "host_only",
                "n_events",
            )
        }
    )
    out["skipped"] = dict(sorted(meta.skipped.items()))
    out["kinds"] = _counts(ev, "kind")
    out["span_ns"] = _span(ev)
    out["steps"] = _steps(trace)
    out["per_step"] = _per_step(trace)
    out["summaries"] = _summaries(trace)
    out["kernels"] = _kernels(ev)
    out["launches"] = _launches(ev)
    out["memcpy"] = _memcpy(ev)
    out["memset"] = _totals(ev.filter(pl.col("kind") == "memset"), with_bytes=True)
    out["sync"] = _sync(ev)
    out["collectives"] = _totals(ev.filter(pl.col("kind") == "collective"), with_bytes=True)
    out["warnings"] = list(meta.warnings)
    return out


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def _counts(ev: pl.DataFrame, col: str) -> dict[str, int]:
    vc = ev.group_by(pl.col(col).cast(pl.String)).len().sort(col)
    return {str(k): int(n) for k, n in vc.iter_rows()}


def _span(ev: pl.DataFrame) -> int:
    if ev.is_empty():
        return 0
    return _int(
        ev.select((pl.col("start_ns") + pl.col("dur_ns")).max() - pl.col("start_ns").min()).item()
    )


def _totals(rows: pl.DataFrame, with_bytes: bool = False) -> dict[str, int]:
    out = {"count": rows.height, "total_ns": _int(rows["dur_ns"].sum())}
    if with_bytes:
        out["bytes"] = _int(rows["bytes"].sum())
    return out


def _kernels(ev: pl.DataFrame) -> dict[str, int]:
    k = ev.filter(pl.col("kind").is_in(_KERNELS))
    return {**_totals(k), "graph": _int(k["graph"].sum())}


def _launch_rows(ev: pl.DataFrame) -> pl.DataFrame:
    return ev.filter(pl.col("kind").is_in(_API) & apis.is_launch(pl.col("name")))


def _launches(ev: pl.DataFrame) -> dict[str, int]:
    rows = _launch_rows(ev)
    graph = rows.filter(apis.is_graph_launch(pl.col("name"))).height
    return {**_totals(rows), "graph_launches": graph}


def _sync(ev: pl.DataFrame) -> dict[str, int]:
    rows = ev.filter(pl.col("kind").is_in(_API) & apis.is_sync(pl.col("name")))
    return {**_totals(rows), "gpu_records": ev.filter(pl.col("kind") == "sync").height}


def _memcpy(ev: pl.DataFrame) -> dict[str, Any]:
    rows = ev.filter(pl.col("kind") == "memcpy")
    by = (
        rows.group_by(pl.col("copy_kind").cast(pl.String).fill_null("unknown"))
        .agg(
            pl.len().alias("count"), pl.col("bytes").sum(), pl.col("dur_ns").sum().alias("total_ns")
        )
        .sort("copy_kind")
    )
    by_kind = {
        r["copy_kind"]: {
            "count": int(r["count"]),
            "bytes": _int(r["bytes"]),
            "total_ns": _int(r["total_ns"]),
        }
        for r in by.iter_rows(named=True)
    }
    return {**_totals(rows, with_bytes=True), "by_kind": by_kind}


def _quantile(s: pl.Series, q: float) -> int | None:
    if s.is_empty():
        return None
    return int(round(s.quantile(q, interpolation="linear")))  # type: ignore[arg-type]


def _steps(trace: Trace) -> dict[str, Any]:
    steps = trace.steps
    durs = steps.group_by("step").agg(pl.col("dur_ns").max()).sort("step")["dur_ns"]
    return {
        "count": durs.len(),
        "marker": trace.meta.step_marker,
        "from": trace.meta.extra.get("steps_from"),
        "why": trace.meta.extra.get("steps_why"),
        "median_ns": _quantile(durs, 0.5),
        "p10_ns": _quantile(durs, 0.1),
        "p90_ns": _quantile(durs, 0.9),
    }


def _summaries(trace: Trace) -> dict[str, dict[str, int]]:
    """Rows, summed counts and total time per summary report (``Trace.summaries``)."""
    sm = trace.summaries
    if sm.is_empty():
        return {}
    per = sm.group_by("report").agg(
        pl.len().alias("rows"), pl.col("count").sum(), pl.col("total_ns").sum()
    )
    return {
        str(r["report"]): {
            "rows": int(r["rows"]),
            "count": int(r["count"]),
            "total_ns": int(r["total_ns"]),
        }
        for r in per.sort("report").iter_rows(named=True)
    }


def _per_step(trace: Trace) -> dict[str, float | None]:
    """Medians over (rank, step) windows of kernels, launches and graph launches per step."""
    ev = trace.events
    keys = trace.steps.select("rank", "step")
    if keys.is_empty():
        return {"kernels": None, "launches": None, "graph_launches": None}
    launches = _launch_rows(ev)
    parts = {
        "kernels": ev.filter(pl.col("kind").is_in(_KERNELS)),
        "launches": launches,
        "graph_launches": launches.filter(apis.is_graph_launch(pl.col("name"))),
    }
    out: dict[str, float | None] = {}
    for key, rows in parts.items():
        n = rows.filter(pl.col("step").is_not_null()).group_by("rank", "step").len()
        per = keys.join(n, on=["rank", "step"], how="left")["len"].fill_null(0)
        out[key] = float(per.median())  # type: ignore[arg-type]
    return out
