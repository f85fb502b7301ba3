"""Step detection and assignment, on Kineto and Nsight Systems traces."""

from __future__ import annotations

import polars as pl
import pytest
from goldens import shared_path

from ccdiag import api, parsers
from ccdiag.errors import InputError
from ccdiag.steps import WHOLE_TRACE, assign_steps

HTA = ("external", "HolisticTraceAnalysis", "tests", "data")


def test_profiler_steps_win_over_other_annotations():
    # arrange: trace_diff/test has ProfilerStep#1009..#1014 and many "## ... ##" annotations
    trace = parsers.read(shared_path(*HTA, "trace_diff", "test", "test.json.gz"))
    # act
    stepped = assign_steps(trace)
    # assert
    assert stepped.meta.step_marker == "ProfilerStep"
    assert stepped.steps["name"].to_list() == [f"ProfilerStep#{n}" for n in range(1009, 1015)]
    assert stepped.steps["step"].to_list() == list(range(6))
    assert stepped.meta.extra["steps_from"] == "ProfilerStep#N"


def test_repeating_annotation_is_found():
    trace = api.load_trace(shared_path("traces", "h200_decode_eager.kineto.json.gz"))
    assert trace.meta.step_marker == "decode_step"
    assert trace.steps.height == 10
    assert trace.meta.extra["steps_from"] == "repeating annotation"


def test_step_windows_are_ordered_and_disjoint():
    steps = api.load_trace(shared_path("traces", "h200_decode_eager.kineto.json.gz")).steps
    starts, ends = steps["start_ns"].to_list(), steps["end_ns"].to_list()
    assert starts == sorted(starts)
    assert all(e <= s for e, s in zip(ends, starts[1:]))
    assert (steps["end_ns"] - steps["start_ns"] == steps["dur_ns"]).all()


def test_whole_program_trace_is_one_step():
    # h200_copies_streams has no annotations at all
    trace = api.load_trace(shared_path("traces", "h200_copies_streams.kineto.json.gz"))
    assert trace.meta.step_marker is None
    assert trace.steps["name"].to_list() == [WHOLE_TRACE]
    assert trace.events["step"].null_count() == 0


def test_marker_overrides_detection():
    # arrange: ProfilerStep would be detected; ask for the optimizer annotation instead
    path = shared_path(*HTA, "trace_diff", "test", "test.json.gz")
    # act
    trace = api.load_trace(path, step="## optimizer ##")
    # assert
    assert trace.meta.step_marker == "## optimizer ##"
    assert trace.meta.extra["steps_from"] == "--step"
    assert set(trace.steps["name"]) == {"## optimizer ##"}


def test_marker_matches_numbered_names():
    trace = api.load_trace(
        shared_path(*HTA, "trace_diff", "test", "test.json.gz"), step="ProfilerStep"
    )
    assert trace.steps.height == 6


def test_unknown_marker_is_an_input_error_naming_the_file():
    with pytest.raises(InputError) as info:
        api.load_trace(
            shared_path("traces", "h200_decode_eager.kineto.json.gz"), step="no_such_step"
        )
    line = info.value.line()
    assert line.startswith("h200_decode_eager.kineto.json.gz: step marker 'no_such_step' not found")
    assert "'decode_step'" in line


@pytest.mark.parametrize(
    "parts",
    [("traces", "h200_decode_eager.kineto.json.gz"), (*HTA, "trace_diff", "test", "test.json.gz")],
)
def test_gpu_rows_inherit_the_step_of_their_launch(parts):
    # arrange
    trace = api.load_trace(shared_path(*parts))
    ev = trace.events
    api_rows = ev.filter(pl.col("kind").is_in(["runtime", "driver"]))
    launch = api_rows.select("correlation", pl.col("step").alias("l"))
    kernels = ev.filter(pl.col("kind").is_in(["kernel", "collective"])).join(
        launch, on="correlation"
    )
    # assert: every kernel has its launcher's step (null when launched outside every step)
    assert (
        kernels.select(
            (pl.col("step") == pl.col("l")) | (pl.col("step").is_null() & pl.col("l").is_null())
        )
        .to_series()
        .all()
    )


def test_kernels_that_run_after_their_step_window_keep_its_step():
    # trace_diff/test: GPU work queued in step N often runs after step N's host window closed
    trace = api.load_trace(shared_path(*HTA, "trace_diff", "test", "test.json.gz"))
    end = dict(trace.steps.select("step", "end_ns").iter_rows())
    k = trace.events.filter(
        pl.col("kind").is_in(["kernel", "collective"]) & pl.col("step").is_not_null()
    )
    late = k.filter(pl.col("start_ns") >= pl.col("step").replace_strict(end, default=None))
    assert late.height == 2980
    # by time alone they would have landed in the next step (or none)
    assert (late["step"] < late["step"].max()).any()


def test_host_events_fall_in_their_window():
    trace = api.load_trace(shared_path("traces", "h200_decode_eager.kineto.json.gz"))
    host = trace.events.filter(pl.col("device").is_null() & pl.col("step").is_not_null())
    win = trace.steps.select("step", pl.col("start_ns").alias("w0"), pl.col("end_ns").alias("w1"))
    w = host.join(win, on="step")
    assert w.height == host.height
    assert ((w["start_ns"] >= w["w0"]) & (w["start_ns"] < w["w1"])).all()


def test_nsys_nvtx_ranges_are_steps():
    trace = api.load_trace(shared_path("traces", "h200_decode_eager.nsys.sqlite"))
    assert trace.meta.step_marker == "decode_step"
    assert trace.steps.height == 30


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_kineto_and_nsys_agree_per_step(mode: str):
    # The same decode workload, captured once with torch.profiler (10 steps) and once with
    # Nsight Systems (30 steps): the same launches per step. Eager: the same kernels per step.
    # Graph: nsys traced graphs as whole-graph rows (--cuda-graph-trace=graph), so it is the
    # one cudaGraphLaunch per step that must agree (Kineto also lists the graph's 149 kernels).
    kin = api.summarize(api.load_trace(shared_path("traces", f"h200_decode_{mode}.kineto.json.gz")))
    nsys = api.summarize(api.load_trace(shared_path("traces", f"h200_decode_{mode}.nsys.sqlite")))
    assert kin["steps"]["marker"] == nsys["steps"]["marker"] == "decode_step"
    assert kin["per_step"]["launches"] == nsys["per_step"]["launches"]
    assert kin["per_step"]["graph_launches"] == nsys["per_step"]["graph_launches"]
    if mode == "eager":
        assert kin["per_step"]["kernels"] == nsys["per_step"]["kernels"] == 149
    else:
        assert kin["per_step"]["graph_launches"] == 1
        assert kin["per_step"]["kernels"] == 149


def test_nested_annotations_are_not_steps(tmp_path):
    # arrange: "inner" repeats 4 times but always inside "outer" (2 instances)
    import json

    def ev(name, ts, dur):
        return {
            "ph": "X",
            "cat": "user_annotation",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
        }

    events = [ev("outer", 0, 100), ev("inner", 10, 10), ev("inner", 50, 10)]
    events += [ev("outer", 200, 100), ev("inner", 210, 10), ev("inner", 250, 10)]
    (tmp_path / "n.json").write_text(json.dumps({"traceEvents": events}))
    # act
    trace = api.load_trace(tmp_path / "n.json")
    # assert
    assert trace.meta.step_marker == "outer"
    assert trace.steps.height == 2


def test_steps_per_rank_in_a_folder_of_ranks(tmp_path):
    # arrange: two ranks of one job (ProfilerStep#551-#552 on each)
    import shutil

    for r in (0, 1):
        src = shared_path(*HTA, "trace_filter", f"sampled_rank-{r}.json.gz")
        shutil.copy(src, tmp_path / src.name)
    # act
    trace = api.load_trace(tmp_path)
    # assert: windows per rank; each rank's host events fall in its own windows
    assert trace.steps.select("rank", "step").rows() == [(0, 0), (0, 1), (1, 0), (1, 1)]
    host = trace.events.filter(pl.col("device").is_null() & pl.col("step").is_not_null())
    win = trace.steps.select(
        "rank", "step", pl.col("start_ns").alias("w0"), pl.col("end_ns").alias("w1")
    )
    w = host.join(win, on=["rank", "step"])
    assert w.height == host.height
    assert ((w["start_ns"] >= w["w0"]) & (w["start_ns"] < w["w1"])).all()


@pytest.mark.parametrize(
    "parts",
    [("traces", "h200_decode_eager.kineto.json.gz"), (*HTA, "trace_diff", "test", "test.json.gz")],
)
def test_packed_search_equals_the_asof_join(parts):
    # _by_time packs (rank, start) into one Int64 key; the as-of join is its fallback
    from ccdiag.steps import _by_time, _by_time_asof

    trace = api.load_trace(shared_path(*parts))
    fast = _by_time(trace.events, trace.steps)
    slow = _by_time_asof(trace.events.select("rank", "start_ns"), trace.steps)
    assert fast.to_list() == slow.to_list()
