"""Small real traces to mutate: slices of the vendored Kineto, nsys SQLite and nsys CSV traces.

Every seed is cut from a real trace (tests/data/shared, sample_traces, tests/data/h200_nsys), small
enough that one parse takes milliseconds, and keeps the structure the reader relies on:

- Kineto: the top-level metadata, every ``M`` event, and the events of one time window (from the
  first ``ProfilerStep#`` when there is one) up to ``KINETO_EVENTS`` events, in file order.
- nsys SQLite: the file with every activity table cut to its first ``SQLITE_ROWS`` rows
  (``VACUUM``-ed); the StringIds, ENUM_* and TARGET_INFO_* tables are kept whole.
- nsys CSV: each trace report cut to its first ``CSV_ROWS`` rows; the ``*_sum`` reports whole.

Built seeds are cached under ``.cache/fuzz-seeds/`` (git-ignored).
"""

from __future__ import annotations

import bisect
import functools
import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / "tests" / "data" / "shared"
CACHE = REPO / ".cache" / "fuzz-seeds"
KINETO_EVENTS = 400
SQLITE_ROWS = 300
CSV_ROWS = 300

_HTA = SHARED / "external" / "HolisticTraceAnalysis" / "tests" / "data"
KINETO_SOURCES: dict[str, Path] = {
    "h200_copies_streams": SHARED / "traces" / "h200_copies_streams.kineto.json.gz",
    "h200_decode_eager": SHARED / "traces" / "h200_decode_eager.kineto.json.gz",
    "h200_decode_graph": SHARED / "traces" / "h200_decode_graph.kineto.json.gz",
    "tp2_decode_rank0": REPO / "sample_traces" / "tp2_decode" / "baseline" / "rank0.json.gz",
    "tp2_decode_rank1": REPO / "sample_traces" / "tp2_decode" / "baseline" / "rank1.json.gz",
    "kv_offload": REPO / "sample_traces" / "kv_offload" / "baseline.json.gz",
    "hta_event_sync": _HTA / "critical_path" / "cuda_event_sync" / "event_sync_trace.json.gz",
    "hta_inference_rank1": _HTA / "trace_file_list" / "inference_rank_1.json.gz",
    "hta_ns_resolution": _HTA
    / "ns_resolution_trace"
    / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta_nccl": _HTA / "nccl_parser_config" / "nccl_data.json.gz",
    "hta_old_rpc": _HTA / "negative_queue_length_values_check" / "rank0.json.gz",
    "hta_triton": _HTA / "triton_example" / "triton_example.json.gz",
    "tracelens_b200": SHARED / "external" / "TraceLens" / "tests" / "traces" / "b200"
    / "eager_trace.json.gz",
}  # fmt: skip

SQLITE_SOURCES: dict[str, Path] = {
    "h200_decode_eager": SHARED / "traces" / "h200_decode_eager.nsys.sqlite",
    "h200_decode_graph": SHARED / "traces" / "h200_decode_graph.nsys.sqlite",
    "h200_run_node": REPO / "tests" / "data" / "h200_nsys" / "run_node.sqlite",
    "nsys_ai_2gpu": SHARED / "external" / "nsys-ai" / "tests" / "fixtures" / "h100_2gpu_1s.sqlite",
    "flameox_2025_5": SHARED / "external" / "flameox" / "tests" / "fixtures" / "nsight_systems"
    / "nsight-2025.5.2.sqlite",
}  # fmt: skip

_ISPASS = SHARED / "external" / "hcc-ispass25" / "example_csv"
CSV_SOURCES: dict[str, tuple[Path, str]] = {
    "h200_run": (REPO / "tests" / "data" / "h200_nsys", "run"),
    "ispass_kmeans_cc_uvm": (_ISPASS, "kmeans-cc-uvm"),
    "ispass_bn_cc_nor": (_ISPASS, "BN-cc-nor"),
}
CSV_REPORTS = ("cuda_api_trace", "cuda_gpu_trace", "cuda_api_sum", "cuda_gpu_kern_sum")

#: Tables cut to their first rows in SQLite seeds (all event tables nsys writes that ccdiag reads
#: or counts).
_ACTIVITY_PREFIXES = ("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "CUDA_", "OSRT_API", "PROFILER_")


def _load_json(path: Path) -> Any:
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
        return json.loads(fh.read())


def _slice_events(events: list[Any], limit: int) -> list[Any]:
    """The ``M`` events plus the events of one time window, in file order."""
    meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    timed = [
        (float(e["ts"]), i)
        for i, e in enumerate(events)
        if isinstance(e, dict) and e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))
    ]
    timed.sort()
    steps = [
        float(e["ts"])
        for e in events
        if isinstance(e, dict)
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and isinstance(e.get("ts"), (int, float))
    ]
    t0 = min(steps) if steps else (timed[0][0] if timed else 0.0)
    start = bisect.bisect_left(timed, (t0, -1))
    keep = sorted(i for _, i in timed[start : start + limit])
    return meta[:60] + [events[i] for i in keep]


@functools.cache
def kineto_seed(name: str) -> dict[str, Any]:
    """A Kineto seed document (do not mutate the returned dict: copy it)."""
    cached = CACHE / f"kineto_{name}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    doc = _load_json(KINETO_SOURCES[name])
    if isinstance(doc, dict):
        doc["traceEvents"] = _slice_events(doc["traceEvents"], KINETO_EVENTS)
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(doc))
    return doc


def _cut_sqlite(src: Path, out: Path, rows: int) -> None:
    tmp = out.with_suffix(".tmp")
    shutil.copyfile(src, tmp)
    con = sqlite3.connect(tmp)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for t in tables:
        if t.startswith(_ACTIVITY_PREFIXES):
            con.execute(
                f'DELETE FROM "{t}" WHERE rowid NOT IN '
                f'(SELECT rowid FROM "{t}" ORDER BY rowid LIMIT {rows})'
            )
    con.commit()
    con.execute("VACUUM")
    con.close()
    tmp.replace(out)


def sqlite_seed(name: str) -> Path:
    """Path of a cut SQLite seed (copy it before mutating)."""
    out = CACHE / f"nsys_{name}.sqlite"
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        _cut_sqlite(SQLITE_SOURCES[name], out, SQLITE_ROWS)
    return out


@functools.cache
def csv_seed(name: str) -> dict[str, str]:
    """report name -> CSV text of a cut nsys stats report set."""
    folder, prefix = CSV_SOURCES[name]
    out: dict[str, str] = {}
    for report in CSV_REPORTS:
        for suffix in (".csv", ".csv.gz"):
            p = folder / f"{prefix}_{report}{suffix}"
            if p.exists():
                raw = gzip.decompress(p.read_bytes()) if suffix == ".csv.gz" else p.read_bytes()
                lines = raw.decode("utf-8", "replace").splitlines(keepends=True)
                if report.endswith("_trace"):
                    lines = lines[: CSV_ROWS + 1]
                out[report] = "".join(lines)
                break
    return out


def build_all() -> None:
    """Build (or check) every seed."""
    for name in KINETO_SOURCES:
        kineto_seed(name)
    for name in SQLITE_SOURCES:
        sqlite_seed(name)
    for name in CSV_SOURCES:
        csv_seed(name)
