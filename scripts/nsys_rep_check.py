"""Compare ccdiag's readings of one run: .nsys-rep, its SQLite export, nsys stats CSVs, nsys sums.

    python scripts/nsys_rep_check.py DIR

DIR is what ``scripts/nsys_rep_check.sh record`` wrote: for each ``<name>.nsys-rep``, its
export ``<name>.ccdiag-<key>.sqlite`` (made by ccdiag's export code) and nsys's own CSV reports
``<name>_cuda_{api_trace,gpu_trace,api_sum,gpu_kern_sum}.csv.gz``. For each report it checks:

- rep-vs-sqlite: reading the ``.nsys-rep`` (the real ``nsys export`` when nsys is on this machine;
  else skipped: the record step already ran ccdiag's export code there) gives the same events;
- sqlite-vs-csv: every API call and every GPU kernel, copy and memset that nsys stats printed is
  one event of the SQLite reading, with the same start, duration, name, correlation, stream,
  device, copy direction and memory kinds (bytes within the CSV's 1000-byte rounding);
- sums: ``cuda_api_sum`` calls and ``cuda_gpu_kern_sum`` instances and totals per name equal what
  the SQLite reading holds.

Prints one PASS/FAIL/SKIP line per check (with the first differences) and exits 1 on any FAIL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
from ccdiag.parsers import _nsys_export, nsys_csv, nsys_rep, nsys_sqlite

from ccdiag.errors import InputError

API = ["runtime", "driver"]
GPU = ["kernel", "collective", "memcpy", "memset"]
KEY = ["kind", "start_ns", "dur_ns"]
SAME = ["name", "correlation", "stream", "device", "copy_kind", "src_mem", "dst_mem"]

failures = 0


def report(status: str, what: str, detail: str = "") -> None:
    global failures
    failures += status == "FAIL"
    print(f"{status:4s}  {what}" + (f"\n      {detail}" if detail else ""))


def _show(df: pl.DataFrame, n: int = 3) -> str:
    return "; ".join(str(r) for r in df.head(n).rows())


def check_rep(rep: Path, sqlite_events: pl.DataFrame) -> None:
    if _nsys_export.find_nsys() is None:
        report("SKIP", f"{rep.name}: rep-vs-sqlite", "no nsys here (the record step converted it)")
        return
    try:
        events = nsys_rep.read(rep).events
    except InputError as err:
        report("FAIL", f"{rep.name}: rep-vs-sqlite", err.line())
        return
    same = events.equals(sqlite_events)
    report("PASS" if same else "FAIL", f"{rep.name}: rep-vs-sqlite ({events.height} events)")


def _matched(sq: pl.DataFrame, csv: pl.DataFrame, kinds: list[str]) -> tuple[pl.DataFrame, ...]:
    a = sq.filter(pl.col("kind").is_in(kinds)).with_columns(pl.col("kind").cast(pl.String))
    b = csv.filter(pl.col("kind").is_in(kinds)).with_columns(pl.col("kind").cast(pl.String))
    a = a.with_columns(pl.int_range(pl.len()).over(KEY).alias("_n"))
    b = b.with_columns(pl.int_range(pl.len()).over(KEY).alias("_n"))
    joined = a.join(b, on=[*KEY, "_n"], how="full", coalesce=True, suffix="_csv")
    only_sq = joined.filter(pl.col("name_csv").is_null())
    only_csv = joined.filter(pl.col("name").is_null())
    both = joined.filter(pl.col("name").is_not_null() & pl.col("name_csv").is_not_null())
    return both, only_sq, only_csv


def check_csv(name: str, sq: pl.DataFrame, prefix: Path) -> None:
    try:
        csv = nsys_csv.read(prefix).events
    except InputError as err:
        report("FAIL", f"{name}: sqlite-vs-csv", err.line())
        return
    for label, kinds in (("API calls", API), ("GPU work", GPU)):
        both, only_sq, only_csv = _matched(sq, csv, kinds)
        what = f"{name}: {label} in the SQLite reading vs nsys stats ({both.height} matched)"
        if only_csv.height or (only_sq.height and label == "API calls"):
            report(
                "FAIL", what, f"only in CSV: {_show(only_csv)}; only in SQLite: {_show(only_sq)}"
            )
            continue
        cols = [c for c in SAME if f"{c}_csv" in both.columns]
        if label == "API calls":
            cols = ["name", "correlation", "pid", "tid"]
        bad = both.filter(
            pl.any_horizontal(
                [
                    pl.col(c).cast(pl.String).ne_missing(pl.col(f"{c}_csv").cast(pl.String))
                    for c in cols
                ]
            )
        )
        if label == "GPU work":
            far = (pl.col("bytes") - pl.col("bytes_csv")).abs() > 500
            bad = pl.concat([bad, both.filter(far)], how="diagonal_relaxed").unique(
                subset=[*KEY, "_n"]
            )
        extra = (
            f"; {only_sq.height} SQLite-only rows (graph launches traced whole?)"
            if only_sq.height
            else ""
        )
        if bad.height:
            report(
                "FAIL",
                what,
                f"{bad.height} rows differ, e.g. {_show(bad.select([*KEY, *cols, *(c + '_csv' for c in cols)]))}",
            )
        else:
            report("PASS", what + extra)


def check_sums(name: str, sq: pl.DataFrame, prefix: Path) -> None:
    pairs = (
        ("cuda_api_sum", "Num Calls", API, True),
        ("cuda_gpu_kern_sum", "Instances", ["kernel", "collective"], False),
    )
    for report_name, count_col, kinds, is_api in pairs:
        files = sorted(prefix.parent.glob(f"{prefix.name}_{report_name}.csv*"))
        if not files:
            report("SKIP", f"{name}: {report_name}", "no report")
            continue
        df = nsys_csv._read_report(files[0])
        names = pl.col("Name").str.replace(r"_v\d+$", "") if is_api else pl.col("Name")
        want = (
            df.select(
                names.alias("name"),
                pl.col(count_col).cast(pl.Int64).alias("n_sum"),
                pl.col("Total Time (ns)").cast(pl.Int64).alias("ns_sum"),
            )
            .group_by("name")
            .agg(pl.col("n_sum").sum(), pl.col("ns_sum").sum())
        )
        have = sq.filter(pl.col("kind").is_in(kinds))
        if not is_api:
            have = have.filter(~pl.col("name").str.starts_with("[CUDA graph"))
        have = have.group_by("name").agg(pl.len().alias("n"), pl.col("dur_ns").sum().alias("ns"))
        diff = want.join(have, on="name", how="full", coalesce=True).filter(
            pl.col("n_sum").ne_missing(pl.col("n").cast(pl.Int64))
            | pl.col("ns_sum").ne_missing(pl.col("ns"))
        )
        what = f"{name}: {report_name} vs the SQLite reading ({want.height} names)"
        report("FAIL" if diff.height else "PASS", what, _show(diff) if diff.height else "")


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    reps = sorted(folder.glob("*.nsys-rep"))
    if not reps:
        print(f"no .nsys-rep in {folder}")
        return 2
    for rep in reps:
        exports = sorted(
            folder.glob(f"{rep.stem}.ccdiag-*.sqlite"), key=lambda p: p.stat().st_mtime
        )
        if not exports:
            report("FAIL", f"{rep.name}: no export next to it (run the record step)")
            continue
        trace = nsys_sqlite.read(exports[-1])
        meta = trace.meta
        print(
            f"----  {rep.name}: {meta.n_events} events, nsys {meta.extra.get('nsys_version')}, "
            f"schema {meta.schema_version}, GPU {meta.gpu}, skipped {meta.skipped}"
        )
        kinds = dict(trace.events.group_by(pl.col("kind").cast(pl.String)).len().iter_rows())
        print(f"      kinds {kinds}; warnings {meta.warnings}")
        check_rep(rep, trace.events)
        check_csv(rep.stem, trace.events, folder / rep.stem)
        check_sums(rep.stem, trace.events, folder / rep.stem)
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
