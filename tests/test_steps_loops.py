"""Failure class 6 (issue 12): steps of ordinary loops, profiled without ``ProfilerStep``.

The real traces in tests/data/dataloader_loop/ come from a CPU training loop (conv net, SGD,
``DataLoader(TensorDataset)``) profiled with a plain ``torch.profiler.profile()``: the only
record_functions are PyTorch's own DataLoader fetch and optimizer annotations
(``tests/data/dataloader_loop/capture.py``). The treatment spends 4.5 ms more host time per
step (~17 % of a step). Before the fix the baseline's steps were its ~0.5 ms DataLoader fetch
windows and the treatment's its ``Optimizer.step`` windows, and the pair was refused as "not
the same workload".
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from goldens import shared_path

from ccdiag import api
from ccdiag.report.text import summary_renderable
from ccdiag.schema import Trace, TraceMeta, conform
from ccdiag.steps import LOOP, WHOLE_TRACE, assign_steps, is_framework

DATA = Path(__file__).parent / "data" / "dataloader_loop"
FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _within(steps: pl.DataFrame, rows: pl.DataFrame) -> pl.Series:
    """Per step, how many of ``rows`` start inside it."""
    j = steps.join_where(
        rows.select("start_ns"),
        pl.col("start_ns_right") >= pl.col("start_ns"),
        pl.col("start_ns_right") < pl.col("end_ns"),
    )
    per = j.group_by("step").len()
    return steps.select("step").join(per, on="step", how="left")["len"].fill_null(0)


def test_dataloader_fetches_are_not_steps_the_iteration_is():
    # act
    t = api.load_trace(DATA / "baseline.json.gz")
    # assert: one step per loop iteration, from one fetch to the next
    ev = t.events.filter(pl.col("kind") == "annotation")
    fetch = ev.filter(pl.col("name") == FETCH)
    assert t.meta.extra["steps_from"] == LOOP
    assert t.meta.step_marker == FETCH
    assert t.steps.height == 30  # 31 fetches: the last one ends the loop (StopIteration)
    for name in ("Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"):
        assert _within(t.steps, ev.filter(pl.col("name") == name)).to_list() == [1] * 30
    assert float(t.steps["dur_ns"].median()) > 10 * float(fetch["dur_ns"].median())
    assert "once per iteration" in t.meta.extra["steps_why"]


def test_multiprocessing_dataloader_loop_is_found_too():
    t = api.load_trace(DATA / "workers2.json.gz")
    assert t.meta.step_marker == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    assert t.steps.height == 12


def test_pair_slower_per_step_is_a_significant_slowdown():
    # act
    r = api.diagnose(DATA / "baseline.json.gz", DATA / "treatment.json.gz")
    # assert: the 4.5 ms/step of extra host work is seen, per step, beyond the noise
    s = r.step_ns
    assert s.n_steps >= 25
    assert s.significant and s.delta_ci95[0] > 0
    assert 1.1 <= s.ratio <= 1.6
    assert 3e6 <= s.delta <= 8e6
    assert "no significant" not in r.verdict


@pytest.mark.parametrize(
    "name",
    [
        FETCH,
        "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
        "Optimizer.step#AdamW.step",
        "Optimizer.zero_grad#AdamW.zero_grad",
        "aten::copy_",
        "nccl:all_reduce",
        "cudaStreamSynchronize",
        "autograd::engine::evaluate_function: AddmmBackward0",
        "PyTorch Profiler (0)",
        "DistributedDataParallel.forward",
    ],
)
def test_framework_record_functions_are_named(name: str) -> None:
    assert pl.select(is_framework(pl.lit(name))).item()


def _trace(rows: list[tuple[str, str, int, int]]) -> Trace:
    kind, name, start, dur = zip(*rows)
    n = len(rows)
    ev = conform(
        {"kind": kind, "name": name, "start_ns": start, "dur_ns": dur, "pid": [1] * n,
         "tid": [1] * n}
    )  # fmt: skip
    return Trace(events=ev, meta=TraceMeta(source="t.json", format="kineto", profiler="torch"))


def _loop(n: int, body: list[str], t0: int = 0, gap: int = 10) -> list[tuple[str, str, int, int]]:
    rows, t = [], t0
    for _ in range(n):
        for op in body:
            kind = "annotation" if "#" in op or op.startswith("my_") else "cpu_op"
            rows.append((kind, op, t, 100))
            t += 100 + gap
    return rows


def test_a_user_annotation_still_wins_over_framework_ones():
    # arrange: the fetch annotations cover more time than the user's (short) marker
    body = [FETCH, "my_step", "aten::linear", "Optimizer.step#SGD.step", "aten::item"]
    rows = [(k, n, s, 5000 if n == FETCH else d) for k, n, s, d in _loop(6, body, gap=5000)]
    # act
    t = assign_steps(_trace(rows))
    # assert
    assert t.meta.step_marker == "my_step"
    assert t.meta.extra["steps_from"] == "repeating annotation"
    assert "framework record_functions are never steps" in t.meta.extra["steps_why"]


def test_decode_loop_without_annotations_steps_from_its_period():
    # arrange: 5 tokens of embedding, 3 linears, argmax, readback; setup ops before
    setup = [("cpu_op", "aten::randn", 0, 50), ("cpu_op", "aten::randn", 60, 50)]
    body = ["aten::embedding", "aten::linear", "aten::linear", "aten::linear", "aten::argmax",
            "aten::item"]  # fmt: skip
    t = assign_steps(_trace(setup + _loop(5, body, t0=1000)))
    # assert: every iteration is a step, starting at its first op
    assert t.meta.extra["steps_from"] == LOOP
    assert t.meta.step_marker == "aten::embedding"
    assert t.steps.height == 5
    assert t.steps["start_ns"][0] == 1000


def test_identical_layers_of_one_pass_are_not_a_loop():
    # arrange: one forward pass of 12 identical blocks, no readback or optimizer inside them
    body = ["aten::layer_norm", "aten::linear", "aten::gelu", "aten::linear", "aten::add"]
    rows = [("cpu_op", "aten::embedding", 0, 50), *_loop(12, body, t0=100)]
    # act
    t = assign_steps(_trace(rows))
    # assert
    assert t.meta.extra["steps_from"] == WHOLE_TRACE
    assert t.steps.height == 1
    assert "the whole trace is one step" in t.meta.extra["steps_why"]


def test_one_real_forward_pass_is_one_step():
    # a vLLM eager forward (TraceLens test data): its layers repeat, it has no outer loop
    path = shared_path("external", "TraceLens", "tests", "traces", "b200", "eager_trace.json.gz")
    t = api.load_trace(path)
    assert t.meta.extra["steps_from"] == WHOLE_TRACE
    assert "whole trace is one step" in t.meta.extra["steps_why"]


def test_summary_shows_which_marker_and_why():
    # act
    s = api.summarize(api.load_trace(DATA / "baseline.json.gz"))
    text = str(summary_renderable(s).renderables[2].caption)
    # assert
    assert s["steps"]["marker"] == FETCH
    assert s["steps"]["from"] == LOOP
    assert "once per iteration" in s["steps"]["why"]
    assert text.startswith("steps: no step marker:")


def test_a_trace_of_distinct_ops_is_one_step():
    rows = [("cpu_op", f"aten::op{i}", i * 100, 50) for i in range(20)]
    t = assign_steps(_trace(rows))
    assert t.meta.extra["steps_from"] == WHOLE_TRACE and t.steps.height == 1
