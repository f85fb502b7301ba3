"""Create a new rule from the template: the rule file, its registry line and its YAML cases.

    python scripts/new_rule.py --code LA02 --name host-dispatch-toll --mechanism launch_toll

Then fill in the docstring headings and ``evaluate``, write the cases, and run
``python scripts/gen_rule_docs.py`` (the fourth place: docs/rules/<name>.md).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TEMPLATE = '''"""{code} {name}."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccdiag.ledger import stats  # noqa: F401  (the pair's model: ccdiag.ledger)
from ccdiag.ledger import vocab as vc  # noqa: F401
from ccdiag.rules._base import Outcome, Rule, RuleContext, claims, opt  # noqa: F401
from ccdiag.schema import Kind


class {camel}(Rule):
    """TODO one line: what the mechanism does to a step.

    ## What it detects
    TODO

    ## Why it costs time
    TODO

    ## Evidence
    TODO (which events and columns; which ledger categories it claims)

    ## Example
    ``tests/rules/cases/{name}.yaml`` ``fires_when_TODO``.

    ## Fix
    - TODO

    ## Limits
    TODO

    ## Options
    See below.

    ## References
    - TODO
    """

    code: ClassVar[str] = "{code}"
    name: ClassVar[str] = "{name}"
    mechanism: ClassVar[str] = "{mechanism}"
    requires: ClassVar[frozenset[Kind]] = frozenset({{Kind.RUNTIME}})
    claimed: ClassVar[frozenset[str]] = frozenset({{"other_api"}})  # TODO ledger categories
    call_classes: ClassVar[frozenset[str]] = frozenset({{"other"}})  # TODO matched call classes

    @dataclass(frozen=True)
    class Options:
        min_growth_ns: int = opt(1000, "TODO: smallest growth worth a finding (ns).")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        return Outcome.clean("TODO")
'''

CASES = """rule: {code}
cases:
  fires_when_TODO:
    baseline: {{workload: {{}}}}
    treatment: {{workload: {{}}}}
    expect: {{outcome: fired, min_ns: 0, max_ns: 1000000}}
  quiet_when_TODO:
    baseline: {{workload: {{}}}}
    treatment: {{workload: {{}}}}
    expect: {{outcome: clean}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--code", required=True, help="two capitals + two digits, e.g. LA02 (never reused)"
    )
    ap.add_argument("--name", required=True, help="kebab-case, naming the mechanism, not the fix")
    ap.add_argument("--mechanism", required=True, help="mechanism id (ccdiag.verdict.MECHANISMS)")
    ap.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    a = ap.parse_args()
    root = Path(a.root)
    if not re.fullmatch(r"[A-Z]{2}\d{2}", a.code) or not re.fullmatch(
        r"[a-z][a-z0-9]*(-[a-z0-9]+)+", a.name
    ):
        print("bad --code or --name (see STYLE.md A3)")
        return 2
    snake, camel = a.name.replace("-", "_"), "".join(p.title() for p in a.name.split("-"))
    rule, cases = (
        root / "rules" / f"{snake}.py",
        root / "tests" / "rules" / "cases" / f"{a.name}.yaml",
    )
    if rule.exists() or cases.exists():
        print(f"{rule.name} or {cases.name} exists already")
        return 2
    rule.write_text(TEMPLATE.format(code=a.code, name=a.name, mechanism=a.mechanism, camel=camel))
    cases.write_text(CASES.format(code=a.code))
    init = root / "rules" / "__init__.py"
    text = init.read_text()
    imp = f"from ccdiag.rules.{snake} import {camel}\n"
    text = (
        text.replace("\nREGISTRY", imp.join(["", ""]) + "\nREGISTRY", 1)
        if imp not in text
        else text
    )
    text = text.replace(
        "REGISTRY: tuple[type[Rule], ...] = (\n",
        f"REGISTRY: tuple[type[Rule], ...] = (\n    {camel},\n",
        1,
    )
    init.write_text(text)
    print(f"created {rule.relative_to(root)}, {cases.relative_to(root)}; registered {camel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
