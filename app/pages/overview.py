"""Overview: step times with their spread, the delta by mechanism, the top fixes."""

from __future__ import annotations

from typing import Any

from ccdiag.app import figures, ids
from ccdiag.app.jobs import Analyses
from ccdiag.app.layout import graph, table
from ccdiag.app.pages._common import entry_of, waiting
from ccdiag.app.units import fmt_ns, fmt_share, mechanism_label
from dash import Dash, Input, Output, html

PAGE = {"path": "/", "name": "Overview", "title": "ccdiag · overview", "order": 0}


def layout(**_: Any) -> html.Div:
    return html.Div(id=ids.OVERVIEW, children=waiting())


def _top(report: Any) -> html.Div:
    atts = sorted(report.attribution, key=lambda a: -a.ns_per_step)
    if not atts or atts[0].ns_per_step <= 0:
        return html.Div(
            "No mechanism explains a positive share of the delta.",
            id=ids.OV_TOP_MECHANISM,
            className="card top-mech",
            **{"data-mechanism": ""},  # type: ignore[arg-type]
        )
    a = atts[0]
    return html.Div(
        [
            html.Div("Top mechanism", className="card-title"),
            html.Div(
                [
                    html.Span(mechanism_label(a.mechanism), className="big"),
                    html.Code(a.mechanism, className="mech-id"),
                ]
            ),
            html.Div(
                f"{fmt_ns(a.ns_per_step)} per step, {fmt_share(a.share)} of the delta, "
                f"confidence {a.confidence} ({a.rule})"
            ),
            html.Div(a.summary, className="muted"),
        ],
        id=ids.OV_TOP_MECHANISM,
        className="card top-mech",
        **{"data-mechanism": a.mechanism},  # type: ignore[arg-type]
    )


def _fixes(report: Any, n: int = 3) -> html.Div:
    recs = sorted(report.recommendations, key=lambda r: -r.predicted_recovery_ns_per_step)[:n]
    rows = [
        {
            "fix": r.fix,
            "predicted recovery": fmt_ns(r.predicted_recovery_ns_per_step) + " / step",
            "of the gap": fmt_share(r.share),
            "what to do": r.text,
        }
        for r in recs
    ]
    return html.Div(
        [html.H3("Top fixes"), table(rows) if rows else html.P("No fix to recommend.")],
        id=ids.OV_FIXES,
    )


def _notes(report: Any) -> html.Div:
    items = [html.Li(w, className="warning") for w in report.warnings]
    items += [html.Li(n) for n in report.notes]
    rules = [
        {
            "rule": f"{r.code} {r.name}",
            "mechanism": r.mechanism,
            "outcome": r.outcome,
            "reason": r.reason,
        }
        for r in report.rules
    ]
    return html.Div(
        [
            html.H3("Warnings and notes") if items else None,
            html.Ul(items) if items else None,
            html.H3("Rules"),
            table(rules),
        ]
    )


def _skipped(report: Any) -> html.Div:
    """Events the parsers did not read, by reason, both runs (nothing is dropped silently)."""
    b, t = report.baseline.skipped, report.treatment.skipped
    reasons = sorted(set(b) | set(t), key=lambda k: (-(b.get(k, 0) + t.get(k, 0)), k))
    rows = [
        {"reason": r, "baseline": f"{b.get(r, 0):,}", "treatment": f"{t.get(r, 0):,}"}
        for r in reasons
    ]
    if rows:
        rows.append(
            {
                "reason": "total",
                "baseline": f"{sum(b.values()):,}",
                "treatment": f"{sum(t.values()):,}",
            }
        )
    body = table(rows) if rows else html.P("None: every event of both traces was read.")
    return html.Div([html.H3("Skipped events (not read, by reason)"), body], id=ids.OV_SKIPPED)


def content(report: Any) -> list[Any]:
    """The overview of one report."""
    return [
        _top(report),
        html.Div(
            [
                graph(figures.step_time(report), ids.OV_STEP_TIME),
                graph(figures.delta_waterfall(report), ids.OV_WATERFALL),
            ],
            className="grid2",
        ),
        _fixes(report),
        graph(figures.top_fixes(report)),
        html.Details([html.Summary("Critical-path ledger"), graph(figures.ledger(report))]),
        _notes(report),
        _skipped(report),
    ]


def register(app: Dash, analyses: Analyses) -> None:
    @app.callback(Output(ids.OVERVIEW, "children"), Input(ids.REPORT_STORE, "data"))
    def _render(data: Any) -> Any:
        e = entry_of(analyses, data)
        return waiting() if e is None else content(e.report)
