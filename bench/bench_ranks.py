"""Job-size benchmark: a real rank pair tiled to many ranks, analyzed rank by rank on Dask.

    python bench/bench_ranks.py [--ranks 64 256] [--workers 1 2] [--anchor-ranks 16]

Builds rank folders under bench/data/ by copying the ranks of a real 2-GPU pair
(``sample_traces/ddp_2gpu``: rank i of the job is a copy of rank i % 2), then for each rank count
and worker count runs ``ccdiag.distributed.analyze_job`` on a ``LocalCluster`` of that many
worker processes (one thread each) and prints, in one run:

- wall time, and ranks per second;
- peak RSS per worker (``ru_maxrss`` of each worker process, from the task results) — bounded by
  one rank pair whatever the rank count — and of the client process (which holds the small
  per-rank results);
- the anchor: the same folder read the old way, as ONE trace with a ``rank`` column
  (``api.load_pair`` + the engine), at ``--anchor-ranks`` ranks, whose peak grows with the job;
- the projection, with its arithmetic, for 1,000 ranks x 1 GB per rank file on N workers.

Numbers are wall-clock on this machine: run it on a quiet machine; the README table is pasted
from its output.
"""

from __future__ import annotations

import argparse
import gzip
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "sample_traces" / "ddp_2gpu"
DATA = REPO / "bench" / "data" / "ranks"
#: Analysis peak per byte of a large rank pair (docs/limits.md: 5+5 GiB pair, 0.73x).
PEAK_PER_BYTE = 0.73


def tile(n: int) -> tuple[Path, Path]:
    """Rank folders of n ranks per side (copies of the 2-GPU pair's ranks)."""
    root = DATA / f"n{n}"
    if (root / "treatment" / f"rank{n - 1}.json.gz").exists():
        return root / "baseline", root / "treatment"
    shutil.rmtree(root, ignore_errors=True)
    for side in ("baseline", "treatment"):
        (root / side).mkdir(parents=True)
        texts = [gzip.decompress((SRC / side / f"rank{j}.json.gz").read_bytes()) for j in (0, 1)]
        for i in range(n):
            # each copy says its own rank and the job's world size, as a real job's files do
            text = re.sub(
                rb'("distributedInfo": \{"backend": "nccl", "rank": )\d+(, "world_size": )\d+',
                rb"\g<1>%d\g<2>%d" % (i, n),
                texts[i % 2],
                count=1,
            )
            (root / side / f"rank{i}.json.gz").write_bytes(gzip.compress(text, 6))
    return root / "baseline", root / "treatment"


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def pair_bytes(b: Path, t: Path) -> tuple[int, int]:
    """(compressed, uncompressed) bytes of one rank pair (rank 0 of each side)."""
    from ccdiag.progress import uncompressed_size

    files = [b / "rank0.json.gz", t / "rank0.json.gz"]
    return sum(f.stat().st_size for f in files), sum(uncompressed_size(f) for f in files)


def run_job(n: int, workers: int) -> dict[str, float]:
    from ccdiag import distributed

    b, t = tile(n)
    tasks, _ = distributed.plan_tasks([b], [t])
    sched = distributed.Scheduler("local", workers=workers)
    t0 = time.perf_counter()
    results = distributed.run_tasks(tasks, sched)
    from ccdiag.job import reduce_job

    rep = reduce_job(results, scheduler=sched.describe())
    wall = time.perf_counter() - t0
    per_worker: dict[str, int] = {}
    for r in results:
        per_worker[r.worker] = max(per_worker.get(r.worker, 0), r.peak_rss_bytes)
    assert rep.job is not None and not rep.job.missing_ranks, "every rank must have a result"
    return {
        "wall": wall,
        "task_s": sum(r.seconds for r in results) / len(results),
        "worker_peak": max(per_worker.values()),
        "client_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


ANCHOR = """
import resource, sys, time
from ccdiag import api
from ccdiag.engine import diagnose_pair
t0 = time.perf_counter()
pair = api.load_pair(sys.argv[1], sys.argv[2])
diagnose_pair(pair)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def anchor(n: int) -> tuple[float, int]:
    """The old path: the whole rank folder as one trace, in one process."""
    b, t = tile(n)
    out = subprocess.run(
        [sys.executable, "-c", ANCHOR, str(b), str(t)], capture_output=True, text=True, check=True
    )
    wall, peak = out.stdout.split()
    return float(wall), int(peak)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--anchor-ranks", type=int, default=16)
    args = ap.parse_args()
    comp, raw = pair_bytes(*tile(2))
    print(f"rank pair: {comp / 1e6:.2f} MB gzip, {raw / 1e6:.1f} MB of JSON (2 files)")
    a_wall, a_peak = anchor(args.anchor_ranks)
    print(
        f"anchor, one trace of {args.anchor_ranks} ranks per side (the pre-Dask path): "
        f"{a_wall:.1f} s, peak {_mb(a_peak)} ({a_peak / raw / args.anchor_ranks:.2f}x per "
        f"rank pair of JSON, growing with the job)"
    )
    print("| ranks/side | workers | wall | ranks/s | peak RSS per worker | client peak |")
    print("|---:|---:|---:|---:|---:|---:|")
    best: dict[str, float] = {}
    for n in args.ranks:
        for w in args.workers:
            r = run_job(n, w)
            print(
                f"| {n} | {w} | {r['wall']:.1f} s | {n / r['wall']:.2f} | {_mb(r['worker_peak'])} "
                f"| {_mb(r['client_peak'])} |",
                flush=True,
            )
            best = r if not best or r["task_s"] < best["task_s"] else best
    sec_per_byte = best["task_s"] / raw
    # a worker's peak here is mostly its interpreter + libraries (the pair is small); for a big
    # pair the analysis peak is ~0.73x both files (docs/limits.md, a 5+5 GiB pair measured)
    peak_per_byte = PEAK_PER_BYTE
    one_gb_pair = 2e9
    print(
        "\nprojection, 1,000 ranks x 1 GB per rank file (2 GB of trace per rank pair), "
        "assuming time and worker memory linear in the rank pair's JSON bytes:"
    )
    print(
        f"  per rank pair: {best['task_s']:.2f} s / {raw / 1e6:.1f} MB = "
        f"{sec_per_byte * 1e9:.2f} s per GB -> {sec_per_byte * one_gb_pair:.0f} s per 2 GB pair; "
        f"worker peak {peak_per_byte:.2f}x the pair's bytes (docs/limits.md) -> "
        f"~{peak_per_byte * one_gb_pair / 1e9:.1f} GB per worker, +{_mb(best['worker_peak'])} "
        "measured here for the worker itself"
    )
    for workers in (2, 16, 64, 256):
        hours = 1000 * sec_per_byte * one_gb_pair / workers / 3600
        print(
            f"  {workers:>4} workers: 1000 x {sec_per_byte * one_gb_pair:.0f} s / {workers} = {hours:.2f} h"
        )


if __name__ == "__main__":
    main()
