"""Peak memory and wall time of ``ccdiag analyze`` on a pair of 5 GB (uncompressed) Kineto traces.

    python bench/bench_memory.py                    # 5 GiB per side, then delete the data
    python bench/bench_memory.py --size-mb 1024     # quicker
    python bench/bench_memory.py --keep             # keep bench/data/mem_*.json for a rerun

The pair is real: the emulated-CC eager decode of ``sample_traces/decode_eager`` (baseline and
treatment, PyTorch's own JSON formatting), each tiled to the target size by
``bench/make_large.py`` into ``bench/data/`` (git-ignored). Each command runs in its own
subprocess, so that its peak resident memory (``ru_maxrss`` from ``os.wait4``) is its own:

- ``ccdiag summary B --json``   one trace: parse + steps + summary;
- ``ccdiag analyze B T --json``  the pair: both parses, pairing, every rule, the report.

Free disk is checked first: two files of the target size plus 2 GiB of headroom. When there is
room for one only, the baseline is paired with itself (and the output says so); with room for
none, the size is lowered to what fits (and the output says so). The data is deleted at the end
unless ``--keep``. Results are printed as a Markdown table (paste into docs/limits.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
SRC = REPO / "sample_traces" / "decode_eager"
HEADROOM = 2 << 30


def _run(cmd: list[str]) -> tuple[float, float, int, str]:
    """Run a command; (wall s, peak RSS MiB of that process, exit status, stderr tail)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    return wall, usage.ru_maxrss / 1024, proc.returncode, err.strip()[-400:]


def _plan(size_mb: int) -> tuple[int, bool, str]:
    """(size to build, build a separate treatment?, note) from the free disk."""
    DATA.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(DATA).free
    one = size_mb << 20
    if free >= 2 * one + HEADROOM:
        return size_mb, True, f"free disk {free / 2**30:.0f} GiB: two files of {size_mb} MiB"
    if free >= one + HEADROOM:
        return (
            size_mb,
            False,
            (
                f"free disk {free / 2**30:.0f} GiB: room for one {size_mb} MiB file only; "
                "the baseline is paired with itself"
            ),
        )
    fit = max(64, int((free - HEADROOM) >> 20) // 2)
    return fit, True, f"free disk {free / 2**30:.1f} GiB: size lowered to {fit} MiB per side"


def _build(side: str, size_mb: int) -> Path:
    out = DATA / f"mem_{side}_{size_mb}mb.json"
    if not out.exists():
        src = SRC / f"{side}.json.gz"
        cmd = [sys.executable, str(HERE / "make_large.py"), "kineto", "--size-mb", str(size_mb)]
        subprocess.run([*cmd, "--src", str(src), "--out", str(out)], check=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mb", type=int, default=5120, help="uncompressed MiB per side")
    ap.add_argument("--keep", action="store_true", help="keep the built traces")
    args = ap.parse_args()
    size_mb, two, note = _plan(args.size_mb)
    print(f"plan: {note}", flush=True)
    made: list[Path] = []
    try:
        t0 = time.perf_counter()
        base = _build("baseline", size_mb)
        made.append(base)
        treat = _build("treatment", size_mb) if two else base
        made.append(treat)
        print(f"built in {time.perf_counter() - t0:.0f} s", flush=True)
        out_json = DATA / "mem_report.json"
        cli = [sys.executable, "-m", "ccdiag.cli"]
        rows = []
        for label, cmd in (
            ("summary (one trace)", [*cli, "summary", str(base), "--json", str(out_json)]),
            (
                "analyze (the pair)",
                [*cli, "analyze", str(base), str(treat), "-q", "--json", str(out_json)],
            ),
        ):
            wall, rss, rc, err = _run(cmd)
            if rc != 0:
                print(f"{label}: exit {rc}: {err}", file=sys.stderr)
                return 1
            doc = json.loads(out_json.read_text())
            rows.append((label, wall, rss, doc))
        _print(base, treat, rows, note)
        return 0
    finally:
        if not args.keep:
            for p in {*made, DATA / "mem_report.json"}:
                p.unlink(missing_ok=True)


def _print(base: Path, treat: Path, rows: list, note: str) -> None:
    gib = base.stat().st_size / 2**30
    same = base == treat
    summary_doc = rows[0][3]
    report = rows[1][3]
    n_b = report["baseline"]["metadata"].get("n_events", 0)
    n_t = report["treatment"]["metadata"].get("n_events", 0)
    print(f"\nmachine: {os.cpu_count()} CPUs, Python {platform.python_version()}; {note}")
    print(
        f"traces: {base.name} {gib:.2f} GiB"
        + (
            " (paired with itself)"
            if same
            else f" + {treat.name} {treat.stat().st_size / 2**30:.2f} GiB"
        )
        + f"; {n_b:,} + {n_t:,} events kept; skipped in the baseline: "
        f"{sum(summary_doc['skipped'].values()):,}\n"
    )
    print("| command | wall s | peak RSS MiB | peak / one file |")
    print("|---|---:|---:|---:|")
    for label, wall, rss, _ in rows:
        print(f"| {label} | {wall:.0f} | {rss:,.0f} | {rss / (gib * 1024):.2f} |")
    print(f"\nverdict: {report['verdict']}")


if __name__ == "__main__":
    sys.exit(main())
