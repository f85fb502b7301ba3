"""One page per mechanism: what was attributed, its evidence and figures, its fixes."""

from __future__ import annotations

from functools import partial
from typing import Any

from ccdiag.app import figures, ids, truth
from ccdiag.app.jobs import Analyses
from ccdiag.app.layout import evidence_block, graph, text_table
from ccdiag.app.pages._common import entry_of, failed, waiting
from ccdiag.app.units import fmt_ns, fmt_share, mechanism_label
from dash import Dash, Input, Output, dcc, html

from ccdiag.verdict import MECHANISMS

PAGES = [
    {
        "module": f"{__name__}.{m}",
        "path": f"/mechanism/{m}",
        "name": mechanism_label(m),
        "title": f"ccdiag · {mechanism_label(m)}",
        "order": 10 + i,
        "mechanism": m,
    }
    for i, m in enumerate(MECHANISMS)
]


def layout(mechanism: str, **_: Any) -> html.Div:
    return html.Div(
        [
            dcc.Store(id=ids.MECH_ID, data=mechanism),
            html.Div(id=ids.MECH_CONTENT, children=waiting()),
        ]
    )


def _header(report: Any, mechanism: str) -> list[Any]:
    a = figures.attribution(report, mechanism)
    title = html.H2([mechanism_label(mechanism), " ", html.Code(mechanism, className="mech-id")])
    if a is None:
        return [
            title,
            html.P(
                ["Not found in this pair — ", figures.rule_reason(report, mechanism), "."],
                className="card not-found",
            ),
        ]
    spread = (
        f" · per step p10–p90 {fmt_ns(a.spread.p10)} – {fmt_ns(a.spread.p90)}" if a.spread else ""
    )
    paid = (
        f" · paid {fmt_ns(a.paid_ns_per_step)} per step where it is paid, before any overlap"
        if a.paid_ns_per_step is not None
        else ""
    )
    parts = [{"ledger category": k, "per step": fmt_ns(v)} for k, v in a.parts.items()]
    share = truth.share_of_delta(report, a.ns_per_step)
    nothing = (
        [
            html.P(
                f"The rule {a.rule} fired, but the time attributed to it is "
                f"{fmt_ns(a.ns_per_step)} per step ({fmt_share(share)} of the delta "
                f"{truth.delta_text(report)}): nothing measurable to fix here.",
                className="card not-found",
            )
        ]
        if truth.is_negligible(report, a.ns_per_step)
        else []
    )
    return [
        title,
        *nothing,
        html.Div(
            [
                html.Div(
                    f"{fmt_ns(a.ns_per_step)} per step · {fmt_share(share)} of the delta "
                    f"({truth.delta_text(report)}){paid} · confidence {a.confidence} · rule "
                    f"{a.rule}{spread}",
                    className="big-line",
                ),
                html.P(a.summary),
                html.Details([html.Summary("how the time was counted"), text_table(parts)])
                if parts
                else None,
            ],
            className="card",
        ),
    ]


def _fixes(report: Any, mechanism: str) -> list[Any]:
    fx = truth.fixes(report)
    mine = [f for f in fx.shown if f.mechanism == mechanism or mechanism in f.also]
    zero = [f for f in fx.hidden if f.mechanism == mechanism or mechanism in f.also]
    if not mine and not zero:
        return []
    rows = [
        {
            "rank": f.rank,
            "fix": f.fix + (f" (alternative to {f.alternative_to})" if f.alternative_to else ""),
            "recovers": fmt_ns(f.ns) + " per step",
            "of the delta": fmt_share(f.share),
            "what to do": f.text,
            "how predicted": f.method,
        }
        for f in mine
    ]
    out: list[Any] = [html.H3("Fixes")]
    if rows:
        out.append(text_table(rows))
    if zero:
        out.append(
            html.Ul([html.Li(truth.hidden_text(report, f)) for f in zero], className="hidden-fixes")
        )
    return out


def content(report: Any, series: Any, mechanism: str) -> list[Any]:
    """The page of one mechanism."""
    ev = figures.evidence(report, mechanism)
    figs = [graph(f) for f in figures.mechanism_figures(report, mechanism, series)]
    body = [*_header(report, mechanism), *figs, *_fixes(report, mechanism)]
    if ev:
        body += [html.H3("Evidence"), evidence_block(ev)]
    return body


def register(app: Dash, analyses: Analyses) -> None:
    @app.callback(
        Output(ids.MECH_CONTENT, "children"),
        Input(ids.REPORT_STORE, "data"),
        Input(ids.MECH_ID, "data"),
    )
    def _render(data: Any, mechanism: Any) -> Any:
        e = entry_of(analyses, data)
        if e is None or mechanism not in MECHANISMS:
            return failed(data) or waiting()
        return content(e.report, e.series, mechanism)


def page_layout(spec: dict[str, Any]) -> Any:
    """The layout function registered for one mechanism page."""
    return partial(layout, spec["mechanism"])
