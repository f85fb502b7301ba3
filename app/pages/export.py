"""Export: download the report as JSON, Markdown or HTML (the same files ``ccdiag report`` writes),
and the treatment trace annotated with the diagnosis (the file ``ccdiag annotate`` writes)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from ccdiag.app import ids
from ccdiag.app.jobs import Analyses
from ccdiag.app.pages._common import entry_of
from ccdiag.app.truth import verdict_line
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from ccdiag import api
from ccdiag.errors import InputError

PAGE = {"path": "/export", "name": "Export", "title": "ccdiag · export", "order": 3}

FORMATS = {ids.EXPORT_JSON: "json", ids.EXPORT_MD: "md", ids.EXPORT_HTML: "html"}
MIME = {"json": "application/json", "md": "text/markdown", "html": "text/html"}
#: Largest treatment (and annotated file) the dashboard annotates for download; beyond it the
#: user is pointed to ``ccdiag annotate`` (the file travels base64 in one callback response).
TRACE_MAX_BYTES = 100_000_000


def layout(**_: Any) -> html.Div:
    return html.Div(
        [
            html.H2("Export the report"),
            html.P(id=ids.EXPORT_INFO),
            html.Div(
                [
                    html.Button("Download JSON", id=ids.EXPORT_JSON, className="button"),
                    html.Button("Download Markdown", id=ids.EXPORT_MD, className="button"),
                    html.Button("Download HTML", id=ids.EXPORT_HTML, className="button"),
                    html.Button(
                        "Download annotated trace", id=ids.EXPORT_TRACE, className="button"
                    ),
                ],
                className="buttons",
            ),
            html.P(
                "The annotated trace is the treatment with the diagnosis added as tracks "
                "(per-step attribution and each mechanism's evidence intervals): open it in "
                "Perfetto UI or chrome://tracing.",
                className="muted",
            ),
            html.Div(id=ids.EXPORT_MSG, className="muted"),
            dcc.Download(id=ids.EXPORT_DOWNLOAD),
        ]
    )


def render(report: Any, fmt: str) -> str:
    """The report in one format, through ccdiag's api."""
    return api.render_report(report, fmt)


def filename(label: str, fmt: str) -> str:
    """A download name from the pair's label."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._")[:60] or "pair"
    return f"ccdiag-report-{stem}.{fmt}"


def register(app: Dash, analyses: Analyses) -> None:
    @app.callback(Output(ids.EXPORT_INFO, "children"), Input(ids.REPORT_STORE, "data"))
    def _info(data: Any) -> Any:
        e = entry_of(analyses, data)
        return (
            "No analysis loaded yet."
            if e is None
            else f"Report of {e.label}: {verdict_line(e.report)}"
        )

    @app.callback(
        Output(ids.EXPORT_DOWNLOAD, "data"),
        Output(ids.EXPORT_MSG, "children"),
        Input(ids.EXPORT_JSON, "n_clicks"),
        Input(ids.EXPORT_MD, "n_clicks"),
        Input(ids.EXPORT_HTML, "n_clicks"),
        Input(ids.EXPORT_TRACE, "n_clicks"),
        State(ids.REPORT_STORE, "data"),
        prevent_initial_call=True,
    )
    def _download(_j: Any, _m: Any, _h: Any, _t: Any, data: Any) -> Any:
        e = entry_of(analyses, data)
        if e is not None and ctx.triggered_id == ids.EXPORT_TRACE:
            return annotated(analyses, e.key, e.label)
        fmt = FORMATS.get(str(ctx.triggered_id))
        if e is None or fmt is None:
            return no_update, "No analysis loaded yet."
        text = render(e.report, fmt)
        name = filename(e.label, fmt)
        return dcc.send_string(text, name, type=MIME[fmt]), f"downloaded {name}"


def annotated(analyses: Analyses, key: str, label: str) -> tuple[Any, str]:
    """The annotated treatment as a download, or a message saying why not."""
    name = filename(label, "json.gz").replace("ccdiag-report-", "ccdiag-annotated-")
    with tempfile.TemporaryDirectory(prefix="ccdiag-annotate-") as tmp:
        try:
            path = analyses.annotated(key, Path(tmp), TRACE_MAX_BYTES)
        except InputError as exc:
            return no_update, exc.problem
        data = path.read_bytes()
    return dcc.send_bytes(data, name, type="application/gzip"), f"downloaded {name}"
