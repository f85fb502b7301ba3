"""The one form every file report is rendered from: canonical, scrubbed, JSON-ready data.

:func:`canonical` turns a :class:`~ccdiag.verdict.Report` into plain data such that the same
report always gives the same bytes, and nothing private leaves the machine by default:

- **Order.** Fields of the contract keep the model's order (``schema_version`` first). Free-form
  mappings (``evidence``, ``metadata``, ``skipped``, ``parts``) have no meaningful order: their
  keys are sorted, recursively. Lists keep their order (rankings are meaningful).
- **Numbers.** Floats are rounded to 6 significant digits (last-bit differences between
  machines never show); NaN and infinities become null. numpy scalars become Python numbers.
- **Scrubbing** (unless ``keep_paths``): every string, and every key of a free-form mapping,
  loses absolute paths (``/home/alice/run/trace.json`` -> ``<path>/trace.json``; Windows and
  ``~/`` paths and ``file://`` URLs too), environment dumps (three or more ``NAME=value``
  assignments -> ``<scrubbed environment>``), ``user@host`` pairs, and the host name that
  ``torch.profiler.tensorboard_trace_handler`` puts in trace file names
  (``gpu-node-7_4242.1712345678901.pt.trace.json`` -> ``<host>_4242.1712345678901.pt.trace.json``).
  Trace sources are shown by file name. With ``keep_paths`` nothing is scrubbed and the sources
  are the paths the user gave.
- **Timestamp.** ``generated_at`` is set only when a timestamp is passed.

The result still validates as a Report (checked here), so it *is* the JSON contract.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel

from ccdiag.verdict import Report

_SEG = r"[^\s/\\\"'`<>|,;:()\[\]{}]+"
_POSIX = re.compile(rf"(?<![\w<>.:/~\\-])/(?:{_SEG}/)+({_SEG})?")
_HOME = re.compile(rf"(?<![\w/])~/(?:{_SEG}/)*({_SEG})?")
_WINDOWS = re.compile(r"(?<![\w])[A-Za-z]:\\(?:[^\\\s\"'<>|]+\\)*([^\\\s\"'<>|]*)")
_FILE_URL = re.compile(r"file://\S*?([^/\s\"'<>]*)(?=[\s\"'<>]|$)")
_ENV_ASSIGN = re.compile(r"(?:^|[\s;,\x00])[A-Za-z_][A-Za-z0-9_]*=")
_USER_HOST = re.compile(r"\b[A-Za-z0-9._-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\b")
_TB_HANDLER = re.compile(r"(?<![\w.-])[A-Za-z0-9][A-Za-z0-9.-]*_(\d+)\.(\d{9,})\.pt\.trace\.json")


def scrub_text(text: str) -> str:
    """Remove paths, environment dumps, user@host pairs and trace-file host names from text."""
    if len(_ENV_ASSIGN.findall(text)) >= 3:
        return "<scrubbed environment>"
    text = _FILE_URL.sub(lambda m: "<path>/" + m.group(1), text)
    text = _WINDOWS.sub(lambda m: "<path>\\" + m.group(1), text)
    text = _HOME.sub(lambda m: "<path>/" + (m.group(1) or ""), text)
    text = _POSIX.sub(lambda m: "<path>/" + (m.group(1) or ""), text)
    text = _USER_HOST.sub("<user>@<host>", text)
    return _TB_HANDLER.sub(lambda m: f"<host>_{m.group(1)}.{m.group(2)}.pt.trace.json", text)


def _number(v: float) -> float | None:
    if not math.isfinite(v):
        return None
    return float(f"{v:.6g}")


def _walk(v: Any, scrub: bool) -> Any:
    """Model fields in model order; free mappings sorted by key; floats normalized."""
    if isinstance(v, BaseModel):
        return {k: _walk(getattr(v, k), scrub) for k in type(v).model_fields}
    if isinstance(v, Mapping):
        items = {(scrub_text(str(k)) if scrub else str(k)): x for k, x in v.items()}
        return {k: _walk(items[k], scrub) for k in sorted(items)}
    if isinstance(v, (list, tuple)):
        return [_walk(x, scrub) for x in v]
    if isinstance(v, Enum):
        v = v.value
    if isinstance(v, str):
        return scrub_text(v) if scrub else v
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        return _number(v)
    if hasattr(v, "item"):  # numpy scalar
        return _walk(v.item(), scrub)
    return scrub_text(str(v)) if scrub else str(v)


def timestamp_text(ts: datetime | str | None) -> str | None:
    """``generated_at`` text: ISO 8601 UTC to the second (a string is taken as is)."""
    if ts is None or isinstance(ts, str):
        return ts
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def canonical(
    report: Report,
    *,
    keep_paths: bool = False,
    timestamp: datetime | str | None = None,
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The report as canonical, scrubbed, JSON-ready data (see the module docstring).

    Args:
        report: the diagnosis.
        keep_paths: keep paths and names exactly as read; show ``sources`` as given.
        timestamp: set ``generated_at`` (a datetime, or ISO text); None leaves it out.
        sources: ``{"baseline": path, "treatment": path}`` as the user gave them (used only
            with ``keep_paths``).

    Returns:
        Plain data (dicts, lists, str, int, float, bool, None) that validates as a Report.
    """
    data = _walk(report, scrub=not keep_paths)
    if keep_paths and sources:
        for side in ("baseline", "treatment"):
            if sources.get(side):
                data[side]["source"] = str(sources[side])
    data["generated_at"] = timestamp_text(timestamp)
    Report.model_validate(data)
    return data
