"""The app shell (header, status, navigation, stores) and small shared components.

Trace-derived strings are passed to Dash components as plain children: React renders them as
text, never as HTML. Nothing here uses ``dangerously_allow_html`` or Markdown for trace data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dash
from ccdiag.app import ids
from ccdiag.app.units import fmt_share, fmt_value, quantity_label
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
                    html.Div(id=ids.BANNER, className="banner-error", role="alert", hidden=True),
                    html.Div(
                        [
                            html.Progress(
                                id=ids.PROGRESS, max="1", value="0", style={"display": "none"}
                            ),
                            html.Span(id=ids.STATUS, className="status", role="status"),
                            html.Button(
                                "cancel",
                                id=ids.CANCEL,
                                className="button small",
                                style={"display": "none"},
                            ),
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


def nav_links(report: Any = None) -> list[Any]:
    """Links to every registered page, main pages first, then one per mechanism.

    With a report, each mechanism link says whether the mechanism was found in the pair (a
    measurable share of the delta: marked ``●`` and its share) or not (plain, dimmed)."""
    from ccdiag.app import truth

    pages = sorted(dash.page_registry.values(), key=lambda p: p.get("order", 0) or 0)
    main = [p for p in pages if not p["path"].startswith("/mechanism/")]
    mech = [p for p in pages if p["path"].startswith("/mechanism/")]
    out: list[Any] = [dcc.Link(p["name"], href=p["path"], className="nav-link") for p in main]
    shares: dict[str, float] = {}
    if report is not None:
        shares = {
            a.mechanism: truth.share_of_delta(report, a.ns_per_step) for a in truth.found(report)
        }
    if mech:
        out.append(html.Span("mechanisms:", className="nav-sep"))
        for p in mech:
            m = p["path"].rsplit("/", 1)[-1]
            if m in shares:
                out.append(
                    dcc.Link(
                        [
                            "● ",
                            p["name"],
                            html.Span(f" {fmt_share(shares[m])}", className="nav-share"),
                        ],
                        href=p["path"],
                        className="nav-link nav-mech nav-found",
                        title=f"found in this pair: {fmt_share(shares[m])} of the delta",
                    )
                )
            else:
                cls = "nav-link nav-mech" + (" nav-quiet" if report is not None else "")
                out.append(
                    dcc.Link(
                        p["name"],
                        href=p["path"],
                        className=cls,
                        title="not found in this pair" if report is not None else None,
                    )
                )
    return out


def graph(fig: Any, gid: str | None = None) -> Any:
    """A figure with the app's graph settings; a figure with nothing measured is one line."""
    from ccdiag.app.figures import is_not_measured

    nm = is_not_measured(fig)
    if nm is not None:
        kw0: Any = {"id": gid} if gid else {}
        return html.Div(
            [html.B(nm[0]), html.Span(f" — not measured: {nm[1]}", className="muted")],
            className="not-measured",
            **kw0,
        )
    kw: Any = {"id": gid} if gid else {}
    return dcc.Graph(figure=fig, config=GRAPH_CONFIG, className="figure", **kw)


def placeholder(text: str) -> html.Div:
    """What a page shows while no analysis is loaded."""
    return html.Div(text, className="placeholder")


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    keys: Mapping[str, str] | None = None,
) -> html.Table:
    """A plain HTML table of dict rows; every cell is text, in units read from its key.

    Column headers drop the unit suffix the cells now show (``latency_ns`` -> ``latency``).
    ``keys`` maps a column to the key its values are formatted by (default: the column)."""
    cols = list(columns or dict.fromkeys(k for r in rows for k in r))
    keys = dict(keys or {})
    names = {}
    for c in cols:
        base, _, run = str(c).partition(":")  # a column spread from a run dict (_flat_rows)
        names[c] = f"{quantity_label(base)} ({run})" if run else quantity_label(base)
        keys.setdefault(c, base)
    head = html.Thead(html.Tr([html.Th(names[c]) for c in cols]))
    body = html.Tbody([html.Tr([html.Td(cell(keys[c], r.get(c))) for c in cols]) for r in rows])
    return html.Table([head, body], className="table")


def _unit_key(key: str, parent: str) -> str:
    """The key a nested value is formatted by: its own when it names a unit, else its parent's
    (``median_ns: {baseline: 799}`` formats 799 as a duration)."""
    return key if quantity_label(key) != str(key).replace("_", " ") else parent


def cell(key: str, v: Any) -> str:
    """One table cell: formatted by its key; a nested value as ``name value`` pairs."""
    if isinstance(v, Mapping):
        if _has_pcts(v):
            return _pcts(key, v)
        return ", ".join(f"{quantity_label(k)} {cell(_unit_key(k, key), x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(cell(key, x) for x in v)
    return fmt_value(key, v)


def _has_pcts(v: Any) -> bool:
    return isinstance(v, Mapping) and "p50" in v


def _pcts(key: str, v: Mapping[str, Any]) -> str:
    text = fmt_value(key, v.get("p50"))
    if "p10" in v and "p90" in v:
        text += f" (p10–p90 {fmt_value(key, v['p10'])} – {fmt_value(key, v['p90'])})"
    return text


def _is_runs(v: Any) -> bool:
    return isinstance(v, Mapping) and set(v) >= {"baseline", "treatment"}


def _change(key: str, b: Any, t: Any) -> str:
    """Treatment minus baseline (or their ratio for shares), in the quantity's unit."""
    if isinstance(b, Mapping) and isinstance(t, Mapping) and "p50" in b and "p50" in t:
        b, t = b["p50"], t["p50"]
    if isinstance(b, bool) or isinstance(t, bool):
        return ""
    if not (isinstance(b, (int, float)) and isinstance(t, (int, float))):
        return ""
    k = key.lower()
    if k.endswith(("utilization", "_ratio")) or k.startswith("share"):
        return fmt_share(t - b, signed=True).replace("%", "pts")
    d = t - b
    text = fmt_value(key, d)
    return ("+" + text) if d > 0 and not text.startswith("+") else text


def evidence_block(ev: Mapping[str, Any]) -> html.Div:
    """Every evidence entry as tables with units: what both runs measured side by side,
    single facts, then one table per list of rows or per breakdown (by name, by API ...)."""
    runs: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    runs_keys: dict[str, str] = {}
    tables: list[Any] = []
    for key, v in ev.items():
        label = quantity_label(key)
        if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v):
            tables += [html.H4(label), table(v)]
        elif _is_runs(v) and all(
            isinstance(v[r], list) and all(isinstance(x, Mapping) for x in v[r])
            for r in ("baseline", "treatment")
        ):
            for run in ("baseline", "treatment"):
                if v[run]:
                    tables += [html.H4(f"{label} — {run}"), table(v[run])]
        elif _is_runs(v) and all(
            isinstance(v[r], Mapping) and not _has_pcts(v[r]) for r in ("baseline", "treatment")
        ):
            # e.g. fit: {baseline: {toll_ns, gbps}, treatment: {...}}: one row per inner key
            inner = list(dict.fromkeys(k for r in ("baseline", "treatment") for k in v[r]))
            rows = [
                {
                    "quantity": quantity_label(k),
                    "baseline": v["baseline"].get(k),
                    "treatment": v["treatment"].get(k),
                    "change": _change(k, v["baseline"].get(k), v["treatment"].get(k)),
                }
                for k in inner
            ]
            tables += [
                html.H4(label),
                _runs_table(rows, {r["quantity"]: k for r, k in zip(rows, inner)}),
            ]
        elif _is_runs(v):
            runs.append(
                {
                    "quantity": label,
                    "baseline": v["baseline"],
                    "treatment": v["treatment"],
                    "change": _change(key, v["baseline"], v["treatment"]),
                }
            )
            runs_keys[label] = key
        elif isinstance(v, Mapping) and v and all(isinstance(x, Mapping) for x in v.values()):
            rows = [{"name": str(k), **x} for k, x in v.items()]
            tables += [html.H4(label), table(rows)]
        elif isinstance(v, Mapping):
            subs = {k: x for k, x in v.items() if _rows(x)}
            rows = [
                {"quantity": quantity_label(k), "value": cell(_unit_key(k, key), x)}
                for k, x in v.items()
                if k not in subs
            ]
            if rows:
                tables += [html.H4(label), text_table(rows)]
            for k, x in subs.items():
                tables += [html.H4(f"{label}: {quantity_label(k)}"), table(_flat_rows(x))]
        else:
            facts.append({"quantity": label, "value": cell(key, v)})
    body: list[Any] = []
    if runs:
        body += [html.H4("Measured in both runs"), _runs_table(runs, runs_keys)]
    if facts:
        body += [html.H4("Facts"), text_table(facts)]
    return html.Div([*body, *tables], className="evidence")


def _rows(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, Mapping) for r in v)


def _flat_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with run dicts spread into columns: ``median_ns: {baseline, treatment}`` becomes
    ``median_ns baseline`` / ``median_ns treatment`` (each formatted as a duration)."""
    out = []
    for r in rows:
        flat: dict[str, Any] = {}
        for k, x in r.items():
            if _is_runs(x) and not any(
                isinstance(x[s], Mapping) for s in ("baseline", "treatment")
            ):
                for run in ("baseline", "treatment"):
                    flat[f"{k}:{run}"] = x[run]
            else:
                flat[k] = x
        out.append(flat)
    return out


def text_table(rows: Sequence[Mapping[str, Any]]) -> html.Table:
    """Rows whose cells are already text."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = html.Thead(html.Tr([html.Th(c) for c in cols]))
    body = html.Tbody([html.Tr([html.Td(str(r.get(c, ""))) for c in cols]) for r in rows])
    return html.Table([head, body], className="table")


def _runs_table(rows: Sequence[Mapping[str, Any]], keys: Mapping[str, str]) -> html.Table:
    """quantity | baseline | treatment | change, each value formatted by its own key."""
    out = []
    for r in rows:
        k = keys.get(r["quantity"], "")
        out.append(
            {
                "quantity": r["quantity"],
                "baseline": cell(k, r["baseline"]),
                "treatment": cell(k, r["treatment"]),
                "change": r.get("change", ""),
            }
        )
    return text_table(out)
