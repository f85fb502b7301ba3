"""Golden file reports of the sample pairs: which pairs, and how each golden is made.

Used by ``tests/report/test_report_goldens.py`` and ``scripts/update_report_goldens.py``, which
rewrites ``tests/golden/reports/<pair>.{md,html,json}`` for review. The HTML golden has the
inlined plotly.js replaced by a line naming its version (``without_plotly_js``); everything else
is byte for byte what ``ccdiag report`` writes.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ccdiag import api
from ccdiag.report.html import without_plotly_js
from ccdiag.verdict import Report

TESTS = Path(__file__).resolve().parent
SAMPLES = TESTS.parent / "sample_traces"
GOLDEN = TESTS / "golden" / "reports"
FORMATS = ("md", "html", "json")

#: name -> (baseline, treatment), relative to sample_traces/: Kineto single GPU, a host-only
#: (CC mode on) treatment, an nsys SQLite pair, a two-rank DDP folder pair, a copy-bound pair.
PAIRS: dict[str, tuple[str, str]] = {
    "decode_eager": ("decode_eager/baseline.json.gz", "decode_eager/treatment.json.gz"),
    "decode_eager_host_only": (
        "decode_eager/baseline.json.gz",
        "decode_eager/treatment_host_only.json.gz",
    ),
    "decode_eager_nsys": (
        "decode_eager_nsys/baseline.sqlite",
        "decode_eager_nsys/treatment.sqlite",
    ),
    "ddp_2gpu_ctas2": ("ddp_2gpu_ctas2/baseline", "ddp_2gpu_ctas2/treatment"),
    "kv_offload": ("kv_offload/baseline.json.gz", "kv_offload/treatment.json.gz"),
}


@functools.cache
def report_of(name: str) -> Report:
    """The diagnosis of one sample pair (cached: each pair is diagnosed once per session)."""
    b, t = PAIRS[name]
    return api.diagnose(SAMPLES / b, SAMPLES / t)


def render(name: str, fmt: str) -> str:
    """The golden text of one pair in one format."""
    text = api.render_report(report_of(name), fmt)
    return without_plotly_js(text) if fmt == "html" else text


def golden_path(name: str, fmt: str) -> Path:
    """Where the golden of one pair and format lives."""
    return GOLDEN / f"{name}.{fmt}"
