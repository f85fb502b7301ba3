"""What if CC: the predicted CC cost of one CC-off trace on a platform, and what each fix gives.

The trace alone (the CC-off side of any pair the server lists), a platform picker, the predicted
step with its band, the partition into mechanisms and the fixes (alternatives marked). Calls
only ``ccdiag.api.predict``; the browser sends opaque source ids, never paths.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import plotly.graph_objects as go
from ccdiag.app import ids
from ccdiag.app.layout import graph, placeholder
from ccdiag.app.units import MECHANISM_COLORS, fmt_ns, mechanism_label, time_unit
from dash import Dash, Input, Output, dcc, get_app, html

from ccdiag import api
from ccdiag.errors import InputError

PAGE = {"path": "/whatif", "name": "What if CC", "title": "ccdiag · what if CC", "order": 5}

_CACHE: OrderedDict[tuple[str, str], Any] = OrderedDict()
_LOCK = threading.Lock()
_MAX_CACHED = 16


def _sources() -> Any:
    return getattr(get_app(), "ccdiag_sources", None)


def trace_options(sources: Any) -> list[dict[str, str]]:
    """One option per listed pair: its CC-off side (label and the pair's opaque id)."""
    if sources is None:
        return []
    return [
        {"label": f"{s.label}: {s.baseline.name}", "value": s.id} for s in sources.listed.values()
    ]


def layout(**_: Any) -> html.Div:
    srcs = _sources()
    opts = trace_options(srcs)
    default = srcs.default.id if srcs is not None and srcs.default is not None else None
    return html.Div(
        [
            html.H2("What if CC"),
            html.P(
                "What Confidential Computing would cost this workload, predicted from its CC-off "
                "trace alone by replaying it with a platform's published costs (ccdiag predict)."
            ),
            html.Div(
                [
                    html.Label("CC-off trace", htmlFor=ids.WHATIF_TRACE),
                    dcc.Dropdown(
                        id=ids.WHATIF_TRACE,
                        options=opts,  # type: ignore[arg-type]
                        value=default or (opts[0]["value"] if opts else None),
                        clearable=False,
                    ),
                    html.Label("platform", htmlFor=ids.WHATIF_PLATFORM),
                    dcc.Dropdown(
                        id=ids.WHATIF_PLATFORM,
                        options=[{"label": p.upper(), "value": p} for p in api.list_platforms()],  # type: ignore[arg-type]
                        value="b200",
                        clearable=False,
                    ),
                ],
                className="controls",
            ),
            dcc.Loading(html.Div(id=ids.WHATIF_CONTENT, children=placeholder("Pick a trace."))),
        ]
    )


def predicted(source_id: Any, platform: Any) -> Any:
    """The prediction for a listed pair's CC-off side (cached; unknown ids are refused)."""
    from ccdiag.app.sources import SourceError

    srcs = _sources()
    if srcs is None:
        raise SourceError("no traces are listed")
    src = srcs.resolve(source_id)
    if platform not in api.list_platforms():
        raise SourceError("unknown platform: choose one from the list")
    key = (src.id, str(platform))
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    pred = api.predict(src.baseline, platform)
    with _LOCK:
        _CACHE[key] = pred
        while len(_CACHE) > _MAX_CACHED:
            _CACHE.popitem(last=False)
    return pred


def partition_figure(pred: Any) -> go.Figure:
    """CC off, each mechanism's predicted cost and the CC step, as a waterfall (plotly only)."""
    rows = [m for m in pred.mechanisms if m.ns_per_step]
    div, unit = time_unit([pred.predicted_step_ns.median, pred.baseline_step_ns])
    labels = ["CC off"] + [
        mechanism_label(m.mechanism) + (f" ({m.path})" if m.path else "") for m in rows
    ]
    values = [pred.baseline_step_ns / div] + [m.ns_per_step / div for m in rows]
    fig = go.Figure(
        go.Waterfall(
            x=[*labels, f"CC on {pred.platform.upper()}"],
            y=[*values, 0],
            measure=["absolute"] + ["relative"] * len(rows) + ["total"],
            text=[fmt_ns(pred.baseline_step_ns)]
            + [fmt_ns(m.ns_per_step, signed=True) for m in rows]
            + [fmt_ns(pred.predicted_step_ns.median)],
            textposition="outside",
            increasing={"marker": {"color": MECHANISM_COLORS.get("launch_toll", "#d62728")}},
            connector={"line": {"color": "#bbb"}},
        )
    )
    fig.update_layout(
        title="Predicted step: CC off plus each mechanism",
        yaxis_title=f"per step ({unit})",
        margin={"t": 50, "l": 60, "r": 20, "b": 80},
        height=380,
        showlegend=False,
    )
    return fig


def content(pred: Any) -> list[Any]:
    """The prediction as components (trace-derived strings as plain text)."""
    from ccdiag.report.predict import headline

    b = pred.predicted_step_ns
    parts: list[Any] = [
        html.Div(headline(pred), className="big-line", id="whatif-headline"),
        html.P(
            f"Band {fmt_ns(b.low)} – {fmt_ns(b.high)}: every constant at the cheap or dear end "
            "of its published range. Steady state (without context creation): "
            f"{fmt_ns(pred.steady_step_ns.median)}."
        ),
        graph(partition_figure(pred)),
    ]
    mech = html.Table(
        [
            html.Tr(
                [
                    html.Th(h)
                    for h in ("mechanism", "per step", "paid per step", "count per step", "how")
                ]
            )
        ]
        + [
            html.Tr(
                [
                    html.Td(mechanism_label(m.mechanism) + (f" ({m.path})" if m.path else "")),
                    html.Td(fmt_ns(m.ns_per_step, signed=True)),
                    html.Td(fmt_ns(m.paid_ns_per_step, signed=True)),  # — for None
                    html.Td(f"{m.count_per_step:g}"),
                    html.Td(m.text),
                ]
            )
            for m in pred.mechanisms
        ],
        className="table",
    )
    parts += [html.H3("Mechanisms"), mech, html.H3("Fixes")]
    if pred.fixes:
        parts.append(
            html.Table(
                [
                    html.Tr(
                        [
                            html.Th(h)
                            for h in (
                                "fix",
                                "CC step with it",
                                "recovers",
                                "of which without CC",
                                "alternative to",
                            )
                        ]
                    )
                ]
                + [
                    html.Tr(
                        [
                            html.Td([html.Code(f.fix), " ", f.text]),
                            html.Td(fmt_ns(f.predicted_step_ns)),
                            html.Td(fmt_ns(f.recovery_ns_per_step)),
                            html.Td(fmt_ns(f.recovery_without_cc_ns_per_step)),  # — for None
                            html.Td(", ".join(f.alternative_to) or "—"),
                        ],
                        **{"data-fix": f.fix},  # type: ignore[arg-type]
                    )
                    for f in pred.fixes
                ],
                className="table",
            )
        )
        if any(f.alternative_to for f in pred.fixes):
            parts.append(html.P("Alternatives replace each other: pick one, never add them."))
    else:
        parts.append(html.P("No fix recovers a measurable part of the predicted CC cost."))
    parts += [html.P(w, className="warning") for w in pred.warnings]
    parts.append(html.P(["How: ", pred.method], className="muted"))
    return parts


def register(app: Dash, _analyses: Any) -> None:
    @app.callback(
        Output(ids.WHATIF_CONTENT, "children"),
        Input(ids.WHATIF_TRACE, "value"),
        Input(ids.WHATIF_PLATFORM, "value"),
    )
    def _render(source_id: Any, platform: Any) -> Any:
        from ccdiag.app.sources import SourceError

        if not source_id:
            return placeholder("Pick a trace.")
        try:
            return content(predicted(source_id, platform))
        except (SourceError, InputError) as exc:
            return placeholder(str(exc))
