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
import io
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from ccdiag.parsers import _nsys_common as nc
from ccdiag.parsers.nsys_sqlite import assign_ranks, conform

from ccdiag import apis
from ccdiag.errors import InputError
from ccdiag.limits import Budget
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


def _open_text(path: Path) -> list[str]:
    """The first lines of a report (decompressed)."""
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rt", encoding="utf-8-sig", errors="replace") as fh:  # type: ignore[operator]
        return [fh.readline(1 << 16) for _ in range(50)]  # bounded: one line may be huge


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _inflate(path: Path) -> io.BytesIO:
    """A gzip report's text, inflated within ``ccdiag.limits`` (polars would inflate any size)."""
    budget = Budget(path)
    out = io.BytesIO()
    with gzip.open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            budget.add(len(block))
            out.write(block)
    out.seek(0)
    return out


def _read_report(path: Path) -> pl.DataFrame:
    """One CSV report, every column as text (after any preamble nsys printed before it)."""
    try:
        head = _open_text(path)
    except (OSError, EOFError) as exc:
        raise InputError(path, f"cannot read: {exc}") from None
    skip = next((i for i, ln in enumerate(head) if ln.startswith(_HEADERS)), None)
    if skip is None:
        raise InputError(
            path, "not an nsys stats CSV report (no 'Start (ns)' or 'Time (%)' header)"
        )
    try:
        source = _inflate(path) if _is_gzip(path) else path
        df = pl.read_csv(source, infer_schema=False, skip_rows=skip, encoding="utf8-lossy")
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot read: {exc}") from None
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as exc:
        raise InputError(path, f"malformed CSV ({str(exc).splitlines()[0]})") from None
    return df.rename(lambda c: c.lstrip("\ufeff"))


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
    df = _read_report(path)
    _need(df, path, "Start (ns)", "Duration (ns)", "Name")
    corr = _as_int(_col(df, "CorrID", "CorrId"))
    df = df.select(
        _int("Start (ns)").alias("start_ns"),
        _int("Duration (ns)").alias("dur_ns"),
        apis.base_name(pl.col("Name")).alias("name"),
        _no_zero(corr).alias("correlation"),
        _int("Pid").alias("pid") if "Pid" in df.columns else pl.lit(None, _I64).alias("pid"),
        _int("Tid").alias("tid") if "Tid" in df.columns else pl.lit(None, _I64).alias("tid"),
    )
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
    df = _read_report(path)
    _need(df, path, "Start (ns)", "Duration (ns)", "Name", "Device", "Strm")
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
    out = df.select(
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
    unknown = out.filter(pl.col("kind").is_null())
    if unknown.height:
        key = f"{path.name}: GPU rows of another kind (not kernel, memcpy, memset)"
        skipped[key] = skipped.get(key, 0) + unknown.height
        out = out.filter(pl.col("kind").is_not_null())
    return _copies(_drop_bad(out, path, skipped))


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
