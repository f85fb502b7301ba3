"""A minimal figure set for the HTML report: pure functions ``Report -> go.Figure``.

The dashboard's figures (``ccdiag.app.figures``) replace these: when that module defines
``REPORT_FIGURES`` — a sequence of ``(title, function)`` pairs, each function a pure
``Report -> plotly.graph_objects.Figure`` — the HTML report embeds those instead (see
``ccdiag.report.html.figure_set``). Until then the report uses :data:`REPORT_FIGURES` below.

Every figure reads only the Report (no frames, no files), uses fixed colours per mechanism and
no random ids, so the same report gives the same figure JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from ccdiag.verdict import MECHANISMS, Report

UNATTRIBUTED = "unattributed"
#: One colour per mechanism (Okabe–Ito palette, readable by colour-blind people); grey residual.
COLORS = dict(
    zip(
        (*MECHANISMS, UNATTRIBUTED),
        (
            "#E69F00",
            "#56B4E9",
            "#009E73",
            "#CC79A7",
            "#0072B2",
            "#D55E00",
            "#F0E442",
            "#000000",
            "#999999",
        ),  # fmt: skip
        strict=True,
    )
)
_LAYOUT = dict(template="plotly_white", height=360, margin=dict(l=60, r=20, t=50, b=50))


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


def partition_figure(report: Report) -> go.Figure:
    """Waterfall of the per-step delta: each mechanism, the residual, the total (µs/step)."""
    names = [a.mechanism for a in report.attribution] + [UNATTRIBUTED]
    values = [_us(a.ns_per_step) for a in report.attribution] + [
        _us(report.unattributed_ns_per_step)
    ]
    total = report.partition.total_ns_per_step if report.partition else report.step_ns.delta
    fig = go.Figure(
        go.Waterfall(
            x=[*names, "total"],
            y=[*values, _us(total)],
            measure=["relative"] * len(names) + ["total"],
            text=[f"{v:+,.1f}" for v in [*values, _us(total)]],
            textposition="outside",
            connector={"line": {"color": "#bbbbbb"}},
            increasing={"marker": {"color": "#D55E00"}},
            decreasing={"marker": {"color": "#009E73"}},
            totals={"marker": {"color": "#555555"}},
        )
    )
    fig.update_layout(
        title="Where the extra time per step goes", yaxis_title="µs per step", **_LAYOUT
    )
    return fig


def per_step_figure(report: Report) -> go.Figure:
    """Per aligned step (first rank): the delta's parts by mechanism, stacked, and the delta."""
    steps = [s for s in (report.partition.per_step if report.partition else [])]
    rank = min((s.rank for s in steps), default=0)
    steps = [s for s in steps if s.rank == rank]
    x = [s.index for s in steps]
    mechs = [a.mechanism for a in report.attribution] + [UNATTRIBUTED]
    fig = go.Figure()
    for m in mechs:
        fig.add_bar(
            x=x, y=[_us(s.parts.get(m, 0)) for s in steps], name=m, marker_color=COLORS.get(m)
        )
    fig.add_scatter(
        x=x,
        y=[_us(s.delta) for s in steps],
        name="step delta",
        mode="markers",
        marker={"color": "black", "symbol": "diamond"},
    )
    fig.update_layout(
        title=f"Per-step partition of the delta (rank {rank}; steps left out of the mean are "
        "still shown)",
        barmode="relative",
        xaxis_title="aligned step",
        yaxis_title="µs",
        **_LAYOUT,
    )
    return fig


def step_times_figure(report: Report) -> go.Figure:
    """Step time of both runs: median with the p10–p90 range, in ms."""
    st = report.step_ns
    sides = (
        ("baseline", st.baseline_spread, "#0072B2"),
        ("treatment", st.treatment_spread, "#D55E00"),
    )
    fig = go.Figure()
    for name, sp, color in sides:
        fig.add_bar(
            x=[name],
            y=[round(sp.median / 1e6, 4)],
            name=name,
            marker_color=color,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [round((sp.p90 - sp.median) / 1e6, 4)],
                "arrayminus": [round((sp.median - sp.p10) / 1e6, 4)],
            },
        )
    fig.update_layout(
        title=f"Step time, median and p10–p90 over {st.n_steps} aligned steps",
        yaxis_title="ms per step",
        showlegend=False,
        **_LAYOUT,
    )
    return fig


def ledger_figure(report: Report) -> go.Figure:
    """The critical-path ledger: exposed host time and GPU-critical time per category."""
    rows = [
        r
        for r in (report.partition.ledger if report.partition else [])
        if r.baseline or r.treatment
    ]
    labels = [f"{r.side}: {r.category}" for r in rows]
    fig = go.Figure()
    for side, color in (("baseline", "#0072B2"), ("treatment", "#D55E00")):
        fig.add_bar(
            y=labels,
            x=[_us(getattr(r, side)) for r in rows],
            name=side,
            orientation="h",
            marker_color=color,
        )
    fig.update_layout(
        title="Critical-path ledger (mean per step)",
        barmode="group",
        xaxis_title="µs per step",
        **{**_LAYOUT, "height": max(260, 60 + 40 * len(rows))},
    )
    return fig


FigureFn = Callable[[Report], go.Figure]
REPORT_FIGURES: Sequence[tuple[str, FigureFn]] = (
    ("Where the extra time goes", partition_figure),
    ("Per-step partition", per_step_figure),
    ("Step time spread", step_times_figure),
    ("Critical-path ledger", ledger_figure),
)
"""(title, figure function) in the order the HTML report shows them."""
