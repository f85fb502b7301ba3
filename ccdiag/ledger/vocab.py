"""The vocabulary of the pair's model: ledger categories, API call classes, GPU classes.

Pure polars expressions on event-schema columns (``ccdiag.schema.EventSchema``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import polars as pl

from ccdiag import apis

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


#: Call classes of :func:`api_class` (host-only ledgers: the op classes of OP_CATEGORIES).
CALL_CLASSES: tuple[str, ...] = (
    "launch", "copy", "sync", "setup", "other",
    "op_launch", "op_copy_async", "op_copy", "op_sync", "op_other",
)  # fmt: skip
#: GPU classes of :func:`gpu_busy`.
GPU_CLASSES: tuple[str, ...] = ("kernel", "collective", "copy", "uvm")


#: Two GPU rows closer than this belong to one busy run (launch latency between queued kernels).
RUN_GAP_NS = 5_000


LAUNCH_RE = r"^cu(da)?(Launch|GraphLaunch|Memset)"


COPY_RE = r"^cu(da)?Memcpy"


SYNC_RE = r"^cu(da)?(Stream|Device|Event|Ctx)Synchronize"


SETUP_RE = (
    r"^cu(da)?(Malloc$|MallocHost|MallocManaged|MallocPitch|Malloc3D|Free$|FreeHost|HostAlloc"
    r"|HostRegister|HostUnregister|MemAlloc$|MemAllocHost|MemAllocManaged|MemFree$|MemFreeHost"
    r"|MemHostAlloc|MemHostRegister|GetDeviceProperties|DeviceGetAttribute|SetDevice|Init$"
    r"|CtxCreate|DevicePrimaryCtx|ModuleLoad|ModuleGetLoadingMode|LibraryLoad|ModuleUnload"
    r"|StreamCreate|StreamDestroy|EventCreate|EventDestroy|DeviceReset|GetDeviceCount"
    r"|DriverGetVersion|RuntimeGetVersion|FuncGetAttributes|FuncSetAttribute|MemGetInfo"
    r"|DeviceSetLimit|GraphInstantiate|GraphCreate|GraphDestroy|GraphExecDestroy"
    r"|StreamBeginCapture|StreamEndCapture)"
)


COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone")


SYNC_OPS = (
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


@dataclass(frozen=True)
class Codes:
    """A string column as integers: ``code`` numbers each row's value (UInt32; null where the
    value is), ``values`` the distinct values, ``values[code]`` a row's (none null)."""

    code: pl.Series
    values: pl.Series

    def at(self, rows: pl.Series) -> Codes:
        """The codes of the rows ``rows`` (indices; a null index: a null code)."""
        return Codes(self.code.gather(rows), self.values)

    def keep(self, mask: pl.Series) -> Codes:
        """The codes of the rows ``mask`` keeps (a filter of the same rows)."""
        return Codes(self.code.filter(mask), self.values)


def codes_of(s: pl.Series) -> Codes:
    """:class:`Codes` of a String series, in one hash pass: a categorical of its own namespace
    numbers the distinct values 0..n-1 (freed with it; nothing enters polars' global string
    cache)."""
    cats = pl.Categories.random()
    cat = s.cast(pl.Categorical(cats))  # holds the mapping: read it while this lives
    code = cat.to_physical().rechunk()  # one chunk: rows are gathered from it (Codes.at)
    if hasattr(cats, "to_series"):  # polars >= 2; before, the series' own categories
        u = cats.to_series()
    else:
        u = cat.cat.get_categories()
    top = code.max()  # None when every value is null
    if (top is not None and u.len() <= top) or u.null_count():
        raise AssertionError(f"codes_of: categories of {s.name!r} not readable")
    return Codes(code, u)


#: :func:`event_names` of the event frames alive (by id, dropped with their frame).
_EVENT_NAMES: dict[int, tuple[weakref.ref[pl.DataFrame], int, Codes]] = {}


def event_names(ev: pl.DataFrame) -> Codes:
    """The codes of ``ev``'s ``name`` column, one per event row (the rows a frame of its events
    carries as ``ev_row``), made once per events frame (:func:`Codes.at` for a frame's rows):
    :func:`per_value` then matches each name once without hashing a million API and kernel
    names again for each frame cut from the same events."""
    key = id(ev)
    hit = _EVENT_NAMES.get(key)
    if hit is not None and hit[0]() is ev and hit[1] == ev.height:
        return hit[2]
    codes = codes_of(ev.get_column("name"))

    def drop(_: weakref.ref[pl.DataFrame]) -> None:  # the frame is gone: its codes too
        _EVENT_NAMES.pop(key, None)

    ref = weakref.ref(ev, drop)
    _EVENT_NAMES[key] = (ref, ev.height, codes)
    return codes


def per_value(
    df: pl.DataFrame, col: str, exprs: dict[str, pl.Expr], codes: Codes | None = None
) -> pl.DataFrame:
    """``df.with_columns(**exprs)`` for expressions of the column ``col`` alone, evaluated once
    per distinct value of ``col`` and gathered back by each row's value: the same columns,
    values and dtypes, without running the string matching (the regexes of :func:`api_class`,
    :func:`launch_path`, ...) on every row (a million API calls have a few dozen names).
    ``codes``: ``col``'s codes for ``df``'s rows when already made (:func:`event_names`)."""
    s = df.get_column(col)
    if codes is None and s.dtype == pl.String:
        codes = codes_of(s)
    if codes is not None:
        # the values the rows hold (a null one last), evaluated alone: a frame's codes may
        # number every name of its events, not only its own; then laid out by code (the codes
        # of values no row holds: null) and read at each row's code
        n = codes.values.len()
        code = codes.code
        code = code.fill_null(n) if code.null_count() else code
        held = np.zeros(n + 1, dtype=bool)
        held[code.to_numpy()] = True
        used = pl.Series(np.flatnonzero(held))
        u = pl.concat([codes.values, pl.Series([None], dtype=pl.String)]).alias(col)
        vals = pl.DataFrame({col: u.gather(used)}).with_columns(**exprs)
        return df.with_columns(_by_code(vals.get_column(k), used, n + 1, code) for k in exprs)
    u = s.unique()
    at = s.replace_strict(u, pl.Series(range(u.len()), dtype=pl.UInt32))
    vals = pl.DataFrame({col: u}).with_columns(**exprs)
    return df.with_columns(vals.get_column(k).gather(at).alias(k) for k in exprs)


def _by_code(v: pl.Series, used: pl.Series, n: int, code: pl.Series) -> pl.Series:
    """The values ``v`` of the codes ``used`` (of ``n``) read at each row's ``code``: a flag
    or a number without nulls through numpy (~half polars' gather of a bitmap), else polars."""
    if v.null_count() == 0 and (
        v.dtype == pl.Boolean or v.dtype.is_integer() or v.dtype.is_float()
    ):
        flat = np.zeros(n, dtype=v.to_numpy().dtype)
        flat[used.to_numpy()] = v.to_numpy()
        return pl.Series(v.name, flat[code.to_numpy()], dtype=v.dtype)
    table = pl.repeat(None, n, dtype=v.dtype, eager=True).scatter(used, v)
    return table.gather(code).alias(v.name)


def same_keys_as(keys: list[str], n: int) -> pl.Expr:
    """Whether each row's ``keys`` equal those of the row ``n`` away (a null key equals a null,
    as in a group-by; false where that row is off the frame): on a frame sorted by ``keys``,
    whether the two rows are in the same group, without a window over the groups."""
    on_frame = pl.int_range(pl.len()).shift(n).is_not_null()
    return pl.all_horizontal(on_frame, *(pl.col(k).eq_missing(pl.col(k).shift(n)) for k in keys))


def prev_max_in_groups(df: pl.DataFrame, by: list[str], col: str) -> pl.Series | None:
    """``pl.col(col).cum_max().shift(1).over(by)`` on a frame whose groups are contiguous
    (sorted by ``by``): a running maximum over the whole frame with each group's values raised
    above every earlier group's (its number × their range), so it restarts in each group, and
    null on a group's first row. The same integers, without a window over thousands of groups
    (a million calls in 7,408 steps: ~5x less CPU). None (use the window) for nulls, a
    non-integer column or a range too wide to raise."""
    v = df.get_column(col)
    if df.height == 0 or v.null_count() or not v.dtype.is_integer():
        return None
    same = df.select(same_keys_as(by, 1).alias("s")).to_series()
    group = (~same).cum_sum().cast(pl.Int64)
    lo, hi = int(v.min()), int(v.max())  # type: ignore[arg-type]
    span = hi - lo + 1
    if (int(group.max()) + 1) * span >= 1 << 62:  # type: ignore[arg-type]
        return None
    lift = group * span
    top = (v.cast(pl.Int64) - lo + lift).cum_max() - lift + lo
    out = pl.select(pl.when(same).then(top.shift(1)).alias(col)).to_series()
    return out.cast(v.dtype)


def in_step_shift(c: pl.Expr, n: int, keys: tuple[str, ...] = ("rank", "idx")) -> pl.Expr:
    """``c.shift(n).over(*keys)`` on a frame sorted by ``keys``: null where the row ``n`` away
    is in another group (step). A plain shift with a mask, not a window over 7,408 steps (0.1 s
    for each such column on a million calls)."""
    return pl.when(same_keys_as(list(keys), n)).then(c.shift(n))


def shared_codes(*frames: pl.DataFrame, col: str = "name") -> list[pl.DataFrame]:
    """The frames with ``col`` as a categorical of one namespace of their own: the same value
    has the same code in each, so group-bys, joins and comparisons on it work on small integers,
    not on a million kernel names of hundreds of bytes (and nothing enters polars' global string
    cache). The frames hold the shared mapping: read codes (``to_physical``) while they live."""
    cats = pl.Categories.random()
    return [f.with_columns(pl.col(col).cast(pl.Categorical(cats))) for f in frames]


def joint_codes(*codes: Codes) -> list[pl.Series]:
    """Each :class:`Codes`' row codes renumbered into one numbering shared by all (equal values,
    equal codes; a null stays null): rows of different traces (:func:`event_names`) grouped and
    joined on their names as small integers, with no string hashed again."""
    values = pl.concat([c.values for c in codes]).unique(maintain_order=True)
    lut = pl.DataFrame({"v": values, "j": pl.int_range(values.len(), dtype=pl.UInt32, eager=True)})
    out = []
    for c in codes:
        to = pl.DataFrame({"v": c.values}).join(lut, on="v", how="left", maintain_order="left")
        out.append(to.get_column("j").gather(c.code))
    return out


def sort_once(df: pl.DataFrame, *by: str, descending: list[bool] | None = None) -> pl.DataFrame:
    """``df.sort(*by, descending=descending)``, without sorting a frame already strictly in
    that order (each row's keys after the row before's, none null): that order is then the only
    one the sort can give, so the frame is returned as it is. Joins and filters of a sorted
    frame usually keep its order (the call sequences: 1.3 M rows a side, 0.3-1 s for a sort
    that moved nothing)."""
    if strictly_sorted(df, *by, descending=descending):
        return df
    return df.sort(*by, descending=descending or [False] * len(by))


def strictly_sorted(df: pl.DataFrame, *by: str, descending: list[bool] | None = None) -> bool:
    """Whether each row's ``by`` come after the row before's (none null): the one order a sort
    by them can give (:func:`sort_once`)."""
    if df.height < 2:
        return True
    desc = descending or [False] * len(by)
    after, equal = pl.lit(False), pl.lit(True)
    for k, d in zip(by, desc):
        c, p = pl.col(k), pl.col(k).shift(1)
        after, equal = after | (equal & ((c < p) if d else (c > p))), equal & (c == p)
    return bool(df.select(after.fill_null(False).slice(1).all()).item())


def join_on_unique(left: pl.DataFrame, right: pl.DataFrame, key: str) -> pl.DataFrame:
    """``left.join(right, on=key, how="left", maintain_order="left")`` for an integer ``key``
    that ``right`` holds at most once per value: ``right`` sorted by the key (skipped when it
    already is) and each left row's match found by binary search, then ``right``'s columns
    gathered in ``left``'s order; a left key that is null or absent gets nulls, as in the join.
    A million GPU rows against 2.6 M calls: ~0.1 s instead of ~0.8 s for the hash join. Falls
    back to the join when a key repeats in ``right``."""
    r = right.filter(pl.col(key).is_not_null())
    if r.height == 0 or not left[key].dtype.is_integer() or left[key].dtype != r[key].dtype:
        return left.join(right, on=key, how="left", maintain_order="left")
    r = sort_once(r, key)
    keys = r.get_column(key)
    if not (keys.diff().drop_nulls() > 0).all():  # a key twice: the join's repeated rows
        return left.join(right, on=key, how="left", maintain_order="left")
    q = left.get_column(key)
    # numpy's binary search: it starts each search from the last one's bounds when the queries
    # rise (they mostly do), ~0.6x the CPU of polars' on a million rows
    at = np.searchsorted(keys.to_numpy(), q.fill_null(keys[0]).to_numpy(), side="left")
    pos = pl.Series(np.clip(at, 0, keys.len() - 1))
    hit = q.is_not_null() & (keys.gather(pos) == q)
    out = r.drop(key).gather(pos)
    return left.with_columns(
        pl.when(hit).then(out.get_column(c)).otherwise(None).alias(c) for c in out.columns
    )


def join_first(left: pl.DataFrame, right: pl.DataFrame, key: str) -> pl.DataFrame:
    """``left.join(right.filter(pl.col(key).is_first_distinct()), on=key, how="left",
    maintain_order="left")`` for an Int64 ``key``: each left row gets the columns of ``right``'s
    first row with its key (nulls where none; a null key matches nothing, as in the join). The
    first rows found by a stable argsort of the keys alone and a binary search; then one gather
    of ``right``'s columns, not a filter, a sort and a gather of them all (a million GPU rows of
    a dozen columns against 2.6 M calls)."""
    k = right.get_column(key)
    keep = np.flatnonzero(k.is_not_null().to_numpy())
    kv = k.drop_nulls().to_numpy()
    order = np.argsort(kv, kind="stable")  # equal keys in row order: the first is the earliest
    ks = kv[order]
    first = np.ones(ks.size, dtype=bool)
    np.not_equal(ks[1:], ks[:-1], out=first[1:])
    uk, rows = ks[first], keep[order[first]]
    cols = right.drop(key)
    if uk.size == 0:
        return left.with_columns(
            pl.repeat(None, left.height, dtype=t, eager=True).alias(c)
            for c, t in cols.schema.items()
        )
    q = left.get_column(key)
    qv = q.fill_null(0).to_numpy()
    at = np.minimum(np.searchsorted(uk, qv, side="left"), uk.size - 1)
    hit = pl.Series(q.is_not_null().to_numpy() & (uk[at] == qv))
    idx = pl.select(pl.when(hit).then(pl.Series(rows[at]))).to_series()
    return left.with_columns(cols.gather(idx))


def base_name() -> pl.Expr:
    """API name without nsys version suffixes (``cudaMemcpyAsync_v3020`` -> ``cudaMemcpyAsync``)."""
    return apis.base_name(pl.col("name"))


def api_class() -> pl.Expr:
    """launch | copy | sync | setup | other, from the API name (sets in ``ccdiag.apis``)."""
    n = base_name()
    return (
        pl.when(n.is_in(list(apis.LAUNCH_APIS | apis.MEMSET_APIS)) | n.str.contains(LAUNCH_RE))
        .then(pl.lit("launch"))
        .when(n.is_in(list(apis.MEMCPY_APIS)) | n.str.contains(COPY_RE))
        .then(pl.lit("copy"))
        .when(n.is_in(list(apis.SYNC_APIS)) | n.str.contains(SYNC_RE))
        .then(pl.lit("sync"))
        .when(n.str.contains(SETUP_RE))
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


#: GPU row names of :func:`gpu_class`: a unified-memory copy, an NCCL kernel.
UVM_NAME = "(?i)unified"
NCCL_NAME = "(?i)^(void )?nccl"


def gpu_name_flags() -> dict[str, pl.Expr]:
    """The two name matches :func:`gpu_class` reads, for :func:`per_value` (``_uvm``, ``_nccl``):
    a million GPU rows have a few dozen names, of hundreds of characters each."""
    n = pl.col("name")
    return {"_uvm": n.str.contains(UVM_NAME), "_nccl": n.str.contains(NCCL_NAME)}


def gpu_class(uvm: pl.Expr | None = None, nccl: pl.Expr | None = None) -> pl.Expr:
    """kernel | collective | copy | uvm for GPU rows. ``uvm``, ``nccl``: the name's matches
    (:func:`gpu_name_flags`) when already made; else matched here, row by row."""
    k, n = pl.col("kind"), pl.col("name")
    uvm = n.str.contains(UVM_NAME) if uvm is None else uvm
    nccl = n.str.contains(NCCL_NAME) if nccl is None else nccl
    return (
        pl.when((k == "uvm_fault") | ((k == "memcpy") & uvm))
        .then(pl.lit("uvm"))
        .when((k == "collective") | ((k == "kernel") & nccl))
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


#: Launch paths of :func:`launch_path`: how a command reached the GPU. A toll may be paid on some
#: paths and not others (an interposer that hooks the runtime's exported entry points misses the
#: launches a library makes through its own statically linked runtime), so tolls are measured
#: per path.
LAUNCH_PATHS: tuple[str, ...] = ("runtime", "driver", "graph", "library", "memset_copy")
#: Kernels a math library launches itself (cuBLAS, cuBLASLt, CUTLASS, cuDNN GEMM/conv kernels).
LIBRARY_KERNEL_RE = r"(?i)(gemm|cublas|cutlass|xmma|nvjet|splitk|cudnn|sm\d+_\w*(mma|conv))"
#: Kernels whose names match ``LIBRARY_KERNEL_RE`` but that the framework compiles into itself and
#: launches through the CUDA runtime like any other of its kernels: PyTorch's memory-efficient
#: attention (``fmha_cutlassF_*`` / ``fmha_cutlassB_*``, CUTLASS templates instantiated in
#: ``libtorch_cuda``) and its FlashAttention build (``pytorch_flash::``). An interposer on the
#: runtime's entry points tolls them as it tolls the runtime path (HF ``generate()`` with SDPA:
#: 24 such launches a step for Llama, each +14.6 µs in the gap before, filed under ``library``
#: where the path's median growth was 51 ns, so no path measured their toll).
FRAMEWORK_KERNEL_RE = r"(?i)(fmha_cutlass|PyTorchMemEffAttention|pytorch_flash)"


def launch_path() -> pl.Expr:
    """runtime | driver | graph | library | memset_copy for launch calls (null otherwise).

    Needs ``name``, ``cls`` and ``gpu_name`` (the kernel the call launched, from
    :func:`ccdiag.ledger.host.host_calls`). A launch of a library kernel is ``library`` whatever
    entry point it went through: cuBLAS issues its launches from inside a top-level op, not from
    the framework's own runtime calls.
    """
    n = base_name()
    kernel = pl.col("gpu_name").fill_null("")
    return (
        pl.when(pl.col("cls") != "launch")
        .then(pl.lit(None, dtype=pl.String))
        .when(n.str.contains("GraphLaunch"))
        .then(pl.lit("graph"))
        .when(n.str.contains(r"Memset|Memcpy"))
        .then(pl.lit("memset_copy"))
        .when(kernel.str.contains(LIBRARY_KERNEL_RE) & ~kernel.str.contains(FRAMEWORK_KERNEL_RE))
        .then(pl.lit("library"))
        .when(n.str.starts_with("cu") & ~n.str.starts_with("cuda"))
        .then(pl.lit("driver"))
        .otherwise(pl.lit("runtime"))
    )


def with_launch_path(df: pl.DataFrame, alias: str = "path") -> pl.DataFrame:
    """``df.with_columns(launch_path().alias(alias))``, its name and kernel matching done once
    per distinct name and kernel (:func:`per_value`)."""
    by_name, by_kernel, path = launch_path_parts()
    df = per_value(df, "name", by_name)
    df = per_value(df, "gpu_name", by_kernel)
    return df.with_columns(path.alias(alias)).drop(*by_name, *by_kernel)


def launch_path_parts() -> tuple[dict[str, pl.Expr], dict[str, pl.Expr], pl.Expr]:
    """:func:`launch_path` in parts: the columns worked out per distinct ``name`` and per
    distinct ``gpu_name`` (:func:`per_value`; a caller may add its own to the same passes), and
    the path from them and ``cls`` (drop the parts' columns after)."""
    n = base_name()
    by_name = (
        pl.when(n.str.contains("GraphLaunch"))
        .then(pl.lit("graph"))
        .when(n.str.contains(r"Memset|Memcpy"))
        .then(pl.lit("memset_copy"))
    )
    driver = n.str.starts_with("cu") & ~n.str.starts_with("cuda")
    kernel = pl.col("gpu_name").fill_null("")
    library = kernel.str.contains(LIBRARY_KERNEL_RE) & ~kernel.str.contains(FRAMEWORK_KERNEL_RE)
    path = (
        pl.when(pl.col("cls") != "launch")
        .then(pl.lit(None, dtype=pl.String))
        .when(pl.col("__lp_name").is_not_null())
        .then(pl.col("__lp_name"))
        .when(pl.col("__lp_library"))
        .then(pl.lit("library"))
        .when(pl.col("__lp_driver"))
        .then(pl.lit("driver"))
        .otherwise(pl.lit("runtime"))
    )
    return {"__lp_name": by_name, "__lp_driver": driver}, {"__lp_library": library}, path
