"""Golden summaries of the real traces: where they live and how they are made.

Used by the tests (``import goldens``) and by ``scripts/update_goldens.py``, which rewrites
``tests/golden/*.summary.json`` for review. A golden is the ``ccdiag summary --json`` dict of one
trace; tests fail on any difference.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ccdiag import api

TESTS = Path(__file__).resolve().parent
SHARED = TESTS / "data" / "shared"
GOLDEN = TESTS / "golden"


def shared_path(*parts: str) -> Path:
    """A path under the vendored shared data (fails loudly when missing)."""
    p = SHARED.joinpath(*parts)
    assert p.exists(), f"missing test data {p}"
    return p


def _is_kineto(path: Path) -> bool:
    """A Chrome-trace JSON: it has a "traceEvents" key (searched in the first 8 MB)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:  # type: ignore[operator]
        return b'"traceEvents"' in fh.read(8 << 20)


def kineto_traces() -> list[Path]:
    """Every Kineto trace under tests/data/shared (traces/ and external/), sorted."""
    found = [
        p
        for p in sorted(SHARED.rglob("*"))
        if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))
    ]
    return [p for p in found if _is_kineto(p)]


def nsys_traces() -> list[Path]:
    """Every Nsight Systems SQLite export and every nsys stats CSV set (by prefix), sorted."""
    from ccdiag.parsers import nsys_csv

    exports = [p for p in sorted(SHARED.rglob("*.sqlite")) if p.is_file()]
    prefixes = set()
    for folder in sorted({p.parent for p in SHARED.rglob("*_cuda_api_trace.csv*")}):
        prefixes |= {
            folder / pre for (pre, kind) in nsys_csv.report_files(folder) if kind.endswith("trace")
        }
    return exports + sorted(prefixes)


def all_traces() -> list[Path]:
    """Every real trace with a golden summary: Kineto, nsys SQLite, nsys stats CSV sets."""
    return kineto_traces() + nsys_traces()


def trace_id(path: Path) -> str:
    """A short readable id: the path under tests/data/shared."""
    return path.relative_to(SHARED).as_posix()


def golden_path(path: Path) -> Path:
    """tests/golden/<path under shared, '/' -> '__'>.summary.json"""
    return GOLDEN / (trace_id(path).replace("/", "__") + ".summary.json")


def summary_of(path: Path) -> dict[str, Any]:
    """The summary dict, normalized through JSON (what ``ccdiag summary --json`` writes)."""
    return json.loads(json.dumps(api.summarize(api.load_trace(path))))


def write_golden(path: Path) -> Path:
    out = golden_path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary_of(path), indent=2) + "\n")
    return out
