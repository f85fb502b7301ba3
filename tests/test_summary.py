"""summarize() and its text rendering."""

from __future__ import annotations

import json

import polars as pl
from goldens import shared_path
from rich.console import Console

from ccdiag import api, apis
from ccdiag.report.text import fmt_bytes, fmt_ns, render_summary

KEYS = {
    "format",
    "gpu",
    "n_events",
    "skipped",
    "steps",
    "kernels",
    "launches",
    "memcpy",
    "sync",
    "collectives",
}


def _summary(*parts: str) -> dict:
    return api.summarize(api.load_trace(shared_path(*parts)))


def test_summary_has_the_contract_keys_and_is_json():
    s = _summary("traces", "h200_decode_eager.kineto.json.gz")
    assert KEYS <= set(s)
    assert set(s["steps"]) >= {"count", "marker", "median_ns", "p10_ns", "p90_ns"}
    assert json.loads(json.dumps(s)) == s


def test_eager_decode_summary():
    s = _summary("traces", "h200_decode_eager.kineto.json.gz")
    assert (s["gpu"], s["format"], s["kernels"]["count"]) == ("NVIDIA H200", "kineto", 1490)
    assert s["launches"]["count"] == 1490 and s["launches"]["graph_launches"] == 0
    # one stream sync per step + one device sync at the end
    assert s["sync"]["count"] == 11
    assert s["memcpy"]["by_kind"] == {
        "DtoH": {"count": 10, "bytes": 640, "total_ns": s["memcpy"]["total_ns"]}
    }
    p10, med, p90 = (s["steps"][k] for k in ("p10_ns", "median_ns", "p90_ns"))
    assert p10 <= med <= p90


def test_graph_launches_count_as_launches():
    s = _summary("traces", "h200_decode_graph.kineto.json.gz")
    assert s["launches"]["count"] == 10 and s["launches"]["graph_launches"] == 10
    assert s["kernels"]["graph"] == 1490
    assert s["per_step"] == {"kernels": 149.0, "launches": 1.0, "graph_launches": 1.0}


def test_launch_totals_equal_the_launch_rows():
    trace = api.load_trace(
        shared_path("external", "TraceLens", "tests", "traces", "b200", "eager_trace.json.gz")
    )
    s = api.summarize(trace)
    rows = trace.events.filter(pl.col("name").is_in(list(apis.LAUNCH_APIS)))
    assert s["launches"]["count"] == rows.height == 768
    assert s["launches"]["total_ns"] == rows["dur_ns"].sum()


def test_sync_counts_host_blocking_calls_only():
    # event_sync_trace: cudaStreamSynchronize 1, cudaEventSynchronize 1, cudaDeviceSynchronize 1
    s = _summary(
        "external",
        "HolisticTraceAnalysis",
        "tests",
        "data",
        "critical_path",
        "cuda_event_sync",
        "event_sync_trace.json.gz",
    )
    assert s["sync"]["count"] == 3
    assert s["sync"]["gpu_records"] == 4


def test_collectives_bytes():
    s = _summary(
        "external",
        "HolisticTraceAnalysis",
        "tests",
        "data",
        "nccl_parser_config",
        "nccl_data.json.gz",
    )
    assert s["collectives"]["count"] == 21
    assert s["collectives"]["bytes"] > 0
    assert s["kernels"]["count"] == 2700  # collectives are kernels too


def test_summary_works_on_nsys_traces():
    s = _summary("traces", "h200_decode_eager.nsys.sqlite")
    assert s["format"] == "nsys_sqlite"
    assert s["per_step"]["kernels"] == 149.0


def test_api_names_are_normalized():
    assert apis.normalize("cudaMemcpyAsync_v3020") == "cudaMemcpyAsync"
    assert apis.normalize("cuLaunchKernel_v7000") == "cuLaunchKernel"
    assert {"cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch"} <= apis.LAUNCH_APIS
    assert "cudaStreamWaitEvent" not in apis.SYNC_APIS


def test_render_summary_prints_units():
    console = Console(record=True, width=100)
    render_summary(_summary("traces", "h200_copies_streams.kineto.json.gz"), console=console)
    text = console.export_text()
    assert "NVIDIA H200" in text and "HtoD" in text and "GB" in text and "µs" in text


def test_units():
    assert (fmt_ns(950), fmt_ns(12_345), fmt_ns(4_560_000), fmt_ns(2.5e9)) == (
        "950 ns",
        "12.3 µs",
        "4.56 ms",
        "2.50 s",
    )
    assert (fmt_bytes(64), fmt_bytes(16 << 20)) == ("64 B", "16.78 MB")
