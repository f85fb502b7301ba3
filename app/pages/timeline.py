"""Timeline: one aligned step of baseline and treatment, lane by lane, mechanisms highlighted."""

from __future__ import annotations

from typing import Any

import numpy as np
from ccdiag.app import figures, ids, truth
from ccdiag.app.jobs import Analyses
from ccdiag.app.layout import graph
from ccdiag.app.pages._common import entry_of, failed, waiting
from ccdiag.app.units import fmt_ns, mechanism_label
from dash import Dash, Input, Output, State, dcc, html, no_update

from ccdiag.errors import InputError

PAGE = {"path": "/timeline", "name": "Timeline", "title": "ccdiag · timeline", "order": 1}


def layout(**_: Any) -> html.Div:
    return html.Div(
        [
            html.H2("Step timeline"),
            html.Div(
                [
                    html.Label(
                        [
                            "rank ",
                            dcc.Dropdown(id=ids.TL_RANK, clearable=False, style={"width": "8em"}),
                        ]
                    ),
                    html.Label(
                        [
                            "aligned step ",
                            dcc.Slider(
                                id=ids.TL_STEP,
                                min=0,
                                max=0,
                                step=1,
                                value=0,
                                updatemode="mouseup",
                                tooltip={"placement": "bottom"},
                            ),
                        ],
                        className="grow",
                    ),
                ],
                id=ids.TL_CONTROLS,
                className="controls",
            ),
            html.Div(id=ids.TL_INFO, className="muted"),
            dcc.Loading(html.Div(id=ids.TL_GRAPH, children=waiting())),
        ]
    )


def typical_step(report: Any, rank: int) -> int:
    """The used step whose delta is closest to the median delta: a representative step."""
    steps = [s for s in (report.partition.per_step if report.partition else []) if s.rank == rank]
    kept = [s for s in steps if s.kept] or steps
    if not kept:
        return 0
    med = float(np.median([s.delta for s in kept]))
    return min(kept, key=lambda s: abs(s.delta - med)).index


def register(app: Dash, analyses: Analyses) -> None:
    @app.callback(
        Output(ids.TL_RANK, "options"),
        Output(ids.TL_RANK, "value"),
        Input(ids.REPORT_STORE, "data"),
    )
    def _ranks(data: Any) -> Any:
        e = entry_of(analyses, data)
        if e is None or e.report.partition is None:
            return [], None
        ranks = sorted({s.rank for s in e.report.partition.per_step}) or [0]
        return [{"label": str(r), "value": r} for r in ranks], ranks[0]

    @app.callback(
        Output(ids.TL_STEP, "max"),
        Output(ids.TL_STEP, "value"),
        Output(ids.TL_STEP, "marks"),
        Input(ids.TL_RANK, "value"),
        State(ids.REPORT_STORE, "data"),
    )
    def _steps(rank: Any, data: Any) -> Any:
        e = entry_of(analyses, data)
        if e is None or e.report.partition is None or rank is None:
            return no_update, no_update, no_update
        n = sum(1 for s in e.report.partition.per_step if s.rank == rank)
        top = max(n - 1, 0)
        marks = {i: str(i) for i in range(0, n, max(1, n // 10))}
        return top, typical_step(e.report, rank), marks

    @app.callback(
        Output(ids.TL_GRAPH, "children"),
        Output(ids.TL_INFO, "children"),
        Input(ids.TL_STEP, "value"),
        Input(ids.TL_RANK, "value"),
        State(ids.REPORT_STORE, "data"),
    )
    def _render(index: Any, rank: Any, data: Any) -> Any:
        e = entry_of(analyses, data)
        if e is None or not isinstance(index, int) or not isinstance(rank, int):
            return failed(data) or waiting(), ""
        try:
            tl = analyses.timeline(e.key, index, rank)
        except InputError as exc:
            return html.P(exc.line(), className="warning"), ""
        step = next(
            (s for s in e.report.partition.per_step if s.rank == rank and s.index == index), None
        )
        info = (
            f"aligned step {index}: this step's delta {fmt_ns(step.delta, True)} "
            f"(the pair's: {truth.delta_text(e.report)}) = "
            + ", ".join(
                f"{mechanism_label(k)} {fmt_ns(v, True)}"
                for k, v in sorted(step.parts.items(), key=lambda kv: -abs(kv[1]))
                if v
            )
            + ("" if step.kept else " (a trimmed step: not in the aggregate)")
            if step is not None
            else ""
        )
        return graph(figures.timeline(tl, step.parts if step is not None else None)), info
