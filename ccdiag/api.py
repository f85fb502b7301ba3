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
select_rules(rules, options)  -> tuple     rule names and option overrides, checked (--rule)
parse_rule_options(items)     -> dict      ``KEY=VALUE`` strings (--rule-option), checked

A notebook session: docs/notebook.md (``Report.to_polars()``, ``ccdiag.figures``).
predict(trace, platform)      -> Prediction the CC cost of a CC-off trace (``ccdiag predict``)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccdiag.errors import InputError
from ccdiag.pairing import Pair
from ccdiag.progress import Progress
from ccdiag.schema import Trace
from ccdiag.verdict import Report

# Pair and Report are imported at run time, not only for type checkers, so that
# ``typing.get_type_hints(api.diagnose)`` and notebooks' signature help resolve them.
if TYPE_CHECKING:
    from datetime import datetime

    from ccdiag.rules._base import Rule

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

    _refuse_pair_folder(Path(path))
    if progress is not None:
        p = Path(path)
        if p.is_dir() or sniff(p) in _PROGRESS_FORMATS:
            options["progress"] = progress
    trace = read(path, **options)
    return steps.assign_steps(trace, marker=step)


def sniff_format(path: str | Path) -> str:
    """The format of a trace file or folder from its first bytes (never its name).

    Returns:
        ``kineto``, ``nsys_sqlite``, ``nsys_rep`` or ``nsys_csv``.

    Raises:
        InputError: not a trace format ccdiag reads (one line naming the file).
    """
    from ccdiag.parsers import sniff

    return sniff(Path(path))


_PAIR_ROLES = (("baseline", "treatment"), ("cc_off", "cc_on"))
_TRACE_ENDINGS = (".json", ".json.gz", ".sqlite", ".nsys-rep")


def _refuse_pair_folder(folder: Path) -> None:
    """A folder holding one baseline/treatment pair is not a folder of ranks: say so (exit 2)."""
    if not folder.is_dir():
        return
    try:
        names = sorted(
            p.name
            for p in folder.iterdir()
            if p.is_file() and p.name.endswith(_TRACE_ENDINGS) and not p.name.endswith(".meta.json")
        )
    except OSError:
        return
    if any("rank" in n.lower() for n in names):
        return
    for b_role, t_role in _PAIR_ROLES:
        b = [n for n in names if n.lower().startswith(b_role)]
        t = [n for n in names if n.lower().startswith(t_role)]
        if b and t:
            raise InputError(
                folder,
                f"this folder holds a {b_role}/{t_role} pair ({b[0]}, {t[0]}), not one trace "
                f"per rank: give the two files, e.g. ccdiag analyze {folder.name}/{b[0]} "
                f"{folder.name}/{t[0]}",
            )


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
) -> Pair:
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
    rules: Sequence[str] | None = None,
    rule_options: Mapping[str, Mapping[str, Any]] | None = None,
    scheduler: str | None = None,
    baseline_runs: list[str | Path] | None = None,
    treatment_runs: list[str | Path] | None = None,
    **options: Any,
) -> Report:
    """Partition the per-step slowdown of treatment vs baseline into mechanisms.

    A folder of several per-rank traces, a folder of runs, or extra runs
    (``baseline_runs`` / ``treatment_runs``, added to ``baseline`` / ``treatment``) make a
    *job*: one task per rank and run on ``scheduler`` (``auto``, ``inprocess``, ``local[:N]``,
    ``tcp://HOST:PORT``; see :mod:`ccdiag.distributed`), reduced into one report with
    ``ranks``, ``stragglers``, ``scheduler`` and ``job``.

    Args:
        baseline: the CC-off trace (file, folder of ranks, or folder of runs).
        treatment: the CC-on trace.
        progress: hears from the parsers, then ``("diagnosing", 0, 1)`` and
            ``("diagnosing", 1, 1)`` around the rules (a job: ``("ranks analyzed", done,
            total)``).
        rules: run only these rules (codes, names or mechanisms, e.g. ``["LA01"]``); the
            time of the others stays ``unattributed``. None: every rule.
        rule_options: per rule (code, name or mechanism), option overrides, e.g.
            ``{"LA01": {"min_toll_ns": 500}}``; checked against the rule's declared options
            (``InputError`` naming the option when unknown or of the wrong type).
        scheduler: where a job's tasks run (None: ``auto``).
        baseline_runs: more baseline runs (repeated runs: run-to-run CIs).
        treatment_runs: more treatment runs.
        **options: ``step`` (the step marker), or passed to the engine.
    """
    from ccdiag import distributed
    from ccdiag.engine import diagnose_pair as _engine

    selected, checked = select_rules(rules, rule_options)
    for side in (baseline, treatment, *(baseline_runs or []), *(treatment_runs or [])):
        _refuse_pair_folder(Path(side))  # before a folder is taken for ranks or runs
    b_runs = distributed.expand_runs(Path(baseline)) + [Path(p) for p in baseline_runs or []]
    t_runs = distributed.expand_runs(Path(treatment)) + [Path(p) for p in treatment_runs or []]
    if distributed.is_job(b_runs, t_runs):
        return distributed.analyze_job(
            b_runs,
            t_runs,
            scheduler=scheduler,
            step=options.pop("step", None),
            rules=selected,
            rule_options=checked,
            progress=progress,
        )
    pair = load_pair(baseline, treatment, step=options.pop("step", None), progress=progress)
    if progress is not None:
        progress("diagnosing", 0, 1)
    report = _engine(pair, rules=selected, rule_options=checked, **options)
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
    pair: Pair, report: Report, treatment: str | Path, out: str | Path
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


def pair(baseline: Trace, treatment: Trace) -> Pair:
    """Align two loaded traces (``load_trace``) and check they are the same workload.

    Raises:
        PairMismatchError: the two traces are not the same workload.
    """
    from ccdiag.pairing import pair_traces

    return pair_traces(baseline, treatment)


def diagnose_pair(
    pair: Pair,
    *,
    rules: Sequence[str] | None = None,
    rule_options: Mapping[str, Mapping[str, Any]] | None = None,
    **options: Any,
) -> Report:
    """``diagnose`` for an already loaded pair (``load_pair`` / ``pair``): the Report.

    ``rules`` and ``rule_options`` as in :func:`diagnose` (names checked, values typed).
    """
    from ccdiag.engine import diagnose_pair as _diagnose_pair

    selected, checked = select_rules(rules, rule_options)
    return _diagnose_pair(pair, rules=selected, rule_options=checked, **options)


def _as_pair(pair_or_paths: Pair | tuple[str | Path, str | Path]) -> Pair:
    if isinstance(pair_or_paths, (tuple, list)):
        return load_pair(*pair_or_paths)
    return pair_or_paths


def evidence_series(
    pair_or_paths: Pair | tuple[str | Path, str | Path], *, max_points: int = 1500
) -> dict[str, Any]:
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
    pair_or_paths: Pair | tuple[str | Path, str | Path],
    step_index: int,
    *,
    rank: int | None = None,
    max_events: int = 4000,
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


# --------------------------------------------------------------------------- rule selection
# ``ccdiag analyze --rule CODE --rule-option KEY=VALUE`` (like ``nsys analyze --rule``): the
# names are resolved and the option values checked against each rule's declared ``Options``
# before any trace is read, so a typo costs one line and exit status 2, not a long load.


def select_rules(
    rules: Sequence[str] | None = None,
    rule_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[tuple[type[Rule], ...] | None, dict[str, dict[str, Any]]]:
    """Resolve rule names and check option overrides against the rules' declared Options.

    Args:
        rules: codes, names or mechanisms (``find_rule``); None: every rule.
        rule_options: per rule, ``{option: value}``; a string value is converted to the
            option's type (``"500"`` for an int option).

    Returns:
        The rule classes (None: the registry) and the overrides keyed by rule code.

    Raises:
        InputError: an unknown rule or option, or a value that is not of the option's type.
    """
    from ccdiag.rules import find_rule

    selected = tuple(dict.fromkeys(find_rule(r) for r in rules)) if rules else None
    checked: dict[str, dict[str, Any]] = {}
    for key, overrides in (rule_options or {}).items():
        rule = find_rule(key)
        if selected is not None and rule not in selected:
            raise InputError(None, f"option for {rule.code}, which --rule does not select")
        declared = {n: d for n, d, _ in rule.option_docs()}
        for name, value in overrides.items():
            if name not in declared:
                known = ", ".join(declared) or "none"
                raise InputError(None, f"{rule.code} has no option '{name}'; its options: {known}")
            checked.setdefault(rule.code, {})[name] = _option_value(
                rule.code, name, value, declared[name]
            )
    return selected, checked


def parse_rule_options(
    items: Sequence[str], rules: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """``KEY=VALUE`` strings (``--rule-option``) as ``{rule code: {option: value}}``.

    ``KEY`` is ``RULE.OPTION`` (``LA01.min_toll_ns``) or a bare ``OPTION`` when exactly one of
    the selected rules (all rules when ``rules`` is None) declares it. Values are checked as in
    :func:`select_rules`; every problem is an ``InputError`` with one line.
    """
    from ccdiag.rules import REGISTRY, find_rule

    pool = select_rules(rules)[0] or REGISTRY
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InputError(
                None, f"--rule-option '{item}': expected KEY=VALUE, e.g. LA01.min_toll_ns=500"
            )
        rule_key, dot, name = key.strip().rpartition(".")
        if dot:
            code = find_rule(rule_key).code
        else:
            owners = [r.code for r in pool if name in {n for n, _, _ in r.option_docs()}]
            if not owners:
                known = "; ".join(
                    f"{r.code}: {', '.join(n for n, _, _ in r.option_docs())}" for r in pool
                )
                raise InputError(
                    None, f"--rule-option '{item}': no rule has option '{name}' ({known})"
                )
            if len(owners) > 1:
                raise InputError(
                    None,
                    f"--rule-option '{item}': '{name}' is an option of {', '.join(owners)}; "
                    f"write RULE.{name}, e.g. {owners[0]}.{name}",
                )
            code = owners[0]
        out.setdefault(code, {})[name] = value.strip()
    select_rules(rules, out)  # the same checks as the API's
    return out


def _option_value(code: str, name: str, value: Any, default: Any) -> Any:
    """``value`` as the type of the option's default (int, float, bool or str)."""
    kind = type(default)
    if not isinstance(value, str):
        if isinstance(value, kind) or (kind is float and isinstance(value, int)):
            return kind(value)
        raise InputError(None, f"{code}.{name} must be {kind.__name__}, got {value!r}")
    try:
        if kind is bool:
            return {"true": True, "1": True, "false": False, "0": False}[value.lower()]
        return kind(float(value)) if kind is int and "e" in value.lower() else kind(value)
    except (KeyError, ValueError):
        raise InputError(None, f"{code}.{name} must be {kind.__name__}, got '{value}'") from None


# --- predict (issue 13): the CC cost of a CC-off trace on a platform profile


def predict(
    trace_or_path: Trace | str | Path,
    platform: str | Path = "b200",
    step: str | None = None,
    unprofiled_step_ns: float | None = None,
) -> Any:
    """Predict the CC-on step time of a CC-off trace and its partition into mechanisms.

    Args:
        trace_or_path: a loaded trace, or any trace file / folder ``load_trace`` reads.
        platform: ``h100``, ``b200``, ``b300`` or the path of a platform YAML file.
        step: name of the step marker; detected when None.
        unprofiled_step_ns: the CC-off step time measured without a profiler, if known: the
            profiler's host overhead is taken out of the trace before CC costs are added.

    Returns:
        A ``ccdiag.predict.Prediction``: ``baseline_step_ns``, ``predicted_step_ns`` (median,
        low, high), ``mechanisms``, ``fixes`` (alternatives marked), ``warnings``.

    Raises:
        InputError: unknown platform (the message lists the known ones), a bad platform file,
            or a bad trace.
    """
    from ccdiag.predict import predict as _predict

    return _predict(trace_or_path, platform, step=step, unprofiled_step_ns=unprofiled_step_ns)


def list_platforms() -> list[str]:
    """The shipped platform profiles (``ccdiag predict --platform NAME``)."""
    from ccdiag.platforms import known_platforms

    return known_platforms()


def load_platform(name_or_path: str | Path) -> Any:
    """A platform profile (``ccdiag.platforms.Platform``) by name or YAML path, validated."""
    from ccdiag.platforms import load_platform as _load

    return _load(name_or_path)


def prediction_schema() -> dict[str, Any]:
    """JSON Schema of ``ccdiag predict --json`` (``docs/schema/predict-v<major>.json``)."""
    from ccdiag.predict import prediction_schema as _schema

    return _schema()
