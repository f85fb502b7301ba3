"""Structure-aware fuzzing campaign over the Kineto, nsys SQLite and nsys CSV readers.

    python -m fuzz.run --cases 60000 --jobs 2 --seed 1        # the documented campaign
    python -m fuzz.run --cases 500 --fmt nsys_sqlite           # a quick look at one reader
    python -m fuzz.run --cases 2000 --analyze 0.05             # 5 % of cases also run analyze

Each worker process runs one hypothesis ``@given`` loop over :mod:`fuzz.mutations` plans (its own
hypothesis seed) and calls :func:`fuzz.oracle.check` on every case. A case that raises anything
but ccdiag's InputError, or breaks an oracle promise, or takes longer than ``--timeout`` seconds,
is a *crash*: it is recorded (not raised, so the campaign goes on) under
``fuzz/crashes/<signature>/`` with the plan, the traceback and the input files, one folder per
distinct signature (exception type + the innermost ccdiag frame). The summary (cases, outcomes,
time, crashes) is printed and written to ``fuzz/runs/<name>.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CRASHES = HERE / "crashes"
RUNS = HERE / "runs"
#: Cases are skipped (and counted as not run) while the temporary folder's disk has less free.
MIN_FREE_DISK = 5 << 30


class CaseTimeoutError(Exception):
    """A case ran longer than the per-case limit (a hang is a bug too)."""


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    own = [
        f for f in frames if str(REPO) in f.filename and f"{os.sep}fuzz{os.sep}" not in f.filename
    ]
    where = f"{Path(own[-1].filename).relative_to(REPO)}:{own[-1].lineno}" if own else "?"
    if type(exc).__name__ == "OracleError":  # the promise broken, not where it was checked
        return f"OracleError: {str(exc).split(':')[0][:60]}"
    return f"{type(exc).__name__} at {where}"


def _record(sig: str, exc: BaseException, plan: Any, case: Any, folder: Path) -> None:
    slug = hashlib.sha1(sig.encode()).hexdigest()[:10]
    dest = CRASHES / slug
    if dest.exists():
        return
    dest.mkdir(parents=True)
    (dest / "signature.txt").write_text(sig + "\n")
    if case is not None:
        doc = {"path": case.path.name, "total_events": case.total_events, "fmt": plan.fmt}
        (dest / "case.json").write_text(json.dumps(doc) + "\n")
    (dest / "plan.txt").write_text(plan.describe() + "\n")
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    (dest / "traceback.txt").write_text(tb)
    for f in folder.iterdir():
        shutil.copyfile(f, dest / f.name)


def worker(
    n: int, seed: int, fmt: str, analyze: float, repeat: float, timeout: float, out: Path
) -> None:
    """Run ``n`` cases; write the stats as JSON to ``out``."""
    import random

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from fuzz import mutations as m
    from fuzz import oracle, seeds

    seeds.build_all()
    strategy = {
        "all": m.any_plan(),
        "kineto": m.kineto_plan(),
        "nsys_sqlite": m.sqlite_plan(),
        "nsys_csv": m.csv_plan(),
        "folder": m.folder_plan(),
    }[fmt]
    stats: dict[str, Any] = {"outcomes": Counter(), "by_format": Counter(), "crashes": {}}
    stats["slowest_s"] = 0.0
    rng = random.Random(seed)
    seed_paths = _seed_paths()

    def on_alarm(*_: Any) -> None:
        raise CaseTimeoutError(f"case took more than {timeout:g} s")

    signal.signal(signal.SIGALRM, on_alarm)
    t_start = time.perf_counter()

    @hseed(seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(plan=strategy, pick=st.integers(0, 2**31))
    def one(plan: Any, pick: int) -> None:
        if shutil.disk_usage(tempfile.gettempdir()).free < MIN_FREE_DISK:
            stats["outcomes"]["not run (disk nearly full)"] += 1
            return
        with tempfile.TemporaryDirectory(prefix="ccdiag-fuzz-") as tmp:
            folder = Path(tmp)
            t0 = time.perf_counter()
            case = None
            try:
                case = m.build_case(plan, folder)
                base = seed_paths.get((plan.fmt, plan.seed)) if rng.random() < analyze else None
                signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    outcome = oracle.check(case, baseline=base, repeat=rng.random() < repeat)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except Exception as exc:  # noqa: BLE001 - every other exception is a finding
                sig = _signature(exc)
                outcome = "crash"
                stats["crashes"].setdefault(sig, {"count": 0, "plan": plan.describe()[:2000]})
                stats["crashes"][sig]["count"] += 1
                _record(sig, exc, plan, case, folder)
            stats["slowest_s"] = max(stats["slowest_s"], time.perf_counter() - t0)
            stats["outcomes"][outcome] += 1
            stats["by_format"][f"{plan.fmt}:{outcome}"] += 1
            if sum(stats["outcomes"].values()) % 500 == 0:
                stats["seconds"] = time.perf_counter() - t_start
                out.write_text(json.dumps(stats, indent=1, default=dict))

    one()
    stats["seconds"] = time.perf_counter() - t_start
    out.write_text(json.dumps(stats, indent=1, default=dict))


def _seed_paths() -> dict[tuple[str, str], Path]:
    """Unmutated seeds as files, for ``analyze`` cases (seed as baseline, mutant as treatment)."""
    from fuzz import seeds

    out: dict[tuple[str, str], Path] = {}
    for name in seeds.KINETO_SOURCES:
        out[("kineto", name)] = seeds.CACHE / f"kineto_{name}.json"
    for name in seeds.SQLITE_SOURCES:
        out[("nsys_sqlite", name)] = seeds.sqlite_seed(name)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000, help="cases in all (split over jobs)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--fmt", default="all", choices=["all", "kineto", "nsys_sqlite", "nsys_csv", "folder"]
    )
    ap.add_argument("--analyze", type=float, default=0.02, help="share of cases also analyzed")
    ap.add_argument("--repeat", type=float, default=0.05, help="share of cases read twice")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    ap.add_argument("--name", default=None, help="run name (fuzz/runs/<name>.json)")
    ap.add_argument("--worker", nargs=2, metavar=("N", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        n, out = int(a.worker[0]), Path(a.worker[1])
        worker(n, a.seed, a.fmt, a.analyze, a.repeat, a.timeout, out)
        return 0
    from fuzz import seeds

    seeds.build_all()
    t0 = time.time()
    procs, outs = [], []
    tmp = Path(tempfile.mkdtemp(prefix="ccdiag-fuzz-run-"))
    for j in range(a.jobs):
        n = a.cases // a.jobs + (1 if j < a.cases % a.jobs else 0)
        out = tmp / f"w{j}.json"
        outs.append(out)
        cmd = [sys.executable, "-m", "fuzz.run", "--worker", str(n), str(out)]
        cmd += ["--seed", str(a.seed * 1000 + j), "--fmt", a.fmt]
        cmd += ["--analyze", str(a.analyze), "--repeat", str(a.repeat)]
        cmd += ["--timeout", str(a.timeout)]
        procs.append(subprocess.Popen(cmd, cwd=REPO))
    codes = [p.wait() for p in procs]
    total: dict[str, Any] = {"outcomes": Counter(), "by_format": Counter(), "crashes": {}}
    slowest = 0.0
    for out in outs:
        if not out.exists():
            continue
        s = json.loads(out.read_text())
        total["outcomes"].update(s["outcomes"])
        total["by_format"].update(s["by_format"])
        slowest = max(slowest, s["slowest_s"])
        for sig, c in s["crashes"].items():
            total["crashes"].setdefault(sig, {"count": 0, "plan": c["plan"]})
            total["crashes"][sig]["count"] += c["count"]
    shutil.rmtree(tmp, ignore_errors=True)
    wall = time.time() - t0
    summary = {
        "name": a.name or time.strftime("%Y%m%d-%H%M%S"),
        "command": " ".join(["python -m fuzz.run", *sys.argv[1:]]),
        "cases": sum(total["outcomes"].values()),
        "wall_s": round(wall, 1),
        "jobs": a.jobs,
        "worker_exit_codes": codes,
        "slowest_case_s": round(slowest, 2),
        "outcomes": dict(total["outcomes"]),
        "by_format": dict(sorted(total["by_format"].items())),
        "crashes": total["crashes"],
    }
    RUNS.mkdir(exist_ok=True)
    (RUNS / f"{summary['name']}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "crashes"}, indent=1))
    for sig, c in summary["crashes"].items():
        print(f"CRASH x{c['count']}: {sig}\n    {c['plan'][:300]}")
    return 1 if summary["crashes"] or any(codes) else 0


if __name__ == "__main__":
    sys.exit(main())
