"""Nsight Systems SQLite export (schema 3.0 to 3.28) -> :class:`~ccdiag.schema.Trace`.

What becomes which event kind
-----------------------------
======================================  ===============================================
table                                   kind
======================================  ===============================================
CUPTI_ACTIVITY_KIND_RUNTIME             ``runtime`` (eventClass CUDA runtime) or ``driver``
CUPTI_ACTIVITY_KIND_KERNEL              ``kernel``; ``collective`` when the name has ``nccl``
CUPTI_ACTIVITY_KIND_GRAPH_TRACE         ``kernel`` named ``[CUDA graph N]``, graph true (one
                                        row per whole-graph launch, ``--cuda-graph-trace=graph``)
CUPTI_ACTIVITY_KIND_MEMCPY              ``memcpy`` (direction from memory kinds; UVM
                                        migrations: both sides ``managed``)
CUPTI_ACTIVITY_KIND_MEMSET              ``memset``
CUPTI_ACTIVITY_KIND_SYNCHRONIZATION     ``sync``, named by the API call with its correlation id
NVTX_EVENTS (ranges and marks)          ``annotation`` (domain name in ``domain``)
CUDA_UM_GPU/CPU_PAGE_FAULT_EVENTS       ``uvm_fault``
PROFILER_OVERHEAD, ..._KIND_OVERHEAD    ``overhead``
======================================  ===============================================

Rows of other event tables (OS runtime calls, CUDA event records, graph creation, cuDNN/cuBLAS
ranges, ...) are not read; their counts go to ``TraceMeta.skipped``.

Correlation ids are unique only within a process, so every row keeps its process id
(``pid = (globalPid >> 24) & 0xFFFFFF``; ``tid = globalTid & 0xFFFFFF``) and joins use
``(pid, correlation)``. A file recorded from several processes (``torchrun`` under one
``nsys profile``) gets one rank per process that ran GPU work, ordered by the GPU it used.

Privacy: ``META_DATA_CAPTURE`` holds the profiled process's environment. Only the
``CUDA_VERSION`` and ``NCCL_VERSION`` rows are ever read from it (by the SQL itself), and from
``TARGET_INFO_SYSTEM_ENV`` only the driver versions and the GPU names; host names, user names,
paths and other environment values never leave this module.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from ccdiag.parsers import _nsys_common as nc
from ccdiag.parsers import _nsys_meta
from ccdiag.parsers import _sqlite_fetch as fetcher

from ccdiag.errors import InputError
from ccdiag.frame import align_chunks
from ccdiag.progress import Progress
from ccdiag.schema import EVENT_COLUMNS, Trace, TraceMeta, filter_events

# --------------------------------------------------------------------------------------------
# What the reader needs, declared like the table_checks of nsys's own expert rules.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableNeed:
    """A table the reader uses, the columns it cannot do without, and what to tell the user."""

    table: str
    columns: tuple[str, ...]
    missing: str
    required: bool = False


NEEDS: tuple[TableNeed, ...] = (
    TableNeed(
        "StringIds",
        ("id", "value"),
        "not an Nsight Systems export (no StringIds table); export the report with "
        "`nsys export --type sqlite -o trace.sqlite trace.nsys-rep`",
        required=True,
    ),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        ("start", "end", "globalTid", "correlationId", "nameId"),
        "no CUDA API calls recorded (no CUPTI_ACTIVITY_KIND_RUNTIME table): was the app traced "
        "with `nsys profile -t cuda` and does it run CUDA work inside the capture range?",
        required=True,
    ),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName"),
        "no GPU kernels recorded (no CUPTI_ACTIVITY_KIND_KERNEL table): host-side evidence "
        "only. In CC mode 'on' the GPU blocks tracing; profile in CC 'devtools' mode",
    ),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes")
        + ("copyKind", "srcKind", "dstKind"),
        "no memory copies recorded",
    ),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_MEMSET",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"),
        "no memsets recorded",
    ),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid"),
        "no synchronization records",
    ),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid"),
        "no whole-graph launches recorded",
    ),
    TableNeed(
        "NVTX_EVENTS",
        ("start", "end", "eventType", "globalTid"),
        "no NVTX ranges: trace with `-t cuda,nvtx` and mark each step with an NVTX range",
    ),
    TableNeed(
        "CUDA_UM_GPU_PAGE_FAULT_EVENTS",
        ("start", "end", "globalPid"),
        "no GPU page faults: record them with `--cuda-um-gpu-page-faults=true`",
    ),
    TableNeed(
        "CUDA_UM_CPU_PAGE_FAULT_EVENTS",
        ("start", "globalPid"),
        "no CPU page faults: record them with `--cuda-um-cpu-page-faults=true`",
    ),
    TableNeed("PROFILER_OVERHEAD", ("start", "end", "globalTid"), "no profiler overhead rows"),
    TableNeed(
        "CUPTI_ACTIVITY_KIND_OVERHEAD", ("start", "end", "globalTid"), "no CUPTI overhead rows"
    ),
)
NEED_BY_TABLE = {n.table: n for n in NEEDS}

#: Event tables that are counted but not read, with the reason shown in ``meta.skipped``.
SKIPPED_TABLES: dict[str, str] = {
    "OSRT_API": "OS runtime calls (OSRT_API), not used by the rules",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": "CUDA event records (instants), not used by the rules",
    "CUDA_GRAPH_EVENTS": "CUDA graph creation/instantiation records",
    "CUDA_GRAPH_NODE_EVENTS": "CUDA graph node creation records",
    "CUDNN_EVENTS": "cuDNN API ranges",
    "CUBLAS_EVENTS": "cuBLAS API ranges",
    "CUSPARSE_EVENTS": "cuSPARSE API ranges",
    "CUDA_GPU_MEMORY_USAGE_EVENTS": "GPU memory allocation records",
    "CUDA_GPU_MEMORY_POOL_EVENTS": "GPU memory pool records",
    "SCHED_EVENTS": "CPU scheduling records",
    "COMPOSITE_EVENTS": "CPU sampling records",
    "MPI_P2P_EVENTS": "MPI point-to-point calls",
    "MPI_COLLECTIVES_EVENTS": "MPI collective calls",
    "MPI_OTHER_EVENTS": "MPI calls",
    "CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS": "memory decompression records",
    "CUPTI_ACTIVITY_KIND_GRAPH_HOST_NODE_AND_HOST_LAUNCH": "graph host-node records",
}

# nsys's own enum numbering, used only when a file lacks its ENUM_* table.
_DEFAULT_EVENT_TYPES = {
    "NvtxMark": 34,
    "NvtxPushPopRange": 59,
    "NvtxStartEndRange": 60,
    "NvtxtPushPopRange": 70,
    "NvtxtStartEndRange": 71,
    "NvtxDomainCreate": 75,
}
_DEFAULT_DRIVER_CLASS = 1
_DEFAULT_MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed"}
_DEFAULT_MEM_KINDS |= {5: "Device Static", 6: "Managed Static", 7: "Unknown"}
_DEFAULT_COPY_LABELS = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
_DEFAULT_SYNC_LABELS = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync"}
_DEFAULT_SYNC_LABELS |= {3: "Stream sync", 4: "Context sync"}

_I64 = pl.Int64()
_STR = pl.String()
_PID = 1 << 24
_MASK24 = 0xFFFFFF
#: A table reader: raw rows of one part of a table -> some of the event columns.
Reader = Callable[["_Ctx", pl.DataFrame], pl.DataFrame]
#: Column that carries each raw row's hash through a table reader (duplicate rows).
_ROW_HASH = fetcher.ROW_HASH
#: pid and correlation packed in one Int64 (pid < 2**24, correlation < 2**32).
_KEY_SHIFT = 1 << 32

# --------------------------------------------------------------------------------------------
# The database: open read-only, know its tables and columns.
# --------------------------------------------------------------------------------------------


class NsysDb:
    """A read-only Nsight Systems export with its table/column inventory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.con = fetcher.connect(path)
            self.con.text_factory = fetcher.lenient_text  # names and metadata of a damaged file
            # tables only: nsys writes no views, and a view can run any query (a recursive
            # one never ends), so a hostile file could hang the reader
            rows = self.con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            ).fetchall()
            self.columns: dict[str, frozenset[str]] = {}
            for (name,) in rows:
                cols = self.con.execute(f'PRAGMA table_info("{name}")').fetchall()
                self.columns[name] = frozenset(c[1] for c in cols)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # a damaged schema's message
            raise InputError(path, _corrupt(exc)) from None

    def has(self, table: str, *columns: str) -> bool:
        """True when the table exists and has every named column."""
        cols = self.columns.get(table)
        return cols is not None and all(c in cols for c in columns)

    def count(self, table: str) -> int:
        """Number of rows of a table."""
        return int(self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])

    def enum(self, table: str, default: dict[int, str], by: str = "label") -> dict[int, str]:
        """An ENUM_* table as {id: label (or name)}; nsys's numbering when the file lacks it."""
        if not self.has(table, "id", by):
            return dict(default)
        rows = self.con.execute(f'SELECT id, "{by}" FROM "{table}"').fetchall()
        return {i: str(v) for i, v in rows if isinstance(i, int) and v is not None}

    def query(self, table: str, wanted: Iterable[str], where: str = "") -> fetcher.Query:
        """The wanted columns of a table; the ones it lacks come back as NULL."""
        schema = {col: _STR if col == "text" else _I64 for col in wanted}
        return fetcher.Query(table, schema, self.columns.get(table, frozenset()), where)

    def close(self) -> None:
        """Close the connection."""
        self.con.close()


def _corrupt(exc: Exception) -> str:
    return (
        f"corrupt or truncated SQLite file ({exc}); re-export it with "
        "`nsys export --type sqlite -o trace.sqlite trace.nsys-rep`"
    )


def check_tables(db: NsysDb) -> list[str]:
    """Apply :data:`NEEDS`: raise for a missing required table or column.

    Returns:
        The optional tables the file lacks (their messages are in :data:`NEED_BY_TABLE`).
    """
    absent = []
    for need in NEEDS:
        cols = db.columns.get(need.table)
        if cols is None:
            if need.required:
                raise InputError(db.path, need.missing)
            absent.append(need.table)
            continue
        lacking = [c for c in need.columns if c not in cols]
        if lacking:
            raise InputError(
                db.path,
                f"table {need.table} has no column {', '.join(lacking)}: this export's schema "
                "is not supported; re-export the report with Nsight Systems 2022.4 or newer",
            )
    return absent


# --------------------------------------------------------------------------------------------
# The queries: one per table, the columns the readers below use.
# --------------------------------------------------------------------------------------------

_GPU_COLS = ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid")
_NVTX_COLS = ("start", "end", "eventType", "text", "textId", "globalTid", "domainId")


def _nvtx_types(db: NsysDb) -> dict[str, int]:
    types = db.enum("ENUM_NSYS_EVENT_TYPE", {v: k for k, v in _DEFAULT_EVENT_TYPES.items()})
    found = {name: i for i, name in types.items() if name in _DEFAULT_EVENT_TYPES}
    return {**_DEFAULT_EVENT_TYPES, **found}


def build_queries(db: NsysDb) -> list[fetcher.Query]:
    """One query per event table present in the file, in the order :func:`read_events` reads."""
    wanted = {
        "CUPTI_ACTIVITY_KIND_RUNTIME": (
            "start", "end", "eventClass", "globalTid", "correlationId", "nameId"
        ),
        "CUPTI_ACTIVITY_KIND_KERNEL": (*_GPU_COLS, "demangledName", "graphNodeId", "graphId"),
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": (*_GPU_COLS, "graphId"),
        "CUPTI_ACTIVITY_KIND_MEMCPY": (
            *_GPU_COLS, "bytes", "copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId",
            "graphNodeId",
        ),
        "CUPTI_ACTIVITY_KIND_MEMSET": (*_GPU_COLS, "bytes", "memKind", "graphNodeId"),
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (*_GPU_COLS, "syncType"),
        "NVTX_EVENTS": _NVTX_COLS,
        "CUDA_UM_GPU_PAGE_FAULT_EVENTS": (
            "start", "end", "globalPid", "deviceId", "faultAccessType"
        ),
        "CUDA_UM_CPU_PAGE_FAULT_EVENTS": ("start", "globalPid"),
        "PROFILER_OVERHEAD": ("start", "end", "globalTid", "nameId", "correlationId"),
        "CUPTI_ACTIVITY_KIND_OVERHEAD": ("start", "end", "globalTid", "nameId", "correlationId"),
    }  # fmt: skip
    queries = []
    for table, cols in wanted.items():
        if not db.has(table):
            continue
        where = ""
        if table == "NVTX_EVENTS":
            types = _nvtx_types(db)
            ranges = [i for n, i in types.items() if n != "NvtxDomainCreate"]
            where = f"eventType IN ({', '.join(str(int(i)) for i in sorted(ranges))})"
        queries.append(db.query(table, cols, where))
    return queries


# --------------------------------------------------------------------------------------------
# Helpers: process/thread ids, string lookups, skip counting.
# --------------------------------------------------------------------------------------------


def _pid(col: str) -> pl.Expr:
    return ((pl.col(col) // _PID) & _MASK24).alias("pid")


def _tid(col: str) -> pl.Expr:
    return (pl.col(col) & _MASK24).alias("tid")


def _key(pid: str = "pid", corr: str = "correlation") -> pl.Expr:
    """(pid, correlation) as one Int64, for cheap membership tests."""
    return pl.col(pid) * _KEY_SHIFT + pl.col(corr)


def _lookup(ids: pl.Expr, table: dict[int, str], alias: str) -> pl.Expr:
    return ids.replace_strict(table, default=None, return_dtype=_STR).alias(alias)


def _no_zero(col: str) -> pl.Expr:
    """Correlation id 0 means 'none' in CUPTI."""
    return pl.when(pl.col(col) != 0).then(pl.col(col)).alias("correlation")


def _timed(df: pl.DataFrame, end: str = "end") -> pl.DataFrame:
    return df.with_columns(
        pl.col("start").alias("start_ns"), (pl.col(end) - pl.col("start")).alias("dur_ns")
    )


@dataclass
class _Ctx:
    """What every table reader shares: the db, the strings and the skip counts."""

    db: NsysDb
    strings: pl.DataFrame  # id, name, plus per-string flags computed once (not per row)
    parts: dict[str, list[fetcher.Loader]]
    skipped: dict[str, int] = field(default_factory=dict)
    contexts: list[pl.DataFrame] = field(default_factory=list)
    progress: Progress | None = None
    task: str = ""
    parts_done: int = 0

    def gpu_rows(self, raw: pl.DataFrame) -> pl.DataFrame:
        """Common GPU columns; remembers which device each (process, context) ran on."""
        df = _gpu_common(raw)
        self.contexts.append(df.select("pid", "contextId", "device").unique(maintain_order=True))
        return df

    def context_devices(self) -> pl.DataFrame:
        """(pid, contextId) -> device, from the GPU rows read so far and CONTEXT_INFO."""
        frames = [f for f in self.contexts if f.height]
        t = "TARGET_INFO_CUDA_CONTEXT_INFO"
        if self.db.has(t, "processId", "contextId", "deviceId"):
            sql = f'SELECT processId, contextId, deviceId FROM "{t}"'
            schema = {"pid": _I64, "contextId": _I64, "device": _I64}
            frames.append(fetcher.fetch(self.db.con, sql, schema))
        if not frames:
            return pl.DataFrame(schema={"pid": _I64, "contextId": _I64, "ctx_device": _I64})
        df = pl.concat([f.select("pid", "contextId", pl.col("device").cast(_I64)) for f in frames])
        df = df.drop_nulls().unique(subset=["pid", "contextId"], keep="first", maintain_order=True)
        return df.rename({"device": "ctx_device"})

    def each(
        self, table: str, reader: Reader, launches: pl.Series | None = None
    ) -> pl.DataFrame | None:
        """Read a table part by part: raw rows -> reader -> graph flags -> event columns."""
        if table not in self.parts:
            return None
        out = []
        for load in self.parts[table]:
            df = self.drop_bad_times(reader(self, load()), table)
            if launches is not None:
                df = mark_graph_launched(df, launches)
            out.append(conform(df).with_columns(df[_ROW_HASH]))
            self.tick()
        return self.valid(self.drop_duplicates(_concat(out), table))

    def valid(self, df: pl.DataFrame) -> pl.DataFrame:
        """The schema's check, table by table (the peak is one table's copy, not all of them):
        rows that break it are dropped and counted by ``filter_events``."""
        good, invalid = filter_events(df)
        for reason, n in invalid.items():
            self.skip(reason, n)
        return good

    def drop_duplicates(self, df: pl.DataFrame, table: str) -> pl.DataFrame:
        """Rows identical to an earlier row of the table in every column read are dropped, and
        counted: nsys never writes one event twice, and a copy would count its time twice.

        The rows' hashes find the candidates (one pass); candidates whose event columns are
        also equal are the duplicates (the check that a hash collision cannot pass).
        """
        hashes = np.sort(df[_ROW_HASH].to_numpy())  # numpy's sort: the cheapest check here
        if hashes.size > 1 and bool((hashes[1:] == hashes[:-1]).any()):
            first = pl.struct(pl.all()).is_first_distinct()
            n = df.height - df.select(first.sum()).item()
            self.skip(f"{table}: duplicate row (identical to an earlier row in every column)", n)
            if n:
                df = df.filter(first)
        return df.drop(_ROW_HASH)

    def tick(self) -> None:
        """One table part read: report progress (parts read so far, of all parts)."""
        self.parts_done += 1
        if self.progress is not None:
            total = sum(len(v) for v in self.parts.values())
            self.progress(self.task, min(self.parts_done, total), total)

    def names(self, df: pl.DataFrame, id_col: str, *extra: str) -> pl.DataFrame:
        """Join ``name`` (and per-string flags) from StringIds; ``(unknown)`` when absent."""
        table = self.strings.select("id", "name", *extra)
        out = df.join(table, left_on=id_col, right_on="id", how="left", maintain_order="left")
        if out["name"].null_count():  # fill only when needed: a fill rewrites every string
            out = out.with_columns(pl.col("name").fill_null("(unknown)"))
        return out

    def skip(self, reason: str, n: int) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    def drop_bad_times(self, df: pl.DataFrame, table: str) -> pl.DataFrame:
        """Rows without an end or ending before they start are skipped, and counted."""
        bad = pl.col("dur_ns").is_null() | (pl.col("dur_ns") < 0)
        n = df.select(bad.sum()).item()
        self.skip(f"{table}: no end time, or end before start", n)
        return df.filter(~bad) if n else df


def load_strings(db: NsysDb) -> pl.DataFrame:
    """StringIds with what the readers ask of a name, computed once per distinct string."""
    s = fetcher.fetch(db.con, 'SELECT id, value FROM "StringIds"', {"id": _I64, "value": _STR})
    api = nc.strip_api_suffix(pl.col("value"))
    return s.select(
        "id",
        pl.col("value").alias("name"),
        api.alias("api_name"),
        nc.is_graph_launch(api).alias("graph_launch"),
        nc.kernel_kind(pl.col("value")).alias("kernel_kind"),
        (~pl.col("value").str.starts_with("cuda")).alias("driver_name"),
    )


# --------------------------------------------------------------------------------------------
# One reader per table: raw rows of one part of the table -> a subset of the event columns.
# --------------------------------------------------------------------------------------------


#: CUPTI_INVALID_STREAM_ID: the stream of a sync that has none (event syncs).
_NO_STREAM = 0xFFFFFFFF


def _gpu_common(df: pl.DataFrame) -> pl.DataFrame:
    return _timed(df).with_columns(
        _pid("globalPid"),
        pl.col("deviceId").alias("device"),
        pl.when(pl.col("streamId") != _NO_STREAM).then(pl.col("streamId")).alias("stream"),
        _no_zero("correlationId"),
    )


def read_runtime(ctx: _Ctx, raw: pl.DataFrame) -> pl.DataFrame:
    """CUDA runtime and driver API calls (driver calls are eventClass 'CUDA driver')."""
    classes = ctx.db.enum("ENUM_NSYS_EVENT_CLASS", {}, by="name")
    drivers = [i for i, n in classes.items() if n.endswith("CUDA_DRIVER")]
    names = ctx.strings.select(
        "id", pl.col("api_name").alias("name"), "graph_launch", "driver_name"
    )
    df = _timed(raw).join(names, left_on="nameId", right_on="id", how="left", maintain_order="left")
    if df["name"].null_count():
        df = df.with_columns(pl.col("name").fill_null("(unknown)"))
    if ctx.db.has("CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass"):
        driver = pl.col("eventClass").is_in(drivers or [_DEFAULT_DRIVER_CLASS])
    else:  # exports without eventClass: decide by the name
        driver = pl.col("driver_name").fill_null(False)
    return df.with_columns(
        pl.when(driver).then(pl.lit("driver")).otherwise(pl.lit("runtime")).alias("kind"),
        _pid("globalTid"),
        _tid("globalTid"),
        _no_zero("correlationId"),
        pl.col("graph_launch").fill_null(False).alias("graph"),
    )


def read_kernels(ctx: _Ctx, raw: pl.DataFrame) -> pl.DataFrame:
    """Kernel executions (demangled names); NCCL kernels become ``collective``."""
    df = ctx.names(ctx.gpu_rows(raw), "demangledName", "kernel_kind")
    in_graph = pl.col("graphNodeId").is_not_null() | pl.col("graphId").is_not_null()
    return df.with_columns(
        pl.col("kernel_kind").fill_null("kernel").alias("kind"), in_graph.alias("graph")
    )


def read_graph_trace(ctx: _Ctx, raw: pl.DataFrame, *, node_keys: pl.Series) -> pl.DataFrame:
    """Whole-graph executions (``--cuda-graph-trace=graph``), as one kernel row each.

    A launch whose kernels were also traced one by one (graph kernels with the same
    correlation, ``node_keys``) is skipped and counted, so GPU time is not counted twice.
    """
    df = ctx.gpu_rows(raw).with_columns(
        pl.lit("kernel").alias("kind"),
        pl.coalesce(pl.format("[CUDA graph {}]", pl.col("graphId")), pl.lit("[CUDA graph]")).alias(
            "name"
        ),
        pl.lit(True).alias("graph"),
    )
    if node_keys.is_empty():
        return df
    covered = _key().is_in(node_keys.implode()).fill_null(False)
    n = df.select(covered.sum()).item()
    ctx.skip("CUPTI_ACTIVITY_KIND_GRAPH_TRACE: launch whose kernels are traced one by one", n)
    return df.filter(~covered) if n else df


def read_memcpy(ctx: _Ctx, raw: pl.DataFrame) -> pl.DataFrame:
    """Copies, with direction decided from the memory kinds (see ``_nsys_common``)."""
    mem = ctx.db.enum("ENUM_CUDA_MEM_KIND", _DEFAULT_MEM_KINDS)
    ops = ctx.db.enum("ENUM_CUDA_MEMCPY_OPER", _DEFAULT_COPY_LABELS)
    df = ctx.gpu_rows(raw).with_columns(
        _lookup(pl.col("copyKind"), ops, "label"),
        _lookup(pl.col("srcKind"), mem, "src_label"),
        _lookup(pl.col("dstKind"), mem, "dst_label"),
    )
    unified = nc.is_unified(pl.col("label"))
    peer = pl.col("srcDeviceId") != pl.col("dstDeviceId")
    df = df.with_columns(
        nc.managed_if_unified(nc.mem_kind(pl.col("src_label")), unified).alias("src_mem"),
        nc.managed_if_unified(nc.mem_kind(pl.col("dst_label")), unified).alias("dst_mem"),
        nc.label_copy_kind(pl.col("label")).alias("label_kind"),
        pl.format("[CUDA memcpy {}]", pl.col("label").fill_null("Unknown")).alias("name"),
        pl.lit("memcpy").alias("kind"),
        pl.col("graphNodeId").is_not_null().alias("graph"),
    )
    ck = nc.copy_kind(pl.col("src_mem"), pl.col("dst_mem"), pl.col("label_kind"), peer)
    return df.with_columns(ck.alias("copy_kind"))


def read_memset(ctx: _Ctx, raw: pl.DataFrame) -> pl.DataFrame:
    """Memsets (the kind of memory set goes to ``dst_mem``)."""
    mem = ctx.db.enum("ENUM_CUDA_MEM_KIND", _DEFAULT_MEM_KINDS)
    return ctx.gpu_rows(raw).with_columns(
        nc.mem_kind(_lookup(pl.col("memKind"), mem, "m")).alias("dst_mem"),
        pl.lit("[CUDA memset]").alias("name"),
        pl.lit("memset").alias("kind"),
        pl.col("graphNodeId").is_not_null().alias("graph"),
    )


def read_sync(ctx: _Ctx, raw: pl.DataFrame, *, runtime: pl.DataFrame) -> pl.DataFrame:
    """Synchronization waits, named by the API call that has their correlation id.

    ``syncType`` is not trusted for the name (``cudaStreamSynchronize`` is 'Stream wait sync'
    in 2025.x exports, 'Stream sync' in 2026.x); it names only syncs whose call is absent.
    ``deviceId`` is not trusted either (0 for every sync of both processes in nsys 2026.2's
    2-GPU exports): the device is the one the sync's (process, context) ran GPU work on.
    Event syncs have no stream (CUPTI's invalid id becomes null).

    Args:
        ctx: the shared context.
        raw: rows of the SYNCHRONIZATION table.
        runtime: the API calls, already in the event schema.
    """
    labels = ctx.db.enum("ENUM_CUPTI_SYNC_TYPE", _DEFAULT_SYNC_LABELS)
    df = _gpu_common(raw).join(
        ctx.context_devices(), on=["pid", "contextId"], how="left", maintain_order="left"
    )
    df = df.with_columns(pl.coalesce("ctx_device", "device").alias("device"))
    keys = df.select(_key().alias("k"))["k"].drop_nulls().implode()
    api = runtime.filter(_key().is_in(keys).fill_null(False))
    api = api.select("pid", "correlation", pl.col("name").alias("api"), "tid").unique(
        subset=["pid", "correlation"], keep="first"
    )
    df = df.join(api, on=["pid", "correlation"], how="left", maintain_order="left")
    fallback = _lookup(pl.col("syncType"), labels, "s").fill_null("sync")
    return df.with_columns(
        pl.coalesce(pl.col("api"), fallback).alias("name"), pl.lit("sync").alias("kind")
    )


def nvtx_domains(db: NsysDb) -> pl.DataFrame:
    """(pid, domainId) -> domain name of every non-default NVTX domain.

    From the DomainCreate rows; a domain without one (a time-trimmed export) is named ``NCCL``
    when every range in it is NCCL's (``nccl*``), else ``domain <id>``. Computed in SQLite.
    """
    schema = {"pid": _I64, "domainId": _I64, "created": _STR, "nccl": _I64}
    if not db.has("NVTX_EVENTS", "domainId", "globalTid", "eventType"):
        return pl.DataFrame(schema=schema).select(
            "pid", "domainId", pl.col("created").alias("domain")
        )
    create = _nvtx_types(db)["NvtxDomainCreate"]
    text = "e.text" if db.has("NVTX_EVENTS", "text") else "NULL"
    value = "s.value" if db.has("NVTX_EVENTS", "textId") else "NULL"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if value != "NULL" else ""
    sql = (
        f"SELECT (e.globalTid >> 24) & {_MASK24}, e.domainId, "
        f"max(CASE WHEN e.eventType = {int(create)} THEN {text} END), "
        f"min(CASE WHEN e.eventType = {int(create)} THEN 1 "
        f"WHEN coalesce({text}, {value}, '') GLOB 'nccl*' THEN 1 ELSE 0 END) "
        f"FROM NVTX_EVENTS e {join} WHERE e.domainId IS NOT NULL AND e.domainId != 0 "
        "GROUP BY 1, 2"
    )
    df = fetcher.fetch(db.con, sql, schema)
    unnamed = pl.format("domain {}", pl.col("domainId"))
    fallback = pl.when(pl.col("nccl") == 1).then(pl.lit("NCCL")).otherwise(unnamed)
    return df.select("pid", "domainId", pl.coalesce("created", fallback).alias("domain"))


def read_nvtx(ctx: _Ctx, raw: pl.DataFrame, *, domains: pl.DataFrame) -> pl.DataFrame:
    """NVTX ranges (push/pop, start/end) and marks (duration 0), with their domain names."""
    is_mark = pl.col("eventType") == _nvtx_types(ctx.db)["NvtxMark"]
    df = raw.with_columns(
        _pid("globalTid"),
        _tid("globalTid"),
        pl.col("start").alias("start_ns"),
        pl.when(is_mark).then(0).otherwise(pl.col("end") - pl.col("start")).alias("dur_ns"),
    )
    df = ctx.names(ctx.drop_bad_times(df, "NVTX_EVENTS range"), "textId")
    if df["text"].null_count() < df.height:
        df = df.with_columns(pl.coalesce(pl.col("text"), pl.col("name")).alias("name"))
    df = df.join(domains, on=["pid", "domainId"], how="left", maintain_order="left")
    return df.with_columns(pl.lit("annotation").alias("kind"))


def read_gpu_faults(ctx: _Ctx, raw: pl.DataFrame) -> pl.DataFrame:
    """Unified-memory GPU page faults (``uvm_fault``, with their duration)."""
    access = ctx.db.enum("ENUM_CUDA_UNIF_MEM_ACCESS_TYPE", {})
    name = pl.format(
        "[Unified Memory GPU page fault ({})]", _lookup(pl.col("faultAccessType"), access, "a")
    )
    df = _timed(raw).with_columns(
        _pid("globalPid"),
        pl.col("deviceId").alias("device"),
        pl.lit("uvm_fault").alias("kind"),
        pl.coalesce(name, pl.lit("[Unified Memory GPU page fault]")).alias("name"),
    )
    return ctx.drop_bad_times(df, "CUDA_UM_GPU_PAGE_FAULT_EVENTS")


def read_cpu_faults(_ctx: _Ctx, raw: pl.DataFrame) -> pl.DataFrame:
    """Unified-memory CPU page faults (instants: ``uvm_fault`` of duration 0)."""
    return raw.with_columns(
        pl.col("start").alias("start_ns"),
        pl.lit(0, _I64).alias("dur_ns"),
        _pid("globalPid"),
        pl.lit("uvm_fault").alias("kind"),
        pl.lit("[Unified Memory CPU page fault]").alias("name"),
    )


def read_overhead(ctx: _Ctx, raw: pl.DataFrame, *, table: str) -> pl.DataFrame:
    """Profiler overhead on the host (nsys's and CUPTI's), kept as ``overhead`` rows."""
    df = ctx.names(_timed(raw), "nameId").with_columns(
        _pid("globalTid"),
        _tid("globalTid"),
        _no_zero("correlationId"),
        pl.lit("overhead").alias("kind"),
    )
    return ctx.drop_bad_times(df, table)


def count_skipped_tables(ctx: _Ctx) -> None:
    """Count the rows of event tables this reader does not use."""
    for table, reason in SKIPPED_TABLES.items():
        if ctx.db.has(table):
            ctx.skip(reason, ctx.db.count(table))


# --------------------------------------------------------------------------------------------
# Assembly: each table part by part (bounded memory), graph flags, ranks.
# --------------------------------------------------------------------------------------------


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Keep exactly the event columns, typed and in order (absent ones null, rank 0).

    Int32 columns (``device``, ``rank``, ``step``) are Int64 here: a value out of range is
    counted and dropped by ``filter_events`` (which casts), table by table, instead of failing here.
    """
    cols = []
    for col, schema_dtype in EVENT_COLUMNS.items():
        dtype = _I64 if schema_dtype == pl.Int32 else schema_dtype
        if col in df.columns:
            cols.append(pl.col(col).cast(dtype))
        elif col == "rank":
            cols.append(pl.lit(0, dtype).alias(col))
        else:
            cols.append(pl.lit(None, dtype).alias(col))
    return df.select(cols)


def mark_graph_launched(gpu: pl.DataFrame, launches: pl.Series) -> pl.DataFrame:
    """GPU rows whose (pid, correlation) is a graph-launch call ran from a CUDA graph."""
    if launches.is_empty():
        return gpu
    launched = _key().is_in(launches.implode()).fill_null(False)
    return gpu.with_columns(pl.col("graph").fill_null(False) | launched)


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical", rechunk=False)


def _gpu_processes(events: pl.DataFrame) -> int:
    gpu = pl.col("device").is_not_null() & pl.col("pid").is_not_null()
    return events.lazy().filter(gpu).select(pl.col("pid").n_unique()).collect().item()


def assign_ranks(events: pl.DataFrame, rank: int | None) -> tuple[pl.DataFrame, list[int], str]:
    """One rank per process that ran GPU work, ordered by (first GPU used, pid).

    Returns:
        The events with ``rank`` set, the ranks, and a warning (empty when none).
    """
    if rank is not None:
        return events.with_columns(pl.lit(rank, pl.Int32).alias("rank")), [rank], ""
    procs = (
        events.lazy()
        .select("pid", "device")
        .filter(pl.col("device").is_not_null() & pl.col("pid").is_not_null())
        .group_by("pid")
        .agg(pl.col("device").min().alias("dev"))
        .sort("dev", "pid")
        .collect()
    )
    if procs.height <= 1:
        return events, [0], ""
    mapping = dict(zip(procs["pid"].to_list(), range(procs.height)))
    rank_col = pl.col("pid").replace_strict(mapping, default=None, return_dtype=pl.Int32)
    ranked = events.with_columns(rank_col.fill_null(0).alias("rank"))
    orphans = events.select((~pl.col("pid").is_in(list(mapping))).sum()).item()
    warning = (
        f"{procs.height} processes ran GPU work in this one file: each is a rank, numbered by "
        "the GPU it used"
    )
    if orphans:
        warning += f"; {orphans} rows of processes without GPU work are on rank 0"
    return ranked, list(range(procs.height)), warning


def _graph_keys(df: pl.DataFrame | None) -> pl.Series:
    """(pid, correlation) keys of the graph rows of a frame."""
    if df is None:
        return pl.Series("k", [], _I64)
    return df.filter(pl.col("graph")).select(_key().alias("k"))["k"].drop_nulls()


def read_events(
    db: NsysDb, workers: int | None = None, progress: Progress | None = None
) -> tuple[pl.DataFrame, dict[str, int], list[str]]:
    """Every event of the export in the event schema (not yet validated, rank 0).

    Each table is read part by part (at most ``PART_ROWS`` rows), each part turned into event
    rows before the next is loaded. Rows come table by table in the export's order (not
    sorted by time: sort when order matters).

    Returns:
        The events, the skipped-row counts by reason, and the optional tables the file lacks.
    """
    absent = check_tables(db)
    with fetcher.table_parts(db.path, db.con, build_queries(db), workers) as parts:
        ctx = _Ctx(db, load_strings(db), parts, progress=progress, task=f"reading {db.path.name}")
        runtime = ctx.each("CUPTI_ACTIVITY_KIND_RUNTIME", read_runtime)
        assert runtime is not None  # required: check_tables raised otherwise
        launches = _graph_keys(runtime)
        kernels = ctx.each("CUPTI_ACTIVITY_KIND_KERNEL", read_kernels, launches)
        graphs = functools.partial(read_graph_trace, node_keys=_graph_keys(kernels))
        frames = [
            runtime,
            kernels,
            ctx.each("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", graphs, launches),
            ctx.each("CUPTI_ACTIVITY_KIND_MEMCPY", read_memcpy, launches),
            ctx.each("CUPTI_ACTIVITY_KIND_MEMSET", read_memset, launches),
            ctx.each(
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", functools.partial(read_sync, runtime=runtime)
            ),
            ctx.each("NVTX_EVENTS", functools.partial(read_nvtx, domains=nvtx_domains(db))),
            ctx.each("CUDA_UM_GPU_PAGE_FAULT_EVENTS", read_gpu_faults),
            ctx.each("CUDA_UM_CPU_PAGE_FAULT_EVENTS", read_cpu_faults),
            ctx.each(
                "PROFILER_OVERHEAD", functools.partial(read_overhead, table="PROFILER_OVERHEAD")
            ),
            ctx.each(
                "CUPTI_ACTIVITY_KIND_OVERHEAD",
                functools.partial(read_overhead, table="CUPTI_ACTIVITY_KIND_OVERHEAD"),
            ),
        ]
    count_skipped_tables(ctx)
    return _concat([f for f in frames if f is not None]), ctx.skipped, absent


def read(
    path: str | Path,
    *,
    rank: int | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    **_options: object,
) -> Trace:
    """Read an Nsight Systems SQLite export.

    Args:
        path: the ``.sqlite`` file written by ``nsys export --type sqlite``.
        rank: put every event on this rank (a folder of per-rank files does this). By
            default a file of one profiled rank takes the ``RANK`` its process had, and a file
            of several processes makes each process with GPU work a rank, numbered by the GPU
            it used.
        workers: processes that read a big file's tables in parallel (None: one per CPU,
            at most 4; 1: none). Small files are always read in this process.
        progress: called once per table part read, with parts read so far and in all.
        **_options: options meant for other readers, ignored.

    Returns:
        The trace (steps are assigned later by ``ccdiag.steps``).
    """
    p = Path(path)
    db = NsysDb(p)
    try:
        events, skipped, absent = read_events(db, workers, progress)
        used = set(events["device"].drop_nulls().unique().to_list())
        fields = _nsys_meta.read_meta(db.con, db.columns, used)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise InputError(p, _corrupt(exc)) from None
    finally:
        db.close()
    env_rank, env_size = fields.pop("env_rank", None), fields.pop("env_world_size", None)
    if rank is None and env_rank is not None and _gpu_processes(events) <= 1:
        rank = env_rank  # one rank profiled on its own: its RANK environment variable
    events, ranks, rank_warning = assign_ranks(events, rank)
    # every table passed filter_events already; ranks are Int32: only a no-op cast is left
    # (free on aligned chunks; on misaligned ones polars would first copy every column)
    events = align_chunks(events).select(pl.col(c).cast(t) for c, t in EVENT_COLUMNS.items())
    fields["warnings"] += [rank_warning] if rank_warning else []
    if absent:
        fields["extra"]["nsys_tables_absent"] = ",".join(absent)
    no_kernels = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"} <= set(absent)
    if used and no_kernels:
        fields["warnings"].append(
            "no GPU kernels recorded (no CUPTI_ACTIVITY_KIND_KERNEL table): only copies, "
            "memsets or syncs reached the GPU, or kernel tracing was off; kernel time is unknown"
        )
    meta = _meta(p, events, fields, skipped, host_only=not used)
    meta.rank, meta.ranks = rank, ranks
    meta.world_size = len(ranks) if len(ranks) > 1 else env_size
    return Trace(events=events, meta=meta)


def _meta(
    p: Path, events: pl.DataFrame, fields: dict, skipped: dict[str, int], *, host_only: bool
) -> TraceMeta:
    """The trace's metadata: the file, the counts, and what ``_nsys_meta`` read."""
    if host_only:
        fields["warnings"].append(NEED_BY_TABLE["CUPTI_ACTIVITY_KIND_KERNEL"].missing)
    if fields.get("cc_mode") == "on" and not host_only:
        fields["cc_mode"] = "devtools"  # CC 'on' blocks GPU tracing: GPU rows mean devtools
    return TraceMeta(
        source=p.name,
        format="nsys_sqlite",
        profiler="nsys",
        files=[p.name],
        size_bytes=p.stat().st_size,
        host_only=host_only,
        n_events=events.height,
        skipped=skipped,
        **fields,
    )
