"""Shared polars expressions and tables for the rules and the attribution engine.

Everything here is a pure function of event frames (``ccdiag.schema.EventSchema``) and
step windows; no Python loops over events. The main pieces:

- :func:`api_class` sorts host API calls into launch / copy / sync / setup / other.
- :func:`main_threads` finds the host thread that issues the launches on each rank.
- :func:`host_calls` lays the main thread's calls over each step window and splits the window
  into labelled, non-overlapping intervals (the *ledger*, see :data:`HOST_CATEGORIES`).
- :func:`gpu_busy` is the GPU busy time per class (union over streams) per step.
- :func:`copy_table`, :func:`fit_toll_bandwidth`, :func:`copy_overlap`, :func:`quantile_shift`
  are the building blocks of the rules' evidence.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ccdiag import apis

# --------------------------------------------------------------------------- vocabulary

#: Host categories: the main thread's *exposed* time (outside GPU-critical windows) per kind.
HOST_CATEGORIES: tuple[str, ...] = (
    "launch_api",  # kernel / graph / memset submissions
    "gap_launch",  # host time outside any API call, right before a launch
    "copy_api",  # copy calls (issue cost; blocking calls: what is not covered by GPU work)
    "sync_api",  # synchronize calls while the GPU had nothing left to do (call overhead)
    "setup_api",  # allocation, context / module / stream creation
    "other_api",  # any other API call
    "gap_other",  # other host time outside API calls (framework, Python, data loading)
)
#: GPU-critical categories: windows where the host waited on GPU work, split by GPU class.
GPU_CATEGORIES: tuple[str, ...] = (
    "gpu_kernel",  # compute kernels
    "gpu_collective",  # NCCL / collective kernels
    "gpu_copy",  # host-crossing copies
    "gpu_other",  # device-to-device copies, memsets
    "gpu_uvm",  # unified-memory migrations
    "gpu_idle",  # gaps inside a window (launch latency, cross-stream waits)
)
#: Host-only (CC mode ``on``) categories: top-level cpu_ops instead of API calls; no GPU.
OP_CATEGORIES: tuple[str, ...] = (
    "op_launch",  # ops that launched kernels in the baseline
    "gap_launch",
    "op_copy_async",  # copy ops with non_blocking=True
    "op_copy",  # other copy ops
    "op_sync",  # readbacks / synchronizing ops (aten::item, _local_scalar_dense, ...)
    "op_other",
    "gap_other",
)
#: GPU classes of :func:`gpu_busy`.
GPU_CLASSES: tuple[str, ...] = ("kernel", "collective", "copy", "uvm")
#: Two GPU rows closer than this belong to one busy run (launch latency between queued kernels).
RUN_GAP_NS = 5_000

_LAUNCH = r"^cu(da)?(Launch|GraphLaunch|Memset)"
_COPY = r"^cu(da)?Memcpy"
_SYNC = r"^cu(da)?(Stream|Device|Event|Ctx)Synchronize"
_SETUP = (
    r"^cu(da)?(Malloc$|MallocHost|MallocManaged|MallocPitch|Malloc3D|Free$|FreeHost|HostAlloc"
    r"|HostRegister|HostUnregister|MemAlloc$|MemAllocHost|MemAllocManaged|MemFree$|MemFreeHost"
    r"|MemHostAlloc|MemHostRegister|GetDeviceProperties|DeviceGetAttribute|SetDevice|Init$"
    r"|CtxCreate|DevicePrimaryCtx|ModuleLoad|ModuleGetLoadingMode|LibraryLoad|ModuleUnload"
    r"|StreamCreate|StreamDestroy|EventCreate|EventDestroy|DeviceReset|GetDeviceCount"
    r"|DriverGetVersion|RuntimeGetVersion|FuncGetAttributes|FuncSetAttribute|MemGetInfo"
    r"|DeviceSetLimit|GraphInstantiate|GraphCreate|GraphDestroy|GraphExecDestroy"
    r"|StreamBeginCapture|StreamEndCapture)"
)
_COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone")
_SYNC_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::equal",
    "aten::is_nonzero",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
)
API_KINDS = ("runtime", "driver")
GPU_KINDS = ("kernel", "collective", "memcpy", "memset", "uvm_fault")


def num(x: object, default: float = 0.0) -> float:
    """A polars scalar (a series' mean, median or quantile: a number or None) as a float."""
    if isinstance(x, (int, float)):
        return float(x)
    return default


def base_name() -> pl.Expr:
    """API name without nsys version suffixes (``cudaMemcpyAsync_v3020`` -> ``cudaMemcpyAsync``)."""
    return apis.base_name(pl.col("name"))


def api_class() -> pl.Expr:
    """launch | copy | sync | setup | other, from the API name (sets in ``ccdiag.apis``)."""
    n = base_name()
    return (
        pl.when(n.is_in(list(apis.LAUNCH_APIS | apis.MEMSET_APIS)) | n.str.contains(_LAUNCH))
        .then(pl.lit("launch"))
        .when(n.is_in(list(apis.MEMCPY_APIS)) | n.str.contains(_COPY))
        .then(pl.lit("copy"))
        .when(n.is_in(list(apis.SYNC_APIS)) | n.str.contains(_SYNC))
        .then(pl.lit("sync"))
        .when(n.str.contains(_SETUP))
        .then(pl.lit("setup"))
        .otherwise(pl.lit("other"))
    )


def is_kernel_launch() -> pl.Expr:
    """True for kernel and graph launches (memset submissions excluded)."""
    return base_name().is_in(list(apis.LAUNCH_APIS)) | base_name().str.contains(
        r"^cu(da)?(Launch|GraphLaunch)"
    )


def is_graph_launch() -> pl.Expr:
    """True for CUDA graph launches."""
    return base_name().str.contains("GraphLaunch")


def gpu_class() -> pl.Expr:
    """kernel | collective | copy | uvm for GPU rows."""
    k, n = pl.col("kind"), pl.col("name")
    return (
        pl.when((k == "uvm_fault") | ((k == "memcpy") & n.str.contains("(?i)unified")))
        .then(pl.lit("uvm"))
        .when((k == "collective") | ((k == "kernel") & n.str.contains("(?i)^(void )?nccl")))
        .then(pl.lit("collective"))
        .when(k.is_in(["memcpy", "memset"]))
        .then(pl.lit("copy"))
        .otherwise(pl.lit("kernel"))
    )


def is_host_copy() -> pl.Expr:
    """A copy that crosses the host boundary (decided from memory kinds, not the label)."""
    host = ["pageable", "pinned", "managed"]
    return (
        pl.col("copy_kind").cast(pl.String).is_in(["HtoD", "DtoH", "HtoH"])
        | pl.col("src_mem").cast(pl.String).is_in(host)
        | pl.col("dst_mem").cast(pl.String).is_in(host)
    )


# --------------------------------------------------------------------------- threads, windows


def main_threads(ev: pl.DataFrame, *, host_only: bool = False, share: float = 0.1) -> pl.DataFrame:
    """The host threads that drive the GPU on each rank: columns rank, pid, tid.

    Threads of the busiest process whose launch + copy + sync calls are at least ``share`` of the
    busiest thread's (PyTorch's main thread and its autograd thread, say; not a watchdog that only
    polls events). Their calls are laid on one timeline: the step's host critical path hands over
    between them. Without API calls (host-only traces): the thread with the most cpu_ops.
    """
    api = ev.filter(pl.col("kind").is_in(API_KINDS) & pl.col("tid").is_not_null())
    if host_only or api.height == 0:
        rows = ev.filter((pl.col("kind") == "cpu_op") & pl.col("tid").is_not_null())
        top = rows.group_by("rank", "pid", "tid").agg(pl.len().alias("_score"))
        top = top.sort("rank", "_score", "pid", "tid", descending=[False, True, False, False])
        return top.unique("rank", keep="first", maintain_order=True).select("rank", "pid", "tid")
    work = api.with_columns(api_class().alias("cls")).filter(
        pl.col("cls").is_in(["launch", "copy", "sync"])
    )
    score = work.group_by("rank", "pid", "tid").agg(pl.len().alias("_score"))
    best = score.sort(
        "rank", "_score", "pid", "tid", descending=[False, True, False, False]
    ).unique("rank", keep="first", maintain_order=True)
    best = best.select("rank", pl.col("pid").alias("_pid"), pl.col("_score").alias("_best"))
    keep = score.join(best, on="rank").filter(
        (pl.col("pid") == pl.col("_pid")) & (pl.col("_score") >= share * pl.col("_best"))
    )
    return keep.select("rank", "pid", "tid").sort("rank", "tid")


def assign_window(df: pl.DataFrame, windows: pl.DataFrame, col: str = "start_ns") -> pl.DataFrame:
    """Add ``step``, ``w_start``, ``w_end`` to rows whose ``col`` lies in a step window."""
    w = windows.select(
        "rank", "step", pl.col("start_ns").alias("w_start"), pl.col("end_ns").alias("w_end")
    ).sort("w_start")
    out = (
        df.drop("step", strict=False)
        .sort(col)
        .join_asof(
            w,
            left_on=col,
            right_on="w_start",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
    )
    return out.filter(pl.col(col) < pl.col("w_end"))


# --------------------------------------------------------------------------- host ledger


def _with_coverage(rows: pl.DataFrame) -> pl.DataFrame:
    """Clip calls to their window and make them non-overlapping (outer call wins)."""
    rows = rows.sort(
        "rank", "step", "start_ns", pl.col("dur_ns"), descending=[False, False, False, True]
    )
    end = pl.min_horizontal(pl.col("start_ns") + pl.col("dur_ns"), pl.col("w_end"))
    rows = rows.with_columns(end.alias("end_ns"))
    prev = pl.col("end_ns").cum_max().shift(1).over("rank", "step")
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
    """For each GPU row: when its stream finished the work queued before it."""
    gpu = ev.filter(pl.col("kind").is_in(GPU_KINDS) & pl.col("correlation").is_not_null())
    gpu = gpu.select(
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
    ).sort("pid", "device", "stream", "start_ns")
    prev = (
        (pl.col("start_ns") + pl.col("dur_ns")).cum_max().shift(1).over("pid", "device", "stream")
    )
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


def host_calls(
    ev: pl.DataFrame, windows: pl.DataFrame, threads: pl.DataFrame, whole_program: bool = False
) -> pl.DataFrame:
    """Main-thread API calls in step windows, one row each, with their ledger contribution.

    Columns: rank, step, w_start, w_end, name, cls, start_ns, end_ns, eff_ns, gap_ns, the GPU
    row it launched (gpu_start, gpu_dur, gpu_name, bytes, copy_kind, stream, stream_free_ns),
    and per-category ns (``c_<category>``) for the call and the gap before it. In a
    whole-program trace the process's first CUDA runtime call is ``setup`` whatever its name: the
    runtime creates the context lazily inside it.
    """
    api = ev.filter(pl.col("kind").is_in(API_KINDS)).join(threads, on=["rank", "pid", "tid"])
    api = api.select(
        "rank", "pid", "kind", "name", "start_ns", "dur_ns", "correlation", "external_id"
    ).with_columns(api_class().alias("cls"))
    # state queries (cuKernelGetName before each launch in nsys, cudaStreamIsCapturing) are host
    # code, not ledger boundaries: a toll paid before them still lies in the gap before the launch
    api = api.filter(~base_name().is_in(list(apis.QUERY_APIS)))
    if (
        whole_program
    ):  # the first runtime call (driver probes such as cuModuleGetLoadingMode precede it)
        rt_start = pl.when(pl.col("kind") == "runtime").then(pl.col("start_ns"))
        first = pl.col("start_ns") == rt_start.min().over("rank", "pid")
        api = api.with_columns(
            pl.when(first).then(pl.lit("setup")).otherwise(pl.col("cls")).alias("cls")
        )
    api = _extend_copies(ev, api)
    rows = _with_coverage(assign_window(api, windows))
    gpu = _stream_free(ev).unique(["pid", "correlation"], keep="first")
    rows = rows.join(gpu, on=["pid", "correlation"], how="left")
    # an async device-to-device copy is a command submission like a memset (CC neither stages
    # nor encrypts it): ledger class launch, not copy
    device_copy = (
        (pl.col("cls") == "copy")
        & base_name().str.ends_with("Async")
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
    return rows.with_columns(cols).drop("_wait")


def op_calls(
    ev: pl.DataFrame, windows: pl.DataFrame, threads: pl.DataFrame, launching_ops: pl.Series
) -> pl.DataFrame:
    """Host-only ledger rows: top-level cpu_ops on the main thread (see :data:`OP_CATEGORIES`).

    ``launching_ops`` names the ops that launched kernels in the baseline.
    """
    ops = ev.filter(pl.col("kind") == "cpu_op").join(threads, on=["rank", "pid", "tid"])
    ops = ops.select("rank", "pid", "name", "start_ns", "dur_ns", "non_blocking", "external_id")
    rows = _with_coverage(assign_window(ops, windows))
    copy = pl.col("name").is_in(_COPY_OPS)
    cls = (
        pl.when(copy & pl.col("non_blocking").fill_null(False))
        .then(pl.lit("op_copy_async"))
        .when(copy)
        .then(pl.lit("op_copy"))
        .when(pl.col("name").is_in(_SYNC_OPS))
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
    api = ev.filter(pl.col("kind").is_in(API_KINDS)).join(threads, on=["rank", "pid", "tid"])
    launches = (
        api.filter(base_name().str.contains(_LAUNCH)).select("rank", "start_ns").sort("start_ns")
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
    gaps = calls.select(
        "rank",
        "step",
        gap_cat.alias("cat"),
        pl.col("prev_end").alias("a"),
        pl.col("start_ns").alias("b"),
    )
    own = calls.select(
        "rank",
        "step",
        cat_call.alias("cat"),
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
    g = g.sort(*by, "start_ns")
    prev = pl.col("e").cum_max().shift(1).over(by)
    queued = pl.col("le").is_not_null() & (pl.col("le") <= prev + 1000)
    new = ~(queued | (pl.col("start_ns") <= prev + tol)).fill_null(False)
    g = g.with_columns(new.cum_sum().over(by).alias("run"))
    runs = g.group_by(*by, "run").agg(
        pl.col("start_ns").min().alias("g0"), pl.col("e").max().alias("g1")
    )
    return runs.sort("g0")


def critical_windows(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """GPU-critical windows: where the host waited for GPU work (disjoint, sorted per rank).

    A waiting call is a sync, or a host-crossing copy call that covered its GPU copy. The GPU busy
    run it ended on (the device's for a sync or a copy that waited on another stream, else the
    copy's stream's) gives
    ``[g0, min(g1, call end)]``: from there back to the run's start the GPU, not the host, was the
    critical path, and host work under it was hidden. A wait during which the GPU was idle is no
    window (it is host overhead). Columns rank, step, ws, we.
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
                gpu_runs(gpu, ["rank"]),
                left_on="e",
                right_on="g0",
                by="rank",
                check_sortedness=False,
            ).select("rank", "step", "w_start", "s", "e", "g0", "g1")
        )
    if copies.height:
        runs = gpu_runs(
            gpu.with_columns(pl.col("device").cast(pl.Int32)), ["rank", "device", "stream"]
        )
        j = copies.with_columns(pl.col("device").cast(pl.Int32)).join_asof(
            runs,
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


def is_async_host_copy() -> pl.Expr:
    """A main-thread ``*Async`` copy call whose GPU copy crosses the host boundary."""
    return (
        (pl.col("cls") == "copy")
        & base_name().str.ends_with("Async")
        & pl.col("gpu_start").is_not_null()
        & is_host_copy().fill_null(False)
    )


def copy_windows(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """GPU-critical windows ended by blocked async host copies alone (rank, step, ws, we): the
    waits that a ``non_blocking`` copy call made by blocking (:func:`critical_windows` on those
    calls only)."""
    blocked = calls.filter(is_async_host_copy() & pl.col("blocking"))
    return critical_windows(blocked, gpu)


def _async_copies_with_next_wait(calls: pl.DataFrame) -> pl.DataFrame:
    """Async host copy calls with their ordinal ``k`` in the step and ``_next`` (the end of the
    host's next wait: a sync or a blocking copy; the step's end when none)."""
    c = calls.sort("rank", "step", "start_ns")
    is_wait = (pl.col("cls") == "sync") | ((pl.col("cls") == "copy") & pl.col("blocking"))
    nxt = (
        pl.when(is_wait)
        .then(pl.col("end_ns"))
        .otherwise(None)
        .shift(-1)
        .backward_fill()
        .over("rank", "step")
    )
    c = c.with_columns(nxt.fill_null(pl.col("w_end")).alias("_next")).filter(is_async_host_copy())
    return c.with_columns(pl.int_range(pl.len()).over("rank", "step").alias("k"))


def overlap_lengths(calls: pl.DataFrame) -> pl.DataFrame:
    """Per async host copy call (rank, step, k): ``L``, how long the host went on after the call
    returned while its copy (and the work queued before it) was still in flight, at most until
    its next wait returned. Had the call blocked until its copy ended, that host work (and the
    next wait's own call overhead) would have run after the copy instead: the baseline's
    overlap a blocking copy takes away."""
    c = _async_copies_with_next_wait(calls)
    until = pl.min_horizontal("_next", pl.col("gpu_start") + pl.col("gpu_dur"), "w_end")
    return c.select("rank", "step", "k", (until - pl.col("end_ns")).clip(lower_bound=0).alias("L"))


def post_copy_segments(calls: pl.DataFrame, lengths: pl.DataFrame) -> pl.DataFrame:
    """Host time right after each async host copy call, ``L`` long (``lengths``: rank, step, k,
    L, from :func:`overlap_lengths` of the baseline, on this run's steps) and at most until the
    host's next wait returned: where the host work a blocking copy displaces runs. Merged per
    step; columns rank, step, a, b."""
    c = _async_copies_with_next_wait(calls).join(lengths, on=["rank", "step", "k"], how="inner")
    b = pl.min_horizontal("_next", pl.col("end_ns") + pl.col("L"), "w_end")
    seg = c.select("rank", "step", pl.col("end_ns").alias("a"), b.alias("b"))
    seg = seg.filter(pl.col("b") > pl.col("a")).sort("rank", "step", "a")
    prev = pl.col("b").cum_max().shift(1).over("rank", "step")
    seg = seg.with_columns(pl.max_horizontal("a", prev.fill_null(pl.col("a"))).alias("a"))
    return seg.filter(pl.col("b") > pl.col("a"))


def clip_to_segments(iv: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """The parts of labelled host intervals (rank, step, cat, a, b) inside disjoint segments."""
    if seg.height == 0 or iv.height == 0:
        return iv.clear()
    s = seg.select("rank", "step", pl.col("a").alias("s0"), pl.col("b").alias("s1"))
    j = iv.join(s, on=["rank", "step"])
    j = j.with_columns(
        pl.max_horizontal("a", "s0").alias("a"), pl.min_horizontal("b", "s1").alias("b")
    )
    return j.filter(pl.col("b") > pl.col("a")).select(iv.columns)


def _measure(x: pl.DataFrame, col: str, win: pl.DataFrame) -> pl.Series:
    """Window time before ``col`` (F(x) = total length of windows left of x), per row."""
    j = (
        x.with_row_index("_i")
        .sort(col)
        .join_asof(win, left_on=col, right_on="ws", by="rank", check_sortedness=False)
    )
    f = pl.col("cum") + (pl.min_horizontal(pl.col(col), "we") - pl.col("ws")).clip(lower_bound=0)
    return j.with_columns(f.fill_null(0).alias("_f")).sort("_i")["_f"]


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
    cat = (
        pl.when(pl.col("gclass") == "copy")
        .then(
            pl.when(is_host_copy().fill_null(False))
            .then(pl.lit("gpu_copy"))
            .otherwise(pl.lit("gpu_other"))
        )
        .otherwise(pl.concat_str(pl.lit("gpu_"), pl.col("gclass")))
    )
    g = gpu.select(
        "rank",
        pl.col("start_ns").alias("gs"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("ge"),
        cat.alias("cat"),
    )
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
) -> pl.DataFrame:
    """Per step: exposed host ns per category (+ ``<cat>_total``) and GPU-critical ns per class.

    ``win`` are the GPU-critical windows (:func:`critical_windows`).

    Columns rank, step, step_ns and every category of :data:`HOST_CATEGORIES` and
    :data:`GPU_CATEGORIES` (or :data:`OP_CATEGORIES` for host-only pairs). The categories add up
    to ``step_ns`` exactly.
    """
    cats = OP_CATEGORIES if host_only else HOST_CATEGORIES
    iv = exposure(host_intervals(calls, windows), win)
    host = iv.group_by("rank", "step", "cat").agg(
        pl.col("exposed_ns").sum().alias("ns"), (pl.col("b") - pl.col("a")).sum().alias("tot")
    )
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


def _rename_pivot(wide: pl.DataFrame) -> pl.DataFrame:
    """Pivot columns ns_<cat> / tot_<cat> (or '<values>_cat_<cat>') -> <cat>, <cat>_total."""
    ren = {}
    for c in wide.columns[2:]:
        for pre, suf in (("ns_", ""), ("tot_", "_total")):
            if c.startswith(pre):
                ren[c] = c[len(pre) :].removeprefix("cat_") + suf
    return wide.rename(ren)


# --------------------------------------------------------------------------- GPU side


def gpu_rows(ev: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """GPU rows with their class and step (launch's step, else the window their start is in)."""
    gpu = ev.filter(pl.col("kind").is_in(GPU_KINDS)).with_columns(gpu_class().alias("gclass"))
    gpu = gpu.with_row_index("_row")
    timed = assign_window(gpu.select("_row", "rank", "start_ns"), windows).select(
        "_row", pl.col("step").alias("_wstep")
    )
    gpu = gpu.join(timed, on="_row", how="left")
    calls = ev.filter(pl.col("kind").is_in(API_KINDS) & pl.col("correlation").is_not_null())
    # when the work was enqueued: a launch by the end of its call; a copy once its call started
    # (a copy call that blocks returns only after its copy ran)
    queued = pl.when(base_name().str.contains(_COPY)).then(pl.col("start_ns"))
    calls = calls.group_by("pid", "correlation").agg(
        queued.otherwise(pl.col("start_ns") + pl.col("dur_ns")).min().alias("launch_end")
    )
    gpu = gpu.join(calls, on=["pid", "correlation"], how="left")
    known = windows.select("rank", pl.col("step").alias("_k"), pl.lit(True).alias("_ok"))
    gpu = gpu.join(known, left_on=["rank", "step"], right_on=["rank", "_k"], how="left")
    step = pl.when(pl.col("_ok").fill_null(False)).then(pl.col("step")).otherwise(pl.col("_wstep"))
    return (
        gpu.with_columns(step.alias("step"))
        .drop("_row", "_wstep", "_ok")
        .filter(pl.col("step").is_not_null())
    )


def union_ns(df: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Busy time (union of [start, start+dur)) and row count per group."""
    df = df.sort(*by, "start_ns")
    end = pl.col("start_ns") + pl.col("dur_ns")
    prev = end.cum_max().shift(1).over(by).fill_null(pl.col("start_ns"))
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
    per = union_ns(gpu, ["rank", "step", "gclass"])
    allc = union_ns(gpu, ["rank", "step"]).with_columns(pl.lit("all").alias("gclass"))
    return pl.concat([per, allc.select(per.columns)])


# --------------------------------------------------------------------------- copies

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


def fit_toll_bandwidth(df: pl.DataFrame, y: str = "latency_ns") -> dict[str, Any]:
    """Least squares ``y = toll + bytes / bandwidth``; toll in ns, bandwidth in GB/s, R²."""
    d = df.filter(pl.col("bytes").is_not_null()).select(
        pl.col("bytes").cast(pl.Float64).alias("x"), pl.col(y).cast(pl.Float64).alias("y")
    )
    if d.height < 2 or d["x"].n_unique() < 2:
        med = num(d["y"].median())
        return {"toll_ns": int(med), "gbps": None, "r2": None, "n": d.height}
    s = d.select(
        pl.cov("x", "y").alias("cxy"),
        pl.col("x").var().alias("vx"),
        pl.col("x").mean().alias("mx"),
        pl.col("y").mean().alias("my"),
        pl.corr("x", "y").alias("r"),
    ).row(0, named=True)
    slope = s["cxy"] / s["vx"] if s["vx"] else 0.0
    toll = s["my"] - slope * s["mx"]
    gbps = (1.0 / slope) if slope > 0 else None  # bytes per ns == GB/s
    r2 = None if s["r"] is None or np.isnan(s["r"]) else round(float(s["r"]) ** 2, 4)
    return {
        "toll_ns": int(toll),
        "gbps": None if gbps is None else round(gbps, 3),
        "r2": r2,
        "n": d.height,
    }


def copy_overlap(copies: pl.DataFrame) -> dict[str, Any]:
    """How much host-crossing copies overlap across streams (per step, pooled).

    ``concurrency`` = Σ copy durations / their union (1.0 = fully serialized).
    """
    if copies.height == 0:
        return {"streams": 0, "concurrency": None, "overlap_ratio": None}
    g = copies.select(
        "rank", "step", pl.col("gpu_start").alias("start_ns"), pl.col("gpu_dur").alias("dur_ns")
    )
    u = union_ns(g, ["rank", "step"]).select(pl.col("busy_ns").sum(), pl.col("sum_ns").sum()).row(0)
    busy, total = u
    conc = total / busy if busy else None
    return {
        "streams": copies["stream"].n_unique(),
        "concurrency": None if conc is None else round(conc, 3),
        "overlap_ratio": None if conc is None else round(1 - busy / total, 3),
    }


# --------------------------------------------------------------------------- statistics

PCTS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def percentiles(s: pl.Series) -> dict[str, int]:
    """p10 … p99 of a duration series (ns), as ints; empty dict for an empty series."""
    s = s.drop_nulls()
    if s.len() == 0:
        return {}
    return {f"p{int(q * 100)}": int(num(s.quantile(q, "linear"))) for q in PCTS}


def quantile_shift(base: pl.Series, treat: pl.Series) -> dict[str, Any]:
    """Shift of a distribution between runs, and how uniform it is.

    A fixed per-event toll moves every quantile by the same amount; framework noise moves
    the tail. ``shift_ns`` is the median of the p10/p25/p50 shifts; ``uniform`` says whether
    those three agree within 35 % of the shift (or 1 µs).
    """
    b, t = base.drop_nulls(), treat.drop_nulls()
    if b.len() == 0 or t.len() == 0:
        return {"shift_ns": 0, "uniform": False, "shifts": {}}
    qs = (0.1, 0.25, 0.5)
    sh = [num(t.quantile(q, "linear")) - num(b.quantile(q, "linear")) for q in qs]
    mid = float(np.median(sh))
    spread = max(sh) - min(sh)
    uniform = mid > 0 and spread <= max(0.35 * abs(mid), 1000.0)
    return {
        "shift_ns": int(mid),
        "uniform": bool(uniform),
        "shifts": {f"p{int(q * 100)}": int(v) for q, v in zip(qs, sh)},
    }


def bootstrap_median_ci(x: np.ndarray, n_boot: int = 2000, seed: int = 0) -> tuple[int, int]:
    """95 % bootstrap CI of the median of ``x`` (vectorized resampling)."""
    if x.size == 0:
        return (0, 0)
    if x.size == 1:
        return (int(x[0]), int(x[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    med = np.median(x[idx], axis=1)
    return (int(np.percentile(med, 2.5)), int(np.percentile(med, 97.5)))


# --------------------------------------------------------------------------- per-step copy facts


#: The per-step columns of :func:`copy_steps` that rules compare between runs.
COPY_STEP_COLS = [
    "blocked_async_ns", "n", "n_blocked", "blocked_self_ns", "async_api_ns", "n_async",
    "blocked_gpu_ns", "async_gpu_ns",
]  # fmt: skip


def copy_steps(copies: pl.DataFrame) -> pl.DataFrame:
    """Per step facts of host-crossing copies (rank, step, ...).

    - ``n``: copies; ``bytes``: bytes moved.
    - ``blocked_async_ns``: host time inside ``*Async`` copy calls that covered their GPU copy
      (waiting for queued work + the copy itself): the host blocked in an async call.
    - ``hidden_gpu_ns``: GPU time of copies whose call returned before the copy finished (the
      transfer ran behind the host's back).
    - ``async_busy_ns``: union of the GPU time of those non-covered copies.
    - ``blocked_self_ns``: host time inside blocked ``*Async`` calls after the queue drained (the
      copy itself and any host-side padding); ``async_api_ns``: host time inside ``*Async`` calls
      beyond any queue wait; ``n_async``: ``*Async`` copies; ``blocked_gpu_ns`` and
      ``async_gpu_ns``: GPU time of the blocked ``*Async`` copies and of all of them.
    """
    if copies.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int32})
    is_async = base_name().str.ends_with("Async")
    hidden = copies.filter(~pl.col("blocking")).select(
        "rank", "step", pl.col("gpu_start").alias("start_ns"), pl.col("gpu_dur").alias("dur_ns")
    )
    per = copies.group_by("rank", "step").agg(
        pl.len().alias("n"),
        pl.col("bytes").sum().alias("bytes"),
        pl.when(is_async & pl.col("blocking"))
        .then(pl.col("c_copy_wait") + pl.col("c_copy_self"))
        .otherwise(0)
        .sum()
        .alias("blocked_async_ns"),
        pl.when(~pl.col("blocking"))
        .then(pl.col("gpu_dur"))
        .otherwise(0)
        .sum()
        .alias("hidden_gpu_ns"),
        (is_async & pl.col("blocking")).sum().alias("n_blocked"),
        pl.when(is_async & pl.col("blocking"))
        .then(pl.col("c_copy_self"))
        .otherwise(0)
        .sum()
        .alias("blocked_self_ns"),
        pl.when(is_async).then(pl.col("c_copy_api")).otherwise(0).sum().alias("async_api_ns"),
        is_async.sum().alias("n_async"),
        pl.when(is_async & pl.col("blocking"))
        .then(pl.col("gpu_dur"))
        .otherwise(0)
        .sum()
        .alias("blocked_gpu_ns"),
        pl.when(is_async).then(pl.col("gpu_dur")).otherwise(0).sum().alias("async_gpu_ns"),
    )
    if hidden.height:
        u = union_ns(hidden, ["rank", "step"]).select(
            "rank", "step", pl.col("busy_ns").alias("async_busy_ns")
        )
        per = per.join(u, on=["rank", "step"], how="left")
    else:
        per = per.with_columns(pl.lit(0, dtype=pl.Int64).alias("async_busy_ns"))
    return per.with_columns(pl.col("async_busy_ns").fill_null(0))


def aligned_delta(
    aligned: pl.DataFrame, b: pl.DataFrame, t: pl.DataFrame, cols: list[str]
) -> pl.DataFrame:
    """Join per-step frames of both runs on the aligned index: b_<c>, t_<c>, d_<c> (nulls -> 0)."""
    a = aligned.select("rank", "idx", "b_step", "t_step")
    out = a
    for side, df in (("b", b), ("t", t)):
        have = [c for c in cols if c in df.columns]
        sel = df.select(
            "rank",
            pl.col("step").alias(f"{side}_step"),
            *[pl.col(c).alias(f"{side}_{c}") for c in have],
        )
        out = out.join(sel, on=["rank", f"{side}_step"], how="left")
        out = out.with_columns(pl.lit(0).alias(f"{side}_{c}") for c in cols if c not in have)
    out = out.fill_null(0)
    return out.with_columns((pl.col(f"t_{c}") - pl.col(f"b_{c}")).alias(f"d_{c}") for c in cols)


def bucket_table(cb: pl.DataFrame, ct: pl.DataFrame) -> list[dict[str, Any]]:
    """Per size bucket and run: count, median bytes, latency and GPU duration percentiles."""
    rows = []
    for side, df in (("baseline", cb), ("treatment", ct)):
        if df.height == 0:
            continue
        g = df.group_by("bucket").agg(
            pl.len().alias("n"),
            pl.col("bytes").median().alias("bytes"),
            pl.col("latency_ns").median().alias("latency_p50"),
            pl.col("latency_ns").quantile(0.9).alias("latency_p90"),
            pl.col("gpu_dur").median().alias("gpu_p50"),
        )
        for r in g.sort("bytes").iter_rows(named=True):
            rows.append(
                {
                    "run": side,
                    "bucket": r["bucket"],
                    "n": r["n"],
                    "bytes": int(r["bytes"] or 0),
                    "latency_p50_ns": int(r["latency_p50"]),
                    "latency_p90_ns": int(r["latency_p90"]),
                    "gpu_p50_ns": int(r["gpu_p50"]),
                }
            )
    return rows


def per_step_median(df: pl.DataFrame, expr: pl.Expr) -> float:
    """Median over steps of a per-step aggregate."""
    if df.height == 0:
        return 0.0
    return num(df.group_by("rank", "step").agg(expr.alias("v"))["v"].median())


def lost_overlap(calls: pl.DataFrame) -> pl.DataFrame:
    """Per step: host work that overlapped async host copies and would wait if they blocked.

    For each async (non-covering) host-crossing copy call: the host time from the call's end to
    the earlier of (the host's next wait: sync or blocking copy) and (the copy's GPU end). Had the
    call blocked until its copy ended, that host work would have run after the GPU instead of
    under it. Columns rank, step, overlap_ns, n_async.
    """
    c = calls.sort("rank", "step", "start_ns")
    is_wait = (pl.col("cls") == "sync") | ((pl.col("cls") == "copy") & pl.col("blocking"))
    nxt = (
        pl.when(is_wait)
        .then(pl.col("start_ns"))
        .otherwise(None)
        .shift(-1)
        .backward_fill()
        .over("rank", "step")
    )
    c = c.with_columns(nxt.fill_null(pl.col("w_end")).alias("_next"))
    a = c.filter(
        (pl.col("cls") == "copy")
        & ~pl.col("blocking")
        & pl.col("gpu_start").is_not_null()
        & is_host_copy()
    )
    until = pl.min_horizontal("_next", pl.col("gpu_start") + pl.col("gpu_dur"), "w_end")
    a = a.with_columns((until - pl.col("end_ns")).clip(lower_bound=0).alias("_ov"))
    return a.group_by("rank", "step").agg(
        pl.col("_ov").sum().alias("overlap_ns"), pl.len().alias("n_async")
    )


# --------------------------------------------------------------------------- evidence helpers


def both(f: Any, b: Any, t: Any) -> dict[str, Any]:
    """``{"baseline": f(b), "treatment": f(t)}``."""
    return {"baseline": f(b), "treatment": f(t)}


def top_list(df: pl.DataFrame, by: str, n_rows: int = 5, **cols: pl.Expr) -> list[dict[str, Any]]:
    """Group by ``by``, aggregate ``cols``, sort by the first aggregate; first ``n_rows``."""
    if df.height == 0:
        return []
    first = next(iter(cols))
    g = df.group_by(by).agg(**cols).sort([first, by], descending=[True, False]).head(n_rows)
    return [
        {
            k: (v[:120] if isinstance(v, str) else int(v) if isinstance(v, float) else v)
            for k, v in r.items()
        }
        for r in g.iter_rows(named=True)
    ]


def _pure_host_ops(ev: pl.DataFrame, limit: int = 200_000) -> pl.DataFrame:
    """cpu_ops that contain no CUDA API call (on their thread) and are no copy / sync op.

    Only the first ``limit`` cpu_ops (by time) are looked at: a sample is enough for a ratio.
    """
    ops_all = ev.filter(pl.col("kind") == "cpu_op")
    if ops_all.height > limit:
        cut = ops_all["start_ns"].sort()[limit]
        ev = ev.filter(pl.col("start_ns") < cut)
    api = (
        ev.filter(pl.col("kind").is_in(API_KINDS)).select("pid", "tid", "start_ns").sort("start_ns")
    )
    api = api.with_columns(pl.int_range(1, pl.len() + 1).over("pid", "tid").alias("k"))
    ops = ev.filter((pl.col("kind") == "cpu_op") & ~pl.col("name").is_in([*_COPY_OPS, *_SYNC_OPS]))
    ops = ops.select("pid", "tid", "name", "start_ns", "dur_ns").with_row_index("_i")

    def count_at(col: pl.Expr) -> pl.DataFrame:
        x = ops.select("_i", "pid", "tid", col.alias("t")).sort("t")
        j = x.join_asof(
            api, left_on="t", right_on="start_ns", by=["pid", "tid"], check_sortedness=False
        )
        return j.select("_i", pl.col("k").fill_null(0))

    k0 = count_at(pl.col("start_ns")).rename({"k": "k0"})
    k1 = count_at(pl.col("start_ns") + pl.col("dur_ns")).rename({"k": "k1"})
    ops = ops.join(k0, on="_i").join(k1, on="_i")
    return ops.filter(pl.col("k1") == pl.col("k0"))


def host_slowdown(ev_b: pl.DataFrame, ev_t: pl.DataFrame) -> dict[str, Any]:
    """How much slower host code got, outside CUDA calls: the control for per-call tolls.

    Ratio treatment/baseline of the median duration of cpu_op kinds that contain no CUDA API call
    and are no copy or sync op (view, empty, as_strided, ...), the call-weighted median over kinds
    with at least 10 calls in both runs. CC adds no cost to them; when they slow down, so does all
    host code (CPU frequency, contention, profiler or emulator side effects). 1.0 when unknown.
    ``mean_ratio``: the ratio of their total time at the baseline's call counts (sees preemption).
    """

    def per(ev: pl.DataFrame) -> pl.DataFrame:
        ops = _pure_host_ops(ev)
        return ops.group_by("name").agg(
            pl.len().alias("n"),
            pl.col("dur_ns").median().alias("m"),
            pl.col("dur_ns").mean().alias("mean"),
        )

    j = per(ev_b).join(per(ev_t), on="name", suffix="_t")
    j = j.filter((pl.col("n") >= 10) & (pl.col("n_t") >= 10) & (pl.col("m") > 0))
    if j.height == 0:
        return {"ratio": 1.0, "mean_ratio": 1.0, "op_kinds": 0, "ops": []}
    j = j.with_columns((pl.col("m_t") / pl.col("m")).alias("r"))
    w = j.sort("r").with_columns((pl.col("n").cum_sum() / pl.col("n").sum()).alias("c"))
    ratio = float(w.filter(pl.col("c") >= 0.5)["r"][0])
    # the same ops' mean time, weighted by the baseline's calls: a neighbour that preempts the
    # thread now and then leaves the medians alone but not the means
    mean_ratio = num((j["mean_t"] * j["n"]).sum()) / max(num((j["mean"] * j["n"]).sum()), 1.0)
    ops = [
        {
            "op": r["name"],
            "calls": r["n"],
            "median_ns": {"baseline": int(r["m"]), "treatment": int(r["m_t"])},
        }
        for r in j.sort(["n", "name"], descending=[True, False]).head(5).iter_rows(named=True)
    ]
    return {
        "ratio": round(ratio, 3),
        "mean_ratio": round(mean_ratio, 3),
        "op_kinds": j.height,
        "ops": ops,
    }


def toll_fit(base: pl.Series, treat: pl.Series) -> dict[str, Any]:
    """Fit treatment quantiles = toll + slope x baseline quantiles (p10..p90, least squares).

    A CC toll adds a constant to every call (``toll_ns`` > 0, slope ~1); host code that merely
    got slower scales them (toll ~0, slope > 1). Both at once give both.
    """
    b, t = base.drop_nulls(), treat.drop_nulls()
    if b.len() < 5 or t.len() < 5:
        return {"toll_ns": 0, "slope": 1.0}
    qs = np.linspace(0.1, 0.9, 9)
    qb = np.array([b.quantile(q, "linear") for q in qs], dtype=float)
    qt = np.array([t.quantile(q, "linear") for q in qs], dtype=float)
    if np.ptp(qb) <= 0:
        return {"toll_ns": int(np.median(qt - qb)), "slope": 1.0}
    slope, toll = np.polyfit(qb, qt, 1)
    return {"toll_ns": int(toll), "slope": round(float(slope), 3)}


def step_totals(aligned: pl.DataFrame, b: pl.DataFrame, t: pl.DataFrame, col: str) -> pl.DataFrame:
    """Per aligned step: the total of ``col`` in both runs (b_, t_, d_) and the treatment's row
    count ``n``."""

    def per(df: pl.DataFrame) -> pl.DataFrame:
        return df.group_by("rank", "step").agg(pl.col(col).sum(), pl.len().alias("n"))

    return aligned_delta(aligned, per(b), per(t), [col, "n"]).rename({"t_n": "n"})


#: GPU-critical ledger category -> GPU busy class whose own growth explains it.
GPU_BUSY: dict[str, str | None] = {
    "gpu_kernel": "kernel",
    "gpu_collective": "collective",
    "gpu_copy": "copy",
    "gpu_uvm": "uvm",
    "gpu_idle": None,
}


def exposure_growth(ledger: pl.DataFrame, seg: pl.DataFrame, c: str) -> pl.DataFrame:
    """Per aligned step (rank, idx, x): exposed growth of host category ``c`` beyond its own
    growth (work that ran under the GPU before), at most its exposure growth in ``seg``
    (``d_<c>``: the host time after async copies, where a blocking copy pushes host work)."""
    j = ledger.join(seg, on=["rank", "idx"], how="left", suffix="_seg")
    x = pl.col(f"d_{c}") - pl.col(f"d_{c}_total").clip(lower_bound=0)
    x = pl.min_horizontal(x, pl.col(f"d_{c}_seg").fill_null(0))
    return j.select("rank", "idx", x.clip(lower_bound=0).alias("x"))


def gpu_exposure_growth(
    ledger: pl.DataFrame, busy: pl.DataFrame, win: pl.DataFrame, c: str
) -> pl.DataFrame:
    """Per aligned step (rank, idx, x): growth of GPU-critical category ``c`` beyond its GPU
    work's own growth (GPU time the host now waits for), at most its growth in ``win``
    (``d_<c>``: waits ended by blocked async copies; a GPU slowdown that exposes formerly hidden
    GPU time elsewhere is not the copy's doing)."""
    j = ledger.join(busy, on=["rank", "idx"], how="left")
    j = j.join(win, on=["rank", "idx"], how="left", suffix="_win")
    cls = GPU_BUSY[c]
    own = pl.col(f"d_{cls}").fill_null(0).clip(lower_bound=0) if cls else pl.lit(0)
    x = pl.min_horizontal(pl.col(f"d_{c}") - own, pl.col(f"d_{c}_win").fill_null(0))
    return j.select("rank", "idx", x.clip(lower_bound=0).alias("x"))


def per_call_tolls(
    lb: pl.DataFrame, lt: pl.DataFrame, found: dict[tuple[str, str], Any], clean: bool
) -> dict[tuple[str, str], float]:
    """The toll per launch call, per (launch API, column) with a fitted toll (``found``: their
    :func:`toll_fit`). ``clean``: the control (:func:`host_slowdown`, cpu_ops that make no CUDA
    call) says host code did not get slower, so the whole mean growth per call is the toll.
    Otherwise (slower host code, or no control: Nsight traces have no cpu_ops) the fit's additive
    constant, its slope standing for the slowdown, whatever its form (a ratio, or a profiler's
    cost per recorded op)."""
    out = {}
    for (api, col), fit in found.items():
        b, t = (d.filter(base_name() == api)[col] for d in (lb, lt))
        if clean:
            mean_t, mean_b = num(t.mean()), num(b.mean())
            out[(api, col)] = max(mean_t - mean_b, 0.0)
        else:
            out[(api, col)] = float(fit["toll_ns"])
    return out


def toll_claims(
    aligned: pl.DataFrame, lb: pl.DataFrame, lt: pl.DataFrame, col: str, tolls: dict[str, float]
) -> pl.DataFrame:
    """Per aligned step (rank, idx, c): the growth of ``col`` (launch calls' ``eff_ns`` or
    ``gap_ns``) times the tolls' share of it over all steps, Σ launches x toll per call / Σ
    growth, at most 1. (A per-step cap would clip the noisy steps above it: a low bias.)"""
    per = step_totals(aligned, lb, lt, col)
    toll = base_name().replace_strict(tolls, default=0.0, return_dtype=pl.Float64)
    cap = lt.group_by("rank", "step").agg(toll.sum().alias("cap"))
    a = aligned.select("rank", "idx", pl.col("t_step").alias("step"))
    per = per.join(a.join(cap, on=["rank", "step"], how="left").drop("step"), on=["rank", "idx"])
    grew = float(per[f"d_{col}"].sum())
    share = min(float(per["cap"].fill_null(0).sum()) / grew, 1.0) if grew > 0 else 0.0
    return per.select("rank", "idx", (pl.col(f"d_{col}") * share).alias("c"))


def replay_without_launch_toll(pair: Any, tolls: dict[str, int]) -> float | None:
    """Counterfactual check: the treatment replayed (``ccdiag.replay``) with the fitted toll taken
    off every launch (``tolls``: ``eff_ns`` in the call, ``gap_ns`` before it); the mean step
    time saved over the aligned steps. None for large traces and host-only pairs."""
    t = pair.treatment.trace
    if pair.mode == "host_only" or not tolls or t.events.height > 300_000:
        return None
    from ccdiag.replay import Injection, replay  # late: ccdiag.replay imports this module

    out = t
    for col, toll in tolls.items():
        out = replay(out, Injection(launch_toll_ns=-int(toll), launch_toll_in_gap=col == "gap_ns"))
    steps = pair.aligned["t_step"].implode()
    before = t.steps.filter(pl.col("step").is_in(steps))["dur_ns"]
    after = out.steps.filter(pl.col("step").is_in(steps))["dur_ns"]
    return float((before - after).mean() or 0.0)


def padding_interaction(st: pl.DataFrame, led: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    """Per step: copy cost that is exposed only because the copy call blocked first.

    Under CC a copy costs more of its own (``serialized_copies``): host time (staging,
    encryption) and a longer transfer. While an async copy returns at once, its own extra host
    time runs while the GPU still works through its queue, hidden up to the host's slack (the
    time the baseline's host waited for the GPU in the step: its GPU-critical time), and its
    longer transfer runs while the host keeps going, hidden up to the GPU's slack (the baseline
    step minus its GPU busy time). A blocked call waits for the queue first, so both run with
    the other side idle. The part that would have been hidden, per side min(growth, slack), is
    an interaction of the two mechanisms (CP02 declares it; the engine halves it).

    ``st``: :func:`aligned_delta` of :func:`copy_steps` (``n_blocked``, ``blocked_self_ns``,
    ``async_api_ns``, ``n_async``, ``blocked_gpu_ns``, ``async_gpu_ns``); ``led``: the ledger;
    ``busy``: GPU busy per step. Returns rank, idx, ns.
    """

    def per_copy(col: str) -> pl.Expr:
        return pl.col(f"b_{col}") / pl.max_horizontal(pl.col("b_n_async"), pl.lit(1))

    own = (pl.col("t_blocked_self_ns") - per_copy("async_api_ns") * pl.col("t_n_blocked")).clip(
        lower_bound=0
    )
    gpu_grow = pl.col("t_blocked_gpu_ns") - per_copy("async_gpu_ns") * pl.col("t_n_blocked")
    gpu_part = pl.min_horizontal(gpu_grow.clip(lower_bound=0), own)
    host_slack = pl.sum_horizontal(
        [pl.col(f"b_{c}") for c in GPU_CATEGORIES if f"b_{c}" in led.columns]
    )
    gpu_slack = (pl.col("b_step_ns") - pl.col("b_all")).clip(lower_bound=0)
    j = (
        st.select("rank", "idx", own.alias("own"), gpu_part.alias("gpu_part"))
        .join(
            led.select("rank", "idx", "b_step_ns", host_slack.alias("host_slack")),
            on=["rank", "idx"],
            how="inner",
        )
        .join(busy.select("rank", "idx", "b_all"), on=["rank", "idx"], how="left")
        .with_columns(pl.col("b_all").fill_null(0))
    )
    ns = pl.min_horizontal(pl.col("own") - pl.col("gpu_part"), "host_slack") + pl.min_horizontal(
        "gpu_part", gpu_slack
    )
    # only copies that CC made block: those that blocked in the baseline too owe nothing to it
    newly = (
        (pl.col("t_n_blocked") - pl.col("b_n_blocked"))
        / pl.max_horizontal(pl.col("t_n_blocked"), pl.lit(1))
    ).clip(0, 1)
    j = j.join(st.select("rank", "idx", newly.alias("newly")), on=["rank", "idx"], how="left")
    ns = ns * pl.col("newly").fill_null(0)
    return j.select("rank", "idx", ns.clip(lower_bound=0).cast(pl.Float64).alias("ns"))
