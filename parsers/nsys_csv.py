"""``nsys stats`` CSV reports -> :class:`~ccdiag.schema.Trace`.

One trace is one *set* of reports sharing a prefix: ``<prefix>_cuda_api_trace.csv`` (host API
calls) and ``<prefix>_cuda_gpu_trace.csv`` (kernels, copies, memsets), plus, when present,
``<prefix>_cuda_api_sum.csv``, ``<prefix>_cuda_gpu_kern_sum.csv`` and
``<prefix>_cuda_gpu_mem_time_sum.csv``. The summaries are kept as data in ``Trace.summaries``
(:class:`~ccdiag.schema.SummarySchema`: totals per name): a set without ``cuda_gpu_trace`` still
tells the kernel time from ``cuda_gpu_kern_sum``, which the host-only rules use. They also
cross-check the traces (a mismatch becomes a warning), and the kernel totals are kept in
``meta.extra``. Each may be gzip-compressed (``.csv.gz``); pre-2023 report names
(``cudaapitrace``, ``gputrace``, ``cudaapisum``, ``gpukernsum``, ``gpumemtimesum``) are accepted
too.

The path may be any report of the set (its siblings are found by prefix), the prefix itself,
or a folder holding exactly one set.

What the columns become
-----------------------
- API rows: ``runtime`` (``cuda*``) or ``driver`` (``cu*``), names without nsys's ``_vNNNN``.
- GPU rows with a grid (``GrdX``): ``kernel``, or ``collective`` for NCCL kernels.
- ``[CUDA memcpy <label>]``: ``memcpy``; direction from ``SrcMemKd``/``DstMemKd``, not from the
  label (under CC a pinned host-to-device copy is labelled ``Device-to-Device`` with a
  ``Managed`` source). ``[CUDA memcpy Unified ...]`` rows (``CorrId`` 0, kinds ``Unknown``) are
  UVM migrations: ``memcpy`` with both sides ``managed`` and no correlation.
- ``[CUDA memset]``: ``memset``; its one memory kind (printed under ``SrcMemKd``) -> ``dst_mem``.
- ``Bytes (MB)`` is in 10^6 bytes with 3 decimals (a 64-byte copy prints as ``0.000``). Below
  1 MB, when ``Throughput (MB/s) x Duration`` agrees with it to within that rounding, the
  product is used (within 16 B of the truth); otherwise ``Bytes (MB) x 10^6`` (within 500 B).
- With ``--cuda-graph-trace=graph`` (nsys's default) ``cuda_gpu_trace`` has no row for a CUDA
  graph's execution (the SQLite export has one per launch): a CSV set lacks that GPU time.
- GPU rows carry no process id: each takes the ``Pid`` of the API call with its correlation id
  (single-process runs: the one ``Pid``); rows without one (UVM migrations) take the process
  that used their device.
- ``Device`` (``NVIDIA H100 NVL (0)``) gives the device index and the GPU name.
- UVM migrations have ``Strm`` 0 in older reports and an empty ``Strm`` (and ``Ctx``) in nsys
  2025.x; the SQLite export stores stream 0 for them, and so does this reader.

A set with only one of the two traces is read with a warning: API calls only (the GPU trace is
missing: kernel and copy times are unknown) or GPU activity only (no host side).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from ccdiag.parsers import _nsys_common as nc
from ccdiag.parsers.nsys_sqlite import assign_ranks, conform

from ccdiag import apis, limits
from ccdiag.errors import InputError
from ccdiag.limits import Budget, open_regular
from ccdiag.schema import SummarySchema, Trace, TraceMeta, empty_summaries, filter_events

#: Report kind -> the names ``nsys stats`` has used for it (current first).
REPORTS: dict[str, tuple[str, ...]] = {
    "api_trace": ("cuda_api_trace", "cudaapitrace"),
    "gpu_trace": ("cuda_gpu_trace", "gputrace"),
    "api_sum": ("cuda_api_sum", "cudaapisum"),
    "kern_sum": ("cuda_gpu_kern_sum", "gpukernsum"),
    "mem_time_sum": ("cuda_gpu_mem_time_sum", "gpumemtimesum"),
}
_REPORT_RE = re.compile(
    r"^(?P<prefix>.+?)_(?P<report>"
    + "|".join(n for names in REPORTS.values() for n in names)
    + r")\.csv(?:\.gz)?$"
)
_HEADERS = ("Start (ns)", "Time (%)")
_DEVICE_RE = r"^(?P<gpu>.*?)\s*\((?P<idx>\d+)\)\s*$"
_I64 = pl.Int64()


@dataclass
class CsvSet:
    """The files of one report set (absent reports are None)."""

    prefix: Path
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.prefix.name


def report_files(folder: Path) -> dict[tuple[str, str], Path]:
    """(prefix name, report kind) -> file, for every report file in a folder."""
    found: dict[tuple[str, str], Path] = {}
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        m = _REPORT_RE.match(p.name)
        if not m or not p.is_file():
            continue
        kind = next(k for k, names in REPORTS.items() if m["report"] in names)
        found.setdefault((m["prefix"], kind), p)
    return found


def _set_for(folder: Path, prefix: str) -> CsvSet:
    files = {k: p for (pre, k), p in report_files(folder).items() if pre == prefix}
    return CsvSet(folder / prefix, files)


def find_set(path: Path) -> CsvSet | None:
    """The report set a path names (a report file, a prefix, or a folder), or None."""
    if path.is_dir():
        prefixes = sorted({pre for (pre, k) in report_files(path) if k.endswith("_trace")})
        if len(prefixes) > 1:
            shown = ", ".join(prefixes[:4]) + (", ..." if len(prefixes) > 4 else "")
            raise InputError(
                path,
                f"the folder holds {len(prefixes)} nsys stats report sets ({shown}); pass one "
                f"of them, e.g. {path.name}/{prefixes[0]}_cuda_api_trace.csv",
            )
        return _set_for(path, prefixes[0]) if prefixes else None
    m = _REPORT_RE.match(path.name)
    if m and path.is_file():
        return _set_for(path.parent, m["prefix"])
    if not path.exists():
        s = _set_for(path.parent, path.name)
        return s if s.files else None
    return None


#: Bytes of report text parsed at once (the typed rows of each block are kept, the text is not).
_BLOCK = 8 << 20
_POLARS_ERRORS = (pl.exceptions.PolarsError,)


def _raw_blocks(path: Path) -> Iterator[bytes]:
    """The report's text in blocks (gzip inflated within ``ccdiag.limits``)."""
    fh = open_regular(path, "an nsys stats CSV report")
    with fh:
        if fh.read(2) != b"\x1f\x8b":
            fh.seek(0)
            while block := fh.read(_BLOCK):
                yield block
            return
        fh.seek(0)
        budget = Budget(path)
        with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
            while block := gz.read(_BLOCK):
                budget.add(len(block))
                yield block


def _records(path: Path) -> Iterator[bytes]:
    """The text in blocks that end at a record boundary (a newline outside quotes).

    A record (a line, or lines joined by a quoted field) longer than ``MAX_LINE_BYTES`` is
    refused: the carry-over between blocks stays bounded.
    """
    carry = b""
    for block in _raw_blocks(path):
        data = carry + block if carry else block
        quotes = data.count(b'"')
        cut = data.rfind(b"\n")
        after = 0
        while cut >= 0:
            if (quotes - after) % 2 == 0:  # even: the newline is outside any quoted field
                break
            prev = data.rfind(b"\n", 0, cut)
            after += data.count(b'"', prev + 1 if prev >= 0 else 0, cut)
            cut = prev
        if cut < 0:
            carry = data
        else:
            yield data[: cut + 1]
            carry = data[cut + 1 :]
        if len(carry) > limits.MAX_LINE_BYTES:
            raise InputError(
                path,
                f"refused: a CSV record longer than {limits.size_text(limits.MAX_LINE_BYTES)} "
                "(an unclosed quote, or not an nsys stats report)",
            )
    if carry:
        yield carry


def _csv_error(path: Path, exc: BaseException) -> InputError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if len(first) > 160:
        first = first[:157] + "..."
    return InputError(path, f"malformed CSV ({first})")


def _header_skip(path: Path, first: bytes) -> int:
    """Lines before the report's header (``nsys stats`` may print a preamble)."""
    head = first.decode("utf-8", "replace").lstrip("\ufeff").split("\n", 50)[:50]
    skip = next((i for i, ln in enumerate(head) if ln.lstrip("\ufeff").startswith(_HEADERS)), None)
    if skip is None:
        raise InputError(
            path, "not an nsys stats CSV report (no 'Start (ns)' or 'Time (%)' header)"
        )
    return skip


def _check_density(path: Path, rows: int, n_bytes: int) -> None:
    """Rows per byte: a report whose rows average fewer than ``MIN_ROW_BYTES`` bytes is not
    one ``nsys stats`` writes (its API rows take 45 bytes or more), and would cost memory far
    beyond its size (each row becomes an event of about 100 bytes): refused early."""
    if rows >= 50_000 and n_bytes < limits.MIN_ROW_BYTES * rows:
        raise InputError(
            path,
            f"refused: {rows:,} rows in {limits.size_text(n_bytes)} ({n_bytes / rows:.1f} bytes "
            f"each); an nsys stats row takes at least {limits.MIN_ROW_BYTES} bytes: not a report",
        )


def _read_report(
    path: Path,
    shape: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    need: tuple[str, ...] = (),
) -> pl.DataFrame:
    """One CSV report, every column as text (after any preamble nsys printed before it).

    The text is parsed in blocks of ``_BLOCK`` bytes; ``shape`` turns each block's text
    columns into typed rows at once, so that only the typed rows of the whole report are ever
    held (never its text, never all its cells as strings). ``need``: columns it must have.
    """
    frames: list[pl.DataFrame] = []
    header: bytes | None = None
    n_rows = n_bytes = 0
    try:
        for block in _records(path):
            if header is None:
                skip = _header_skip(path, block[: 50 << 16])
                lines = block.split(b"\n", skip + 1)
                header = lines[skip].removeprefix(b"\xef\xbb\xbf") + b"\n"
                text = header + (lines[skip + 1] if len(lines) > skip + 1 else b"")
            else:
                text = header + block  # each block parsed as a report of its own
            del block
            df = pl.read_csv(text, infer_schema=False, encoding="utf8-lossy")
            n_bytes += len(text) - len(header)
            n_rows += df.height
            del text
            _check_density(path, n_rows, n_bytes)
            df = df.rename(lambda c: c.lstrip("\ufeff"))
            if not frames:
                _need(df, path, *need)
            frames.append(shape(df) if shape is not None else df)
            del df
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot read: {exc}") from None
    except pl.exceptions.NoDataError:
        raise InputError(path, "malformed CSV (empty report)") from None
    except _POLARS_ERRORS as exc:
        raise _csv_error(path, exc) from None
    if header is None:
        raise InputError(path, "empty file")
    try:
        return pl.concat(frames, how="vertical", rechunk=False) if len(frames) > 1 else frames[0]
    except _POLARS_ERRORS as exc:
        raise _csv_error(path, exc) from None


def _need(df: pl.DataFrame, path: Path, *cols: str) -> None:
    lacking = [c for c in cols if c not in df.columns]
    if lacking:
        raise InputError(path, f"report has no column {', '.join(repr(c) for c in lacking)}")


def _int(col: str) -> pl.Expr:
    return pl.col(col).str.strip_chars().cast(_I64, strict=False)


def _as_int(expr: pl.Expr) -> pl.Expr:
    return expr.str.strip_chars().cast(_I64, strict=False)


def _float(col: str) -> pl.Expr:
    return pl.col(col).str.strip_chars().cast(pl.Float64, strict=False)


def _col(df: pl.DataFrame, *names: str) -> pl.Expr:
    """The first of the named columns present (older nsys spelled some differently)."""
    for n in names:
        if n in df.columns:
            return pl.col(n)
    return pl.lit(None, pl.String)


def _no_zero(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr != 0).then(expr)


def read_api(path: Path, skipped: dict[str, int]) -> pl.DataFrame:
    """``cuda_api_trace``: one host API call per row."""

    def shape(df: pl.DataFrame) -> pl.DataFrame:
        corr = _as_int(_col(df, "CorrID", "CorrId"))
        return df.select(
            _int("Start (ns)").alias("start_ns"),
            _int("Duration (ns)").alias("dur_ns"),
            apis.base_name(pl.col("Name")).alias("name"),
            _no_zero(corr).alias("correlation"),
            _int("Pid").alias("pid") if "Pid" in df.columns else pl.lit(None, _I64).alias("pid"),
            _int("Tid").alias("tid") if "Tid" in df.columns else pl.lit(None, _I64).alias("tid"),
        )

    df = _read_report(path, shape, ("Start (ns)", "Duration (ns)", "Name"))
    df = _drop_bad(df, path, skipped)
    driver = pl.col("name").str.starts_with("cu") & ~pl.col("name").str.starts_with("cuda")
    return df.with_columns(
        pl.when(driver).then(pl.lit("driver")).otherwise(pl.lit("runtime")).alias("kind"),
        nc.is_graph_launch(pl.col("name")).alias("graph"),
    )


def _drop_bad(df: pl.DataFrame, path: Path, skipped: dict[str, int]) -> pl.DataFrame:
    bad = pl.col("start_ns").is_null() | pl.col("dur_ns").is_null() | (pl.col("dur_ns") < 0)
    n = df.select(bad.sum()).item()
    if n:
        key = f"{path.name}: rows without a start or a valid duration"
        skipped[key] = skipped.get(key, 0) + n
        df = df.filter(~bad)
    return df


def _bytes(df: pl.DataFrame) -> pl.Expr:
    """Bytes from 'Bytes (MB)' (10^6 B, 3 decimals), refined by throughput x duration.

    Checked against the SQLite export of the same H200 run (tests/data/h200_nsys): below 1 MB
    throughput x duration is within 16 B of the true size while 'Bytes (MB)' is within 500 B;
    from 1 MB up nsys's throughput drifts (up to 1 kB off at 4 MiB) and 'Bytes (MB)' is better.
    """
    mb = _col(df, "Bytes (MB)").str.strip_chars().cast(pl.Float64, strict=False) * 1e6
    tp = _col(df, "Throughput (MB/s)", "Throughput (MBps)")
    refined = tp.str.strip_chars().cast(pl.Float64, strict=False) * _float("Duration (ns)") / 1e3
    ok = refined.is_not_null() & (mb < 1e6) & ((refined - mb).abs() <= 500.5)
    return pl.when(ok).then(refined).otherwise(mb).round().cast(_I64, strict=False)  # NaN: null


def read_gpu(path: Path, skipped: dict[str, int]) -> pl.DataFrame:
    """``cuda_gpu_trace``: kernels, copies and memsets (no process id yet)."""
    out = _read_report(path, _gpu_rows, ("Start (ns)", "Duration (ns)", "Name", "Device", "Strm"))
    unknown = out.filter(pl.col("kind").is_null())
    if unknown.height:
        key = f"{path.name}: GPU rows of another kind (not kernel, memcpy, memset)"
        skipped[key] = skipped.get(key, 0) + unknown.height
        out = out.filter(pl.col("kind").is_not_null())
    return _copies(_drop_bad(out, path, skipped))


def _gpu_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The typed GPU rows of one block of ``cuda_gpu_trace`` text."""
    name = pl.col("Name")
    label = name.str.extract(r"^\[CUDA memcpy (.*)\]$")
    is_kernel = _int("GrdX").is_not_null() if "GrdX" in df.columns else ~name.str.starts_with("[")
    kind = (
        pl.when(is_kernel)
        .then(nc.kernel_kind(name))
        .when(label.is_not_null())
        .then(pl.lit("memcpy"))
        .when(name.str.starts_with("[CUDA memset"))
        .then(pl.lit("memset"))
    )
    device = pl.col("Device").str.extract(_DEVICE_RE, 2).cast(_I64, strict=False)
    return df.select(
        kind.alias("kind"),
        name.alias("name"),
        _int("Start (ns)").alias("start_ns"),
        _int("Duration (ns)").alias("dur_ns"),
        _no_zero(_as_int(_col(df, "CorrId", "CorrID"))).alias("correlation"),
        device.alias("device"),
        pl.col("Device").str.extract(_DEVICE_RE, 1).alias("gpu_name"),
        _int("Strm").fill_null(0).alias("stream"),
        pl.when(kind.is_in(["memcpy", "memset"])).then(_bytes(df)).alias("bytes"),
        label.alias("label"),
        _col(df, "SrcMemKd").alias("src_label"),
        _col(df, "DstMemKd").alias("dst_label"),
    )


def _copies(df: pl.DataFrame) -> pl.DataFrame:
    """Memory kinds and copy directions (see ``_nsys_common``)."""
    unified = nc.is_unified(pl.col("label"))
    memset = pl.col("kind") == "memset"
    src = nc.managed_if_unified(nc.mem_kind(pl.col("src_label")), unified)
    dst = nc.managed_if_unified(nc.mem_kind(pl.col("dst_label")), unified)
    df = df.with_columns(
        pl.when(memset).then(None).otherwise(src).alias("src_mem"),
        pl.when(memset)
        .then(nc.mem_kind(pl.coalesce("dst_label", "src_label")))
        .otherwise(dst)
        .alias("dst_mem"),
        nc.label_copy_kind(pl.col("label")).alias("label_kind"),
    )
    ck = nc.copy_kind(pl.col("src_mem"), pl.col("dst_mem"), pl.col("label_kind"), pl.lit(False))
    return df.with_columns(
        pl.when(pl.col("kind") == "memcpy").then(ck).alias("copy_kind"),
        pl.lit(False).alias("graph"),
    )


def attach_pids(gpu: pl.DataFrame, api: pl.DataFrame | None) -> tuple[pl.DataFrame, str]:
    """Give GPU rows the pid of their API call (by correlation), else of their device's user.

    Returns:
        The GPU rows with ``pid``, and a warning when some could not be placed with certainty.
    """
    if api is None or api.is_empty():
        return gpu.with_columns(pl.lit(None, _I64).alias("pid")), ""
    calls = (
        api.filter(pl.col("correlation").is_not_null())
        .group_by("correlation")
        .agg(pl.col("pid").unique().alias("pids"))
    )
    df = gpu.join(calls, on="correlation", how="left", maintain_order="left")
    sure = pl.when(pl.col("pids").list.len() == 1).then(pl.col("pids").list.first())
    df = df.with_columns(sure.alias("pid"))
    by_device = (
        df.filter(pl.col("pid").is_not_null())
        .group_by("device")
        .agg(pl.col("pid").mode().first().alias("device_pid"))
    )
    main_pid = (
        api["pid"].drop_nulls().mode().sort().first()
        if api["pid"].null_count() < api.height
        else None
    )
    df = df.join(by_device, on="device", how="left", maintain_order="left")
    guessed = df.filter(pl.col("pid").is_null() & (pl.col("pids").list.len() > 1)).height
    df = df.with_columns(pl.coalesce("pid", "device_pid", pl.lit(main_pid, _I64)).alias("pid"))
    warning = ""
    if guessed:
        warning = (
            f"{guessed} GPU rows share their correlation id with calls of several processes; "
            "each was given the process that used its device"
        )
    return df.drop("pids", "device_pid"), warning


def read_summary(kind: str, path: Path) -> pl.DataFrame:
    """A ``*_sum`` report as :class:`~ccdiag.schema.SummarySchema` rows (rank 0).

    ``api_sum`` rows are host API calls (names without ``_vNNNN``), ``kern_sum`` rows kernels
    (NCCL kernels: ``collective``), ``mem_time_sum`` rows copies (``[CUDA memcpy ...]``) and
    memsets. Rows without a count or a total are left out.
    """
    df = _read_report(path)
    count_col = "Num Calls" if kind == "api_sum" else "Instances"
    name_col = "Operation" if kind == "mem_time_sum" and "Operation" in df.columns else "Name"
    _need(df, path, "Total Time (ns)", count_col, name_col)
    name = pl.col(name_col).str.strip_chars()
    if kind == "api_sum":
        name = apis.base_name(name)
        driver = name.str.starts_with("cu") & ~name.str.starts_with("cuda")
        ev_kind = pl.when(driver).then(pl.lit("driver")).otherwise(pl.lit("runtime"))
    elif kind == "kern_sum":
        ev_kind = nc.kernel_kind(name)
    else:
        ev_kind = (
            pl.when(name.str.contains("memset")).then(pl.lit("memset")).otherwise(pl.lit("memcpy"))
        )
    out = df.select(
        pl.lit(kind).alias("report"),
        ev_kind.alias("kind"),
        name.alias("name"),
        _int(count_col).alias("count"),
        _int("Total Time (ns)").alias("total_ns"),
        pl.lit(0, pl.Int32).alias("rank"),
    ).filter(pl.col("count").is_not_null() & pl.col("total_ns").is_not_null())
    out = out.group_by("report", "kind", "name", "rank", maintain_order=True).agg(
        pl.col("count").sum(), pl.col("total_ns").sum()
    )
    return SummarySchema.validate(out.select(SummarySchema.column_names()), cast=True)


def _cross_check(
    kind: str, path: Path, sums_rows: pl.DataFrame, events: pl.DataFrame, warnings: list[str]
) -> dict[str, str]:
    """Compare a *_sum report with the trace rows; mismatches become warnings."""
    sums = sums_rows.select(
        "name", pl.col("count").alias("want_n"), pl.col("total_ns").alias("want_ns")
    )
    kinds = ["runtime", "driver"] if kind == "api_sum" else ["kernel", "collective"]
    have = (
        events.filter(pl.col("kind").is_in(kinds))
        .group_by("name")
        .agg(pl.len().alias("n"), pl.col("dur_ns").sum().alias("ns"))
    )
    extra = {}
    if kind == "kern_sum":
        extra = {
            "kern_sum_instances": str(int(sums["want_n"].sum())),
            "kern_sum_total_ns": str(int(sums["want_ns"].sum())),
        }
    if have.is_empty():
        return extra
    diff = (
        sums.join(have, on="name", how="full", coalesce=True)
        .filter(
            (pl.col("want_n").fill_null(0) != pl.col("n").fill_null(0))
            | (pl.col("want_ns").fill_null(0) != pl.col("ns").fill_null(0))
        )
        .sort("name", nulls_last=True)
    )
    if diff.height:
        first = diff.row(0, named=True)
        warnings.append(
            f"{path.name} disagrees with the trace for {diff.height} names (e.g. {first['name']}: "
            f"{first['want_n']} vs {first['n']} rows); the trace report may be cut short"
        )
    return extra


def _meta(s: CsvSet, events: pl.DataFrame, gpu_names: pl.DataFrame) -> dict[str, object]:
    gpus = gpu_names.drop_nulls().unique().sort("device", "gpu_name")
    used = events["device"].drop_nulls()
    names = dict(gpus.iter_rows())
    main = used.mode().sort().first() if not used.is_empty() else None
    out: dict[str, object] = {}
    if names:
        out["gpus"] = [names[d] for d in sorted(names)]
        out["gpu"] = names.get(main, next(iter(names.values())))
    return out


def read(path: str | Path, *, rank: int | None = None, **_options: object) -> Trace:
    """Read one set of ``nsys stats`` CSV reports.

    Args:
        path: a report of the set (``<prefix>_cuda_api_trace.csv[.gz]`` ...), the prefix, or a
            folder holding one set.
        rank: put every event on this rank (a folder of per-rank sets does this).
        **_options: options meant for other readers, ignored.

    Returns:
        The trace (steps are assigned later by ``ccdiag.steps``).
    """
    p = Path(path)
    s = find_set(p)
    if s is None or not ({"api_trace", "gpu_trace"} & set(s.files)):
        raise InputError(
            p,
            "no nsys stats trace reports found (expected <prefix>_cuda_api_trace.csv and "
            "<prefix>_cuda_gpu_trace.csv, made with `nsys stats -r cuda_api_trace,"
            "cuda_gpu_trace -f csv -o <prefix> trace.sqlite`)",
        )
    skipped: dict[str, int] = {}
    warnings: list[str] = []
    events, gpu_names = _events(s, skipped, warnings)
    extra: dict[str, str] = {"nsys_stats_reports": ",".join(sorted(s.files))}
    summaries = [empty_summaries()]
    for kind in ("api_sum", "kern_sum", "mem_time_sum"):
        if kind in s.files:
            try:
                rows = read_summary(kind, s.files[kind])
            except InputError as exc:  # a bad summary report: warn, read the traces anyway
                warnings.append(f"{exc.line()}; summary not used")
                continue
            summaries.append(rows)
            if kind != "mem_time_sum":
                extra |= _cross_check(kind, s.files[kind], rows, events, warnings)
    events, ranks, rank_warning = assign_ranks(events, rank)
    events, invalid = filter_events(events)
    for reason, n in invalid.items():
        skipped[reason] = skipped.get(reason, 0) + n
    warnings += [rank_warning] if rank_warning else []
    sums = pl.concat(summaries)
    if rank is not None:
        sums = sums.with_columns(pl.lit(rank, pl.Int32).alias("rank"))
    return Trace(
        events=events,
        summaries=sums,
        meta=TraceMeta(
            source=s.name,
            format="nsys_csv",
            profiler="nsys",
            files=[f.name for f in s.files.values()],
            size_bytes=sum(f.stat().st_size for f in s.files.values()),
            host_only="gpu_trace" not in s.files,
            n_events=events.height,
            skipped=skipped,
            warnings=warnings,
            rank=rank,
            ranks=ranks,
            world_size=len(ranks) if len(ranks) > 1 else None,
            extra=extra,
            **_meta(s, events, gpu_names),  # type: ignore[arg-type]
        ),
    )


def _events(
    s: CsvSet, skipped: dict[str, int], warnings: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The set's API and GPU rows in the event schema, and each device's GPU name."""
    api = read_api(s.files["api_trace"], skipped) if "api_trace" in s.files else None
    frames = [api] if api is not None else []
    gpu_names = pl.DataFrame(schema={"device": _I64, "gpu_name": pl.String})
    if "gpu_trace" in s.files:
        gpu, warning = attach_pids(read_gpu(s.files["gpu_trace"], skipped), api)
        gpu_names = gpu.select("device", "gpu_name")
        frames.append(gpu)
        warnings += [warning] if warning else []
    if api is None:
        warnings.append(f"{s.name}: no cuda_api_trace report: GPU activity only, no host API calls")
    if "gpu_trace" not in s.files:
        known = (
            "kernel times only as totals per name (cuda_gpu_kern_sum), copy times unknown"
            if "kern_sum" in s.files
            else "kernel and copy times are unknown"
        )
        warnings.append(f"{s.name}: no cuda_gpu_trace report: host API calls only; {known}")
    return pl.concat([conform(f) for f in frames], how="vertical"), gpu_names
