"""CLI conventions (#16): --version, python -m ccdiag, --rule / --rule-option, --steps-csv, the
swapped-pair hint, a pair folder given as ranks, the default annotate output, `ccdiag app`
without Dash, and no '+-' anywhere. Real sample pairs, real subprocesses."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ccdiag import __version__, api
from ccdiag.errors import InputError

REPO = Path(__file__).resolve().parents[1]
GRAPH = REPO / "sample_traces" / "decode_graph"  # the smallest single-rank sample pair (0.3 MB)
B, T = GRAPH / "baseline.json.gz", GRAPH / "treatment.json.gz"


def _cli(
    *args: str, cwd: Path | None = None, module: str = "ccdiag.cli"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd
    )


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ccdiag: error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("module", ["ccdiag", "ccdiag.cli"])
def test_version_and_python_dash_m(module: str) -> None:
    # act
    proc = _cli("--version", module=module)
    # assert
    assert proc.returncode == 0 and proc.stdout == f"ccdiag {__version__}\n"


def test_python_dash_m_runs_commands() -> None:
    # act: a command, not only --version, through python -m ccdiag
    proc = _cli("rules", "--json", module="ccdiag")
    # assert: the registry, and --version's callback did not print
    assert proc.returncode == 0, proc.stderr
    assert {r["code"] for r in json.loads(proc.stdout)} >= {"LA01", "CP01"}


def test_rule_selection_options_and_steps_csv(tmp_path: Path) -> None:
    # act: only LA01, one option changed by its bare name, the per-step table as CSV
    out = tmp_path / "steps.csv"
    proc = _cli(
        "analyze",
        str(B),
        str(T),
        "--rule",
        "LA01",
        "--rule-option",
        "min_toll_ns=500",
        "--steps-csv",
        str(out),
        "--json",
        str(tmp_path / "r.json"),
        "-q",
    )
    # assert
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [r["code"] for r in report["rules"]] == ["LA01"]
    assert [a["mechanism"] for a in report["attribution"]] == ["launch_toll"]
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    per_step = report["partition"]["per_step"]
    assert len(rows) == len(per_step) > 10
    assert set(rows[0]) == {
        "rank",
        "index",
        "baseline_step",
        "treatment_step",
        "delta_ns",
        "kept",
        "launch_toll_ns",
        "unattributed_ns",
    }
    for row, step in zip(rows, per_step):
        assert int(row["delta_ns"]) == step["delta"]
        assert int(row["launch_toll_ns"]) + int(row["unattributed_ns"]) == step["delta"]


def test_rule_option_changes_the_outcome() -> None:
    # arrange: a toll threshold above any measured toll (the graph launch toll is ~89 us)
    selected, opts = api.select_rules(["LA01"], {"launch_toll": {"min_toll_ns": "1e6"}})
    # act
    r = api.diagnose(B, T, rules=["LA01"], rule_options={"LA01": {"min_toll_ns": 1_000_000}})
    # assert: the option reached the rule (typed), and the rule no longer fires
    assert [c.code for c in selected or ()] == ["LA01"] and opts == {
        "LA01": {"min_toll_ns": 1_000_000}
    }
    assert [o.outcome for o in r.rules] == ["clean"] and r.attribution == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--rule", "XX99"], "unknown rule or mechanism 'XX99'"),
        (
            ["--rule", "LA01", "--rule-option", "min_tol=5"],
            "no rule has option 'min_tol' (LA01: min_toll_ns",
        ),
        (["--rule-option", "min_ratio=2"], "'min_ratio' is an option of CP01, CO01, UV01, HS01"),
        (["--rule-option", "CP01.min_ratio=abc"], "CP01.min_ratio must be float, got 'abc'"),
        (["--rule-option", "LA01.min_toll_ns=1.5"], "LA01.min_toll_ns must be int, got '1.5'"),
        (["--rule-option", "min_toll_ns"], "expected KEY=VALUE"),
        (["--rule", "LA01", "--rule-option", "CP01.min_ratio=2"], "which --rule does not select"),
        (["--json", "-", "--steps-csv", "-"], "only one of --json/--steps-csv"),
    ],
)
def test_bad_rule_options_are_one_line_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    # act: the traces do not exist: options are checked before anything is read
    proc = _cli("analyze", str(tmp_path / "b.json"), str(tmp_path / "t.json"), *args)
    # assert
    assert says in _one_error_line(proc)


def test_swapped_pair_gets_a_hint_and_no_plus_minus() -> None:
    # act: the CC-on run given as the baseline
    proc = _cli("analyze", str(T), str(B))
    # assert: the ratio is below 1, the hint says so, the delta reads "-140.9 us" not "+-"
    assert proc.returncode == 0, proc.stderr
    assert "0.88x the baseline (-" in proc.stdout
    assert (
        "hint: the treatment is 0.88x the baseline (faster): are BASELINE and TREATMENT swapped?"
        in proc.stderr
    )
    assert "+-" not in proc.stdout + proc.stderr


def test_metadata_cc_mode_gives_the_hint(tmp_path: Path) -> None:
    # arrange: the right order, but the sidecars say the baseline ran with CC on
    for side, mode in (("baseline", "on"), ("treatment", "off")):
        shutil.copy(GRAPH / f"{side}.json.gz", tmp_path / f"{side}.json.gz")
        meta = json.loads((GRAPH / f"{side}.meta.json").read_text())
        (tmp_path / f"{side}.meta.json").write_text(json.dumps({**meta, "cc_mode": mode}))
    # act
    proc = _cli(
        "analyze", str(tmp_path / "baseline.json.gz"), str(tmp_path / "treatment.json.gz"), "-q"
    )
    # assert
    assert proc.returncode == 0, proc.stderr
    assert "hint: the metadata says CC mode 'on' for BASELINE, 'off' for TREATMENT" in proc.stderr


def test_no_hint_for_the_right_order() -> None:
    proc = _cli("analyze", str(B), str(T), "-q")
    assert proc.returncode == 0 and "hint" not in proc.stderr


def test_a_pair_folder_is_not_a_rank_folder() -> None:
    # act: the sample folder (baseline + treatment) where one trace of ranks is expected
    line = _one_error_line(_cli("analyze", str(GRAPH), str(GRAPH)))
    # assert
    assert "decode_graph: this folder holds a baseline/treatment pair" in line
    assert "ccdiag analyze decode_graph/baseline.json.gz decode_graph/treatment.json.gz" in line


def test_a_rank_folder_still_loads(tmp_path: Path) -> None:
    # arrange: rank files named after their role are still rank files
    for r in (0, 1):
        shutil.copy(B, tmp_path / f"baseline_rank{r}.json.gz")
    # act / assert: no pair-folder refusal
    trace = api.load_trace(tmp_path)
    assert sorted(trace.events["rank"].unique().to_list()) == [0, 1]


def test_pair_folder_check_names_cc_off_cc_on(tmp_path: Path) -> None:
    shutil.copy(B, tmp_path / "cc_off.json.gz")
    shutil.copy(T, tmp_path / "cc_on.json.gz")
    with pytest.raises(InputError, match="holds a cc_off/cc_on pair"):
        api.load_trace(tmp_path)


def test_annotate_default_output_name(tmp_path: Path) -> None:
    # act: no -o
    proc = _cli("annotate", str(B), str(T), cwd=tmp_path)
    # assert: treatment.annotated.json.gz in the current folder, a valid gzip'd trace
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "treatment.annotated.json.gz"
    assert "wrote treatment.annotated.json.gz" in proc.stderr
    assert "ccdiag diagnosis" in gzip.decompress(out.read_bytes()).decode()


def test_app_without_dash_says_how_to_get_it() -> None:
    # arrange: an interpreter where Dash cannot be found (the CLI-only install)
    code = (
        "import importlib.util as u, sys; f = u.find_spec\n"
        "u.find_spec = lambda n, *a: None if n == 'dash' else f(n, *a)\n"
        "sys.argv = ['ccdiag', 'app']\n"
        "from ccdiag.cli import main; main()\n"
    )
    # act
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    # assert
    line = _one_error_line(proc)
    assert "pip install 'ccdiag[app]'" in line


def test_no_plus_minus_in_verdicts_of_faster_treatments() -> None:
    # the engine's verdict line for a negative delta (a whole report, not only the CLI)
    r = api.diagnose(T, B)
    assert r.step_ns.delta < 0 and "+-" not in r.verdict and "(-" in r.verdict
    for fmt in ("md", "json"):  # (the HTML report embeds plotly.js, whose code has '+-')
        assert "+-" not in api.render_report(r, fmt)


def _cited_files(text: str) -> set[str]:
    return set(re.findall(r"[\w./-]+\.(?:md|json|yaml|toml)\b", text))


def test_user_facing_text_cites_only_files_in_the_repo() -> None:
    # arrange: every rule's documentation and every command's --help
    from typer.main import get_command

    from ccdiag.cli import app

    texts = [api.explain(r["code"]) for r in api.list_rules()]
    group = get_command(app)
    texts += [group.get_help(click.Context(group))]
    texts += [c.get_help(click.Context(c, info_name=n)) for n, c in group.commands.items()]
    repo_files = {
        p.relative_to(REPO).as_posix()
        for p in REPO.rglob("*")
        if not any(part.startswith(".") for part in p.relative_to(REPO).parts)
    }
    names = {Path(f).name for f in repo_files}
    # act
    cited = set().union(*(_cited_files(t) for t in texts))
    # assert: a cited file is a path of the repo, or a file name ccdiag writes or reads
    missing = {
        c
        for c in cited
        if c.lstrip("./") not in repo_files
        and Path(c).name not in names
        and not re.fullmatch(
            r"[\w.-]*(report|new|old|issue|r|b|t)\.(md|json)|[\w.-]+\.meta\.json", Path(c).name
        )
    }
    assert not missing, missing
    assert not any(re.search(r"DESIGN\.md|cc-cost-model", t) for t in texts)
