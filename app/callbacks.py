"""The shell's callbacks: start an analysis, poll its progress, show the pair and verdict."""

from __future__ import annotations

from typing import Any

from ccdiag.app import ids, layout
from ccdiag.app.jobs import Analyses
from ccdiag.app.sources import Source, SourceError, Sources
from ccdiag.app.truth import verdict_line
from dash import Dash, Input, Output, State, no_update

HIDDEN = {"display": "none"}
SHOWN = {"display": "inline-block"}


def _source(sources: Sources, request: Any) -> Source | None:
    """The pair a request names; None for the default. Raises SourceError for anything else."""
    if request is None:
        return sources.default
    if not isinstance(request, dict):
        raise SourceError("bad request")
    kind = request.get("kind")
    if kind == "listed":
        return sources.resolve(request.get("id"))
    if kind == "upload":
        return sources.upload_pair(request.get("baseline"), request.get("treatment"))
    raise SourceError("bad request")


def register(app: Dash, sources: Sources, analyses: Analyses) -> None:
    """Attach the shell callbacks to ``app``."""

    @app.callback(
        Output(ids.JOB_STORE, "data"),
        Output(ids.POLL, "disabled", allow_duplicate=True),
        Output(ids.REPORT_STORE, "data", allow_duplicate=True),
        Output(ids.STATUS, "children", allow_duplicate=True),
        Input(ids.REQUEST_STORE, "data"),
        State(ids.REPORT_STORE, "data"),
        prevent_initial_call="initial_duplicate",
    )
    def _start(request: Any, current: Any) -> Any:
        if request is None and analyses.entry(
            (current or {}).get("key") if isinstance(current, dict) else None
        ):
            return no_update, True, no_update, ""
        try:
            src = _source(sources, request)
        except SourceError as exc:
            return no_update, True, no_update, str(exc)
        if src is None:
            return no_update, True, no_update, "Choose a trace pair on the Traces page."
        key = analyses.cached_key(src)
        if key is not None:
            return no_update, True, {"key": key, "label": src.label}, f"{src.label}: from the cache"
        job = analyses.submit(src)
        return {"job": job.id}, False, no_update, f"{src.label}: queued"

    @app.callback(
        Output(ids.STATUS, "children", allow_duplicate=True),
        Input(ids.CANCEL, "n_clicks"),
        State(ids.JOB_STORE, "data"),
        prevent_initial_call=True,
    )
    def _cancel(_: Any, job_data: Any) -> Any:
        jid = job_data.get("job") if isinstance(job_data, dict) else None
        return "cancelling…" if analyses.cancel(jid) else no_update

    @app.callback(
        Output(ids.STATUS, "children"),
        Output(ids.PROGRESS, "value"),
        Output(ids.PROGRESS, "style"),
        Output(ids.POLL, "disabled"),
        Output(ids.REPORT_STORE, "data"),
        Output(ids.CANCEL, "style"),
        Input(ids.POLL, "n_intervals"),
        State(ids.JOB_STORE, "data"),
        prevent_initial_call=True,
    )
    def _poll(_: Any, job_data: Any) -> Any:
        job = analyses.job((job_data or {}).get("job") if isinstance(job_data, dict) else None)
        if job is None:
            return "", "0", HIDDEN, True, no_update, HIDDEN
        s = job.status()
        if s["state"] == "done":
            note = " (from the cache)" if s["cached"] else f" in {s['elapsed_s']:.1f} s"
            return (
                f"{s['label']}: analysed{note}",
                1,
                HIDDEN,
                True,
                {"key": s["key"], "label": s["label"]},
                HIDDEN,
            )
        if s["state"] == "error":
            # the previous verdict is cleared: the pages and the header show the failure
            failed = {"failed": s["message"], "label": s["label"]}
            return f"{s['label']}: {s['message']}", "0", HIDDEN, True, failed, HIDDEN
        text = f"{s['label']}: {s['stage']}… ({s['elapsed_s']:.0f} s)"
        return text, str(s["progress"]), SHOWN, False, no_update, SHOWN

    @app.callback(
        Output(ids.PAIR_LABEL, "children"),
        Output(ids.VERDICT, "children"),
        Output(ids.BANNER, "children"),
        Output(ids.BANNER, "hidden"),
        Output(ids.NAV, "children"),
        Input(ids.REPORT_STORE, "data"),
    )
    def _header(data: Any) -> Any:
        failed = data.get("failed") if isinstance(data, dict) else None
        if isinstance(failed, str):
            label = str(data.get("label", ""))
            what = "cancelled" if failed == "cancelled" else "failed"
            banner = f"The analysis of {label} {what}" + (
                "" if what == "cancelled" else f": {failed}"
            )
            return label, "", banner + " — no verdict is shown.", False, layout.nav_links()
        e = analyses.entry(data.get("key") if isinstance(data, dict) else None)
        if e is None:
            return "—", "", "", True, layout.nav_links()
        return e.label, verdict_line(e.report), "", True, layout.nav_links(e.report)
