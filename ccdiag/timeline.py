"""One aligned step of both runs as compact event lists (``api.step_timeline``).

Lanes, top to bottom: the host threads' top-level ops, the main thread's CUDA API calls, the
host gaps before kernel launches, then per GPU stream its kernels, copies, collectives and UVM
activity. Each event carries the mechanism whose time it is (or ``None``):

- launch API calls and the host gaps before launches: ``launch_toll``
- copy API calls that covered their transfer: ``blocked_non_blocking`` for ``*Async`` calls,
  else ``serialized_copies``; host-crossing GPU copies: ``serialized_copies``
- sync API calls: ``sync_stall``; collectives: ``encrypted_collectives``; UVM: ``uvm_migration``

Times are ns from the step's start on that run's host timeline.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ccdiag.errors import InputError
from ccdiag.ledger import PairContext as RuleContext
from ccdiag.ledger import vocab as vc
from ccdiag.pairing import Pair, Side

NAME_CHARS = 160
_GPU_LANE = {"kernel": "kernels", "copy": "copies", "collective": "collectives", "uvm": "UVM"}
_GPU_MECH = {"collective": "encrypted_collectives", "uvm": "uvm_migration"}


def _frame(lane: pl.Expr, mech: pl.Expr, start: pl.Expr, dur: pl.Expr) -> dict[str, pl.Expr]:
    return {
        "lane": lane,
        "start_ns": start.cast(pl.Int64),
        "dur_ns": dur.cast(pl.Int64),
        "name": pl.col("name").cast(pl.String).str.slice(0, NAME_CHARS),
        "mechanism": mech,
    }


def _host_ops(side: Side, rank: int, w0: int, w1: int) -> pl.DataFrame:
    """Top-level cpu_ops of every host thread of the rank (nested ops left out)."""
    ev = side.trace.events.filter(
        (pl.col("rank") == rank)
        & (pl.col("kind") == "cpu_op")
        & (pl.col("start_ns") < w1)
        & (pl.col("start_ns") + pl.col("dur_ns") > w0)
    ).sort("tid", "start_ns")
    end = pl.col("start_ns") + pl.col("dur_ns")
    top = ev.filter((pl.col("start_ns") >= end.cum_max().shift(1).over("tid")).fill_null(True))
    main = set(side.threads.filter(pl.col("rank") == rank)["tid"].to_list())
    lane = pl.format("host thread {}: ops", pl.col("tid"))
    lane = pl.when(pl.col("tid").is_in(list(main))).then(pl.lit("main thread: ops")).otherwise(lane)
    return top.select(
        **_frame(lane, pl.lit(None, pl.String), pl.col("start_ns") - w0, pl.col("dur_ns"))
    )


def _api(calls: pl.DataFrame, step: int, rank: int, w0: int) -> pl.DataFrame:
    c = calls.filter((pl.col("rank") == rank) & (pl.col("step") == step))
    if c.height == 0 or "gap_ns" not in c.columns:
        return pl.DataFrame()
    return _api_rows(c).with_columns(pl.col("start_ns") - w0)


def _api_rows(c: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """Host API calls (and the gaps before launches) with their mechanism, absolute times;
    ``keep``: columns of ``c`` carried along (rank, step)."""
    host_only = "blocking" not in c.columns  # op_calls rows (CC 'on' traces): cpu_ops
    blocked = pl.lit(True) if host_only else pl.col("blocking").fill_null(False)
    cls = pl.col("cls").str.replace("^op_", "")
    mech = (
        pl.when(cls == "launch")
        .then(pl.lit("launch_toll"))
        .when(
            (cls == "copy_async")
            | ((cls == "copy") & blocked & pl.col("name").str.contains("Async"))
        )
        .then(pl.lit("blocked_non_blocking"))
        .when((cls == "copy") & blocked)
        .then(pl.lit("serialized_copies"))
        .when(cls == "sync")
        .then(pl.lit("sync_stall"))
        .otherwise(pl.lit(None, pl.String))
    )
    lane_api = "main thread: ops by class" if host_only else "main thread: CUDA API"
    api = c.select(*keep, **_frame(pl.lit(lane_api), mech, pl.col("eff_start"), pl.col("eff_ns")))
    gaps = c.filter((cls == "launch") & (pl.col("gap_ns") > 0)).select(
        *keep,
        **_frame(
            pl.lit("main thread: gap before launch"),
            pl.lit("launch_toll"),
            pl.col("eff_start") - pl.col("gap_ns"),
            pl.col("gap_ns"),
        ),
    )
    return pl.concat([api, gaps])


def _gpu(side: Side, step: int, rank: int, w0: int) -> pl.DataFrame:
    g = side.gpu.filter((pl.col("rank") == rank) & (pl.col("step") == step))
    if g.height == 0:
        return pl.DataFrame()
    return _gpu_rows(g).with_columns(pl.col("start_ns") - w0)


def _side(ctx: RuleContext, which: str, step: int, rank: int, cap: int) -> dict[str, Any]:
    side = ctx.pair.baseline if which == "baseline" else ctx.pair.treatment
    w = side.windows.filter((pl.col("rank") == rank) & (pl.col("step") == step))
    w0, w1 = w["start_ns"][0], w["end_ns"][0]
    calls = ctx.calls_b if which == "baseline" else ctx.calls_t
    parts = [_host_ops(side, rank, w0, w1), _api(calls, step, rank, w0), _gpu(side, step, rank, w0)]
    ev = pl.concat([p for p in parts if p.height], how="vertical_relaxed")
    ev = ev.filter(pl.col("dur_ns") > 0)
    n = ev.height
    if n > cap:  # keep the longest events: they carry the step's time
        ev = ev.sort("dur_ns", descending=True).head(cap)
    ev = ev.sort("lane", "start_ns")
    return {
        "step": int(step),
        "step_ns": int(w1 - w0),
        "n_events": n,
        "truncated": max(n - cap, 0),
        "events": {c: ev[c].to_list() for c in ev.columns},
    }


def step_timeline(
    pair: Pair, step_index: int, *, rank: int | None = None, max_events: int = 4000
) -> dict[str, Any]:
    """Events of one aligned step of both runs, laid out in lanes, as JSON-ready lists.

    Args:
        pair: the aligned pair.
        step_index: index of the aligned step (0 .. ``len(pair.aligned)`` of the rank - 1).
        rank: the rank to show; the first rank when None.
        max_events: cap per run (the shortest events are left out first; ``truncated`` counts).

    Returns:
        ``{"rank", "index", "n_steps", "lanes", "baseline", "treatment"}``; each run has
        ``step``, ``step_ns``, ``n_events``, ``truncated`` and ``events`` (lists ``lane``,
        ``start_ns``, ``dur_ns``, ``name``, ``mechanism``).

    Raises:
        InputError: no such rank or step.
    """
    ranks = pair.aligned["rank"].unique().sort().to_list()
    rank = ranks[0] if rank is None else rank
    rows = pair.aligned.filter(pl.col("rank") == rank).sort("idx")
    if rank not in ranks or not 0 <= step_index < rows.height:
        raise InputError("timeline", f"no aligned step {step_index} on rank {rank}")
    row = rows.row(step_index, named=True)
    ctx = RuleContext.of(pair)
    out: dict[str, Any] = {
        "rank": int(rank),
        "index": int(step_index),
        "n_steps": rows.height,
        "baseline": _side(ctx, "baseline", row["b_step"], rank, max_events),
        "treatment": _side(ctx, "treatment", row["t_step"], rank, max_events),
    }
    lanes = set(out["baseline"]["events"].get("lane", [])) | set(
        out["treatment"]["events"].get("lane", [])
    )
    out["lanes"] = sorted(lanes, key=_lane_order)
    return out


def _lane_order(lane: str) -> tuple[int, str]:
    if lane.startswith("main thread: ops"):
        return (0, lane)
    if lane.startswith("host thread"):
        return (1, lane)
    if lane.startswith("main thread"):
        return (2 if "API" in lane else 3, lane)
    return (4, lane)


def mechanism_intervals(
    ctx: RuleContext, mechanisms: set[str], *, max_per_mechanism: int = 20_000
) -> tuple[pl.DataFrame, dict[str, int]]:
    """The treatment's intervals that carry each mechanism's signature, over the aligned steps.

    The same mapping as the timeline lanes (module docstring): launch calls and the gaps before
    them, blocking copy calls, sync calls, host-crossing GPU copies, collectives, UVM activity.
    These are where a mechanism's time can live, not its attributed amount (the partition is per
    category and step, see ``ccdiag.engine``).

    Returns:
        (rank, step, start_ns, dur_ns, name, lane, mechanism) on the treatment's clock, sorted;
        and per mechanism how many intervals were left out beyond ``max_per_mechanism`` (the
        shortest go first).
    """
    side = ctx.pair.treatment
    steps = ctx.pair.aligned.select("rank", pl.col("t_step").alias("step")).unique()
    keep = ("rank", "step")
    frames: list[pl.DataFrame] = []
    calls = ctx.calls_t.join(steps, on=list(keep), how="semi")
    if calls.height and "gap_ns" in calls.columns:
        if "c_copy_wait" in calls.columns:  # blocking copy calls: see _blocked_copies
            blocked = (pl.col("cls") == "copy") & pl.col("blocking").fill_null(False)
            frames += [_api_rows(calls.filter(~blocked), keep), _blocked_copies(calls, keep)]
        else:
            frames.append(_api_rows(calls, keep))
    if not ctx.host_only:
        g = side.gpu.join(steps, on=list(keep), how="semi")
        if g.height:
            frames.append(_gpu_rows(g, keep))
    cols = ["rank", "step", "start_ns", "dur_ns", "name", "lane", "mechanism"]
    schema = dict.fromkeys(cols, pl.Int64) | dict.fromkeys(("name", "lane", "mechanism"), pl.String)
    ev = pl.concat(
        [
            f.select(pl.col(c).cast(t) for c, t in schema.items())
            for f in [pl.DataFrame(schema=schema), *frames]
        ]
    ).filter(pl.col("mechanism").is_in(sorted(mechanisms)) & (pl.col("dur_ns") > 0))
    left: dict[str, int] = {}
    kept = []
    for m in sorted(mechanisms):
        e = ev.filter(pl.col("mechanism") == m)
        if e.height > max_per_mechanism:
            left[m] = e.height - max_per_mechanism
            e = e.sort("dur_ns", descending=True, maintain_order=True).head(max_per_mechanism)
        kept.append(e)
    out = pl.concat([ev.clear(), *kept]).select(cols)
    out = out.sort("rank", "start_ns", "mechanism", maintain_order=True)
    return out, left


def _gpu_rows(g: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """GPU events with their mechanism, absolute times; ``keep``: columns carried along."""
    what = pl.col("gclass").replace_strict(_GPU_LANE, default="kernels")
    dev = pl.col("device").fill_null(0)
    lane = (
        pl.when(pl.col("stream").is_null())
        .then(pl.format("GPU {}: {}", dev, what))
        .otherwise(pl.format("GPU {} stream {}: {}", dev, pl.col("stream"), what))
    )
    mech = (
        pl.when((pl.col("gclass") == "copy") & vc.is_host_copy())
        .then(pl.lit("serialized_copies"))
        .otherwise(pl.col("gclass").replace_strict(_GPU_MECH, default=None))
    )
    return g.select(*keep, **_frame(lane, mech, pl.col("start_ns"), pl.col("dur_ns")))


def _blocked_copies(c: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """Blocking copy calls: an ``*Async`` call that returned only after its copy is
    ``blocked_non_blocking`` evidence as a whole; the call's own time after any wait for queued
    work is ``serialized_copies`` evidence (the two overlap: evidence, not a partition)."""
    b = c.filter((pl.col("cls") == "copy") & pl.col("blocking").fill_null(False))
    lane = pl.lit("main thread: CUDA API")
    is_async = pl.col("name").str.contains("Async")
    wait = b.filter(is_async).select(
        *keep, **_frame(lane, pl.lit("blocked_non_blocking"), pl.col("eff_start"), pl.col("eff_ns"))
    )
    own_start = pl.col("eff_start") + pl.when(is_async).then(pl.col("c_copy_wait")).otherwise(0)
    own_dur = pl.col("eff_ns") - pl.when(is_async).then(pl.col("c_copy_wait")).otherwise(0)
    own = b.select(*keep, **_frame(lane, pl.lit("serialized_copies"), own_start, own_dur))
    return pl.concat([wait, own])
