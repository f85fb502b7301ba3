"""Structure-aware mutations of real traces, as hypothesis strategies.

A strategy draws a *plan*: a seed name and a list of operations (plain tuples), so that a
failing case can be printed, saved and replayed (:func:`build_case`) without hypothesis.

Kineto (on the decoded document, then on its bytes):
    drop / duplicate / move events, shuffle or reverse them; set or delete an event's keys (ph,
    cat, name, pid, tid, ts, dur, args, id) or args (correlation, External id, device, stream,
    bytes, Concrete Inputs, msg sizes, dtype, Input Dims/type) to odd values (NaN, ±inf,
    negative, huge ints beyond 2**63, strings, lists, objects, null); replace an event by a
    non-object; odd top-level members (deviceProperties, distributedInfo, schemaVersion,
    traceEvents itself); then serialize (compact or pretty, NaN literals, gzip or not) and
    optionally cut, flip, insert or append bytes.
nsys SQLite (SQL on a copy of the seed):
    drop tables (ENUM_*, StringIds, activity tables) or columns; delete, NULL, retype (text,
    real, blob, huge or negative ints) cells; swap start/end; duplicate rows and ids; corrupt
    enum tables (ids, labels); then optionally cut or flip bytes of the file.
nsys CSV (on the report texts):
    drop, rename or duplicate columns; garbage cells (text, empty, NaN, 1e999, negative, huge);
    cut rows; extra or missing cells; drop a report of the set; BOM, CRLF; gzip; cut or flip
    bytes.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
import random
import re
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from fuzz import seeds

Op = tuple[Any, ...]


@dataclass
class Plan:
    """What to build: a format, a seed, and the operations applied to it."""

    fmt: str  # kineto | nsys_sqlite | nsys_csv
    seed: str
    ops: list[Op] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.fmt}:{self.seed} " + "; ".join(repr(o) for o in self.ops)


@dataclass
class Case:
    """A built case: the path to read, and what its reader must account for."""

    path: Path
    #: Kineto: len(traceEvents) when the document is still valid JSON with an event list
    #: (then n_events + sum(skipped) must equal it); None otherwise.
    total_events: int | None = None


# -- odd values ------------------------------------------------------------------------------

_EXTREME_INTS = [0, -1, 1, 2**31, 2**32 + 7, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), 2**64, 10**30]
_EXTREME_FLOATS = [
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    -1.5,
    1e300,
    -1e300,
    5e-324,
    1.7e15 + 0.25,
    9.3e18,
    1e20,
]
_ODD_STRINGS = [
    "",
    "NaN",
    "Infinity",
    "-1",
    "12",
    "1e999",
    "True",
    "null",
    "\u00e9\u20ac",
    "a" * 300,
]

numbers = st.one_of(
    st.sampled_from(_EXTREME_INTS),
    st.sampled_from(_EXTREME_FLOATS),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    st.sampled_from(_ODD_STRINGS),
    st.text(max_size=12),
)
odd_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.dictionaries(st.sampled_from(["name", "id", "x", ""]), scalars, max_size=3),
)
#: Mostly numbers (for numeric fields), sometimes anything.
numeric_values = st.one_of(numbers, numbers, odd_values)

# -- Kineto ----------------------------------------------------------------------------------

EVENT_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "s", "bp"]
ARG_KEYS = [
    "correlation",
    "External id",
    "device",
    "stream",
    "bytes",
    "Concrete Inputs",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Input Dims",
    "Input type",
    "Process Group Name",
]
PHASES = ["X", "i", "I", "M", "s", "f", "t", "B", "E", "C", "b", "e", "Q", "", None]
CATEGORIES = [
    "cpu_op",
    "cuda_runtime",
    "cuda_driver",
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_sync",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "ac2g",
    "Trace",
    "mystery",
    "",
    None,
    7,
]
TOP_KEYS = ["deviceProperties", "distributedInfo", "schemaVersion", "metadata", "traceEvents"]


def _event_value(key: str) -> st.SearchStrategy[Any]:
    if key == "ph":
        return st.one_of(st.sampled_from(PHASES), odd_values)
    if key == "cat":
        return st.one_of(st.sampled_from(CATEGORIES), odd_values)
    if key in ("ts", "dur", "pid", "tid", "id"):
        return numeric_values
    if key == "args":
        return st.one_of(odd_values, st.dictionaries(st.sampled_from(ARG_KEYS), odd_values))
    return odd_values


def _arg_value(key: str) -> st.SearchStrategy[Any]:
    if key in ("Concrete Inputs", "Input Dims", "Input type"):
        return st.one_of(
            odd_values,
            st.lists(st.one_of(st.sampled_from(["", "True", "False", "float", "c10::Half"]),
                               st.lists(numeric_values, max_size=3)), max_size=5),
        )  # fmt: skip
    return numeric_values


def _top_value(key: str) -> st.SearchStrategy[Any]:
    if key == "deviceProperties":
        dev = st.dictionaries(st.sampled_from(["id", "name", "totalGlobalMem"]), odd_values)
        return st.one_of(odd_values, st.lists(st.one_of(dev, odd_values), max_size=3))
    if key == "distributedInfo":
        return st.one_of(
            odd_values,
            st.dictionaries(st.sampled_from(["rank", "world_size", "nccl_version"]), odd_values),
        )
    return odd_values


@st.composite
def kineto_op(draw: st.DrawFn, n: int) -> Op:
    """One structural mutation of a document with ``n`` events."""
    i = st.integers(0, max(n - 1, 0))
    kind = draw(
        st.sampled_from(
            ["set", "set", "set", "del", "set_arg", "set_arg", "del_arg", "drop", "dup", "move",
             "replace", "top_set", "top_del", "shuffle", "reverse", "args_none", "deep"]
        )
    )  # fmt: skip
    if kind == "set":
        key = draw(st.sampled_from(EVENT_KEYS))
        return ("set", draw(i), key, draw(_event_value(key)))
    if kind == "del":
        return ("del", draw(i), draw(st.sampled_from(EVENT_KEYS)))
    if kind == "set_arg":
        key = draw(st.sampled_from(ARG_KEYS))
        return ("set_arg", draw(i), key, draw(_arg_value(key)))
    if kind == "del_arg":
        return ("del_arg", draw(i), draw(st.sampled_from(ARG_KEYS)))
    if kind in ("drop", "args_none"):
        return (kind, draw(i))
    if kind in ("dup", "move"):
        return (kind, draw(i), draw(i))
    if kind == "replace":
        return ("replace", draw(i), draw(scalars))
    if kind == "top_set":
        key = draw(st.sampled_from(TOP_KEYS))
        return ("top_set", key, draw(_top_value(key)))
    if kind == "top_del":
        return ("top_del", draw(st.sampled_from(TOP_KEYS)))
    if kind == "shuffle":
        return ("shuffle", draw(st.integers(0, 2**32)))
    if kind == "deep":  # an arg nested thousands of levels deep (written as text, see build)
        return ("deep", draw(i), draw(st.sampled_from([50, 1000, 5000, 100_000])))
    return ("reverse",)


@st.composite
def byte_op(draw: st.DrawFn) -> Op:
    """A byte-level damage of the serialized file."""
    kind = draw(st.sampled_from(["cut", "flip", "insert", "append"]))
    at = draw(st.floats(0.0, 1.0))
    if kind == "cut":
        return ("cut", at)
    if kind == "flip":
        return ("flip", at, draw(st.integers(1, 255)))
    junk = draw(
        st.sampled_from([b"}", b"]", b",", b"{", b'"', b"\x00", b"\xff\xfe", b"NaN", b"]}"])
    )
    return (kind, at, junk)


@st.composite
def kineto_plan(draw: st.DrawFn, seed_names: list[str] | None = None) -> Plan:
    name = draw(st.sampled_from(seed_names or list(seeds.KINETO_SOURCES)))
    n = len(seeds.kineto_seed(name).get("traceEvents", []))
    ops = draw(st.lists(kineto_op(n), min_size=1, max_size=8))
    suffix = draw(st.sampled_from([".json", ".json.gz", ".sqlite", ".gz", ""]))
    ops.append(("encode", draw(st.booleans()), draw(st.booleans()), suffix, draw(st.booleans())))
    if draw(st.integers(0, 9)) == 0:
        ops += draw(st.lists(byte_op(), min_size=1, max_size=2))
    return Plan("kineto", name, ops)


def _apply_kineto(doc: Any, op: Op) -> Any:
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    ev_list = events if isinstance(events, list) else None
    kind = op[0]
    if kind in ("top_set", "top_del"):
        if isinstance(doc, dict):
            if kind == "top_set":
                doc[op[1]] = copy.deepcopy(op[2])
            else:
                doc.pop(op[1], None)
        return doc
    if not ev_list:
        return doc
    n = len(ev_list)
    if kind == "shuffle":
        random.Random(op[1]).shuffle(ev_list)
        return doc
    if kind == "reverse":
        ev_list.reverse()
        return doc
    i = op[1] % n
    ev = ev_list[i]
    if kind == "drop":
        del ev_list[i]
    elif kind == "dup":
        ev_list.insert(op[2] % n, copy.deepcopy(ev))
    elif kind == "move":
        ev_list.insert(op[2] % n, ev_list.pop(i))
    elif kind == "replace":
        ev_list[i] = op[2]
    elif isinstance(ev, dict):
        if kind == "set":
            ev[op[2]] = copy.deepcopy(op[3])
        elif kind == "del":
            ev.pop(op[2], None)
        elif kind == "args_none":
            ev["args"] = None
        elif kind == "deep":
            ev["args"] = {"deep": f"{_DEEP}{op[2]}"}
        elif kind in ("set_arg", "del_arg"):
            args = ev.get("args")
            if not isinstance(args, dict):
                args = ev["args"] = {}
            if kind == "set_arg":
                args[op[2]] = copy.deepcopy(op[3])
            else:
                args.pop(op[2], None)
    return doc


_DEEP = "@@ccdiag-fuzz-deep@@"
_DEEP_RE = re.compile(r'"' + _DEEP + r'(\d+)"')


def _json_default(obj: Any) -> Any:
    raise TypeError(f"not JSON: {obj!r}")


def _apply_bytes(data: bytes, op: Op) -> bytes:
    kind, at = op[0], op[1]
    pos = min(int(at * len(data)), max(len(data) - 1, 0))
    if kind == "cut":
        return data[:pos]
    if kind == "flip":
        if not data:
            return data
        b = bytearray(data)
        b[pos] ^= op[2]
        return bytes(b)
    if kind == "insert":
        return data[:pos] + op[2] + data[pos:]
    return data + op[2]


def build_kineto(plan: Plan, folder: Path) -> Case:
    doc = copy.deepcopy(seeds.kineto_seed(plan.seed))
    encode: Op = ("encode", False, False, ".json")
    damage: list[Op] = []
    for op in plan.ops:
        if op[0] == "encode":
            encode = op
        elif op[0] in ("cut", "flip", "insert", "append"):
            damage.append(op)
        else:
            doc = _apply_kineto(doc, op)
    _, pretty, gz, suffix, *bom = encode
    text = json.dumps(doc, indent=1 if pretty else None, allow_nan=True, default=_json_default)
    text = _DEEP_RE.sub(lambda m: "[" * int(m[1]) + "]" * int(m[1]), text)
    data = (b"\xef\xbb\xbf" if bom and bom[0] else b"") + text.encode("utf-8", "surrogatepass")
    total = None
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) and not damage:
        total = len(doc["traceEvents"])
    for op in damage:
        data = _apply_bytes(data, op)
    if gz:
        data = gzip.compress(data, compresslevel=1, mtime=0)
    path = folder / f"trace{suffix}"
    path.write_bytes(data)
    return Case(path, total)


# -- nsys SQLite -----------------------------------------------------------------------------


_SQL_ODD = [
    None,
    "abc",
    "",
    "12",
    1.5,
    -1.0,
    float("inf"),
    b"\x00\x01blob",
    -1,
    0,
    2**63 - 1,
    -(2**63),
    2**31,
    0xFFFFFFFF,
    1 << 40,
]
sql_values = st.one_of(st.sampled_from(_SQL_ODD), st.integers(-(2**63), 2**63 - 1))


@functools.cache
def sqlite_inventory(name: str) -> dict[str, tuple[str, ...]]:
    """table -> columns of a SQLite seed."""
    con = sqlite3.connect(seeds.sqlite_seed(name))
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            t: tuple(r[1] for r in con.execute(f'PRAGMA table_info("{t}")')) for t in sorted(tables)
        }
    finally:
        con.close()


#: Tables the reader uses (mutated more often than the rest).
HOT_TABLES = (
    "StringIds",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "NVTX_EVENTS",
    "ENUM_CUDA_MEM_KIND",
    "ENUM_CUDA_MEMCPY_OPER",
    "ENUM_NSYS_EVENT_TYPE",
    "ENUM_NSYS_EVENT_CLASS",
    "ENUM_CUPTI_SYNC_TYPE",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SYSTEM_ENV",
    "TARGET_INFO_CUDA_CONTEXT_INFO",
    "META_DATA_CAPTURE",
    "META_DATA_EXPORT",
    "CUDA_UM_GPU_PAGE_FAULT_EVENTS",
)


@st.composite
def sqlite_op(draw: st.DrawFn, inv: dict[str, tuple[str, ...]]) -> Op:
    hot = [t for t in HOT_TABLES if t in inv]
    table = (
        draw(st.one_of(st.sampled_from(hot), st.sampled_from(sorted(inv))))
        if hot
        else draw(st.sampled_from(sorted(inv)))
    )
    cols = inv[table] or ("rowid",)
    col = draw(st.sampled_from(cols))
    row = draw(st.integers(1, 400))
    kind = draw(
        st.sampled_from(
            ["set_cell", "set_cell", "set_col", "null_col", "drop_table", "drop_column",
             "delete_rows", "dup_rows", "swap_times", "shift_ids", "set_cell", "view",
             "bad_text"]
        )
    )  # fmt: skip
    if kind == "set_cell":
        return ("set_cell", table, col, row, draw(sql_values))
    if kind == "set_col":
        return ("set_col", table, col, draw(sql_values), draw(st.integers(1, 5)))
    if kind == "null_col":
        return ("set_col", table, col, None, 1)
    if kind in ("drop_table",):
        return ("drop_table", table)
    if kind == "drop_column":
        return ("drop_column", table, col)
    if kind == "delete_rows":
        return ("delete_rows", table, draw(st.integers(1, 5)), draw(st.integers(0, 4)))
    if kind == "dup_rows":
        return ("dup_rows", table, draw(st.integers(1, 50)))
    if kind == "swap_times":
        return ("swap_times", table)
    if kind == "bad_text":  # bytes that are not UTF-8, stored as text
        return ("bad_text", table, col, draw(st.integers(1, 5)))
    if kind == "view":  # the table replaced by a view of it, or by a never-ending recursive one
        return ("view", table, draw(st.booleans()))
    return ("shift_ids", table, col, draw(st.sampled_from([-1, 1, 1000, 2**40, -(2**40)])))


@st.composite
def sqlite_plan(draw: st.DrawFn, seed_names: list[str] | None = None) -> Plan:
    name = draw(st.sampled_from(seed_names or list(seeds.SQLITE_SOURCES)))
    inv = sqlite_inventory(name)
    ops = draw(st.lists(sqlite_op(inv), min_size=1, max_size=6))
    if draw(st.integers(0, 14)) == 0:
        ops += draw(st.lists(byte_op(), min_size=1, max_size=2))
    return Plan("nsys_sqlite", name, ops)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql(con: sqlite3.Connection, op: Op) -> None:
    kind, table = op[0], _q(op[1])
    if kind == "set_cell":
        con.execute(
            f"UPDATE {table} SET {_q(op[2])} = ? WHERE rowid = "
            f"(SELECT rowid FROM {table} ORDER BY rowid LIMIT 1 OFFSET ?)",
            (op[4], op[3] % 400),
        )
    elif kind == "set_col":
        con.execute(f"UPDATE {table} SET {_q(op[2])} = ? WHERE rowid % ? = 0", (op[3], op[4]))
    elif kind == "drop_table":
        con.execute(f"DROP TABLE {table}")
    elif kind == "drop_column":
        _drop_column(con, op[1], op[2])
    elif kind == "delete_rows":
        con.execute(f"DELETE FROM {table} WHERE rowid % ? = ?", (op[2], op[3] % op[2]))
    elif kind == "dup_rows":
        con.execute(f"INSERT INTO {table} SELECT * FROM {table} LIMIT ?", (op[2],))
    elif kind == "swap_times":
        con.execute(f"UPDATE {table} SET start = end, end = start WHERE rowid % 3 = 0")
    elif kind == "bad_text":
        con.execute(
            f"UPDATE {table} SET {_q(op[2])} = CAST(x'cd41ff' AS TEXT) WHERE rowid % ? = 0",
            (op[3],),
        )
    elif kind == "view":
        con.execute(f'ALTER TABLE {table} RENAME TO "_fuzz_{op[1]}"')
        if op[2]:
            con.execute(
                f"CREATE VIEW {table} AS WITH RECURSIVE r(x) AS "
                "(SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS id, x AS start FROM r"
            )
        else:
            con.execute(f'CREATE VIEW {table} AS SELECT * FROM "_fuzz_{op[1]}"')
    elif kind == "shift_ids":
        con.execute(f"UPDATE {table} SET {_q(op[2])} = {_q(op[2])} + ?", (op[3],))


def _drop_column(con: sqlite3.Connection, table: str, col: str) -> None:
    """ALTER TABLE DROP COLUMN, or a rebuilt table without it (keys and indexes forbid it)."""
    try:
        con.execute(f"ALTER TABLE {_q(table)} DROP COLUMN {_q(col)}")
        return
    except sqlite3.DatabaseError:
        pass
    kind = con.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if not kind or kind[0] != "table":
        return
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({_q(table)})") if r[1] != col]
    if not cols:
        con.execute(f"DROP TABLE {_q(table)}")
        return
    keep = ", ".join(_q(c) for c in cols)
    con.execute(f"CREATE TABLE _fuzz_tmp AS SELECT {keep} FROM {_q(table)}")
    con.execute(f"DROP TABLE {_q(table)}")
    con.execute(f"ALTER TABLE _fuzz_tmp RENAME TO {_q(table)}")


#: SQLite VM steps one mutation may take (a statement over a never-ending view is cut off).
_MAX_STEPS = 50_000_000


def build_sqlite(plan: Plan, folder: Path) -> Case:
    path = folder / "trace.sqlite"
    shutil.copyfile(seeds.sqlite_seed(plan.seed), path)
    con = sqlite3.connect(path)
    steps = [0]

    def budget() -> int:
        steps[0] += 1
        return int(steps[0] * 10_000 > _MAX_STEPS)  # non-zero: interrupt the statement

    con.set_progress_handler(budget, 10_000)
    damage = []
    # views last: a statement reading a never-ending view would never end (the campaign once
    # filled the disk copying one into a table)
    ops = sorted(plan.ops, key=lambda o: o[0] == "view")
    try:
        for op in ops:
            steps[0] = 0
            if op[0] in ("cut", "flip", "insert", "append"):
                damage.append(op)
                continue
            try:
                _sql(con, op)
            except sqlite3.DatabaseError:
                pass  # e.g. a unique id duplicated, a table already dropped: not applied
        con.commit()
    finally:
        con.close()
    if damage:
        data = path.read_bytes()
        for op in damage:
            data = _apply_bytes(data, op)
        path.write_bytes(data)
    return Case(path)


# -- nsys CSV --------------------------------------------------------------------------------

_CSV_JUNK = ["", "abc", "NaN", "nan", "inf", "1e999", "-5", "-9223372036854775809",
             "99999999999999999999999", "0.5", '"', '""', "1,2", " 7 ", "\x00", "NVIDIA (x)",
             "[CUDA memcpy Device-to-Device]", "[CUDA memset]", "Managed", "Pinned", "é"]  # fmt: skip
csv_cells = st.one_of(st.sampled_from(_CSV_JUNK), st.integers(-(2**64), 2**64).map(str))


@st.composite
def csv_op(draw: st.DrawFn, reports: tuple[str, ...]) -> Op:
    report = draw(st.sampled_from(reports))
    kind = draw(
        st.sampled_from(
            ["cell", "cell", "cell", "column", "drop_col", "rename_col", "dup_col", "cut_rows",
             "extra_cell", "missing_cell", "drop_report", "bom", "crlf", "gzip", "blank_lines",
             "no_header", "bytes"]
        )
    )  # fmt: skip
    col = draw(st.integers(0, 30))
    row = draw(st.integers(1, 400))
    if kind == "cell":
        return ("cell", report, row, col, draw(csv_cells))
    if kind == "column":
        return ("column", report, col, draw(csv_cells))
    if kind in ("drop_col", "dup_col"):
        return (kind, report, col)
    if kind == "rename_col":
        return ("rename_col", report, col, draw(st.sampled_from(["", "x", "Start (ns)", "Name"])))
    if kind == "cut_rows":
        return ("cut_rows", report, draw(st.integers(0, 350)), draw(st.integers(0, 40)))
    if kind in ("extra_cell", "missing_cell"):
        return (kind, report, row)
    if kind == "bytes":
        return ("bytes", report, draw(byte_op()))
    return (kind, report)


@st.composite
def csv_plan(draw: st.DrawFn, seed_names: list[str] | None = None) -> Plan:
    name = draw(st.sampled_from(seed_names or list(seeds.CSV_SOURCES)))
    reports = tuple(seeds.csv_seed(name))
    return Plan("nsys_csv", name, draw(st.lists(csv_op(reports), min_size=1, max_size=6)))


def _split_csv(text: str) -> list[list[str]]:
    return [line.split(",") for line in text.splitlines()]


def build_csv(plan: Plan, folder: Path) -> Case:
    texts = dict(seeds.csv_seed(plan.seed))
    rows = {k: [line.split(",") for line in v.splitlines()] for k, v in texts.items()}
    post: dict[str, list[Op]] = {}
    for op in plan.ops:
        kind, report = op[0], op[1]
        if report not in rows:
            continue
        table = rows[report]
        width = len(table[0]) if table else 1
        if kind == "cell" and len(table) > 1:
            r = table[1 + op[2] % (len(table) - 1)]
            if r:
                r[op[3] % len(r)] = op[4]
        elif kind == "column":
            for r in table[1:]:
                if r:
                    r[op[2] % len(r)] = op[3]
        elif kind == "drop_col":
            for r in table:
                if r:
                    del r[op[2] % width % len(r)]
        elif kind == "dup_col":
            for r in table:
                if r:
                    r.append(r[op[2] % len(r)])
        elif kind == "rename_col" and table:
            table[0][op[2] % width] = op[3]
        elif kind == "cut_rows":
            del table[1 + op[2] : 1 + op[2] + op[3]]
        elif kind == "extra_cell" and len(table) > 1:
            table[1 + op[2] % (len(table) - 1)].append("junk")
        elif kind == "missing_cell" and len(table) > 1:
            r = table[1 + op[2] % (len(table) - 1)]
            if r:
                r.pop()
        elif kind == "drop_report":
            del rows[report]
        elif kind == "no_header" and table:
            del table[0]
        else:
            post.setdefault(report, []).append(op)
    for report, table in rows.items():
        text = "\n".join(",".join(r) for r in table) + "\n"
        gz = False
        for op in post.get(report, []):
            if op[0] == "bom":
                text = "\ufeff" + text
            elif op[0] == "crlf":
                text = text.replace("\n", "\r\n")
            elif op[0] == "blank_lines":
                text = text.replace("\n", "\n\n", 3)
            elif op[0] == "gzip":
                gz = True
        data = text.encode("utf-8", "surrogatepass")
        for op in post.get(report, []):
            if op[0] == "bytes":
                data = _apply_bytes(data, op[2])
        name = f"set_{report}.csv"
        if gz:
            data, name = gzip.compress(data, mtime=0), name + ".gz"
        (folder / name).write_bytes(data)
    first = next(iter(rows), "cuda_api_trace")
    return Case(folder / f"set_{first}.csv")


# -- folders of per-rank files ---------------------------------------------------------------

RANK_NAMES = [
    "rank0.json", "rank1.json", "rank1.json.gz", "rank-2.json", "RANK_3.json.gz", "rank.1.json",
    "trace.json", "other.json.gz", "rank99999999999999999999.json", "rank0.sqlite",
    "rank0.meta.json", ".hidden.json", "notes.txt",
]  # fmt: skip


@st.composite
def folder_plan(draw: st.DrawFn) -> Plan:
    """A folder of per-rank Kineto files (the 2-GPU TP decode), mutated and oddly named."""
    ops: list[Op] = []
    for seed in ("tp2_decode_rank0", "tp2_decode_rank1"):
        n = len(seeds.kineto_seed(seed)["traceEvents"])
        name = draw(st.sampled_from(RANK_NAMES))
        rank_ops = draw(st.lists(kineto_op(n), max_size=4))
        ops.append(("file", seed, name, rank_ops, draw(st.booleans())))
    if draw(st.integers(0, 3)) == 0:  # a third entry: a copy, another format, or junk
        extra = draw(st.sampled_from(["copy", "sqlite", "junk", "subfolder"]))
        ops.append(("extra", extra, draw(st.sampled_from(RANK_NAMES))))
    return Plan("folder", "tp2_decode", ops)


def build_folder(plan: Plan, folder: Path) -> Case:
    root = folder / "ranks"
    root.mkdir()
    for op in plan.ops:
        if op[0] == "file":
            _, seed, name, rank_ops, gz = op
            sub = Plan("kineto", seed, [*rank_ops, ("encode", False, gz, "", False)])
            tmp = folder / "tmp"
            tmp.mkdir(exist_ok=True)
            built = build_kineto(sub, tmp)
            target = root / name
            if not target.exists():
                built.path.replace(target)
        elif op[0] == "extra":
            target = root / op[2]
            if op[1] == "copy":
                files = sorted(p for p in root.iterdir() if p.is_file())
                if files and not target.exists():
                    shutil.copyfile(files[0], target)
            elif op[1] == "sqlite":
                shutil.copyfile(seeds.sqlite_seed("h200_decode_eager"), root / "rank5.sqlite")
            elif op[1] == "junk":
                target.write_bytes(b"\x00junk")
            else:
                (root / "rank7").mkdir(exist_ok=True)
    shutil.rmtree(folder / "tmp", ignore_errors=True)
    return Case(root)


# -- all formats -----------------------------------------------------------------------------


def any_plan() -> st.SearchStrategy[Plan]:
    """Any format (Kineto twice as often: it is the most used and the most varied)."""
    return st.one_of(kineto_plan(), kineto_plan(), sqlite_plan(), csv_plan())


def build_case(plan: Plan, folder: Path) -> Case:
    """Write the mutated trace of ``plan`` into ``folder`` (an empty folder)."""
    if plan.fmt == "kineto":
        return build_kineto(plan, folder)
    if plan.fmt == "nsys_sqlite":
        return build_sqlite(plan, folder)
    if plan.fmt == "folder":
        return build_folder(plan, folder)
    return build_csv(plan, folder)
