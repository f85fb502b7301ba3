"""The ``ccdiag`` command line. Each command parses options, calls ``ccdiag.api``, renders.

Exit status: 0 success; 1 the analysis ran and a ``--fail-over`` threshold was exceeded;
2 bad input (one line naming the file and the problem, never a traceback).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ccdiag.errors import InputError

app = typer.Typer(
    name="ccdiag",
    help="Diagnose why GPU workloads run slower under NVIDIA Confidential Computing.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

StepOpt = Annotated[
    Optional[str],  # noqa: UP045 (typer needs Optional on 3.10)
    typer.Option("--step", help="Step marker name (annotation or NVTX range); detected if omitted."),
]


@app.callback()
def _root() -> None:
    """Diagnose why GPU workloads run slower under NVIDIA Confidential Computing."""
    # A callback keeps typer in multi-command mode (``ccdiag summary TRACE``) even while only
    # one command is registered.


def _write_json(obj: object, dest: str) -> None:
    """Write JSON to a file, or to stdout when dest is '-'."""
    text = json.dumps(obj, indent=2, sort_keys=False) + "\n"
    if dest == "-":
        sys.stdout.write(text)
    else:
        Path(dest).write_text(text)


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

    result = api.summarize(api.load_trace(trace, step=step))
    if json_out is not None:
        _write_json(result, json_out)
        if json_out == "-":
            return
    render_summary(result)


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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print the one-line verdict.")] = False,
) -> None:
    """Partition the per-step slowdown of TREATMENT vs BASELINE into CC mechanisms.

    Example: ccdiag analyze baseline.json.gz treatment.json.gz --json report.json --fail-over 20
    """
    from ccdiag import api
    from ccdiag.report.analysis import render_verdict

    report = api.diagnose(baseline, treatment, step=step)
    if json_out is not None:
        _write_json(report.model_dump(mode="json"), json_out)
    if json_out != "-":
        render_verdict(report, quiet=quiet)
    st = report.step_ns
    slowdown = 100.0 * st.delta / st.baseline if st.baseline else 0.0
    if fail_over is not None and st.significant and slowdown > fail_over:
        sys.stderr.write(f"ccdiag: slowdown {slowdown:.1f}% exceeds --fail-over {fail_over:g}%\n")
        raise typer.Exit(1)


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


def main() -> None:
    """Entry point: runs the typer app, turning input errors into exit status 2."""
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
