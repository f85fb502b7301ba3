"""Compare a diagnosis with an earlier one: the CI gate for continuous CC performance tests.

``ccdiag report B T --baseline-report old.json --max-share-growth 5`` fails (exit 1) when a
mechanism's share of the slowdown grew by more than 5 percentage points since ``old.json``.
Shares are compared, not nanoseconds, so a faster or slower machine does not trip the gate;
``--fail-over`` guards the size of the slowdown itself. A mechanism absent from a report has
share 0 there. ``unattributed`` is reported alongside but never fails the gate (it holds the
noise).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ccdiag.errors import InputError
from ccdiag.verdict import SCHEMA_VERSION, Report

UNATTRIBUTED = "unattributed"


def load_report(path: Path) -> Report:
    """Read and validate a report JSON (``ccdiag analyze/report --json``).

    Raises:
        InputError: unreadable, not JSON, another major contract version, or not a report.
    """
    import pydantic_core

    from ccdiag.limits import open_regular

    try:
        with open_regular(path, "a report file") as fh:
            raw = fh.read()
        # pydantic's parser: strict UTF-8, no lone surrogates (json.loads accepts both)
        data = pydantic_core.from_json(raw)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(path, f"not a JSON report ({exc})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise InputError(path, "not a ccdiag report (no schema_version); write one with --json")
    major = str(data["schema_version"]).split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise InputError(
            path,
            f"report contract {data['schema_version']} cannot be compared with "
            f"{SCHEMA_VERSION}; regenerate it with this ccdiag",
        )
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(path, f"not a valid ccdiag report: {where}: {first['msg']}") from None


def _shares(r: Report) -> dict[str, float]:
    out = {a.mechanism: a.share for a in r.attribution}
    out[UNATTRIBUTED] = r.unattributed_share
    return out


def compare_shares(old: Report, new: Report, *, max_share_growth: float) -> list[dict[str, Any]]:
    """Share growth (percentage points) per mechanism, over-the-limit rows first.

    Args:
        old: the earlier report.
        new: the report to check.
        max_share_growth: allowed growth in percentage points.

    Returns:
        Rows ``mechanism``, ``old_share``, ``new_share``, ``growth_points``, ``exceeded``;
        ``unattributed`` last and never ``exceeded``.
    """
    a, b = _shares(old), _shares(new)
    mechs = sorted((set(a) | set(b)) - {UNATTRIBUTED})
    rows: list[dict[str, Any]] = []
    for m in [*mechs, UNATTRIBUTED]:
        growth = round(100.0 * (b.get(m, 0.0) - a.get(m, 0.0)), 2)
        rows.append(
            {
                "mechanism": m,
                "old_share": a.get(m, 0.0),
                "new_share": b.get(m, 0.0),
                "growth_points": growth,
                "exceeded": m != UNATTRIBUTED and growth > max_share_growth,
            }
        )
    rows.sort(
        key=lambda r: (
            not r["exceeded"],
            r["mechanism"] == UNATTRIBUTED,
            -float(r["growth_points"]),
        )
    )
    return rows
