"""The corpus of bad inputs: every file is built from a real trace, with what ccdiag must say.

    python tests/bad_inputs/build.py OUT_DIR     # write the corpus (for trying it by hand)
    python tests/bad_inputs/build.py --readme    # regenerate tests/bad_inputs/README.md

Each :class:`BadCase` names the files it needs (built by a function from the real traces in
tests/data and sample_traces), the ccdiag command to run on them, the exit status, and what
the output must say:

- exit 2: stderr is exactly one line, ``ccdiag: error: <file name>: <reason>``, and the reason
  matches ``expect`` (a regular expression); never a traceback;
- exit 0: ``expect`` must match the output (stdout, then stderr), and ``json`` checks (dotted
  paths into the ``--json -`` output) must hold.

``tests/test_bad_inputs.py`` runs every case through ``python -m ccdiag.cli``.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import shutil
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "tests" / "data" / "shared" / "traces"
SMALL = TRACES / "h200_copies_streams.kineto.json.gz"  # real H200 trace, 19 KB gzip, 250 KB
EAGER = TRACES / "h200_decode_eager.kineto.json.gz"
NSYS = TRACES / "h200_decode_graph.nsys.sqlite"
NSYS_EAGER = TRACES / "h200_decode_eager.nsys.sqlite"
CSV_RUN = REPO / "tests" / "data" / "h200_nsys"
SAMPLES = REPO / "sample_traces"
NS_TRACE = (
    REPO / "tests/data/shared/external/HolisticTraceAnalysis/tests/data/ns_resolution_trace"
    / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
)  # fmt: skip

Builder = Callable[[Path], None]


@dataclass(frozen=True)
class BadCase:
    """One bad input and what ccdiag must do with it."""

    name: str
    what: str  # one line for the README
    files: dict[str, Builder]  # file name -> builder(path)
    args: tuple[str, ...]  # ccdiag arguments; file names are resolved in the corpus folder
    exit: int
    expect: str  # regex: the error reason (exit 2) or a line of the output (exit 0)
    json: dict[str, Any] = field(default_factory=dict)  # dotted path -> expected value
    env: dict[str, str] = field(default_factory=dict)


# -- building blocks ---------------------------------------------------------------------------


def _raw(src: Path = SMALL) -> bytes:
    return gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()


def _doc(src: Path = SMALL) -> dict[str, Any]:
    return json.loads(_raw(src))


def _write_doc(doc: dict[str, Any], gz: bool = True) -> Builder:
    def build(path: Path) -> None:
        data = json.dumps(doc).encode()  # allow_nan: NaN literals, as Python's json writes them
        path.write_bytes(gzip.compress(data, mtime=0) if gz else data)

    return build


def _bytes(data: bytes | Callable[[], bytes]) -> Builder:
    def build(path: Path) -> None:
        path.write_bytes(data() if callable(data) else data)

    return build


def _cut(frac: float, gz: bool) -> Builder:
    def build(path: Path) -> None:
        data = SMALL.read_bytes() if gz else _raw()
        path.write_bytes(data[: int(len(data) * frac)])

    return build


def _copy(src: Path) -> Builder:
    def build(path: Path) -> None:
        shutil.copyfile(src, path)

    return build


def _sqlite(*sql: str, src: Path = NSYS) -> Builder:
    def build(path: Path) -> None:
        shutil.copyfile(src, path)
        con = sqlite3.connect(path)
        for q in sql:
            con.execute(q)
        con.commit()
        con.execute("VACUUM")
        con.close()

    return build


def _events(doc: dict[str, Any], cat: str | None = None, ph: str = "X") -> list[dict[str, Any]]:
    return [
        e for e in doc["traceEvents"] if e.get("ph") == ph and (cat is None or e.get("cat") == cat)
    ]


def _with_bad_events() -> dict[str, Any]:
    """The eager decode trace plus 7 negative durations, 5 NaN timestamps, 3 unknown categories
    (copies of real cpu_ops, so the pair stays the same workload)."""
    doc = _doc(EAGER)
    ops = _events(doc, "cpu_op")
    bad = []
    for i in range(7):
        bad.append({**ops[i], "dur": -1.0 - i})
    for i in range(5):
        bad.append({**ops[10 + i], "ts": math.nan})
    for i in range(3):
        bad.append({**ops[20 + i], "cat": "ccdiag_fuzz_unknown"})
    doc["traceEvents"] = doc["traceEvents"] + bad
    return doc


#: What tests/test_bad_inputs.py checks the nothing-lost case against.
ADDED_SKIPS = {"negative dur": 7, "non-finite time": 5, "category:ccdiag_fuzz_unknown": 3}


def _all_bad() -> dict[str, Any]:
    doc = _doc()
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            e["dur"] = -1.0
    return doc


def _only_metadata() -> dict[str, Any]:
    doc = _doc()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    return doc


def _duplicate_correlation() -> dict[str, Any]:
    doc = _doc(EAGER)
    runtime = _events(doc, "cuda_runtime")
    for a, b in zip(runtime[0:40:2], runtime[1:40:2]):
        b.setdefault("args", {})["correlation"] = a.get("args", {}).get("correlation")
    return doc


def _shuffled() -> dict[str, Any]:
    doc = _doc()
    random.Random(7).shuffle(doc["traceEvents"])
    return doc


def _integer_us() -> dict[str, Any]:
    """The eager decode trace with times rounded to whole µs (older Kineto writes integers)."""
    doc = _doc(EAGER)
    for e in doc["traceEvents"]:
        for k in ("ts", "dur"):
            if isinstance(e.get(k), float):
                e[k] = int(round(e[k]))
    doc["displayTimeUnit"] = "ms"
    return doc


def _other_gpu(src: Path) -> dict[str, Any]:
    doc = _doc(src)
    for p in doc.get("deviceProperties") or []:
        p["name"] = "NVIDIA B200"
    return doc


def _bomb(report: str = "json") -> bytes:
    """100 MB of text that gzip squeezes ~300x (no real trace comes close: they inflate 12-16x)."""
    if report == "csv":
        head = b"Start (ns),Duration (ns),CorrID,Pid,Tid,Name\n"
        row = b"1,1,1,1,1,cudaLaunchKernel\n"
    else:
        head = b'{"traceEvents": ['
        row = b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, '
    body = head + row * (100_000_000 // len(row))
    return gzip.compress(body + (b"" if report == "csv" else b"{}]}"), compresslevel=9, mtime=0)


def _csv_set(prefix: str, edit: Callable[[str, str], str] | None = None) -> dict[str, Builder]:
    out: dict[str, Builder] = {}
    for report in ("cuda_api_trace", "cuda_gpu_trace"):

        def build(path: Path, report: str = report) -> None:
            text = gzip.decompress((CSV_RUN / f"run_{report}.csv.gz").read_bytes()).decode()
            path.write_text(edit(report, text) if edit else text)

        out[f"{prefix}_{report}.csv"] = build
    return out


def _cut_csv_row(report: str, text: str) -> str:
    if report != "cuda_gpu_trace":
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[:200]) + lines[200][: len(lines[200]) // 2]  # ends mid-row


def _garbage_cells(report: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines), 10):
        cells = lines[i].split(",")
        cells[0], cells[1] = "garbage", "-12"
        lines[i] = ",".join(cells)
    return "".join(lines)


# -- the cases ---------------------------------------------------------------------------------

S = ("summary",)
SJ = ("summary", "--json", "-")
CASES: list[BadCase] = [
    *[
        BadCase(
            f"truncated_gzip_{int(f * 100)}",
            f"a real .json.gz cut at {f:.0%} of its bytes",
            {"t.json.gz": _cut(f, gz=True)},
            (*S, "t.json.gz"),
            2,
            r"truncated gzip stream",
        )
        for f in (0.1, 0.5, 0.9, 0.999)
    ],
    BadCase(
        "truncated_gzip_header",
        "a .json.gz cut inside its 10-byte gzip header",
        {"t.json.gz": _cut(0.0003, gz=True)},
        (*S, "t.json.gz"),
        2,
        r"corrupt gzip stream|truncated gzip",
    ),
    *[
        BadCase(
            f"truncated_json_{int(f * 1000)}",
            f"a real Kineto .json cut at {f:.1%} of its bytes",
            {"t.json": _cut(f, gz=False)},
            (*S, "t.json"),
            2,
            r"truncated JSON|malformed",
        )
        for f in (0.001, 0.01, 0.5, 0.999)
    ],
    BadCase(
        "not_gzip_named_gz",
        "text that is neither gzip nor JSON, named .json.gz",
        {"t.json.gz": _bytes(b"this is not a trace\n")},
        (*S, "t.json.gz"),
        2,
        r"named \.gz but not gzip-compressed",
    ),
    BadCase(
        "plain_json_named_gz",
        "an uncompressed Kineto trace named .json.gz: the content decides, read as Kineto",
        {"t.json.gz": _bytes(lambda: _raw())},
        (*SJ, "t.json.gz"),
        0,
        r'"format": "kineto"',
        {"format": "kineto", "n_events": 814},
    ),
    BadCase(
        "kineto_named_sqlite",
        "a Kineto trace named .sqlite: read as Kineto, with a warning about the name",
        {"t.sqlite": _copy(SMALL)},
        (*SJ, "t.sqlite"),
        0,
        r"named \.sqlite but holds a Kineto JSON trace",
        {"format": "kineto", "n_events": 814},
    ),
    BadCase(
        "sqlite_named_json",
        "an nsys SQLite export named .json.gz: read as nsys, with a warning about the name",
        {"t.json.gz": _copy(NSYS)},
        (*SJ, "t.json.gz"),
        0,
        r"named \.json\.gz but holds an Nsight Systems SQLite export",
        {"format": "nsys_sqlite"},
    ),
    BadCase(
        "empty_file", "a 0-byte .json", {"t.json": _bytes(b"")}, (*S, "t.json"), 2, "empty file"
    ),
    BadCase(
        "empty_gzip",
        "a gzip of nothing",
        {"t.json.gz": _bytes(gzip.compress(b"", mtime=0))},
        (*S, "t.json.gz"),
        2,
        r"gzip file does not contain a JSON trace|empty",
    ),
    BadCase(
        "no_events",
        'a Kineto document with "traceEvents": []',
        {"t.json": _write_doc({"schemaVersion": 1, "traceEvents": []}, gz=False)},
        (*S, "t.json"),
        2,
        r"traceEvents is empty",
    ),
    BadCase(
        "only_metadata_events",
        "a real trace keeping only its metadata ('M') events: nothing to analyze",
        {"t.json.gz": _write_doc(_only_metadata())},
        (*S, "t.json.gz"),
        2,
        r"no events to analyze: all [\d,]+ events were skipped \(metadata: [\d,]+\)",
    ),
    BadCase(
        "all_durations_negative",
        "a real trace whose every complete event has a negative duration",
        {"t.json.gz": _write_doc(_all_bad())},
        (*S, "t.json.gz"),
        2,
        r"no events to analyze: all [\d,]+ events were skipped \(negative dur: 814, ",
    ),
    BadCase(
        "negative_and_nan_times",
        "the eager decode trace plus 7 negative durations, 5 NaN timestamps and 3 unknown "
        "categories: read, and every one counted",
        {"t.json.gz": _write_doc(_with_bad_events())},
        (*SJ, "t.json.gz"),
        0,
        r'"negative dur": 7',
        {f"skipped.{k}": v for k, v in ADDED_SKIPS.items()},
    ),
    BadCase(
        "duplicate_correlation_ids",
        "20 CUDA runtime calls given the correlation id of the call before: read, with a warning",
        {"t.json.gz": _write_doc(_duplicate_correlation())},
        (*SJ, "t.json.gz"),
        0,
        r"20 CUDA API calls share their correlation id with another call",
    ),
    BadCase(
        "unsorted_timestamps",
        "a real trace with its events shuffled: read the same as the original",
        {"t.json.gz": _write_doc(_shuffled())},
        (*SJ, "t.json.gz"),
        0,
        r'"n_events": 814',
        {"n_events": 814, "kinds.kernel": 16, "kinds.memcpy": 136, "skipped.flow:ac2g": 526},
    ),
    BadCase(
        "float_ns_trace",
        "HTA's ns-resolution trace (fractional µs, displayTimeUnit ns): ns kept exactly",
        {"t.json.gz": _copy(NS_TRACE)},
        (*SJ, "t.json.gz"),
        0,
        r'"format": "kineto"',
    ),
    BadCase(
        "mixed_time_units_pair",
        "a float-µs trace (ns fractions) vs the same run in whole µs: analyzed, no unit mix-up",
        {"base.json.gz": _copy(EAGER), "treat.json.gz": _write_doc(_integer_us())},
        ("analyze", "base.json.gz", "treat.json.gz", "--json", "-"),
        0,
        r'"schema_version"',
        {"step_ns.ratio": 1.0},
    ),
    BadCase(
        "sqlite_without_kernel_table",
        "an nsys export without CUPTI_ACTIVITY_KIND_KERNEL: read (copies, syncs), with a warning",
        {"t.sqlite": _sqlite("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", src=NSYS_EAGER)},
        (*SJ, "t.sqlite"),
        0,
        r"no GPU kernels recorded \(no CUPTI_ACTIVITY_KIND_KERNEL table\)",
        {"format": "nsys_sqlite", "kinds.kernel": None},
    ),
    BadCase(
        "sqlite_without_runtime_table",
        "an nsys export without CUPTI_ACTIVITY_KIND_RUNTIME (no CUDA API calls)",
        {"t.sqlite": _sqlite("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")},
        (*S, "t.sqlite"),
        2,
        r"no CUDA API calls recorded \(no CUPTI_ACTIVITY_KIND_RUNTIME table\)",
    ),
    BadCase(
        "sqlite_not_nsys",
        "an SQLite database that is not an Nsight Systems export",
        {"t.sqlite": _sqlite(*[f"DROP TABLE {t}" for t in ("StringIds",)])},
        (*S, "t.sqlite"),
        2,
        r"not an Nsight Systems export \(no StringIds table\)",
    ),
    BadCase(
        "sqlite_truncated",
        "an nsys export cut in half",
        {"t.sqlite": _bytes(lambda: NSYS.read_bytes()[: NSYS.stat().st_size // 2])},
        (*S, "t.sqlite"),
        2,
        r"corrupt or truncated SQLite file",
    ),
    BadCase(
        "gzip_bomb_json",
        "100 MB of Kineto JSON squeezed ~300x by gzip",
        {"bomb.json.gz": _bytes(lambda: _bomb("json"))},
        (*S, "bomb.json.gz"),
        2,
        r"refused: gzip data inflates to more than .* \(decompression limit: 100x the "
        r"compressed size, at least 64\.0 MiB, at most 64\.0 GiB\); if the trace is genuine, "
        r"raise CCDIAG_GZIP_MAX_RATIO or CCDIAG_GZIP_MAX_GB",
    ),
    BadCase(
        "gzip_bomb_csv",
        "an nsys stats cuda_api_trace.csv.gz inflating to 100 MB (~300x)",
        {"bomb_cuda_api_trace.csv.gz": _bytes(lambda: _bomb("csv"))},
        (*S, "bomb_cuda_api_trace.csv.gz"),
        2,
        # the rows-per-byte cap (its rows are 27 bytes) now refuses it before the inflation limit
        r"refused: (gzip data inflates to more than|[\d,]+ rows in .* not a report)",
    ),
    BadCase(
        "gzip_bomb_allowed",
        "the same 100 MB JSON bomb with CCDIAG_GZIP_MAX_RATIO=1000: read (the limit is yours)",
        {"bomb.json.gz": _bytes(lambda: _bomb("json"))},
        (*SJ, "bomb.json.gz"),
        0,
        r'"format": "kineto"',
        env={"CCDIAG_GZIP_MAX_RATIO": "1000"},
    ),
    BadCase(
        "gzip_limit_lowered",
        "a real .json.gz (250 KB inflated) with CCDIAG_GZIP_MAX_GB=0.0001 (105 KB)",
        {"t.json.gz": _copy(SMALL)},
        (*S, "t.json.gz"),
        2,
        r"refused: gzip data inflates to more than 104\.9 KiB from 19\.2 KiB",
        env={"CCDIAG_GZIP_MAX_GB": "0.0001"},
    ),
    BadCase(
        "gzip_limit_not_a_number",
        "CCDIAG_GZIP_MAX_RATIO set to a word",
        {"t.json.gz": _copy(SMALL)},
        (*S, "t.json.gz"),
        2,
        r"CCDIAG_GZIP_MAX_RATIO and CCDIAG_GZIP_MAX_GB must be numbers",
        env={"CCDIAG_GZIP_MAX_RATIO": "lots"},
    ),
    BadCase(
        "csv_row_cut",
        "an nsys stats GPU trace whose last row is cut in the middle",
        _csv_set("cut", _cut_csv_row),
        (*SJ, "cut_cuda_api_trace.csv"),
        0,
        r"GPU rows of another kind",
    ),
    BadCase(
        "csv_garbage_cells",
        "an nsys stats set with garbage in the start and duration cells of every 10th row",
        _csv_set("junk", _garbage_cells),
        (*SJ, "junk_cuda_api_trace.csv"),
        0,
        r"rows without a start or a valid duration",
    ),
    BadCase(
        "csv_missing_columns",
        "an nsys stats API trace without its Duration column",
        _csv_set("nodur", lambda r, t: t.replace("Duration (ns)", "Length", 1)),
        (*S, "nodur_cuda_api_trace.csv"),
        2,
        r"report has no column 'Duration \(ns\)'",
    ),
    BadCase(
        "mismatched_pair",
        "eager decode vs CUDA-graph decode (different workloads) given to analyze",
        {
            "eager.json.gz": _copy(SAMPLES / "decode_eager" / "baseline.json.gz"),
            "graph.json.gz": _copy(SAMPLES / "decode_graph" / "treatment.json.gz"),
        },
        ("analyze", "eager.json.gz", "graph.json.gz"),
        2,
        r"not the same workload",
    ),
    BadCase(
        "different_gpu_models",
        "a pair whose treatment was recorded on another GPU model: analyzed, with a warning",
        {
            "base.json.gz": _copy(SAMPLES / "decode_eager" / "baseline.json.gz"),
            "b200.json.gz": _write_doc(_other_gpu(SAMPLES / "decode_eager" / "treatment.json.gz")),
        },
        ("analyze", "base.json.gz", "b200.json.gz"),
        0,
        r"different GPU models \(NVIDIA H200 vs NVIDIA B200\)",
    ),
    BadCase(
        "no_such_file",
        "a path that does not exist",
        {},
        (*S, "missing.json"),
        2,
        r"no such file or folder",
    ),
    BadCase(
        "binary_junk",
        "random bytes named .json",
        {"t.json": _bytes(bytes(random.Random(1).randrange(256) for _ in range(4096)))},
        (*S, "t.json"),
        2,
        r"unrecognized trace format",
    ),
    BadCase(
        "json_nested_deeply",
        "a Kineto event whose args nest 100,000 arrays deep",
        {
            "t.json": _bytes(
                b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, '
                b'"args": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}"
            )
        },
        (*S, "t.json"),
        2,
        r"JSON nested too deeply to be a trace",
    ),
    BadCase(
        "utf8_bom",
        "a real Kineto trace starting with a UTF-8 byte-order mark: read",
        {"t.json": _bytes(lambda: b"\xef\xbb\xbf" + _raw())},
        (*SJ, "t.json"),
        0,
        r'"format": "kineto"',
        {"n_events": 814},
    ),
    BadCase(
        "not_a_trace_json",
        "a JSON document that is not a trace",
        {"t.json": _bytes(b'{"gpu": "H200", "results": [1, 2, 3]}')},
        (*S, "t.json"),
        2,
        r"not a trace",
    ),
]


def build(case: BadCase, folder: Path) -> Path:
    """Write the case's files into ``folder`` (created); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, builder in case.files.items():
        builder(folder / name)
    return folder


def readme() -> str:
    """tests/bad_inputs/README.md, generated from CASES."""
    lines = [
        "# Bad inputs",
        "",
        "Generated by `python tests/bad_inputs/build.py --readme` from `build.py` (do not edit).",
        "Every file is built from a real trace; `tests/test_bad_inputs.py` runs each case through",
        "`python -m ccdiag.cli` and checks the exit status and the message: with exit 2, stderr",
        "is exactly one line `ccdiag: error: <file>: <reason>` (never a traceback). Write the",
        "corpus to a folder with `python tests/bad_inputs/build.py OUT_DIR`.",
        "",
        "| case | input | command | exit | ccdiag says (regex) |",
        "|---|---|---|---:|---|",
    ]
    for c in CASES:
        expect = c.expect.replace("|", "\\|")
        env = " ".join(f"{k}={v}" for k, v in c.env.items())
        cmd = (env + " " if env else "") + "ccdiag " + " ".join(c.args)
        lines.append(f"| `{c.name}` | {c.what} | `{cmd}` | {c.exit} | `{expect}` |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if sys.argv[1:] == ["--readme"]:
        (Path(__file__).with_name("README.md")).write_text(readme())
        return 0
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = Path(sys.argv[1])
    for case in CASES:
        build(case, out / case.name)
        print(f"{case.name}: ccdiag {' '.join(case.args)}  -> exit {case.exit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
