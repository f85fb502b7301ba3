"""Read SQLite query results into typed polars frames, in batches, optionally in parallel.

The sqlite3 module hands rows over as Python tuples; turning them into columns costs about as
much as fetching them. For big exports the rows of each large table are therefore split into
``rowid`` ranges that worker processes read at the same time (an SQLite file can be read by
many processes at once). A worker is this file run as a script (``python _sqlite_fetch.py``):
it imports only sqlite3 and polars, reads its job from stdin as JSON and writes each part as an
Arrow IPC file into a temporary folder. Plain subprocesses, not ``multiprocessing``: ``spawn``
would re-import the caller's main module (breaking scripts without a ``__main__`` guard) and
``fork`` is unsafe once polars' thread pool runs.

Kept free of ccdiag imports so that a worker starts fast.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import polars as pl

#: Rows per fetchmany() call: bounds the Python objects alive at once.
BATCH_ROWS = 100_000
#: Rows per parallel part (a table with fewer rows is read in one piece).
PART_ROWS = 1_000_000
#: Below this many rows in all, worker processes cost more to start than they save.
PARALLEL_MIN_ROWS = 2_000_000


@dataclass(frozen=True)
class Query:
    """One table's query: ``SELECT <select> FROM <table> <where>`` and the result's dtypes."""

    table: str
    select: str
    schema: Mapping[str, pl.DataType]
    where: str = ""

    def sql(self, lo: int | None = None, hi: int | None = None) -> str:
        """The SQL text, restricted to a rowid range when one is given."""
        where = self.where
        if lo is not None:
            cond = f"rowid BETWEEN {int(lo)} AND {int(lo if hi is None else hi)}"
            where = f"{where} AND {cond}" if where else f"WHERE {cond}"
        return f'SELECT {self.select} FROM "{self.table}" {where}'


def connect(path: Path) -> sqlite3.Connection:
    """Open read-only (and immutable: no locks, no journal look-ups)."""
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)


def lenient_text(data: bytes) -> str:
    """SQLite text as str; bytes that are not UTF-8 become U+FFFD (a damaged export)."""
    return data.decode("utf-8", "replace")


def fetch(con: sqlite3.Connection, sql: str, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Run one query; build the frame BATCH_ROWS rows at a time (raises sqlite3 errors).

    SQLite columns have no enforced type: a value of the wrong type (text or a blob where an
    integer belongs, a real) becomes null (a real: its integer part), so that a damaged file
    costs the rows that need the value, not the whole read. Text that is not UTF-8 is read
    again with U+FFFD in place of the bad bytes (the fast path decodes in C).
    """
    saved = con.text_factory
    con.text_factory = str
    try:
        return _fetch(con, sql, schema)
    except (UnicodeDecodeError, sqlite3.OperationalError) as exc:
        if isinstance(exc, sqlite3.OperationalError) and "decode to UTF-8" not in str(exc):
            raise
        con.text_factory = lenient_text
        return _fetch(con, sql, schema)
    finally:
        con.text_factory = saved


def _fetch(con: sqlite3.Connection, sql: str, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    frames = []
    cur = con.execute(sql)
    while rows := cur.fetchmany(BATCH_ROWS):
        try:
            frames.append(pl.DataFrame(rows, schema=dict(schema), orient="row"))
        except (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError):
            frames.append(pl.DataFrame(_coerce(rows, schema), schema=dict(schema), orient="row"))
    if not frames:
        return pl.DataFrame(schema=dict(schema))
    return pl.concat(frames, rechunk=False) if len(frames) > 1 else frames[0]


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _coerce_value(v: object, dtype: pl.DataType) -> object:
    if dtype == pl.String:
        return v if isinstance(v, str) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return None
        v = int(v)
    return v if _INT64[0] <= v <= _INT64[1] else None


def _coerce(rows: list[tuple], schema: Mapping[str, pl.DataType]) -> list[tuple]:
    """Rows with every value of the wrong type replaced by None (the slow path)."""
    types = list(schema.values())
    return [tuple(_coerce_value(v, t) for v, t in zip(row, types)) for row in rows]


def _rowid_range(con: sqlite3.Connection, table: str) -> tuple[int, int] | None:
    """First and last rowid (two queries: SQLite answers each from the b-tree's edge, but
    ``min(rowid), max(rowid)`` in one query scans the whole table)."""
    try:
        lo = con.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
        hi = con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
    except sqlite3.OperationalError:  # a WITHOUT ROWID table or a view
        return None
    return None if lo is None else (int(lo), int(hi))


def default_workers() -> int:
    """Processes to use for one big file: the CPUs this process may run on, at most 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


#: A part of a table: call it to get the frame (each part is loaded once, when needed).
Loader = Callable[[], pl.DataFrame]


@contextmanager
def table_parts(
    path: Path, con: sqlite3.Connection, queries: Sequence[Query], workers: int | None = None
) -> Iterator[dict[str, list[Loader]]]:
    """Every query's rows as parts of at most ``PART_ROWS`` rowids, loaded one at a time.

    Loading part by part keeps memory bounded: a caller turns each part into its final form
    and drops it before loading the next. Big files are read by ``workers`` processes first
    (parts wait in a temporary folder, deleted on exit); small ones part by part in this one,
    and so are big ones when the workers cannot run (no room for the parts, a worker killed).

    Args:
        path: the database file (workers open their own connections).
        con: an open connection (used when not parallel).
        queries: one per table (keys of the result are the table names).
        workers: processes to use; None picks :func:`default_workers`; 1 never starts one.

    Yields:
        table name -> loaders of its parts, in rowid order.

    Raises:
        sqlite3.DatabaseError: the file is corrupt (also when a worker found it so).
    """
    parts = [(q, lo, hi) for q in queries for lo, hi in _split(con, q.table)]
    total = sum(_size(lo, hi) for _, lo, hi in parts)
    n_workers = default_workers() if workers is None else workers
    out: dict[str, list[Loader]] = {q.table: [] for q in queries}
    with tempfile.TemporaryDirectory(prefix="ccdiag-fetch-") as tmp:
        files = [Path(tmp) / f"part{i}.arrow" for i in range(len(parts))]
        parallel = n_workers > 1 and total >= PARALLEL_MIN_ROWS
        if parallel:
            jobs: list[dict[str, object]] = [
                {"sql": q.sql(lo, hi), "schema": _dtype_names(q.schema), "out": str(f)}
                for (q, lo, hi), f in zip(parts, files)
            ]
            try:
                _run_workers(path, jobs, [_size(lo, hi) for _, lo, hi in parts], n_workers)
            except (OSError, WorkerError):
                parallel = False  # no room for the parts, or a worker died: read in-process
        for (q, lo, hi), f in zip(parts, files):
            if parallel:
                out[q.table].append(functools.partial(_load_and_delete, f))
            else:
                out[q.table].append(functools.partial(fetch, con, q.sql(lo, hi), q.schema))
        yield out


class WorkerError(Exception):
    """A worker process died for another reason than the database (killed, out of memory)."""


def _dtype_names(schema: Mapping[str, pl.DataType]) -> dict[str, str]:
    return {k: str(v) for k, v in schema.items()}


def _size(lo: int | None, hi: int | None) -> int:
    return 0 if lo is None or hi is None else hi - lo + 1


def _split(con: sqlite3.Connection, table: str) -> list[tuple[int | None, int | None]]:
    """Rowid ranges of at most PART_ROWS (one open range for an empty or rowid-less table)."""
    r = _rowid_range(con, table)
    if r is None or r[0] > r[1]:  # a damaged b-tree can answer min > max: read it whole
        return [(None, None)]
    return [(lo, min(lo + PART_ROWS - 1, r[1])) for lo in range(r[0], r[1] + 1, PART_ROWS)]


def _load_and_delete(file: Path) -> pl.DataFrame:
    df = pl.read_ipc(file)
    file.unlink(missing_ok=True)
    return df


def _run_workers(path: Path, jobs: list[dict[str, object]], sizes: list[int], n: int) -> None:
    """Run the jobs in n worker processes (largest first, each to the least loaded)."""
    per_worker: list[list[dict[str, object]]] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(jobs)), key=lambda i: -sizes[i]):
        w = load.index(min(load))
        load[w] += sizes[i]
        per_worker[w].append(jobs[i])
    procs = []
    for work in (w for w in per_worker if w):
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve())],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"path": str(path.resolve()), "parts": work}))
        proc.stdin.close()
        procs.append(proc)
    results = [_wait(p) for p in procs]
    corrupt = [err for code, err in results if code == _CORRUPT]
    if corrupt:
        raise sqlite3.DatabaseError(corrupt[0])
    failed = [err for code, err in results if code != 0]
    if failed:
        raise WorkerError(failed[0])


#: A worker's exit status when SQLite reported the file corrupt.
_CORRUPT = 3


def _wait(proc: subprocess.Popen) -> tuple[int, str]:
    """Wait for a worker; return its exit status and last error line."""
    assert proc.stderr is not None
    with proc.stderr:
        err = proc.stderr.read()
    code = proc.wait()
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    return code, (lines[-1] if lines else f"worker exited with status {code}")


_DTYPES: dict[str, pl.DataType] = {"Int64": pl.Int64(), "String": pl.String()}


def _worker_main() -> None:
    """Worker: read the job from stdin, write each part as Arrow IPC; errors go to stderr."""
    job = json.loads(sys.stdin.read())
    con = connect(Path(job["path"]))
    try:
        for part in job["parts"]:
            schema = {k: _DTYPES[v] for k, v in part["schema"].items()}
            fetch(con, part["sql"], schema).write_ipc(part["out"], compression="uncompressed")
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(_CORRUPT)
    finally:
        con.close()


if __name__ == "__main__":
    _worker_main()
