"""Byte-level fuzzing of the readers with atheris (libFuzzer), coverage-guided on ccdiag's code.

    pip install atheris
    python -m fuzz.atheris_target -runs=50000 -max_len=400000      # the documented run
    python -m fuzz.atheris_target -max_total_time=60               # a minute

The first byte of an input picks how the rest is written to disk, so one corpus covers every
reader: 0 ``trace.json``, 1 ``trace.json.gz`` (gzip of the rest), 2 ``trace.sqlite``,
3 ``run_cuda_api_trace.csv``, 4 ``run_cuda_gpu_trace.csv``. The seed corpus (written to
``fuzz/corpus/atheris/``, git-ignored) is the real seeds of :mod:`fuzz.seeds`, each under the
byte(s) that fit it. libFuzzer mutates bytes (flips, inserts, cross-overs) guided by which
lines of ccdiag ran.

Each input goes through :func:`fuzz.oracle.check`. Exceptions other than InputError are
recorded like :mod:`fuzz.run` does (``fuzz/crashes/<signature>/``) and the run goes on
(``--stop-on-crash`` makes the first one fatal, for libFuzzer's own crash files). The outcome
counts are written to ``fuzz/runs/atheris-<time>-<pid>.json`` every 50 inputs (libFuzzer ends
the process without Python's exit handlers, so the last <50 inputs may be missing from the file;
libFuzzer's own "Done N runs" line has the exact count).
"""

from __future__ import annotations

import atexit
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["ccdiag"]):
    from ccdiag.parsers import _chunked_json, kineto, nsys_csv, nsys_sqlite  # noqa: F401

    from ccdiag import api  # noqa: F401 - instrumented before use

from fuzz import oracle, seeds
from fuzz.mutations import Case
from fuzz.run import CRASHES, RUNS, _signature

NAMES = {
    0: "trace.json",
    1: "trace.json.gz",
    2: "trace.sqlite",
    3: "run_cuda_api_trace.csv",
    4: "run_cuda_gpu_trace.csv",
}
CORPUS = Path(__file__).resolve().parent / "corpus" / "atheris"
STATS: Counter[str] = Counter()
CRASH_SIGS: Counter[str] = Counter()
STOP_ON_CRASH = "--stop-on-crash" in sys.argv
T0 = time.time()
NAME = time.strftime("atheris-%Y%m%d-%H%M%S") + f"-{os.getpid()}"
WORK = Path(tempfile.mkdtemp(prefix="ccdiag-atheris-"))


def write_corpus() -> Path:
    """The seed corpus: every real seed under the first byte(s) that fit it."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    for name in seeds.KINETO_SOURCES:
        data = json.dumps(seeds.kineto_seed(name)).encode()
        (CORPUS / f"kineto_{name}").write_bytes(b"\x00" + data)
        (CORPUS / f"kineto_{name}_gz").write_bytes(b"\x01" + data)
    for name in seeds.SQLITE_SOURCES:
        (CORPUS / f"nsys_{name}").write_bytes(b"\x02" + seeds.sqlite_seed(name).read_bytes())
    for name in seeds.CSV_SOURCES:
        reports = seeds.csv_seed(name)
        for byte, report in ((3, "cuda_api_trace"), (4, "cuda_gpu_trace")):
            if report in reports:
                text = reports[report].encode()
                (CORPUS / f"csv_{name}_{report}").write_bytes(bytes([byte]) + text)
    return CORPUS


def _record(sig: str, exc: BaseException, folder: Path, case: Case) -> None:
    import hashlib
    import traceback

    dest = CRASHES / hashlib.sha1(sig.encode()).hexdigest()[:10]
    if dest.exists():
        return
    dest.mkdir(parents=True)
    (dest / "signature.txt").write_text(sig + "\n")
    (dest / "plan.txt").write_text("atheris byte-level input\n")
    doc = {"path": case.path.name, "total_events": None, "fmt": "atheris"}
    (dest / "case.json").write_text(json.dumps(doc) + "\n")
    (dest / "traceback.txt").write_text(
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
    for f in folder.iterdir():
        shutil.copyfile(f, dest / f.name)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    kind = data[0] % len(NAMES)
    body = data[1:]
    folder = WORK / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / NAMES[kind]
    path.write_bytes(gzip.compress(body, compresslevel=1, mtime=0) if kind == 1 else body)
    case = Case(path)
    if sum(STATS.values()) % 50 == 0:
        _report()  # libFuzzer ends the process without Python's exit handlers
    try:
        STATS[oracle.check(case)] += 1
    except Exception as exc:  # noqa: BLE001 - every other exception is a finding
        STATS["crash"] += 1
        sig = _signature(exc)
        CRASH_SIGS[sig] += 1
        _record(sig, exc, folder, case)
        if STOP_ON_CRASH:
            raise


def _report() -> None:
    summary = {
        "name": NAME,
        "command": " ".join(["python -m fuzz.atheris_target", *sys.argv[1:]]),
        "cases": sum(STATS.values()),
        "wall_s": round(time.time() - T0, 1),
        "outcomes": dict(STATS),
        "crashes": dict(CRASH_SIGS),
    }
    RUNS.mkdir(exist_ok=True)
    (RUNS / f"{summary['name']}.json").write_text(json.dumps(summary, indent=1) + "\n")


def main() -> None:
    seeds.build_all()
    corpus = write_corpus()
    argv = [a for a in sys.argv if a != "--stop-on-crash"]
    if not any(not a.startswith("-") for a in argv[1:]):
        argv.append(str(corpus))
    atexit.register(_report)
    atexit.register(shutil.rmtree, WORK, True)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
