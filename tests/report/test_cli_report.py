"""``ccdiag report`` as a user and a CI job run it: files, stdout, gates, errors, help, completion,
progress."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import report_goldens as rg
from rich.console import Console

from ccdiag import api
from ccdiag.cli import _progress

EAGER = [str(rg.SAMPLES / p) for p in rg.PAIRS["decode_eager"]]


def _ccdiag(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_report_writes_the_three_formats(tmp_path: Path):
    # arrange
    md, html, js = (tmp_path / f"r.{x}" for x in ("md", "html", "json"))
    # act
    out = _ccdiag("report", *EAGER, "--md", str(md), "--html", str(html), "--json", str(js))
    # assert
    assert out.returncode == 0, out.stderr
    assert md.read_text() == rg.render("decode_eager", "md")
    assert js.read_text() == rg.render("decode_eager", "json")
    assert rg.without_plotly_js(html.read_text()) == rg.render("decode_eager", "html")
    assert out.stdout == ""
    assert "wrote md -> " in out.stderr and "launch_toll" in out.stderr


def test_report_prints_markdown_when_no_format_is_given():
    # act
    out = _ccdiag("report", *EAGER, "-q")
    # assert
    assert out.returncode == 0, out.stderr
    assert out.stdout == rg.render("decode_eager", "md") and out.stderr == ""


def test_fail_over_exits_1():
    # act
    out = _ccdiag("report", *EAGER, "--json", os.devnull, "--fail-over", "10", "-q")
    # assert
    assert out.returncode == 1
    assert "exceeds --fail-over 10%" in out.stderr


def test_share_gate_fails_when_a_mechanism_grew_and_names_it(tmp_path: Path):
    # arrange: an earlier report where the top mechanism had 12 points less of the slowdown
    data = json.loads(rg.golden_path("decode_eager", "json").read_text())
    top = data["attribution"][0]
    now = top["share"]
    top["share"] = round(now - 0.12, 4)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    # act
    out = _ccdiag("report", *EAGER, "--json", os.devnull, "--baseline-report", str(old), "-q")
    loose = _ccdiag(
        "report", *EAGER, "--json", os.devnull, "--baseline-report", str(old), "--max-share-growth", "15", "-q"
    )  # fmt: skip
    # assert
    assert out.returncode == 1
    expected = (
        f"ccdiag: {top['mechanism']} share {100 * top['share']:.1f}% -> {100 * now:.1f}% "
        f"(+{100 * (now - top['share']):.1f} points > --max-share-growth 5)"
    )
    assert out.stderr.splitlines()[0] == expected
    assert loose.returncode == 0, loose.stderr


def test_compare_reports_rows():
    # arrange
    new = rg.report_of("decode_eager")
    old = new.model_copy(update={"attribution": new.attribution[1:]})  # the top one was absent
    # act
    rows = api.compare_reports(old, new, max_share_growth=5)
    # assert
    top = new.attribution[0]
    assert rows[0]["mechanism"] == top.mechanism and rows[0]["exceeded"]
    assert rows[0]["old_share"] == 0.0
    assert rows[0]["growth_points"] == pytest.approx(100 * top.share, abs=0.01)
    assert rows[-1]["mechanism"] == "unattributed" and not rows[-1]["exceeded"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--baseline-report", "{tmp}/missing.json"], "missing.json: cannot read"),
        (["--md", "{tmp}/no/such/dir/r.md"], "r.md: cannot write"),
        (["--md", "-", "--json", "-"], "only one of --md/--html/--json can write to stdout ('-')"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: list[str], line: str, tmp_path: Path):
    # act
    out = _ccdiag("report", *EAGER, *(a.format(tmp=tmp_path) for a in args), "-q")
    # assert
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"ccdiag: error: {line}")
    assert "Traceback" not in out.stderr


def test_bad_trace_exits_2_naming_the_file(tmp_path: Path):
    # arrange
    bad = tmp_path / "treatment.json"
    bad.write_text("not json")
    # act
    out = _ccdiag("report", EAGER[0], str(bad), "-q")
    # assert
    assert out.returncode == 2 and out.stderr.startswith("ccdiag: error: treatment.json: ")


@pytest.mark.parametrize("command", ["report", "annotate", "schema", "analyze", "summary"])
def test_help_has_examples(command: str):
    # act
    out = _ccdiag(command, "--help", env={"COLUMNS": "120"})
    # assert
    assert out.returncode == 0
    assert "Example" in out.stdout and f"ccdiag {command}" in out.stdout


def _as_ccdiag(*args: str, env: dict[str, str]) -> str:
    """Run the CLI under the program name the installed ``ccdiag`` script has, in a clean
    environment (PATH, a locale, an empty HOME): nothing an earlier test left in ``os.environ``
    or in the home directory reaches it (in full-suite runs this once printed nothing)."""
    code = "import sys; from ccdiag.cli import app; app(sys.argv[1:], prog_name='ccdiag')"
    with tempfile.TemporaryDirectory() as home:
        clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LC_ALL": "C.UTF-8"}
        out = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env={**clean, **env},
            timeout=60,
        )
    assert out.returncode == 0 and out.stdout, (args, env, out.returncode, out.stderr[-2000:])
    return out.stdout


def test_shell_completion_completes_commands_and_options():
    # act: what bash asks the program when the user presses TAB (typer / click protocol)
    bash = {"_CCDIAG_COMPLETE": "complete_bash", "COMP_CWORD": "1"}
    cmds = _as_ccdiag(env={**bash, "COMP_WORDS": "ccdiag rep"})
    opts = _as_ccdiag(env={**bash, "COMP_WORDS": "ccdiag report --max", "COMP_CWORD": "2"})
    script = _as_ccdiag("--show-completion", "bash", env={"SHELL": "/bin/bash"})
    # assert
    assert "report" in cmds.split()
    assert "--max-share-growth" in opts.split()
    assert "_CCDIAG_COMPLETE=complete_bash" in script and "complete -o default" in script


def test_progress_callback_hears_the_parsers_and_the_rules():
    # arrange
    calls: list[tuple] = []
    # act
    api.diagnose(*EAGER, progress=lambda task, done=None, total=None: calls.append((task, done, total)))  # fmt: skip
    # assert
    tasks = list(dict.fromkeys(c[0] for c in calls))
    assert tasks == ["reading baseline.json.gz", "reading treatment.json.gz", "diagnosing"]
    for task in tasks:
        mine = [c for c in calls if c[0] == task]
        assert mine[-1][1] == mine[-1][2]  # ends complete
        assert [c[1] for c in mine] == sorted(c[1] for c in mine)  # never goes back


def test_nsys_progress_counts_table_parts():
    # arrange
    calls: list[tuple] = []
    path = rg.SAMPLES / "decode_eager_nsys" / "treatment.sqlite"
    # act
    api.load_trace(path, progress=lambda t, d=None, n=None: calls.append((t, d, n)))
    # assert
    assert calls and all(t == "reading treatment.sqlite" for t, _, _ in calls)
    assert calls[-1][1] == calls[-1][2] >= 5


def test_progress_bars_draw_on_a_terminal_and_stay_silent_elsewhere():
    # arrange
    term = io.StringIO()
    pipe = io.StringIO()
    # act
    with _progress(True, Console(file=term, force_terminal=True, width=100)) as cb:
        assert cb is not None
        cb("reading x.json.gz", 50, 100)
        cb("[3/8] Processing events...")  # an nsys export status line
        cb("reading x.json.gz", 100, 100)
    with _progress(True, Console(file=pipe, force_terminal=False)) as none:
        assert none is None
    with _progress(False, Console(file=pipe, force_terminal=True)) as quiet:
        assert quiet is None
    # assert
    assert "reading x.json.gz" in term.getvalue() and "nsys export" in term.getvalue()
    assert pipe.getvalue() == ""
