"""Cross-check against Meta's Holistic Trace Analysis on HTA's own test traces.

HTA parses each trace with its own parser (``hta.common.trace.parse_trace_file``); we sum the
durations of its kernel events and compare with ccdiag's ``kernels.total_ns`` (kernels plus
collectives). HTA rounds sub-microsecond timestamps inward by default (ts up, end down; its
``HTA_DISABLE_NS_ROUNDING`` switch turns that off); ccdiag keeps the nanoseconds, so the
comparison turns HTA's rounding off, and a second test shows that the rounding is the whole
difference where HTA keeps it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from goldens import SHARED

from ccdiag import api

HTA_TRACES = sorted((SHARED / "external" / "HolisticTraceAnalysis").rglob("*.json.gz"))
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")


def _hta_kernels(path: Path) -> tuple[int, float]:
    """(count, total µs) of kernel events, from HTA's own parser."""
    pytest.importorskip("psutil")  # HTA imports it without declaring it
    from hta.common.trace import parse_trace_file

    logging.getLogger("hta").setLevel(logging.ERROR)
    _, df, symbols = parse_trace_file(str(path))
    names = symbols.get_sym_table()
    kernels = df[df["cat"].map(lambda i: names[i]).isin(["kernel", "Kernel"])]
    return len(kernels), float(kernels["dur"].sum())


@pytest.mark.parametrize("path", HTA_TRACES, ids=lambda p: str(p.relative_to(SHARED)))
def test_kernel_totals_equal_htas(path: Path, monkeypatch: pytest.MonkeyPatch):
    # arrange
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    n_hta, us_hta = _hta_kernels(path)
    # act
    s = api.summarize(api.load_trace(path))
    # assert: same kernels, totals within 0.1 %
    assert s["kernels"]["count"] == n_hta
    assert s["kernels"]["total_ns"] / 1000 == pytest.approx(us_hta, rel=1e-3, abs=1e-3)


def test_hta_default_rounding_is_the_only_difference():
    # nccl_data has float µs timestamps: HTA's default rounding shortens every kernel
    path = SHARED / "external/HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz"
    n_hta, us_rounded = _hta_kernels(path)
    trace = api.load_trace(path)
    ev = trace.events.filter(trace.events["kind"].is_in(["kernel", "collective"]))
    start_us = ev["start_ns"] / 1000
    end_us = (ev["start_ns"] + ev["dur_ns"]) / 1000
    rounded = (end_us.floor() - start_us.ceil()).sum()
    assert n_hta == ev.height
    assert rounded == pytest.approx(us_rounded, rel=1e-6)
