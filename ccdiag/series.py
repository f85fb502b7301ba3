"""Per-event samples behind the report's evidence, for figures (``api.evidence_series``).

The Report carries percentiles and fits; a figure that shows a distribution or a scatter needs
the samples. This module extracts them from an analysed pair as plain JSON (lists of ints and
short strings), capped at ``max_points`` per list: 1-D samples keep their shape (evenly spaced
ranks of the sorted values), 2-D samples are a seeded random subset. ``n`` is always the full
count. Every section is ``{"baseline": ..., "treatment": ...}``; a side with nothing to show
has empty lists, never a missing key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ccdiag.ledger import PairContext as RuleContext
from ccdiag.pairing import Pair

SIDES = ("baseline", "treatment")
NAME_CHARS = 120


_NO_COPIES = pl.DataFrame(
    schema={
        "rank": pl.Int32,
        "step": pl.Int32,
        "stream": pl.Int64,
        "bytes": pl.Int64,
        "latency_ns": pl.Int64,
        "copy_kind": pl.String,
        "gpu_start": pl.Int64,
        "gpu_dur": pl.Int64,
        "eff_ns": pl.Int64,
    }
)


def _dist(s: pl.Series, cap: int) -> dict[str, Any]:
    """A 1-D sample: sorted values at evenly spaced ranks (keeps the distribution's shape)."""
    v = np.sort(s.drop_nulls().cast(pl.Int64).to_numpy())
    if v.size > cap:
        v = v[np.linspace(0, v.size - 1, cap).round().astype(int)]
    return {"n": int(s.drop_nulls().len()), "ns": v.tolist()}


def _points(df: pl.DataFrame, cols: dict[str, pl.Expr], cap: int) -> dict[str, Any]:
    """A 2-D sample: the selected columns of a seeded random subset of rows."""
    n = df.height
    d = df.sample(cap, seed=0) if n > cap else df
    d = d.select(**cols)
    return {"n": n, **{c: d[c].to_list() for c in d.columns}}


def _calls(ctx: RuleContext, side: str) -> pl.DataFrame:
    calls = ctx.calls_b if side == "baseline" else ctx.calls_t
    return calls if "eff_ns" in calls.columns and "gap_ns" in calls.columns else calls.clear()


def _gpu(pair: Pair, side: str) -> pl.DataFrame:
    return (pair.baseline if side == "baseline" else pair.treatment).gpu


def _idle_gaps(gpu: pl.DataFrame) -> pl.Series:
    """Idle time between consecutive GPU activity on each device, within a step (ns)."""
    if gpu.height == 0:
        return pl.Series([], dtype=pl.Int64)
    by = ["rank", "device", "step"]
    g = gpu.select(*by, "start_ns", (pl.col("start_ns") + pl.col("dur_ns")).alias("e"))
    g = g.sort(*by, "start_ns")
    prev = pl.col("e").cum_max().shift(1).over(by)
    gaps = g.select((pl.col("start_ns") - prev).alias("gap")).drop_nulls()
    return gaps.filter(pl.col("gap") > 0)["gap"]


def _concurrency(copies: pl.DataFrame) -> dict[str, Any]:
    """Time spent with k host-crossing copies in flight (k = 1, 2, ...), summed over steps."""
    if copies.height == 0:
        return {"streams": 0, "levels": [], "ns": []}
    g = copies.select(
        "rank",
        "step",
        pl.col("gpu_start").alias("a"),
        (pl.col("gpu_start") + pl.col("gpu_dur")).alias("b"),
    )
    starts = g.select("rank", "step", pl.col("a").alias("t"), pl.lit(1).alias("d"))
    ends = g.select("rank", "step", pl.col("b").alias("t"), pl.lit(-1).alias("d"))
    ev = pl.concat([starts, ends]).sort("rank", "step", "t", "d")
    ev = ev.with_columns(pl.col("d").cum_sum().over("rank", "step").alias("k"))
    ev = ev.with_columns((pl.col("t").shift(-1).over("rank", "step") - pl.col("t")).alias("dt"))
    lv = ev.filter(pl.col("k") > 0).group_by("k").agg(pl.col("dt").sum()).sort("k")
    return {
        "streams": int(copies["stream"].n_unique()),
        "levels": lv["k"].to_list(),
        "ns": [int(x) for x in lv["dt"].fill_null(0).to_list()],
    }


def _side(pair: Pair, ctx: RuleContext, side: str, cap: int) -> dict[str, Any]:
    calls = _calls(ctx, side)
    gpu = _gpu(pair, side)
    cls = pl.col("cls").str.replace("^op_", "")  # host-only traces: op_launch, op_copy, ...
    launch = calls.filter(cls == "launch") if calls.height else calls
    copies = ctx.copies_b if side == "baseline" else ctx.copies_t
    if "latency_ns" not in copies.columns:  # host-only: no GPU copies to measure
        copies = _NO_COPIES
    asyncs = calls.filter((cls == "copy") & pl.col("name").str.contains("Async"))
    if "gpu_dur" not in asyncs.columns:
        asyncs = _NO_COPIES
    coll = gpu.filter(pl.col("gclass") == "collective") if gpu.height else gpu
    uvm = gpu.filter(pl.col("gclass") == "uvm") if gpu.height else gpu
    name = pl.col("name").cast(pl.String).str.slice(0, NAME_CHARS)
    return {
        "launch_call": _dist(launch["eff_ns"], cap) if launch.height else _dist(pl.Series([]), cap),
        "launch_gap": _dist(launch["gap_ns"], cap) if launch.height else _dist(pl.Series([]), cap),
        "gpu_idle_gap": _dist(_idle_gaps(gpu), cap),
        "copies": _points(
            copies.filter(pl.col("bytes").is_not_null()),
            {
                "bytes": pl.col("bytes"),
                "latency_ns": pl.col("latency_ns"),
                "kind": pl.col("copy_kind").cast(pl.String).fill_null("?"),
            },
            cap,
        ),
        "copy_concurrency": _concurrency(copies),
        "async_copies": _points(
            asyncs.filter(pl.col("gpu_dur").is_not_null()),
            {
                "host_ns": pl.col("eff_ns"),
                "transfer_ns": pl.col("gpu_dur"),
                "bytes": pl.col("bytes").fill_null(0),
            },
            cap,
        ),
        "collectives": _points(
            coll.filter(pl.col("dur_ns") > 0),
            {"bytes": pl.col("bytes").fill_null(0), "dur_ns": pl.col("dur_ns"), "name": name},
            cap,
        ),
        "uvm": _points(
            uvm, {"bytes": pl.col("bytes").fill_null(0), "dur_ns": pl.col("dur_ns")}, cap
        ),
    }


def evidence_series(pair: Pair, *, max_points: int = 1500) -> dict[str, Any]:
    """Samples behind the evidence of every mechanism, both runs, as JSON-ready lists.

    Args:
        pair: the aligned pair (``api.load_pair`` / ``api.pair``).
        max_points: cap on each list.

    Returns:
        ``{"steps": n, "max_points": cap, <section>: {"baseline": ..., "treatment": ...}}`` with
        sections ``launch_call``, ``launch_gap`` and ``gpu_idle_gap`` (``{"n", "ns"}``),
        ``copies`` (bytes, latency_ns, kind), ``copy_concurrency`` (streams, levels, ns),
        ``async_copies`` (host_ns, transfer_ns, bytes), ``collectives`` (bytes, dur_ns, name)
        and ``uvm`` (bytes, dur_ns); times in ns.
    """
    ctx = RuleContext.of(pair)
    sides = {s: _side(pair, ctx, s, max_points) for s in SIDES}
    out: dict[str, Any] = {"steps": pair.aligned.height, "max_points": max_points}
    for key in sides["baseline"]:
        out[key] = {s: sides[s][key] for s in SIDES}
    return out
