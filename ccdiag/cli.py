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
        str, typer.Option("--mechanisms", help="Comma list: launch, copy, copy_pad, copy_sync, collective, uvm.")
    ] = "launch,copy,collective",
    layer: Annotated[str, typer.Option("--layer", help="auto | runtime | driver")] = "auto",
    out: Annotated[Path, typer.Option("--out", help="Folder for counters and ground truth.")] = Path(
        "ccdiag_emulation"
    ),
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
