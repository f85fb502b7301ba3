"""Analysis cost vs loading cost: ``ccdiag analyze`` on a pair of ~1 GB Kineto traces.

    python bench/bench_analyze.py                  # 1 GB pair (built with bench/make_large.py)
    python bench/bench_analyze.py --size-mb 200    # quicker
    python bench/bench_analyze.py --format nsys --size-mb 200   # an Nsight Systems SQLite pair

Target (issue #15): analyzing the pair (pairing + all rules + the partition + the report) costs at
most 1.5x the time it takes to load the two traces (``ccdiag.api.load_trace``: parse + steps).
Wall and CPU seconds (all threads: ``time.process_time``) are both printed: on a shared machine
the CPU ratio is the steadier one.

The pair: the real H200 eager-decode trace (CC off) and a synthetic CC treatment of it (a 12.25 µs
toll per launch, blocking copies padded to 35 µs + bytes / 9.6 GB/s, replayed by ccdiag.replay),
both written by ``ccdiag.synthetic.write_kineto`` and tiled to the target size by
``bench/make_large.py``. The writer keeps only the args ccdiag reads, so a tile has ~2.3x more
events per byte than a raw PyTorch trace: per byte, the analysis side is heavier than in
practice. Runs in one process; peak RSS (ru_maxrss) is reported after each phase. Also times
``orjson.loads`` of one file as the raw-decode anchor (``--anchor``; needs ~10 GB of RAM at 1 GB).

``--format nsys``: the shipped Nsight Systems pair ``sample_traces/decode_eager_nsys/`` (the real
H200 eager decode under the LD_PRELOAD emulator, CC off / on) with its activity rows duplicated to
the target size by ``bench/make_large.py nsys``.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ensure(size_mb: int) -> tuple[Path, Path]:
    """Build the source pair and tile it to ``size_mb`` when missing."""
    from ccdiag import api
    from ccdiag.replay import Injection, synthesize
    from ccdiag.synthetic import write_kineto

    DATA.mkdir(parents=True, exist_ok=True)
    src = {"baseline": DATA / "src_baseline.json", "treatment": DATA / "src_treatment.json"}
    if not all(p.exists() for p in src.values()):
        base = api.load_trace(
            HERE.parent / "tests/data/shared/traces/h200_decode_eager.kineto.json.gz"
        )
        inj = Injection(
            launch_toll_ns=12_250, copies_blocking=True, copy_toll_ns=35_000, copy_gbps=9.6
        )
        write_kineto(synthesize(base, Injection()), src["baseline"])
        write_kineto(synthesize(base, inj), src["treatment"])
    out = {}
    for side, s in src.items():
        out[side] = DATA / f"pair_{side}_{size_mb}mb.json"
        if not out[side].exists():
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "make_large.py"),
                    "kineto",
                    "--size-mb",
                    str(size_mb),
                    "--src",
                    str(s),
                    "--out",
                    str(out[side]),
                ],
                check=True,
            )
    return out["baseline"], out["treatment"]


def _ensure_nsys(size_mb: int) -> tuple[Path, Path]:
    """Tile the shipped nsys pair to ``size_mb`` each when missing."""
    src = HERE.parent / "sample_traces/decode_eager_nsys"
    DATA.mkdir(parents=True, exist_ok=True)
    out = {}
    for side in ("baseline", "treatment"):
        out[side] = DATA / f"pair_{side}_{size_mb}mb.sqlite"
        if not out[side].exists():
            cmd = [sys.executable, str(HERE / "make_large.py"), "nsys", "--size-mb", str(size_mb)]
            cmd += ["--src", str(src / f"{side}.sqlite"), "--out", str(out[side])]
            subprocess.run(cmd, check=True)
    return out["baseline"], out["treatment"]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--anchor", action="store_true", help="also time orjson.loads of the baseline")
    ap.add_argument("--format", choices=["kineto", "nsys"], default="kineto")
    args = ap.parse_args()
    ensure = _ensure_nsys if args.format == "nsys" else _ensure
    b_path, t_path = ensure(args.size_mb)

    from ccdiag import api
    from ccdiag.engine import diagnose_pair
    from ccdiag.pairing import pair_traces

    c0, t0 = time.process_time(), time.perf_counter()
    base = api.load_trace(b_path)
    treat = api.load_trace(t_path)
    load, c_load = time.perf_counter() - t0, time.process_time() - c0
    rss_load = _rss_mb()
    c1, t1 = time.process_time(), time.perf_counter()
    pair = pair_traces(base, treat)
    c2, t2 = time.process_time(), time.perf_counter()
    report = diagnose_pair(pair)
    c3, t3 = time.process_time(), time.perf_counter()
    rows = [
        (
            "traces",
            f"{b_path.stat().st_size / 2**20:,.0f} MiB + {t_path.stat().st_size / 2**20:,.0f} MiB, "
            f"{base.events.height:,} + {treat.events.height:,} events, {pair.aligned.height:,} aligned steps",
        ),
        (
            "load (parse + steps, both)",
            f"{load:.1f} s wall, {c_load:.1f} s CPU (peak RSS {rss_load:,.0f} MB)",
        ),
        ("pair_traces", f"{t2 - t1:.1f} s wall, {c2 - c1:.1f} s CPU"),
        (
            "diagnose (rules + partition + report)",
            f"{t3 - t2:.1f} s wall, {c3 - c2:.1f} s CPU (peak RSS {_rss_mb():,.0f} MB)",
        ),
        (
            "analysis / load",
            f"{(t3 - t1) / load:.2f}x wall, {(c3 - c1) / c_load:.2f}x CPU (target <= 1.5x)",
        ),
        ("verdict", report.verdict),
    ]
    if args.anchor and args.format == "kineto":
        import orjson

        t4 = time.perf_counter()
        orjson.loads(b_path.read_bytes())
        rows.insert(
            2, ("anchor: orjson.loads (baseline only)", f"{time.perf_counter() - t4:.1f} s")
        )
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if (t3 - t1) <= 1.5 * load else 1


if __name__ == "__main__":
    sys.exit(main())
