"""Traces: choose the pair to analyse — a shipped sample, a pair from --trace-dir, or an upload.

The browser sends only opaque ids (from the lists the server built) and upload tokens (that
the server handed out); the server never reads a path that came from the browser.
"""

from __future__ import annotations

import time
from typing import Any

from ccdiag.app import ids
from ccdiag.app.sources import SourceError, Sources
from ccdiag.app.units import fmt_bytes
from dash import ClientsideFunction, Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

PAGE = {"path": "/traces", "name": "Traces", "title": "ccdiag · choose traces", "order": 4}
SIDES = ("baseline", "treatment")
UPLOAD = {"baseline": ids.UPLOAD_BASELINE, "treatment": ids.UPLOAD_TREATMENT}
CHECK = {s: f"{ids.UPLOAD_CHECK}-{s}" for s in SIDES}
MSG = {s: f"{ids.UPLOAD_MSG}-{s}" for s in SIDES}


def _upload(side: str) -> html.Div:
    what = "CC off" if side == "baseline" else "CC on"
    return html.Div(
        [
            html.H4(f"{side} ({what})"),
            dcc.Upload(
                id=UPLOAD[side],
                children=html.Div(
                    [
                        "Drop a trace file, or the per-rank files of a folder, here — or ",
                        html.A("select files"),
                    ]
                ),
                multiple=True,
                className="upload",
            ),
            dcc.Store(id=CHECK[side]),
            html.Div(id=MSG[side], className="upload-msg", role="status"),
        ],
        className="upload-col",
    )


def layout(**_: Any) -> html.Div:
    return html.Div(
        [
            html.H2("Choose a trace pair"),
            dcc.Store(id=ids.UPLOAD_LIMIT),
            html.Div(id=ids.TRACES_MSG, className="traces-msg", role="status"),
            html.H3("Shipped samples"),
            dcc.Dropdown(id=ids.SAMPLE_PICK, placeholder="a sample pair (real H200 runs)"),
            html.Div(
                [
                    html.H3("From the trace folder"),
                    dcc.Dropdown(id=ids.DIR_PICK, placeholder="a pair found under --trace-dir"),
                ],
                id=ids.DIR_BLOCK,
                style={"display": "none"},
            ),
            html.H3("Upload"),
            html.P(
                "Kineto JSON(.gz), Nsight Systems SQLite/.nsys-rep or nsys stats CSV; several "
                "files on one side are one trace of several ranks. The analysis starts when both "
                "sides are uploaded.",
                className="muted",
            ),
            html.P(id=ids.UPLOAD_LIMIT_NOTE, className="muted"),
            html.Div([_upload(s) for s in SIDES], className="grid2"),
        ]
    )


def register(app: Dash, sources: Sources) -> None:
    @app.callback(
        Output(ids.SAMPLE_PICK, "options"),
        Output(ids.DIR_PICK, "options"),
        Output(ids.DIR_BLOCK, "style"),
        Output(ids.UPLOAD_LIMIT, "data"),
        Output(ids.UPLOAD_LIMIT_NOTE, "children"),
        Input(ids.UPLOAD_LIMIT, "id"),
    )
    def _options(_: Any) -> Any:
        listed = sources.options("dir")
        limit = sources.max_upload_bytes
        return (
            sources.options("sample"),
            listed,
            {"display": "block" if listed else "none"},
            limit,
            f"This server accepts uploads of up to {fmt_bytes(limit)} per side "
            "(ccdiag app --max-upload-mb); larger traces: start the app with --trace-dir.",
        )

    @app.callback(
        Output(ids.REQUEST_STORE, "data", allow_duplicate=True),
        Output(ids.TRACES_MSG, "children"),
        Input(ids.SAMPLE_PICK, "value"),
        Input(ids.DIR_PICK, "value"),
        prevent_initial_call=True,
    )
    def _pick(sample: Any, listed: Any) -> Any:
        from dash import ctx

        value = sample if ctx.triggered_id == ids.SAMPLE_PICK else listed
        if value is None:
            return no_update, no_update
        try:
            src = sources.resolve(value)
        except SourceError as exc:
            return no_update, str(exc)
        return {"kind": "listed", "id": src.id, "n": time.time()}, f"opening {src.label}"

    for side in SIDES:
        app.clientside_callback(
            ClientsideFunction(namespace="ccdiag", function_name="checkUpload"),
            Output(CHECK[side], "data"),
            Output(MSG[side], "children"),
            Input(UPLOAD[side], "contents"),
            State(UPLOAD[side], "filename"),
            State(ids.UPLOAD_LIMIT, "data"),
            prevent_initial_call=True,
        )
        _register_stage(app, sources, side)


def _register_stage(app: Dash, sources: Sources, side: str) -> None:
    @app.callback(
        Output(ids.STAGED_STORE, "data", allow_duplicate=True),
        Output(MSG[side], "children", allow_duplicate=True),
        Output(ids.REQUEST_STORE, "data", allow_duplicate=True),
        Output(UPLOAD[side], "contents"),
        Input(CHECK[side], "data"),
        State(ids.STAGED_STORE, "data"),
        prevent_initial_call=True,
    )
    def _stage(check: Any, staged: Any) -> Any:
        if not isinstance(check, dict):
            # the check store mounting with the page: no upload yet, so nothing to answer and,
            # above all, no ``contents`` to clear; a file dropped while this request is in
            # flight would otherwise be wiped by its answer, the message staying empty
            raise PreventUpdate
        if not check.get("ok"):
            return no_update, no_update, no_update, None
        try:
            st = sources.stage(side, check.get("contents"), check.get("filenames"))
        except SourceError as exc:
            return no_update, str(exc), no_update, None
        staged = dict(staged) if isinstance(staged, dict) else {}
        staged[side] = {"token": st.token, "label": st.label, "mb": round(st.nbytes / 1e6, 2)}
        msg = f"{st.label}: {st.nbytes / 1e6:.2f} MB received"
        other = "treatment" if side == "baseline" else "baseline"
        request: Any = no_update
        if other in staged:
            request = {
                "kind": "upload",
                "baseline": staged["baseline"]["token"],
                "treatment": staged["treatment"]["token"],
                "n": time.time(),
            }
        else:
            msg += f"; now upload the {other}"
        return staged, msg, request, None
