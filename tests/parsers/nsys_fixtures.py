"""Helpers for the Nsight Systems reader tests: the real exports, and edited copies of them."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / "data" / "shared"
#: Every real Nsight Systems export in the vendored test data.
REAL_SQLITE = sorted(SHARED.rglob("*.sqlite"))
EAGER = SHARED / "traces" / "h200_decode_eager.nsys.sqlite"
GRAPH = SHARED / "traces" / "h200_decode_graph.nsys.sqlite"
NSYS_AI = SHARED / "external" / "nsys-ai" / "tests" / "fixtures"
MFU_BEFORE = NSYS_AI / "mfu_2gpu_before.sqlite"
MFU_AFTER = NSYS_AI / "mfu_2gpu_after.sqlite"
H100_2GPU = NSYS_AI / "h100_2gpu_1s.sqlite"
MOCK = NSYS_AI / "mock.sqlite"
FLAMEOX = SHARED / "external" / "flameox" / "tests" / "fixtures" / "nsight_systems"
FLAMEOX = FLAMEOX / "nsight-2025.5.2.sqlite"


def edited(src: Path, dest_dir: Path, *sql: str, name: str | None = None) -> Path:
    """A copy of ``src`` in ``dest_dir`` with the SQL statements applied."""
    dest = dest_dir / (name or src.name)
    shutil.copy(src, dest)
    con = sqlite3.connect(dest)
    for stmt in sql:
        con.execute(stmt)
    con.commit()
    con.close()
    return dest


def rows(path: Path, sql: str) -> list[tuple]:
    """Run a query on an export (the tests' independent oracle)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def count(path: Path, table: str, where: str = "") -> int:
    """Rows of a table (0 when the file has no such table)."""
    if not rows(path, f"SELECT count(*) FROM sqlite_master WHERE name = '{table}'")[0][0]:
        return 0
    return int(rows(path, f"SELECT count(*) FROM {table} {where}")[0][0])
