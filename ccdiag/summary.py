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

from dataclasses import dataclass
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
    flags = _api_flags(ev)
    totals = _all_totals(ev, flags)
    out["kinds"] = _counts(ev, "kind")
    out["span_ns"] = _span(ev)
    out["steps"] = _steps(trace)
    out["per_step"] = _per_step(trace, flags)
    out["summaries"] = _summaries(trace)
    out["kernels"] = {**totals["kernels"], "graph": totals["kernels"].pop("graph")}
    out["launches"] = totals["launches"]
    out["memcpy"] = _memcpy(ev)
    out["memset"] = totals["memset"]
    out["sync"] = totals["sync"]
    out["collectives"] = totals["collectives"]
    out["warnings"] = list(meta.warnings)
    return out


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def _counts(ev: pl.DataFrame, col: str) -> dict[str, int]:
    vc = ev.lazy().group_by(pl.col(col).cast(pl.String)).len().sort(col).collect()
    return {str(k): int(n) for k, n in vc.iter_rows()}


def _span(ev: pl.DataFrame) -> int:
    if ev.is_empty():
        return 0
    return _int(
        ev.select((pl.col("start_ns") + pl.col("dur_ns")).max() - pl.col("start_ns").min()).item()
    )


@dataclass(frozen=True)
class _ApiFlags:
    """Which API names launch, launch a graph, or sync: decided once per distinct name (a big
    nsys export has millions of API rows but a few hundred names)."""

    launch: pl.Series
    graph_launch: pl.Series
    sync: pl.Series

    def launch_row(self) -> pl.Expr:
        return pl.col("kind").is_in(_API) & pl.col("name").is_in(self.launch)

    def graph_launch_row(self) -> pl.Expr:
        return pl.col("kind").is_in(_API) & pl.col("name").is_in(self.graph_launch)

    def sync_row(self) -> pl.Expr:
        return pl.col("kind").is_in(_API) & pl.col("name").is_in(self.sync)


def _api_flags(ev: pl.DataFrame) -> _ApiFlags:
    names = ev.lazy().filter(pl.col("kind").is_in(_API)).select(pl.col("name").unique()).collect()
    name = pl.col("name")
    launch = names.filter(apis.is_launch(name))
    return _ApiFlags(
        launch=launch["name"],
        graph_launch=launch.filter(apis.is_graph_launch(name))["name"],
        sync=names.filter(apis.is_sync(name))["name"],
    )


def _all_totals(ev: pl.DataFrame, flags: _ApiFlags) -> dict[str, dict[str, int]]:
    """Count and total time (and bytes) of each row group, in one pass over three columns."""
    kind = pl.col("kind")
    groups = {
        "kernels": (kind.is_in(_KERNELS), False),
        "launches": (flags.launch_row(), False),
        "memset": (kind == "memset", True),
        "sync": (flags.sync_row(), False),
        "collectives": (kind == "collective", True),
    }
    exprs = []
    for key, (cond, with_bytes) in groups.items():
        exprs += [
            cond.sum().alias(f"{key}.count"),
            pl.col("dur_ns").filter(cond).sum().alias(f"{key}.total_ns"),
        ]
        if with_bytes:
            exprs.append(pl.col("bytes").filter(cond).sum().alias(f"{key}.bytes"))
    exprs += [
        (kind.is_in(_KERNELS) & pl.col("graph")).sum().alias("kernels.graph"),
        flags.graph_launch_row().sum().alias("launches.graph_launches"),
        (kind == "sync").sum().alias("sync.gpu_records"),
    ]
    row = ev.lazy().select(exprs).collect().row(0, named=True)
    out: dict[str, dict[str, int]] = {key: {} for key in groups}
    for name, value in row.items():
        key, field = name.split(".", 1)
        out[key][field] = _int(value)
    return out


def _memcpy(ev: pl.DataFrame) -> dict[str, Any]:
    rows = ev.lazy().filter(pl.col("kind") == "memcpy").select("copy_kind", "bytes", "dur_ns")
    rows = rows.collect()
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
    totals = {
        "count": rows.height,
        "total_ns": _int(rows["dur_ns"].sum()),
        "bytes": _int(rows["bytes"].sum()),
    }
    return {**totals, "by_kind": by_kind}


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


def _per_step(trace: Trace, flags: _ApiFlags) -> dict[str, float | None]:
    """Medians over (rank, step) windows of kernels, launches and graph launches per step."""
    ev = trace.events
    keys = trace.steps.select("rank", "step")
    if keys.is_empty():
        return {"kernels": None, "launches": None, "graph_launches": None}
    conds = {
        "kernels": pl.col("kind").is_in(_KERNELS),
        "launches": flags.launch_row(),
        "graph_launches": flags.graph_launch_row(),
    }
    n = (
        ev.lazy()
        .filter(pl.col("step").is_not_null())
        .group_by("rank", "step")
        .agg(c.sum().alias(k) for k, c in conds.items())
        .collect()
    )
    per = keys.join(n, on=["rank", "step"], how="left")
    return {k: float(per[k].fill_null(0).median()) for k in conds}  # type: ignore[arg-type]
