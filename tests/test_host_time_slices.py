"""A real host slowdown that comes in lost time slices (HELD-OUT-6, judged once, then opened).

``validation/hf_generate_opt_*``: Hugging Face OPT ``generate()`` on an H200 with a CPU-bound
neighbour process at nice 5 on the main thread's core (the emulator's ``cpu`` mechanism), alone
and beside the B200 launch toll, under Kineto and Nsight Systems. The neighbour takes whole time
slices: a few host gaps grow by milliseconds, most not at all. Judged once, ccdiag gave
``host_slowdown`` 0 in every pair: HS01 read the robust per-tenth slopes (median -0.02 per ns
against +0.62 overall) as work that moved within the step, and under nsys the toll's side-effect
claim gave LA01 4.6 ms/step of it. The gaps' *net* growth beyond their calls' constants holds
across the step (+0.37 per ns, median tenth +0.27), and the robust slope is a small share of it
(0.16-0.33 of the median tenth's): growth in a few gaps, not every gap stretched as a toll's side
effect stretches them (0.94-1.17 on the nsys toll-only pairs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from ccdiag.rules import _host as hs
from ccdiag.rules import _tolls as tl

from ccdiag import api
from ccdiag.ledger.align import GapModel, identified_keys
from ccdiag.ledger.control import gap_shape

VAL = Path(__file__).resolve().parents[1] / "validation"


def _pair(name: str) -> tuple[Path, Path, dict]:
    d = VAL / name
    if not (d / "ground_truth.json").exists():
        pytest.skip(f"validation/{name} not captured")
    ext = ".sqlite" if (d / "baseline.sqlite").exists() else ".json.gz"
    truth = json.loads((d / "ground_truth.json").read_text())
    return d / f"baseline{ext}", d / f"treatment{ext}", truth


def _gaps(
    h: float,
    net: float,
    windows: tuple[float, ...],
    nets: tuple[float, ...],
    bursts: tuple[float, ...] = (),
) -> GapModel:
    return GapModel(
        before={}, after={}, var={}, kept=frozenset(), h=h, h_se=0.01, n=4000,
        h_windows=windows, net=net, net_windows=nets, bursts=bursts,
    )  # fmt: skip


def test_lost_time_slices_keep_the_stretch_from_the_toll() -> None:
    # arrange: OPT under nsys beside a CPU neighbour (each step's net bursts, ms: 8 of 8 steps
    # lost slices) and the toll alone (one odd long gap in 8 steps); both stretch gaps alike
    neighbour = (9.0, 12.2, 8.1, 16.3, 12.1, 8.2, 12.4, 15.1)
    odd = (0.0, 0.0, 0.32, 0.0, 0.0, 0.0, -0.31, 0.0)
    a = _gaps(0.26, 0.25, (0.26,) * 10, (0.25,) * 10, tuple(x * 1e6 for x in neighbour))
    b = _gaps(0.31, 0.29, (0.31,) * 10, (0.29,) * 10, tuple(x * 1e6 for x in odd))
    # act
    sa, sb = hs.side_effect(a, None, tolled_share=0.9), hs.side_effect(b, None, tolled_share=0.9)
    # assert
    assert sa.lost and not sa.applies
    assert not sb.lost and sb.applies
    assert hs.slices(b)[1] < hs.SLICES_T <= hs.slices(a)[1]


def test_net_growth_across_the_step_is_slower_code_not_moved_work() -> None:
    # arrange: the Kineto pair's numbers, and tv_train_nostep's (moved work: net -0.02)
    tenths = (0.13, -0.25, -0.36, -0.01, 0.0, 0.06, -0.24, 0.12, -0.91, -0.04)
    slices = _gaps(
        0.06, 0.37, tenths, (0.85, -0.04, 0.19, 0.82, 0.04, 0.27, 0.26, 0.46, 0.65, -0.09)
    )
    moved = _gaps(
        0.22, -0.02, tenths, (-0.23, 0.31, -0.4, -0.14, 0.11, 0.93, -0.77, 0.02, 0.55, -0.02)
    )
    # act / assert
    assert hs.moved_not_slower(slices, 0.62, 0.5) is None
    assert "moved within the step" in (hs.moved_not_slower(moved, 0.40, 0.5) or "")


@pytest.mark.parametrize(
    "name, lo",
    [
        ("hf_generate_opt_cpu", 0.6),  # Kineto, neighbour only: 15.4 of 17.4 ms (-12 %)
        ("hf_generate_opt_cpuonly_nsys_il", 0.6),  # nsys, neighbour only: 7.6 of 7.9 ms
        # HELD-OUT-7 and 8 (judged once, then opened): a milder neighbour (nice 10) and a waking
        # one (nice 0, busy 1 ms of 4), found as lost time slices
        ("hf_generate_bloom_cpuonly_nsys_il", 0.85),  # 6.7 of 5.6 ms
        # Kineto: 8.2 of 8.4 ms; a 21 % false toll while a path whose 1.8 µs gap growth held
        # across the step vouched for two others' 6.7 and 5.7 µs (held in a third, a fifth)
        ("hf_generate_bloom_cpu", 0.85),
        ("hf_generate_gptj_cpu", 0.85),  # Kineto: 15.7 of 12.8 ms (+22 %; the 0 before)
        # nsys, the waking neighbour alone: its gaps and launch calls stretched x1.53-1.67 and
        # none shifted; the gap model's per-call constants read 9.2 us per runtime launch as a
        # toll (25 % launch_toll) until a stretch without a shift was host code (34.2 of 19.6 ms
        # found: the shipped round's delta is 35.0 ms)
        ("hf_generate_gptj_cpuonly_nsys_il", 0.85),
        # HELD-OUT-12 (judged once, then opened): a waking neighbour of a new shape (nice 0,
        # busy 2 ms of every 5) beside HF Phi: 16.0 of 17.8 ms (Kineto); under nsys 53.1 ms in
        # a shipped range that grew 56.3 (the pooled truth 15.8)
        ("hf_generate_phi_cpu", 0.85),
        ("hf_generate_phi_cpuonly_nsys_il", 0.85),
        # HELD-OUT-13: a waking neighbour (nice 2, 1 ms of every 3) beside HF Gemma under nsys:
        # 20.2 ms host_slowdown, 88 % of the shipped round's delta (23.0 ms) and no toll; the
        # pooled truth (44.7 ms) is twice the shipped round's
        ("hf_generate_gemma_cpuonly_nsys_il", 0.4),
    ],
)
def test_a_cpu_neighbour_alone_is_host_slowdown_and_no_toll(name: str, lo: float) -> None:
    # act
    b, t, truth = _pair(name)
    r = api.diagnose(b, t)
    att = {a.mechanism: a.ns_per_step for a in r.attribution}
    want = truth["delta_ns_per_step"]["value"]
    # assert: most of the truth found as host_slowdown, the toll not invented
    assert truth["mechanisms"] == ["host_slowdown"]
    assert att.get("host_slowdown", 0) >= lo * want
    assert att.get("launch_toll", 0) < 0.03 * r.step_ns.delta


def test_beside_the_toll_under_nsys_both_are_found_and_the_toll_claims_no_slices() -> None:
    # act
    b, t, truth = _pair("hf_generate_opt_cpu_nsys_il")
    r = api.diagnose(b, t)
    att = {a.mechanism: a.ns_per_step for a in r.attribution}
    sh = {
        m: v["value"] / truth["delta_ns_per_step"]["value"]
        for m, v in truth["shapley_ns_per_step"].items()
    }
    # assert: each mechanism's share of the delta within 15 points of its Shapley share (the
    # shipped round-0 ranges grew 24 ms against a pooled truth of 13.3, so shares, not ms); the
    # lost time slices are HS01's, out of the gap model LA01's side-effect claim reads
    hs01 = next(a for a in r.attribution if a.mechanism == "host_slowdown").evidence
    assert hs01["lost_time_slices"]["steps_with_bursts"] == "8 of 8"
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll").evidence
    side = toll.get("host_side_effect", {}).get("ns_per_step", 0)
    assert side < 0.5 * hs01["lost_time_slices"]["ns_per_step"]
    for m in ("launch_toll", "host_slowdown"):
        assert abs(att.get(m, 0) / r.step_ns.delta - sh[m]) <= 0.15, (m, att, sh)


def test_slices_found_in_few_steps_do_not_give_the_tolls_stretch_to_host_code() -> None:
    """HELD-OUT-8 (judged once, then opened): GPT-J's toll alone under nsys. Its steps' bursts
    came to 0.2 ms/step at t 2.03 (just over ``SLICES_T``), and as judged they kept the gaps'
    1.21x stretch, the toll's side effect, from LA01: 26 % false ``host_slowdown``. Slices
    that are not a material share of the gaps' growth (``LOST_SHARE``) no longer do: 1 %."""
    b, t, truth = _pair("hf_generate_gptj_nsys_il")
    r = api.diagnose(b, t)
    att = {a.mechanism: a.ns_per_step for a in r.attribution}
    assert truth["mechanisms"] == ["launch_toll"]
    assert att.get("host_slowdown", 0) < 0.03 * r.partition.total_ns_per_step


def test_a_toll_alone_under_kineto_gets_no_host_slowdown() -> None:
    """HELD-OUT-8 (judged once): GPT-J's toll alone under Kineto got 13 % host_slowdown (2.3
    ms/step, a strict xfail until then). With constants only for the kernel keys the gaps
    identify (``ledger.align.identified_keys``), the toll's constants take that growth: < 3 %."""
    b, t, _ = _pair("hf_generate_gptj_launch")
    r = api.diagnose(b, t)
    att = {a.mechanism: a.ns_per_step for a in r.attribution}
    assert att.get("host_slowdown", 0) < 0.03 * r.partition.total_ns_per_step


def _matched(d_gap: list[list[float]], d_dur: list[list[float]] | None = None) -> pl.DataFrame:
    """A matched-call frame of one rank: one row per (step, gap) with d_gap (ns), launch calls."""
    rows = []
    for idx, gaps in enumerate(d_gap):
        for k, g in enumerate(gaps):
            dd = d_dur[idx][k] if d_dur else 0.0
            rows.append({"rank": 0, "idx": idx, "b_k": k, "t_ev_row": 100 * idx + k,
                         "d_gap": g, "d_dur": dd, "cls": "launch"})  # fmt: skip
    return pl.DataFrame(rows)


def test_excursions_take_a_tolls_steady_growth_out_and_count_the_baselines_bursts() -> None:
    from ccdiag.ledger.align import BURST_NS, excursions

    toll = 12_000.0  # every gap, every step: the median takes it
    lost = [[toll] * 5 for _ in range(6)]
    lost[1][2] += 2e6  # the treatment lost a 2 ms slice in step 1, gap 2
    lost[4][0] += 1e6  # and 1 ms in step 4
    lost[3][4] -= 1.5e6  # the baseline lost one in step 3: negative
    exc, per_step, rows = excursions(_matched(lost))
    assert per_step == (0.0, 2e6, 0.0, -1.5e6, 1e6, 0.0)
    assert rows is not None and rows.height == 3 and int((exc != 0).sum()) == 3
    # growth below the burst size, or a burst inside a call, and too few steps
    small = [[toll + (BURST_NS - 1 if i == 2 else 0)] * 3 for i in range(4)]
    assert excursions(_matched(small))[1] == (0.0,) * 4
    calls = excursions(_matched([[0.0] * 3] * 4, [[0.0, 5e5, 0.0]] + [[0.0] * 3] * 3))
    assert calls[1] == (5e5, 0.0, 0.0, 0.0) and calls[0].sum() == 0  # not a gap's burst
    assert excursions(_matched(lost[:2]))[1] == ()


def test_lost_slices_need_steps_that_lose_them_more_than_noise() -> None:
    import numpy as np

    recurring = _gaps(0.0, 0.0, (), (), tuple(x * 1e6 for x in (3.1, 4.2, 0.0, 3.9, 5.0, 2.8)))
    once = _gaps(0.0, 0.0, (), (), tuple(x * 1e6 for x in (10.5, 0.0, 0.0, 0.0, 0.6, -0.5)))
    mean, t = hs.slices(recurring)
    assert np.isclose(mean, 3.1667e6, rtol=1e-3) and t >= hs.SLICES_T
    assert hs.slices(once)[1] < hs.SLICES_T


def _launches(b_gap: list[float], t_gap: list[float], path: str = "runtime") -> pl.DataFrame:
    n = len(b_gap)
    return pl.DataFrame(
        {
            "cls": ["launch"] * n, "path": [path] * n,
            "b_gap": b_gap, "t_gap": t_gap, "b_gap_after": b_gap, "t_gap_after": t_gap,
        }
    )  # fmt: skip


def test_gap_shape_tells_a_shift_from_a_stretch() -> None:
    # arrange: 200 launches whose gaps before (and after) span 5-45 us
    b = [5_000.0 + 200.0 * i for i in range(200)]
    toll = _launches(b, [x + 12_250.0 for x in b])  # an emulator's toll spun beside each call
    stretch = _launches(b, [x * 1.6 for x in b])  # a CPU-bound neighbour
    both = _launches(b, [x * 1.6 + 12_250.0 for x in b])
    few = _launches(b[:10], [x * 1.6 for x in b[:10]])  # CUDA-graph steps: too few launches
    # act
    st, ss, sb, sf = (gap_shape(m) for m in (toll, stretch, both, few))
    # assert
    assert abs(st["shift_ns"] - 12_250) < 100 and abs(st["scale"] - 1.0) < 0.01
    assert abs(ss["shift_ns"]) < 100 and abs(ss["scale"] - 1.6) < 0.01
    assert abs(sb["shift_ns"] - 12_250) < 100 and abs(sb["scale"] - 1.6) < 0.01
    assert sf["shift_ns"] is None
    assert ss["shift_ns"] < tl.MIN_TOLL_NS <= st["shift_ns"]


def _seq(keys: list[str], steps: int = 4) -> pl.DataFrame:
    """Matched gaps of ``steps`` steps that each run the calls ``keys`` in order."""
    k = keys * steps
    prev = [("start" if i % len(keys) == 0 else keys[i % len(keys) - 1]) for i in range(len(k))]
    return pl.DataFrame({"key": k, "prev_key": prev})


def test_only_fine_keys_the_gaps_identify_keep_constants_of_their_own() -> None:
    # arrange: runtime kernel a always between b and c: the gaps (b, a) and (a, c) only see
    # before[a] + after[b] and before[c] + after[a], so a's before + after trades freely with
    # its neighbours'; a key seen after two different calls and before two is pinned down
    chain = _seq(["runtime:b", "runtime:a", "library:c", "runtime:d"])
    fine = frozenset({"runtime:a", "runtime:b", "library:c", "runtime:d"})
    mixed = _seq(["runtime:a", "library:c", "runtime:a", "runtime:d", "library:c", "runtime:d"])
    # act
    left_chain = identified_keys(chain, fine)
    left_mixed = identified_keys(mixed, frozenset({"runtime:a", "library:c", "runtime:d"}))
    # assert: the chain's kernels fall back to their paths; the mixed sequence's are kept
    assert left_chain < fine
    assert left_mixed == frozenset({"runtime:a", "library:c", "runtime:d"})


PHI_NSYS = (
    "a miss, not a pass (HELD-OUT-12, judged once): 24.0 ms/step paid for 10.2 injected; the "
    "shipped round-0 range grew 32.0 ms (the six rounds' median 15.5): its host gaps stretched "
    "1.7-1.8x besides shifting 11-12 us, and without a cpu_op control under nsys the stretch "
    "beside tolled launches is read as the toll's side effect (library launches, untolled, pay "
    "12 us each in that reading)"
)


def _round0_miss(name: str, paid: float, injected: float, grew: float, pooled: float) -> Any:
    """A pair of the toll-paid test that misses as Phi's did (a strict xfail), ms per step."""
    reason = (
        "a miss, not a pass (HELD-OUT-13, judged once; the engine before its two changes gave "
        f"the same): {paid} ms/step paid for {injected} injected, the class of Phi's: the "
        f"shipped round-0 ranges grew {grew} ms, the rounds' pooled truth {pooled} ms, and the "
        "extra host time of that round beside the tolled launches is read as the toll's"
    )
    return pytest.param(name, 0.8, 1.3, marks=pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize(
    "name, lo, hi",
    [
        # HELD-OUT-10 (judged once, then opened): Mistral beside the waking neighbour, where the
        # toll was lost (0 and 0.1 ms/step of a 14.26 ms/step toll) while unidentified kernel
        # keys took -178 to -263 us per library launch
        ("hf_generate_mistral_both", 0.8, 1.3),
        ("hf_generate_mistral_cpu_nsys_il", 0.8, 1.3),
        ("hf_generate_mistral_nsys_il", 0.8, 1.3),  # the toll alone: 21.0 ms paid before
        # HELD-OUT-12 (judged once, then opened): HF Phi beside a waking neighbour (nice 0, 2 ms
        # of every 5), 13.56 and 15.99 ms/step paid with the engine before identified_keys;
        # HF Falcon's toll spun after each launch (17.75 before) and under nsys
        ("hf_generate_phi_both", 0.8, 1.3),
        ("hf_generate_phi_cpu_nsys_il", 0.8, 1.3),
        ("hf_generate_phi_launch", 0.8, 1.3),
        ("hf_generate_falcon", 0.8, 1.3),
        ("hf_generate_falcon_after", 0.8, 1.3),
        ("hf_generate_falcon_nsys_il", 0.8, 1.3),
        pytest.param(
            "hf_generate_phi_nsys_il",
            0.8,
            1.3,
            marks=pytest.mark.xfail(strict=True, reason=PHI_NSYS),
        ),
        # HELD-OUT-13 (judged once, then opened): HF Gemma beside a waking neighbour (nice 2,
        # 1 ms of every 3) under nsys, HF StarCoder2's toll before and after each launch
        ("hf_generate_gemma_cpu_nsys_il", 0.8, 1.3),  # 13.00 ms for 14.95
        ("hf_generate_starcoder2", 0.8, 1.3),  # 11.71 for 10.78
        ("hf_generate_starcoder2_after", 0.8, 1.3),  # 11.40 for 10.78
        _round0_miss("hf_generate_gemma_nsys_il", 32.75, 14.95, 42.3, 17.6),
        _round0_miss("hf_generate_starcoder2_nsys_il", 18.65, 10.78, 25.3, 10.8),
        # HELD-OUT-14 (judged once, then opened): HF GPT-Neo and StableLM, the toll before and
        # after each launch (Kineto) and before it under nsys
        ("hf_generate_gptneo", 0.8, 1.3),  # 8.38 ms for 8.09
        ("hf_generate_gptneo_after", 0.8, 1.3),  # 8.10 for 8.09
        ("hf_generate_gptneo_nsys_il", 0.8, 1.3),  # 7.48 for 8.09
        ("hf_generate_stablelm", 0.8, 1.3),  # 12.68 for 11.59
        ("hf_generate_stablelm_after", 0.8, 1.3),  # 12.18 for 11.59
        ("hf_generate_stablelm_nsys_il", 0.8, 1.3),  # 9.74 for 11.59
        # HELD-OUT-17 (judged once on an H100, then opened): HF Granite and Qwen3
        ("hf_generate_granite_after", 0.8, 1.3),  # 17.63 ms for 14.95
        ("hf_generate_granite_nsys_il", 0.8, 1.3),  # 13.31 for 14.95
        ("hf_generate_qwen3_after", 0.8, 1.3),  # 19.18 for 17.79
        ("hf_generate_qwen3_nsys_il", 0.8, 1.3),  # 17.46 for 17.79
        pytest.param(
            "hf_generate_granite_cpu_nsys_il",
            0.8,
            1.3,
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a miss, not a pass (HELD-OUT-17, judged once): 11.91 ms/step paid for 14.95 "
                    "injected (0.797x) beside the waking neighbour; its Shapley value is right (-5 %)"
                ),
            ),
        ),
        pytest.param(
            "hf_generate_qwen3",
            0.8,
            1.3,
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a miss, not a pass (HELD-OUT-17, judged once): 31.34 ms/step paid for 17.79 "
                    "injected (1.76x, 19.1 us per tolled runtime launch); the session's own step "
                    "delta for the toll alone is 31.1 ms [6.5, 46.6]: the spun toll cost this H100 "
                    "host more than itself, so the paid cost is right about the step and not about "
                    "the shim's count"
                ),
            ),
        ),
        # HELD-OUT-18 (judged once on an H100, then opened): torchvision loops, pinned loaders
        ("tv_train_regnet_launch", 0.8, 1.3),  # 5.95 for 5.48
        ("tv_eval_shufflenet_launch", 0.8, 1.3),  # 1.66 for 1.32, the toll after the call
        pytest.param(
            "tv_train_regnet_both",
            0.8,
            1.3,
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a miss, not a pass (HELD-OUT-18, judged once): beside the blocking copies the "
                    "toll is paid 26.3 us per tolled launch (11.86 ms/step for 5.48 injected, 2.16x): "
                    "the host code's own 1.3x slowdown in that session went into the per-launch "
                    "constants and HS01's slope came out negative (-0.141, z -17.4), where the toll "
                    "alone (tv_train_regnet_launch) paid 13.2 us and left the slowdown to HS01"
                ),
            ),
        ),
        pytest.param(
            "tv_eval_shufflenet_both",
            0.8,
            1.3,
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "a miss, not a pass (HELD-OUT-18, judged once): 1.98 ms/step paid for 1.32 "
                    "injected (1.50x) with the toll after the call beside blocking copies whose "
                    "padding is on the GPU; alone the same toll is paid 1.66 ms (1.26x)"
                ),
            ),
        ),
    ],
)
def test_the_toll_paid_beside_a_neighbour_is_what_was_injected(
    name: str, lo: float, hi: float
) -> None:
    # act
    b, t, truth = _pair(name)
    r = api.diagnose(b, t)
    toll = next((a for a in r.attribution if a.mechanism == "launch_toll"), None)
    # assert: the toll is found and what its launches paid is the shim's exact count
    assert toll is not None
    paid = float(toll.paid_ns_per_step or 0)
    injected = float(truth["injected_ns_per_step"]["launch_toll"])
    assert lo * injected <= paid <= hi * injected, (paid, injected)
