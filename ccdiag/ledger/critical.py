"""The critical-path ledger: GPU-critical windows, exposure of host intervals, per-step ledger.

Each step is exactly: exposed host time per category + GPU-critical time per GPU category
(:data:`ccdiag.ledger.vocab.HOST_CATEGORIES`, :data:`~ccdiag.ledger.vocab.GPU_CATEGORIES`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ccdiag.ledger.host import host_intervals
from ccdiag.ledger.vocab import (
    GPU_CATEGORIES,
    HOST_CATEGORIES,
    OP_CATEGORIES,
    RUN_GAP_NS,
    is_host_copy,
    per_value,
    prev_max_in_groups,
    same_keys_as,
    sort_once,
)


def gpu_runs(gpu: pl.DataFrame, by: list[str], tol: int = RUN_GAP_NS) -> pl.DataFrame:
    """Busy runs of the GPU rows grouped by ``by``: by, g0, g1.

    A row continues the run when it was launched before the GPU got free (it was queued behind
    the previous work: the GPU, not the host, decided when it started) or starts within ``tol``
    of the previous row's end. A row whose launch came after the GPU went idle starts a new run.
    """
    launch = pl.col("launch_end") if "launch_end" in gpu.columns else pl.lit(None, dtype=pl.Int64)
    g = gpu.select(
        *by, "start_ns", (pl.col("start_ns") + pl.col("dur_ns")).alias("e"), launch.alias("le")
    )
    g = g.sort(*by, "start_ns", maintain_order=True)  # stable: see ledger.gpu.union_ns
    # each group's rows are contiguous now: the latest end before each row and the runs counted
    # per group without windows over the groups (a window nested in another on a million rows)
    fast = prev_max_in_groups(g, by, "e")
    if fast is None:
        top = pl.col("e").cum_max().over(by)
        prev = top.shift(1).over(by)
    else:
        prev = pl.lit(fast)
        top = pl.max_horizontal(prev, "e")  # a group's first row: its own end
    queued = pl.col("le").is_not_null() & (pl.col("le") <= prev + 1000)
    new = ~(queued | (pl.col("start_ns") <= prev + tol)).fill_null(False)
    g = g.with_columns(new.alias("_new"), top.alias("_top"))
    # the runs begun so far in the row's group: the count over the frame less the count before
    # the group's first row
    seen = pl.col("_new").cum_sum()
    before = pl.when(~same_keys_as(by, 1)).then(seen - pl.col("_new").cast(pl.UInt32))
    g = g.with_columns((seen - before.forward_fill()).alias("run")).drop("_new")
    # a run's rows are contiguous: its first row's start, and the latest end so far at its last
    # row (a run starts after every earlier end, so that is the run's own latest end), without
    # a group-by over a million runs
    keys = [*by, "run"]  # (a null device or stream is a key like any other, as in a group-by)
    first, last = ~same_keys_as(keys, 1), ~same_keys_as(keys, -1)
    runs = pl.concat(
        [
            g.filter(first).select(*keys, pl.col("start_ns").alias("g0")),
            g.filter(last).select(pl.col("_top").alias("g1")),
        ],
        how="horizontal",
    )
    return runs.sort("g0")


def _runs(
    gpu: pl.DataFrame, by: tuple[str, ...], cache: dict[tuple[str, ...], pl.DataFrame] | None
) -> pl.DataFrame:
    """:func:`gpu_runs` of ``gpu`` by ``by`` (the device as Int32), from ``cache`` when there."""
    if cache is not None and by in cache:
        return cache[by]
    g = gpu.with_columns(pl.col("device").cast(pl.Int32)) if "device" in by else gpu
    out = gpu_runs(g, list(by))
    if cache is not None:
        cache[by] = out
    return out


def critical_windows(
    calls: pl.DataFrame, gpu: pl.DataFrame, runs: dict[tuple[str, ...], pl.DataFrame] | None = None
) -> pl.DataFrame:
    """GPU-critical windows: where the host waited for GPU work (disjoint, sorted per rank).

    A waiting call is a sync, or a host-crossing copy call that covered its GPU copy. The GPU busy
    run it ended on (the device's for a sync or a copy that waited on another stream, else the
    copy's stream's) gives
    ``[g0, min(g1, call end)]``: from there back to the run's start the GPU, not the host, was the
    critical path, and host work under it was hidden. A wait during which the GPU was idle is no
    window (it is host overhead). Columns rank, step, ws, we.

    ``runs``: a cache of ``gpu``'s busy runs by grouping, kept by the caller for this ``gpu``
    (the per-pair context: the same runs serve every window set of one run).
    """
    empty = pl.DataFrame(
        schema={"rank": pl.Int32, "step": pl.Int32, "ws": pl.Int64, "we": pl.Int64}
    )
    copy_wait = (pl.col("cls") == "copy") & pl.col("blocking") & is_host_copy().fill_null(False)
    if gpu.height == 0 or calls.height == 0:
        return empty
    cols: list[str | pl.Expr] = [
        "rank",
        "step",
        "w_start",
        pl.col("eff_start").alias("s"),
        pl.col("end_ns").alias("e"),
    ]
    syncs = calls.filter(pl.col("cls") == "sync").select(cols).sort("e")
    # a copy that started late while its own stream was idle waited on another stream (an event):
    # follow the device's busy run, like a sync; otherwise its own stream's run
    cross = (pl.col("gpu_start") - pl.col("start_ns") > 20_000) & (
        pl.col("stream_free_ns").fill_null(0) < pl.col("start_ns")
    )
    copies = calls.filter(copy_wait & ~cross).select(*cols, "device", "stream").sort("e")
    syncs = pl.concat([syncs, calls.filter(copy_wait & cross).select(cols)]).sort("e")
    parts = []
    if syncs.height:
        parts.append(
            syncs.join_asof(
                _runs(gpu, ("rank",), runs),
                left_on="e",
                right_on="g0",
                by="rank",
                check_sortedness=False,
            ).select("rank", "step", "w_start", "s", "e", "g0", "g1")
        )
    if copies.height:
        j = copies.with_columns(pl.col("device").cast(pl.Int32)).join_asof(
            _runs(gpu, ("rank", "device", "stream"), runs),
            left_on="e",
            right_on="g0",
            by=["rank", "device", "stream"],
            check_sortedness=False,
        )
        parts.append(j.select("rank", "step", "w_start", "s", "e", "g0", "g1"))
    if not parts:
        return empty
    w = pl.concat(parts).filter(pl.col("g1").is_not_null() & (pl.col("g1") > pl.col("s")))
    w = w.select(
        "rank",
        "step",
        pl.max_horizontal("g0", "w_start").alias("ws"),
        pl.min_horizontal("g1", "e").alias("we"),
    )
    w = w.sort("rank", "ws")
    prev = pl.col("we").cum_max().shift(1).over("rank")
    w = w.with_columns(pl.max_horizontal("ws", prev.fill_null(pl.col("ws"))).alias("ws"))
    return w.filter(pl.col("we") > pl.col("ws")).select(empty.columns) if w.height else empty


def _measure(x: pl.DataFrame, col: str, win: pl.DataFrame) -> pl.Series:
    """Window time before ``col`` (F(x) = total length of windows left of x), per row."""
    fast = _measure_sorted(x, col, win)
    if fast is not None:
        return fast
    x = sort_once(x.select("rank", col).with_row_index("_i"), col)  # the columns read here only
    j = x.join_asof(win, left_on=col, right_on="ws", by="rank", check_sortedness=False)
    f = pl.col("cum") + (pl.min_horizontal(pl.col(col), "we") - pl.col("ws")).clip(lower_bound=0)
    # back in the rows' order: each row once in the as-of join, so a scatter by its index (a
    # sort of the joined frame by it cost ~0.2 s on 2.6 M intervals)
    out = j.select("_i", f.fill_null(0).alias("_f"))
    vals = out.get_column("_f")
    zero = pl.zeros(vals.len(), dtype=vals.dtype, eager=True).alias("_f")
    return zero.scatter(out.get_column("_i"), vals)


def _measure_sorted(x: pl.DataFrame, col: str, win: pl.DataFrame) -> pl.Series | None:
    """:func:`_measure` by binary search, in the rows' order: each rank's windows are disjoint
    and in ``ws`` order, so the window a row's time falls after is found in them directly, with
    no sort of the rows (2.6 M host intervals) and no as-of join. The same integers (the last
    window starting at or before the time, as the backward as-of join picks). None (the join)
    for nulls or other than Int64 times."""
    ints = (x[col], x["rank"], win["rank"], win["ws"], win["we"], win["cum"])
    if any(s.null_count() for s in ints) or not all(
        s.dtype == pl.Int64 for s in (x[col], win["ws"], win["we"], win["cum"])
    ):
        return None
    xv, xr = x[col].to_numpy(), x["rank"].to_numpy()
    wr, ws, we, cum = (s.to_numpy() for s in ints[2:])
    out = np.zeros(xv.size, dtype=np.int64)
    ranks = np.unique(wr)
    one = ranks.size == 1 and bool((xr == ranks[0]).all())
    for r in ranks.tolist():
        on = wr == r
        s_, e_, c_ = ws[on], we[on], cum[on]
        if s_.size > 1 and not bool((s_[1:] > s_[:-1]).all()):
            return None
        sel = slice(None) if one else (xr == r)
        v = xv[sel]
        j = np.searchsorted(s_, v, side="right") - 1
        jj = np.maximum(j, 0)
        f = c_[jj] + np.maximum(np.minimum(v, e_[jj]) - s_[jj], 0)
        out[sel] = np.where(j >= 0, f, 0)
    return pl.Series("_f", out, dtype=pl.Int64)


def exposure(intervals: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Add ``exposed_ns`` (interval length outside GPU-critical windows) to host intervals."""
    length = pl.col("b") - pl.col("a")
    if windows.height == 0:
        return intervals.with_columns(length.alias("exposed_ns"))
    win = windows.sort("rank", "ws").with_columns(
        (pl.col("we") - pl.col("ws")).cum_sum().shift(1).over("rank").fill_null(0).alias("cum")
    )
    win = win.select("rank", "ws", "we", "cum").sort("ws")
    covered = _measure(intervals, "b", win) - _measure(intervals, "a", win)
    return intervals.with_columns((length - covered).clip(lower_bound=0).alias("exposed_ns"))


def window_classes(windows: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """Split each window's time over GPU classes by their busy time in it: rank, step, cat, ns."""
    if windows.height == 0:
        return pl.DataFrame(
            schema={"rank": pl.Int32, "step": pl.Int32, "cat": pl.String, "ns": pl.Float64}
        )
    # gpu_<class> once per distinct class; a copy's host crossing read off the copies alone
    gclass = {"cat": pl.concat_str(pl.lit("gpu_"), pl.col("gclass"))}
    cat = per_value(gpu.select("gclass"), "gclass", gclass).get_column("cat")
    copy = gpu.get_column("gclass") == "copy"
    crossing = is_host_copy().fill_null(False)
    label = pl.when(crossing).then(pl.lit("gpu_copy")).otherwise(pl.lit("gpu_other"))
    cat = cat.scatter(copy.arg_true(), gpu.filter(copy).select(label).to_series())
    g = gpu.select(
        "rank", pl.col("start_ns").alias("gs"), (pl.col("start_ns") + pl.col("dur_ns")).alias("ge")
    ).with_columns(cat.alias("cat"))
    win = windows.with_row_index("wid").sort("ws")
    j = g.sort("ge").join_asof(win, left_on="ge", right_on="ws", by="rank", check_sortedness=False)
    j = j.filter(pl.col("wid").is_not_null()).with_columns(
        (pl.min_horizontal("ge", "we") - pl.max_horizontal("gs", "ws"))
        .clip(lower_bound=0)
        .alias("ov")
    )
    per = j.group_by("wid", "cat").agg(pl.col("ov").sum())
    tot = per.group_by("wid").agg(pl.col("ov").sum().alias("tot"))
    w = (
        win.with_columns((pl.col("we") - pl.col("ws")).alias("len"))
        .join(tot, on="wid", how="left")
        .fill_null(0)
    )
    busy = pl.min_horizontal("tot", "len")
    idle = w.select(
        "rank",
        "step",
        pl.lit("gpu_idle").alias("cat"),
        (pl.col("len") - busy).cast(pl.Float64).alias("ns"),
    )
    share = per.join(w, on="wid").select(
        "rank",
        "step",
        "cat",
        (busy.cast(pl.Float64) * pl.col("ov").cast(pl.Float64) / pl.max_horizontal("tot", 1))
        .cast(pl.Float64)
        .alias("ns"),
    )
    return pl.concat([share, idle])


def ledger(
    calls: pl.DataFrame,
    gpu: pl.DataFrame,
    windows: pl.DataFrame,
    win: pl.DataFrame,
    host_only: bool,
    intervals: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per step: exposed host ns per category (+ ``<cat>_total``) and GPU-critical ns per class.

    ``win`` are the GPU-critical windows (:func:`critical_windows`); ``intervals`` the calls'
    :func:`~ccdiag.ledger.host.host_intervals` when the caller has them already.

    Columns rank, step, step_ns and every category of :data:`HOST_CATEGORIES` and
    :data:`GPU_CATEGORIES` (or :data:`OP_CATEGORIES` for host-only pairs). The categories add up
    to ``step_ns`` exactly.
    """
    cats = OP_CATEGORIES if host_only else HOST_CATEGORIES
    iv = exposure(host_intervals(calls, windows) if intervals is None else intervals, win)
    host = _host_sums(iv)
    wide = host.pivot("cat", index=["rank", "step"], values=["ns", "tot"], aggregate_function="sum")
    out = windows.select("rank", "step", (pl.col("end_ns") - pl.col("start_ns")).alias("step_ns"))
    out = out.join(_rename_pivot(wide), on=["rank", "step"], how="left")
    if not host_only:
        wc = window_classes(win, gpu)
        if wc.height:
            out = out.join(
                wc.pivot("cat", index=["rank", "step"], values="ns", aggregate_function="sum"),
                on=["rank", "step"],
                how="left",
            )
        cats = cats + GPU_CATEGORIES
    cols = [
        pl.col(c).fill_null(0).round(0).cast(pl.Int64)
        if c in out.columns
        else pl.lit(0, dtype=pl.Int64).alias(c)
        for c in cats
    ]
    tots = [
        pl.col(f"{c}_total").fill_null(0).cast(pl.Int64)
        if f"{c}_total" in out.columns
        else pl.lit(0, dtype=pl.Int64).alias(f"{c}_total")
        for c in (OP_CATEGORIES if host_only else HOST_CATEGORIES)
    ]
    return out.select("rank", "step", "step_ns", *cols, *tots).sort("rank", "step")


#: The labels :func:`ccdiag.ledger.host.host_intervals` gives its intervals.
INTERVAL_CATS = (
    "launch_api", "copy_api", "sync_api", "setup_api", "other_api", "op_launch", "op_copy_async",
    "op_copy", "op_sync", "op_other", "gap_launch", "gap_other",
)  # fmt: skip


def _host_sums(iv: pl.DataFrame) -> pl.DataFrame:
    """Per rank, step and cat: the intervals' exposed ns (``ns``) and length (``tot``). The
    three keys packed into one Int64 (rank, step, the label's code) for the group-by, not a
    group-by on a string column of 2.6 M intervals; the same sums, in another row order (the
    pivot after is by name). Else the group-by on the three columns."""
    sums = (pl.col("exposed_ns").sum().alias("ns"), (pl.col("b") - pl.col("a")).sum().alias("tot"))
    bounds = iv.select(
        pl.col("rank").min().alias("r0"), pl.col("rank").max().alias("r1"),
        pl.col("step").min().alias("s0"), pl.col("step").max().alias("s1"),
        pl.col("rank").null_count().alias("rn"), pl.col("step").null_count().alias("sn"),
    ).row(0, named=True)  # fmt: skip
    packable = (
        iv.height > 0
        and iv.schema["cat"] == pl.String
        and bounds["rn"] == 0
        and bounds["sn"] == 0
        and 0 <= bounds["r0"] <= bounds["r1"] < (1 << 20)
        and 0 <= bounds["s0"] <= bounds["s1"] < (1 << 32)
    )
    code = None
    if packable:
        try:  # a label not among INTERVAL_CATS (or a null) fails the cast: the group-by then
            code = iv.get_column("cat").cast(pl.Enum(INTERVAL_CATS)).to_physical()
        except pl.exceptions.PolarsError:
            code = None
    if code is None or code.null_count():
        return iv.group_by("rank", "step", "cat").agg(*sums)
    cats = pl.Series(INTERVAL_CATS, dtype=pl.String)
    key = pl.col("rank").cast(pl.Int64) * (1 << 38) + pl.col("step").cast(pl.Int64) * 32
    key = key + code.cast(pl.Int64)
    g = iv.select(key.alias("_k"), "exposed_ns", "a", "b").group_by("_k").agg(*sums)
    k = pl.col("_k")
    return g.select(
        (k // (1 << 38)).cast(iv.schema["rank"]).alias("rank"),
        ((k % (1 << 38)) // 32).cast(iv.schema["step"]).alias("step"),
        pl.lit(cats).gather(k % 32).alias("cat"),
        "ns",
        "tot",
    )


def _rename_pivot(wide: pl.DataFrame) -> pl.DataFrame:
    """Pivot columns ns_<cat> / tot_<cat> (or '<values>_cat_<cat>') -> <cat>, <cat>_total."""
    ren = {}
    for c in wide.columns[2:]:
        for pre, suf in (("ns_", ""), ("tot_", "_total")):
            if c.startswith(pre):
                ren[c] = c[len(pre) :].removeprefix("cat_") + suf
    return wide.rename(ren)
