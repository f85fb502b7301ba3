"""The ``ccdiag`` command line. Each command parses options, calls ``ccdiag.api``, renders.

Exit status: 0 success; 1 the analysis ran and a ``--fail-over`` threshold (or the
``--baseline-report`` share gate) was exceeded; 2 bad input (one line naming the file and the
problem, never a traceback). ``-`` means stdout wherever a command writes a file. Long parses
show progress bars with an ETA on a terminal's stderr (not with ``--quiet``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ccdiag.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

    from ccdiag.progress import Progress
    from ccdiag.verdict import Report

app = typer.Typer(
    name="ccdiag",
    help="Diagnose why GPU workloads run slower under NVIDIA Confidential Computing.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

StepOpt = Annotated[
    Optional[str],  # noqa: UP045 (typer needs Optional on 3.10)
    typer.Option(
        "--step", help="Step marker name (annotation or NVTX range); detected if omitted."
    ),
]


def _print_version(value: bool) -> None:
    if value:
        from ccdiag import __version__

        sys.stdout.write(f"ccdiag {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Diagnose why GPU workloads run slower under NVIDIA Confidential Computing."""
    # A callback keeps typer in multi-command mode (``ccdiag summary TRACE``) even while only
    # one command is registered.


def _write_json(obj: object, dest: str) -> None:
    """Write JSON to a file, or to stdout when dest is '-'."""
    _write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n", dest)


def _write_text(text: str, dest: str) -> None:
    """Write text (UTF-8) to a file, or to stdout when dest is '-'; unwritable: exit 2."""
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(dest).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(dest, f"cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _progress(enabled: bool, console: Console | None = None) -> Iterator[Progress | None]:
    """Rich progress bars with an ETA for ``api`` progress callbacks (stderr, terminals only)."""
    from rich.console import Console
    from rich.progress import BarColumn, TaskProgressColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as Bars

    con = console or Console(stderr=True)
    if not enabled or not con.is_terminal:
        yield None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
    )
    with Bars(*columns, console=con, transient=True) as bars:
        tasks: dict[str, TaskID] = {}

        def update(task: str, done: int | None = None, total: int | None = None) -> None:
            if done is None and total is None:  # a status line (nsys export)
                task, total = f"nsys export: {task.strip()[:50]}", None
                key = "nsys export"
            else:
                key = task
            if key not in tasks:
                tasks[key] = bars.add_task(task, total=total)
            bars.update(tasks[key], description=task, completed=done or 0, total=total)

        yield update


def _fail_over(report: Report, pct: float | None) -> bool:
    """``--fail-over``: the slowdown is significant and above ``pct`` % (says so on stderr)."""
    st = report.step_ns
    slowdown = 100.0 * st.delta / st.baseline if st.baseline else 0.0
    if pct is not None and st.significant and slowdown > pct:
        sys.stderr.write(f"ccdiag: slowdown {slowdown:.1f}% exceeds --fail-over {pct:g}%\n")
        return True
    return False


@app.command()
def summary(
    trace: Annotated[Path, typer.Argument(help="Trace file or folder of per-rank files.")],
    json_out: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--json", help="Write the summary as JSON to FILE, or '-' for stdout."),
    ] = None,
    step: StepOpt = None,
) -> None:
    """Counts and totals of one trace.

    Example: ccdiag summary sample_traces/decode_eager/baseline.json.gz --json -
    """
    from ccdiag import api
    from ccdiag.report.text import render_summary

    with _progress(json_out != "-") as progress:
        result = api.summarize(api.load_trace(trace, step=step, progress=progress))
    if json_out is not None:
        _write_json(result, json_out)
        if json_out == "-":
            return
    render_summary(result)


RuleOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--rule",
        "-r",
        metavar="RULE",
        help="Run only this rule (code, name or mechanism; repeat or comma-separate); "
        "the others' time stays unattributed. List them with 'ccdiag rules'.",
    ),
]
RuleOptionOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--rule-option",
        metavar="KEY=VALUE",
        help="Override a rule's option, e.g. LA01.min_toll_ns=500 (or min_toll_ns=500 when one "
        "selected rule declares it); repeat for more. 'ccdiag explain RULE' lists them.",
    ),
]
StepsCsvOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--steps-csv",
        metavar="FILE",
        help="Write the per-step table (both step times, the delta, each mechanism's ns) as "
        "CSV to FILE, or '-' for stdout.",
    ),
]


@app.command()
def analyze(
    baseline: Annotated[Path, typer.Argument(help="CC-off trace (file or folder of ranks).")],
    treatment: Annotated[Path, typer.Argument(help="CC-on trace (file or folder of ranks).")],
    step: StepOpt = None,
    json_out: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--json", help="Write the report as JSON to FILE, or '-' for stdout."),
    ] = None,
    fail_over: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--fail-over", help="Exit 1 when the significant slowdown exceeds PCT %."),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print the one-line verdict.")
    ] = False,
    rule: RuleOpt = None,
    rule_option: RuleOptionOpt = None,
    steps_csv: StepsCsvOpt = None,
    scheduler: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--scheduler",
            help="Where per-rank tasks run: auto (default), inprocess, local[:N] (a Dask "
            "LocalCluster of N worker processes) or tcp://HOST:PORT (an existing Dask cluster).",
        ),
    ] = None,
    baseline_run: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Option("--baseline-run", help="Another baseline run (repeatable): run-to-run CIs."),
    ] = None,
    treatment_run: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Option("--treatment-run", help="Another treatment run (repeatable)."),
    ] = None,
) -> None:
    """Partition the per-step slowdown of TREATMENT vs BASELINE into CC mechanisms.

    Folders of per-rank traces (or of runs, or extra --baseline-run / --treatment-run) are
    analyzed rank by rank as a job, on --scheduler, with per-rank verdicts and stragglers.

    Examples:

        ccdiag analyze baseline.json.gz treatment.json.gz --json report.json --fail-over 20

        ccdiag analyze base.json.gz cc.json.gz --rule LA01 --rule-option min_toll_ns=500

        ccdiag analyze base.json.gz cc.json.gz --steps-csv steps.csv

        ccdiag analyze base_ranks/ cc_ranks/ --scheduler local:8
    """
    from ccdiag import api
    from ccdiag.report.analysis import render_verdict

    if sum(d == "-" for d in (json_out, steps_csv)) > 1:
        raise InputError(None, "only one of --json/--steps-csv can write to stdout ('-')")
    rules = [r.strip() for item in rule or [] for r in item.split(",") if r.strip()] or None
    overrides = api.parse_rule_options(rule_option or [], rules)  # checked before any load
    with _progress(not quiet) as progress:
        report = api.diagnose(
            baseline,
            treatment,
            step=step,
            progress=progress,
            rules=rules,
            rule_options=overrides,
            scheduler=scheduler,
            baseline_runs=baseline_run,
            treatment_runs=treatment_run,
        )
    if json_out is not None:
        _write_text(api.render_report(report, "json"), json_out)
    if steps_csv is not None:
        _write_text(report.to_polars("steps").write_csv(), steps_csv)
    if "-" not in (json_out, steps_csv):
        render_verdict(report, quiet=quiet)
    _swap_hint(report)
    _partial_job(report)
    if _fail_over(report, fail_over):
        raise typer.Exit(1)


def _swap_hint(report: Report) -> None:
    """On stderr: a hint when BASELINE and TREATMENT look swapped (CC mode, or a speed-up)."""
    modes = (report.baseline.metadata.get("cc_mode"), report.treatment.metadata.get("cc_mode"))
    st = report.step_ns
    if (modes[0] == "on" and modes[1] != "on") or (modes[1] == "off" and modes[0] != "off"):
        why = f"the metadata says CC mode '{modes[0]}' for BASELINE, '{modes[1]}' for TREATMENT"
    elif st.significant and st.ratio < 0.9:
        why = f"the treatment is {st.ratio:.2f}x the baseline (faster)"
    else:
        return
    sys.stderr.write(
        f"ccdiag: hint: {why}: are BASELINE and TREATMENT swapped? "
        "Give the CC-off run first, the CC-on run second.\n"
    )


def _partial_job(report: Report) -> None:
    """A job with ranks that have no result: the report is out, and the exit status says so."""
    missing = report.job.missing_ranks if report.job is not None else []
    if not missing:
        return
    errors = {r.rank: r.error for r in report.ranks or [] if r.error}
    first = errors.get(missing[0], "no result")
    more = f" (and {len(missing) - 1} more rank(s))" if len(missing) > 1 else ""
    sys.stderr.write(
        f"ccdiag: partial result: rank {missing[0]} failed: {first}{more}"[:300] + "\n"
    )
    raise typer.Exit(2)


@app.command()
def explain(
    mechanism: Annotated[str, typer.Argument(help="Mechanism id, rule code or rule name.")],
) -> None:
    """Print a rule's documentation, e.g. ccdiag explain launch_toll."""
    from rich.console import Console
    from rich.markdown import Markdown

    from ccdiag import api

    Console().print(Markdown(api.explain(mechanism)))


@app.command()
def rules(
    json_out: Annotated[bool, typer.Option("--json", help="Print the registry as JSON.")] = False,
) -> None:
    """List the rules: code, name, mechanism, summary."""
    from rich.console import Console
    from rich.table import Table

    from ccdiag import api

    rows = api.list_rules()
    if json_out:
        _write_json(rows, "-")
        return
    table = Table("code", "name", "mechanism", "summary", show_edge=False)
    for r in rows:
        table.add_row(r["code"], r["name"], r["mechanism"], r["summary"])
    Console().print(table)


_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command(context_settings=_PASSTHROUGH)
def capture(
    cmd: Annotated[list[str], typer.Argument(help="The workload command, after --.")],
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("ccdiag_traces"),
    label: Annotated[str, typer.Option("--label", help="Run label, e.g. cc_off / cc_on.")] = "run",
    nsys: Annotated[bool, typer.Option("--nsys", help="Profile with Nsight Systems.")] = False,
) -> None:
    """Profile a live workload and write its trace plus a metadata file.

    The workload marks its steps with ccdiag.capture():

        with ccdiag.capture() as cap:
            for i in range(cap.total_steps):
                step(); cap.step()

    Examples: ccdiag capture --out runs --label cc_off -- python train.py ;
    ccdiag capture --nsys --out runs --label cc_on -- python train.py
    """
    from ccdiag import api

    raise typer.Exit(api.capture(cmd, out, label, nsys=nsys))


@app.command(context_settings=_PASSTHROUGH)
def emulate(
    cmd: Annotated[list[str], typer.Argument(help="The workload command, after --.")],
    platform: Annotated[str, typer.Option("--platform", help="h100 | b200 | b300")] = "b200",
    mechanisms: Annotated[
        str,
        typer.Option(
            "--mechanisms", help="Comma list: launch, copy, copy_pad, copy_sync, collective, uvm."
        ),
    ] = "launch,copy,collective",
    layer: Annotated[str, typer.Option("--layer", help="auto | runtime | driver")] = "auto",
    out: Annotated[
        Path, typer.Option("--out", help="Folder for counters and ground truth.")
    ] = Path("ccdiag_emulation"),
) -> None:
    """Run a workload on an ordinary NVIDIA GPU with CC behaviour injected.

    An LD_PRELOAD shim (built with the system C compiler on first use) adds the platform's
    kernel-launch toll and makes host<->device copies synchronous, serialized and padded to
    toll + bytes/bandwidth; NCCL collectives get a CTA cap. Writes ground_truth.json (what was
    injected, per process and step). Combine with capture:

        ccdiag emulate --platform b200 -- ccdiag capture --label cc_on -- python decode.py
    """
    from ccdiag import api

    mechs = [m.strip() for m in mechanisms.split(",") if m.strip()]
    raise typer.Exit(api.emulate(cmd, platform, mechs, layer=layer, out=out))


Out = Optional[str]  # noqa: UP045 (typer needs Optional on 3.10)
MdOpt = Annotated[Out, typer.Option("--md", help="Markdown for a GitHub issue: FILE or '-'.")]
HtmlOpt = Annotated[Out, typer.Option("--html", help="Self-contained HTML: FILE or '-'.")]
JsonOpt = Annotated[Out, typer.Option("--json", help="JSON (the analyze contract): FILE or '-'.")]
KeepPathsOpt = Annotated[
    bool,
    typer.Option(
        "--keep-paths", help="Keep paths, user and host names (default: scrubbed, file names)."
    ),
]
TimestampOpt = Annotated[
    bool, typer.Option("--timestamp", help="Record the time of writing (default: no time).")
]
FailOverOpt = Annotated[
    Optional[float],  # noqa: UP045
    typer.Option("--fail-over", metavar="PCT", help="Exit 1 when the slowdown exceeds PCT %."),
]
OldReportOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--baseline-report", metavar="OLD.json", help="Earlier report (--json) to compare with."
    ),
]
ShareGrowthOpt = Annotated[
    float,
    typer.Option(
        "--max-share-growth",
        metavar="PCT",
        help="With --baseline-report: exit 1 when a mechanism's share grew by more than PCT "
        "points.",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars, no summary.")]
BaselineArg = Annotated[Path, typer.Argument(help="CC-off trace (file or folder of ranks).")]
TreatmentArg = Annotated[Path, typer.Argument(help="CC-on trace (file or folder of ranks).")]


@app.command()
def report(
    baseline: BaselineArg,
    treatment: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Argument(
            help="CC-on trace (file or folder of ranks). Without it: what CC will cost BASELINE "
            "(a prediction, see ccdiag predict)."
        ),
    ] = None,
    md: MdOpt = None,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
    step: StepOpt = None,
    keep_paths: KeepPathsOpt = False,
    timestamp: TimestampOpt = False,
    fail_over: FailOverOpt = None,
    baseline_report: OldReportOpt = None,
    max_share_growth: ShareGrowthOpt = 5.0,
    quiet: QuietOpt = False,
    platform: Annotated[
        str, typer.Option("--platform", help="With one trace: the platform to predict for.")
    ] = "b200",
) -> None:
    """Write the diagnosis as files to attach to a bug report: Markdown, HTML, JSON.

    Any subset of --md/--html/--json (Markdown on stdout when none is given). Reports are
    deterministic and scrubbed of paths, environment, user and host names.

    Examples:

        ccdiag report base.json.gz cc.json.gz --md issue.md --html report.html

        ccdiag report base.sqlite cc.sqlite --json - | jq .attribution

        ccdiag report base/ cc/ --json new.json --baseline-report old.json --max-share-growth 5
    """
    from ccdiag import api

    targets = {"md": md, "html": html, "json": json_out}
    if not any(targets.values()):
        targets["md"] = "-"
    if sum(v == "-" for v in targets.values()) > 1:
        raise InputError(None, "only one of --md/--html/--json can write to stdout ('-')")
    if treatment is None:  # one CC-off trace: the prediction section (issue 13)
        _report_prediction(baseline, platform, targets, step, quiet)
        return
    old = api.load_report(baseline_report) if baseline_report is not None else None
    with _progress(not quiet) as progress:
        rep = api.diagnose(baseline, treatment, step=step, progress=progress)
    stamp = datetime.now(timezone.utc) if timestamp else None
    sources = {"baseline": str(baseline.resolve()), "treatment": str(treatment.resolve())}
    for fmt, dest in targets.items():
        if dest:
            text = api.render_report(
                rep, fmt, keep_paths=keep_paths, timestamp=stamp, sources=sources
            )
            _write_text(text, dest)
    if not quiet:
        done = ", ".join(f"{f} -> {'stdout' if d == '-' else d}" for f, d in targets.items() if d)
        sys.stderr.write(f"ccdiag: {rep.verdict}\nccdiag: wrote {done}\n")
    failed = _fail_over(rep, fail_over)
    if old is not None:
        rows = api.compare_reports(old, rep, max_share_growth=max_share_growth)
        failed |= _share_gate(rows, max_share_growth)
    if failed:
        raise typer.Exit(1)


def _report_prediction(
    trace: Path, platform: str, targets: dict[str, str | None], step: str | None, quiet: bool
) -> None:
    """``ccdiag report TRACE``: the prediction as Markdown / HTML / JSON files."""
    from ccdiag import api
    from ccdiag.report.predict import render_html, render_markdown

    plat = api.load_platform(platform)
    with _progress(not quiet) as progress:
        pred = api.predict(api.load_trace(trace, step=step, progress=progress), plat)
    render = {
        "md": render_markdown,
        "html": render_html,
        "json": lambda p: p.model_dump_json(indent=2) + "\n",
    }
    for fmt, dest in targets.items():
        if dest:
            _write_text(render[fmt](pred), dest)
    if not quiet:
        done = ", ".join(f"{f} -> {'stdout' if d == '-' else d}" for f, d in targets.items() if d)
        sys.stderr.write(f"ccdiag: prediction for {plat.name}; wrote {done}\n")


def _share_gate(rows: list[dict], limit: float) -> bool:
    """Print the mechanisms whose share grew beyond ``limit`` points; True when any did."""
    bad = [r for r in rows if r["exceeded"]]
    for r in bad:
        sys.stderr.write(
            f"ccdiag: {r['mechanism']} share {100 * r['old_share']:.1f}% -> "
            f"{100 * r['new_share']:.1f}% (+{r['growth_points']:.1f} points > "
            f"--max-share-growth {limit:g})\n"
        )
    return bool(bad)


@app.command()
def annotate(
    baseline: BaselineArg,
    treatment: Annotated[Path, typer.Argument(help="CC-on trace: the one that gets annotated.")],
    out: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--out",
            "-o",
            help="Output: FILE (.gz: gzip) or '-'. Default: TREATMENT's name with "
            "'.annotated.json.gz', in the current folder.",
        ),
    ] = None,
    step: StepOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Write TREATMENT with ccdiag's findings as extra tracks, for Perfetto UI or chrome://tracing.

    Adds a 'ccdiag diagnosis' process: a verdict track, step boundaries, and one track per
    mechanism holding the time attributed to it in each step (evidence numbers in the args).
    A Kineto trace is copied with the events spliced in; nsys and other inputs become a
    Chrome-trace JSON built from the parsed events.

    Examples:

        ccdiag annotate base.json.gz cc.json.gz   (writes cc.annotated.json.gz)

        ccdiag annotate base.sqlite cc.sqlite -o cc.trace.json   (open it in ui.perfetto.dev)
    """
    from ccdiag import api

    out = out or _annotated_name(treatment)
    with _progress(not quiet) as progress:
        result = api.annotate(baseline, treatment, out, step=step, progress=progress)
    if not quiet:
        added = sum(result["added"].values())
        dest = "stdout" if out == "-" else out
        sys.stderr.write(
            f"ccdiag: {result['report'].verdict}\nccdiag: wrote {dest} ({result['mode']}, "
            f"{added} events added on the 'ccdiag diagnosis' tracks)\n"
        )


def _annotated_name(treatment: Path) -> str:
    """``cc.json.gz`` -> ``cc.annotated.json.gz`` (a folder or ``cc.sqlite``: ``cc.annotated...``)."""
    name = treatment.resolve().name
    for suffix in (".pt.trace.json.gz", ".json.gz", ".pt.trace.json", ".json", ".csv.gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    else:
        name = Path(name).stem if treatment.is_file() else name
    return f"{name}.annotated.json.gz"


@app.command()
def schema(
    out: Annotated[str, typer.Option("--out", "-o", help="FILE, or '-' for stdout.")] = "-",
    predict_schema: Annotated[
        bool, typer.Option("--predict", help="The schema of `ccdiag predict --json` instead.")
    ] = False,
) -> None:
    """Print the JSON Schema of the report contract (analyze --json, report --json).

    The same schema is published as docs/schema/report-v<major>.json.

    Example:

        ccdiag schema | python -m json.tool
    """
    from ccdiag import api

    _write_json(api.prediction_schema() if predict_schema else api.report_schema(), out)


# --- predict (issue 13) -------------------------------------------------------------------

PlatformOpt = Annotated[
    str,
    typer.Option(
        "--platform",
        help="h100 | b200 | b300, or a platform YAML file (copy one from ccdiag/platforms/).",
    ),
]


@app.command()
def predict(
    trace: Annotated[Path, typer.Argument(help="CC-off trace (file or folder of ranks).")],
    platform: PlatformOpt = "b200",
    json_out: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--json", help="Write the prediction as JSON to FILE, or '-' for stdout."),
    ] = None,
    step: StepOpt = None,
    quiet: QuietOpt = False,
    unprofiled_step_ms: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(
            "--unprofiled-step-ms",
            help="The CC-off step time measured WITHOUT a profiler (ms): the trace's profiler "
            "overhead is taken out before CC costs are added.",
        ),
    ] = None,
) -> None:
    """Predict the CC-on step time of a CC-off trace, its mechanisms, and what each fix recovers.

    Examples:

        ccdiag predict baseline.json.gz --platform b200

        ccdiag predict run.sqlite --platform ./my_platform.yaml --json prediction.json
    """
    from ccdiag import api
    from ccdiag.report.predict import render_text

    plat = api.load_platform(platform)  # a bad --platform fails before the trace is parsed
    with _progress(not quiet and json_out != "-") as progress:
        tr = api.load_trace(trace, step=step, progress=progress)
    if unprofiled_step_ms is not None and not unprofiled_step_ms > 0:
        raise InputError(None, "--unprofiled-step-ms must be a positive number of milliseconds")
    unprof = unprofiled_step_ms * 1e6 if unprofiled_step_ms else None
    pred = api.predict(tr, plat, unprofiled_step_ns=unprof)
    for w in pred.warnings:
        sys.stderr.write(f"ccdiag: warning: {w}\n")
    if json_out is not None:
        _write_text(pred.model_dump_json(indent=2) + "\n", json_out)
    if json_out != "-" and not quiet:
        render_text(pred.model_copy(update={"warnings": []}))


@app.command("app")
def app_cmd(
    baseline: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Argument(help="CC-off trace to open first (default: a shipped sample pair)."),
    ] = None,
    treatment: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Argument(help="CC-on trace to open first."),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="Address to bind; other machines can reach it if not 127.0.0.1."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 8050,
    trace_dir: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--trace-dir", help="Folder of trace pairs the browser may pick from."),
    ] = None,
    max_upload_mb: Annotated[
        float, typer.Option("--max-upload-mb", help="Largest upload accepted per side (MB).")
    ] = 200.0,
    max_analysis_mb: Annotated[
        float,
        typer.Option(
            "--max-analysis-mb", help="Memory one analysis may use, in its worker process (MB)."
        ),
    ] = 2048.0,
    max_analysis_s: Annotated[
        float, typer.Option("--max-analysis-s", help="Time one analysis may take (s).")
    ] = 300.0,
    upload_quota_mb: Annotated[
        float,
        typer.Option("--upload-quota-mb", help="Uploads kept at most (MB); oldest deleted first."),
    ] = 2000.0,
) -> None:
    """Open the dashboard: overview, one page per mechanism, timeline, fixes, export.

    Example: ccdiag app --trace-dir ./traces   (then open http://127.0.0.1:8050)
    """
    import importlib.util

    if importlib.util.find_spec("dash") is None:
        raise InputError(
            None, "the dashboard needs Dash, which is not installed: pip install 'ccdiag[app]'"
        )
    from ccdiag.app import create_app, run

    if (baseline is None) != (treatment is None):
        raise InputError(baseline or treatment, "give both BASELINE and TREATMENT, or neither")
    for p in (baseline, treatment):
        if p is not None and not p.exists():
            raise InputError(p, "no such file or folder")
    if trace_dir is not None and not trace_dir.is_dir():
        raise InputError(trace_dir, "--trace-dir is not a folder")
    sys.stderr.write(f"ccdiag app: http://{host}:{port}/\n")
    run(
        create_app(
            baseline,
            treatment,
            trace_dir=trace_dir,
            max_upload_mb=max_upload_mb,
            max_analysis_mb=max_analysis_mb,
            max_analysis_s=max_analysis_s,
            upload_quota_mb=upload_quota_mb,
        ),
        host,
        port,
    )


def main() -> None:
    """Entry point: runs the typer app, turning input errors into exit status 2."""
    if not sys.warnoptions:  # library warnings (polars ...) are not ccdiag's messages (#18)
        import warnings

        warnings.simplefilter("ignore")
    try:
        app()
    except InputError as exc:
        sys.stderr.write(f"ccdiag: error: {exc.line()}\n")
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("ccdiag: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
