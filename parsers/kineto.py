"""PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, -> :class:`ccdiag.schema.Trace`.

Speed and memory. The ``traceEvents`` array is streamed in chunks (``_chunked_json``): gzip is
inflated on a thread, each chunk is decoded by msgspec into typed Structs holding only the
fields we use (every other key, and every arg not in ``kineto_args_v1.yaml``, is skipped by the
decoder without being built), columns are built in bulk and classified with polars expressions,
and the chunk's objects die before the next chunk is read. Neither the whole text nor all decoded
events are alive at once (``bench/bench_load.py`` measures time and peak memory).

What becomes a row, and what is skipped (counted by reason in ``TraceMeta.skipped``):

- complete events ('X') of the categories in the YAML map -> rows of their kind; kernels whose
  name contains ``nccl`` -> ``collective``; ``cuda_sync`` (GPU-side sync records) -> ``sync``;
  ``python_function`` -> skipped unless ``python_functions=True``;
- flows ('s'/'f'/'t': ``ac2g``, ``async_gpu``, ``fwdbwd`` ...) -> ``flow:<cat>``; metadata ('M')
  -> ``metadata``; instant events ('i') -> ``instant``; other phases -> ``phase:<ph>``;
- other categories -> ``category:<cat>``; an event without ts, dur or name, with a NaN/inf time,
  or a negative duration -> ``missing ts`` / ``missing dur`` / ``missing name`` /
  ``non-finite time`` / ``negative dur``; an entry of the wrong shape -> ``malformed event``.

So ``n_events + sum(skipped) == len(traceEvents)``.

Joins and derived columns:

- Times: µs floats -> Int64 ns, integer and fraction parts converted separately so that large
  epoch timestamps keep all the precision the double holds (no ``ts * 1000`` rounding): exact
  ns for process-relative clocks (ts ~5e12 µs), within 125 ns for epoch-µs floats (~1.7e15,
  where the double's spacing is 0.25 µs; HTA instead rounds such traces to whole µs).
- GPU rows (kernel, collective, memcpy, memset, sync, GPU annotations): ``device`` and ``stream``
  from args (else Kineto's pid/tid), ``tid`` null, ``pid`` = the pid of the runtime/driver call
  with the same ``correlation`` (the launcher), else the trace's main host pid.
- ``graph``: API rows: the call is a graph launch (``ccdiag.apis.GRAPH_LAUNCH_APIS``); GPU rows:
  their correlation equals a graph launch's.
- Memcpy ``copy_kind`` / ``src_mem`` / ``dst_mem`` from the name ``Memcpy HtoD (Pinned ->
  Device)``; the direction is decided from the memory kinds (a ``DtoD`` with a Managed side is
  host traffic under CC: Managed->Device = HtoD, Device->Managed = DtoH).
- ``non_blocking`` of ``aten::copy_`` / ``aten::to`` / ``aten::_to_copy`` from "Concrete Inputs".
- Collective ``bytes`` (message size, as nccl-tests counts it: the larger of the input and output
  buffers) = max(In msg nelems, Out msg nelems) x dtype size, taken from, in order: the NCCL
  kernel's own args (PyTorch >= 2.3); the ``record_param_comms`` cpu_op with the kernel's
  External id; the innermost ``record_param_comms`` on the launching thread whose time span
  contains the launch call (older traces, where External ids do not link them). A
  ``record_param_comms`` without msg nelems falls back to its first input tensor (Input Dims x
  Input type). The ``record_param_comms`` rows carry the same size in ``bytes``. "Input Dims" /
  "Input type" are *lazy* args (YAML ``lazy: true``): they would cost an object on every cpu_op,
  so a second decode of a chunk's text reads them only when that chunk holds such a
  ``record_param_comms``.
"""

from __future__ import annotations

import functools
import gc
import math
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import yaml
from ccdiag.parsers._chunked_json import ArrayChunks, repair_text

from ccdiag import apis
from ccdiag.errors import InputError
from ccdiag.limits import size_text
from ccdiag.progress import Progress, uncompressed_size
from ccdiag.schema import EVENT_COLUMNS, Trace, TraceMeta, filter_events

MAP_FILE = Path(__file__).with_name("kineto_args_v1.yaml")
_RPC = "record_param_comms"
_GPU_ROW = "_gpu"
_POLARS: dict[str, pl.DataType] = {"Int64": pl.Int64(), "Int32": pl.Int32(), "String": pl.String()}
_NUM = int | float | str | None
_NONFINITE = re.compile(
    rb"([:\[,]\s*)(-?Infinity|NaN|-?[0-9]+(?:\.[0-9]+)?[eE]\+?[0-9]{3,})(?=\s*[,}\]])"
)


@dataclass(frozen=True)
class ArgSpec:
    """One raw arg key -> parser column (from the YAML map)."""

    raw: str
    column: str
    dtype: str
    attr: str
    lazy: bool = False


@dataclass
class ArgMap:
    """The versioned YAML map, plus the msgspec types generated from it."""

    version: int
    args: list[ArgSpec]
    categories: dict[str, dict[str, Any]]
    skip_categories: dict[str, str]
    collective_substrings: list[str]
    dtype_bytes: dict[str, int]
    non_blocking_index: dict[str, dict[int, int]]
    strict: msgspec.json.Decoder = field(repr=False)
    lenient_event: type = field(repr=False)
    empty_args: Any = field(repr=False)
    lazy: msgspec.json.Decoder = field(repr=False)

    def attrs(self, column: str) -> list[str]:
        """Struct attributes (one per raw key) that fill ``column``."""
        return [a.attr for a in self.args if a.column == column]


def _struct_types(args: list[ArgSpec], lenient: bool) -> tuple[type, type]:
    """Event and args Structs for the eager (non-lazy) args; every field Any when lenient."""

    def py(dtype: str) -> Any:
        if lenient:
            return Any
        return msgspec.Raw if dtype == "Raw" else _NUM

    eager = [a for a in args if not a.lazy]
    arg_t = msgspec.defstruct(
        "KinetoArgs",
        [(a.attr, py(a.dtype), None) for a in eager],
        rename={a.attr: a.raw for a in eager},
        gc=False,
    )
    top = Any if lenient else None
    ev_t = msgspec.defstruct(
        "KinetoEvent",
        [
            ("ph", top or (str | None), None),
            ("cat", top or (str | None), None),
            ("name", top or (str | None), None),
            ("pid", top or (int | str | None), None),
            ("tid", top or (int | str | None), None),
            ("ts", top or (float | None), None),
            ("dur", top or (float | None), None),
            ("args", arg_t | None, None),
        ],
        gc=False,
    )
    return arg_t, ev_t


def _lazy_decoder(args: list[ArgSpec]) -> msgspec.json.Decoder:
    """Second-pass decoder: name, External id and the lazy args of each event (as Raw)."""
    fields = [a for a in args if a.lazy or a.column == "external_id"]
    arg_t = msgspec.defstruct(
        "KinetoLazyArgs",
        [(a.attr, Any if a.column == "external_id" else msgspec.Raw, None) for a in fields],
        rename={a.attr: a.raw for a in fields},
        gc=False,
    )
    ev_t = msgspec.defstruct(
        "KinetoLazyEvent", [("name", Any, None), ("args", arg_t | None, None)], gc=False
    )
    return msgspec.json.Decoder(list[ev_t])  # type: ignore[valid-type]


@functools.lru_cache(maxsize=4)
def load_map(path: Path = MAP_FILE) -> ArgMap:
    """Load a versioned Kineto arg map and generate its decoder types."""
    doc = yaml.safe_load(path.read_text())
    args = [
        ArgSpec(a["raw"], a["column"], a["dtype"], f"a{i}", bool(a.get("lazy", False)))
        for i, a in enumerate(doc["args"])
    ]
    arg_t, ev_t = _struct_types(args, lenient=False)
    _, lenient_t = _struct_types(args, lenient=True)
    return ArgMap(
        version=int(doc["version"]),
        args=args,
        categories=doc["categories"],
        skip_categories=doc.get("skip_categories", {}),
        collective_substrings=[s.lower() for s in doc.get("collective_kernel_substrings", [])],
        dtype_bytes={str(k): int(v) for k, v in doc.get("dtype_bytes", {}).items()},
        non_blocking_index={
            op: {int(n): int(i) for n, i in idx.items()}
            for op, idx in doc.get("non_blocking_index", {}).items()
        },
        strict=msgspec.json.Decoder(list[ev_t]),  # type: ignore[valid-type]
        lenient_event=lenient_t,
        empty_args=arg_t(),
        lazy=_lazy_decoder(args),
    )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Millions of short-lived objects: the cyclic GC would rescan them again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read(
    path: str | Path,
    *,
    python_functions: bool = False,
    chunk_bytes: int = 8 << 20,
    progress: Progress | None = None,
) -> Trace:
    """Read a Kineto trace (``.json`` or ``.json.gz``) into the event schema.

    Args:
        path: the trace file.
        python_functions: keep ``python_function`` events (kind ``python``) instead of skipping.
        chunk_bytes: size of one chunk of JSON text decoded at a time (memory vs. speed).
        progress: called once per chunk with the bytes of JSON text read so far and in all.

    Returns:
        The trace; ``steps`` is empty until ``ccdiag.steps.assign_steps``.

    Raises:
        InputError: the file is not a readable Kineto trace (one line saying why).
    """
    p = Path(path)
    reader = _Reader(p, load_map(), python_functions)
    chunks = ArrayChunks(p, "traceEvents", chunk_bytes, keep=TOP_LEVEL_KEYS)
    with _gc_paused():
        if progress is None:
            frames = list(chunks.map(reader.decode, reader.chunk, _Decoded.count))
        else:
            frames = _with_progress(chunks, reader, progress, f"reading {p.name}")
    doc = chunks.meta
    if reader.total == 0:
        raise InputError(p, "traceEvents is empty: the trace holds no events")
    if reader.total == reader.skipped.get("malformed event", 0):
        raise InputError(p, "traceEvents holds no event objects: not a trace")
    meta = _meta(p, doc, reader)
    events, invalid = filter_events(_link(frames, meta.rank or 0))
    del frames
    meta.skipped = dict(sorted((Counter(meta.skipped) + Counter(invalid)).items()))
    meta.n_events = events.height
    meta.host_only = events.filter(pl.col("device").is_not_null()).is_empty()
    meta.gpu, meta.gpus = _gpu_names(doc, events)
    repaired = reader.repaired + chunks.repaired
    if repaired:
        meta.warnings.append(
            f"{repaired:,} characters in strings were lone UTF-16 surrogate escapes or bytes "
            "that are not UTF-8: replaced by U+FFFD"
        )
    if chunks.skipped_bytes >= SKIPPED_WARN_BYTES:
        names = ", ".join(repr(k) for k in chunks.skipped_members)
        meta.warnings.append(
            f"{size_text(chunks.skipped_bytes)} of top-level members ccdiag does not read "
            f"({names}) skipped unread"
        )
    shared = _shared_correlations(events)
    if shared:
        meta.warnings.append(
            f"{shared:,} CUDA API calls share their correlation id with another call: the GPU "
            "work of such an id is linked to the first call"
        )
    return Trace(events=events, meta=meta)


def _shared_correlations(events: pl.DataFrame) -> int:
    """API calls whose correlation id an earlier call already has (the launcher join keeps the
    first)."""
    corr = events.lazy().filter(_API_ROW).select("correlation")
    return int(corr.select(pl.len() - pl.col("correlation").n_unique()).collect().item())


def _with_progress(
    chunks: ArrayChunks, reader: _Reader, progress: Progress, task: str
) -> list[pl.DataFrame]:
    total = uncompressed_size(chunks.path)
    progress(task, 0, total)
    frames = []
    for frame in chunks.map(reader.decode, reader.chunk, _Decoded.count):
        frames.append(frame)
        progress(task, min(chunks.total_bytes, total), total)
    progress(task, total, total)
    return frames


class _Reader:
    """Per-chunk decode and column building; accumulates skip counts."""

    def __init__(self, path: Path, amap: ArgMap, python_functions: bool) -> None:
        self.path = path
        self.amap = amap
        self.python_functions = python_functions
        self.skipped: Counter[str] = Counter()
        self.malformed = 0
        self.total = 0
        self.repaired = 0
        self._reasons: dict[Any, str | None] = {}
        self._issued: set[str] = set()
        self._nb_cache: dict[tuple[str, Any], bool | None] = {}

    # -- decoding ---------------------------------------------------------------------------
    def decode(self, mv: memoryview) -> _Decoded:
        """Strict typed decode; on a type mismatch, decode leniently event by event.

        Text msgspec refuses but Python's json reads is repaired first and counted: NaN /
        Infinity literals (kept as strings, so that their events are counted as non-finite),
        lone UTF-16 surrogate escapes and bytes that are not UTF-8 (U+FFFD).
        """
        try:
            return self._decoded(self.amap.strict.decode(mv), mv)
        except msgspec.ValidationError:  # a subclass of DecodeError: valid JSON, other types
            pass
        except msgspec.DecodeError:
            data, n = self._repair(mv)
            dec = self._decoded(self._lenient(msgspec.json.decode(data)), None)
            self.repaired += n
            return dec
        try:
            return self._decoded(self._lenient(msgspec.json.decode(mv)), mv)
        except msgspec.DecodeError:  # other types, and text to repair further on
            data, n = self._repair(mv)
            dec = self._decoded(self._lenient(msgspec.json.decode(data)), None)
            self.repaired += n
            return dec

    @staticmethod
    def _repair(mv: memoryview) -> tuple[bytes, int]:
        """Text msgspec refused, repaired; re-raises when there is nothing to repair."""
        data, n_sur, n_bad = repair_text(mv)
        nonfinite = _NONFINITE.search(data) is not None
        if not (n_sur or n_bad or nonfinite):
            raise  # noqa: PLE0704 - the DecodeError being handled
        if nonfinite:
            data = _NONFINITE.sub(rb'\1"\2"', data)
        return data, n_sur + n_bad

    def _decoded(self, events: list[Any], text: memoryview | None) -> _Decoded:
        dec = _Decoded(events, text, self.malformed)
        return dec

    def _lenient(self, items: Any) -> list[Any]:
        out = []
        for item in items if isinstance(items, list) else [items]:
            try:
                ev: Any = msgspec.convert(item, self.amap.lenient_event, strict=False)
            except msgspec.ValidationError:
                self.malformed += 1
                continue
            for attr in ("ph", "cat", "name"):
                if not isinstance(getattr(ev, attr), str):
                    setattr(ev, attr, None)
            for attr in ("pid", "tid"):
                v = getattr(ev, attr)
                if isinstance(v, bool) or not isinstance(v, (int, str)):
                    setattr(ev, attr, None)
            ev.ts, ev.dur = _as_number(ev.ts), _as_number(ev.dur)
            if ev.args is not None:
                for spec in self._eager:
                    v = getattr(ev.args, spec.attr)
                    if v is not None:
                        setattr(ev.args, spec.attr, _as_arg(v, spec.dtype))
            out.append(ev)
        return out

    # -- one chunk -> frame -----------------------------------------------------------------
    def chunk(self, dec: _Decoded) -> pl.DataFrame:
        """Classify one decoded chunk; return its rows (schema columns + helpers)."""
        evs = dec.events
        self.total += len(evs) + self.malformed
        if self.malformed:
            self.skipped["malformed event"] += self.malformed
            self.malformed = 0
        keep = self._keep
        mask = [e.ph == "X" and e.cat in keep for e in evs]
        if all(mask):
            kept = evs
        else:
            # complete events are keyed by category, the rest by (phase, category)
            skipped = Counter(
                e.cat if e.ph == "X" else (e.ph, e.cat) for e, m in zip(evs, mask) if not m
            )
            for k, n in skipped.items():
                self.skipped[self._reason(k) or "?"] += n
            kept = list(compress(evs, mask))
        del evs, mask
        df = self._columns(kept)
        df = self._finish_chunk(df, kept)
        return self._lazy_sizes(df, dec.text)

    @functools.cached_property
    def _eager(self) -> list[ArgSpec]:
        return [a for a in self.amap.args if not a.lazy]

    @functools.cached_property
    def _keep(self) -> frozenset[str]:
        cats = self.amap.categories
        return frozenset(
            c for c, s in cats.items() if self.python_functions or not s.get("optional")
        )

    def _reason(self, key: Any) -> str | None:
        """Skip reason of a (phase, category) key, or of a complete event's category.

        At most ``_MAX_REASONS`` distinct reasons are kept: a file with a million distinct
        categories must not cost a million counters (the rest are counted together).
        """
        if key in self._reasons:
            return self._reasons[key]
        reason = self._reason_of(key)
        if reason is not None and reason not in self._issued:
            if len(self._issued) >= _MAX_REASONS:
                head = reason.split(":", 1)[0] if ":" in reason else "other"
                reason = f"{head}: other values (more than {_MAX_REASONS} distinct reasons)"
            else:
                self._issued.add(reason)
        if len(self._reasons) < 10_000:
            self._reasons[key] = reason
        return reason

    def _reason_of(self, key: Any) -> str | None:
        if not isinstance(key, tuple):
            if key in self._keep:
                return None
            if key in self.amap.skip_categories:
                return self.amap.skip_categories[key]
            if key == "python_function":
                return "python_function"
            return f"category:{_short(key)}"
        ph, cat = key
        if ph is None:
            return "missing ph"
        if ph in ("s", "f", "t"):
            return f"flow:{_short(cat)}"
        if ph == "M":
            return "metadata"
        if ph in ("i", "I"):
            return "instant"
        return f"phase:{_short(ph)}"

    def _count(self, reason: pl.Series) -> list[bool] | None:
        """Add skip reasons to the counts; return the keep mask (None: keep all)."""
        if reason.null_count() == len(reason):
            return None
        for r, n in reason.drop_nulls().value_counts().iter_rows():
            self.skipped[r] += n
        return reason.is_null().to_list()

    def _columns(self, evs: list[Any]) -> pl.DataFrame:
        """Bulk column build (list comprehensions over Structs -> typed Series).

        Args are extracted only on the rows that use them (``_ARG_SCOPE``). Few polars calls
        per chunk: each one has a fixed cost that adds up over hundreds of chunks.
        """
        amap = self.amap
        n = len(evs)
        cats = amap.categories
        df = pl.DataFrame(
            {
                "cat": pl.Series([e.cat for e in evs], dtype=pl.String),
                "name": pl.Series([e.name for e in evs], dtype=pl.String, strict=False),
                "pid": pl.Series([e.pid for e in evs], dtype=pl.Int64, strict=False),
                "tid": pl.Series([e.tid for e in evs], dtype=pl.Int64, strict=False),
                "ts": pl.Series([e.ts for e in evs], dtype=pl.Float64, strict=False),
                "dur": pl.Series([e.dur for e in evs], dtype=pl.Float64, strict=False),
            }
        ).with_columns(
            pl.col("cat").replace_strict({c: s["kind"] for c, s in cats.items()}).alias("kind"),
            pl.col("cat").is_in([c for c, s in cats.items() if s.get("gpu")]).alias(_GPU_ROW),
        )
        scopes = _arg_scopes(amap)
        masks = df.select([e.alias(str(k)) for k in scopes if (e := _scope_expr(k)) is not None])
        empty = amap.empty_args
        args = [e.args or empty for e in evs]
        new = []
        for scope, columns in scopes.items():
            rows = None if scope is None else masks[str(scope)].arg_true().to_list()
            sub = args if rows is None else [args[i] for i in rows]
            for column, dtype in columns:
                parts = [
                    pl.Series(list(map(attrgetter(a), sub)), dtype=dtype, strict=False)
                    for a in amap.attrs(column)
                ]
                values = functools.reduce(lambda a, b: a.fill_null(b), parts)
                if rows is not None:
                    values = pl.repeat(None, n, dtype=dtype, eager=True).scatter(rows, values)
                new.append(values.alias("a_" + column))
        return df.with_columns(new)

    def _finish_chunk(self, df: pl.DataFrame, evs: list[Any]) -> pl.DataFrame:
        """Time checks, kinds, GPU columns, copies, non_blocking and message sizes."""
        df = df.with_columns(
            _us_to_ns(pl.col("ts")).alias("start_ns"),
            _us_to_ns(pl.col("dur")).alias("dur_ns"),
            _time_reason(),
        )
        keep = self._count(df["reason"])
        if keep is not None:
            df = df.filter(pl.Series(keep))
            evs = list(compress(evs, keep))
        names = (
            df.lazy()
            .filter(pl.col("kind").is_in(["kernel", "memcpy"]))
            .select("kind", "name")
            .unique()
            .collect()
        )
        kernels = names.filter(pl.col("kind") == "kernel")["name"].to_list()
        copies = names.filter(pl.col("kind") == "memcpy")["name"].to_list()
        df = df.with_columns(self._collective_kind(kernels), *_gpu_exprs())
        df = df.with_columns(_copy_exprs(copies))
        df = self._with_raw_derived(df, evs)
        return df.select([pl.col(c).cast(t) for c, t in _CHUNK_COLUMNS.items()])

    def _collective_kind(self, kernels: list[str]) -> pl.Expr:
        """Kernels whose name contains a collective substring (``nccl``) -> ``collective``."""
        subs = self.amap.collective_substrings
        coll = [n for n in kernels if n and any(s in n.lower() for s in subs)]
        if not coll:
            return pl.col("kind")
        kernel = pl.col("kind") == "kernel"
        return (
            pl.when(kernel & pl.col("name").is_in(coll))
            .then(pl.lit("collective"))
            .otherwise(pl.col("kind"))
            .alias("kind")
        )

    def _with_raw_derived(self, df: pl.DataFrame, evs: list[Any]) -> pl.DataFrame:
        """non_blocking (per-row decoding of a few Raw args) and message sizes."""
        amap = self.amap
        in_n, out_n = pl.col("a_in_msg_nelems"), pl.col("a_out_msg_nelems")
        size = pl.col("a_msg_dtype").replace_strict(
            amap.dtype_bytes, default=None, return_dtype=pl.Int64
        )
        msg = pl.max_horizontal(in_n, out_n) * size
        names = df["name"]
        rows = df.select(pl.col("name").is_in(list(amap.non_blocking_index)).arg_true())
        nb: list[bool | None] = [None] * df.height
        for i in rows.to_series().to_list():
            nb[i] = self._non_blocking(evs[i], names[i])
        comms = pl.col("kind").is_in(["collective", "kernel"]) | (pl.col("name") == _RPC)
        return df.with_columns(
            pl.Series("non_blocking", nb, dtype=pl.Boolean),
            pl.when(comms)
            .then(pl.coalesce("bytes", msg))
            .otherwise(pl.col("bytes"))
            .alias("bytes"),
        )

    def _non_blocking(self, ev: Any, name: str) -> bool | None:
        """Cached by (op, inputs text): most copies repeat the same few inputs."""
        args = ev.args
        if args is None:
            return None
        raw = next(
            (v for a in self.amap.attrs("concrete_inputs") if (v := getattr(args, a)) is not None),
            None,
        )
        if raw is None:
            return None
        key = (name, bytes(raw) if isinstance(raw, msgspec.Raw) else repr(raw))
        if key not in self._nb_cache:
            self._nb_cache[key] = _non_blocking(_raw(raw), name, self.amap)
        return self._nb_cache[key]

    def _lazy_sizes(self, df: pl.DataFrame, text: memoryview | None) -> pl.DataFrame:
        """record_param_comms without msg nelems: size of the first input tensor.

        "Input Dims" / "Input type" are lazy args: decoded in a second pass over the chunk's
        text, and only for chunks that hold such a record_param_comms (old traces with NCCL).
        """
        rpc = (
            (pl.col("name") == _RPC)
            & pl.col("bytes").is_null()
            & pl.col("external_id").is_not_null()
        )
        if text is None or df.select(rpc.any()).item() is not True:
            return df
        try:
            lazy = self.amap.lazy.decode(text)
        except msgspec.DecodeError:
            return df
        ext_attrs = self.amap.attrs("external_id")
        sizes: dict[int, int] = {}
        for ev in lazy:
            if ev.name != _RPC or ev.args is None:
                continue
            ext = next((v for a in ext_attrs if isinstance(v := getattr(ev.args, a), int)), None)
            size = _first_tensor_bytes(ev.args, self.amap)
            if ext is not None and size is not None:
                sizes[ext] = size
        fill = pl.col("external_id").replace_strict(sizes, default=None, return_dtype=pl.Int64)
        return df.with_columns(pl.when(rpc).then(fill).otherwise(pl.col("bytes")).alias("bytes"))


@dataclass
class _Decoded:
    """One decoded chunk and its JSON text (kept for the lazy second pass)."""

    events: list[Any]
    text: memoryview | None
    malformed: int = 0

    def count(self) -> int:
        """Elements of the chunk (events, and entries that were not event objects)."""
        return len(self.events) + self.malformed


def _as_number(v: Any) -> float | None:
    """A time from the lenient decode: a number (ints beyond a double: infinite), a numeric
    string ("NaN", "1e999" from the repair), else None (counted as missing)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, float):
        return v
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _as_arg(v: Any, dtype: str) -> Any:
    """An arg from the lenient decode, of a type its column can hold (else None)."""
    if dtype == "Raw":
        return v
    if dtype == "String":
        return v if isinstance(v, str) else None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and v.is_integer() and abs(v) < 2**63 else None
    if isinstance(v, str):
        try:
            n = int(v)
        except ValueError:
            return None
        return n if -(2**63) <= n < 2**63 else None
    return None


#: Distinct skip reasons kept per trace (the rest are counted under one reason per kind).
_MAX_REASONS = 200


def _short(value: Any, n: int = 80) -> str:
    """A category or phase as shown in a skip reason (bounded length)."""
    text = str(value)
    return text if len(text) <= n else text[: n - 3] + "..."


#: Which rows each arg column is extracted on (None: all rows).
_ARG_SCOPE: dict[str, str | None] = {
    "external_id": None,
    "correlation": "api_gpu",
    "device": "gpu",
    "stream": "gpu",
    "bytes": "sized",
    "in_msg_nelems": "comms",
    "out_msg_nelems": "comms",
    "msg_dtype": "comms",
}


def _scope_expr(scope: str | None) -> pl.Expr | None:
    kind = pl.col("kind")
    if scope is None:
        return None
    return {
        "api_gpu": kind.is_in(["runtime", "driver"]) | pl.col(_GPU_ROW),
        "gpu": pl.col(_GPU_ROW),
        "sized": kind.is_in(["memcpy", "memset"]),
        "comms": (kind == "kernel") | ((kind == "cpu_op") & (pl.col("name") == _RPC)),
    }[scope]


def _arg_scopes(amap: ArgMap) -> dict[str | None, list[tuple[str, pl.DataType]]]:
    """Group the non-Raw arg columns of the map by the rows they are read on."""
    out: dict[str | None, list[tuple[str, pl.DataType]]] = {}
    for column in dict.fromkeys(a.column for a in amap.args if a.dtype != "Raw"):
        dtype = _POLARS[next(a.dtype for a in amap.args if a.column == column)]
        out.setdefault(_ARG_SCOPE.get(column), []).append((column, dtype))
    return out


def _us_to_ns(col: pl.Expr) -> pl.Expr:
    """µs (float) -> ns (Int64), integer part and fraction separately (exact for the double)."""
    whole = col.floor()
    frac_ns = ((col - whole) * 1000.0).round()
    ok = col.is_finite()
    return pl.when(ok).then(
        whole.cast(pl.Int64, strict=False) * 1000 + frac_ns.cast(pl.Int64, strict=False)
    )


def _time_reason() -> pl.Expr:
    ts, dur = pl.col("ts"), pl.col("dur")
    return (
        pl.when(ts.is_null())
        .then(pl.lit("missing ts"))
        .when(dur.is_null())
        .then(pl.lit("missing dur"))
        .when(~ts.is_finite() | ~dur.is_finite())
        .then(pl.lit("non-finite time"))
        .when(dur < 0)
        .then(pl.lit("negative dur"))
        .when(pl.col("name").is_null())
        .then(pl.lit("missing name"))
        .otherwise(pl.lit(None, pl.String))
        .alias("reason")
    )


def _gpu_exprs() -> list[pl.Expr]:
    gpu = pl.col(_GPU_ROW)
    api = pl.col("kind").is_in(["runtime", "driver"])
    return [
        pl.when(gpu)
        .then(pl.coalesce("a_device", pl.col("pid").cast(pl.Int32, strict=False)))
        .alias("device"),
        pl.when(gpu).then(pl.coalesce("a_stream", "tid")).alias("stream"),
        pl.when(gpu).then(None).otherwise(pl.col("pid")).alias("pid"),
        pl.when(gpu).then(None).otherwise(pl.col("tid")).alias("tid"),
        pl.when(gpu | api).then(pl.col("a_correlation")).alias("correlation"),
        pl.col("a_external_id").alias("external_id"),
    ]


_MEM_KINDS = {
    "pageable": "pageable",
    "pinned": "pinned",
    "device": "device",
    "managed": "managed",
    "array": "array",
}
_HOST_MEM = ["pageable", "pinned"]
_DEV_MEM = ["device", "array"]
_MEMCPY_RE = r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?"


def _copy_exprs(names: list[str]) -> list[pl.Expr]:
    """copy_kind / src_mem / dst_mem of memcpy rows, from the distinct names of the chunk."""
    is_copy = pl.col("kind") == "memcpy"
    parsed = {n: copy_kinds(n) for n in names if n}
    name = pl.col("name")
    out = [
        pl.when(is_copy)
        .then(
            name.replace_strict(
                {n: p[i] for n, p in parsed.items()}, default=None, return_dtype=pl.String
            )
        )
        .alias(col)
        for i, col in enumerate(("copy_kind", "src_mem", "dst_mem"))
    ]
    memset = pl.col("kind") == "memset"
    out.append(pl.when(is_copy | memset).then(pl.col("a_bytes")).alias("bytes"))
    return out


_MEMCPY = re.compile(_MEMCPY_RE)


@functools.lru_cache(maxsize=4096)
def copy_kinds(name: str) -> tuple[str | None, str, str]:
    """(copy_kind, src_mem, dst_mem) of a Kineto memcpy name, direction from the memory kinds.

    ``Memcpy HtoD (Pinned -> Device)`` -> (HtoD, pinned, device). Under CC a pinned H2D is
    reported as ``DtoD (Managed -> Device)``: a Managed side facing a device side is host
    memory, so it is HtoD (and Device -> Managed is DtoH). Unknown kinds keep the label's
    letter; PtoP stays PtoP.
    """
    m = _MEMCPY.match(name)
    if m is None:
        return None, "unknown", "unknown"
    label, src_raw, dst_raw = m.group(1), m.group(2), m.group(3)
    src = _MEM_KINDS.get((src_raw or "").lower(), "unknown")
    dst = _MEM_KINDS.get((dst_raw or "").lower(), "unknown")
    if label == "PtoP":
        return "PtoP", src, dst

    def side(kind: str, other: str, letter: str) -> str:
        if kind in _HOST_MEM or (kind == "managed" and other != "managed"):
            return "H"
        if kind in _DEV_MEM or kind == "managed":
            return "D"
        return letter

    kind = side(src, dst, label[:1]) + "to" + side(dst, src, label[3:4])
    return (kind if kind in ("HtoD", "DtoH", "DtoD", "HtoH") else None), src, dst


def _raw(value: Any) -> Any:
    if isinstance(value, msgspec.Raw):
        try:
            return msgspec.json.decode(value)
        except msgspec.DecodeError:
            return None
    return value


def _non_blocking(inputs: Any, name: str, amap: ArgMap) -> bool | None:
    """The non_blocking flag of a copy op from its decoded "Concrete Inputs"."""
    if not isinstance(inputs, list):
        return None
    idx = amap.non_blocking_index.get(name, {}).get(len(inputs))
    if idx is None:
        return None
    value = inputs[idx]
    return {"True": True, "False": False}.get(value) if isinstance(value, str) else None


def _first_tensor_bytes(args: Any, amap: ArgMap) -> int | None:
    """Bytes of the first input tensor of an op, from its "Input Dims" and "Input type"."""
    dims = next((_raw(getattr(args, a)) for a in amap.attrs("input_dims")), None)
    types = next((_raw(getattr(args, a)) for a in amap.attrs("input_type")), None)
    if not (isinstance(dims, list) and isinstance(types, list) and dims and types):
        return None
    shape, dtype = dims[0], types[0]
    size = amap.dtype_bytes.get(dtype) if isinstance(dtype, str) else None
    if not (isinstance(shape, list) and shape and size):
        return None
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    return math.prod(shape) * size


_CHUNK_COLUMNS: dict[str, pl.DataType] = {
    **{c: t for c, t in EVENT_COLUMNS.items() if c not in ("rank", "step", "graph", "domain")},
    _GPU_ROW: pl.Boolean(),
}


def _empty_chunk() -> pl.DataFrame:
    return pl.DataFrame(schema=_CHUNK_COLUMNS)


# -- whole-trace joins ------------------------------------------------------------------------
def _link(frames: list[pl.DataFrame], rank: int) -> pl.DataFrame:
    """Launcher pid, graph flags and collective sizes; the final event frame.

    Lookup tables are built from all chunks first (they are small: API calls, record_param_comms
    spans). One join then looks up the launcher of every GPU row (narrow frames: GPU rows'
    correlation ids only), and each chunk frame is completed on its own and replaced in the
    list, so that no step holds two copies of the wide event frame.
    """
    if not frames:
        return _empty_events()
    launchers = pl.concat([f.filter(_API_ROW).select(_LAUNCHER_COLUMNS) for f in frames]).unique(
        "correlation", keep="first", maintain_order=True
    )
    host = pl.concat([f.filter(~pl.col(_GPU_ROW)).select("kind", "pid") for f in frames])
    main_pid = _main_pid(host)
    del host
    rpc = _rpc_table(frames)
    rows = [f.select(pl.col(_GPU_ROW).arg_true()).to_series() for f in frames]
    keys = pl.concat([f.select(pl.col("correlation").filter(pl.col(_GPU_ROW))) for f in frames])
    looked = keys.join(launchers, on="correlation", how="left", maintain_order="left")
    offset = 0
    for i, f in enumerate(frames):
        part = looked.slice(offset, rows[i].len())
        offset += rows[i].len()
        frames[i] = _link_chunk(f, rows[i], part, rpc, main_pid, rank)
    return pl.concat(frames, how="vertical", rechunk=False)


_API_ROW = pl.col("kind").is_in(["runtime", "driver"]) & pl.col("correlation").is_not_null()
_LAUNCHER_COLUMNS = [
    "correlation",
    pl.col("pid").alias("l_pid"),
    pl.col("tid").alias("l_tid"),
    pl.col("start_ns").alias("l_start"),
    apis.is_graph_launch(pl.col("name")).alias("l_graph"),
]
_LAUNCHER_SCHEMA: dict[str, pl.DataType] = {
    "correlation": pl.Int64(),
    "l_pid": pl.Int64(),
    "l_tid": pl.Int64(),
    "l_start": pl.Int64(),
    "l_graph": pl.Boolean(),
}


def _main_pid(host: pl.DataFrame) -> int | None:
    """The trace's host process: the pid of most API calls (else of most host events)."""
    pids = host.filter(pl.col("kind").is_in(["runtime", "driver"]) & pl.col("pid").is_not_null())
    if pids.is_empty():
        pids = host.filter(pl.col("pid").is_not_null() & (pl.col("pid") >= 0))
    if pids.is_empty():
        return None
    return int(pids["pid"].mode().sort()[0])


def _empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_COLUMNS)


def _link_chunk(
    f: pl.DataFrame,
    rows: pl.Series,
    part: pl.DataFrame,
    rpc: _RpcTable,
    main_pid: int | None,
    rank: int,
) -> pl.DataFrame:
    """Attach the launcher columns (GPU rows only) and derive pid, graph and collective sizes."""
    n = f.height
    looked = [
        pl.repeat(None, n, dtype=dtype, eager=True).scatter(rows, part[c]).alias(c)
        if rows.len()
        else pl.repeat(None, n, dtype=dtype, eager=True).alias(c)
        for c, dtype in _LAUNCHER_SCHEMA.items()
        if c != "correlation"
    ]
    gpu, kind = pl.col(_GPU_ROW), pl.col("kind")
    gpu_work = gpu & kind.is_in(["kernel", "collective", "memcpy", "memset"])
    f = f.with_columns(looked).with_columns(
        pl.when(gpu)
        .then(pl.coalesce("l_pid", pl.lit(main_pid, pl.Int64)))
        .otherwise(pl.col("pid"))
        .alias("pid"),
        pl.when(_API_ROW)
        .then(apis.is_graph_launch(pl.col("name")))
        .when(gpu_work)
        .then(pl.col("l_graph").fill_null(False))
        .alias("graph"),
        pl.lit(rank, pl.Int32).alias("rank"),
        pl.lit(None, pl.Int32).alias("step"),
        pl.lit(None, pl.String).alias("domain"),
    )
    f = _collective_bytes(f, rpc)
    return f.select(list(EVENT_COLUMNS))


@dataclass
class _RpcTable:
    """record_param_comms sizes: by External id, and as time spans per (pid, tid)."""

    by_ext: pl.DataFrame
    spans: pl.DataFrame


def _rpc_table(frames: list[pl.DataFrame]) -> _RpcTable:
    is_rpc = (pl.col("kind") == "cpu_op") & (pl.col("name") == _RPC) & pl.col("bytes").is_not_null()
    rpc = pl.concat([f.filter(is_rpc) for f in frames]) if frames else _empty_chunk()
    by_ext = (
        rpc.filter(pl.col("external_id").is_not_null())
        .group_by("external_id")
        .agg(pl.col("bytes").first().alias("x_bytes"))
    )
    spans = rpc.select(
        pl.col("pid").alias("l_pid"),
        pl.col("tid").alias("l_tid"),
        pl.col("start_ns").alias("r_start"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("r_end"),
        pl.col("bytes").alias("t_bytes"),
    ).sort("r_start")
    return _RpcTable(by_ext, spans)


def _collective_bytes(f: pl.DataFrame, rpc: _RpcTable) -> pl.DataFrame:
    """Fill the bytes of collectives that lack them from record_param_comms (module docstring)."""
    rows = f.select(((pl.col("kind") == "collective") & pl.col("bytes").is_null()).arg_true())
    rows_s = rows.to_series()
    if rows_s.is_empty() or rpc.spans.is_empty():
        return f
    need = f[rows_s].select("external_id", "l_pid", "l_tid", "l_start").with_row_index("_i")
    contained = (
        need.filter(pl.col("l_start").is_not_null() & pl.col("l_tid").is_not_null())
        .sort("l_start")
        .join_asof(
            rpc.spans,
            left_on="l_start",
            right_on="r_start",
            by=["l_pid", "l_tid"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("l_start") <= pl.col("r_end"))
        .select("_i", "t_bytes")
    )
    fill = (
        need.join(rpc.by_ext, on="external_id", how="left")
        .join(contained, on="_i", how="left")
        .sort("_i")
        .select(pl.coalesce("x_bytes", "t_bytes"))
        .to_series()
    )
    return f.with_columns(f["bytes"].scatter(rows_s, fill))


# -- metadata ---------------------------------------------------------------------------------
def _cuda_version(v: Any) -> str | None:
    if isinstance(v, int) and v > 0:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v) if isinstance(v, str) and v else None


def _find_key(obj: Any, key: str, depth: int = 0) -> Any:
    """First value under ``key`` anywhere in a nested dict (bounded depth)."""
    if depth > 6 or not isinstance(obj, dict):
        return None
    if key in obj and isinstance(obj[key], (str, int)):
        return obj[key]
    for v in obj.values():
        found = _find_key(v, key, depth + 1)
        if found is not None:
            return found
    return None


def _pip_version(obj: Any, package: str) -> str | None:
    pkgs = _find_key_list(obj, "pip_packages")
    for p in pkgs or []:
        if isinstance(p, str) and p.startswith(package + "=="):
            return p.split("==", 1)[1]
    return None


def _find_key_list(obj: Any, key: str, depth: int = 0) -> list[Any] | None:
    if depth > 6 or not isinstance(obj, dict):
        return None
    if isinstance(obj.get(key), list):
        return obj[key]
    for v in obj.values():
        found = _find_key_list(v, key, depth + 1)
        if found is not None:
            return found
    return None


#: The top-level members of a trace that are read (:func:`_meta`, :func:`_gpu_names`); the
#: others are skipped unread, their bytes counted (a warning from ``SKIPPED_WARN_BYTES`` on).
TOP_LEVEL_KEYS = frozenset(
    {
        "schemaVersion",
        "deviceProperties",
        "distributedInfo",
        "metadata",
        "pytorch_version",
        "torch_version",
        "pytorch",
        "cupti_version",
        "cuda_runtime_version",
        "cuda_driver_version",
    }
)
SKIPPED_WARN_BYTES = 1 << 20


def _meta(path: Path, doc: dict[str, Any], reader: _Reader) -> TraceMeta:
    dist: dict[str, Any] = doc.get("distributedInfo") or {}
    md: dict[str, Any] = doc.get("metadata") or {}
    dist = dist if isinstance(dist, dict) else {}
    md = md if isinstance(md, dict) else {}
    torch = next(
        (
            doc[k]
            for k in ("pytorch_version", "torch_version", "pytorch")
            if isinstance(doc.get(k), str)
        ),
        None,
    )
    torch = torch or _find_key(md, "torch_version") or _pip_version(md, "torch")
    nccl = (
        dist.get("nccl_version")
        or _pip_version(md, "nvidia-nccl-cu12")
        or _pip_version(md, "nvidia-nccl-cu13")
    )
    rank, world = _count(dist.get("rank"), 0), _count(dist.get("world_size"), 1)
    warnings = [
        f"distributedInfo.{k} {str(dist[k])[:40]!r} is not a {k.replace('_', ' ')}: ignored"
        for k, v in (("rank", rank), ("world_size", world))
        if v is None and dist.get(k) is not None
    ]
    extra = {}
    if doc.get("cupti_version") is not None:
        extra["cupti_version"] = str(doc["cupti_version"])
    extra["arg_map"] = f"{MAP_FILE.name} (version {reader.amap.version})"
    extra["trace_events"] = str(reader.total)
    return TraceMeta(
        source=path.name,
        format="kineto",
        profiler="torch.profiler",
        files=[path.name],
        size_bytes=path.stat().st_size,
        driver_version=_find_key(md, "nvidia_driver_version"),
        cuda_runtime=_cuda_version(doc.get("cuda_runtime_version")),
        cuda_driver=_cuda_version(doc.get("cuda_driver_version")),
        torch_version=str(torch) if torch else None,
        nccl_version=str(nccl) if nccl else None,
        schema_version=str(doc["schemaVersion"]) if "schemaVersion" in doc else None,
        rank=rank,
        world_size=world,
        ranks=[rank if rank is not None else 0],
        skipped=dict(sorted(reader.skipped.items())),
        warnings=warnings,
        extra=extra,
    )


def _count(v: Any, low: int) -> int | None:
    """A rank (low 0) or world size (low 1) from distributedInfo: an int in [low, 2**31)."""
    ok = isinstance(v, int) and not isinstance(v, bool) and low <= v < 2**31
    return v if ok else None


def _gpu_names(doc: dict[str, Any], events: pl.DataFrame) -> tuple[str | None, list[str]]:
    """The GPU kernels ran on (Kineto lists every visible GPU), and the names of used GPUs."""
    props = doc.get("deviceProperties")
    names: dict[int, str] = {}
    if isinstance(props, list):
        for i, p in enumerate(props):
            if isinstance(p, dict) and isinstance(p.get("name"), str):
                names[p["id"] if isinstance(p.get("id"), int) else i] = p["name"]
    work = events.filter(
        pl.col("kind").is_in(["kernel", "collective", "memcpy", "memset"])
        & pl.col("device").is_not_null()
    )
    used = work["device"].value_counts(sort=True)["device"].to_list() if not work.is_empty() else []
    gpus = [names[d] for d in sorted(used) if d in names]
    if used and used[0] in names:
        return names[used[0]], gpus
    if len(set(names.values())) == 1:
        return next(iter(names.values())), gpus
    return None, gpus
