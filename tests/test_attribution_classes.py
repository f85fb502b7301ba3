"""Regression tests for the six failure classes of issue 12, built from the project's own
captures (``validation/``, TUNE pairs only: ``validation/SPLIT.md``) and real CC-off traces.

Classes 4 (host-only / summary-only) and 6 (steps of real loops) have their own files
(``tests/test_host_only_summaries.py``, ``tests/test_steps_loops.py``,
``tests/test_validation_nostep.py``). Truths come from each pair's ``ground_truth.json``
(single-session ablation and exact Shapley values); where the pair's own delta (10 shipped steps)
differs from the truth's (all profiled steps of the session), the mechanism's *share* of the
delta is compared with the truth's share, and the test says so.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ccdiag import api
from ccdiag.replay import Injection, RowCosts, model_rows, replay
from ccdiag.synthetic import write_kineto
from ccdiag.verdict import Report

ROOT = Path(__file__).resolve().parents[1]
VAL = ROOT / "validation"


def _trace_path(pair: str, side: str) -> Path:
    """A validation pair's baseline or treatment trace (not its .meta.json)."""
    d = VAL / pair
    return next(p for p in d.iterdir() if p.name.startswith(f"{side}.") and "meta" not in p.name)


@cache
def _report(pair: str) -> Report:
    return api.diagnose(_trace_path(pair, "baseline"), _trace_path(pair, "treatment"))


def _truth(pair: str) -> dict:
    return json.loads((VAL / pair / "ground_truth.json").read_text())


def _att(r: Report) -> dict[str, int]:
    return {a.mechanism: a.ns_per_step for a in r.attribution}


def _share(r: Report, m: str) -> float:
    return _att(r).get(m, 0) / r.partition.total_ns_per_step


# ---------------------------------------------------------------- class 1: toll, not host code


def test_class1_a_launch_toll_on_some_paths_is_not_slower_host_code_kineto() -> None:
    """hf_generate_llama (HF ``generate()``, eager, Kineto): 924 of 1,232 launches per step
    tolled (cuBLAS's own launches not). The first version gave 50-62 % to host_slowdown. The
    toll's paid cost is the shim's exact count (11.33 ms/step for 11.32 injected) and, beside
    it, its side effect: 0.69 ms/step of host code beside the tolled launches that grew 4.7 %
    (the shim counts its spin only)."""
    r, g = _report("hf_generate_llama"), _truth("hf_generate_llama")
    att = _att(r)
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll")
    injected = g["injected_ns_per_step"]["launch_toll"]
    side = toll.evidence["host_side_effect"]["ns_per_step"]
    assert 0.02 * injected <= side <= 0.10 * injected
    assert abs(float(toll.paid_ns_per_step or 0) - side - injected) <= 0.05 * injected
    assert abs(att.get("host_slowdown", 0)) < 0.03 * r.partition.total_ns_per_step


@pytest.mark.parametrize("pair", ["hf_generate_codegen", "hf_generate_codegen_after"])
def test_class1_a_toll_before_or_after_each_launch_on_codegen_with_every_round_shipped(
    pair: str,
) -> None:
    """HELD-OUT-25 (judged once, then opened): HF ``generate()`` on CodeGen, a family new to the
    matrix, the toll spun before or after each launch; the pairs ship every round's steps, the
    steps the truth pools. The toll: 15.75 ms for 16.92 [15.15, 18.97] (before) and 13.69 ms for
    13.25 [12.20, 15.33] (after); its paid cost without the side effect within 10 % of the shim's
    count (14.4 and 13.2 ms for 13.29: +8 %, 0 %), no host_slowdown, at most 10 % unattributed."""
    r, g = _report(pair), _truth(pair)
    truth = g["impact_ns_per_step"]["launch_toll"]["value"]
    assert abs(_att(r)["launch_toll"] - truth) <= 0.15 * truth
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll")
    side = toll.evidence.get("host_side_effect", {}).get("ns_per_step", 0)
    injected = g["injected_ns_per_step"]["launch_toll"]
    assert abs(float(toll.paid_ns_per_step or 0) - side - injected) <= 0.10 * injected
    total = r.partition.total_ns_per_step
    assert abs(_att(r).get("host_slowdown", 0)) < 0.03 * total
    assert abs(r.unattributed_ns_per_step) <= 0.10 * total


def test_class1_the_kineto_tolls_impact_is_attributed_in_full() -> None:
    """The toll's impact is 13.7 ms/step for 11.3 injected. A strict xfail until PyTorch's own
    memory-efficient attention kernels (``fmha_cutlassF_*``, 24 launches a step through
    ``cudaLaunchKernel``, each +14.6 µs) counted as runtime launches, not a math library's:
    ccdiag gave the toll 12.0 ms (-12 %) and left 12 % unattributed; now 12.3 ms (-10 %, 924
    tolled launches a step, the shim's own count) and 9.9 %."""
    r, g = _report("hf_generate_llama"), _truth("hf_generate_llama")
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll")
    tolled = g["injected_ns_per_step"]["launch_toll"] / g["platform"]["launch_toll"]["value"]
    runtime = next(p for p in toll.evidence["paths"] if p["path"] == "runtime")
    assert abs(runtime["launches_per_step"] - tolled) <= 1  # 900 before: fmha under "library"
    truth = g["impact_ns_per_step"]["launch_toll"]["value"]
    assert abs(_att(r)["launch_toll"] - truth) <= 0.15 * truth
    assert abs(r.unattributed_ns_per_step) <= 0.10 * r.partition.total_ns_per_step


def test_class1_a_launch_toll_on_some_paths_is_not_slower_host_code_nsys() -> None:
    """The same workload under Nsight Systems (SQLite): the toll sits in the gap before the
    runtime launch, beside ``cuKernelGetName`` queries. Its truth (+20.1 ms, one range per
    phase) is larger than the Kineto pair's; the shipped ranges' own delta is +16.9 ms, so the
    toll's share of the delta is judged (the truth's: 100 %). The host gaps beside the tolled
    launches grew 0.194 per ns: a strict xfail until the side effect was claimed from HS01's
    smallest growth (1.05x), not its floor beside explaining calls (1.2x: 36 % unattributed).
    A strict xfail again at 10.2 % unattributed (2026-12-05: PyTorch's fmha kernels counted as
    runtime launches); 9.98 % since ``generate()``'s blocking readbacks (``cudaMemcpyAsync`` +
    ``cudaStreamSynchronize``) are one copy call (``ccdiag.ledger.host.merge_copy_syncs``): a
    pass by a hair."""
    r = _report("hf_generate_llama_nsys")
    assert _share(r, "launch_toll") >= 0.85
    assert abs(_share(r, "host_slowdown")) < 0.03
    assert abs(r.unattributed_share) <= 0.10


@pytest.mark.parametrize(
    "pair",
    [
        "hf_generate_gpt2_nsys_il",
        "hf_generate_t5_nsys_il",
        "hf_generate_llama_nsys_il",
        pytest.param(
            "hf_generate_neox_nsys_il",
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a miss, not a pass (identified keys only, 2026-12-04): 13.3 % unattributed"
                ),
            ),
        ),
        "hf_generate_gpt2_nsys",
        "hf_generate_t5_nsys",  # 10.2 % unattributed until the readbacks were one call: 9.6 %
    ],
)
def test_class1_under_nsys_host_growth_beside_tolled_launches_is_the_tolls(pair: str) -> None:
    """HF ``generate()`` under Nsight Systems, only the launch toll injected (gap before; cuBLAS's
    own launches untolled). The ``*_il`` pairs' truths pool 4 interleaved rounds of ranges
    (HELD-OUT-5, judged once, then opened): the toll itself lengthened the host (T5 +26.7 ms,
    Llama +25.9 ms per step against 15.3 and 11.3 ms injected). Their host gaps, 80 % or more
    of them beside tolled launches, grew with their length, and an nsys trace has no cpu_ops to
    say host code outside CUDA calls got slower: HS01 took 20 % (T5) and 9 % (Llama) of the
    delta, 28 % and 21 % on the one-range GPT-2 and T5 pairs. Now LA01 claims that growth as the
    toll's side effect; the toll's share of the delta is judged (the round-0 pair's own delta
    is not the pooled truth's)."""
    r = _report(pair)
    assert abs(_share(r, "host_slowdown")) < 0.03
    assert _share(r, "launch_toll") >= 0.85  # the truth's share: 100 %
    assert abs(r.unattributed_share) <= 0.10
    hs = next(o for o in r.rules if o.code == "HS01")
    assert hs.outcome != "fired"


def test_class1_a_toll_under_a_faster_nsys_range_is_still_seen() -> None:
    """hf_generate_neox_nsys: 10,320 tolled launches in the treatment range (8.43 ms/step
    injected), but the range ran in the profiler's faster mode, so the step grew only 0.64 ms
    (truth unresolved, CI [-0.36, 2.42] ms). The toll is still in the matched gaps before each
    runtime launch; LA01 should measure it there (paid cost, whatever the step shows). A strict
    xfail until 2026-12-04: the gap model's per-kernel constants came out +-265-289 us,
    cancelling each other; with constants only for the keys the gaps identify
    (``ccdiag.ledger.align.identified_keys``) it passes."""
    r = _report("hf_generate_neox_nsys")
    la = next((a for a in r.attribution if a.mechanism == "launch_toll"), None)
    assert la is not None and la.paid_ns_per_step is not None
    assert (
        la.paid_ns_per_step
        >= 0.5 * _truth("hf_generate_neox_nsys")["injected_ns_per_step"]["launch_toll"]
    )


# ---------------------------------------------------------------- class 2: scaled launch costs


def _scaled_pair(tmp: Path) -> tuple[Path, Path, int]:
    """A real CC-off trace (ccdiag's eager decode on an H200) and the same trace with every
    runtime launch call 2.5x as long, inside the call, as real H100 + TDX data shows (bimodal
    launch durations in both runs, both modes scaled). The truth is the replay's own delta."""
    base = api.load_trace(ROOT / "sample_traces" / "decode_eager" / "baseline.json.gz")
    calls, _ = model_rows(base)
    launch = calls.filter((pl.col("cls") == "launch") & pl.col("name").str.starts_with("cuda"))
    extra = np.zeros(base.events.height, dtype=np.int64)
    extra[launch["_row"].to_numpy()] = (1.5 * launch["dur_ns"].to_numpy()).astype(np.int64)
    plain = replay(base, Injection())
    treat = replay(base, Injection(), costs=RowCosts(call_ns=extra))
    b, t = (
        write_kineto(plain, tmp / "baseline.json.gz"),
        write_kineto(treat, tmp / "treatment.json.gz"),
    )
    delta = int(np.median(treat.steps["dur_ns"].to_numpy() - plain.steps["dur_ns"].to_numpy()))
    return b, t, delta


def test_class2_launch_calls_that_scale_are_a_toll(tmp_path: Path) -> None:
    """The first version said "clean: no additive per-launch cost" on launch calls that grew
    x2.5. The matched calls' quantile fit reads the scale; the toll is paid inside the call."""
    b, t, delta = _scaled_pair(tmp_path)
    r = api.diagnose(b, t)
    la = next(a for a in r.attribution if a.mechanism == "launch_toll")
    assert abs(la.ns_per_step - delta) <= 0.15 * delta
    path = next(p for p in la.evidence["paths"] if p["path"] == "runtime")
    assert path["quantile_fit"]["scale"] > 2.0 and path["in_call_ns"] > 0
    assert abs(_share(r, "host_slowdown")) < 0.03


# ---------------------------------------------------------------- class 3: interactions split


def test_class3_a_blocking_copy_that_exposes_the_toll_is_split_not_left_over() -> None:
    """tv_train_nostep (torchvision ResNet-18, pinned DataLoader, non_blocking H2D, no
    ProfilerStep): under emulated CC the copies block and the launch toll and copy padding
    interact. The first version left 58 % unattributed and gave copies 4 %. Judged against the
    exact Shapley values of the session's subsets."""
    r, g = _report("tv_train_nostep"), _truth("tv_train_nostep")
    truth = g["shapley_ns_per_step"]["blocked_non_blocking"]["value"]
    assert abs(_att(r)["blocked_non_blocking"] - truth) <= 0.15 * truth
    assert (
        _att(r)["serialized_copies"] >= 0.5 * g["shapley_ns_per_step"]["serialized_copies"]["value"]
    )
    assert abs(r.unattributed_share) <= 0.10


def test_class3_the_padding_gets_its_shapley_share() -> None:
    """Was a strict xfail (1.60 ms/step vs its Shapley truth 1.95 ms, -18 %) until HS01 took no
    more from a matched gap than it grew: 1.72 ms (-12 %)."""
    r, g = _report("tv_train_nostep"), _truth("tv_train_nostep")
    truth = g["shapley_ns_per_step"]["serialized_copies"]["value"]
    assert abs(_att(r)["serialized_copies"] - truth) <= 0.15 * truth


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a miss, not a pass (HELD-OUT-18, judged once): the blocking H2D copy's Shapley value "
        "beside the toll is +0.56 ms [0.07, 0.90] and ccdiag gives it 8 us: the host waits "
        "630 us a step inside the copy calls, which CP02 reads as waiting for the GPU-side "
        "padding (CP01's, 518 us paid) and the replay adds 33 us of it to the step"
    ),
)
def test_class3_a_block_that_waits_for_gpu_side_padding_gets_its_shapley_share() -> None:
    """tv_eval_shufflenet_both (torchvision ShuffleNetV2 inference, the copy pad placed on the
    GPU side, the toll after each launch): the other placement of the copy costs."""
    r, g = _report("tv_eval_shufflenet_both"), _truth("tv_eval_shufflenet_both")
    truth = g["shapley_ns_per_step"]["blocked_non_blocking"]["value"]
    assert abs(_att(r).get("blocked_non_blocking", 0) - truth) <= 0.15 * truth


@pytest.mark.parametrize("pair", ["tv_detect_frcnn_launch", "tv_detect_frcnn_both"])
def test_class3_detection_readbacks_inside_the_forward_toll_and_copies(pair: str) -> None:
    """HELD-OUT-28 (judged once, then opened): torchvision Faster R-CNN inference, whose
    post-processing reads sizes back 67 times a step inside the forward, each read already
    followed by a synchronize. The toll: 7.93 ms for 8.67 [8.38, 9.12] alone, 7.84 for a
    Shapley 8.52 [8.32, 8.73] beside the copies (-8 % both); the copies' serialized + blocked
    together 2.14 ms for 2.24; no host_slowdown, at most 10 % unattributed."""
    r, g = _report(pair), _truth(pair)
    truths = g.get("shapley_ns_per_step") or g["impact_ns_per_step"]
    att, total = _att(r), r.partition.total_ns_per_step
    toll = truths["launch_toll"]["value"]
    assert abs(att["launch_toll"] - toll) <= 0.15 * toll
    copies = [m for m in ("serialized_copies", "blocked_non_blocking") if m in truths]
    if copies:
        want = sum(truths[m]["value"] for m in copies)
        assert abs(sum(att.get(m, 0) for m in copies) - want) <= 0.15 * want
    assert abs(att.get("host_slowdown", 0)) < 0.03 * total
    assert abs(r.unattributed_ns_per_step) <= 0.10 * total


def _copy_fixes(r: Report) -> dict[str, str]:
    cp01 = next(a for a in r.attribution if a.mechanism == "serialized_copies")
    return {rec.fix: rec.text for rec in cp01.recommendations}


def test_small_copies_that_were_synchronous_already_are_not_told_to_be_packed() -> None:
    """HELD-OUT-28's detection loop: its 66 small copies a step (4-byte uploads of small tensors
    from pageable memory, reads of sizes inside the post-processing) blocked the host without
    CC too; each depends on the kernels before it, so "pack them into one transfer" was advice
    no user could follow. CP01 now tells those apart (blocking in the baseline) and says to keep
    such values on the GPU; copies issued asynchronously keep the packing advice (HF BERT
    training: 2 of its 4 small copies a step synchronous, the other 2 pinned uploads)."""
    fixes = _copy_fixes(_report("tv_detect_frcnn_copies"))
    assert "batch_small_copies" not in fixes
    assert fixes["fewer_sync_copies"].startswith("All 66 small copies a step were synchronous")
    mixed = _copy_fixes(_report("hf_bert_train_copies"))
    assert mixed["fewer_sync_copies"].startswith("2 of the 4 small copies")
    assert mixed["batch_small_copies"].startswith("Pack the 2 small copies")


def test_a_fix_that_recovers_nothing_is_not_recommended() -> None:
    """HELD-OUT-30's flag reads (opened after its judgement): the 13 readbacks a step blocked
    without CC too, so blocked_non_blocking gets 0 ns and its drain thread "recovers 0 ns"; it
    was listed as a fix (as a 0 ns sync stall's drain thread was on the 2-GPU DDP sample). A
    mechanism that adds nothing to the step gets no fix; the flags' own advice
    (fewer_sync_copies) stays. (A fix a costly mechanism's model says recovers nothing, DDP's
    bigger buckets in docs/validation_multigpu.md, is still shown: that is advice too.)"""
    r = _report("flag_reads_both")
    assert all(x.predicted_recovery_ns_per_step > 0 for x in r.recommendations)
    assert "drain_thread" not in {x.fix for x in r.recommendations}
    assert "fewer_sync_copies" in _copy_fixes(r)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a miss, not a pass (HELD-OUT-28, judged once): the detection loop's 67 small readbacks "
        "a step were synchronous already; the shim's stream sync inside each copy call adds "
        "~7 us a copy, which the truth gives to blocked_non_blocking (+478 us [249, 783]) and "
        "CP01's fitted toll (55 us for 35 spun) takes as padding: ccdiag gives blocked 10 us"
    ),
)
def test_class3_a_sync_added_to_already_synchronous_readbacks_is_blocking() -> None:
    """tv_detect_frcnn_copies: the copies alone; serialized 2.07 ms for 1.78 [1.53, 2.06]."""
    r, g = _report("tv_detect_frcnn_copies"), _truth("tv_detect_frcnn_copies")
    truth = g["shapley_ns_per_step"]["blocked_non_blocking"]["value"]
    assert abs(_att(r).get("blocked_non_blocking", 0) - truth) <= 0.15 * truth


# ---------------------------------------------------------------- class 5: the async readback


def test_class5_an_async_readback_that_blocks_is_the_delta_and_a_drain_thread_recovers_it() -> None:
    """serve_graph_async (CUDA-graph decode loop, tokens read back ``non_blocking`` on a side
    stream while the next step runs): under CC the copy blocks the main thread. The first
    version attributed 22 % and predicted 14 % recovered by a drain thread; measured without a
    profiler the drain thread recovers all of it (validation/measured_stepTimes.json). The
    shipped steps' delta (+0.76 ms) is below the session's (+0.98 ms): shares are judged."""
    r, g = _report("serve_graph_async"), _truth("serve_graph_async")
    truth_share = (
        g["shapley_ns_per_step"]["blocked_non_blocking"]["value"] / g["delta_ns_per_step"]["value"]
    )
    assert abs(_share(r, "blocked_non_blocking") - truth_share) <= 0.15 * truth_share
    assert abs(r.unattributed_share) <= 0.10
    drain = [x for x in r.recommendations if x.fix == "drain_thread"]
    assert drain and drain[0].share >= 0.8


@pytest.mark.parametrize("pair", ["serve_graph_gpu_copies", "serve_graph_gpu_both"])
def test_class5_a_graph_loop_beside_an_emulators_gpu_padding_kernel_is_the_same_workload(
    pair: str,
) -> None:
    """HELD-OUT-19 (judged once, then opened): a CUDA-graph serving loop launches once a step;
    an emulator padding its copies on the GPU launches a kernel beside each readback, and the
    launch-count check refused the pair (1 vs 2 launches a step, +100 %). Kernels only the
    treatment runs, right after a copy on its stream, are now read as the copy's cost placed on
    the GPU and left out of the check (said in a note); the blocked readback is within 15 % of
    its Shapley truth (-8 %, -5 %)."""
    r, g = _report(pair), _truth(pair)
    assert any("right after a copy on its stream" in n for n in r.notes)
    truth = g["shapley_ns_per_step"]["blocked_non_blocking"]["value"]
    assert abs(_att(r).get("blocked_non_blocking", 0) - truth) <= 0.15 * truth


def test_class3_sixteen_copies_padded_on_the_gpu_are_attributed() -> None:
    """kv_offload_gpu (TUNE: ccdiag's KV offload, 16 copies a step, the pad as a kernel after
    each). Was a strict xfail (87 % of the delta unattributed): CP01 paid the padding, but its
    removal left the padding kernels on the GPU and put the host's wait for them (the
    interposer waits after the traced call) on the gap before the padding kernel's own launch,
    0 µs long, where the replay took nothing. Now (``rules/_copies.with_gpu_padding``) the
    kernels leave with the copies' cost and the wait comes off the gap before the program's
    next call: serialized_copies +5 % of its Shapley truth, 1 % unattributed, paid counted once
    (2.14 ms/step for 1.88 injected)."""
    r, g = _report("kv_offload_gpu"), _truth("kv_offload_gpu")
    assert any("16 a step" in n for n in r.notes)
    assert abs(r.unattributed_share) <= 0.10
    truth = g["shapley_ns_per_step"]["serialized_copies"]["value"]
    assert abs(_att(r).get("serialized_copies", 0) - truth) <= 0.15 * truth
    paid = {a.mechanism: a.paid_ns_per_step for a in r.attribution}["serialized_copies"]
    assert paid <= 1.25 * 1.88e6  # the wait and the kernel it waited for: counted once


def test_class3_a_blocked_copy_s_wait_past_its_gpu_padding_comes_off_the_step() -> None:
    """tv_train_gpu (TUNE: torchvision training, non_blocking H2D made blocking, the copy pad as
    a kernel after each copy). The interposer launches the padding kernel right after the copy
    call and waits after that launch; CP02 (blocked non_blocking) put its measured wait on the
    gap before the padding launch (3 µs long), so removing it saved 52 µs/step of the 6.92 ms it
    paid, the replay left 39 % of the delta and the ledger's partition was reported. Its wait
    now comes off the gap before the program's next call (``rules/_copies.past_padding``, as
    CP01's did): the replay alone saves what CP02 paid, and kv_offload_gpu's blocked copies go
    from -76 % of their Shapley truth to within 15 %."""
    r = _report("tv_train_gpu")
    assert not any("ledger partition is reported" in n for n in r.notes)
    a = {x.mechanism: x for x in r.attribution}["blocked_non_blocking"]
    assert a.alone_ns_per_step is not None and a.alone_ns_per_step >= 0.8 * a.paid_ns_per_step
    # 39 % before; the rest: the baseline's profiled host ran ahead of its GPU
    assert abs(r.unattributed_share) <= 0.30
    r, g = _report("kv_offload_gpu"), _truth("kv_offload_gpu")
    truth = g["shapley_ns_per_step"]["blocked_non_blocking"]["value"]
    assert abs(_att(r).get("blocked_non_blocking", 0) - truth) <= 0.15 * truth


def test_class3_the_copy_pad_on_the_gpu_of_an_inference_loop_is_paid_as_counted() -> None:
    """tv_eval_mobilenet_gpu_copies (HELD-OUT-22, judged once with f5fb43e's engine, then
    opened): MobileNetV3-Small inference, a pinned DataLoader, the copy pad as a kernel after each
    copy. The copies did not slow the step beyond the session's noise (truth -0.18 ms
    [-1.44, 1.18]), so what can be checked is what CP01 paid — the pad, its launch and the host's
    wait for it: 540 µs a step for the 477 µs the shim counted (+13 %; 509 before f5fb43e) — and
    that what the replay takes off the step for it (510 µs; 47 before f5fb43e) stays inside the
    unresolved truth's CI."""
    pair = "tv_eval_mobilenet_gpu_copies"
    r, g = _report(pair), _truth(pair)
    counted = g["injected_ns_per_step"]["serialized_copies"]
    paid = {a.mechanism: a.paid_ns_per_step for a in r.attribution}["serialized_copies"]
    assert abs(paid - counted) <= 0.20 * counted
    lo, hi = g["shapley_ns_per_step"]["serialized_copies"]["ci95"]
    assert lo <= _att(r).get("serialized_copies", 0) <= hi


def test_each_padding_kernel_names_the_copy_it_pads() -> None:
    """The same pair: every padding kernel pairing finds names the copy right before it on its
    stream (``copy_row``), so CP01 counts the host's wait only inside the padded copies' calls
    (it once summed every blocking copy's, capped by the padding's time)."""
    from ccdiag.pairing import PAD_AFTER_COPY_NS

    d = VAL / "tv_eval_mobilenet_gpu_copies"
    p = api.load_pair(d / "baseline.json.gz", d / "treatment.json.gz")
    pad = p.copy_padding
    assert pad.height > 0
    gpu = p.treatment.gpu.select("ev_row", "stream", "gclass", "start_ns", "dur_ns")
    both = pad.join(gpu, on="ev_row").join(gpu, left_on="copy_row", right_on="ev_row", suffix="_c")
    assert both.height == pad.height
    assert (both["gclass_c"] == "copy").all() and (both["stream"] == both["stream_c"]).all()
    lag = both["start_ns"] - (both["start_ns_c"] + both["dur_ns_c"])
    assert (lag <= PAD_AFTER_COPY_NS).all()


def test_class3_a_synchronous_readback_padded_on_the_gpu_is_the_copies() -> None:
    """serve_graph_sync_gpu_both (HELD-OUT-20, judged, then opened): the synchronous graph
    readback with the copy's pad as a kernel after it. CP01 got 8 µs of a 39 µs Shapley truth
    while the padding kernel stayed in its counterfactual; now -5 %."""
    r, g = _report("serve_graph_sync_gpu_both"), _truth("serve_graph_sync_gpu_both")
    truth = g["shapley_ns_per_step"]["serialized_copies"]["value"]
    assert abs(_att(r).get("serialized_copies", 0) - truth) <= 0.15 * truth


def test_class5_the_blocked_readback_under_nsys_where_the_sync_is_its_own_call() -> None:
    """HELD-OUT-20 (judged once, then opened): the CUDA-graph serving loop's async readback
    under Nsight Systems. An interposer that makes the copy synchronous leaves the traced
    ``cudaMemcpyAsync`` short (15 us) and the wait in a ``cuStreamSynchronize`` of its own right
    after it (638 us): CP02 saw no copy call that blocked and stayed clean (0 for a Shapley
    truth of +803 us, 90 % of the delta unattributed). A copy call and the host-blocking sync
    right after it are now one blocking copy (``ccdiag.ledger.host.merge_copy_syncs``), as the
    op's end makes them under Kineto: -18 % of the truth, the same miss as the Kineto twin
    ``serve_graph_async`` (-25 %)."""
    r, g = _report("serve_graph_async_nsys_il"), _truth("serve_graph_async_nsys_il")
    truth = g["shapley_ns_per_step"]["blocked_non_blocking"]["value"]
    assert 0.75 * truth <= _att(r).get("blocked_non_blocking", 0) <= 1.15 * truth
    assert abs(r.unattributed_share) <= 0.20
    drain = [x for x in r.recommendations if x.fix == "drain_thread"]
    assert drain and drain[0].share >= 0.6


@pytest.mark.parametrize(
    ("pair", "unattributed"),
    [
        ("tv_train_mnv3s_copies_nsys_il", 0.10),
        ("tv_train_mnv3s_nsys_il", None),
        ("tv_train_regnetx_copies_nsys_il", 0.10),
        ("tv_train_regnetx_nsys_il", 0.10),
    ],
)
def test_class3_a_copy_pad_beside_the_call_under_nsys_is_the_copys(
    pair: str, unattributed: float | None
) -> None:
    """HELD-OUT-43 (judged once, then opened): a torchvision DataLoader loop under Nsight
    Systems, where the shim pads each host copy *after* ``cudaMemcpyAsync`` +
    ``cuStreamSynchronize`` return. No ``aten::copy_`` op to extend the call to: the 1.74 ms pad a
    step lay in the host gap after the call, CP01 paid 0.10 ms (0.02 ms with the toll) and left
    25 % (38 %) of the delta unattributed. The growth of the gap after a copy call no op issued
    is the copy's (``rules/_copies._beside``). With the toll too (``both``) 26 % of the delta
    is still unattributed: not the copies' (their paid cost is checked), left as a miss.
    HELD-OUT-44 (RegNetX-400MF, judged once): the pad was measured beside the call but CP01 did
    not fire, its test reading the calls' latency alone (1.16x); the pad beside the call is
    latency in that test now (``_copies.beside``)."""
    r, g = _report(pair), _truth(pair)
    injected = g["injected_ns_per_step"]["serialized_copies"]
    cp = next(a for a in r.attribution if a.mechanism == "serialized_copies")
    assert 0.85 * injected <= float(cp.paid_ns_per_step or 0) <= 1.15 * injected
    if unattributed is not None:
        assert abs(r.unattributed_ns_per_step) <= unattributed * r.partition.total_ns_per_step


@pytest.mark.parametrize(
    "pair",
    ["serve_graph_sync_gpu_copies", "serve_graph_sync_gpu_both", "serve_graph_drain_after_both"],
)
def test_class5_no_blocked_copy_where_a_sync_or_drained_readback_had_nothing_to_lose(
    pair: str,
) -> None:
    """HELD-OUT-20: the shim made these readbacks "block" for 0.72-0.81 ms a step, but a
    synchronous readback waited anyway and a drained one waits off the main thread (truths
    -0.00 ms): nothing of it is blocked_non_blocking."""
    r = _report(pair)
    assert abs(_att(r).get("blocked_non_blocking", 0)) <= 15_000


@pytest.mark.parametrize("pair", ["serve_graph_sync", "serve_graph_drain"])
def test_class5_no_blocked_copy_where_the_readback_never_overlapped(pair: str) -> None:
    """The synchronous and drain-worker readbacks: the copy's wait is no CC cost there (the
    sync copy waited anyway; the drain thread waits off the main thread)."""
    r = _report(pair)
    assert abs(_share(r, "blocked_non_blocking")) < 0.03


def _load(pair: str, side: str):
    return api.load_trace(_trace_path(pair, side))


@pytest.mark.parametrize(
    "pair",
    [
        "serve_graph_drain_after_both",
        "serve_graph_drain_nsys_il",
        "serve_graph_drain_l6_after_launch",
    ],
)
def test_class5_a_drain_worker_runs_beside_the_main_thread(pair: str) -> None:
    """The drain worker issues the readback and waits for it while the main thread goes on: its
    calls overlap the main thread's in time (1-25 of 30-31 of them), or, with the main thread
    busy in a host gap long enough to hold them all (HELD-OUT-26's 6-layer loop), none does, but
    it launches no kernel. Laid on the main thread's timeline, its waits were read as the step's
    and the two runs' calls interleaved differently (the gap before the main thread's copy was
    measured from the worker's sync): LA01 paid 40.8 us/step of the 89 us graph-launch toll and
    replay gave it 20 us of a 93 us delta (3 us of 105 in the 6-layer loop, judged held out)."""
    from ccdiag.ledger.host import main_threads, thread_roles

    for side in ("baseline", "treatment"):
        ev = _load(pair, side).events
        roles = thread_roles(ev)
        assert roles.height == 2
        assert roles.filter(pl.col("ordinal") == 1)["beside"].to_list() == [True]
        main = main_threads(ev)
        assert (
            main.rows() == roles.filter(pl.col("ordinal") == 0).select("rank", "pid", "tid").rows()
        )


@pytest.mark.parametrize("pair", ["tv_train_both", "hf_bert_train_both"])
def test_class5_the_autograd_thread_the_step_hands_over_to_stays_on_the_timeline(pair: str) -> None:
    """PyTorch's autograd thread runs while the main thread waits in ``backward()``: its calls
    never overlap the main thread's, and the step's host critical path hands over to it."""
    from ccdiag.ledger.host import main_threads, thread_roles

    ev = _load(pair, "treatment").events
    assert thread_roles(ev)["beside"].to_list() == [False, False]
    assert main_threads(ev).height == 2


def test_class5_a_drain_loops_graph_launch_toll_is_measured_on_the_main_thread() -> None:
    """HELD-OUT-20's ``serve_graph_drain_after_both`` (the 89 us graph-launch toll spun after
    each ``cudaGraphLaunch``, the copy costs on the worker): the main thread's matched gaps
    carry the toll, paid within 10 % of the shim's count and within 15 % of its Shapley share."""
    r, g = _report("serve_graph_drain_after_both"), _truth("serve_graph_drain_after_both")
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll")
    assert toll.paid_ns_per_step == pytest.approx(89_000, rel=0.10)
    truth = g["shapley_ns_per_step"]["launch_toll"]["value"] / g["delta_ns_per_step"]["value"]
    assert _share(r, "launch_toll") == pytest.approx(truth, rel=0.15)


def test_class5_the_six_layer_drain_loops_toll_is_the_steps_growth() -> None:
    """HELD-OUT-26's ``serve_graph_drain_l6_after_launch`` (toll only, spun after each launch):
    judged held out, LA01 got 3 us of a 105 us truth (the worker's event sync, left on the main
    timeline, absorbed the removal in the replay). Now within 15 % of the truth."""
    r, g = _report("serve_graph_drain_l6_after_launch"), _truth("serve_graph_drain_l6_after_launch")
    assert _att(r)["launch_toll"] == pytest.approx(g["delta_ns_per_step"]["value"], rel=0.15)


def test_class5_copies_off_the_main_threads_timeline_are_said_not_dropped() -> None:
    """HELD-OUT-26's eager drain loop: the worker issues under 10 % of the main thread's calls
    (not a candidate thread), and its copies, whose cost the truth puts at 602 us a step, reach
    the step only through a Python queue. ccdiag measures nothing from them, and says so."""
    r = _report("serve_eager_drain_both")
    said = [n for n in r.notes if n.startswith("copies off the main threads' timeline")]
    assert len(said) == 1 and "1.0 -> 1.0 calls a step" in said[0]
    # a training loop's copies are the main thread's: no such note
    assert not any("copies off the main" in n for n in _report("tv_train_both").notes)


def test_class5_no_toll_where_only_the_drained_copies_were_tolled() -> None:
    """``serve_graph_drain_after_copies`` (copy costs only, on the worker; delta -1 us): with
    three main-thread calls a step the gap model's constants are not identified apart from the
    growth in proportion to the gaps (32 us before and after each graph launch whose gaps
    shrank 4-16 us). A path's gap toll is at most the median growth of the gaps beside its
    calls: no toll."""
    r = _report("serve_graph_drain_after_copies")
    assert "launch_toll" not in _att(r)


# ------------------------------------------- a GPU-bound loop's counterfactual (the queue floor)


@pytest.mark.parametrize("pair", ["tv_train_settled_both", "tv_train_settled_after"])
def test_a_gpu_bound_loop_replayed_without_its_cc_costs_is_not_faster_than_its_gpu(
    pair: str,
) -> None:
    """A training loop that never synchronizes, in its steady state (baseline steps 25.9 ms for
    25.3 ms of GPU work: the host is held back by CUDA's queue). Replayed without its blocking
    copies and tolls, the treatment's host ran ahead without bound: 22.0 ms a step (settled_both)
    and 16.0 ms (settled_after), below the GPU's own busy time. Now within 7 % of the baseline."""
    rp = _report(pair).partition.replay
    assert rp is not None
    assert abs(rp.replayed_without_all_ns_per_step / rp.baseline_ns_per_step - 1) <= 0.07


def test_a_gpu_bound_loop_whose_gpu_lags_its_host_keeps_the_work_its_block_launched() -> None:
    """HELD-OUT-32's ConvNeXt-Tiny training, the launch toll alone (5.0 ms spun a step, hidden
    behind a GPU-bound 54.6 ms step: truth -23 µs, CI -110 to 19). The replayed block kept only
    the GPU rows that *started* inside it; the host runs about 1.5 steps ahead of the GPU, so
    the block's last launches were cut and the floor held 50.4 ms of GPU work a step for 53.5
    launched: ccdiag put 4.21 ms a step on the toll and -4.24 ms unattributed. Then the floor at
    the GPU's busy time alone (the baseline's GPU is busy 97.9 % of its steps) left 1.13 ms. The
    treatment without the toll now replays to the baseline's step within 0.5 %."""
    r = _report("tv_train_convnext_launch")
    rp = r.partition.replay
    assert rp is not None
    assert abs(rp.replayed_without_all_ns_per_step / rp.baseline_ns_per_step - 1) <= 0.005
    assert abs(_att(r).get("launch_toll", 0)) <= 200_000  # the truth's CI: -110 to 19 µs


def test_a_block_holds_every_gpu_row_its_calls_launched() -> None:
    """The same loop's treatment, a block of its steps: every GPU row launched by a call inside
    the block is in the model, also those that start after the block's end."""
    from ccdiag import replay as rpl

    t = _load("tv_train_convnext_launch", "treatment")
    ev = t.events.with_row_index("_row")
    w = t.events.filter(pl.col("name").str.starts_with("ProfilerStep#")).sort("start_ns")
    span = (int(w["start_ns"][10]), int((w["start_ns"] + w["dur_ns"])[14]) + 1)
    block = rpl._block_events(ev, span)
    inside = ev.filter(pl.col("start_ns").is_between(span[0], span[1], closed="left"))
    keys = ["rank", "pid", "correlation"]
    calls = inside.filter(pl.col("kind").is_in(["runtime", "driver"])).select(keys)
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "collective", "memcpy", "memset"]))
    launched = gpu.join(calls.unique(), on=keys, how="semi")
    late = launched.filter(pl.col("start_ns") >= span[1])
    assert late.height > 100  # the GPU lags: the block's last launches run after it
    assert launched.join(block.select("_row"), on="_row", how="anti").height == 0


def test_only_a_steady_state_baseline_counts_as_gpu_bound() -> None:
    """The floor needs a baseline whose steps match its GPU work; the unsettled captures (blocks
    that start from an empty queue: the host 2 steps ahead of the GPU by the block's end) and
    loops that wait for their GPU every step are not GPU-bound."""
    from ccdiag.shapley import gpu_bound

    def bound(p: str) -> bool:
        return gpu_bound(api.pair(_load(p, "baseline"), _load(p, "treatment")).baseline)

    assert bound("tv_train_settled_both") and bound("tv_train_settled_copies")
    assert not bound("tv_train_both") and not bound("tv_train_copies")
    assert not bound("serve_graph_sync") and not bound("hf_generate_llama")


@pytest.mark.parametrize("pair", ["hf_generate_gpt2_nsys", "hf_generate_llama", "tv_train_after"])
def test_the_launch_finding_says_what_its_removal_takes(pair: str) -> None:
    """LA01's text gave the gap model's per-call constants as "paid": on GPT-2 under nsys
    (launches back to back) 65.7 µs per runtime launch and 35.1 ms/step against a 19.5 ms delta,
    while the removal took 18.4 ms. The text now says the removal's amount, the report's
    ``paid_ns_per_step``."""
    import re

    from ccdiag.units import duration

    r = _report(pair)
    a = next(x for x in r.attribution if x.mechanism == "launch_toll")
    m = re.search(r"launches/step, (.+?)/step paid on", a.summary)
    assert m is not None and a.paid_ns_per_step is not None
    assert m.group(1) == duration(a.paid_ns_per_step)


@pytest.mark.parametrize(
    ("pair", "before"),
    [("hf_generate_gptneo_after", 0.14), ("hf_generate_gptj_launch", 0.22)],
)
def test_class1_cpu_ops_that_grew_with_the_toll_leave_it_its_side_effect(
    pair: str, before: float
) -> None:
    """The toll alone (HF ``generate()``, Kineto; GPT-Neo with the toll spun after each launch,
    GPT-J before it). The cpu_ops without CUDA calls run between the tolled launches and grew
    with them (1.055x, 1.063x), which once counted as "host code got slower", so the host gaps
    beside the tolled launches (+7.1 %, +9.0 %) were neither LA01's side effect nor HS01's
    (under its floor for gaps beside explaining calls): ``before`` of the delta unattributed. The
    gaps beside no explaining call did not grow (-0.5 %, +4.7 %), so nothing away from the toll
    says host code got slower."""
    r = _report(pair)
    assert abs(r.unattributed_share) <= 0.10, (r.unattributed_share, before)
    assert abs(_share(r, "host_slowdown")) < 0.03
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll")
    assert toll.evidence["host_side_effect"]["ns_per_step"] > 0


@pytest.mark.parametrize(
    "pair", ["serve_graph_drain", "serve_graph_drain_after_both", "serve_graph_gpu_launch"]
)
def test_the_measured_treatment_replays_as_measured_when_a_sync_waits_for_part_of_the_work(
    pair: str,
) -> None:
    """A drain worker's ``cudaEventSynchronize`` (and a side stream's event wait) returns while
    the main thread's next graph still runs: it waited for its own copy, not for every row
    queued before it. The replay made every sync wait for all of it, and the measured treatment
    replayed 1.7-1.9x too long (serve_graph_drain 1,765 us for 1,018; HELD-OUT-20's
    drain_after_both 1,859 for 966; HELD-OUT-19's graph loop 1,426 for 1,292). A sync that
    returned before the work queued before it ended now waits, in the attribution's replays,
    for the latest row that had ended when it returned (``ccdiag.replay._sync_targets``)."""
    rp = _report(pair).partition.replay
    assert rp is not None
    assert rp.replayed_treatment_ns_per_step == pytest.approx(
        rp.measured_treatment_ns_per_step, rel=0.005
    )


def test_a_sync_waits_for_the_latest_row_that_had_ended_when_it_returned() -> None:
    from ccdiag.replay import _sync_targets

    sync = np.array([False, False, True, True, True])
    e = np.array([10, 20, 300, 90, 1_000])  # call ends
    ci = np.array([0, 1, 1])  # GPU rows launched by calls 0, 1, 1
    ge = np.array([100, 250, 900])  # their ends
    ready = np.array([-1, 100, 900, 900, 900])  # latest end of the work queued before each call
    out = _sync_targets(sync, e, ci, ge, ready)
    # call 2 returned at 300 with row 2 (ends 900) still running: it waited for row 1 (250);
    # call 3 returned at 90 before any row ended: it waited for none; call 4 waited for all
    assert out.tolist() == [-1, -1, 1, -2, -1]


def test_a_toll_that_took_the_place_of_a_wait_inside_the_graph_launch_is_paid() -> None:
    """serve_graph_drain_nsys_il: the graph loop with a drain worker under nsys, the toll before
    each graph launch. The shipped pair is no slower (round 0: -0.02 ms), but the toll was
    paid; a user should see it paid and hidden, not clean. A strict xfail from HELD-OUT-21's
    judgement (2026-12-05) until the worker left the main thread's timeline (2026-12-06): with
    the worker's calls interleaved into the main thread's gaps the matched growth netted to
    nothing and LA01 was clean; now 74.4 us a step is paid of the 89 spun."""
    r = _report("serve_graph_drain_nsys_il")
    paid = {a.mechanism: a.paid_ns_per_step for a in r.attribution}.get("launch_toll") or 0
    assert paid >= 0.8 * 89_000


def test_thread_roles_of_a_trace_whose_calls_neither_launch_copy_nor_sync() -> None:
    """API calls, but none that launches, copies or synchronizes (a probe of the device): no
    candidate thread, so the pair is refused with its one-line reason, not a ValueError from
    an empty concatenation (found on 2026-12-06 while adding the thread roles)."""
    from ccdiag.errors import PairMismatchError
    from ccdiag.ledger.host import thread_roles
    from ccdiag.pairing import pair_traces
    from tests.factories import rows_trace

    rows = [["runtime", "cudaGetDevice", 10 * i, 1] for i in range(5)]
    t = rows_trace(rows)
    assert thread_roles(t.events).height == 0
    with pytest.raises(PairMismatchError, match="no host thread with CUDA API calls"):
        pair_traces(t, rows_trace(rows))
