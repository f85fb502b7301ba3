"""Recommendations: every fix, ranked by predicted recovery, with why and how it was predicted."""

from __future__ import annotations

from typing import Any

from ccdiag.app import figures, ids
from ccdiag.app.jobs import Analyses
from ccdiag.app.layout import graph
from ccdiag.app.pages._common import entry_of, waiting
from ccdiag.app.units import fmt_ns, fmt_share, mechanism_label
from dash import Dash, Input, Output, html

PAGE = {
    "path": "/recommendations",
    "name": "Recommendations",
    "title": "ccdiag · fixes",
    "order": 2,
}


def layout(**_: Any) -> html.Div:
    return html.Div(id=ids.RECS, children=waiting())


def _mechanism_of(report: Any) -> dict[tuple[str, str], Any]:
    return {(r.fix, r.text): a for a in report.attribution for r in a.recommendations}


def content(report: Any) -> list[Any]:
    """Ranked fixes, one card each."""
    recs = sorted(report.recommendations, key=lambda r: -r.predicted_recovery_ns_per_step)
    if not recs:
        return [
            html.H2("Recommendations"),
            html.P("No mechanism fired, so there is nothing to fix."),
        ]
    owner = _mechanism_of(report)
    cards = []
    for rank, r in enumerate(recs, start=1):
        a = owner.get((r.fix, r.text))
        why = (
            f"{mechanism_label(a.mechanism)} costs {fmt_ns(a.ns_per_step)} per step "
            f"({fmt_share(a.share)} of the delta, confidence {a.confidence}): {a.summary}"
            if a is not None
            else "from the report's recommendation list"
        )
        cards.append(
            html.Div(
                [
                    html.Div(
                        [html.Span(f"#{rank} ", className="rank"), html.Code(r.fix)],
                        className="card-title",
                    ),
                    html.Div(
                        f"predicted recovery {fmt_ns(r.predicted_recovery_ns_per_step)} per step "
                        f"({fmt_share(r.share)} of the gap)",
                        className="big-line",
                    ),
                    html.P(r.text),
                    html.P([html.B("Why: "), why]),
                    html.P([html.B("How the prediction was made: "), r.method]),
                ],
                className="card rec",
                **{"data-fix": r.fix},  # type: ignore[arg-type]
            )
        )
    return [html.H2("Recommendations"), graph(figures.top_fixes(report, n=10)), *cards]


def register(app: Dash, analyses: Analyses) -> None:
    @app.callback(Output(ids.RECS, "children"), Input(ids.REPORT_STORE, "data"))
    def _render(data: Any) -> Any:
        e = entry_of(analyses, data)
        return waiting() if e is None else content(e.report)
