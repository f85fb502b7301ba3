"""Hostile nsys SQLite exports through the CLI: sparse rowids (fuzz-repro #4, #4b) and
duplicated rows (#12). Each runs ``ccdiag summary`` as a subprocess and checks the exit status,
the one-line promise, the time and the peak memory of the process."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from ccdiag.parsers import _sqlite_fetch, nsys_sqlite
from nsys_fixtures import EAGER, count, edited

REPO = Path(__file__).resolve().parents[2]
#: The independent fuzz run's reproducers, vendored (a clean clone has no ../shared beside it).
FUZZ_REPRO = REPO / "tests" / "bad_inputs" / "fuzz_repro"  # vendored copy of ../shared/fuzz-repro
SPARSE_REPROS = ["sqlite_sparse_rowid.sqlite", "sqlite_sparse_rowid_2e40.sqlite"]
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
#: The CLI in a child that writes its own peak RSS (KiB) to the file named first: VmHWM of its
#: own address space (ru_maxrss would carry the test process's high-water mark over the exec).
_CLI = (
    "import atexit, re, sys; out = sys.argv.pop(1); "
    "atexit.register(lambda: open(out, 'w').write("
    "re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))); "
    "from ccdiag.cli import main; main()"
)


def _cli(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``ccdiag ARGS``; return the result, wall seconds and peak RSS in MB."""
    peak = tmp_path / "peak.txt"
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", _CLI, str(peak), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    wall = time.perf_counter() - t0
    return res, wall, int(peak.read_text()) / 1024 if peak.exists() else 0.0


def _check_one_line_or_ok(res: subprocess.CompletedProcess) -> None:
    assert res.returncode in (0, 2), res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    if res.returncode == 2:
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("ccdiag: error: ")


def _sparse(tmp_path: Path, high: int) -> Path:
    """The real eager export with its kernels moved to rowids 1 and ``high``."""
    return edited(
        EAGER,
        tmp_path,
        f"DELETE FROM {KERNEL} WHERE rowid > 2",
        f"UPDATE {KERNEL} SET rowid = {high} WHERE rowid = 2",
        name=f"sparse_{high}.sqlite",
    )


@pytest.mark.parametrize("name", SPARSE_REPROS)
def test_fuzz_repro_sparse_rowids_are_read_at_once_in_little_memory(
    tmp_path: Path, name: str
) -> None:
    # arrange: 12 KB files whose rows sit at rowid 1 and 2**63 - 1 (2**40): the old part split
    # made one part per million rowids of the range (> 7 GB, killed; no answer in 60 s)
    path = FUZZ_REPRO / name
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is beside the clone in CI)")
    # act
    res, wall, peak_mb = _cli(tmp_path, "summary", str(path), "--json", str(tmp_path / "s.json"))
    # assert
    _check_one_line_or_ok(res)
    assert wall < 30
    assert peak_mb < 600


@pytest.mark.parametrize("high", [2**63 - 1, 2**40])
def test_a_table_with_sparse_rowids_is_one_small_part(tmp_path: Path, high: int) -> None:
    # arrange: the same damage, built here on a real export
    path = _sparse(tmp_path, high)
    con = sqlite3.connect(path)
    # act
    t0 = time.perf_counter()
    parts, _ = _sqlite_fetch._split(con, KERNEL, frozenset({"start"}))
    took = time.perf_counter() - t0
    res, wall, peak_mb = _cli(tmp_path, "summary", str(path), "--json", str(tmp_path / "s.json"))
    con.close()
    # assert
    assert parts == [(None, None)] and took < 1
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "s.json").read_text())["kinds"]["kernel"] == 2
    assert wall < 30 and peak_mb < 600


def test_parts_are_cut_by_row_count_whatever_the_rowids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange: rowids spread over the whole int64 range, 10 rows per part
    path = edited(
        EAGER,
        tmp_path,
        f"DELETE FROM {KERNEL} WHERE rowid > 95",
        f"UPDATE {KERNEL} SET rowid = rowid * 97000000000000000 WHERE rowid > 1",
    )
    monkeypatch.setattr(_sqlite_fetch, "PART_ROWS", 10)
    monkeypatch.setattr(_sqlite_fetch, "PARALLEL_MIN_ROWS", 0)
    con = sqlite3.connect(path)
    # act
    parts, _ = _sqlite_fetch._split(con, KERNEL, frozenset({"start"}))
    sizes = [
        con.execute(
            f"SELECT count(*) FROM {KERNEL} WHERE rowid > ? AND rowid <= ?",
            (-(2**63) if lo is None else lo, 2**63 - 1 if hi is None else hi),
        ).fetchone()[0]
        for lo, hi in parts
    ]
    con.close()
    events = nsys_sqlite.read(path, workers=2).events
    # assert
    assert sizes == [10] * 9 + [5]
    assert events.filter(pl.col("kind") == "kernel").height == 95


def test_duplicated_rows_are_dropped_once_each_and_counted(tmp_path: Path) -> None:
    # arrange: fuzz-repro #12, every kernel row of a real export present 10 times
    n = count(EAGER, KERNEL)
    cols = ", ".join(
        f'"{r[1]}"' for r in sqlite3.connect(EAGER).execute(f"PRAGMA table_info({KERNEL})")
    )
    copy = f"INSERT INTO {KERNEL} ({cols}) SELECT {cols} FROM {KERNEL} WHERE rowid <= {n}"
    path = edited(EAGER, tmp_path, *[copy] * 9, name="dup10.sqlite")
    clean_json, dup_json = tmp_path / "clean.json", tmp_path / "dup.json"
    # act
    clean, _, clean_peak = _cli(tmp_path, "summary", str(EAGER), "--json", str(clean_json))
    res, wall, peak_mb = _cli(tmp_path, "summary", str(path), "--json", str(dup_json))
    # assert
    _check_one_line_or_ok(res)
    assert clean.returncode == res.returncode == 0
    dup, ref = json.loads(dup_json.read_text()), json.loads(clean_json.read_text())
    reason = f"{KERNEL}: duplicate row (identical to an earlier row in every column)"
    assert dup["skipped"][reason] == 9 * n
    assert dup["kinds"] == ref["kinds"]
    assert wall < 30
    assert peak_mb < clean_peak + 100


def test_rows_that_differ_in_one_column_are_not_duplicates(tmp_path: Path) -> None:
    # arrange: each kernel copied once with another stream: not a duplicate
    n = count(EAGER, KERNEL)
    cols = [r[1] for r in sqlite3.connect(EAGER).execute(f"PRAGMA table_info({KERNEL})")]
    src = ", ".join('"streamId" + 1000' if c == "streamId" else f'"{c}"' for c in cols)
    dst = ", ".join(f'"{c}"' for c in cols)
    path = edited(
        EAGER, tmp_path, f"INSERT INTO {KERNEL} ({dst}) SELECT {src} FROM {KERNEL}", name="d.sqlite"
    )
    # act
    trace = nsys_sqlite.read(path)
    # assert
    assert trace.events.filter(pl.col("kind") == "kernel").height == 2 * n
    assert not any("duplicate" in reason for reason in trace.meta.skipped)
