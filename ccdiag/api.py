"""The public API. The CLI, the Dash app and the reports call only these functions.

    load_trace(path)              -> Trace     parse any supported trace, assign steps
    summarize(trace)              -> dict      counts and totals (``ccdiag summary --json``)
    load_pair(baseline, treatment)-> Pair      two traces, checked to be the same workload
    diagnose(baseline, treatment) -> Report    the partition of the per-step delta
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
