"""The JSON contract: the report as JSON, and its published, versioned JSON Schema.

``ccdiag analyze --json`` and ``ccdiag report --json`` both write :func:`render_json`. The
schema is generated from the pydantic models (:func:`report_schema`), published as
``docs/schema/report-v<major>.json`` (``scripts/gen_schema.py`` writes it, a test fails when it
is stale) and printed by ``ccdiag schema``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ccdiag.report.canonical import canonical
from ccdiag.verdict import SCHEMA_VERSION, Report

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_major() -> int:
    """Major version of the contract (``1`` for ``1.1``)."""
    return int(SCHEMA_VERSION.split(".")[0])


def schema_file_name() -> str:
    """File name the schema is published under: ``report-v<major>.json``."""
    return f"report-v{schema_major()}.json"


def report_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the report, generated from :class:`~ccdiag.verdict.Report`.

    ``schema_version`` is pinned to the major version (``1.x``), so a reader can tell a report
    of another major version from a malformed one.
    """
    body = Report.model_json_schema(mode="serialization")
    major = schema_major()
    props = body["properties"]
    props["schema_version"] = {
        **props["schema_version"],
        "pattern": rf"^{major}\.[0-9]+$",
        "description": f"contract version {major}.x (this schema: {SCHEMA_VERSION})",
    }
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"urn:ccdiag:schema:{schema_file_name()}",
        "title": f"ccdiag report, contract version {major}",
        **{k: v for k, v in body.items() if k != "title"},
    }


def schema_text() -> str:
    """The schema as published: 2-space indented, keys in generation order, final newline."""
    return json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n"


def dumps(data: Mapping[str, Any]) -> str:
    """Canonical data as JSON text: 2-space indent, UTF-8 characters kept, final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_json(
    report: Report,
    *,
    keep_paths: bool = False,
    timestamp: datetime | str | None = None,
    sources: Mapping[str, str] | None = None,
) -> str:
    """The report as JSON text (canonical, scrubbed unless ``keep_paths``; see ``canonical``)."""
    return dumps(canonical(report, keep_paths=keep_paths, timestamp=timestamp, sources=sources))
