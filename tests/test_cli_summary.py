"""``ccdiag summary`` end to end, as a user runs it (a subprocess)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from goldens import shared_path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_summary_json_to_stdout():
    out = _run(
        "summary", str(shared_path("traces", "h200_decode_graph.kineto.json.gz")), "--json", "-"
    )
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["launches"]["graph_launches"] == 10


def test_summary_json_to_file_and_table(tmp_path: Path):
    dest = tmp_path / "s.json"
    out = _run(
        "summary",
        str(shared_path("traces", "h200_decode_eager.kineto.json.gz")),
        "--json",
        str(dest),
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(dest.read_text())["kernels"]["count"] == 1490
    assert "decode_step" in out.stdout and "kernels" in out.stdout


def test_summary_step_option():
    path = shared_path(
        "external", "HolisticTraceAnalysis", "tests", "data", "trace_diff", "test", "test.json.gz"
    )
    out = _run("summary", str(path), "--step", "## optimizer ##", "--json", "-")
    assert json.loads(out.stdout)["steps"]["marker"] == "## optimizer ##"


def _bad(tmp: Path) -> dict[str, Path]:
    raw = gzip.decompress(shared_path("traces", "h200_decode_eager.kineto.json.gz").read_bytes())
    cases = {
        "truncated.json.gz": gzip.compress(raw)[:50_000],
        "truncated.json": raw[:1_000_000],
        "notgzip.json.gz": b"plain text\n",
        "empty.json": b"",
        "notatrace.json": shared_path("traces", "h200_microbench.json").read_bytes(),
    }
    for name, data in cases.items():
        (tmp / name).write_bytes(data)
    return {n: tmp / n for n in cases}


@pytest.mark.parametrize(
    "name",
    ["truncated.json.gz", "truncated.json", "notgzip.json.gz", "empty.json", "notatrace.json"],
)
def test_bad_input_exits_2_with_one_line_naming_the_file(tmp_path: Path, name: str):
    path = _bad(tmp_path)[name]
    out = _run("summary", str(path))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ccdiag: error: {name}: ")
    assert "Traceback" not in out.stderr


def test_missing_file_exits_2(tmp_path: Path):
    out = _run("summary", str(tmp_path / "nope.json"))
    assert out.returncode == 2 and "nope.json: no such file" in out.stderr
