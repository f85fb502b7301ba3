"""The main host thread's calls laid over the step windows: calls, gaps, labelled intervals.

:func:`host_calls` gives one row per main-thread API call (frame schema
:class:`ccdiag.ledger.schemas.HostCallSchema`); :func:`host_intervals` tiles each step window
with labelled host intervals (the host side of the ledger).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ccdiag import apis
from ccdiag.ledger.vocab import (
    API_KINDS,
    COPY_OPS,
    GPU_KINDS,
    LAUNCH_RE,
    SYNC_OPS,
    api_class,
    base_name,
    event_names,
    is_host_copy,
    join_first,
    per_value,
    prev_max_in_groups,
    sort_once,
)

#: A secondary thread whose API calls overlap the busiest thread's calls in time this often (share
#: of its calls, at least one) runs beside it, not in turn with it (:func:`thread_roles`).
CONCURRENT_SHARE = 0.02


def main_threads(
    ev: pl.DataFrame,
    *,
    host_only: bool = False,
    share: float = 0.1,
    beside: frozenset[tuple[int, int]] | None = None,
    roles: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The host threads that drive the GPU on each rank: columns rank, pid, tid.

    Threads of the busiest process whose launch + copy + sync calls are at least ``share`` of the
    busiest thread's (PyTorch's main thread and its autograd thread, say; not a watchdog that only
    polls events). Their calls are laid on one timeline: the step's host critical path hands over
    between them. A thread that runs *beside* the busiest one (:func:`thread_roles`: a drain
    worker that issues readbacks and waits for them while the main thread goes on) is not on
    that timeline: its waits would be read as the step's. ``beside``: the (rank, ordinal) of
    such threads (a pair decides for both runs, :func:`ccdiag.pairing.pair_traces`); by default
    this trace's own. ``roles``: :func:`thread_roles` of ``ev`` when the caller has them.
    Without API calls (host-only traces): the thread with the most cpu_ops.
    """
    roles = roles if roles is not None else thread_roles(ev, host_only=host_only, share=share)
    beside = beside_of(roles) if beside is None else beside
    kept = [(r, o) not in beside for r, o in roles.select("rank", "ordinal").iter_rows()]
    out = roles.filter(pl.Series(kept, dtype=pl.Boolean)) if roles.height else roles
    return out.select("rank", "pid", "tid").sort("rank", "tid")


def beside_of(*roles: pl.DataFrame) -> frozenset[tuple[int, int]]:
    """The (rank, ordinal) of the threads :func:`thread_roles` found beside the first one, in
    any of ``roles`` (a pair's two runs: the same program's threads)."""
    return frozenset(
        (r, o) for x in roles for r, o, c in x.select("rank", "ordinal", "beside").iter_rows() if c
    )


def thread_roles(ev: pl.DataFrame, *, host_only: bool = False, share: float = 0.1) -> pl.DataFrame:
    """The candidate main threads of :func:`main_threads` with their role: rank, pid, tid,
    ``ordinal`` (0 the thread of its rank that launches the most kernels, then by launches and
    launch + copy + sync calls) and ``beside``: a secondary thread whose API calls overlap the
    first thread's in time (``CONCURRENT_SHARE`` of its calls, at least one), or that launches
    no kernel while the first does, runs beside it. A thread the step hands over to (PyTorch's
    autograd thread: the main thread waits in ``backward()``) launches kernels and never
    overlaps it: 0 of 816-12,210 calls in every training pair of the truth matrix; a drain
    worker's readback and its wait overlapped in 1-25 of 30-31 calls (``serve_graph_drain*``)
    and in none where they all fell in the main thread's busy host gap (HELD-OUT-26)."""
    on_api = ev.select(pl.col("kind").is_in(API_KINDS) & pl.col("tid").is_not_null()).to_series()
    api = ev.select("rank", "pid", "tid", "kind", "name", "start_ns", "dur_ns").filter(on_api)
    if host_only or api.height == 0:
        rows = ev.filter((pl.col("kind") == "cpu_op") & pl.col("tid").is_not_null())
        top = rows.group_by("rank", "pid", "tid").agg(pl.len().alias("_score"))
        top = top.sort("rank", "_score", "pid", "tid", descending=[False, True, False, False])
        top = top.unique("rank", keep="first", maintain_order=True).select("rank", "pid", "tid")
        return top.with_columns(pl.lit(0).alias("ordinal"), pl.lit(False).alias("beside"))
    work = per_value(
        api,
        "name",
        {
            "_work": api_class().is_in(["launch", "copy", "sync"]),
            "_launch": api_class() == "launch",
        },
        event_names(ev).keep(on_api),
    )
    work = work.filter(pl.col("_work"))
    score = work.group_by("rank", "pid", "tid").agg(
        pl.len().alias("_score"), pl.col("_launch").sum().alias("_launches")
    )
    best = score.sort(
        "rank", "_score", "pid", "tid", descending=[False, True, False, False]
    ).unique("rank", keep="first", maintain_order=True)
    best = best.select("rank", pl.col("pid").alias("_pid"), pl.col("_score").alias("_best"))
    keep = score.join(best, on="rank").filter(
        (pl.col("pid") == pl.col("_pid")) & (pl.col("_score") >= share * pl.col("_best"))
    )
    # the thread that launches the most kernels first (a drain worker that issues more copies
    # and syncs than the main thread's one graph launch a step is still beside it)
    by = ["rank", "_launches", "_score", "tid"]
    keep = keep.sort(by, descending=[False, True, True, False]).with_columns(
        pl.int_range(pl.len()).over("rank").alias("ordinal")
    )
    return _with_beside(api.filter(~base_name().is_in(list(apis.QUERY_APIS))), keep)


def copies_off_main(ev: pl.DataFrame, threads: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Copy calls (API class copy) of the threads not in ``threads`` that start inside a step
    window: rank, tid, calls, ns (their traced time). No mechanism is measured from them (they
    are off the main threads' timeline: a drain worker, a loader); the pair says they exist."""
    schema = {"rank": pl.Int32, "tid": pl.Int64, "calls": pl.UInt32, "ns": pl.Int64}
    on_api = ev.select(pl.col("kind").is_in(API_KINDS) & pl.col("tid").is_not_null()).to_series()
    api = ev.select("rank", "pid", "tid", "name", "start_ns", "dur_ns").filter(on_api)
    if api.height == 0 or windows.height == 0:
        return pl.DataFrame(schema=schema)
    # the other threads' calls first (the main threads hold most of them), then their classes
    api = api.join(threads, on=["rank", "pid", "tid"], how="anti")
    api = per_value(api, "name", {"_copy": api_class() == "copy"}).filter(pl.col("_copy"))
    api = assign_window(api, windows)
    out = api.group_by("rank", "tid").agg(
        pl.len().alias("calls"), pl.col("dur_ns").sum().alias("ns")
    )
    return out.cast(schema).sort("rank", "tid")  # type: ignore[arg-type]


def _with_beside(api: pl.DataFrame, keep: pl.DataFrame) -> pl.DataFrame:
    """``keep`` (rank, pid, tid, ordinal, _launches) with ``beside``: the thread's calls overlap
    those of its rank's first thread (ordinal 0) in at least ``CONCURRENT_SHARE`` of them, at
    least once; or it launches no kernel while that thread does (it copies, records and waits
    for what the other launched: a drain worker whose calls all fall in the main thread's busy
    host gap, HELD-OUT-26's 6-layer graph loop, overlaps none of its calls)."""
    if keep.height == 0:  # API calls, but none that launches, copies or syncs
        return keep.select("rank", "pid", "tid", "ordinal").with_columns(
            pl.lit(False).alias("beside")
        )
    # only ranks with more than one candidate thread are checked, their calls joined once (a
    # job's trace holds hundreds of ranks, most with one thread)
    many = keep.filter(pl.len().over("rank") > 1)
    out = [keep.filter(pl.len().over("rank") == 1).with_columns(pl.lit(False).alias("beside"))]
    on = ["rank", "pid", "tid"]
    calls = api.join(many.select(*on, "ordinal"), on=on) if many.height else api.clear()
    by_rank = calls.partition_by("rank", as_dict=True) if calls.height else {}
    for rank in many["rank"].unique(maintain_order=True).to_list():
        th = many.filter(pl.col("rank") == rank)
        launches = dict(th.select("ordinal", "_launches").iter_rows())
        mine = by_rank.get((rank,), calls.clear())
        main = mine.filter(pl.col("ordinal") == 0).sort("start_ns")
        ms = main["start_ns"].to_numpy()
        me = np.maximum.accumulate((main["start_ns"] + main["dur_ns"]).to_numpy())
        flags = []
        for o in th["ordinal"].to_list():
            if o == 0 or ms.size == 0:
                flags.append(False)
                continue
            c = mine.filter(pl.col("ordinal") == o)
            s, e = c["start_ns"].to_numpy(), (c["start_ns"] + c["dur_ns"]).to_numpy()
            i = np.searchsorted(ms, e, side="left")  # main calls that start before each ends
            hit = (i > 0) & (me[np.maximum(i - 1, 0)] > s)
            n = int(hit.sum())
            waits_only = launches.get(o, 0) == 0 and launches.get(0, 0) > 0
            flags.append(waits_only or (n >= 1 and n >= CONCURRENT_SHARE * max(s.size, 1)))
        out.append(th.with_columns(pl.Series("beside", flags, dtype=pl.Boolean)))
    cols = ["rank", "pid", "tid", "ordinal", "beside"]
    return pl.concat([o.select(cols) for o in out]).sort("rank", "ordinal")


def on_threads(df: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """``df.join(threads, on=["rank", "pid", "tid"])``: the rows of the main threads, in
    ``df``'s order. A run has a thread or two per rank, so it is a filter on their ids (~40x less
    CPU than the hash join on a million events); a join for many threads, repeated rows or
    columns besides the ids."""
    keys = ["rank", "pid", "tid"]
    if threads.height > 64 or threads.columns != keys or threads.is_duplicated().any():
        return df.join(threads, on=keys)
    hit = pl.lit(False)
    for r, p, t in threads.iter_rows():
        hit = hit | ((pl.col("rank") == r) & (pl.col("pid") == p) & (pl.col("tid") == t))
    return df.filter(hit)


def corr_key(ev: pl.DataFrame) -> pl.Expr | None:
    """``pid`` and ``correlation`` packed into one Int64 (``pid * 2**32 + correlation``, null
    when either is) when every value of ``ev`` fits (both >= 0, pid < 2**31, correlation
    < 2**32), else None: the rows that join or group on the two columns join or group on it the
    same way, at about half the cost of a two-column key."""
    p, c = pl.col("pid"), pl.col("correlation")
    lo_p, hi_p, lo_c, hi_c = ev.select(
        p.min().alias("a"), p.max().alias("b"), c.min().alias("c"), c.max().alias("d")
    ).row(0)
    if None in (lo_p, hi_p, lo_c, hi_c) or lo_p < 0 or lo_c < 0:
        return None
    if hi_p >= 1 << 31 or hi_c >= 1 << 32:
        return None
    return (pl.col("pid") * (1 << 32) + pl.col("correlation")).alias("_pc")


def assign_window(df: pl.DataFrame, windows: pl.DataFrame, col: str = "start_ns") -> pl.DataFrame:
    """Add ``step``, ``w_start``, ``w_end`` to rows whose ``col`` lies in a step window."""
    w = windows.select(
        "rank", "step", pl.col("start_ns").alias("w_start"), pl.col("end_ns").alias("w_end")
    ).sort("w_start")
    out = sort_once(df.drop("step", strict=False), col).join_asof(
        w,
        left_on=col,
        right_on="w_start",
        by="rank",
        strategy="backward",
        check_sortedness=False,
    )
    return out.filter(pl.col(col) < pl.col("w_end"))


def _with_coverage(rows: pl.DataFrame) -> pl.DataFrame:
    """Clip calls to their window and make them non-overlapping (outer call wins)."""
    rows = sort_once(rows, "rank", "step", "start_ns", "dur_ns", descending=[False] * 3 + [True])
    end = pl.min_horizontal(pl.col("start_ns") + pl.col("dur_ns"), pl.col("w_end"))
    rows = rows.with_columns(end.alias("end_ns"))
    # in (rank, step) order: the latest end before each call in its step without a window
    fast = prev_max_in_groups(rows, ["rank", "step"], "end_ns")
    prev = (
        pl.col("end_ns").cum_max().shift(1).over("rank", "step") if fast is None else pl.lit(fast)
    )
    rows = rows.with_columns(
        pl.max_horizontal(prev.fill_null(pl.col("w_start")), "w_start").alias("prev_end")
    )
    eff_start = pl.max_horizontal("start_ns", "prev_end")
    return rows.with_columns(
        eff_start.alias("eff_start"),
        (pl.col("end_ns") - eff_start).clip(lower_bound=0).alias("eff_ns"),
        (pl.col("start_ns") - pl.col("prev_end")).clip(lower_bound=0).alias("gap_ns"),
    )


def _stream_free(ev: pl.DataFrame) -> pl.DataFrame:
    """For each GPU row: when its stream finished the work queued before it (and ``gpu_row``,
    its row in ``ev``)."""
    gpu = ev.with_row_index("gpu_row").select(
        "gpu_row", "pid", "device", "stream", "correlation", "start_ns", "dur_ns", "bytes",
        "copy_kind", "src_mem", "dst_mem", "kind", "name",
    )  # fmt: skip
    gpu = gpu.filter(pl.col("kind").is_in(GPU_KINDS) & pl.col("correlation").is_not_null())
    gpu = gpu.select(
        pl.col("gpu_row").cast(pl.Int64),
        "pid",
        "device",
        "stream",
        "correlation",
        "start_ns",
        "dur_ns",
        "bytes",
        "copy_kind",
        "src_mem",
        "dst_mem",
        "kind",
        pl.col("name").alias("gpu_name"),
    ).sort("pid", "device", "stream", "start_ns", maintain_order=True)  # stable: see union_ns
    end = pl.col("start_ns") + pl.col("dur_ns")
    # each stream's rows are contiguous now: the latest end before each row without a window
    by = ["pid", "device", "stream"]
    fast = prev_max_in_groups(gpu.select(*by, end.alias("_e")), by, "_e")
    prev = end.cum_max().shift(1).over(by) if fast is None else pl.lit(fast)
    return gpu.with_columns(prev.alias("stream_free_ns")).rename(
        {"start_ns": "gpu_start", "dur_ns": "gpu_dur", "kind": "gpu_kind"}
    )


def _extend_copies(ev: pl.DataFrame, api: pl.DataFrame) -> pl.DataFrame:
    """Copy calls last until the cpu_op that issued them returns (Kineto ``External id``).

    An interposer that blocks or pads *around* the runtime call (an LD_PRELOAD emulator) leaves
    the traced call short and the wait in the op that issued it; the copy is over when that op is.
    """
    copies = api.filter((pl.col("cls") == "copy") & pl.col("external_id").is_not_null())
    if copies.height == 0:
        return api
    keys = copies.select("pid", "external_id").unique()
    ops = ev.filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
    ops = ops.join(keys, on=["pid", "external_id"], how="semi")
    if ops.height == 0:
        return api
    op_end = ops.group_by("pid", "external_id").agg(
        (pl.col("start_ns") + pl.col("dur_ns")).min().alias("_op_end")
    )
    api = api.join(op_end, on=["pid", "external_id"], how="left")
    ext = pl.max_horizontal(pl.col("dur_ns"), pl.col("_op_end") - pl.col("start_ns"))
    return api.with_columns(
        pl.when((pl.col("cls") == "copy") & pl.col("_op_end").is_not_null())
        .then(ext)
        .otherwise(pl.col("dur_ns"))
        .alias("dur_ns")
    ).drop("_op_end")


#: Longest host gap between a copy call's return and a synchronize call that waits for it: the
#: copy is over when that sync returns (an issuing op's own code between the two is ~1 µs).
SYNC_AFTER_COPY_NS = 5_000


def merge_copy_syncs(api: pl.DataFrame) -> pl.DataFrame:
    """Copy calls without an issuing op (Nsight Systems) followed at once by a host-blocking
    synchronize on the same thread: one blocking copy call, lasting until the sync returns (the
    sync's row dropped; ``synced`` marks the merged calls).

    What :func:`_extend_copies` reads from the op, for traces without ops: PyTorch's blocking copy
    is ``cudaMemcpyAsync`` + ``cudaStreamSynchronize`` inside one ``aten::copy_``, and an
    interposer that makes a copy synchronous (an LD_PRELOAD emulator) leaves the sync beside the
    call, traced as its own (driver) call, where real CC keeps the wait inside the copy call.
    Merged, the placements give the same calls to the ledger and to the replay
    (``ccdiag.replay``). ``api`` needs rank, pid, tid, name, cls, start_ns, dur_ns and
    external_id; its row order is kept.
    """
    by = ["rank", "pid", "tid"]
    copy = (pl.col("cls") == "copy") & pl.col("external_id").is_null()
    end = pl.col("start_ns") + pl.col("dur_ns")
    rows = api.select(*by, "start_ns", end.alias("_end"), copy.alias("_copy")).with_row_index("_o")
    copies = rows.filter(pl.col("_copy")).sort("_end")
    if copies.height == 0:
        return api.with_columns(pl.lit(False).alias("synced"))
    # the first call on the copy's thread that starts at or after its return (a thread's calls
    # do not overlap)
    nxt = rows.select(*by, pl.col("start_ns").alias("_ns"), pl.col("_o").alias("_no"))
    hit = copies.join_asof(
        nxt.sort("_ns"),
        left_on="_end",
        right_on="_ns",
        by=by,
        strategy="forward",
        check_sortedness=False,
    ).filter(pl.col("_ns") - pl.col("_end") <= SYNC_AFTER_COPY_NS)
    names = api.get_column("name").gather(hit.get_column("_no")).to_frame()
    hit = hit.filter(names.select(apis.is_sync(pl.col("name"))).to_series())
    o, no = hit.get_column("_o").to_numpy(), hit.get_column("_no").to_numpy()
    start, dur = api.get_column("start_ns").to_numpy(), api.get_column("dur_ns").to_numpy().copy()
    dur[o] = start[no] + dur[no] - start[o]
    synced, keep = np.zeros(api.height, dtype=bool), np.ones(api.height, dtype=bool)
    synced[o], keep[no] = True, False
    out = api.with_columns(pl.Series("dur_ns", dur, dtype=api.schema["dur_ns"]))
    return out.with_columns(pl.Series("synced", synced)).filter(pl.Series(keep))


def host_calls(
    ev: pl.DataFrame, windows: pl.DataFrame, threads: pl.DataFrame, whole_program: bool = False
) -> pl.DataFrame:
    """Main-thread API calls in step windows, one row each, with their ledger contribution.

    Columns: ev_row (the call's row in ``ev``), rank, step, w_start, w_end, name, cls, start_ns, end_ns, eff_ns, gap_ns, the GPU
    row it launched (gpu_start, gpu_dur, gpu_name, bytes, copy_kind, stream, stream_free_ns),
    and per-category ns (``c_<category>``) for the call and the gap before it. In a
    whole-program trace the process's first CUDA runtime call is ``setup`` whatever its name: the
    runtime creates the context lazily inside it.
    """
    # the columns read here only, before the filters (a filter copies every column it keeps)
    read = ("rank", "pid", "kind", "name", "start_ns", "dur_ns", "correlation", "external_id")
    api = ev.with_row_index("ev_row").select("ev_row", *read, "tid")
    api = on_threads(api.filter(pl.col("kind").is_in(API_KINDS)), threads)
    api = api.select("ev_row", *read, "tid")
    # state queries (cuKernelGetName before each launch in nsys, cudaStreamIsCapturing) are host
    # code, not ledger boundaries: a toll paid before them still lies in the gap before the launch
    query = base_name().is_in(list(apis.QUERY_APIS))
    is_async = base_name().str.ends_with("Async")
    flags = {"cls": api_class(), "_query": query, "_async": is_async}
    api = per_value(api, "name", flags, event_names(ev).at(api.get_column("ev_row")))
    api = api.filter(~pl.col("_query")).drop("_query")
    if whole_program:
        # the first runtime call (driver probes such as cuModuleGetLoadingMode precede it), when
        # it lasts long enough to hold a context's creation: a trace cut out of a running
        # process (nsys-ai's mfu_2gpu windows) starts with an ordinary call, a copy whose CC
        # cost was then reported as one_time_setup
        rt_start = pl.when(pl.col("kind") == "runtime").then(pl.col("start_ns"))
        first = (pl.col("start_ns") == rt_start.min().over("rank", "pid")) & (
            pl.col("dur_ns") >= apis.CONTEXT_CALL_NS
        )
        api = api.with_columns(
            pl.when(first).then(pl.lit("setup")).otherwise(pl.col("cls")).alias("cls")
        )
    api = merge_copy_syncs(api).drop("tid", "synced")
    api = _extend_copies(ev, api.with_columns(pl.col("dur_ns").alias("raw_dur_ns")))
    rows = _with_coverage(assign_window(api, windows))
    gpu = _stream_free(ev)
    pc = corr_key(ev)
    if pc is None:
        gpu = gpu.unique(["pid", "correlation"], keep="first")
        rows = rows.join(gpu, on=["pid", "correlation"], how="left")
    else:  # the same first row per (pid, correlation), one integer key (not a unique over
        # every column, nor a filter and a sort of them)
        gpu = gpu.with_columns(pc).drop("pid", "correlation")
        rows = join_first(rows.with_columns(pc), gpu, "_pc").drop("_pc")
    # an async device-to-device copy is a command submission like a memset (CC neither stages
    # nor encrypts it): ledger class launch, not copy
    device_copy = (
        (pl.col("cls") == "copy")
        & pl.col("_async")
        & (pl.col("gpu_kind") == "memcpy")
        & ~is_host_copy().fill_null(True)
    )
    rows = rows.with_columns(
        pl.when(device_copy).then(pl.lit("launch")).otherwise(pl.col("cls")).alias("cls")
    )
    gpu_end = pl.col("gpu_start") + pl.col("gpu_dur")
    is_copy = pl.col("cls") == "copy"
    blocking = is_copy & pl.col("gpu_start").is_not_null() & (pl.col("end_ns") >= gpu_end)
    ready = pl.min_horizontal(pl.col("stream_free_ns").fill_null(0), "gpu_start")
    wait_end = pl.min_horizontal(pl.max_horizontal(ready, "eff_start"), "end_ns")
    rows = rows.with_columns(
        blocking.alias("blocking"),
        pl.when(blocking).then(wait_end - pl.col("eff_start")).otherwise(0).alias("_wait"),
    )
    cat = {
        "launch_api": pl.col("cls") == "launch",
        "sync_api": pl.col("cls") == "sync",
        "setup_api": pl.col("cls") == "setup",
        "other_api": pl.col("cls") == "other",
    }
    cols = [pl.when(c).then(pl.col("eff_ns")).otherwise(0).alias(f"c_{k}") for k, c in cat.items()]
    cols += [
        pl.when(is_copy & ~blocking).then(pl.col("eff_ns")).otherwise(0).alias("c_copy_issue"),
        pl.when(blocking).then(pl.col("_wait")).otherwise(0).alias("c_copy_wait"),
        pl.when(blocking)
        .then(pl.col("eff_ns") - pl.col("_wait"))
        .otherwise(0)
        .alias("c_copy_self"),
        pl.when(is_copy).then(pl.col("eff_ns") - pl.col("_wait")).otherwise(0).alias("c_copy_api"),
        pl.when(pl.col("cls") == "launch")
        .then(pl.col("gap_ns"))
        .otherwise(0)
        .alias("c_gap_launch"),
        pl.when(pl.col("cls") != "launch").then(pl.col("gap_ns")).otherwise(0).alias("c_gap_other"),
    ]
    return rows.with_columns(cols).drop("_wait", "_async")


def op_calls(
    ev: pl.DataFrame, windows: pl.DataFrame, threads: pl.DataFrame, launching_ops: pl.Series
) -> pl.DataFrame:
    """Host-only ledger rows: top-level cpu_ops on the main thread (see :data:`OP_CATEGORIES`).

    ``launching_ops`` names the ops that launched kernels in the baseline.
    """
    ops = on_threads(ev.filter(pl.col("kind") == "cpu_op"), threads)
    ops = ops.select("rank", "pid", "name", "start_ns", "dur_ns", "non_blocking", "external_id")
    rows = _with_coverage(assign_window(ops, windows))
    copy = pl.col("name").is_in(COPY_OPS)
    cls = (
        pl.when(copy & pl.col("non_blocking").fill_null(False))
        .then(pl.lit("op_copy_async"))
        .when(copy)
        .then(pl.lit("op_copy"))
        .when(pl.col("name").is_in(SYNC_OPS))
        .then(pl.lit("op_sync"))
        .when(pl.col("name").is_in(launching_ops.implode()))
        .then(pl.lit("op_launch"))
        .otherwise(pl.lit("op_other"))
    )
    rows = rows.with_columns(cls.alias("cls"))
    cols = [
        pl.when(pl.col("cls") == c).then(pl.col("eff_ns")).otherwise(0).alias(f"c_{c}")
        for c in ("op_launch", "op_copy_async", "op_copy", "op_sync", "op_other")
    ]
    top = pl.col("eff_ns") > 0
    cols += [
        pl.when(pl.col("cls") == "op_launch")
        .then(pl.col("gap_ns"))
        .otherwise(0)
        .alias("c_gap_launch"),
        pl.when(pl.col("cls") != "op_launch")
        .then(pl.col("gap_ns"))
        .otherwise(0)
        .alias("c_gap_other"),
        top.alias("top_level"),
    ]
    return rows.with_columns(cols)


def launching_op_names(ev: pl.DataFrame, windows: pl.DataFrame, threads: pl.DataFrame) -> pl.Series:
    """Names of top-level cpu_ops that issued at least 0.5 launches per call (baseline)."""
    ops = op_calls(ev, windows, threads, pl.Series([], dtype=pl.String))
    top = ops.filter(pl.col("top_level")).select(
        "rank", "name", "eff_start", (pl.col("eff_start") + pl.col("eff_ns")).alias("op_end")
    )
    api = on_threads(ev.filter(pl.col("kind").is_in(API_KINDS)), threads)
    launches = (
        api.filter(base_name().str.contains(LAUNCH_RE)).select("rank", "start_ns").sort("start_ns")
    )
    hit = launches.join_asof(
        top.sort("eff_start"),
        left_on="start_ns",
        right_on="eff_start",
        by="rank",
        check_sortedness=False,
    ).filter(pl.col("start_ns") < pl.col("op_end"))
    per_op = hit.group_by("name").len("launches").join(top.group_by("name").len("calls"), on="name")
    return per_op.filter(pl.col("launches") >= 0.5 * pl.col("calls"))["name"]


def host_intervals(calls: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The step windows tiled by labelled host intervals: rank, step, cat, a, b (ns).

    Each call gives its gap (before it) and its own interval; the tail after the last call is
    ``gap_other``; a step without calls is one ``gap_other`` interval.
    """
    cat_call = pl.col("cls").replace_strict(
        {
            "launch": "launch_api",
            "copy": "copy_api",
            "sync": "sync_api",
            "setup": "setup_api",
            "other": "other_api",
            "op_launch": "op_launch",
            "op_copy_async": "op_copy_async",
            "op_copy": "op_copy",
            "op_sync": "op_sync",
            "op_other": "op_other",
        },
        default="other_api",
        return_dtype=pl.String,
    )
    gap_cat = (
        pl.when(pl.col("cls").is_in(["launch", "op_launch"]))
        .then(pl.lit("gap_launch"))
        .otherwise(pl.lit("gap_other"))
    )
    keep = ["rank", "step", "cat", "a", "b"]
    # the labels once per call class, not per call
    cats = per_value(calls.select("cls"), "cls", {"_gap": gap_cat, "_own": cat_call})
    gaps = calls.select(
        "rank",
        "step",
        cats.get_column("_gap").alias("cat"),
        pl.col("prev_end").alias("a"),
        pl.col("start_ns").alias("b"),
    )
    own = calls.select(
        "rank",
        "step",
        cats.get_column("_own").alias("cat"),
        pl.col("eff_start").alias("a"),
        pl.col("end_ns").alias("b"),
    )
    last = calls.group_by("rank", "step").agg(pl.col("end_ns").max().alias("_last"))
    w = windows.select("rank", "step", "start_ns", "end_ns").join(
        last, on=["rank", "step"], how="left"
    )
    tail = w.select(
        "rank",
        "step",
        pl.lit("gap_other").alias("cat"),
        pl.max_horizontal(pl.col("_last").fill_null(pl.col("start_ns")), "start_ns").alias("a"),
        pl.col("end_ns").alias("b"),
    )
    out = pl.concat([gaps.select(keep), own.select(keep), tail.select(keep)])
    return out.filter(pl.col("b") > pl.col("a"))
