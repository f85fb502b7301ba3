"""The registry, rule files, YAML cases and generated docs match one to one (STYLE.md A3-A5)."""

from __future__ import annotations

import inspect
import re
import runpy
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from ccdiag.rules import REGISTRY, explain, find_rule, list_rules
from ccdiag.rules._base import Rule, opt

from ccdiag.errors import InputError
from ccdiag.schema import Kind

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = sorted(p for p in (ROOT / "rules").glob("*.py") if not p.name.startswith("_"))
CASE_FILES = sorted((ROOT / "tests" / "rules" / "cases").glob("*.yaml"))


def test_registry_matches_rule_files() -> None:
    # arrange
    names = {r.name.replace("-", "_") for r in REGISTRY}
    # act
    files = {p.stem for p in RULE_FILES}
    # assert
    assert files == names
    for r in REGISTRY:
        assert Path(inspect.getfile(r)).stem == r.name.replace("-", "_")
        assert r.__name__ == "".join(p.title() for p in r.name.split("-"))


def test_codes_names_and_mechanisms_are_unique() -> None:
    for attr in ("code", "name", "mechanism"):
        values = [getattr(r, attr) for r in REGISTRY]
        assert len(values) == len(set(values)), attr


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.code)
def test_every_rule_has_cases_that_fire_and_stay_quiet(rule: type[Rule]) -> None:
    # arrange
    path = ROOT / "tests" / "rules" / "cases" / f"{rule.name}.yaml"
    # act
    doc = yaml.safe_load(path.read_text())
    # assert
    assert doc["rule"] == rule.code
    assert any(n.startswith("fires_when_") or n.startswith("fires_on_") for n in doc["cases"])
    assert any(n.startswith("quiet_when_") or n.startswith("quiet_on_") for n in doc["cases"])


def test_no_orphan_case_files() -> None:
    assert {p.stem for p in CASE_FILES} == {r.name for r in REGISTRY}


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.code)
def test_docstring_example_names_a_real_case(rule: type[Rule]) -> None:
    # arrange
    doc = inspect.getdoc(rule) or ""
    example = doc.split("## Example", 1)[1].split("## Fix", 1)[0]
    cases = yaml.safe_load((ROOT / "tests" / "rules" / "cases" / f"{rule.name}.yaml").read_text())
    # act
    named = re.findall(r"``((?:fires|quiet)_\w+)``", example)
    # assert
    assert named, "the Example section must name the case that runs it"
    assert all(n in cases["cases"] for n in named), named


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.code)
def test_rule_files_stay_small(rule: type[Rule]) -> None:
    lines = Path(inspect.getfile(rule)).read_text().count("\n")
    assert lines <= 160, f"{rule.name}: {lines} lines (target ~150, STYLE.md A3)"


def test_docs_are_generated_and_fresh() -> None:
    # act
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_rule_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    # assert
    assert res.returncode == 0, res.stdout + res.stderr
    pages = {p.stem for p in (ROOT / "docs" / "rules").glob("*.md")} - {"index"}
    assert pages == {r.name for r in REGISTRY}


@pytest.mark.parametrize("key", ["launch_toll", "LA01", "kernel-launch-toll", "kernel_launch_toll"])
def test_explain_finds_a_rule_by_mechanism_code_or_name(key: str) -> None:
    text = explain(key)
    assert text.startswith("# LA01 kernel-launch-toll")
    assert "## Options" in text and "min_toll_ns" in text


def test_explain_unknown_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown rule"):
        find_rule("no_such_thing")


def test_list_rules_has_every_rule() -> None:
    assert [r["code"] for r in list_rules()] == [r.code for r in REGISTRY]


DOC = "\n".join(
    [
        "x",
        *(
            f"{h}\ntext"
            for h in (
                "## What it detects",
                "## Why it costs time",
                "## Evidence",
                "## Example",
                "## Fix",
                "## Limits",
                "## Options",
                "## References",
            )
        ),
    ]
)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"code": "L01"}, "code"),
        ({"name": "UseCudaGraphs"}, "kebab"),
        ({"name": "use-cuda-graphs"}, "not the fix"),
        ({"mechanism": "nope"}, "mechanism"),
        ({"__doc__": "no headings"}, "docstring"),
    ],
)
def test_bad_rule_metadata_fails_at_definition(attrs: dict, message: str) -> None:
    # arrange
    @dataclass(frozen=True)
    class Options:
        x: int = opt(1, "an option")

    ns = {
        "code": "ZZ99",
        "name": "test-mechanism",
        "mechanism": "launch_toll",
        "requires": frozenset({Kind.RUNTIME}),
        "claimed": frozenset({"launch_api"}),
        "call_classes": frozenset({"launch"}),
        "Options": Options,
        "__doc__": DOC,
        **attrs,
    }
    # act / assert
    with pytest.raises(TypeError, match=message):
        type("Bad", (Rule,), ns)


def test_options_without_a_doc_fail_at_definition() -> None:
    @dataclass(frozen=True)
    class Options:
        x: int = 1

    with pytest.raises(TypeError, match="needs a default and a doc"):
        type(
            "Bad",
            (Rule,),
            {
                "code": "ZZ98",
                "name": "test-mechanism",
                "mechanism": "launch_toll",
                "requires": frozenset(),
                "claimed": frozenset({"launch_api"}),
                "call_classes": frozenset(),
                "Options": Options,
                "__doc__": DOC,
            },
        )


def test_new_rule_script_creates_a_valid_rule(tmp_path: Path) -> None:
    # arrange: a copy of the layout the script edits
    for d in ("rules", "tests/rules/cases"):
        shutil.copytree(ROOT / d, tmp_path / d)
    # act
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "new_rule.py"),
            "--code",
            "ZZ01",
            "--name",
            "example-mechanism",
            "--mechanism",
            "launch_toll",
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    # assert
    assert res.returncode == 0, res.stderr
    mod = runpy.run_path(str(tmp_path / "rules" / "example_mechanism.py"))
    cls = mod["ExampleMechanism"]
    assert issubclass(cls, Rule) and cls.code == "ZZ01"
    assert "ExampleMechanism,\n" in (tmp_path / "rules" / "__init__.py").read_text()
    assert (
        yaml.safe_load((tmp_path / "tests/rules/cases/example-mechanism.yaml").read_text())["rule"]
        == "ZZ01"
    )
    assert isinstance(cls.requires, frozenset) and ClassVar  # metadata validated at definition


def test_explain_prints_what_a_rule_claims() -> None:
    # act
    doc = explain("launch_toll")
    # assert: who claims gap_launch is visible without reading evaluate
    assert "- claims ledger categories: `gap_launch`, `launch_api`, `op_launch`" in doc
    assert "- measures its paid cost on matched calls of class: `launch`" in doc


@pytest.mark.parametrize(
    ("claimed", "classes", "message"),
    [
        (frozenset({"no_such_category"}), frozenset(), "claimed must be"),
        (frozenset(), frozenset(), "claimed must be"),
        (frozenset({"gap_launch"}), frozenset({"no_such_class"}), "call_classes must be"),
    ],
)
def test_a_rule_must_declare_known_claims(
    claimed: frozenset[str], classes: frozenset[str], message: str
) -> None:
    from ccdiag.rules._base import HEADINGS, Rule

    from ccdiag.schema import Kind

    @dataclass(frozen=True)
    class Options:
        pass

    attrs = {
        "__doc__": "x\n\n" + "\n".join(f"{h}\ntext" for h in HEADINGS),
        "code": "ZZ99", "name": "bad-claims", "mechanism": "launch_toll",
        "requires": frozenset[Kind](), "claimed": claimed, "call_classes": classes,
        "Options": Options,
    }  # fmt: skip
    # act / assert: the class is rejected when it is defined
    with pytest.raises(TypeError, match=message):
        type("Bad", (Rule,), attrs)
