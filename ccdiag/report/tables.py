"""A Report's tables as polars frames (``Report.to_polars``, ``analyze --steps-csv``) and the
compact HTML a notebook shows for a Report (``Report._repr_html_``).

Frames keep the contract's units (ns, shares as fractions) so they compute; the HTML uses the
reports' one formatter (``ccdiag.report.units``).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import polars as pl

from ccdiag.report.legend import PER_STEP_AND_PAID
from ccdiag.report.units import duration, share

if TYPE_CHECKING:
    from ccdiag.verdict import Report

TABLES = ("attribution", "steps", "recommendations", "rules", "ledger")


def report_table(report: Report, table: str = "attribution") -> pl.DataFrame:
    """One table of the report (see ``Report.to_polars``); ValueError for an unknown name."""
    build = {
        "attribution": _attribution,
        "steps": _steps,
        "recommendations": _recommendations,
        "rules": _rules,
        "ledger": _ledger,
    }.get(table)
    if build is None:
        raise ValueError(f"unknown table {table!r}: one of {', '.join(TABLES)}")
    return build(report)


def _attribution(r: Report) -> pl.DataFrame:
    rows: list[dict[str, Any]] = [
        {
            "mechanism": a.mechanism,
            "rule": a.rule,
            "ns_per_step": a.ns_per_step,
            "paid_ns_per_step": a.paid_ns_per_step,
            "share": a.share,
            "confidence": a.confidence,
            "summary": a.summary,
        }
        for a in r.attribution
    ]
    rows.append(
        {
            "mechanism": "unattributed",
            "rule": None,
            "ns_per_step": r.unattributed_ns_per_step,
            "paid_ns_per_step": None,
            "share": r.unattributed_share,
            "confidence": None,
            "summary": None,
        }
    )
    schema = {
        "mechanism": pl.String,
        "rule": pl.String,
        "ns_per_step": pl.Int64,
        "paid_ns_per_step": pl.Int64,
        "share": pl.Float64,
        "confidence": pl.String,
        "summary": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def _steps(r: Report) -> pl.DataFrame:
    """One row per aligned step (the report keeps the first 1000): the step numbers in each run,
    the step's delta and each mechanism's part of it (ns)."""
    steps = r.partition.per_step if r.partition else []
    mechs = [a.mechanism for a in r.attribution]
    extra = sorted({k for s in steps for k in s.parts} - {*mechs, "unattributed"})
    cols = [*mechs, *extra, "unattributed"]
    schema: dict[str, Any] = {
        "rank": pl.Int64,
        "index": pl.Int64,
        "baseline_step": pl.Int64,
        "treatment_step": pl.Int64,
        "delta_ns": pl.Int64,
        "kept": pl.Boolean,
        **{f"{m}_ns": pl.Int64 for m in cols},
    }
    rows = [
        {
            "rank": s.rank,
            "index": s.index,
            "baseline_step": s.baseline_step,
            "treatment_step": s.treatment_step,
            "delta_ns": s.delta,
            "kept": s.kept,
            **{f"{m}_ns": s.parts.get(m, 0) for m in cols},
        }
        for s in steps
    ]
    return pl.DataFrame(rows, schema=schema)


def _recommendations(r: Report) -> pl.DataFrame:
    schema = {
        "fix": pl.String,
        "predicted_recovery_ns_per_step": pl.Int64,
        "share": pl.Float64,
        "text": pl.String,
        "method": pl.String,
    }
    return pl.DataFrame([x.model_dump() for x in r.recommendations], schema=schema)


def _rules(r: Report) -> pl.DataFrame:
    schema = {k: pl.String for k in ("code", "name", "mechanism", "outcome", "reason")}
    return pl.DataFrame([x.model_dump() for x in r.rules], schema=schema)


def _ledger(r: Report) -> pl.DataFrame:
    schema = {
        "category": pl.String,
        "side": pl.String,
        "baseline_total": pl.Int64,
        "treatment_total": pl.Int64,
        "baseline": pl.Int64,
        "treatment": pl.Int64,
        "delta": pl.Int64,
    }
    rows = [x.model_dump() for x in (r.partition.ledger if r.partition else [])]
    return pl.DataFrame(rows, schema=schema)


# --------------------------------------------------------------------------- notebook HTML


def _row(cells: list[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>"


def report_html(r: Report, max_fixes: int = 5) -> str:
    """The verdict, the attribution table and the top fixes as a small HTML fragment.

    Every string that comes from a trace or a rule is escaped.
    """
    e = html.escape
    st = r.step_ns
    head = _row(["mechanism", "per step", "paid", "share", "confidence", "finding"], "th")
    body = [
        _row(
            [
                f"<code>{e(a.mechanism)}</code>",
                duration(a.ns_per_step),
                duration(a.paid_ns_per_step),
                share(a.share),
                e(a.confidence),
                f"[{e(a.rule)}] {e(a.summary)}",
            ]
        )
        for a in r.attribution
    ]
    body.append(
        _row(
            ["unattributed", duration(r.unattributed_ns_per_step), "", share(r.unattributed_share)]
        )
    )
    fixes = [
        _row(
            [
                f"<code>{e(x.fix)}</code>",
                duration(x.predicted_recovery_ns_per_step),
                share(x.share),
                e(x.text),
            ]
        )
        for x in r.recommendations[:max_fixes]
    ]
    fix_table = (
        "<table><thead>"
        + _row(["fix", "recovers / step", "of gap", "what"], "th")
        + "</thead><tbody>"
        + "".join(fixes)
        + "</tbody></table>"
        if fixes
        else "<p>No fix with a predicted recovery.</p>"
    )
    steps = (
        f"baseline {duration(st.baseline)} / step, treatment {duration(st.treatment)} / step "
        f"(medians of {st.n_steps} aligned steps; delta 95 % CI {duration(st.delta_ci95[0])} "
        f"to {duration(st.delta_ci95[1])}, {'significant' if st.significant else 'not significant'})"
    )
    return (
        '<div class="ccdiag-report">'
        f"<p><b>{e(r.verdict)}</b></p><p>{e(steps)}</p>"
        f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"
        f"<p><small>{e(PER_STEP_AND_PAID)}.</small></p>"
        f"{fix_table}"
        "<p><small>Report.to_polars('attribution' | 'steps' | 'recommendations' | 'rules' | "
        "'ledger') gives these as frames; ccdiag.figures draws them.</small></p></div>"
    )
