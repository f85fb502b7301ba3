"""Read SQLite tables straight into typed polars frames through the ADBC SQLite driver.

The activity tables of an export are read by Apache Arrow's ADBC SQLite driver
(``adbc-driver-sqlite``): SQLite's own C code steps the rows and the driver appends them to
Arrow columns, which polars takes over through the Arrow C stream interface (no Python
object per value, no copy). Small tables (enums, metadata) are still read with ``sqlite3``.

Bounded memory, cost linear in rows: each table is cut into parts of at most ``PART_ROWS``
rows by walking its rowid b-tree (``LIMIT 1 OFFSET PART_ROWS`` from the previous cut: the cut
points depend on the number of rows, never on ``max(rowid) - min(rowid)``, so rowids spread up
to 2**63 - 1 cost nothing). Parts are read by a few threads, each with its own connection
(SQLite and the driver release the GIL while they step); the caller turns each part into its
final form before the next-but-``workers`` part is read.

SQLite columns have no enforced type. A part is first read as it is; when a column comes back
of the wrong type (text or a blob where an integer belongs, a real), the part is read again with
each value checked in SQL (``typeof``): a wrong-typed value becomes null, a real its integer
part, so that a damaged file costs the rows that need the value, not the whole read. Text
columns are always read as blobs and decoded here: text that is not UTF-8 gets U+FFFD in place
of the bad bytes (polars would otherwise hold invalid strings).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import adbc_driver_manager as adbc
import adbc_driver_sqlite
import polars as pl

#: Rows per Arrow batch the driver builds (the first batch also decides each column's type).
BATCH_ROWS = 65_536
#: Rows per part (a table with fewer rows is read in one piece).
PART_ROWS = 1_000_000
#: Below this many rows in all, threads cost more to start than they save.
PARALLEL_MIN_ROWS = 2_000_000
#: Rows per sqlite3 fetchmany() call (small tables read through Python).
FETCH_ROWS = 100_000

_I64 = pl.Int64()
_STR = pl.String()
#: The integer range SQLite stores; a real outside it has no integer part to keep.
_REAL_LIMIT = "9.2233720368547e18"


@dataclass(frozen=True)
class Query:
    """One table's columns: ``schema`` maps each wanted column to Int64 or String.

    Columns the table lacks (``present``) come back as nulls. ``where`` is an SQL condition
    on the table's own columns (or empty).
    """

    table: str
    schema: Mapping[str, pl.DataType]
    present: frozenset[str]
    where: str = ""

    def _range(self, lo: int | None, hi: int | None) -> list[str]:
        conds = [f"({self.where})"] if self.where else []
        if lo is not None:
            conds.append(f"rowid > {int(lo)}")
        if hi is not None:
            conds.append(f"rowid <= {int(hi)}")
        return conds

    def _ints(self) -> list[str]:
        return [c for c, t in self.schema.items() if t != _STR and c in self.present]

    def _texts(self) -> list[str]:
        return [c for c, t in self.schema.items() if t == _STR and c in self.present]

    def needs_rid(self) -> bool:
        """Whether the rows need their rowid (``__rid``): to join text columns read apart, or
        to count rows when no integer column is read. Stepping it costs ~12 % of a read."""
        return bool(self._texts()) or not self._ints()

    def sql(self, lo: int | None = None, hi: int | None = None, *, checked: bool = False) -> str:
        """The integer columns of rows ``lo < rowid <= hi`` (None: no bound), with ``__rid``
        when :meth:`needs_rid`.

        ``checked``: every value goes through ``typeof`` (wrong types become null).
        """
        cols = ["rowid AS __rid"] if self.needs_rid() else []
        for c in self._ints():
            cols.append(_checked_int(c) if checked else f'"{c}"')
        where = self._range(lo, hi)
        cond = f" WHERE {' AND '.join(where)}" if where else ""
        return f'SELECT {", ".join(cols)} FROM "{self.table}"{cond}'

    def plain_sql(self) -> str:
        """Every wanted column (missing ones as NULL), for a table read through sqlite3."""
        cols = [f'"{c}"' if c in self.present else f'NULL AS "{c}"' for c in self.schema]
        cond = f" WHERE {self.where}" if self.where else ""
        return f'SELECT {", ".join(cols)} FROM "{self.table}"{cond}'

    def text_sql(self, column: str, lo: int | None = None, hi: int | None = None) -> str:
        """One text column's non-null values (as blobs) of rows ``lo < rowid <= hi``."""
        where = [f"typeof(\"{column}\") = 'text'", *self._range(lo, hi)]
        return (
            f'SELECT rowid AS __rid, CAST("{column}" AS BLOB) AS "{column}" '
            f'FROM "{self.table}" WHERE {" AND ".join(where)}'
        )


def _checked_int(col: str) -> str:
    c = f'"{col}"'
    real = f"CASE WHEN abs({c}) < {_REAL_LIMIT} THEN CAST({c} AS INTEGER) END"
    return f"CASE typeof({c}) WHEN 'integer' THEN {c} WHEN 'real' THEN {real} END AS {c}"


def uri(path: Path) -> str:
    """The read-only (and immutable: no locks, no journal look-ups) URI of a database file."""
    return path.resolve().as_uri() + "?mode=ro&immutable=1"


def connect(path: Path) -> sqlite3.Connection:
    """Open read-only with ``sqlite3`` (for the small tables)."""
    return sqlite3.connect(uri(path), uri=True)


def lenient_text(data: bytes) -> str:
    """SQLite text as str; bytes that are not UTF-8 become U+FFFD (a damaged export)."""
    return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# Small queries through sqlite3 (enums, strings, metadata).
# --------------------------------------------------------------------------------------------


def fetch(con: sqlite3.Connection, sql: str, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Run one (small) query with sqlite3; build the frame FETCH_ROWS rows at a time.

    A value of the wrong type (text or a blob where an integer belongs, a real) becomes null
    (a real: its integer part). Text that is not UTF-8 is read again with U+FFFD in place of
    the bad bytes (the fast path decodes in C). Raises sqlite3 errors.
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
    while rows := cur.fetchmany(FETCH_ROWS):
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


# --------------------------------------------------------------------------------------------
# Parts: rowid cut points found by walking the b-tree, never from the rowid range.
# --------------------------------------------------------------------------------------------


def _rowid_range(con: sqlite3.Connection, table: str) -> tuple[int, int] | None:
    """First and last rowid (two queries: SQLite answers each from the b-tree's edge, but
    ``min(rowid), max(rowid)`` in one query scans the whole table)."""
    try:
        lo = con.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
        hi = con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
    except sqlite3.OperationalError:  # a WITHOUT ROWID table or a view
        return None
    if not isinstance(lo, int) or not isinstance(hi, int):
        return None
    return lo, hi


#: A part of a table: rows with ``lo < rowid <= hi`` (None: unbounded).
Part = tuple["int | None", "int | None"]


def _split(
    con: sqlite3.Connection, table: str, columns: frozenset[str]
) -> tuple[list[Part] | None, int]:
    """Cut a table into parts of at most PART_ROWS rows, and say about how many rows it has.

    Each cut is found by stepping PART_ROWS rowids on from the previous one (SQLite reads only
    the b-tree's cells, not the rows): linear in the rows, whatever the rowids are. None: the
    table has no usable rowid (a WITHOUT ROWID table, or a column named rowid hides it).
    """
    if columns & {"rowid", "_rowid_", "oid"}:
        return None, 0
    r = _rowid_range(con, table)
    if r is None:
        return None, 0
    lo, hi = r
    if lo > hi:  # a damaged b-tree can answer min > max: read it whole
        return [(None, None)], 0
    if hi - lo < PART_ROWS:
        return [(None, None)], hi - lo + 1
    cuts: list[int] = []
    prev = lo - 1
    step = f'SELECT rowid FROM "{table}" WHERE rowid > ? ORDER BY rowid LIMIT 1 OFFSET ?'
    while True:
        row = con.execute(step, (prev, PART_ROWS - 1)).fetchone()
        if row is None or not isinstance(row[0], int) or row[0] <= prev or row[0] >= hi:
            break  # the end (or a damaged b-tree that does not advance: stop cutting)
        cuts.append(row[0])
        prev = row[0]
    bounds: list[int | None] = [None, *cuts, None]
    parts = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    return parts, len(parts) * PART_ROWS


# --------------------------------------------------------------------------------------------
# Reading a part through ADBC.
# --------------------------------------------------------------------------------------------


class _Reader:
    """ADBC connections to one file, one per thread (a connection is not thread-safe)."""

    def __init__(self, path: Path) -> None:
        try:
            self.db = adbc_driver_sqlite.connect(uri(path))
        except adbc.Error as exc:
            raise _database_error(exc) from None
        self._local = threading.local()
        self._conns: list[adbc.AdbcConnection] = []
        self._lock = threading.Lock()

    def _conn(self) -> adbc.AdbcConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = adbc.AdbcConnection(self.db)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def frame(self, sql: str) -> pl.DataFrame:
        """Run one query into a polars frame (raises sqlite3.DatabaseError for a bad file)."""
        stmt = adbc.AdbcStatement(self._conn())
        try:
            stmt.set_options(**{adbc_driver_sqlite.StatementOptions.BATCH_ROWS.value: BATCH_ROWS})
            stmt.set_sql_query(sql)
            handle, _ = stmt.execute_query()
            return pl.DataFrame(handle)
        except adbc.Error as exc:
            raise _database_error(exc) from None
        except pl.exceptions.ComputeError as exc:  # the driver's error, raised inside polars
            if "[SQLite]" not in str(exc):
                raise
            raise _database_error(exc) from None
        finally:
            stmt.close()

    def close(self) -> None:
        for conn in self._conns:
            conn.close()
        self.db.close()


class TypeMismatch(sqlite3.DatabaseError):
    """A column held values of another type than the driver inferred from the first batch."""


def _database_error(exc: Exception) -> sqlite3.DatabaseError:
    """The driver's error as one line, as the sqlite3 exception the callers handle."""
    text = str(exc)
    line = next((ln for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    line = line.replace("got external error: ", "").strip()
    for prefix in ("INTERNAL: ", "IO: ", "INVALID_ARGUMENT: ", "INVALID_STATE: ", "[SQLite] "):
        line = line.replace(prefix, "")
    if "Type mismatch" in text:
        return TypeMismatch(line)
    return sqlite3.DatabaseError(line)


def _ints_ok(df: pl.DataFrame, query: Query) -> bool:
    rid = "__rid" in df.columns or not query.needs_rid()
    return all(df.schema.get(c) == _I64 for c in query._ints()) and rid


def _decode(blobs: pl.Series) -> pl.Series:
    """Blobs -> strings; bytes that are not UTF-8 become U+FFFD (only then through Python)."""
    try:
        return blobs.cast(_STR)
    except pl.exceptions.PolarsError:
        values = [None if b is None else lenient_text(b) for b in blobs.to_list()]
        return pl.Series(blobs.name, values, _STR)


#: The column :func:`read_part` adds: each row's hash over the columns read (duplicates).
ROW_HASH = "__row_hash"


def read_part(reader: _Reader, query: Query, part: Part) -> pl.DataFrame:
    """One part of a table, every wanted column typed as the query says (missing: null), and
    :data:`ROW_HASH` (computed here, in the reading thread)."""
    lo, hi = part
    try:
        df = reader.frame(query.sql(lo, hi))
        if not _ints_ok(df, query):
            raise TypeMismatch("a column of another type")
    except TypeMismatch:
        df = reader.frame(query.sql(lo, hi, checked=True))
    if not _ints_ok(df, query):  # no row at all can leave a column untyped
        rid = ["__rid"] if query.needs_rid() else []
        df = df.select(pl.col(c).cast(_I64) for c in [*rid, *query._ints()])
    for col in query._texts():
        text = reader.frame(query.text_sql(col, lo, hi))
        text = text.select(pl.col("__rid").cast(_I64), _decode(text[col]).alias(col))
        df = df.join(text, on="__rid", how="left", maintain_order="left")
    df = df.select(
        pl.col(c) if c in df.columns else pl.lit(None, dtype).alias(c)
        for c, dtype in query.schema.items()
    )
    return df.with_columns(df.hash_rows().alias(ROW_HASH))


def _fetch_hashed(con: sqlite3.Connection, query: Query) -> pl.DataFrame:
    df = fetch(con, query.plain_sql(), query.schema)
    return df.with_columns(df.hash_rows().alias(ROW_HASH))


# --------------------------------------------------------------------------------------------
# Every table's parts, read ahead by a few threads.
# --------------------------------------------------------------------------------------------


def default_workers() -> int:
    """Threads to use for one big file: the CPUs this process may run on, at most 4."""
    import os

    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


#: A part of a table: call it to get the frame (each part is loaded once, when needed).
Loader = Callable[[], pl.DataFrame]


class _Ahead:
    """Loads parts in the order given, up to ``window`` of them ahead of the caller."""

    def __init__(self, jobs: list[Loader], workers: int, local: set[int]) -> None:
        self.jobs = jobs
        self.local = local  # jobs that must run in the caller's thread (sqlite3)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="ccdiag-sqlite")
        self.window = workers
        self.futures: dict[int, Future[pl.DataFrame]] = {}
        self.next = 0

    def load(self, i: int) -> pl.DataFrame:
        while self.next < len(self.jobs) and self.next <= i + self.window:
            if self.next not in self.local:
                self.futures[self.next] = self.pool.submit(self.jobs[self.next])
            self.next += 1
        future = self.futures.pop(i, None)
        return self.jobs[i]() if future is None else future.result()

    def close(self) -> None:
        for f in self.futures.values():
            f.cancel()
        self.pool.shutdown(wait=True)


@contextmanager
def table_parts(
    path: Path, con: sqlite3.Connection, queries: Sequence[Query], workers: int | None = None
) -> Iterator[dict[str, list[Loader]]]:
    """Every query's rows as parts of at most ``PART_ROWS`` rows, loaded one at a time.

    Loading part by part keeps memory bounded: a caller turns each part into its final form
    and drops it before loading more. Big files are read ahead by ``workers`` threads (at
    most ``workers`` parts wait in memory); small ones part by part in the calling thread.
    Load the parts in the order of ``queries`` (then of each table's parts) for the
    read-ahead to help.

    Args:
        path: the database file (the driver opens its own connections).
        con: an open sqlite3 connection (used to find the parts).
        queries: one per table (keys of the result are the table names).
        workers: threads to use; None picks :func:`default_workers`; 1 never starts one.

    Yields:
        table name -> loaders of its parts, in rowid order.

    Raises:
        sqlite3.DatabaseError: the file is corrupt.
    """
    n_workers = default_workers() if workers is None else workers
    reader = _Reader(path)
    jobs: list[tuple[str, Loader]] = []
    local: set[int] = set()
    rows = 0
    for q in queries:
        parts, n = _split(con, q.table, q.present)
        rows += n
        if parts is None:  # no rowid to cut by or to join text on: sqlite3, whole
            local.add(len(jobs))
            jobs.append((q.table, functools.partial(_fetch_hashed, con, q)))
            continue
        jobs += [(q.table, functools.partial(read_part, reader, q, p)) for p in parts]
    parallel = n_workers > 1 and rows >= PARALLEL_MIN_ROWS and len(jobs) > 1
    ahead = _Ahead([job for _, job in jobs], n_workers, local) if parallel else None
    out: dict[str, list[Loader]] = {q.table: [] for q in queries}
    for i, (table, job) in enumerate(jobs):
        out[table].append(job if ahead is None else functools.partial(ahead.load, i))
    try:
        yield out
    finally:
        if ahead is not None:
            ahead.close()
        reader.close()
