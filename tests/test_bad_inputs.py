"""Every bad input of the corpus (tests/bad_inputs/build.py) through the real command line.

Exit 2 means exactly one line on stderr, ``ccdiag: error: <file name>: <reason>``, naming the
file and matching the case's reason; no traceback ever. Exit 0 means the trace was read and the
output says what the case expects (warnings shown, skipped events counted).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bad_inputs.build import ADDED_SKIPS, CASES, BadCase, build, readme
from conftest import REPO, shared_path

from ccdiag import api

IDS = [c.name for c in CASES]


def _run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CCDIAG_GZIP_")}
    return subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", *args],
        cwd=cwd,
        env={**base, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _get(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bad_input(case: BadCase, tmp_path: Path):
    # arrange
    folder = build(case, tmp_path / case.name)
    # act
    result = _run(list(case.args), folder, case.env)
    # assert
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == case.exit, (result.returncode, result.stderr[-2000:])
    if case.exit == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        named = {Path(a).name for a in case.args if not a.startswith("-")}
        m = re.match(r"ccdiag: error: (?P<file>[^:]+): (?P<reason>.+)$", lines[0])
        assert m is not None and m["file"] in named, lines[0]
        assert re.search(case.expect, m["reason"]), lines[0]
        return
    assert re.search(case.expect, result.stdout + result.stderr), result.stdout[-3000:]
    if case.json:
        doc = json.loads(result.stdout)
        for path, want in case.json.items():
            assert _get(doc, path) == want, (path, _get(doc, path))


def test_the_readme_lists_every_case():
    # the README is generated from CASES: regenerate with `python tests/bad_inputs/build.py --readme`
    assert (REPO / "tests" / "bad_inputs" / "README.md").read_text() == readme()


def test_nothing_lost_summary_and_analyze_count_the_added_bad_events(tmp_path: Path):
    # arrange: the real eager decode trace plus 7 negative durations, 5 NaN timestamps and
    # 3 unknown categories (copies of its own cpu_ops)
    case = next(c for c in CASES if c.name == "negative_and_nan_times")
    bad = build(case, tmp_path) / "t.json.gz"
    clean = shared_path("traces", "h200_decode_eager.kineto.json.gz")
    # act
    clean_summary = json.loads(_run(["summary", str(clean), "--json", "-"], tmp_path).stdout)
    bad_summary = json.loads(_run(["summary", str(bad), "--json", "-"], tmp_path).stdout)
    analyzed = _run(["analyze", str(clean), str(bad), "--json", "-"], tmp_path)
    report = json.loads(analyzed.stdout)
    text = _run(["analyze", str(clean), str(bad)], tmp_path).stdout
    # assert: exactly the added events, by reason, in summary JSON and analyze JSON
    added = {
        k: bad_summary["skipped"].get(k, 0) - clean_summary["skipped"].get(k, 0)
        for k in set(bad_summary["skipped"]) | set(clean_summary["skipped"])
    }
    assert {k: v for k, v in added.items() if v} == ADDED_SKIPS
    assert bad_summary["n_events"] == clean_summary["n_events"]
    assert report["treatment"]["skipped"] == bad_summary["skipped"]
    assert report["baseline"]["skipped"] == clean_summary["skipped"]
    # and so do the terminal report, the Markdown/HTML report and the dashboard's overview
    for reason, n in ADDED_SKIPS.items():
        row = re.search(rf"{re.escape(reason)}\s*[│|]\s*[\d,]+\s*[│|]\s*([\d,]+)", text)
        assert row is not None, reason
        base_n = clean_summary["skipped"].get(reason, 0)
        assert int(row[1].replace(",", "")) == base_n + n
    rep = api.diagnose(clean, bad)
    md = api.render_report(rep, "md")
    assert all(f"| {reason} |" in md for reason in ADDED_SKIPS)
    from ccdiag.app.pages import overview

    shown = str(overview.content(rep))
    assert all(f"Td('{reason}')" in shown for reason in ADDED_SKIPS)
