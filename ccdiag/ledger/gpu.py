"""GPU rows of a run: class, step, busy time (union over streams), host copies with their call."""

from __future__ import annotations

import polars as pl

from ccdiag.ledger.host import assign_window, corr_key
from ccdiag.ledger.vocab import (
    API_KINDS,
    COPY_RE,
    GPU_KINDS,
    base_name,
    event_names,
    gpu_class,
    gpu_name_flags,
    is_host_copy,
    join_on_unique,
    per_value,
    prev_max_in_groups,
)


def gpu_rows(ev: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """GPU rows with their class, step (launch's step, else the window their start is in) and
    ``ev_row`` (their row in ``ev``)."""
    gpu = ev.with_row_index("ev_row").filter(pl.col("kind").is_in(GPU_KINDS))
    # the name's matches once per distinct name, not per row
    names = event_names(ev)
    by_name = per_value(
        gpu.select("name"), "name", gpu_name_flags(), names.at(gpu.get_column("ev_row"))
    )
    gclass = gpu_class(pl.lit(by_name["_uvm"]), pl.lit(by_name["_nccl"]))
    gpu = gpu.with_columns(gclass.alias("gclass")).with_row_index("_row")
    timed = assign_window(gpu.select("_row", "rank", "start_ns"), windows).select(
        "_row", pl.col("step").alias("_wstep")
    )
    # the window step of each row (a left join on the row index, as a scatter)
    wstep = pl.repeat(None, gpu.height, dtype=timed.schema["_wstep"], eager=True)
    gpu = gpu.with_columns(wstep.scatter(timed["_row"], timed["_wstep"]).alias("_wstep"))
    api_rows = pl.col("kind").is_in(API_KINDS) & pl.col("correlation").is_not_null()
    keep = ev.select(api_rows).to_series()
    calls = ev.select("pid", "correlation", "name", "start_ns", "dur_ns").filter(keep)
    # when the work was enqueued: a launch by the end of its call; a copy once its call started
    # (a copy call that blocks returns only after its copy ran)
    calls = per_value(calls, "name", {"_copy": base_name().str.contains(COPY_RE)},
                      names.keep(keep))  # fmt: skip
    queued = pl.when(pl.col("_copy")).then(pl.col("start_ns"))
    le = queued.otherwise(pl.col("start_ns") + pl.col("dur_ns")).alias("launch_end")
    pc = corr_key(ev)
    if pc is None:
        on = ["pid", "correlation"]
        calls = calls.select(*on, le).group_by(on).agg(pl.col("launch_end").min())
    else:  # the same groups and matches on one integer key
        on = ["_pc"]
        calls = calls.select(pc, le)
        if not _strictly_increasing(calls["_pc"]):  # else each key once: the min is its row
            calls = calls.group_by("_pc").agg(pl.col("launch_end").min())
    # the launch's end, joined on the key columns alone (each key once on the right) and added
    # to the rows: the join does not copy the ~20 columns of a million GPU rows; and whether
    # the row's own step is a window: its (rank, step) as one integer among the windows' (a
    # lookup in a few thousand, not a join)
    keyed = gpu.select(*(on if pc is None else [pc]), "rank", "step")
    if pc is None:
        keyed = keyed.join(calls, on=on, how="left", maintain_order="left")
    else:  # each key once on the right: binary search, not a hash join on 2.6 M calls
        keyed = join_on_unique(keyed, calls, "_pc")
    known = windows.select(_rank_step()).to_series().implode()
    ok = keyed.select(_rank_step().is_in(known).alias("_ok"))
    gpu = gpu.with_columns(keyed["launch_end"], ok["_ok"])
    step = pl.when(pl.col("_ok").fill_null(False)).then(pl.col("step")).otherwise(pl.col("_wstep"))
    gpu = gpu.with_columns(step.alias("step")).drop("_row", "_wstep", "_ok")
    # one chunk per column, as the joins on the whole frame gave: the added columns come in one
    # chunk, the rest as the filter of the events cut them, and polars panics on a frame whose
    # columns are cut at different rows (a copy of the columns, not a gather)
    return gpu.filter(pl.col("step").is_not_null()).rechunk()


def _rank_step() -> pl.Expr:
    """``rank`` and ``step`` (Int32) as one Int64, one to one (null where either is)."""
    return pl.col("rank").cast(pl.Int64) * (1 << 32) + (pl.col("step").cast(pl.Int64) & 0xFFFFFFFF)


def _strictly_increasing(s: pl.Series) -> bool:
    """No nulls and every value above the one before (API calls come in correlation order, so
    a group-by on the key would only copy the rows)."""
    return s.null_count() == 0 and bool((s.diff().drop_nulls() > 0).all())


def union_ns(
    df: pl.DataFrame, by: list[str], *, in_start_order: bool = False, grouped: bool = False
) -> pl.DataFrame:
    """Busy time (union of [start, start+dur)) and row count per group.

    ``in_start_order``: ``df`` is already in start order within each group (the sweep below only
    needs that). Sorts are stable (``maintain_order``): GPU rows come nearly in start order,
    which a stable sort exploits (5x less CPU than polars' unstable multi-key sort on them).
    ``grouped``: each group's rows are also contiguous (``df`` sorted by ``by``), so the latest
    end before each row comes without a window (:func:`prev_max_in_groups`)."""
    if not in_start_order:
        df = df.sort(*by, "start_ns", maintain_order=True)
    end = pl.col("start_ns") + pl.col("dur_ns")
    fast = None
    if grouped:
        fast = prev_max_in_groups(df.select(*by, end.alias("_e")), by, "_e")
    prev = end.cum_max().shift(1).over(by) if fast is None else pl.lit(fast)
    prev = prev.fill_null(pl.col("start_ns"))
    contrib = (end - pl.max_horizontal("start_ns", prev)).clip(lower_bound=0)
    return (
        df.with_columns(contrib.alias("_c"))
        .group_by(by)
        .agg(
            pl.col("_c").sum().alias("busy_ns"),
            pl.len().alias("n"),
            pl.col("dur_ns").sum().alias("sum_ns"),
        )
    )


def gpu_busy(gpu: pl.DataFrame) -> pl.DataFrame:
    """Per rank, step and class: busy_ns (union over streams and devices), n, sum_ns."""
    # one sort serves both groupings: within (rank, step, gclass) the rows stay in start order
    g = gpu.select("rank", "step", "gclass", "start_ns", "dur_ns")
    g = g.sort("rank", "step", "start_ns", maintain_order=True)
    # a class's rows, cut out in that order, are grouped by (rank, step) as well: its busy time
    # without a window over (rank, step, class)
    cls = g.schema["gclass"]
    per = pl.concat(
        union_ns(
            g.filter(pl.col("gclass").eq_missing(pl.lit(c, dtype=cls))),
            ["rank", "step"],
            in_start_order=True,
            grouped=True,
        ).select("rank", "step", pl.lit(c, dtype=cls).alias("gclass"), "busy_ns", "n", "sum_ns")
        for c in g.get_column("gclass").unique().to_list()
    )
    allc = union_ns(g, ["rank", "step"], in_start_order=True, grouped=True)
    allc = allc.with_columns(pl.lit("all").alias("gclass"))
    return pl.concat([per, allc.select(per.columns)])


SIZE_BUCKETS = (
    (0, 1024, "<1 KiB"),
    (1024, 65536, "1-64 KiB"),
    (65536, 1 << 20, "64 KiB-1 MiB"),
    (1 << 20, 16 << 20, "1-16 MiB"),
    (16 << 20, 1 << 62, ">=16 MiB"),
)


def size_bucket() -> pl.Expr:
    """Size bucket label of the ``bytes`` column."""
    b = pl.col("bytes").fill_null(0)
    expr = pl.lit(SIZE_BUCKETS[-1][2])
    for lo, hi, label in reversed(SIZE_BUCKETS[:-1]):
        expr = pl.when((b >= lo) & (b < hi)).then(pl.lit(label)).otherwise(expr)
    return expr


def copy_table(calls: pl.DataFrame) -> pl.DataFrame:
    """Host-crossing copy calls with their GPU copy: latency (exposed cost) and bucket."""
    c = calls.filter((pl.col("cls") == "copy") & pl.col("gpu_start").is_not_null())
    c = c.filter(is_host_copy())
    latency = (
        pl.when(pl.col("blocking"))
        .then(pl.max_horizontal("gpu_dur", pl.col("c_copy_self")))
        .otherwise(pl.col("gpu_dur"))
    )
    return c.with_columns(latency.alias("latency_ns"), size_bucket().alias("bucket"))
