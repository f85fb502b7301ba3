"""The public API. The CLI, the Dash app and the reports call only these functions.

    load_trace(path)              -> Trace     parse any supported trace, assign steps
    summarize(trace)              -> dict      counts and totals (``ccdiag summary --json``)
    load_pair(baseline, treatment)-> Pair      two traces, checked to be the same workload
    diagnose(baseline, treatment) -> Report    the partition of the per-step delta
    pair(b_trace, t_trace)        -> Pair      align two loaded traces
    diagnose_pair(pair)           -> Report    diagnose an already loaded pair
    evidence_series(pair)         -> dict      per-event samples behind the evidence (figures)
    step_timeline(pair, index)    -> dict      one aligned step of both runs, in lanes
    explain(mechanism_or_code)    -> str       a rule's documentation
    list_rules()                  -> list      the rule registry
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccdiag.schema import Trace


def load_trace(path: str | Path, *, step: str | None = None, **options: Any) -> Trace:
    """Parse a trace file or folder and assign steps.

    Args:
        path: Kineto JSON[.gz], nsys SQLite/.nsys-rep, nsys stats CSV, or a folder of ranks.
        step: name of the step marker (annotation / NVTX range); detected when None.
        **options: passed to the parser.

    Returns:
        The trace with its ``step`` column and step table filled in.
    """
    from ccdiag import parsers, steps

    trace = parsers.read(path, **options)
    return steps.assign_steps(trace, marker=step)


def summarize(trace: Trace) -> dict[str, Any]:
    """Counts and totals of one trace (the ``ccdiag summary --json`` contract)."""
    from ccdiag.summary import summarize as _summarize

    return _summarize(trace)


def load_pair(baseline: str | Path, treatment: str | Path, *, step: str | None = None) -> Any:
    """Load both sides and check they are the same workload (raises PairMismatchError)."""
    from ccdiag.pairing import pair_traces

    return pair_traces(load_trace(baseline, step=step), load_trace(treatment, step=step))


def diagnose(baseline: str | Path, treatment: str | Path, **options: Any) -> Any:
    """Partition the per-step slowdown of treatment vs baseline into mechanisms."""
    from ccdiag.engine import diagnose_pair

    return diagnose_pair(load_pair(baseline, treatment, step=options.pop("step", None)), **options)


def explain(mechanism_or_code: str) -> str:
    """The documentation of one rule, by mechanism id, rule code or rule name."""
    from ccdiag.rules import explain as _explain

    return _explain(mechanism_or_code)


def list_rules() -> list[dict[str, str]]:
    """The rule registry: code, name, mechanism and one-line summary of each rule."""
    from ccdiag.rules import list_rules as _list_rules

    return _list_rules()


def capture(cmd: list[str], out: str | Path, label: str, *, nsys: bool = False) -> int:
    """Run a workload with profiling set up (``ccdiag capture``); returns its exit status."""
    from ccdiag.emulate.launcher import run_capture

    return run_capture(cmd, Path(out), label, nsys=nsys)


def emulate(
    cmd: list[str], platform: str, mechanisms: list[str], *, layer: str = "auto",
    out: str | Path | None = None,
) -> int:
    """Run a workload with CC behaviour injected (``ccdiag emulate``); returns its exit status."""
    from ccdiag.emulate.launcher import run_emulated

    return run_emulated(cmd, platform, mechanisms, layer=layer, out=Path(out) if out else None)


def pair(baseline: Trace, treatment: Trace) -> Any:
    """Align two loaded traces (``load_trace``) and check they are the same workload.

    Raises:
        PairMismatchError: the two traces are not the same workload.
    """
    from ccdiag.pairing import pair_traces

    return pair_traces(baseline, treatment)


def diagnose_pair(pair: Any, **options: Any) -> Any:
    """``diagnose`` for an already loaded pair (``load_pair`` / ``pair``): the Report."""
    from ccdiag.engine import diagnose_pair as _diagnose_pair

    return _diagnose_pair(pair, **options)


def _as_pair(pair_or_paths: Any) -> Any:
    if isinstance(pair_or_paths, (tuple, list)):
        return load_pair(*pair_or_paths)
    return pair_or_paths


def evidence_series(pair_or_paths: Any, *, max_points: int = 1500) -> dict[str, Any]:
    """Per-event samples behind the evidence, both runs, JSON-ready (for figures).

    Args:
        pair_or_paths: a pair, or (baseline, treatment) paths.
        max_points: cap on each list (``n`` keeps the full count).

    Returns:
        Sections ``launch_call``, ``launch_gap``, ``gpu_idle_gap``, ``copies``,
        ``copy_concurrency``, ``async_copies``, ``collectives``, ``uvm``, each
        ``{"baseline": ..., "treatment": ...}`` (see ``ccdiag.series``).
    """
    from ccdiag.series import evidence_series as _series

    return _series(_as_pair(pair_or_paths), max_points=max_points)


def step_timeline(
    pair_or_paths: Any, step_index: int, *, rank: int | None = None, max_events: int = 4000
) -> dict[str, Any]:
    """One aligned step of both runs as lanes of events, with each event's mechanism.

    Args:
        pair_or_paths: a pair, or (baseline, treatment) paths.
        step_index: index of the aligned step on that rank.
        rank: the rank to show (the first when None).
        max_events: cap on events per run.

    Returns:
        Compact lists per run (see ``ccdiag.timeline``); times in ns from the step's start.
    """
    from ccdiag.timeline import step_timeline as _timeline

    return _timeline(_as_pair(pair_or_paths), step_index, rank=rank, max_events=max_events)
