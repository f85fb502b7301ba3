"""What the pages share: the analysis behind the store, and its absence."""

from __future__ import annotations

from typing import Any

from ccdiag.app.jobs import Analyses, Entry
from ccdiag.app.layout import placeholder
from dash import html


def entry_of(analyses: Analyses, data: Any) -> Entry | None:
    """The finished analysis the report store names, or None."""
    key = data.get("key") if isinstance(data, dict) else None
    return analyses.entry(key)


def waiting() -> html.Div:
    """Shown while no analysis is loaded."""
    return placeholder(
        "No analysis loaded yet: the status line above shows progress; or choose a pair on the "
        "Traces page."
    )


def failed(data: Any) -> html.Div | None:
    """What a page shows after the last analysis failed (the header's banner says why)."""
    if isinstance(data, dict) and isinstance(data.get("failed"), str):
        return placeholder(
            f"The analysis of {data.get('label', 'this pair')} did not finish (see the banner "
            "above): nothing to show. Choose a pair on the Traces page."
        )
    return None
