"""The JSON contract: published schema up to date, reports valid against it, one contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import report_goldens as rg

from ccdiag import api
from ccdiag.errors import InputError
from ccdiag.report.json_contract import schema_file_name, schema_text
from ccdiag.verdict import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "docs" / "schema" / schema_file_name()


def _ccdiag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_published_schema_is_up_to_date():
    # act
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_schema.py"), "--check"],
        capture_output=True,
        text=True,
    )
    # assert
    assert out.returncode == 0, out.stdout
    assert PUBLISHED.name == f"report-v{SCHEMA_VERSION.split('.')[0]}.json"


def test_schema_command_prints_the_published_schema():
    # act
    out = _ccdiag("schema")
    # assert
    assert out.returncode == 0, out.stderr
    assert out.stdout == schema_text() == PUBLISHED.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", list(rg.PAIRS))
def test_golden_json_reports_validate_against_the_published_schema(name: str):
    # arrange
    schema = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    report = json.loads(rg.golden_path(name, "json").read_text(encoding="utf-8"))
    # act / assert
    jsonschema.Draft202012Validator(schema).validate(report)


def test_schema_rejects_another_major_version_and_unknown_fields():
    # arrange
    validator = jsonschema.Draft202012Validator(json.loads(PUBLISHED.read_text()))
    report = json.loads(rg.golden_path("decode_eager", "json").read_text(encoding="utf-8"))
    # act
    wrong_major = {**report, "schema_version": "2.0"}
    extra = {**report, "surprise": 1}
    # assert
    assert not validator.is_valid(wrong_major)
    assert not validator.is_valid(extra)


def test_analyze_json_and_report_json_are_the_same_contract(tmp_path: Path):
    # arrange
    b, t = (str(rg.SAMPLES / p) for p in rg.PAIRS["kv_offload"])
    # act
    analyzed = _ccdiag("analyze", b, t, "--json", "-")
    reported = _ccdiag("report", b, t, "--json", "-", "--quiet")
    # assert
    assert analyzed.returncode == reported.returncode == 0, analyzed.stderr + reported.stderr
    assert analyzed.stdout == reported.stdout == rg.render("kv_offload", "json")


def test_load_report_round_trips_and_rejects_other_files(tmp_path: Path):
    # arrange
    good = rg.golden_path("decode_eager", "json")
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**json.loads(good.read_text()), "schema_version": "0.9"}))
    # act
    report = api.load_report(good)
    # assert
    assert api.render_report(report, "json") == good.read_text(encoding="utf-8")
    for path, why in ((bad, "no schema_version"), (old, "cannot be compared")):
        with pytest.raises(InputError, match=why):
            api.load_report(path)
