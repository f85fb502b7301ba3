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
render_report(report, fmt)    -> str       Markdown / HTML / JSON file report (``ccdiag report``)
report_schema()               -> dict      JSON Schema of the report contract (``ccdiag schema``)
load_report(path)             -> Report    read a report written with ``--json``
compare_reports(old, new)     -> list      share growth per mechanism (the CI gate)
annotate(b, t, out)           -> dict      the treatment trace with the diagnosis as tracks
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccdiag.progress import Progress
from ccdiag.schema import Trace

if TYPE_CHECKING:
    from datetime import datetime

    from ccdiag.verdict import Report

#: Readers that take a ``progress`` callback (a folder passes it to each file's reader).
_PROGRESS_FORMATS = ("kineto", "nsys_sqlite", "nsys_rep")


def load_trace(
    path: str | Path,
    *,
    step: str | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> Trace:
    """Parse a trace file or folder and assign steps.

    Args:
        path: Kineto JSON[.gz], nsys SQLite/.nsys-rep, nsys stats CSV, or a folder of ranks.
        step: name of the step marker (annotation / NVTX range); detected when None.
        progress: called now and then while parsing (``ccdiag.progress``); None: silent.
        **options: passed to the parser.

    Returns:
        The trace with its ``step`` column and step table filled in.
    """
    from ccdiag import steps
    from ccdiag.parsers import read, sniff

    if progress is not None:
        p = Path(path)
        if p.is_dir() or sniff(p) in _PROGRESS_FORMATS:
            options["progress"] = progress
    trace = read(path, **options)
    return steps.assign_steps(trace, marker=step)


def summarize(trace: Trace) -> dict[str, Any]:
    """Counts and totals of one trace (the ``ccdiag summary --json`` contract)."""
    from ccdiag.summary import summarize as _summarize

    return _summarize(trace)


def load_pair(
    baseline: str | Path,
    treatment: str | Path,
    *,
    step: str | None = None,
    progress: Progress | None = None,
) -> Any:
    """Load both sides and check they are the same workload (raises PairMismatchError)."""
    from ccdiag.pairing import pair_traces

    return pair_traces(
        load_trace(baseline, step=step, progress=progress),
        load_trace(treatment, step=step, progress=progress),
    )


def diagnose(
    baseline: str | Path,
    treatment: str | Path,
    *,
    progress: Progress | None = None,
    scheduler: str | None = None,
    baseline_runs: list[str | Path] | None = None,
    treatment_runs: list[str | Path] | None = None,
    **options: Any,
) -> Any:
    """Partition the per-step slowdown of treatment vs baseline into mechanisms.

    A folder of several per-rank traces, a folder of runs, or extra runs
    (``baseline_runs`` / ``treatment_runs``, added to ``baseline`` / ``treatment``) make a
    *job*: one task per rank and run on ``scheduler`` (``auto``, ``inprocess``, ``local[:N]``,
    ``tcp://HOST:PORT``; see :mod:`ccdiag.distributed`), reduced into one report with
    ``ranks``, ``stragglers``, ``scheduler`` and ``job``.

    ``progress`` (optional) hears from the parsers, then ``("diagnosing", 0, 1)`` and
    ``("diagnosing", 1, 1)`` around the rules (a job: ``("ranks", done, total)``).
    """
    from ccdiag import distributed
    from ccdiag.engine import diagnose_pair as _engine

    b_runs = distributed.expand_runs(Path(baseline)) + [Path(p) for p in baseline_runs or []]
    t_runs = distributed.expand_runs(Path(treatment)) + [Path(p) for p in treatment_runs or []]
    if distributed.is_job(b_runs, t_runs):
        return distributed.analyze_job(
            b_runs,
            t_runs,
            scheduler=scheduler,
            step=options.pop("step", None),
            rules=options.pop("rules", None),
            rule_options=options.pop("rule_options", None),
            progress=progress,
        )

    pair = load_pair(baseline, treatment, step=options.pop("step", None), progress=progress)
    if progress is not None:
        progress("diagnosing", 0, 1)
    report = _engine(pair, **options)
    if progress is not None:
        progress("diagnosing", 1, 1)
    return report


def explain(mechanism_or_code: str) -> str:
    """The documentation of one rule, by mechanism id, rule code or rule name."""
    from ccdiag.rules import explain as _explain

    return _explain(mechanism_or_code)


def list_rules() -> list[dict[str, str]]:
    """The rule registry: code, name, mechanism and one-line summary of each rule."""
    from ccdiag.rules import list_rules as _list_rules

    return _list_rules()


REPORT_FORMATS = ("md", "html", "json")


def render_report(
    report: Report,
    fmt: str,
    *,
    keep_paths: bool = False,
    timestamp: datetime | str | None = None,
    sources: dict[str, str] | None = None,
) -> str:
    """A file report of a diagnosis: Markdown (GitHub issue), self-contained HTML, or JSON.

    Deterministic: the same report gives the same text (sorted free-form keys, fixed number
    formatting, no time unless ``timestamp``). Scrubbed unless ``keep_paths``: no absolute
    paths, environment dumps, user or host names; sources by file name.

    Args:
        report: the diagnosis (``diagnose``).
        fmt: ``md``, ``html`` or ``json`` (the ``ccdiag analyze --json`` contract).
        keep_paths: keep paths and names as read; show ``sources`` as given.
        timestamp: record when the report was written (``generated_at``).
        sources: the paths the user gave: ``{"baseline": ..., "treatment": ...}``.

    Returns:
        The report text.
    """
    kw: dict[str, Any] = {"keep_paths": keep_paths, "timestamp": timestamp, "sources": sources}
    if fmt in ("md", "markdown"):
        from ccdiag.report.markdown import render_markdown

        return render_markdown(report, **kw)
    if fmt == "html":
        from ccdiag.report.html import render_html

        return render_html(report, **kw)
    if fmt == "json":
        from ccdiag.report.json_contract import render_json

        return render_json(report, **kw)
    raise ValueError(f"unknown report format {fmt!r}: one of {', '.join(REPORT_FORMATS)}")


def report_schema() -> dict[str, Any]:
    """JSON Schema of the report contract (published as ``docs/schema/report-v<major>.json``)."""
    from ccdiag.report.json_contract import report_schema as _schema

    return _schema()


def load_report(path: str | Path) -> Report:
    """Read a report written by ``ccdiag analyze/report --json`` (validated; InputError if not)."""
    from ccdiag.compare import load_report as _load

    return _load(Path(path))


def compare_reports(old: Report, new: Report, *, max_share_growth: float) -> list[dict[str, Any]]:
    """Mechanism shares of a new report against an earlier one (the CI gate).

    Args:
        old: the earlier report.
        new: the report to check.
        max_share_growth: allowed growth of a mechanism's share, in percentage points.

    Returns:
        One row per mechanism in either report: ``mechanism``, ``old_share``, ``new_share``,
        ``growth_points``, ``exceeded``; mechanisms over the limit first.
    """
    from ccdiag.compare import compare_shares

    return compare_shares(old, new, max_share_growth=max_share_growth)


def annotate(
    baseline: str | Path,
    treatment: str | Path,
    out: str | Path,
    *,
    step: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write the treatment trace with the diagnosis added as tracks (Perfetto / chrome://tracing).

    A Kineto treatment is copied event for event with the added events spliced in; any other
    input (nsys, CSV, a folder of ranks) becomes a Chrome-trace JSON built from the event frame.
    ``out`` ending in ``.gz`` is gzip-compressed; ``-`` writes to stdout.

    Returns:
        What was written: ``out``, ``mode`` (``kineto-copy`` / ``from-events``), the report,
        and the number of added events by kind.
    """
    from ccdiag.annotate import annotate_pair
    from ccdiag.engine import diagnose_pair as _engine

    pair = load_pair(baseline, treatment, step=step, progress=progress)
    report = _engine(pair)
    return annotate_pair(pair, report, Path(treatment), out, progress=progress)


def annotate_diagnosed(
    pair: Any, report: Any, treatment: str | Path, out: str | Path
) -> dict[str, Any]:
    """:func:`annotate` for a pair already loaded and diagnosed (the dashboard's export)."""
    from ccdiag.annotate import annotate_pair

    return annotate_pair(pair, report, Path(treatment), out)


def capture(cmd: list[str], out: str | Path, label: str, *, nsys: bool = False) -> int:
    """Run a workload with profiling set up (``ccdiag capture``); returns its exit status."""
    from ccdiag.emulate.launcher import run_capture

    return run_capture(cmd, Path(out), label, nsys=nsys)


def emulate(
    cmd: list[str],
    platform: str,
    mechanisms: list[str],
    *,
    layer: str = "auto",
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
