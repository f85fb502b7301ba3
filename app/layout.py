"""The app shell (header, status, navigation, stores) and small shared components.

Trace-derived strings are passed to Dash components as plain children: React renders them as
text, never as HTML. Nothing here uses ``dangerously_allow_html`` or Markdown for trace data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import dash
from ccdiag.app import ids
from ccdiag.app.units import fmt_bytes, fmt_gbps, fmt_ns, fmt_share
from dash import dcc, html

GRAPH_CONFIG: Any = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def shell() -> html.Div:
    """The layout around every page (a function: navigation is read from the page registry)."""
    return html.Div(
        [
            dcc.Store(id=ids.REPORT_STORE, storage_type="session"),
            dcc.Store(id=ids.REQUEST_STORE),
            dcc.Store(id=ids.JOB_STORE),
            dcc.Store(id=ids.STAGED_STORE, data={}),
            dcc.Interval(id=ids.POLL, interval=400, disabled=True),
            html.Header(
                [
                    html.Div(
                        [
                            dcc.Link("ccdiag", href="/", className="brand"),
                            html.Span(
                                "Confidential Computing slowdown diagnosis", className="tagline"
                            ),
                        ],
                        className="brand-row",
                    ),
                    html.Div(
                        [
                            html.Span("pair: ", className="muted"),
                            html.Span(id=ids.PAIR_LABEL, children="—"),
                            dcc.Link(
                                "choose another pair", href="/traces", className="change-link"
                            ),
                        ],
                        className="pair-row",
                    ),
                    html.Div(id=ids.VERDICT, className="verdict"),
                    html.Div(
                        [
                            html.Progress(
                                id=ids.PROGRESS, max="1", value="0", style={"display": "none"}
                            ),
                            html.Span(id=ids.STATUS, className="status", role="status"),
                        ],
                        className="status-row",
                    ),
                    html.Nav(nav_links(), id=ids.NAV),
                ],
                className="header",
            ),
            html.Main(dash.page_container, className="main"),
        ]
    )


def nav_links() -> list[Any]:
    """Links to every registered page, main pages first, then one per mechanism."""
    pages = sorted(dash.page_registry.values(), key=lambda p: p.get("order", 0) or 0)
    main = [p for p in pages if not p["path"].startswith("/mechanism/")]
    mech = [p for p in pages if p["path"].startswith("/mechanism/")]
    out: list[Any] = [dcc.Link(p["name"], href=p["path"], className="nav-link") for p in main]
    if mech:
        out.append(html.Span("mechanisms:", className="nav-sep"))
        out += [dcc.Link(p["name"], href=p["path"], className="nav-link nav-mech") for p in mech]
    return out


def graph(fig: Any, gid: str | None = None) -> dcc.Graph:
    """A figure with the app's graph settings."""
    kw: Any = {"id": gid} if gid else {}
    return dcc.Graph(figure=fig, config=GRAPH_CONFIG, className="figure", **kw)


def placeholder(text: str) -> html.Div:
    """What a page shows while no analysis is loaded."""
    return html.Div(text, className="placeholder")


def fmt_value(key: str, v: Any) -> str:
    """An evidence value in units people read, chosen from its key."""
    if v is None:
        return "—"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    k = key.lower()
    if k.endswith("_ns") or k in ("ns", "latency", "toll"):
        return fmt_ns(v)
    if "bytes" in k:
        return fmt_bytes(v)
    if "gbps" in k:
        return fmt_gbps(v)
    if k.startswith("share") or k.endswith(("ratio", "utilization")):
        return fmt_share(v) if abs(v) <= 1.5 else f"{v:g}"
    return f"{v:,.4g}" if isinstance(v, float) else f"{v:,}"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> html.Table:
    """A plain HTML table of dict rows; every cell is text."""
    cols = list(columns or dict.fromkeys(k for r in rows for k in r))
    head = html.Thead(html.Tr([html.Th(c.replace("_", " ")) for c in cols]))
    body = html.Tbody([html.Tr([html.Td(fmt_value(c, r.get(c))) for c in cols]) for r in rows])
    return html.Table([head, body], className="table")


def _is_runs(v: Any) -> bool:
    return isinstance(v, Mapping) and set(v) >= {"baseline", "treatment"}


def _runs_text(key: str, v: Mapping[str, Any]) -> str:
    b, t = v["baseline"], v["treatment"]
    if isinstance(b, Mapping) and "p50" in b or isinstance(t, Mapping) and "p50" in t:

        def one(x: Any) -> str:
            if not isinstance(x, Mapping) or "p50" not in x:
                return "—"
            return f"{fmt_ns(x['p50'])} (p10–p90 {fmt_ns(x.get('p10'))} – {fmt_ns(x.get('p90'))})"

        return f"{one(b)} → {one(t)}"
    if isinstance(b, Mapping) or isinstance(t, Mapping):
        return f"{_kv(b)} → {_kv(t)}"
    if isinstance(b, list) or isinstance(t, list):
        return f"{json.dumps(b, default=str)} → {json.dumps(t, default=str)}"
    return f"{fmt_value(key, b)} → {fmt_value(key, t)}"


def _kv(d: Any) -> str:
    """A flat dict as ``key value, ...`` in readable units."""
    if not isinstance(d, Mapping):
        return fmt_value("", d)
    return ", ".join(f"{k.replace('_', ' ')} {fmt_value(k, v)}" for k, v in d.items())


def evidence_block(ev: Mapping[str, Any]) -> html.Div:
    """Every evidence entry, readable: facts as a list, lists of rows as tables."""
    facts: list[Any] = []
    tables: list[Any] = []
    for key, v in ev.items():
        label = key.replace("_", " ")
        if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v):
            tables += [html.H4(label), table(v)]
        elif (
            _is_runs(v)
            and all(
                isinstance(v[r], list) and all(isinstance(x, Mapping) for x in v[r])
                for r in ("baseline", "treatment")
            )
            and (v["baseline"] or v["treatment"])
        ):
            for run in ("baseline", "treatment"):
                if v[run]:
                    tables += [html.H4(f"{label} — {run}"), table(v[run])]
        elif _is_runs(v):
            facts.append(html.Li([html.B(label + ": "), _runs_text(key, v)]))
        elif isinstance(v, Mapping):
            facts.append(html.Li([html.B(label + ": "), _kv(v)]))
        else:
            facts.append(html.Li([html.B(label + ": "), fmt_value(key, v)]))
    return html.Div([html.Ul(facts, className="facts"), *tables], className="evidence")
