"""Every figure function, on reports the api produced from real traces."""

from __future__ import annotations

import json
import subprocess
import sys

import plotly.graph_objects as go
import pytest
from app_samples import PAYLOAD, analysed, write_payload_pair
from ccdiag.app import figures, truth
from ccdiag.app.units import MECHANISM_COLORS, NEUTRAL_COLOR, fmt_ns, mechanism_label

from ccdiag import api
from ccdiag.verdict import MECHANISMS

UNIT_WORDS = ("µs", "ms", "ns", "(s)", "GB/s", "bytes", "%", "share", "in flight", "per step")


def _subtitle(fig: go.Figure) -> str:
    return fig.layout.title.subtitle.text or ""


def _annotations(fig: go.Figure) -> str:
    return " ".join(a.text or "" for a in fig.layout.annotations)


def _axis_titles(fig: go.Figure) -> list[str]:
    d = fig.to_dict()["layout"]
    return [
        v["title"]["text"]
        for k, v in d.items()
        if k.startswith(("xaxis", "yaxis")) and v.get("title", {}).get("text")
    ]


def _is_not_measured(fig: go.Figure) -> bool:
    return "not measured" in _annotations(fig)


def _readable(fig: go.Figure) -> None:
    """What every figure promises: a title, what was measured, units people read, JSON."""
    assert fig.layout.title.text
    assert _subtitle(fig)
    if not _is_not_measured(fig):
        titles = _axis_titles(fig)
        assert any(any(w in t for w in UNIT_WORDS) for t in titles), titles
    json.loads(fig.to_json())


@pytest.mark.parametrize("name", ["decode_eager", "kv_offload", "async_readback"])
def test_step_time_shows_medians_spread_and_ci(name: str) -> None:
    # arrange
    r = analysed(name).report
    # act
    fig = figures.step_time(r)
    # assert
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.x[0] for b in bars] == ["baseline (CC off)", "treatment (CC on)"]
    assert "ms" in fig.layout.yaxis.title.text
    med_b = r.step_ns.baseline_spread.median / 1e6
    assert bars[0].y[0] == pytest.approx(med_b)
    assert bars[0].error_y.array[0] == pytest.approx((r.step_ns.baseline_spread.p90 / 1e6) - med_b)
    assert "p10–p90" in _subtitle(fig) and "95 % CI" in _subtitle(fig)
    _readable(fig)


@pytest.mark.parametrize("name", ["decode_eager", "kv_offload", "ddp_2gpu_ctas2"])
def test_waterfall_splits_the_delta_and_shows_unattributed(name: str) -> None:
    # arrange
    r = analysed(name).report
    # act
    fig = figures.delta_waterfall(r)
    # assert
    wf = fig.data[0]
    assert "Unattributed" in wf.x and wf.x[-1] == "delta per step"
    assert list(wf.measure) == ["relative"] * (len(wf.x) - 1) + ["total"]
    total = sum(a.ns_per_step for a in r.attribution) + r.unattributed_ns_per_step
    assert sum(wf.y[:-1]) == pytest.approx(wf.y[-1]) and wf.y[-1] != 0
    # the total is the pair's one delta, and the subtitle quotes no other
    assert total == truth.delta_ns(r)
    assert wf.text[-1] == fmt_ns(truth.delta_ns(r), True)
    assert fmt_ns(r.step_ns.delta, True) not in _subtitle(fig) or r.step_ns.delta == total
    # mechanisms whose rule fired with ~0 ns are not bars of their own
    labels = [x.replace("<br>", " ") for x in wf.x]
    for a in truth.fired_with_nothing(r):
        assert mechanism_label(a.mechanism) not in labels
    for a in truth.found(r):
        assert mechanism_label(a.mechanism) in labels
    _readable(fig)


def test_top_fixes_are_ranked_by_predicted_recovery() -> None:
    # arrange
    r = analysed("decode_eager").report
    # act
    fig = figures.top_fixes(r)
    # assert: horizontal bars, largest at the top (plotly draws the first y at the bottom)
    bar = fig.data[0]
    assert list(bar.x) == sorted(bar.x)
    assert bar.y[-1] == f"#1 {r.recommendations[0].fix}"
    assert len(set(bar.y)) == len(bar.y)
    assert "how predicted" in bar.hovertemplate
    # drain_thread is predicted to recover 5 ns of 1.6 ms: not ranked
    assert not any("drain_thread" in y for y in bar.y)
    _readable(fig)


def test_top_fixes_mark_alternatives_and_never_sum_past_the_delta() -> None:
    # arrange: ddp_2gpu proposes resident_weights and context_pool for the same copies, and
    # drain_thread twice (blocked copies 69 µs, sync stalls 0 ns)
    r = analysed("ddp_2gpu_ctas2").report
    # act
    fx = truth.fixes(r)
    fig = figures.top_fixes(r, n=10)
    # assert
    names = [f.fix for f in fx.shown + fx.hidden]
    assert len(names) == len(set(names)), names
    alts = {f.fix: f.alternative_to for f in fx.shown if f.alternative_to}
    for fix, primary in alts.items():
        mine = next(f for f in fx.shown if f.fix == fix)
        theirs = next(f for f in fx.shown if f.fix == primary)
        assert mine.mechanism == theirs.mechanism and mine.ns <= theirs.ns
        assert any(f"(instead of {primary})" in y for y in fig.data[0].y)
    assert fx.combined_ns <= max(truth.delta_ns(r), 0)
    assert sum(f.ns for f in fx.primaries) == fx.combined_ns or fx.capped
    assert all(not truth.is_negligible(r, f.ns) for f in fx.shown)
    assert all(truth.is_negligible(r, f.ns) for f in fx.hidden)


def test_ledger_shows_both_runs_per_category() -> None:
    fig = figures.ledger(analysed("kv_offload").report)
    assert {t.name for t in fig.data} == {"baseline (CC off)", "treatment (CC on)"}
    assert any("copy_api" in y for y in fig.data[0].y)
    _readable(fig)


def test_launch_costs_from_samples_and_from_percentiles() -> None:
    # arrange
    a = analysed("decode_eager")
    # act
    with_series = figures.launch_costs(a.report, a.series)
    from_evidence = figures.launch_costs(a.report, None)
    # assert: cumulative distributions of the samples; boxes from p10..p90 otherwise
    assert {t.type for t in with_series.data} == {"scatter"} and len(with_series.data) == 4
    assert with_series.layout.xaxis.type == "log"
    boxes = [t for t in from_evidence.data if t.type == "box"]
    assert len(boxes) == 4
    p = a.report.attribution[0].evidence["per_launch_call_ns"]["treatment"]
    assert boxes[1].median[0] == pytest.approx(p["p50"] / 1e3)  # µs
    for fig in (with_series, from_evidence):
        _readable(fig)


def test_gpu_idle_gaps_compare_both_runs() -> None:
    a = analysed("decode_eager")
    fig = figures.gpu_idle_gaps(a.report, a.series)
    assert len(fig.data) == 2 and "idle" in fig.layout.xaxis.title.text
    _readable(fig)
    _readable(figures.gpu_idle_gaps(a.report, None))


def test_copy_latency_has_points_and_fitted_toll_lines() -> None:
    # arrange
    a = analysed("kv_offload")
    ev = a.report.attribution[0].evidence
    assert a.report.attribution[0].mechanism == "serialized_copies"
    # act
    fig = figures.copy_latency(a.report, a.series)
    # assert
    fits = [t for t in fig.data if "fit" in (t.name or "")]
    points = [t for t in fig.data if (t.name or "").endswith("copies")]
    assert len(fits) == 2 and len(points) == 2
    toll_t = ev["fit"]["treatment"]["toll_ns"]
    assert fits[1].y[0] == pytest.approx(toll_t / 1e3)  # µs, constant toll: all copies 1 MiB
    assert len(points[1].x) == a.series["copies"]["treatment"]["n"]
    _readable(fig)
    _readable(figures.copy_latency(a.report, None))


def test_copy_concurrency_shows_copies_in_flight() -> None:
    a = analysed("kv_offload")
    fig = figures.copy_concurrency(a.report, a.series)
    assert fig.data[0].x[0] == "1 in flight" and fig.data[1].y[0] == pytest.approx(100)
    assert "streams" in _subtitle(fig)
    _readable(fig)


def test_blocked_calls_put_blocking_calls_on_the_diagonal() -> None:
    # arrange
    a = analysed("async_readback")
    # act
    fig = figures.blocked_calls(a.report, a.series)
    # assert: in the treatment the async calls last at least their transfer
    treat = next(t for t in fig.data if t.name == "treatment (CC on)")
    assert sum(y >= x for x, y in zip(treat.x, treat.y)) >= 0.9 * len(treat.x)
    assert "blocked per step" in _subtitle(fig)
    _readable(fig)
    _readable(figures.blocked_calls(a.report, None))


def test_collective_bandwidth_matches_the_evidence() -> None:
    # arrange
    a = analysed("ddp_2gpu_ctas2")
    ev = figures.evidence(a.report, "encrypted_collectives")
    # act
    fig = figures.collective_bandwidth(a.report, a.series)
    # assert
    if not ev:
        assert _is_not_measured(figures.collective_bandwidth(a.report, None))
    med = [t for t in fig.data if "median per size bucket" in (t.name or "")]
    pts = [t for t in fig.data if (t.name or "").endswith("collectives")]
    assert len(pts) == 2 and fig.layout.yaxis.title.text == "algorithm bandwidth (GB/s)"
    slow = sorted(pts[1].y)[len(pts[1].y) // 2]
    fast = sorted(pts[0].y)[len(pts[0].y) // 2]
    assert slow < fast  # CC at 2 CTAs: lower bandwidth at equal bytes
    if med:
        assert med[0].y[0] == pytest.approx(ev["bandwidth_vs_size"]["baseline"][0]["gbps"])
    _readable(fig)


def test_uvm_faults_on_the_real_h100_pair() -> None:
    a = analysed("ispass_3dconv_uvm")
    fig = figures.uvm_faults(a.report, a.series)
    assert len(fig.data) == 2 and "events" in fig.data[0].name
    assert "bytes migrated" in fig.layout.xaxis.title.text
    _readable(fig)
    _readable(figures.uvm_faults(a.report, None))


def test_sync_and_setup_figures_on_the_real_h100_pair() -> None:
    r = analysed("ispass_3dconv_uvm").report
    setup = figures.setup_costs(r)
    assert "cudaMallocManaged" in setup.data[0].y
    _readable(setup)
    for fig in figures.mechanism_figures(r, "sync_stall"):
        _readable(fig)


def test_host_code_ops_compare_the_control_ops_or_say_the_basis() -> None:
    # the CPU-neighbour pair has cpu_ops without CUDA calls (~1.8x slower); the real H100
    # hotspot3D pair (nsys CSV) has none: its ratio comes from the matched host gaps, said,
    # not drawn
    ddp = figures.host_code_ops(analysed("decode_eager_cpu").report)
    assert len(ddp.data) == 2 and len(ddp.data[0].y) >= 3
    assert "median duration per call" in ddp.layout.xaxis.title.text
    _readable(ddp)
    hot = figures.host_code_ops(analysed("ispass_hotspot3d_nor").report)
    assert _is_not_measured(hot) and "matched host gaps" in _annotations(hot)
    _readable(hot)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("name", ["decode_eager", "kv_offload", "decode_eager_host_only"])
def test_every_mechanism_page_has_figures_or_says_not_measured(name: str, mechanism: str) -> None:
    a = analysed(name)
    figs = figures.mechanism_figures(a.report, mechanism, a.series)
    assert figs and figs[-1].layout.title.text.endswith("attributed time per step")
    for fig in figs:
        _readable(fig)
    if figures.attribution(a.report, mechanism) is None:
        # nothing attributed: the per-step part says why (the rule's outcome); the evidence
        # figures still draw whatever samples the traces hold
        rule = next(r for r in a.report.rules if r.mechanism == mechanism)
        assert _is_not_measured(figs[-1]) and rule.code in _annotations(figs[-1])


def test_mechanism_per_step_marks_trimmed_steps_and_the_reported_value() -> None:
    r = analysed("decode_eager").report
    fig = figures.mechanism_per_step(r, "launch_toll")
    names = {t.name for t in fig.data}
    assert names == {"steps used", "trimmed steps"}
    assert "reported" in _annotations(fig)


def test_timeline_draws_lanes_of_both_runs() -> None:
    # arrange
    a = analysed("decode_eager")
    tl = api.step_timeline(a.pair, 3)
    step = _step(a.report, 0, 3)
    # act
    fig = figures.timeline(tl, step.parts)
    # assert
    lanes = {y for t in fig.data for y in t.y}
    assert {"main thread: CUDA API", "main thread: gap before launch"} <= lanes
    assert any(lane.endswith(": kernels") for lane in lanes)
    legend = {t.name for t in fig.data if t.showlegend}
    assert any(n.startswith("Kernel launch toll (") for n in legend)
    assert {"baseline events", "no mechanism in this step"} <= legend
    assert fig.layout.xaxis2.title.text == "time from the step's start (ms)"
    # both titles name the slider's aligned step
    titles = [x.text for x in fig.layout.annotations[:2]]
    assert all(t.split(" · ")[1].startswith("aligned step 3") for t in titles), titles
    _readable(fig)


def _step(report, rank, index):  # noqa: ANN001, ANN202
    return next(s for s in report.partition.per_step if s.rank == rank and s.index == index)


@pytest.mark.parametrize("name", ["decode_eager", "ddp_2gpu_ctas2", "kv_offload"])
def test_timeline_colours_only_what_the_step_attributes(name: str) -> None:
    # arrange: every aligned step of rank 0 (the attribution differs from step to step)
    a = analysed(name)
    steps = [s for s in a.report.partition.per_step if s.rank == 0][:6]
    for step in steps:
        tl = api.step_timeline(a.pair, step.index, rank=0)
        # act
        fig = figures.timeline(tl, step.parts)
        # assert: the baseline is all neutral; a treatment colour only for time > 0 this step
        for t in fig.data:
            run, mech = t.meta["run"], t.meta["mechanism"]
            if run == "baseline" or mech is None:
                assert mech is None and t.marker.color == NEUTRAL_COLOR, (step.index, t.name)
            else:
                assert step.parts.get(mech, 0) > 0, (step.index, mech, step.parts)
                assert t.marker.color == MECHANISM_COLORS[mech]
        zero = {m for m, ns in step.parts.items() if ns <= 0}
        drawn = {t.meta["mechanism"] for t in fig.data}
        assert not zero & drawn, (step.index, zero & drawn)


def _strip_evidence(report):  # noqa: ANN001, ANN202
    atts = [a.model_copy(update={"evidence": {}}) for a in report.attribution]
    return report.model_copy(update={"attribution": atts, "partition": None})


@pytest.mark.parametrize("name", ["decode_eager", "kv_offload", "async_readback"])
def test_figures_say_not_measured_when_evidence_is_missing(name: str) -> None:
    # arrange: a report without evidence or partition (an older or partial engine)
    r = _strip_evidence(analysed(name).report)
    empty = {k: {"baseline": {}, "treatment": {}} for k in analysed(name).series}
    # act
    figs = [figures.ledger(r), figures.mechanism_per_step(r, "launch_toll")]
    for m in MECHANISMS:
        figs += figures.mechanism_figures(r, m, None) + figures.mechanism_figures(r, m, empty)
    # assert: nothing raised, each either draws or says why not
    assert all(_is_not_measured(f) for f in figs)
    _readable(figures.step_time(r))
    _readable(figures.delta_waterfall(r))


def test_trace_strings_are_escaped_in_every_figure(tmp_path) -> None:  # noqa: ANN001
    # arrange: a real pair whose kernel names carry an HTML payload
    b, t = write_payload_pair(tmp_path)
    pair = api.pair(api.load_trace(b), api.load_trace(t))
    report = api.diagnose_pair(pair)
    assert PAYLOAD in report.model_dump_json()
    series = api.evidence_series(pair)
    # act
    figs = [figures.timeline(api.step_timeline(pair, 1))]
    for m in MECHANISMS:
        figs += figures.mechanism_figures(report, m, series)
    text = "".join(f.to_json() for f in figs)
    # assert
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_figures_module_imports_without_dash() -> None:
    code = "import sys, ccdiag.app.figures; sys.exit('dash' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
