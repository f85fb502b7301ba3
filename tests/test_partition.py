"""The partition's reconciliation on the means, and the samples the engine fixes were made for."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from ccdiag import api
from ccdiag.engine import UNATTRIBUTED, _claim_pass
from ccdiag.ledger import host as hc
from ccdiag.ledger import vocab as vc

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def test_noise_in_a_claimed_category_averages_out() -> None:
    # arrange: a category whose growth is noise around zero (+500 / -500 us), claimed whole by one
    # mechanism; per step only the positive steps can be given, which alone would average +250 us
    d = np.array([500_000.0, -500_000.0] * 10)
    led = pl.DataFrame({"rank": [0] * 20, "idx": list(range(20)), "d_gpu_collective": d})
    ctx = SimpleNamespace(categories=("gpu_collective",))
    claims = {("encrypted_collectives", "gpu_collective"): np.clip(d, 0, None)}
    keep = np.ones(20, dtype=bool)
    # act
    parts = _claim_pass(ctx, ["encrypted_collectives"], claims, led, keep)  # type: ignore[arg-type]
    # assert: nothing on average, and every step still adds up
    got = parts["encrypted_collectives"].total(20)
    assert got.mean() == pytest.approx(0.0, abs=1.0)
    assert np.allclose(got + parts[UNATTRIBUTED].total(20), d)


def test_real_growth_under_noise_is_kept() -> None:
    # arrange: +200 us of real growth under +-500 us of noise
    d = np.array([700_000.0, -300_000.0] * 10)
    led = pl.DataFrame({"rank": [0] * 20, "idx": list(range(20)), "d_gpu_collective": d})
    ctx = SimpleNamespace(categories=("gpu_collective",))
    claims = {("encrypted_collectives", "gpu_collective"): np.clip(d, 0, None)}
    # act
    parts = _claim_pass(ctx, ["encrypted_collectives"], claims, led, np.ones(20, dtype=bool))  # type: ignore[arg-type]
    # assert
    assert parts["encrypted_collectives"].total(20).mean() == pytest.approx(200_000.0, rel=1e-6)


def test_async_device_copy_is_a_submission_not_a_host_copy() -> None:
    # arrange: DDP's gradient-bucket copies (cudaMemcpyAsync, device to device)
    ev = api.load_trace(SAMPLES / "ddp_2gpu" / "baseline").events
    threads = hc.main_threads(ev)
    windows = api.load_trace(SAMPLES / "ddp_2gpu" / "baseline").steps.select(
        "rank", "step", "start_ns", "end_ns"
    )
    # act
    calls = hc.host_calls(ev, windows, threads)
    copies = calls.filter(vc.base_name() == "cudaMemcpyAsync")
    # assert: the H2D input copy stays a copy; the device copies are launch-class submissions
    host = copies.filter(vc.is_host_copy().fill_null(False))
    assert host.height > 0 and (host["cls"] == "copy").all()
    assert (copies.filter(~vc.is_host_copy().fill_null(True))["cls"] == "launch").all()


def test_nsys_decode_toll_per_launch_is_the_injected_one_and_its_side_effect_is_the_tolls() -> None:
    """decode_eager_nsys: the eager decode under Nsight Systems; cuKernelGetName precedes every
    launch. The toll is measured per launch path: the runtime launches pay it, the cuBLAS
    launches (+1.3 µs per call, below any published CC toll) do not, and the per-call toll read
    off the matched gaps is the injected 12.25 µs. The host gaps beside the tolled launches also
    grew 1.68x with their length, and an nsys trace has no cpu_ops to say that host code outside
    CUDA calls got slower: that growth is the toll's side effect (LA01 claims it and says so),
    not host_slowdown. (This test asked for host_slowdown with low confidence until nsys truths
    pooled over interleaved ranges, HELD-OUT-5, showed the toll itself lengthening the host
    under nsys: T5 +26.7 ms and Llama +25.9 ms per step against 15.3 and 11.3 ms injected.)"""
    d = SAMPLES / "decode_eager_nsys"
    truth = json.loads((SAMPLES / "decode_eager" / "ground_truth.json").read_text())
    per_call = truth["platform"]["launch_toll"]["value"]
    # act
    r = api.diagnose(d / "baseline.sqlite", d / "treatment.sqlite")
    # assert
    got = {a.mechanism: a for a in r.attribution}
    la = got["launch_toll"]
    runtime = next(p for p in la.evidence["paths"] if p["path"] == "runtime")
    assert abs(runtime["gap_ns"] - per_call) <= 0.15 * per_call
    # the launch call itself grew under nsys as much on the untolled cuBLAS launches
    library = next(p for p in la.evidence["paths"] if p["path"] == "library")
    assert runtime["in_call_ns"] <= library["in_call_ns"] + 500
    assert "library" not in la.evidence["tolled_paths"]  # cuBLAS: untolled
    assert la.method == "replay_shapley"
    assert la.evidence["host_side_effect"]["ns_per_step"] > 0
    assert "host_slowdown" not in got
    assert la.share >= 0.85 and abs(r.unattributed_share) <= 0.10
    assert r.partition is not None and r.partition.replay is not None


def _parts(**cats: list[float]) -> dict:
    from ccdiag.engine import _Parts

    return {"serialized_copies": _Parts({k: np.array(v) for k, v in cats.items()}),
            "blocked_non_blocking": _Parts({}), UNATTRIBUTED: _Parts({})}  # fmt: skip


def _finding(ns: list[float], category: str = "copy_api", partner: str = "serialized_copies"):
    from ccdiag.rules._base import Finding, Interaction

    frame = pl.DataFrame({"rank": [0] * len(ns), "idx": list(range(len(ns))), "ns": ns},
                         schema={"rank": pl.Int32, "idx": pl.Int64, "ns": pl.Float64})  # fmt: skip
    it = Interaction(partner, category, frame, 0.5, "test")
    return Finding("CP02", "blocked_non_blocking", pl.DataFrame(), "", {}, "high", {}, (it,))


def test_interaction_moves_half_never_more_than_the_partner_holds() -> None:
    from ccdiag.engine import _interaction_pass, shared_part

    # arrange: the partner holds 100, 10, 0 in copy_api; the interaction is 60 in every step
    parts = _parts(copy_api=[100.0, 10.0, 0.0])
    keys = pl.DataFrame({"rank": [0, 0, 0], "idx": [0, 1, 2]},
                        schema={"rank": pl.Int32, "idx": pl.Int64})  # fmt: skip
    before = sum(p.total(3) for p in parts.values())
    # act
    _interaction_pass([_finding([60.0, 60.0, 60.0])], parts, keys)
    # assert: half of min(interaction, held) moved; the sum over mechanisms unchanged
    moved = parts["blocked_non_blocking"].parts[shared_part("copy_api", "serialized_copies")]
    assert moved.tolist() == [30.0, 5.0, 0.0]
    assert parts["serialized_copies"].parts["copy_api"].tolist() == [70.0, 5.0, 0.0]
    assert np.array_equal(sum(p.total(3) for p in parts.values()), before)


def test_interaction_with_an_absent_partner_or_category_moves_nothing() -> None:
    from ccdiag.engine import _interaction_pass

    parts = _parts(copy_api=[100.0])
    keys = pl.DataFrame({"rank": [0], "idx": [0]}, schema={"rank": pl.Int32, "idx": pl.Int64})
    _interaction_pass([_finding([60.0], partner="launch_toll")], parts, keys)
    _interaction_pass([_finding([60.0], category="gpu_copy")], parts, keys)
    assert parts["serialized_copies"].parts["copy_api"].tolist() == [100.0]
    assert parts["blocked_non_blocking"].total(1).tolist() == [0.0]


def _pair(name: str) -> tuple[Path, Path]:
    return tuple(SAMPLES / name / f"{s}.json.gz" for s in ("baseline", "treatment"))  # type: ignore[return-value]


def test_blocked_copy_padding_is_shared_where_the_baseline_host_had_slack() -> None:
    """kv_offload (real H200, emulated B200 copies): the baseline's host waited ~0.4 ms/step for
    the GPU, so padding an async copy would have hidden under queued work; once the copy blocks
    first it cannot. The truth's Shapley split is 1,758 / 282 µs (README): the replay's Shapley
    values must land within 15 % of both, the interaction (what the two cost together beyond
    their costs alone) split between them, and the partition must stay exact."""
    r = api.diagnose(*_pair("kv_offload"))
    att = {a.mechanism: a for a in r.attribution}
    cp01, cp02 = att["serialized_copies"], att["blocked_non_blocking"]
    assert cp01.method == cp02.method == "replay_shapley"
    assert abs(cp01.ns_per_step - 1_758_000) < 0.15 * 1_758_000
    assert abs(cp02.ns_per_step - 282_100) < 0.15 * 282_100
    # the two interact (together less than the sum alone): the same share taken from each
    assert cp02.parts["interactions"] < -20_000
    assert cp01.parts["interactions"] == pytest.approx(cp02.parts["interactions"], abs=2)
    scaled = [n for n in r.notes if n.startswith("replay: removing every fired mechanism")]
    for a in (cp01, cp02):
        assert a.parts["alone"] + a.parts["interactions"] == a.ns_per_step
        if not scaled:  # else parts are the replay's values scaled to the measured delta
            assert a.alone_ns_per_step == a.parts["alone"]
    total = sum(a.ns_per_step for a in r.attribution) + r.unattributed_ns_per_step
    assert total == r.partition.total_ns_per_step


def test_no_sharing_without_baseline_slack_or_when_copies_blocked_already() -> None:
    """async_readback: the baseline host never waited for the GPU (host-bound), so the padding
    was exposed either way; decode_eager: the readback blocked in the baseline too: the two
    copy mechanisms barely interact (< 1 % of the delta)."""
    for name in ("async_readback", "decode_eager"):
        r = api.diagnose(*_pair(name))
        att = {a.mechanism: a for a in r.attribution}
        bound = 0.01 * r.partition.total_ns_per_step
        assert abs(att["blocked_non_blocking"].parts.get("interactions", 0)) <= bound, name


@pytest.mark.xfail(
    strict=True,
    reason="a miss, not a pass: rank 0's replay gives the toll 0.59 ms/step, just above the "
    "truth's CI (0.06-0.58 ms); rank 1's replay saves 7.49 of the 8.78 ms/step delta, so its "
    "ledger partition is reported and the job's 0.33 ms/step (inside the CI) is the mean of a "
    "replay and a ledger value, not the replay's. See the README accuracy section",
)
def test_a_launch_toll_under_slower_collectives_is_what_the_replay_says() -> None:
    """ddp_2gpu_ctas2 (real 2xH200, NCCL capped at 2 CTAs, B200 launch toll): the truth (one
    session, per rank) says the toll alone adds 0.32 ms/step (95 % CI 0.06 - 0.58 ms) and the
    mechanisms add up (residual -0 %): the slowed all-reduces do not hide the toll, since the
    first bucket's gradients come later when the host launches slower. The critical-path
    ledger gave it ~0 (the first version asserted that); the counterfactual replay, with the GPU
    rows that waited on another stream anchored to what they waited for, gives it its cost, and
    the report says where replay and ledger disagree."""
    pair = tuple(SAMPLES / "ddp_2gpu_ctas2" / s for s in ("baseline", "treatment"))
    r = api.diagnose(*pair)
    att = {a.mechanism: a for a in r.attribution}
    truths = [json.loads((SAMPLES / "ddp_2gpu_ctas2" / f"ground_truth.rank{k}.json").read_text())
              for k in (0, 1)]  # fmt: skip
    lo = np.mean([t["impact_ns_per_step"]["launch_toll"]["ci95"][0] for t in truths])
    hi = np.mean([t["impact_ns_per_step"]["launch_toll"]["ci95"][1] for t in truths])
    assert att["launch_toll"].method == "replay_shapley"
    assert lo <= att["launch_toll"].ns_per_step <= hi
    assert any(n.startswith("launch_toll: replay attributes") for n in r.notes)


def test_a_cpu_neighbour_is_host_slowdown_found_as_lost_time_slices() -> None:
    """decode_eager_cpu (real H200): the B200 launch toll plus a CPU-bound neighbour on the main
    thread's core. Measured alone the neighbour adds 7.96 ms/step and the toll 1.84 ms, together
    6.03 ms (the README's table judges the split). HS01 leads, from the host gaps that lost
    whole time slices (bursts of 300 µs or more beyond the same gap in the other steps, in 24
    of 29 steps), with the cpu_op control beside it (medium confidence). Known miss: HS01 gets
    3.63 of the truth's 6.08 ms (Shapley), −40 %."""
    r = api.diagnose(*_pair("decode_eager_cpu"))
    att = {a.mechanism: a for a in r.attribution}
    host = att["host_slowdown"]
    assert r.attribution[0].mechanism == "host_slowdown" and host.confidence == "medium"
    lost = host.evidence["lost_time_slices"]
    assert lost["t"] >= 2.0 and lost["bursts"] >= 20
    assert host.evidence["cpu_op_control"]["mean_ratio"] > 1.4
    truth = json.loads((SAMPLES / "decode_eager_cpu" / "ground_truth.json").read_text())
    assert truth["cpu_neighbour"]["nice"] == 5 and "host_slowdown" in truth["mechanisms"]


@pytest.mark.xfail(
    strict=True,
    reason="a miss, not a pass: launch_toll 1.92 ms/step (32 % of the delta; 1.58 ms paid) "
    "against a Shapley truth of -0.05 ms (the toll alone: 1.84): once the lost time slices are "
    "out of the gap model, the neighbour's stretch of the short gaps before launches reads as a "
    "per-launch constant (was 0 while the bursts inflated the gaps' slope); since 2026-12-05 the "
    "neighbour's share of that false toll's CPU time adds 0.34 ms (27 % before)",
)
def test_a_cpu_neighbour_is_not_taken_for_a_launch_toll() -> None:
    r = api.diagnose(*_pair("decode_eager_cpu"))
    att = {a.mechanism: a for a in r.attribution}
    assert "launch_toll" not in att or abs(att["launch_toll"].share) < 0.03


def test_a_cpu_neighbour_leaves_at_most_a_quarter_unattributed() -> None:
    """Was a known miss (28 % unattributed) until the lost time slices were claimed: 12 %."""
    r = api.diagnose(*_pair("decode_eager_cpu"))
    assert abs(r.unattributed_share) < 0.25


def test_a_graphs_kernel_spacing_survives_the_replay() -> None:
    # arrange: decode_graph (own capture, emulated CC: the graph-launch toll spun in the gap
    # before cudaGraphLaunch, the readback blocked in the gap after the copy). Its graph runs 186
    # kernels ~0.5 us apart (87 us of GPU idle inside every replay of the graph); a replay that
    # packed them back to back finished the GPU 77 us early once the readback stopped blocking,
    # removing every mechanism saved 210 us/step of a 141 us delta, and every Shapley value was
    # scaled by 0.67 (launch_toll 54 us of a ~96 us truth, blocked_non_blocking 75 of ~25-34 us)
    # act
    rep = api.diagnose(*_pair("decode_graph"))
    # assert: removing all leaves a step no faster than the baseline (within 5 %), no overshoot
    # note, and the graph-launch toll gets most of what it costs alone (truth 95.6 us, CI 85.6-100.3)
    chk = rep.partition.replay
    assert chk is not None
    assert chk.replayed_without_all_ns_per_step >= 0.95 * chk.baseline_ns_per_step
    assert not [n for n in rep.notes if "scaled by" in n]
    got = {a.mechanism: a.ns_per_step for a in rep.attribution}
    assert 70_000 <= got["launch_toll"] <= 110_000
    assert got["blocked_non_blocking"] <= 40_000


@pytest.mark.parametrize("name", ["tp1_decode", "decode_graph"])
def test_a_graph_launch_toll_beside_an_untolled_sync_is_removed_whole(name: str) -> None:
    """A CUDA-graph decode step is one cudaGraphLaunch and one synchronize: the gap model can
    split a toll between the two only up to its free direction, and its own choice (least size
    over all keys) put half of it on the sync (tp1_decode: before/after 59.9 / 30.2 µs on the
    graph launch, -29.7 / 30.0 µs on the sync), so removing the toll took 73 of the 90 µs each
    graph launch's gap grew and the ledger, not the replay, was reported (73.2 µs). The removal
    now keeps the keys of no fired path at ~0."""
    truth = json.loads((SAMPLES / name / "ground_truth.json").read_text())
    want = truth["impact_ns_per_step"]["launch_toll"]["value"]
    # act
    r = api.diagnose(*_pair(name))
    la = next(a for a in r.attribution if a.mechanism == "launch_toll")
    # assert: within 15 % of the truth, measured by the replay
    assert abs(la.ns_per_step - want) <= 0.15 * want, (la.ns_per_step, want)
    assert la.method == "replay_shapley"
