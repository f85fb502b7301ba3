"""Jobs of many ranks and repeated runs: one task per rank pair, on dask.distributed or in-process.

A *job* is the paired analysis of a training or serving job traced per rank, and/or repeated
several times per side. It is split into **tasks**, one per (rank, run): parse that rank's
baseline and treatment files, pair them, diagnose the pair (:func:`run_task`, a pure function of
the files and the options, so it runs the same in this process, in a ``LocalCluster`` worker or on
a remote Dask worker). A task returns a small result — the rank's report and its per-step times —
and :func:`ccdiag.job.reduce_job` combines the results into the job's report. Memory per worker is
bounded by one rank pair: workers run one task at a time (one thread each).

Schedulers (``--scheduler``):

- ``auto`` (default): in-process for a job of at most two tasks (starting worker processes would
  cost more than it saves, and a 2-rank sample must not get slower), else a local cluster of
  ``min(cores, tasks)`` workers when ``distributed`` is installed (in-process otherwise, said);
- ``inprocess``: every task here, one after another;
- ``local`` or ``local:N``: a ``dask.distributed.LocalCluster`` of N worker processes (default:
  the machine's cores), one thread each;
- ``tcp://HOST:PORT``: an existing Dask cluster. Its workers must have ccdiag installed and see
  the trace files under the same paths (a shared file system).

A task that fails (bad input in one rank's file, a worker that died ``distributed``'s allowed
number of times) is reported by rank; the job's report says which ranks it is missing, never a
silent partial result.
"""

from __future__ import annotations

import os
import re
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccdiag.errors import InputError
from ccdiag.units import listed

#: Progress callback: ``progress(task, done, total)`` (see ccdiag.progress).
ProgressFn = Callable[..., None]


@dataclass(frozen=True)
class Task:
    """One rank pair of one run: the files, and the analysis options."""

    rank: int
    run: int
    baseline: str
    treatment: str
    step: str | None = None
    rules: tuple[type, ...] | None = None  # rule classes (None: the registry); picklable
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class TaskResult:
    """What a task sends back: small (no frames), picklable."""

    rank: int
    run: int
    baseline: str
    treatment: str
    report: Any = None  # ccdiag.verdict.Report, None when the task failed
    error: str | None = None
    b_steps: list[int] = field(default_factory=list)  # per aligned step, ns
    t_steps: list[int] = field(default_factory=list)
    meta_ranks: tuple[int | None, int | None] = (None, None)  # what each file's metadata says
    world_size: int | None = None
    collectives: dict[str, Any] | None = None  # cost-model facts of the rank's collectives
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    worker: str = "in-process"


def _peak_rss() -> int:
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(ru) * 1024  # Linux: kilobytes


def _collective_facts(pair: Any) -> dict[str, Any] | None:
    from ccdiag.collectives import facts_of_pair

    f = facts_of_pair(pair)
    if f is None:
        return None
    return {
        "name": f.name,
        "k": f.k,
        "bytes": f.nbytes,
        "dt_ns": f.dt_ns,
        "fit_baseline": f.fit_b.as_dict(),
        "fit_treatment": f.fit_t.as_dict(),
    }


def run_task(task: Task) -> TaskResult:
    """Parse, pair and diagnose one rank pair. Never raises for bad input: the error is returned.

    Args:
        task: the files and options.

    Returns:
        The rank's report and per-step times, or its error (one line naming the file).
    """
    from ccdiag import api
    from ccdiag.engine import diagnose_pair
    from ccdiag.pairing import pair_traces

    t0 = time.perf_counter()
    out = TaskResult(task.rank, task.run, task.baseline, task.treatment)
    out.worker = _worker_name()
    try:
        b = api.load_trace(task.baseline, step=task.step)
        t = api.load_trace(task.treatment, step=task.step)
        out.meta_ranks = (b.meta.rank, t.meta.rank)
        out.world_size = b.meta.world_size or t.meta.world_size
        pair = pair_traces(b, t)
        out.report = diagnose_pair(pair, rules=task.rules, rule_options=task.rule_options or None)
        out.b_steps = [int(v) for v in pair.aligned["b_ns"].to_list()]
        out.t_steps = [int(v) for v in pair.aligned["t_ns"].to_list()]
        out.collectives = _collective_facts(pair)
    except InputError as exc:  # PairMismatchError is one too
        out.error = str(exc)
    except MemoryError:
        out.error = f"{Path(task.treatment).name}: out of memory while analyzing this rank"
    except Exception as exc:  # noqa: BLE001 - reported by rank, never a silent partial result
        out.error = f"internal error on rank {task.rank}: {type(exc).__name__}: {exc}"
    out.seconds = time.perf_counter() - t0
    out.peak_rss_bytes = _peak_rss()
    return out


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "in-process"


# --- schedulers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scheduler:
    """Where the tasks run: ``kind`` is inprocess, local or remote."""

    kind: str
    workers: int = 1
    address: str | None = None
    reason: str = ""

    def describe(self) -> str:
        if self.kind == "inprocess":
            return "in-process" + (f" ({self.reason})" if self.reason else "")
        if self.kind == "local":
            return f"dask LocalCluster, {self.workers} worker process(es), 1 thread each"
        return f"dask cluster at {self.address}"


def _has_distributed() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def parse_scheduler(spec: str | None, n_tasks: int) -> Scheduler:
    """The scheduler a ``--scheduler`` value asks for (see the module docstring).

    Raises:
        InputError: an unknown value, or dask asked for and not installed.
    """
    spec = (spec or "auto").strip()
    cores = os.cpu_count() or 1
    if spec == "auto":
        if n_tasks <= 2:
            return Scheduler("inprocess", reason=f"{n_tasks} task(s): not worth worker processes")
        if not _has_distributed():
            return Scheduler("inprocess", reason="dask.distributed not installed")
        return Scheduler("local", workers=max(1, min(cores, n_tasks)))
    if spec == "inprocess":
        return Scheduler("inprocess")
    if spec.startswith("local"):
        rest = spec[len("local") :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit() and int(rest[1:]) > 0):
            raise InputError("--scheduler", f"expected local or local:N (N > 0), got {spec!r}")
        _need_distributed(spec)
        return Scheduler("local", workers=int(rest[1:]) if rest else cores)
    if spec.startswith("tcp://"):
        _need_distributed(spec)
        return Scheduler("remote", address=spec)
    raise InputError(
        "--scheduler", f"unknown scheduler {spec!r} (auto, inprocess, local[:N], tcp://HOST:PORT)"
    )


def _need_distributed(spec: str) -> None:
    if not _has_distributed():
        raise InputError(
            "--scheduler",
            f"{spec!r} needs dask.distributed: pip install 'ccdiag[dask]' (or use inprocess)",
        )


def run_tasks(
    tasks: list[Task], scheduler: Scheduler, progress: ProgressFn | None = None
) -> list[TaskResult]:
    """Run every task on the scheduler; results in task order.

    A task whose worker died more often than distributed allows comes back as an error result
    (``KilledWorker``), like a task whose input was bad.
    """
    if scheduler.kind == "inprocess":
        results = []
        for i, task in enumerate(tasks):
            if progress is not None:
                progress("ranks analyzed", i, len(tasks))
            results.append(run_task(task))
        if progress is not None:
            progress("ranks analyzed", len(tasks), len(tasks))
        return results
    return _run_dask(tasks, scheduler, progress)


def _quiet_dask() -> None:
    """Dask's own log lines (worker restarts, memory notes) never reach the user's stderr as
    extra lines: what matters comes back in the task results."""
    import logging

    for name in ("distributed", "dask", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _run_dask(
    tasks: list[Task], scheduler: Scheduler, progress: ProgressFn | None
) -> list[TaskResult]:
    import logging
    import warnings

    _quiet_dask()
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dask's port / memory notices: not the user's concern
        if scheduler.kind == "local":
            cluster: Any = LocalCluster(
                n_workers=scheduler.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,
            )
            client = Client(cluster)
        else:
            cluster = None
            try:
                client = Client(scheduler.address, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise InputError(
                    "--scheduler", f"cannot reach the Dask scheduler at {scheduler.address}: {exc}"
                ) from None
        try:
            return _collect(client, tasks, progress)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def _collect(client: Any, tasks: list[Task], progress: ProgressFn | None) -> list[TaskResult]:
    from distributed import as_completed

    futures = client.map(run_task, tasks, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[TaskResult | None] = [None] * len(tasks)
    done = 0
    if progress is not None:
        progress("ranks analyzed", 0, len(tasks))
    for fut in as_completed(futures):
        i = index[fut.key]
        try:
            results[i] = fut.result()
        except Exception as exc:  # noqa: BLE001 - KilledWorker, a lost worker: by rank
            t = tasks[i]
            results[i] = TaskResult(
                t.rank,
                t.run,
                t.baseline,
                t.treatment,
                error=f"rank {t.rank}: its worker died or was lost ({type(exc).__name__})",
            )
        done += 1
        if progress is not None:
            progress("ranks analyzed", done, len(tasks))
    return [r for r in results if r is not None]


# --- which files make the job -----------------------------------------------------------------


def _rank_files(path: Path) -> list[tuple[int | None, Path]]:
    """(rank from the name, file) of a folder of per-rank traces, or one file as rank None."""
    from ccdiag.parsers import folder

    if not path.is_dir():
        return [(None, path)]
    fmt, files = folder.rank_files(path)
    if fmt == "nsys_csv":
        # an nsys stats CSV set is addressed by its prefix; one set = one trace (the folder)
        if len(files) == 1:
            return [(None, path)]
        return [(f.name_rank, _csv_api_file(f.path)) for f in files]
    return [(f.name_rank, f.path) for f in files]


def _csv_api_file(prefix: Path) -> Path:
    for cand in sorted(prefix.parent.glob(prefix.name + "*cuda_api_trace*")):
        return cand
    return prefix


def is_rank_folder(path: Path) -> bool:
    """A folder of several per-rank traces (not one trace, not one CSV set)."""
    if not path.is_dir():
        return False
    try:
        return len(_rank_files(path)) > 1
    except InputError:
        return False


def _match_ranks(
    b: list[tuple[int | None, Path]], t: list[tuple[int | None, Path]], b_src: Path, t_src: Path
) -> tuple[list[tuple[int, Path, Path]], list[str]]:
    """Pair the two sides' rank files by the rank in their names, else by name order."""
    notes: list[str] = []
    if len(b) != len(t):
        ignored = [p.name for src in (b_src, t_src) for p in _not_traces(src, b + t)]
        raise InputError(
            t_src,
            f"the baseline has {len(b)} rank file(s) and the treatment {len(t)}: the ranks must "
            f"match ({listed([p.name for _, p in b])} vs {listed([p.name for _, p in t])})"
            + (f"; not read as traces: {', '.join(ignored[:3])}" if ignored else ""),
        )
    if all(r is not None for r, _ in b) and all(r is not None for r, _ in t):
        bm = {int(r): p for r, p in b if r is not None}
        tm = {int(r): p for r, p in t if r is not None}
        if set(bm) != set(tm):
            only_b = sorted(set(bm) - set(tm))
            only_t = sorted(set(tm) - set(bm))
            raise InputError(
                t_src,
                f"the ranks differ: only in the baseline {only_b or 'none'}, only in the "
                f"treatment {only_t or 'none'}",
            )
        return [(r, bm[r], tm[r]) for r in sorted(bm)], notes
    if len(b) > 1:
        notes.append("rank files without a rank in their names: paired in name order")
    return [(i, bp, tp) for i, ((_, bp), (_, tp)) in enumerate(zip(b, t))], notes


def _not_traces(folder: Path, found: list[tuple[int | None, Path]]) -> list[Path]:
    """Files named like traces in a rank folder that were not recognized as traces."""
    if not folder.is_dir():
        return []
    seen = {p for _, p in found}
    return [
        p
        for p in sorted(folder.iterdir())
        if p.is_file()
        and p.name.endswith(_TRACE_SUFFIXES)
        and not p.name.endswith(".meta.json")
        and p not in seen
        and not p.name.startswith(".")
    ]


def plan_tasks(
    baseline_runs: list[Path],
    treatment_runs: list[Path],
    *,
    step: str | None = None,
    rules: Iterable[type] | None = None,
    rule_options: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[Task], list[str]]:
    """The tasks of a job: one per rank and run.

    Runs are paired in order (baseline run i with treatment run i); with unequal counts the
    shorter side's runs are reused in turn (every run is analyzed at least once). Each run is a
    trace file or a folder of per-rank files; every run of a job must have the same ranks.

    Raises:
        InputError: ranks that disagree between the sides or between runs.
    """
    notes: list[str] = []
    n = max(len(baseline_runs), len(treatment_runs))
    tasks: list[Task] = []
    ranks_seen: list[int] | None = None
    for i in range(n):
        bsrc, tsrc = baseline_runs[i % len(baseline_runs)], treatment_runs[i % len(treatment_runs)]
        matched, more = _match_ranks(_rank_files(bsrc), _rank_files(tsrc), bsrc, tsrc)
        notes += [m for m in more if m not in notes]
        ranks = [r for r, _, _ in matched]
        if ranks_seen is not None and ranks != ranks_seen:
            raise InputError(
                tsrc, f"run {i + 1} has ranks {ranks}, run 1 has {ranks_seen}: runs must match"
            )
        ranks_seen = ranks
        for r, bp, tp in matched:
            tasks.append(
                Task(
                    rank=r,
                    run=i,
                    baseline=str(bp),
                    treatment=str(tp),
                    step=step,
                    rules=tuple(rules) if rules else None,
                    rule_options=dict(rule_options or {}),
                )
            )
    if len(baseline_runs) != len(treatment_runs) and n > 1:
        notes.append(
            f"{len(baseline_runs)} baseline and {len(treatment_runs)} treatment runs: paired in "
            "order, the shorter side's runs reused in turn"
        )
    return tasks, notes


_RUN_RE = re.compile(r"(?:^|[^a-z])run[-_.]?(\d{1,6})(?!\d)", re.IGNORECASE)


def expand_runs(path: Path) -> list[Path]:
    """The runs a path holds: a folder of run subfolders (each a trace or a rank folder), a
    folder of files named ``run1``, ``run_2``, ... (one trace each), or one run (the path)."""
    if not path.is_dir():
        return [path]
    subdirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    traces = [
        p for p in files if p.name.endswith(_TRACE_SUFFIXES) and not p.name.endswith(".meta.json")
    ]
    if subdirs and not traces:
        return subdirs
    runs = [p for p in traces if _RUN_RE.search(p.name)]
    if runs and len(runs) == len(traces) and len(runs) > 1:
        return sorted(runs, key=lambda p: int(_RUN_RE.search(p.name).group(1)))  # type: ignore[union-attr]
    return [path]


_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".csv", ".csv.gz")


def is_job(baseline_runs: list[Path], treatment_runs: list[Path]) -> bool:
    """Several runs on a side, or a folder of several ranks: analyzed as a job of tasks."""
    if len(baseline_runs) > 1 or len(treatment_runs) > 1:
        return True
    return is_rank_folder(baseline_runs[0]) or is_rank_folder(treatment_runs[0])


def analyze_job(
    baseline_runs: list[Path],
    treatment_runs: list[Path],
    *,
    scheduler: str | None = None,
    step: str | None = None,
    rules: Iterable[type] | None = None,
    rule_options: dict[str, dict[str, Any]] | None = None,
    progress: ProgressFn | None = None,
) -> Any:
    """Plan the tasks, run them on the scheduler, reduce them into the job's report."""
    from ccdiag.job import reduce_job

    tasks, notes = plan_tasks(
        baseline_runs, treatment_runs, step=step, rules=rules, rule_options=rule_options
    )
    sched = parse_scheduler(scheduler, len(tasks))
    results = run_tasks(tasks, sched, progress)
    notes = [*notes, _meta_rank_note(results)] if _meta_rank_note(results) else notes
    return reduce_job(
        results,
        scheduler=sched.describe(),
        notes=notes,
        baseline_runs=len(baseline_runs),
        treatment_runs=len(treatment_runs),
        sources=(_source(baseline_runs), _source(treatment_runs)),
    )


def _source(runs: list[Path]) -> str:
    """How a side is named in the report: its folder or file, or its runs' parent."""
    if len(runs) == 1:
        return runs[0].name
    parents = {p.parent.name for p in runs}
    return f"{len(runs)} runs" + (f" in {parents.pop()}" if len(parents) == 1 else "")


def _meta_rank_note(results: list[TaskResult]) -> str | None:
    odd = [
        f"rank {r.rank}: metadata says {m}"
        for r in results
        for m in r.meta_ranks
        if m is not None and m != r.rank
    ]
    if not odd:
        return None
    return "file names and metadata disagree on ranks (" + "; ".join(sorted(set(odd))[:4]) + ")"
