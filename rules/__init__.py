"""The rule registry: one rule per mechanism, listed explicitly (grep-able, reviewable).

REGISTRY        the tuple of rule classes, in report order
explain(x)      a rule's documentation by mechanism id, code or name
list_rules()    code, name, mechanism and summary of every rule
rule_doc(rule)  the Markdown page of one rule (docs/rules/<name>.md is generated from it)
"""

from __future__ import annotations

import inspect

from ccdiag.rules._base import Rule
from ccdiag.rules.blocked_non_blocking_copy import BlockedNonBlockingCopy
from ccdiag.rules.encrypted_collective import EncryptedCollective
from ccdiag.rules.host_code_slower import HostCodeSlower
from ccdiag.rules.kernel_launch_toll import KernelLaunchToll
from ccdiag.rules.one_time_setup import OneTimeSetup
from ccdiag.rules.serialized_copies import SerializedCopies
from ccdiag.rules.sync_stall import SyncStall
from ccdiag.rules.uvm_migration import UvmMigration

from ccdiag.errors import InputError

REGISTRY: tuple[type[Rule], ...] = (
    KernelLaunchToll,
    SerializedCopies,
    BlockedNonBlockingCopy,
    SyncStall,
    EncryptedCollective,
    UvmMigration,
    OneTimeSetup,
    HostCodeSlower,
)


def find_rule(key: str) -> type[Rule]:
    """A rule by mechanism id, code or name (case-insensitive; '-' and '_' are the same)."""
    k = key.strip().lower().replace("_", "-")
    for r in REGISTRY:
        if k in (r.code.lower(), r.name, r.mechanism.replace("_", "-"), r.__name__.lower()):
            return r
    known = ", ".join(f"{r.mechanism} ({r.code})" for r in REGISTRY)
    raise InputError(None, f"unknown rule or mechanism '{key}'; known: {known}")


def rule_doc(rule: type[Rule]) -> str:
    """The Markdown documentation of a rule: docstring plus its options table."""
    doc = inspect.getdoc(rule) or ""
    head, _, body = doc.partition("\n")
    opts = "\n".join(f"| `{n}` | `{d!r}` | {text} |" for n, d, text in rule.option_docs())
    table = "| option | default | meaning |\n|---|---|---|\n" + opts if opts else "No options."
    body = body.replace("## Options\nSee below.", "## Options\n" + table)
    req = ", ".join(sorted(k.value for k in rule.requires)) or "none"
    claimed = ", ".join(f"`{c}`" for c in sorted(rule.claimed))
    classes = ", ".join(f"`{c}`" for c in sorted(rule.call_classes)) or "none (GPU rows)"
    return (
        f"# {rule.code} {rule.name}\n\n{head}\n\n"
        f"- mechanism: `{rule.mechanism}`\n- requires: {req}"
        f"{'' if rule.requires_gpu else ' (also runs on host-only treatments)'}\n"
        f"- claims ledger categories: {claimed}\n"
        f"- measures its paid cost on matched calls of class: {classes}\n"
        f"{body.rstrip()}\n"
    )


def explain(key: str) -> str:
    """The documentation of one rule, by mechanism id, code or name."""
    return rule_doc(find_rule(key))


def list_rules() -> list[dict[str, str]]:
    """Code, name, mechanism and one-line summary of every registered rule."""
    return [
        {
            "code": r.code,
            "name": r.name,
            "mechanism": r.mechanism,
            "summary": r.summary(),
            "claims": ", ".join(sorted(r.claimed)),
            "call_classes": ", ".join(sorted(r.call_classes)),
        }  # fmt: skip
        for r in REGISTRY
    ]
