"""The one event schema every parser produces, and the trace container.

Every parser (Kineto JSON, Nsight Systems SQLite / .nsys-rep, nsys stats CSV) returns a
:class:`Trace`: one polars frame of events in :class:`EventSchema` plus :class:`TraceMeta`.
Times are Int64 nanoseconds (``start_ns``, ``dur_ns``); the Kineto parser converts its
microseconds once and nothing downstream converts again.

Column meanings
---------------
kind         what the row is (:class:`Kind`).
name         event name. API names are normalized: nsys's ``_v3020`` suffixes dropped.
start_ns     start on the trace's own clock (ns). Comparable only within one trace.
dur_ns       duration (ns), >= 0.
pid, tid     host process / thread (GPU rows: pid of the owning process, tid null).
device       GPU index for GPU rows (kernel, memcpy, memset, collective, GPU annotations).
stream       CUDA stream id for GPU rows.
correlation  joins an API call to the GPU work it launched, *within one process* (pid).
external_id  Kineto "External id": joins a cpu_op to the runtime calls it made.
bytes        bytes moved (memcpy, memset, UVM migration, collective message size).
copy_kind    HtoD / DtoH / DtoD / PtoP / HtoH, decided from the memory kinds, not the label:
             under CC a pinned H2D shows as "Device-to-Device" with a Managed source.
src_mem      memory kind of the copy source (:class:`MemKind`).
dst_mem      memory kind of the copy destination.
graph        GPU rows: launched from a CUDA graph. Runtime rows: the call is a graph launch.
non_blocking cpu_op copies (aten::copy_ / aten::to / aten::_to_copy): the non_blocking flag,
             when the trace recorded inputs; null when unknown.
domain       NVTX domain of an annotation, when not the default domain.
rank         distributed rank (0 for single-process traces).
step         step index the event belongs to (null outside steps). GPU rows inherit the step
             of the host call that launched them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import dataframely as dy
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ccdiag.frame import align_chunks


class Kind(str, enum.Enum):
    """What an event row is."""

    CPU_OP = "cpu_op"
    ANNOTATION = "annotation"
    PYTHON = "python"
    RUNTIME = "runtime"
    DRIVER = "driver"
    KERNEL = "kernel"
    COLLECTIVE = "collective"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    SYNC = "sync"
    UVM_FAULT = "uvm_fault"
    OVERHEAD = "overhead"


#: The Kineto category each event kind is written under (a CPU-side annotation; GPU-side ones
#: are ``gpu_user_annotation``): what ``parsers/kineto.py`` reads back as that kind.
KINETO_CATEGORY: dict[str, str] = {
    "cpu_op": "cpu_op",
    "annotation": "user_annotation",
    "python": "python_function",
    "runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "kernel": "kernel",
    "collective": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "sync": "cuda_sync",
    "overhead": "overhead",
    "uvm_fault": "uvm_fault",
}


class CopyKind(str, enum.Enum):
    """Direction of a copy, decided from memory kinds."""

    HTOD = "HtoD"
    DTOH = "DtoH"
    DTOD = "DtoD"
    PTOP = "PtoP"
    HTOH = "HtoH"


class MemKind(str, enum.Enum):
    """Memory kind of one side of a copy (nsys numbering is mapped by name, not number)."""

    PAGEABLE = "pageable"
    PINNED = "pinned"
    DEVICE = "device"
    MANAGED = "managed"
    ARRAY = "array"
    UNKNOWN = "unknown"


KINDS = [k.value for k in Kind]
COPY_KINDS = [k.value for k in CopyKind]
MEM_KINDS = [k.value for k in MemKind]

#: GPU-side kinds (rows that run on a device/stream).
GPU_KINDS = frozenset({Kind.KERNEL, Kind.COLLECTIVE, Kind.MEMCPY, Kind.MEMSET})
#: Host-side API kinds.
API_KINDS = frozenset({Kind.RUNTIME, Kind.DRIVER})


class EventSchema(dy.Schema):
    """The normalized event table. Validate at the parser boundary with ``validate_events``."""

    kind = dy.Enum(KINDS, nullable=False)
    name = dy.String(nullable=False)
    start_ns = dy.Int64(nullable=False)
    dur_ns = dy.Int64(nullable=False)
    pid = dy.Int64(nullable=True)
    tid = dy.Int64(nullable=True)
    device = dy.Int32(nullable=True)
    stream = dy.Int64(nullable=True)
    correlation = dy.Int64(nullable=True)
    external_id = dy.Int64(nullable=True)
    bytes = dy.Int64(nullable=True)
    copy_kind = dy.Enum(COPY_KINDS, nullable=True)
    src_mem = dy.Enum(MEM_KINDS, nullable=True)
    dst_mem = dy.Enum(MEM_KINDS, nullable=True)
    graph = dy.Bool(nullable=True)
    non_blocking = dy.Bool(nullable=True)
    domain = dy.String(nullable=True)
    rank = dy.Int32(nullable=False)
    step = dy.Int32(nullable=True)

    @dy.rule()
    def duration_not_negative(cls) -> pl.Expr:  # noqa: N805
        return pl.col("dur_ns") >= 0

    @dy.rule()
    def gpu_rows_have_a_stream(cls) -> pl.Expr:  # noqa: N805
        gpu = pl.col("kind").is_in([k.value for k in GPU_KINDS])
        return ~gpu | pl.col("stream").is_not_null() | pl.col("device").is_null()


#: Column order and dtypes, for parsers that build frames column by column.
EVENT_COLUMNS: dict[str, pl.DataType] = dict(EventSchema.create_empty().schema)


def empty_events() -> pl.DataFrame:
    """An empty frame with the event schema."""
    return EventSchema.create_empty()


def conform(columns: dict[str, Any], height: int | None = None) -> pl.DataFrame:
    """Build an event frame from a dict of columns; missing columns become nulls.

    Casts every column to the schema's dtype. Use before :func:`validate_events`.
    """
    n = height if height is not None else max((len(v) for v in columns.values()), default=0)
    data = {}
    for col, dtype in EVENT_COLUMNS.items():
        if col in columns:
            data[col] = pl.Series(col, columns[col]).cast(dtype, strict=False)
        elif col == "rank":
            data[col] = pl.repeat(0, n, dtype=dtype, eager=True).alias(col)
        else:
            data[col] = pl.repeat(None, n, dtype=dtype, eager=True).alias(col)
    return pl.DataFrame(data)


def validate_events(df: pl.DataFrame) -> pl.DataFrame:
    """Validate (and cast) a frame against :class:`EventSchema`; raises on violations."""
    return EventSchema.validate(df.select(list(EVENT_COLUMNS)), cast=True)


#: Skip reason of a row that breaks a schema rule (first broken rule, in this order).
_INVALID_REASONS: dict[str, str] = {
    "kind|nullability": "invalid row: no kind",
    "kind|dtype": "invalid row: unknown kind",
    "name|nullability": "invalid row: no name",
    "start_ns|nullability": "invalid row: no start time",
    "dur_ns|nullability": "invalid row: no duration",
    "duration_not_negative": "invalid row: negative duration",
    "gpu_rows_have_a_stream": "invalid row: GPU row without a stream",
    "rank|nullability": "invalid row: no rank",
}


def _reason(rule: str) -> str:
    if rule in _INVALID_REASONS:
        return _INVALID_REASONS[rule]
    if rule.endswith("|dtype"):
        return f"invalid row: {rule.split('|')[0]} out of range"
    return f"invalid row: {rule}"


def filter_events(df: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Validate (and cast) like :func:`validate_events`, dropping the rows that break the schema.

    The parsers' last line of defence: a row a parser let through although it breaks a schema
    rule (a negative duration, a GPU row without a stream, a value out of its column's range)
    is skipped and counted instead of failing the whole trace.

    Returns:
        The valid rows, and the dropped rows counted by reason (``invalid row: ...``; one
        reason per row: the first rule it breaks).
    """
    good, failure = EventSchema.filter(df.select(list(EVENT_COLUMNS)), cast=True)
    # the filter can leave columns cut at different rows: the next filter would copy them all
    good = align_chunks(good)
    if good.height == df.height:
        return good, {}
    details = failure.details()
    rules = [c for c in details.columns if c not in EVENT_COLUMNS]
    # a failed cast makes the other rules of its row "unknown": report casts first
    order = [r for r in rules if r.endswith("|dtype")]
    order += [r for r in _INVALID_REASONS if r in rules and r not in order]
    order += [r for r in rules if r not in order]
    reason = pl.coalesce(
        [pl.when(pl.col(r) == "invalid").then(pl.lit(_reason(r))) for r in order]
        + [pl.lit("invalid row")]
    )
    counts = details.select(reason.alias("r"))["r"].value_counts()
    return good, {str(r): int(n) for r, n in counts.iter_rows()}


class TraceMeta(BaseModel):
    """Facts about one trace (or one folder of per-rank traces)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="file or folder name (never a full path)")
    format: str = Field(description="kineto | nsys_sqlite | nsys_rep | nsys_csv")
    profiler: str = Field(description="torch.profiler | nsys")
    files: list[str] = Field(default_factory=list, description="file names read")
    size_bytes: int = 0
    gpu: str | None = None
    gpus: list[str] = Field(default_factory=list)
    driver_version: str | None = None
    cuda_runtime: str | None = None
    cuda_driver: str | None = None
    torch_version: str | None = None
    nccl_version: str | None = None
    schema_version: str | None = Field(default=None, description="the file format's version")
    cc_mode: str | None = Field(default=None, description="off | on | devtools, when stated")
    rank: int | None = None
    world_size: int | None = None
    ranks: list[int] = Field(default_factory=list)
    host_only: bool = Field(default=False, description="no GPU activity recorded")
    n_events: int = 0
    skipped: dict[str, int] = Field(default_factory=dict, description="skipped events by reason")
    warnings: list[str] = Field(default_factory=list)
    step_marker: str | None = None
    extra: dict[str, str] = Field(default_factory=dict)


@dataclass
class Trace:
    """One parsed trace: events, steps and metadata.

    ``steps`` has columns rank (Int32), step (Int32), name (String), start_ns, end_ns,
    dur_ns (Int64): the step windows on each rank's host timeline.
    """

    events: pl.DataFrame
    meta: TraceMeta
    steps: pl.DataFrame = field(default_factory=lambda: empty_steps())
    #: summary tables the trace came with (``nsys stats`` ``*_sum`` reports), in
    #: :class:`SummarySchema`: what a summary-only trace (no ``cuda_gpu_trace``) still tells.
    summaries: pl.DataFrame = field(default_factory=lambda: empty_summaries())


STEP_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "step": pl.Int32(),
    "name": pl.String(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
}


def empty_steps() -> pl.DataFrame:
    """An empty step table."""
    return pl.DataFrame(schema=STEP_COLUMNS)


class SummarySchema(dy.Schema):
    """Totals per name from a summary report, one row per (rank, report, name).

    ``report``: ``api_sum`` (``cuda_api_sum``: host API calls), ``kern_sum``
    (``cuda_gpu_kern_sum``: kernels), ``mem_time_sum`` (``cuda_gpu_mem_time_sum``: copies and
    memsets). ``kind``: the event kind the row sums (runtime, driver, kernel, collective, memcpy,
    memset). ``count``: calls or instances; ``total_ns``: their summed duration.
    """

    report = dy.String(nullable=False)
    kind = dy.Enum(KINDS, nullable=False)
    name = dy.String(nullable=False)
    count = dy.Int64(nullable=False)
    total_ns = dy.Int64(nullable=False)
    rank = dy.Int32(nullable=False)


def empty_summaries() -> pl.DataFrame:
    """An empty summary table."""
    return SummarySchema.create_empty()
