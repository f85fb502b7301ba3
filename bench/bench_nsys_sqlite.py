"""Load speed and peak memory of the Nsight Systems SQLite reader, beside its anchors.

Usage:
    python bench/bench_nsys_sqlite.py [FILE.sqlite ...]
    python bench/bench_nsys_sqlite.py --make-big 1000   # build bench/data/big_<N>MB.sqlite first

With no FILE, measures the largest real export in tests/data/shared and, when present,
bench/data/big_*.sqlite. ``--make-big N`` builds an export of about N MB by duplicating the
event rows of the real H200 eager-decode export (times shifted by whole copies of the
capture, correlation ids shifted so that every copy joins to itself).

Each measurement runs in a fresh process and reports wall seconds and peak RSS (MB) of that
process, and of the largest worker process when the reader started some:
- ``anchor: fetch``  -- sqlite3 only: SELECT the same columns of the event tables and fetch
  every row into Python tuples (the floor for any reader built on the sqlite3 module);
- ``ccdiag``         -- ``ccdiag.parsers.nsys_sqlite.read`` (typed, validated event frame).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / "tests" / "data" / "shared"
SEED = SHARED / "traces" / "h200_decode_eager.nsys.sqlite"
DATA = REPO / "bench" / "data"

#: (table, columns the reader selects, column to shift by whole copies, correlation column)
EVENT_TABLES = (
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "start, end, eventClass, globalTid, correlationId, nameId"),
    (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "start, end, deviceId, streamId, correlationId, globalPid, demangledName, graphNodeId",
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, "
        "dstKind, srcDeviceId, dstDeviceId, graphNodeId",
    ),
    ("CUPTI_ACTIVITY_KIND_MEMSET", "start, end, deviceId, streamId, correlationId, globalPid"),
    (
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "start, end, deviceId, streamId, correlationId, globalPid, syncType",
    ),
    ("NVTX_EVENTS", "start, end, eventType, text, textId, globalTid, domainId"),
)


def make_big(target_mb: int) -> Path:
    """Duplicate the seed export's event rows until the file is about target_mb MB."""
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / f"big_{target_mb}MB.sqlite"
    if out.exists():
        return out
    tmp = out.with_suffix(".tmp")
    shutil.copy(SEED, tmp)
    con = sqlite3.connect(tmp)
    span = con.execute("SELECT max(end) - min(start) + 1000 FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    span = span.fetchone()[0]
    corr = con.execute("SELECT max(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    corr = corr.fetchone()[0]
    seed_rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t, _ in EVENT_TABLES}
    k = 0
    while tmp.stat().st_size < target_mb * 1_000_000:
        k += 1
        for table, _ in EVENT_TABLES:
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            exprs = []
            for c in cols:
                if c in ("start", "end"):
                    exprs.append(f"{c} + {k * span}")
                elif c == "correlationId":
                    exprs.append(f"CASE WHEN {c} = 0 THEN 0 ELSE {c} + {k * corr} END")
                else:
                    exprs.append(c)
            con.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM {table} "
                f"WHERE rowid <= {seed_rows[table]}"
            )
        if k % 20 == 0:
            con.commit()
    con.commit()
    con.close()
    tmp.rename(out)
    return out


def _child(mode: str, path: str) -> None:
    import resource

    t0 = time.perf_counter()
    if mode == "fetch":
        con = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
        n = 0
        for table, cols in EVENT_TABLES:
            cur = con.execute(f"SELECT {cols} FROM {table}")
            while rows := cur.fetchmany(100_000):
                n += len(rows)
    else:
        from ccdiag.parsers import nsys_sqlite

        n = nsys_sqlite.read(path).events.height
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    out = {"rows": n, "seconds": round(wall, 2), "peak_mb": round(rss)}
    print(json.dumps(out | {"worker_peak_mb": round(workers)}))


def measure(path: Path) -> None:
    """Print one line per measurement for one file."""
    size = path.stat().st_size / 1e6
    for mode, label in (("fetch", "anchor: fetch"), ("read", "ccdiag")):
        res = subprocess.run(
            [sys.executable, __file__, "--child", mode, str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(res.stdout.strip().splitlines()[-1])
        workers = f" (+{r['worker_peak_mb']} MB per worker)" if r["worker_peak_mb"] else ""
        print(
            f"{path.name:40s} {size:8.1f} MB  {label:14s} {r['rows']:>11,d} rows  "
            f"{r['seconds']:7.2f} s  {r['peak_mb']:6d} MB peak{workers}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--make-big", type=int, metavar="MB")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    if args.make_big:
        print(f"built {make_big(args.make_big)}")
    files = args.files
    if not files:
        real = sorted(SHARED.rglob("*.sqlite"), key=lambda p: p.stat().st_size)
        files = [real[-1], *sorted(DATA.glob("big_*.sqlite"))]
    for f in files:
        measure(f)


if __name__ == "__main__":
    main()
