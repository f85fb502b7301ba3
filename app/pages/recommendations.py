"""Recommendations: every fix, ranked by predicted recovery, with why and how it was predicted.

The fixes come from ``truth.fixes``: each fix once, alternatives marked, ~0 fixes apart."""

from __future__ import annotations

from typing import Any

from ccdiag.app import figures, ids, truth
from ccdiag.app.jobs import Analyses
from ccdiag.app.layout import graph
from ccdiag.app.pages._common import entry_of, failed, waiting
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


def content(report: Any) -> list[Any]:
    """Ranked fixes, one card each: alternatives marked, ~0 fixes listed apart."""
    fx = truth.fixes(report)
    head: list[Any] = [html.H2("Recommendations")]
    if fx.top_without_fix is not None:
        head.append(html.P(truth.no_fix_text(report, fx.top_without_fix), className="card warning"))
    if not fx.shown:
        head.append(html.P("No fix with a predicted recovery for this pair."))
    rest = [a for a in truth.unfixed(report) if a is not fx.top_without_fix]
    if rest:
        head.append(
            html.Ul([html.Li(truth.unfixed_text(report, a)) for a in rest], className="muted")
        )
    atts = {a.mechanism: a for a in report.attribution}
    cards = []
    for f in fx.shown:
        a = atts.get(f.mechanism)
        why = (
            f"{mechanism_label(a.mechanism)} costs {fmt_ns(a.ns_per_step)} per step "
            f"({fmt_share(truth.share_of_delta(report, a.ns_per_step))} of the delta, "
            f"confidence {a.confidence}): {a.summary}"
            if a is not None
            else "from the report's recommendation list"
        )
        extra: list[Any] = []
        if f.alternative_to:
            extra.append(
                html.P(
                    f"Alternative to {f.alternative_to}: it recovers the same time, so apply one "
                    "or the other; their recoveries do not add up.",
                    className="alt-note",
                )
            )
        if f.also:
            extra.append(
                html.P(
                    "Also proposed for: "
                    + ", ".join(mechanism_label(m) for m in f.also)
                    + " (shown once, with its largest predicted recovery).",
                    className="muted",
                )
            )
        cards.append(
            html.Div(
                [
                    html.Div(
                        [html.Span(f"{f.rank} ", className="rank"), html.Code(f.fix)],
                        className="card-title",
                    ),
                    html.Div(
                        f"predicted recovery {fmt_ns(f.ns)} per step "
                        f"({fmt_share(f.share)} of the delta)",
                        className="big-line",
                    ),
                    *extra,
                    html.P(f.text),
                    html.P([html.B("Why: "), why]),
                    html.P([html.B("How the prediction was made: "), f.method]),
                ],
                className="card rec" + (" rec-alt" if f.alternative_to else ""),
                **{"data-fix": f.fix, "data-alternative-to": f.alternative_to or ""},  # type: ignore[arg-type]
            )
        )
    if fx.shown:
        head.append(
            html.P(
                f"The best fix of each mechanism, together: at most {fmt_ns(fx.combined_ns)} per "
                f"step ({fmt_share(truth.share_of_delta(report, fx.combined_ns))} of the delta)"
                + (" — capped at the delta: the predictions overlap." if fx.capped else "."),
                className="muted",
            )
        )
    tail: list[Any] = []
    if fx.hidden:
        tail = [
            html.H3("Not ranked: predicted to recover ~0"),
            html.Ul(
                [html.Li(truth.hidden_text(report, f)) for f in fx.hidden], className="hidden-fixes"
            ),
        ]
    return [*head, graph(figures.top_fixes(report, n=10)), *cards, *tail]


def register(app: Dash, analyses: Analyses) -> None:
    @app.callback(Output(ids.RECS, "children"), Input(ids.REPORT_STORE, "data"))
    def _render(data: Any) -> Any:
        e = entry_of(analyses, data)
        return (failed(data) or waiting()) if e is None else content(e.report)
