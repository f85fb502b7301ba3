"""Build large benchmark traces by tiling a real one.

    python bench/make_large.py kineto --size-mb 1024 [--src TRACE] [--out FILE] [--gzip]
    python bench/make_large.py nsys   --size-mb 1024 [--src SQLITE] [--out FILE]

Kineto: the source trace's ``traceEvents`` are repeated end to end. Each tile is shifted in time
by the source's span (plus a 1 ms gap), and every id that joins events — ``correlation``,
``External id``, flow ``id`` — is shifted by the largest id seen, so joins stay one-to-one. The
metadata and the process/thread name events are written once. The output keeps PyTorch's own
formatting (``json.dumps`` separators), so the bytes per event match a real trace.

nsys: the SQLite export's activity tables (kernels, memcpy, memset, runtime, sync, NVTX, ...) are
duplicated in place with shifted ``start``/``end`` and ``correlationId``; every other table is
left as it is.

Outputs go to ``bench/data/`` (git-ignored) by default.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "tests" / "data" / "shared" / "traces"
DATA = REPO / "bench" / "data"

#: Args holding ids that join events; shifted per tile.
_ID_ARGS = ("correlation", "External id", "external id")


def _load_json(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return json.loads(fh.read())


def _tile_params(events: list[dict[str, Any]]) -> tuple[float, float, int]:
    """(first ts, time shift per tile in µs, id shift per tile) of one tile."""
    t0 = min(float(e["ts"]) for e in events if isinstance(e.get("ts"), (int, float)))
    t1 = max(
        float(e["ts"]) + float(e.get("dur") or 0)
        for e in events
        if isinstance(e.get("ts"), (int, float))
    )
    max_id = 0
    for e in events:
        args = e.get("args") or {}
        for key in _ID_ARGS:
            v = args.get(key)
            if isinstance(v, int):
                max_id = max(max_id, v)
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    return t0, (t1 - t0) + 1000.0, max_id + 1


def _shift(e: dict[str, Any], k: int, dt: float, did: int) -> dict[str, Any]:
    e = dict(e)
    if k == 0:
        return e
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = round(e["ts"] + k * dt, 3)
    if isinstance(e.get("id"), int):
        e["id"] = e["id"] + k * did
    args = e.get("args")
    if args:
        args = dict(args)
        for key in _ID_ARGS:
            if isinstance(args.get(key), int) and args[key] > 0:
                args[key] = args[key] + k * did
        e["args"] = args
    return e


def make_kineto(src: Path, out: Path, size_mb: float, compress: bool = False) -> Path:
    """Tile ``src`` until the uncompressed output reaches ``size_mb`` MiB; returns ``out``."""
    doc = _load_json(src)
    events = doc.pop("traceEvents")
    once = [e for e in events if e.get("ph") == "M" or e.get("cat") == "Trace"]
    tiled = [e for e in events if not (e.get("ph") == "M" or e.get("cat") == "Trace")]
    _, dt, did = _tile_params(tiled)
    target = int(size_mb * 1024 * 1024)
    head = json.dumps(doc)[:-1] + ', "traceEvents": ['
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with gzip.open(out, "wb", compresslevel=6) if compress else open(out, "wb") as fh:
        fh.write(head.encode())
        written += len(head)
        first = True
        k = 0
        while written < target:
            parts = []
            for e in tiled:
                parts.append(json.dumps(_shift(e, k, dt, did)))
            blob = ("" if first else ", ") + ", ".join(parts)
            first = False
            data = blob.encode()
            fh.write(data)
            written += len(data)
            k += 1
        tail = "".join(", " + json.dumps(e) for e in once) + "]}"
        fh.write(tail.encode())
    print(f"wrote {out} ({k} tiles, {written / 2**20:.0f} MiB uncompressed)")
    return out


#: nsys activity tables duplicated per tile, with their time and correlation columns.
_NSYS_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUPTI_ACTIVITY_KIND_OVERHEAD",
    "NVTX_EVENTS",
)


def make_nsys(src: Path, out: Path, size_mb: float) -> Path:
    """Duplicate the activity rows of an nsys SQLite export until the file reaches ``size_mb``.

    Doubling: each round copies every row present, shifted by the current number of tiles.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out)
    con = sqlite3.connect(out)
    con.execute("PRAGMA synchronous = OFF")  # a scratch file: no fsync per round
    con.execute("PRAGMA journal_mode = OFF")
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    present = [t for t in _NSYS_TABLES if t in tables]
    cols = {t: [r[1] for r in con.execute(f"pragma table_info({t})")] for t in present}
    t0, t1 = con.execute("select min(start), max(end) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    dt = (t1 - t0) + 1_000_000
    did = (
        con.execute("select max(correlationId) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
    )
    target = int(size_mb * 1024 * 1024)
    tiles = 1
    while out.stat().st_size < target:
        grow = min(tiles, max(1, int(tiles * (target / out.stat().st_size - 1)) + 1))
        for t in present:
            exprs = []
            for c in cols[t]:
                if c in ("start", "end"):
                    exprs.append(f'"{c}" + {tiles * dt}')
                elif c == "correlationId":
                    exprs.append(f'"{c}" + {tiles * did}')
                else:
                    exprs.append(f'"{c}"')
            col_list = ", ".join(f'"{c}"' for c in cols[t])
            n_rows = con.execute(f"select max(rowid) from {t}").fetchone()[0] or 0
            limit = n_rows * grow // tiles
            con.execute(
                f"insert into {t} ({col_list}) select {', '.join(exprs)} from {t} "
                f"where rowid <= {limit}"
            )
        con.commit()
        tiles += grow
    con.close()
    print(f"wrote {out} ({tiles} tiles, {out.stat().st_size / 2**20:.0f} MiB)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("fmt", choices=["kineto", "nsys"])
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--src", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--gzip", action="store_true", help="kineto: write .json.gz")
    a = ap.parse_args()
    if a.fmt == "kineto":
        src = a.src or TRACES / "h200_decode_eager.kineto.json.gz"
        suffix = ".json.gz" if a.gzip else ".json"
        out = a.out or DATA / f"kineto_{int(a.size_mb)}mb{suffix}"
        make_kineto(src, out, a.size_mb, a.gzip)
    else:
        src = a.src or TRACES / "h200_decode_eager.nsys.sqlite"
        out = a.out or DATA / f"nsys_{int(a.size_mb)}mb.sqlite"
        make_nsys(src, out, a.size_mb)


if __name__ == "__main__":
    main()
