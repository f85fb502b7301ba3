"""Overview: step times with their spread, the delta by mechanism, the top fixes."""

from __future__ import annotations

from typing import Any

from ccdiag.app import figures, ids, truth
from ccdiag.app.jobs import Analyses
from ccdiag.app.layout import graph, table, text_table
from ccdiag.app.pages._common import entry_of, failed, waiting
from ccdiag.app.units import fmt_ns, fmt_share, mechanism_label
from dash import Dash, Input, Output, html

PAGE = {"path": "/", "name": "Overview", "title": "ccdiag · overview", "order": 0}


def layout(**_: Any) -> html.Div:
    return html.Div(id=ids.OVERVIEW, children=waiting())


def _top(report: Any) -> html.Div:
    atts = truth.found(report)
    if not atts:
        return html.Div(
            f"No mechanism explains a measurable part of the delta ({truth.delta_text(report)}).",
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
                f"{fmt_ns(a.ns_per_step)} per step, "
                f"{fmt_share(truth.share_of_delta(report, a.ns_per_step))} of the delta "
                f"({truth.delta_text(report)}), confidence {a.confidence} ({a.rule})"
            ),
            html.Div(a.summary, className="muted"),
        ],
        id=ids.OV_TOP_MECHANISM,
        className="card top-mech",
        **{"data-mechanism": a.mechanism},  # type: ignore[arg-type]
    )


def fix_rows(fx: truth.Fixes, n: int | None = None) -> list[dict[str, str]]:
    """Table rows of the shown fixes (rank, alternatives marked)."""
    rows = []
    for f in fx.shown[:n]:
        rows.append(
            {
                "rank": f.rank,
                "fix": f.fix
                + (f" (alternative to {f.alternative_to})" if f.alternative_to else ""),
                "predicted recovery": fmt_ns(f.ns) + " per step",
                "of the delta": fmt_share(f.share),
                "what to do": f.text,
            }
        )
    return rows


def _fixes(report: Any, n: int = 3) -> html.Div:
    fx = truth.fixes(report)
    body: list[Any] = [html.H3("Top fixes")]
    if fx.top_without_fix is not None:
        body.append(html.P(truth.no_fix_text(report, fx.top_without_fix), className="card warning"))
    rest = [a for a in truth.unfixed(report) if a is not fx.top_without_fix]
    if rest:
        body.append(
            html.Ul([html.Li(truth.unfixed_text(report, a)) for a in rest], className="muted")
        )
    rows = fix_rows(fx, n)
    body.append(text_table(rows) if rows else html.P("No fix with a predicted recovery."))
    if fx.hidden:
        body.append(
            html.Details(
                [
                    html.Summary(f"{len(fx.hidden)} fix(es) predicted to recover ~0: not ranked"),
                    html.Ul([html.Li(truth.hidden_text(report, f)) for f in fx.hidden]),
                ],
                className="hidden-fixes",
            )
        )
    return html.Div(body, id=ids.OV_FIXES)


def _outcome(report: Any, r: Any) -> str:
    if r.outcome != "fired":
        return r.outcome
    a = figures.attribution(report, r.mechanism)
    if a is not None and truth.is_negligible(report, a.ns_per_step):
        return f"fired, but {fmt_ns(a.ns_per_step)} per step (~0: nothing to fix)"
    return "fired"


def _notes(report: Any) -> html.Div:
    items = [html.Li(w, className="warning") for w in report.warnings]
    items += [html.Li(n) for n in report.notes]
    rules = [
        {
            "rule": f"{r.code} {r.name}",
            "mechanism": r.mechanism,
            "outcome": _outcome(report, r),
            "reason": r.reason,
        }
        for r in report.rules
    ]
    return html.Div(
        [
            html.H3("Warnings and notes") if items else None,
            html.Ul(items) if items else None,
            html.H3("Rules"),
            text_table(rules),
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
        return (failed(data) or waiting()) if e is None else content(e.report)
