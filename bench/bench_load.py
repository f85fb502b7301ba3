"""Load-time and peak-memory benchmark: ccdiag vs. its anchors, in one run.

    python bench/bench_load.py                       # 1 GB Kineto (ccdiag, orjson, HTA), 1 GB nsys
    python bench/bench_load.py --size-mb 200 --hta-size-mb 50 --nsys-size-mb 0   # quick

Every measurement runs in a fresh subprocess (``--worker``), which reports its wall time for the
load, the CPU time it used (all threads, and helper processes; less sensitive than wall time to
other work on the machine) and its peak resident memory (``ru_maxrss``: interpreter and imports included; in
parentheses the peak before the load started; a loader that starts helper processes, like the
nsys reader, also gets the largest helper's peak). Rows:

- ``ccdiag``: ``ccdiag.parsers.read`` -> validated event frame + metadata (what ``load_trace``
  does before steps); ``ccdiag+steps``: ``ccdiag.api.load_trace`` (parse and assign steps).
- ``orjson``: read the file (gunzip if needed) and ``orjson.loads`` it: the raw decode alone,
  the floor for any loader that builds Python objects.
- ``HTA``: Holistic Trace Analysis' loader (``hta.common.trace.parse_trace_file``, its default
  backend), on a smaller tile when ``--hta-size-mb`` is smaller: it needs tens of GB for 1 GB.
- ``tokenizer``: simdjson (``pysimdjson``) parsing the file into its tape without building
  Python objects: the JSON-tokenizer limit, the floor of any JSON reader here.
- ``nsys``: ccdiag's Nsight Systems SQLite reader on a tiled export (``ccdiag nsys``: parse and
  validated frame; ``ccdiag nsys+steps``: ``load_trace``), beside the candidate readers of the
  same columns of the same activity tables (each query as the reader's first, untyped pass):
  ``sqlite3`` stepping through every row (Python tuples, not kept), the ADBC SQLite driver
  into polars (Arrow C stream), connectorx (Arrow), ``polars.read_database_uri`` (ADBC engine)
  and DuckDB's ``sqlite_scan`` (the extension does not ship in DuckDB's wheel; measured only
  when the ``duckdb-extension-sqlite-scanner`` package is installed, else the row says so).

Inputs are built by ``bench/make_large.py`` into ``bench/data/`` (git-ignored) when missing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE))


def _peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux: KiB


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of its finished helper processes."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def _work(kind: str, path: Path) -> dict[str, Any]:
    """Run one load in this process; return seconds (wall and CPU), rows and memory."""
    out = _load(kind, path)
    out["cpu"] = _cpu() - out.pop("setup_cpu")  # CPU since the load started (imports excluded)
    return out


def _load(kind: str, path: Path) -> dict[str, Any]:
    if kind in _SQLITE_CANDIDATES:
        queries = _nsys_queries(path)
        base, setup = _peak_mb(), _cpu()
        t = time.perf_counter()
        rows = _SQLITE_CANDIDATES[kind](path, queries)
        sec = time.perf_counter() - t
    elif kind == "tokenizer":
        import gzip

        import simdjson

        base, setup = _peak_mb(), _cpu()
        t = time.perf_counter()
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        doc = simdjson.Parser().parse(data)
        rows = len(doc["traceEvents"])
        sec = time.perf_counter() - t
    elif kind in ("ccdiag", "ccdiag+steps", "nsys", "nsys+steps"):
        from ccdiag import api, parsers

        base, setup = _peak_mb(), _cpu()
        t = time.perf_counter()
        steps = kind in ("ccdiag+steps", "nsys+steps")
        trace = api.load_trace(path) if steps else parsers.read(path)
        sec = time.perf_counter() - t
        rows = trace.events.height
    elif kind == "orjson":
        import gzip

        import orjson

        base, setup = _peak_mb(), _cpu()
        t = time.perf_counter()
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        doc = orjson.loads(data)
        sec = time.perf_counter() - t
        rows = len(doc["traceEvents"])
    elif kind == "hta":
        import logging
        import warnings

        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        from hta.common.trace import parse_trace_file

        base, setup = _peak_mb(), _cpu()
        t = time.perf_counter()
        _, df, _ = parse_trace_file(str(path))
        sec = time.perf_counter() - t
        rows = len(df)
    else:
        raise SystemExit(f"unknown worker {kind}")
    children = _peak_mb(resource.RUSAGE_CHILDREN)  # helper processes, if the loader starts any
    return {
        "setup_cpu": setup,
        "seconds": sec,
        "peak_mb": _peak_mb(),
        "baseline_mb": base,
        "children_mb": children,
        "rows": rows,
    }


def _nsys_queries(path: Path) -> list[str]:
    """The SQL of ccdiag's first pass over each activity table (same tables, same columns)."""
    from ccdiag.parsers import nsys_sqlite

    db = nsys_sqlite.NsysDb(path)
    try:
        return [q.sql().replace("rowid AS __rid, ", "") for q in nsys_sqlite.build_queries(db)]
    finally:
        db.close()


def _read_sqlite3(path: Path, queries: list[str]) -> int:
    import sqlite3

    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    rows = 0
    for sql in queries:
        for _ in con.execute(sql):
            rows += 1
    return rows


def _read_adbc(path: Path, queries: list[str]) -> int:
    import adbc_driver_manager as adbc
    import adbc_driver_sqlite
    import polars as pl

    db = adbc_driver_sqlite.connect(path.resolve().as_uri() + "?mode=ro&immutable=1")
    conn = adbc.AdbcConnection(db)
    rows = 0
    for sql in queries:
        stmt = adbc.AdbcStatement(conn)
        stmt.set_options(**{"adbc.sqlite.query.batch_rows": 65536})
        stmt.set_sql_query(sql)
        handle, _ = stmt.execute_query()
        rows += pl.DataFrame(handle).height
        stmt.close()
    conn.close()
    db.close()
    return rows


def _read_connectorx(path: Path, queries: list[str]) -> int:
    import connectorx as cx
    import polars as pl

    return sum(
        pl.from_arrow(cx.read_sql(f"sqlite://{path.resolve()}", sql, return_type="arrow")).height
        for sql in queries
    )


def _read_polars_database(path: Path, queries: list[str]) -> int:
    import polars as pl

    uri = f"sqlite:///{path.resolve()}"
    return sum(pl.read_database_uri(sql, uri, engine="adbc").height for sql in queries)


def _read_duckdb(path: Path, queries: list[str]) -> int:
    import re

    import duckdb

    try:
        import duckdb_extension_sqlite_scanner as ext_pkg
    except ImportError:
        raise SystemExit(
            "not measured: DuckDB's sqlite_scanner extension does not ship in the duckdb wheel "
            "and cannot be downloaded here (pip install duckdb-extension-sqlite-scanner)"
        ) from None
    ext = next(Path(ext_pkg.__file__).parent.rglob("sqlite_scanner.duckdb_extension"))
    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    con.execute(f"LOAD '{ext}'")
    rows = 0
    for sql in queries:  # SELECT <cols> FROM "<table>" [WHERE ...] -> sqlite_scan(file, table)
        m = re.match(r'SELECT (.*) FROM "(\w+)"(.*)$', sql)
        assert m is not None, sql
        scan = f"sqlite_scan('{path.resolve()}', '{m.group(2)}')"
        rows += con.sql(f"SELECT {m.group(1)} FROM {scan}{m.group(3)}").pl().height
    return rows


#: SQLite -> rows readers measured beside ccdiag's nsys reader.
_SQLITE_CANDIDATES = {
    "sqlite3": _read_sqlite3,
    "adbc": _read_adbc,
    "connectorx": _read_connectorx,
    "polars.read_database": _read_polars_database,
    "duckdb": _read_duckdb,
}


def _measure(kind: str, path: Path, timeout: int) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, str(path)]
    t = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        if tail.startswith("not measured"):
            return {"error": tail[:200]}
        return {"error": f"exit {out.returncode}: {tail[:120]}", "wall": time.perf_counter() - t}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _runs(kind: str, path: Path, repeat: int, timeout: int) -> dict[str, Any]:
    results = [_measure(kind, path, timeout) for _ in range(repeat)]
    ok = [r for r in results if "error" not in r]
    if not ok:
        return results[0]
    return {
        "seconds": statistics.median(r["seconds"] for r in ok),
        "best": min(r["seconds"] for r in ok),
        "cpu": statistics.median(r["cpu"] for r in ok),
        "peak_mb": max(r["peak_mb"] for r in ok),
        "baseline_mb": min(r["baseline_mb"] for r in ok),
        "children_mb": max(r.get("children_mb", 0.0) for r in ok),
        "rows": ok[0]["rows"],
        "runs": len(ok),
    }


def _uncompressed_mb(path: Path) -> float:
    if path.suffix == ".gz":
        with open(path, "rb") as fh:  # ISIZE: uncompressed size mod 2**32 (one member)
            fh.seek(-4, 2)
            isize = int.from_bytes(fh.read(4), "little")
        plain = path.with_suffix("")
        return (plain.stat().st_size if plain.exists() else isize) / 2**20
    return path.stat().st_size / 2**20


def _ensure(kind: str, size_mb: float) -> Path:
    import make_large

    if kind in ("kineto", "kineto.gz"):
        suffix = ".json.gz" if kind == "kineto.gz" else ".json"
        path = DATA / f"kineto_{int(size_mb)}mb{suffix}"
        if not path.exists():
            src = make_large.TRACES / "h200_decode_eager.kineto.json.gz"
            make_large.make_kineto(src, path, size_mb, compress=kind == "kineto.gz")
    else:
        path = DATA / f"nsys_{int(size_mb)}mb.sqlite"
        if not path.exists():
            make_large.make_nsys(make_large.TRACES / "h200_decode_eager.nsys.sqlite", path, size_mb)
    return path


def _row(label: str, path: Path, r: dict[str, Any], ref: dict[str, Any] | None) -> str:
    size = f"{_uncompressed_mb(path):,.0f} MiB" + (" (.gz)" if path.suffix == ".gz" else "")
    if "error" in r:
        return f"| {label} | {size} | {r['error']} | | | | | | | |"
    ratio = ""
    if ref is not None and "error" not in ref and label != ref.get("label"):
        ratio = f"{r['seconds'] / ref['seconds']:.1f}x / {r['cpu'] / ref['cpu']:.1f}x"
    mem_ratio = f"{r['peak_mb'] / _uncompressed_mb(path):.2f}"
    kids = r.get("children_mb", 0.0)
    peak = f"{r['peak_mb']:,.0f} ({r['baseline_mb']:,.0f})"
    if kids >= 1:
        peak += f" + helper processes {kids:,.0f} each"
    rate = _uncompressed_mb(path) * 2**20 / 1e6 / r["seconds"]
    cpu_rate = _uncompressed_mb(path) * 2**20 / 1e6 / r["cpu"] if r["cpu"] > 0 else 0.0
    return (
        f"| {label} | {size} | {r['seconds']:.2f} | {r['cpu']:.2f} | {rate:,.0f} | {cpu_rate:,.0f} "
        f"| {ratio} | {peak} | {mem_ratio} | {r['rows']:,} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--size-mb", type=float, default=1024, help="Kineto file size (uncompressed)")
    ap.add_argument(
        "--hta-size-mb",
        type=float,
        default=None,
        help="Kineto size used for HTA (default: --size-mb)",
    )
    ap.add_argument("--nsys-size-mb", type=float, default=1024, help="nsys SQLite size (0: skip)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each ccdiag row (median)")
    ap.add_argument("--gzip", action="store_true", help="also load a .json.gz of --size-mb")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    ap.add_argument("--md", type=Path, help="also write the table (markdown) to this file")
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(_work(a.worker[0], Path(a.worker[1]))))
        return

    load_before = os.getloadavg()
    big = _ensure("kineto", a.size_mb)
    small = _ensure("kineto", a.hta_size_mb or a.size_mb)
    rows: list[str] = []
    plan: list[tuple[str, Path, str, int]] = [
        ("ccdiag", big, "ccdiag", a.repeat),
        ("ccdiag+steps", big, "ccdiag+steps", 1),
        ("orjson.loads", big, "orjson", 1),
    ]
    if a.gzip:
        gz = _ensure("kineto.gz", a.size_mb)
        plan += [("ccdiag .gz", gz, "ccdiag", a.repeat), ("orjson.loads .gz", gz, "orjson", 1)]
    if small != big:
        plan.append(("ccdiag", small, "ccdiag", a.repeat))
    plan.append(("HTA", small, "hta", 1))
    plan.append(("tokenizer (simdjson)", big, "tokenizer", 1))
    results: dict[tuple[str, Path], dict[str, Any]] = {}
    for label, path, kind, rep in plan:
        print(f"… {label} on {path.name}", file=sys.stderr, flush=True)
        results[(label, path)] = {**_runs(kind, path, rep, a.timeout), "label": label}
    if a.nsys_size_mb > 0:
        nsys = _ensure("nsys", a.nsys_size_mb)
        nsys_plan = [
            ("ccdiag nsys", "nsys", a.repeat),
            ("ccdiag nsys+steps", "nsys+steps", 1),
            ("sqlite3 rows", "sqlite3", 1),
            ("ADBC SQLite -> polars", "adbc", 1),
            ("connectorx -> polars", "connectorx", 1),
            ("polars.read_database_uri (adbc)", "polars.read_database", 1),
            ("DuckDB sqlite_scan -> polars", "duckdb", 1),
        ]
        for label, kind, rep in nsys_plan:
            print(f"… {label} on {nsys.name}", file=sys.stderr, flush=True)
            results[(label, nsys)] = {**_runs(kind, nsys, rep, a.timeout), "label": label}

    head = [
        "| loader | file (uncompressed) | wall s | CPU s | MB/s (wall) | MB/s (per CPU s) "
        "| vs ccdiag (wall / CPU) | peak MB (before load) | peak / file size | events or rows |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (label, path), r in results.items():
        ref_label = {".sqlite": "ccdiag nsys", ".gz": "ccdiag .gz"}.get(path.suffix, "ccdiag")
        ref = results.get((ref_label, path))
        rows.append(_row(label, path, r, ref))
    summary = _ratios(results, big, small)
    load_after = os.getloadavg()
    summary.append(
        f"- load average (1 / 5 / 15 min) at the start: {' / '.join(f'{x:.1f}' for x in load_before)}"
        f", at the end: {' / '.join(f'{x:.1f}' for x in load_after)} ({os.cpu_count()} cores)"
    )
    text = "\n".join(head + rows + [""] + summary) + "\n"
    print(text)
    if a.md:
        a.md.write_text(text)
    info = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    print(f"machine: {info}", file=sys.stderr)


def _ratios(results: dict[tuple[str, Path], dict[str, Any]], big: Path, small: Path) -> list[str]:
    """The acceptance ratios, stated with the sizes they were measured on."""
    out = []
    c_big, o = results.get(("ccdiag", big), {}), results.get(("orjson.loads", big), {})
    c_small, h = results.get(("ccdiag", small), {}), results.get(("HTA", small), {})
    if "seconds" in c_big and "seconds" in o:
        out.append(
            f"- ccdiag vs orjson.loads on {_uncompressed_mb(big):,.0f} MiB: "
            f"{o['seconds'] / c_big['seconds']:.1f}x faster (wall), "
            f"{o['cpu'] / c_big['cpu']:.1f}x less CPU"
        )
    if "seconds" in c_small and "seconds" in h:
        out.append(
            f"- ccdiag vs HTA on {_uncompressed_mb(small):,.0f} MiB: "
            f"{h['seconds'] / c_small['seconds']:.1f}x faster (wall), "
            f"{h['cpu'] / c_small['cpu']:.1f}x less CPU"
        )
    tok = results.get(("tokenizer (simdjson)", big), {})
    if "seconds" in c_big and "seconds" in tok:
        out.append(
            f"- ccdiag vs the simdjson tokenizer on {_uncompressed_mb(big):,.0f} MiB: "
            f"{c_big['seconds'] / tok['seconds']:.1f}x its wall time, "
            f"{c_big['cpu'] / tok['cpu']:.1f}x its CPU"
        )
    nsys = [(label, p, r) for (label, p), r in results.items() if p.suffix == ".sqlite"]
    ref = next((r for label, _, r in nsys if label == "ccdiag nsys"), {})
    if "seconds" in ref:
        path = nsys[0][1]
        mb = _uncompressed_mb(path) * 2**20 / 1e6
        out.append(
            f"- ccdiag nsys on {_uncompressed_mb(path):,.0f} MiB: {mb / ref['seconds']:,.0f} MB/s "
            f"(wall), {mb / ref['cpu']:,.0f} MB per CPU second, peak {ref['peak_mb']:,.0f} MB = "
            f"{ref['peak_mb'] / _uncompressed_mb(path):.2f}x the file (target: >= 200 MB/s, <= 1x)"
        )
        for label, _, r in nsys:
            if label != "ccdiag nsys" and "seconds" in r:
                out.append(
                    f"  - {label}: {r['seconds'] / ref['seconds']:.2f}x ccdiag's wall, "
                    f"{r['cpu'] / ref['cpu']:.2f}x its CPU, peak {r['peak_mb']:,.0f} MB"
                )
    steps = results.get(("ccdiag+steps", big), {})
    if "seconds" in steps:
        mb = _uncompressed_mb(big) * 2**20 / 1e6
        out.append(
            f"- ccdiag+steps (Kineto, parse + validated frame + steps) on "
            f"{_uncompressed_mb(big):,.0f} MiB: {mb / steps['seconds']:,.0f} MB/s (wall), "
            f"{mb / steps['cpu']:,.0f} MB per CPU second, peak "
            f"{steps['peak_mb'] / _uncompressed_mb(big):.2f}x the file (target: >= 300 MB/s, "
            "<= 0.5x)"
        )
    if "peak_mb" in c_big:
        out.append(
            f"- ccdiag peak memory on {_uncompressed_mb(big):,.0f} MiB: {c_big['peak_mb']:,.0f} MB "
            f"= {c_big['peak_mb'] / _uncompressed_mb(big):.2f}x the uncompressed file"
        )
    return out


if __name__ == "__main__":
    main()
