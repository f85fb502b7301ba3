"""Figures: pure functions of a Report (plus, optionally, ``api.evidence_series`` samples).

plotly only — no Dash — so ``ccdiag.report`` can embed the same figures in its HTML report.
Every figure says what was measured (title + subtitle) and uses units people read. A figure
whose data the report does not carry shows "not measured" and why, never raises.

Every string that comes from a trace (kernel, API and file names) is HTML-escaped before it
reaches plotly: plotly renders a subset of HTML in titles, labels and hover text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from ccdiag.app import truth
from ccdiag.app.units import (
    MECHANISM_COLORS,
    NEUTRAL_COLOR,
    RUN_COLORS,
    RUN_LABELS,
    fmt_bytes,
    fmt_gbps,
    fmt_ns,
    fmt_share,
    mechanism_label,
    time_unit,
)
from plotly.subplots import make_subplots

from ccdiag.units import number

RUNS = ("baseline", "treatment")
Series = Mapping[str, Any] | None
_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13}


# --------------------------------------------------------------------------- helpers


def esc(s: object) -> str:
    """A trace-derived string made safe for plotly's HTML-ish text rendering."""
    return html.escape(str(s), quote=True)


def _get(d: Any, *keys: Any, default: Any = None) -> Any:
    """``d[k0][k1]...`` or ``default`` when any step is missing."""
    for k in keys:
        if isinstance(d, Mapping) and k in d:
            d = d[k]
        elif isinstance(d, Sequence) and not isinstance(d, str) and isinstance(k, int):
            d = d[k] if -len(d) <= k < len(d) else None
        else:
            return default
        if d is None:
            return default
    return d


def attribution(report: Any, mechanism: str) -> Any:
    """The report's attribution of one mechanism, or None."""
    return next((a for a in report.attribution if a.mechanism == mechanism), None)


def evidence(report: Any, mechanism: str) -> dict[str, Any]:
    """The evidence of one mechanism ({} when it did not fire)."""
    a = attribution(report, mechanism)
    return dict(a.evidence) if a is not None else {}


def rule_reason(report: Any, mechanism: str) -> str:
    """Why a mechanism has no evidence: its rule's outcome and reason."""
    for r in report.rules:
        if r.mechanism == mechanism:
            what = {"skipped": "could not check", "clean": "checked, nothing found"}.get(
                r.outcome, r.outcome
            )
            return f"{r.code} {what}: {r.reason}" if r.reason else f"{r.code} {what}"
    return "no rule for this mechanism ran"


def _wrap(text: str, width: int = 88) -> list[str]:
    """Split a subtitle into lines of at most ``width`` characters, at spaces."""
    lines: list[str] = []
    cur = ""
    for word in text.split(" "):
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return [*lines, cur] if cur else lines


def _two_lines(label: str, width: int = 12) -> str:
    """A category label broken at a space so that neighbouring labels do not run together."""
    if len(label) <= width or " " not in label:
        return label
    cut = min((i for i, c in enumerate(label) if c == " "), key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "<br>" + label[cut + 1 :]


def _layout(fig: go.Figure, title: str, measured: str, **kw: Any) -> go.Figure:
    lines = _wrap(measured)
    if "height" in kw:
        kw["height"] += 17 * (len(lines) - 1)
    fig.update_layout(
        title={
            "text": title,
            "subtitle": {"text": "<br>".join(lines)},
            "x": 0.01,
            "xanchor": "left",
            # pinned to the top: a taller margin (panel titles) must not move the title down
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": 14},
        },
        template="plotly_white",
        font=_FONT,
        margin={"l": 70, "r": 30, "t": 64 + 17 * len(lines), "b": 60},
        **kw,
    )
    return fig


def not_measured(title: str, reason: str) -> go.Figure:
    """An empty figure that says the quantity was not measured, and why."""
    fig = go.Figure()
    fig.add_annotation(
        text=f"not measured — {esc(reason)}",
        showarrow=False,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        font={"size": 14, "color": "#666"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(meta={"not_measured": reason, "title": title})
    return _layout(fig, title, "no data in this report", height=260)


def is_not_measured(fig: go.Figure) -> tuple[str, str] | None:
    """(title, reason) of a :func:`not_measured` figure, else None (pages show one line)."""
    meta = fig.layout.meta
    if isinstance(meta, Mapping) and "not_measured" in meta:
        return str(meta.get("title", "")), str(meta["not_measured"])
    return None


def _pct_box(name: str, pcts: Mapping[str, Any], div: float, color: str, x: str) -> go.Box:
    """A box drawn from precomputed percentiles: box p25–p75, line p50, whiskers p10–p90."""
    return go.Box(
        name=name,
        x=[x],
        q1=[pcts["p25"] / div],
        median=[pcts["p50"] / div],
        q3=[pcts["p75"] / div],
        lowerfence=[pcts["p10"] / div],
        upperfence=[pcts["p90"] / div],
        marker_color=color,
        legendgroup=name,
        offsetgroup=name,
    )


def _has_pcts(p: Any) -> bool:
    return isinstance(p, Mapping) and all(k in p for k in ("p10", "p25", "p50", "p75", "p90"))


def _ecdf(values: Sequence[float], div: float, name: str, color: str, **kw: Any) -> go.Scatter:
    v = sorted(values)
    n = len(v)
    return go.Scatter(
        x=[x / div for x in v],
        y=[(i + 1) / n for i in range(n)],
        mode="lines",
        name=name,
        line={"color": color, "shape": "hv"},
        **kw,
    )


def _samples(series: Series, key: str, run: str) -> list[float]:
    return list(_get(series, key, run, "ns", default=[]) or [])


# --------------------------------------------------------------------------- overview


def step_time(report: Any) -> go.Figure:
    """Median step time of both runs, p10–p90 whiskers and the 95 % CI of each median."""
    st = report.step_ns
    spreads = {"baseline": st.baseline_spread, "treatment": st.treatment_spread}
    div, unit = time_unit([s.p90 for s in spreads.values()])
    fig = go.Figure()
    for run, s in spreads.items():
        fig.add_bar(
            x=[RUN_LABELS[run]],
            y=[s.median / div],
            name=RUN_LABELS[run],
            marker_color=RUN_COLORS[run],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [(s.p90 - s.median) / div],
                "arrayminus": [(s.median - s.p10) / div],
                "color": "#333",
            },
            text=[fmt_ns(s.median)],
            textposition="inside",
            insidetextanchor="start",
            hovertemplate=(
                f"median {fmt_ns(s.median)}<br>p10–p90 {fmt_ns(s.p10)} – {fmt_ns(s.p90)}"
                f"<br>95 % CI {fmt_ns(s.ci95_low)} – {fmt_ns(s.ci95_high)}<br>{s.n} steps"
                "<extra></extra>"
            ),
        )
        fig.add_scatter(
            x=[RUN_LABELS[run]],
            y=[s.median / div],
            mode="markers",
            marker={"symbol": "diamond", "size": 9, "color": "#111"},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [(s.ci95_high - s.median) / div],
                "arrayminus": [(s.median - s.ci95_low) / div],
                "color": "#111",
                "thickness": 3,
                "width": 10,
            },
            name="median, 95 % CI",
            showlegend=run == "baseline",
            hoverinfo="skip",
        )
    verdict = (
        "significant (the 95 % CI of the median per-step delta excludes 0)"
        if st.significant
        else "within the noise (the 95 % CI of the median per-step delta includes 0)"
    )
    measured = (
        f"per aligned step ({st.n_steps or st.baseline_spread.n} steps): bar = median, "
        f"whiskers = p10–p90, ◆ = 95 % CI of the median · delta {truth.delta_text(report)}: "
        f"{verdict}"
    )
    fig.update_yaxes(title_text=f"step time ({unit})", rangemode="tozero")
    return _layout(fig, "Step time: baseline vs treatment", measured, height=420)


def delta_waterfall(report: Any) -> go.Figure:
    """The per-step delta split by mechanism, with ``unattributed`` shown, as a waterfall."""
    small = truth.fired_with_nothing(report)
    parts = [(a.mechanism, a.ns_per_step) for a in truth.found(report)]
    rest = sum(a.ns_per_step for a in small)
    if rest:
        parts.append(("~0 mechanisms", rest))
    parts.append(("unattributed", report.unattributed_ns_per_step))
    total = sum(ns for _, ns in parts)
    div, unit = time_unit([abs(ns) for _, ns in parts] + [abs(total)])
    labels = [_two_lines(mechanism_label(m)) for m, _ in parts] + ["delta per step"]
    values = [ns / div for _, ns in parts] + [total / div]
    texts = [fmt_ns(ns, True) for _, ns in parts] + [fmt_ns(total, True)]
    fig = go.Figure(
        go.Waterfall(
            x=labels,
            y=values,
            measure=["relative"] * len(parts) + ["total"],
            text=texts,
            textposition="outside",
            increasing={"marker": {"color": "#d9534f"}},
            decreasing={"marker": {"color": "#5cb85c"}},
            totals={"marker": {"color": "#555"}},
            connector={"line": {"color": "#bbb"}},
            hovertemplate="%{x}: %{text}<extra></extra>",
            showlegend=False,
        )
    )
    measured = (
        f"the delta, {truth.delta_text(report)}, split into mechanisms; the parts add up to it "
        f"· delta = {esc(truth.delta_basis(report))}"
        + (
            " · ~0: "
            + ", ".join(f"{mechanism_label(a.mechanism)} {fmt_ns(a.ns_per_step)}" for a in small)
            if small
            else ""
        )
    )
    fig.update_yaxes(title_text=f"time per step ({unit})")
    return _layout(fig, "Where the extra time goes", measured, height=440)


def top_fixes(report: Any, n: int = 5) -> go.Figure:
    """The top fixes by predicted recovery per step (``truth.fixes``: deduplicated, alternatives
    marked, ~0 fixes left out)."""
    fx = truth.fixes(report)
    recs = fx.shown[:n]
    if not recs:
        why = (
            f"{len(fx.hidden)} fix(es) predicted to recover ~0 per step"
            if fx.hidden
            else "no mechanism fired, so no fix is recommended"
        )
        return not_measured("Top fixes", why)
    labels = [
        f"{f.rank} {esc(f.fix)}"
        + (f" (instead of {esc(f.alternative_to)})" if f.alternative_to else "")
        for f in recs
    ][::-1]
    recs = recs[::-1]
    div, unit = time_unit([f.ns for f in recs])
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=[f.ns / div for f in recs],
            orientation="h",
            marker_color=["#a6d8a6" if f.alternative_to else "#2ca02c" for f in recs],
            text=[f"{fmt_ns(f.ns)} ({fmt_share(f.share)} of the delta)" for f in recs],
            textposition="auto",
            customdata=[[esc(f.text), esc(f.method)] for f in recs],
            hovertemplate="%{customdata[0]}<br><i>how predicted:</i> %{customdata[1]}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text=f"predicted recovery per step ({unit})", rangemode="tozero")
    measured = (
        "predicted time recovered per step if the fix is applied; light bars are alternatives "
        "(instead of the fix named, not in addition) · the best fix of each mechanism together: "
        f"at most {fmt_ns(fx.combined_ns)} ({fmt_share(truth.share_of_delta(report, fx.combined_ns))} "
        "of the delta)" + (", capped at the delta" if fx.capped else "")
    )
    return _layout(fig, "Top fixes", measured, height=140 + 50 * len(recs))


def ledger(report: Any) -> go.Figure:
    """The critical-path ledger: change of each category of the step, per step."""
    rows = list(report.partition.ledger) if report.partition else []
    rows = [r for r in rows if r.baseline or r.treatment]
    if not rows:
        return not_measured("Critical-path ledger", "the report carries no ledger")
    div, unit = time_unit([max(r.baseline, r.treatment) for r in rows])
    fig = go.Figure()
    names = [f"{r.side}: {esc(r.category)}" for r in rows]
    for run in RUNS:
        fig.add_bar(
            y=names,
            x=[getattr(r, run) / div for r in rows],
            orientation="h",
            name=RUN_LABELS[run],
            marker_color=RUN_COLORS[run],
            hovertemplate="%{y}: %{x:.3f} " + unit + "<extra>" + RUN_LABELS[run] + "</extra>",
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text=f"time per step ({unit})")
    measured = (
        "host: main-thread time not hidden by the GPU; gpu: time the host waited on the GPU "
        "(mean per step over the steps used)"
    )
    return _layout(fig, "Critical-path ledger", measured, height=140 + 40 * len(rows))


# --------------------------------------------------------------------------- per mechanism


def mechanism_per_step(report: Any, mechanism: str) -> go.Figure:
    """Attributed time of one mechanism in every aligned step (kept and trimmed steps)."""
    title = f"{mechanism_label(mechanism)}: attributed time per step"
    steps = list(report.partition.per_step) if report.partition else []
    vals = [(s.index, s.rank, s.parts.get(mechanism), s.kept) for s in steps]
    vals = [v for v in vals if v[2] is not None]
    if not vals:
        return not_measured(title, rule_reason(report, mechanism))
    div, unit = time_unit([abs(v[2]) for v in vals])
    fig = go.Figure()
    for kept, name, color in ((True, "steps used", "#444"), (False, "trimmed steps", "#bbb")):
        sel = [v for v in vals if v[3] is kept]
        if sel:
            fig.add_bar(
                x=[f"r{v[1]}:{v[0]}" for v in sel],
                y=[v[2] / div for v in sel],
                name=name,
                marker_color=color,
                hovertemplate="step %{x}: %{y:.3f} " + unit + "<extra></extra>",
            )
    a = attribution(report, mechanism)
    if a is not None:
        fig.add_hline(
            y=a.ns_per_step / div,
            line_dash="dash",
            line_color=MECHANISM_COLORS.get(mechanism, "#333"),
            annotation_text=f"reported {fmt_ns(a.ns_per_step)}/step",
        )
    fig.update_xaxes(title_text="aligned step (rank:index)", type="category")
    fig.update_yaxes(title_text=f"attributed ({unit})")
    return _layout(
        fig,
        title,
        f"part of each aligned step's delta this mechanism explains ({unit}); light: steps "
        "trimmed from the aggregate; dashed: the value reported",
        height=340,
    )


def launch_costs(report: Any, series: Series = None) -> go.Figure:
    """Host cost per kernel launch, CC off vs on: inside the launch call and the gap before it."""
    title = "Kernel launch cost per launch"
    ev = evidence(report, "launch_toll")
    panels = (
        ("launch_call", "per_launch_call_ns", "inside the launch call"),
        ("launch_gap", "pre_launch_gap_ns", "host gap before the launch"),
    )
    have_series = any(_samples(series, k, r) for k, _, _ in panels for r in RUNS)
    have_ev = any(_has_pcts(_get(ev, e, r)) for _, e, _ in panels for r in RUNS)
    if not (have_series or have_ev):
        return not_measured(title, rule_reason(report, "launch_toll"))
    fig = make_subplots(rows=1, cols=2, subplot_titles=[p[2] for p in panels])
    allv = [v for k, _, _ in panels for r in RUNS for v in _samples(series, k, r)[-1:]]
    allv += [_get(ev, e, r, "p90", default=0) for _, e, _ in panels for r in RUNS]
    div, unit = time_unit(allv)
    for col, (key, ekey, _) in enumerate(panels, start=1):
        for run in RUNS:
            vals = _samples(series, key, run)
            if vals:
                fig.add_trace(
                    _ecdf(
                        vals,
                        div,
                        RUN_LABELS[run],
                        RUN_COLORS[run],
                        showlegend=col == 1,
                        legendgroup=run,
                    ),
                    row=1,
                    col=col,
                )
            elif _has_pcts(_get(ev, ekey, run)):
                box = _pct_box(
                    RUN_LABELS[run], ev[ekey][run], div, RUN_COLORS[run], RUN_LABELS[run]
                )
                box.showlegend = col == 1
                fig.add_trace(box, row=1, col=col)
        fig.update_xaxes(title_text=f"per launch ({unit})" if have_series else "", row=1, col=col)
    if have_series:
        fig.update_xaxes(type="log")
        fig.update_yaxes(title_text="share of launches ≤ x", row=1, col=1)
    else:
        fig.update_yaxes(title_text=f"per launch ({unit})", row=1, col=1)
    b = _get(ev, "launches_per_step", "baseline")
    t = _get(ev, "launches_per_step", "treatment")
    where = _get(ev, "toll_location")
    measured = (
        "main-thread host time per kernel launch API call and the gap before it"
        + (" (cumulative distribution)" if have_series else " (box p25–p75, whiskers p10–p90)")
        + (f" · launches per step {number(b)} → {number(t)}" if b is not None else "")
        + (f" · toll {esc(where)}" if where else "")
    )
    fig = _layout(fig, title, measured, height=440)
    fig.update_layout(margin={"t": fig.layout.margin.t + 24})  # the panels' titles
    return fig


def gpu_idle_gaps(report: Any, series: Series = None) -> go.Figure:
    """GPU idle gaps between consecutive GPU work, CC off vs on."""
    title = "GPU idle gaps"
    rows = {r.category: r for r in (report.partition.ledger if report.partition else [])}
    idle = rows.get("gpu_idle")
    have = any(_samples(series, "gpu_idle_gap", r) for r in RUNS)
    if not have and idle is None:
        return not_measured(
            title,
            "no GPU activity in the traces"
            if report.mode == "host_only"
            else "no idle-gap data in this report",
        )
    fig = go.Figure()
    if have:
        top = [v for r in RUNS for v in _samples(series, "gpu_idle_gap", r)[-1:]]
        div, unit = time_unit(top)
        for run in RUNS:
            vals = _samples(series, "gpu_idle_gap", run)
            if vals:
                fig.add_trace(_ecdf(vals, div, RUN_LABELS[run], RUN_COLORS[run]))
        fig.update_xaxes(type="log", title_text=f"idle gap between GPU activities ({unit})")
        fig.update_yaxes(title_text="share of gaps ≤ x")
    elif idle is not None:
        div, unit = time_unit([idle.baseline, idle.treatment])
        for run in RUNS:
            fig.add_bar(
                x=[RUN_LABELS[run]],
                y=[getattr(idle, run) / div],
                name=RUN_LABELS[run],
                marker_color=RUN_COLORS[run],
            )
        fig.update_yaxes(title_text=f"GPU idle the host waited on, per step ({unit})")
    extra = (
        f" · GPU-critical idle per step {fmt_ns(idle.baseline)} → {fmt_ns(idle.treatment)}"
        if idle
        else ""
    )
    measured = (
        "time between the end of one GPU activity and the start of the next, per device, within steps"
        + extra
    )
    return _layout(fig, title, measured, height=400)


def _fit_line(fit: Mapping[str, Any], xs: Sequence[float]) -> list[float] | None:
    toll = fit.get("toll_ns")
    if toll is None:
        return None
    gbps = fit.get("gbps")
    return [toll + (x / gbps if gbps else 0.0) for x in xs]


def copy_latency(report: Any, series: Series = None) -> go.Figure:
    """Copy latency vs size, both runs, with the fitted ``toll + bytes / bandwidth`` lines."""
    title = "Host↔device copy latency vs size"
    ev = evidence(report, "serialized_copies")
    pts = {r: _get(series, "copies", r, default={}) or {} for r in RUNS}
    have = any(pts[r].get("bytes") for r in RUNS)
    buckets = _get(ev, "buckets", default=[]) or []
    if not have and not buckets:
        return not_measured(title, rule_reason(report, "serialized_copies"))
    lat = [v for r in RUNS for v in pts[r].get("latency_ns", [])] + [
        b.get("latency_p90_ns") or 0 for b in buckets
    ]
    div, unit = time_unit(lat)
    xs_all = [x for r in RUNS for x in pts[r].get("bytes", [])] + [
        b.get("bytes") or 0 for b in buckets
    ]
    xs_all = [x for x in xs_all if x and x > 0] or [1]
    fig = go.Figure()
    for run in RUNS:
        p = pts[run]
        if p.get("bytes"):
            fig.add_scatter(
                x=p["bytes"],
                y=[v / div for v in p["latency_ns"]],
                mode="markers",
                name=f"{RUN_LABELS[run]}: copies",
                marker={"color": RUN_COLORS[run], "size": 6, "opacity": 0.55},
                customdata=[esc(k) for k in p.get("kind", [""] * len(p["bytes"]))],
                hovertemplate="%{x} B, %{y:.2f} " + unit + " (%{customdata})<extra></extra>",
            )
        else:
            bk = [b for b in buckets if b.get("run") == run and b.get("bytes")]
            if bk:
                fig.add_scatter(
                    x=[b["bytes"] for b in bk],
                    y=[b["latency_p50_ns"] / div for b in bk],
                    mode="markers",
                    name=f"{RUN_LABELS[run]}: median per size bucket",
                    marker={"color": RUN_COLORS[run], "size": 10, "symbol": "square"},
                )
        fit = _get(ev, "fit", run, default={}) or {}
        xs = sorted({min(xs_all), max(xs_all)})
        ys = _fit_line(fit, xs)
        if ys is not None:
            if fit.get("gbps"):
                label = f"fit: {fmt_ns(fit['toll_ns'])} + bytes / {fmt_gbps(fit['gbps'])}"
            else:
                label = f"fit: {fmt_ns(fit['toll_ns'])} per copy (one size: no bandwidth fitted)"
            fig.add_scatter(
                x=xs if len(xs) > 1 else [xs[0] / 2, xs[0] * 2],
                y=[y / div for y in (ys if len(ys) > 1 else ys * 2)],
                mode="lines",
                name=f"{RUN_LABELS[run]} {label}",
                line={"color": RUN_COLORS[run], "dash": "dash"},
            )
    fig.update_xaxes(type="log", title_text="bytes per copy")
    fig.update_yaxes(title_text=f"latency per copy ({unit})", rangemode="tozero")
    measured = (
        "cost of each host-crossing copy (its GPU transfer, or the call when it blocked for it); "
        "dashed: least-squares fit latency = toll + bytes / bandwidth"
    )
    return _layout(fig, title, measured, height=440)


def copy_concurrency(report: Any, series: Series = None) -> go.Figure:
    """How many host-crossing copies were in flight at once, across streams, both runs."""
    title = "Copy concurrency across streams"
    ev = evidence(report, "serialized_copies")
    conc = {r: _get(series, "copy_concurrency", r, default={}) or {} for r in RUNS}
    have = any(conc[r].get("levels") for r in RUNS)
    ov = _get(ev, "overlap", default={}) or {}
    if not have and not ov:
        return not_measured(title, rule_reason(report, "serialized_copies"))
    fig = go.Figure()
    if have:
        for run in RUNS:
            c = conc[run]
            total = sum(c.get("ns", [])) or 1
            fig.add_bar(
                x=[f"{k} in flight" for k in c.get("levels", [])],
                y=[100 * v / total for v in c.get("ns", [])],
                name=f"{RUN_LABELS[run]} ({c.get('streams', 0)} streams)",
                marker_color=RUN_COLORS[run],
                hovertemplate="%{x}: %{y:.1f} % of copy time<extra></extra>",
            )
        fig.update_yaxes(title_text="share of copy time (%)", range=[0, 100])
    else:
        for run in RUNS:
            fig.add_bar(
                x=[RUN_LABELS[run]],
                y=[_get(ov, run, "concurrency", default=0)],
                name=RUN_LABELS[run],
                marker_color=RUN_COLORS[run],
            )
        fig.update_yaxes(title_text="copies in flight on average (1 = serialized)")
    fig.update_layout(barmode="group")
    parts = [
        f"{RUN_LABELS[r]}: {_get(ov, r, 'streams', default='?')} streams, overlap "
        f"{fmt_share(_get(ov, r, 'overlap_share'))}"
        for r in RUNS
        if _get(ov, r)
    ]
    measured = "time with k host-crossing copies running at once on the GPU" + (
        " · " + "; ".join(parts) if parts else ""
    )
    return _layout(fig, title, measured, height=380)


def blocked_calls(report: Any, series: Series = None) -> go.Figure:
    """Host time inside asynchronous copy calls vs the transfer they issued."""
    title = "Host blocked in async copy calls"
    ev = evidence(report, "blocked_non_blocking")
    pts = {r: _get(series, "async_copies", r, default={}) or {} for r in RUNS}
    have = any(pts[r].get("host_ns") for r in RUNS)
    per_step = _get(ev, "blocked_in_async_calls_ns_per_step", default={}) or {}
    if not have and not per_step:
        return not_measured(title, rule_reason(report, "blocked_non_blocking"))
    fig = go.Figure()
    if have:
        allv = [v for r in RUNS for k in ("host_ns", "transfer_ns") for v in pts[r].get(k, [])]
        div, unit = time_unit(allv)
        for run in RUNS:
            p = pts[run]
            if p.get("host_ns"):
                fig.add_scatter(
                    x=[v / div for v in p["transfer_ns"]],
                    y=[v / div for v in p["host_ns"]],
                    mode="markers",
                    name=RUN_LABELS[run],
                    marker={"color": RUN_COLORS[run], "size": 7, "opacity": 0.6},
                    customdata=p.get("bytes"),
                    hovertemplate="transfer %{x:.2f} "
                    + unit
                    + ", host %{y:.2f} "
                    + unit
                    + ", %{customdata} B<extra></extra>",
                )
        top = max(allv) / div if allv else 1
        fig.add_scatter(
            x=[0, top],
            y=[0, top],
            mode="lines",
            name="host time = transfer time",
            line={"color": "#999", "dash": "dot"},
        )
        fig.update_xaxes(title_text=f"GPU transfer time ({unit})", rangemode="tozero")
        fig.update_yaxes(title_text=f"host time inside the call ({unit})", rangemode="tozero")
    else:
        div, unit = time_unit(per_step.values())
        for run in RUNS:
            fig.add_bar(
                x=[RUN_LABELS[run]],
                y=[per_step.get(run, 0) / div],
                name=RUN_LABELS[run],
                marker_color=RUN_COLORS[run],
            )
        fig.update_yaxes(title_text=f"blocked in async copy calls per step ({unit})")
    util = _get(ev, "gpu_utilization", default={}) or {}
    extra = []
    if per_step:
        extra.append(
            f"blocked per step {fmt_ns(per_step.get('baseline'))} → {fmt_ns(per_step.get('treatment'))}"
        )
    if util:
        extra.append(
            f"GPU utilization {fmt_share(util.get('baseline'))} → {fmt_share(util.get('treatment'))}"
        )
    measured = (
        "each cudaMemcpyAsync-style call: points on the dotted line blocked the host for the whole transfer"
        + (" · " + "; ".join(extra) if extra else "")
    )
    return _layout(fig, title, measured, height=420)


def collective_bandwidth(report: Any, series: Series = None) -> go.Figure:
    """Collective (NCCL) bandwidth vs message size, both runs."""
    title = "Collective bandwidth vs message size"
    ev = evidence(report, "encrypted_collectives")
    pts = {r: _get(series, "collectives", r, default={}) or {} for r in RUNS}
    have = any(any(pts[r].get("bytes", [])) for r in RUNS)
    bks = {r: _get(ev, "bandwidth_vs_size", r, default=[]) or [] for r in RUNS}
    if not have and not any(bks.values()):
        return not_measured(title, rule_reason(report, "encrypted_collectives"))
    fig = go.Figure()
    for run in RUNS:
        p = pts[run]
        xs = [
            (b, d, n)
            for b, d, n in zip(
                p.get("bytes", []),
                p.get("dur_ns", []),
                p.get("name", [""] * len(p.get("bytes", []))),
            )
            if b and d
        ]
        if xs:
            fig.add_scatter(
                x=[b for b, _, _ in xs],
                y=[b / d for b, d, _ in xs],
                mode="markers",
                name=f"{RUN_LABELS[run]}: collectives",
                marker={"color": RUN_COLORS[run], "size": 6, "opacity": 0.5},
                customdata=[esc(n) for _, _, n in xs],
                hovertemplate="%{customdata}<br>%{x} B at %{y:.1f} GB/s<extra></extra>",
            )
        bk = [b for b in bks[run] if b.get("bytes") and b.get("gbps") is not None]
        if bk:
            bk.sort(key=lambda b: b["bytes"])
            fig.add_scatter(
                x=[b["bytes"] for b in bk],
                y=[b["gbps"] for b in bk],
                mode="lines+markers",
                name=f"{RUN_LABELS[run]}: median per size bucket",
                line={"color": RUN_COLORS[run], "width": 3},
                marker={"symbol": "square", "size": 9},
            )
    fig.update_xaxes(type="log", title_text="message size (bytes)")
    fig.update_yaxes(title_text="algorithm bandwidth (GB/s)", rangemode="tozero")
    world = _get(ev, "world_size")
    busy = _get(ev, "collective_busy_ns_per_step", default={}) or {}
    extra = (
        f" · collective time per step {fmt_ns(busy.get('baseline'))} → {fmt_ns(busy.get('treatment'))}"
        if busy
        else ""
    )
    measured = (
        "bytes / kernel duration of each NCCL kernel"
        + (f" · {world} ranks" if world else "")
        + extra
    )
    return _layout(fig, title, measured, height=420)


def uvm_faults(report: Any, series: Series = None) -> go.Figure:
    """Unified-memory page faults and migrations: size and duration, both runs."""
    title = "UVM faults and migrations"
    ev = evidence(report, "uvm_migration")
    pts = {r: _get(series, "uvm", r, default={}) or {} for r in RUNS}
    have = any(pts[r].get("dur_ns") for r in RUNS)
    mig = _get(ev, "migrations", default={}) or {}
    if not have and not mig:
        return not_measured(title, rule_reason(report, "uvm_migration"))
    fig = go.Figure()
    if have:
        div, unit = time_unit([v for r in RUNS for v in pts[r].get("dur_ns", [])])
        for run in RUNS:
            p = pts[run]
            if p.get("dur_ns"):
                fig.add_scatter(
                    x=[max(b, 1) for b in p["bytes"]],
                    y=[v / div for v in p["dur_ns"]],
                    mode="markers",
                    name=f"{RUN_LABELS[run]} ({p.get('n', len(p['dur_ns']))} events)",
                    marker={"color": RUN_COLORS[run], "size": 6, "opacity": 0.5},
                )
        fig.update_xaxes(type="log", title_text="bytes migrated per event")
        fig.update_yaxes(title_text=f"duration ({unit})", rangemode="tozero")
    else:
        div, unit = time_unit([_get(mig, r, "time_ns", default=0) for r in RUNS])
        for run in RUNS:
            fig.add_bar(
                x=[RUN_LABELS[run]],
                y=[_get(mig, run, "time_ns", default=0) / div],
                name=RUN_LABELS[run],
                marker_color=RUN_COLORS[run],
            )
        fig.update_yaxes(title_text=f"migration time ({unit})")
    parts = [
        f"{RUN_LABELS[r]}: {_get(mig, r, 'count', default='?')} events, "
        f"{fmt_bytes(_get(mig, r, 'bytes'))}, {fmt_ns(_get(mig, r, 'time_ns'))}"
        for r in RUNS
        if _get(mig, r)
    ]
    measured = "UVM page-fault / migration events (unified-memory memcpy rows)" + (
        " · " + "; ".join(parts) if parts else ""
    )
    return _layout(fig, title, measured, height=400)


def percentile_boxes(report: Any, mechanism: str, key: str, title: str, measured: str) -> go.Figure:
    """Any ``{"baseline": {p10..p90}, "treatment": {...}}`` evidence entry, as two boxes."""
    d = _get(evidence(report, mechanism), key, default={}) or {}
    if not any(_has_pcts(d.get(r)) for r in RUNS):
        return not_measured(title, rule_reason(report, mechanism))
    div, unit = time_unit([d[r]["p90"] for r in RUNS if _has_pcts(d.get(r))])
    fig = go.Figure(
        [
            _pct_box(RUN_LABELS[r], d[r], div, RUN_COLORS[r], RUN_LABELS[r])
            for r in RUNS
            if _has_pcts(d.get(r))
        ]
    )
    fig.update_yaxes(title_text=f"per call ({unit})", rangemode="tozero")
    return _layout(fig, title, measured + " (box p25–p75, whiskers p10–p90)", height=380)


def setup_costs(report: Any) -> go.Figure:
    """One-time setup calls (context creation, allocation), both runs."""
    title = "One-time setup calls"
    calls = _get(evidence(report, "one_time_setup"), "top_calls", default={}) or {}
    if not any(calls.get(r) for r in RUNS):
        return not_measured(title, rule_reason(report, "one_time_setup"))
    names = list(
        dict.fromkeys(esc(c.get("api") or c.get("name")) for r in RUNS for c in calls.get(r, []))
    )
    div, unit = time_unit([c.get("total_ns", 0) for r in RUNS for c in calls.get(r, [])])
    fig = go.Figure()
    for run in RUNS:
        by = {esc(c.get("api") or c.get("name")): c.get("total_ns", 0) for c in calls.get(run, [])}
        fig.add_bar(
            y=names,
            x=[by.get(n, 0) / div for n in names],
            orientation="h",
            name=RUN_LABELS[run],
            marker_color=RUN_COLORS[run],
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text=f"total time in the call ({unit})")
    return _layout(
        fig,
        title,
        "host time in setup API calls (context, allocation, module load)",
        height=160 + 40 * len(names),
    )


def host_code_ops(report: Any) -> go.Figure:
    """Median duration of the cpu_op kinds without CUDA calls (the host-slowdown control)."""
    title = "Host code outside CUDA calls"
    ev = evidence(report, "host_slowdown")
    # the op-control path puts them at the top; the gap model beside its own basis
    ops = _get(ev, "ops", default=[]) or _get(ev, "cpu_op_control", "ops", default=[]) or []
    if not ops:
        why = rule_reason(report, "host_slowdown")
        if _get(ev, "ratio") is not None:
            why = f"{_get(ev, 'ratio')}x from the {_get(ev, 'basis')} (no cpu_ops to show)"
        elif _get(ev, "lost_time_slices") is not None:
            why = f"lost time slices: {_get(ev, 'lost_time_slices', 'basis')} (no cpu_ops to show)"
        return not_measured(title, why)
    names = [esc(o.get("op")) for o in ops]
    div, unit = time_unit([o["median_ns"][r] for o in ops for r in RUNS])
    fig = go.Figure()
    for run in RUNS:
        fig.add_bar(
            y=names,
            x=[o["median_ns"][run] / div for o in ops],
            orientation="h",
            name=RUN_LABELS[run],
            marker_color=RUN_COLORS[run],
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text=f"median duration per call ({unit})")
    return _layout(
        fig,
        title,
        "cpu_op kinds that make no CUDA call, most called first: the same work in both runs",
        height=160 + 40 * len(names),
    )


def mechanism_figures(report: Any, mechanism: str, series: Series = None) -> list[go.Figure]:
    """The evidence figures of one mechanism's page, in reading order."""
    per = {
        "launch_toll": lambda: [launch_costs(report, series), gpu_idle_gaps(report, series)],
        "serialized_copies": lambda: [
            copy_latency(report, series),
            copy_concurrency(report, series),
        ],
        "blocked_non_blocking": lambda: [blocked_calls(report, series)],
        "encrypted_collectives": lambda: [collective_bandwidth(report, series)],
        "uvm_migration": lambda: [uvm_faults(report, series)],
        "sync_stall": lambda: [
            percentile_boxes(
                report,
                "sync_stall",
                "per_call_ns",
                "Synchronize calls",
                "host time per synchronize call",
            ),
            percentile_boxes(
                report,
                "sync_stall",
                "exposed_per_call_ns",
                "Sync cost beyond the wait",
                "host time per sync call not spent waiting for the GPU",
            ),
        ],
        "one_time_setup": lambda: [setup_costs(report)],
        "host_slowdown": lambda: [host_code_ops(report)],
    }
    figs = per.get(mechanism, lambda: [])()
    return [*figs, mechanism_per_step(report, mechanism)]


# --------------------------------------------------------------------------- timeline


def timeline(tl: Mapping[str, Any], parts: Mapping[str, int] | None = None) -> go.Figure:
    """One aligned step of both runs (``api.step_timeline``): lanes of events, zoomable.

    A treatment event is drawn in its mechanism's colour only when ``parts`` (that step's
    attribution) gives the mechanism a measurable time in this step; every other event, and
    every baseline event, is neutral grey. Both runs' titles name the aligned step (the
    slider's number), the trace's own step number in brackets when it differs.
    """
    lanes = list(tl.get("lanes", []))
    runs = [r for r in RUNS if _get(tl, r, "events")]
    if not lanes or not runs:
        return not_measured("Step timeline", "no events in this step")
    index = tl.get("index", 0)
    parts = dict(parts or {})
    step_delta = sum(parts.values())
    lit = {
        m
        for m, ns in parts.items()
        if m != "unattributed"
        and ns > 0
        and (step_delta <= 0 or ns >= truth.NEGLIGIBLE_SHARE * step_delta)
    }

    def title(r: str) -> str:
        own = tl[r].get("step")
        t = f"{RUN_LABELS[r]} · aligned step {index}"
        if own is not None and own != index:
            t += f" (trace step {own})"
        t += f" · {fmt_ns(tl[r]['step_ns'])}"
        if tl[r].get("truncated"):
            t += f" · {tl[r]['truncated']} shortest events not drawn"
        return t

    fig = make_subplots(
        rows=len(runs),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[title(r) for r in runs],
        vertical_spacing=0.12,
    )
    div, unit = time_unit([tl[r]["step_ns"] for r in runs])
    seen: set[str] = set()
    for row, run in enumerate(runs, start=1):
        ev = tl[run]["events"]
        groups: dict[str, list[int]] = {}
        for i, m in enumerate(ev["mechanism"]):
            key = m if (run == "treatment" and m in lit) else "other"
            groups.setdefault(key, []).append(i)
        for mech, idx in groups.items():
            if mech == "other":
                name = "baseline events" if run == "baseline" else "no mechanism in this step"
            else:
                name = f"{mechanism_label(mech)} ({fmt_ns(parts[mech])} in this step)"
            legend = f"{run}:{mech}" if mech == "other" else mech
            fig.add_trace(
                go.Bar(
                    y=[ev["lane"][i] for i in idx],
                    x=[ev["dur_ns"][i] / div for i in idx],
                    base=[ev["start_ns"][i] / div for i in idx],
                    orientation="h",
                    name=name,
                    legendgroup=legend,
                    showlegend=legend not in seen,
                    marker={
                        "color": MECHANISM_COLORS.get(mech, NEUTRAL_COLOR)
                        if mech != "other"
                        else NEUTRAL_COLOR,
                        "line": {"width": 0},
                    },
                    customdata=[
                        [
                            esc(ev["name"][i]),
                            fmt_ns(ev["dur_ns"][i]),
                            esc(ev["mechanism"][i] or "—"),
                        ]
                        for i in idx
                    ],
                    hovertemplate="%{customdata[0]}<br>%{customdata[1]} at %{base:.3f} "
                    + unit
                    + "<br>claimed by: %{customdata[2]}<extra>"
                    + esc(name)
                    + "</extra>",
                    meta={"run": run, "mechanism": None if mech == "other" else mech},
                ),
                row=row,
                col=1,
            )
            seen.add(legend)
        fig.update_yaxes(categoryorder="array", categoryarray=lanes[::-1], row=row, col=1)
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        legend={"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0},
    )
    fig.update_xaxes(title_text=f"time from the step's start ({unit})", row=len(runs), col=1)
    lit_text = (
        ", ".join(
            f"{mechanism_label(m)} {fmt_ns(parts[m], True)}"
            for m in sorted(lit, key=lambda m: -parts[m])
        )
        if lit
        else "no mechanism has measurable time in this step"
    )
    measured = (
        f"rank {tl.get('rank', 0)}, aligned step {index}; coloured: treatment events of the "
        f"mechanisms attributed in this step ({lit_text}); grey: everything else, the whole "
        "baseline included; drag to zoom, double-click to reset"
    )
    fig = _layout(
        fig, "Step timeline: baseline vs treatment", measured, height=320 + 2 * 32 * len(lanes)
    )
    # room for the subplot titles below the subtitle, and for the legend below the axis title
    fig.update_layout(margin={"b": 150, "t": fig.layout.margin.t + 28})
    return fig
