"""Legends shared by every view of an analysis (CLI, Markdown, HTML, dashboard): one wording."""

from __future__ import annotations

#: What the attribution table's two costs of a mechanism mean (issue 12: both appear).
PER_STEP_AND_PAID = (
    "per step: what the mechanism adds to the step time (its share of the delta); paid: what "
    "it costs where it is paid (calls, host gaps, GPU rows) before any overlap hides part of it"
)
