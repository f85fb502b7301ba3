"""Every YAML rule case (tests/rules/cases/<rule-name>.yaml), run through the whole engine.

A case names a baseline and a treatment (compact rows, a generated workload, or a real trace with
injected costs) and what the rule must do: ``outcome`` (fired / clean / skipped) and, when it
fires, bounds on the ns per step the engine attributes to its mechanism. ``pytest -k LA01``
selects one rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ccdiag.rules import find_rule
from factories import case_trace

from ccdiag.engine import diagnose_pair
from ccdiag.pairing import pair_traces

CASES = Path(__file__).parent / "cases"
SHARED = Path(__file__).resolve().parents[1] / "data" / "shared"


def _cases() -> list[Any]:
    out = []
    for f in sorted(CASES.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        for name, case in doc["cases"].items():
            out.append(pytest.param(doc["rule"], name, case, id=f"{doc['rule']}-{name}"))
    return out


@pytest.mark.parametrize(("code", "name", "case"), _cases())
def test_rule_case(code: str, name: str, case: dict[str, Any]) -> None:
    # arrange
    rule = find_rule(code)
    base = case_trace(case["baseline"], SHARED, "baseline")
    treat = case_trace(case["treatment"], SHARED, "treatment")
    # act
    report = diagnose_pair(pair_traces(base, treat))
    # assert
    outcome = next(o for o in report.rules if o.code == code)
    expect = case["expect"]
    assert outcome.outcome == expect["outcome"], outcome.reason
    if expect["outcome"] == "fired":
        ns = next(a.ns_per_step for a in report.attribution if a.mechanism == rule.mechanism)
        assert expect.get("min_ns", 0) <= ns <= expect.get("max_ns", 1 << 62), (ns, report.verdict)
