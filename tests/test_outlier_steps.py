"""A disturbed step does not carry the partition of a short run (``ccdiag.engine._keep_mask``).

From 10 aligned steps the partition is a trimmed mean; below that a trim drops nothing, so one
step that a preempted host made 2x slower decided a fifth of the mean. Found on real captures:
``validation/hf_generate_llama_after`` (6 steps, the sixth +36 ms against +14..20 ms, the rest of
it outside any CUDA call: 19 % unattributed) and ``hf_generate_llama_nsys`` (9 steps: a half step
and an empty last one).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ccdiag import api
from ccdiag.engine import _keep_mask

VAL = Path(__file__).resolve().parents[1] / "validation"


def test_one_far_step_of_six_is_dropped_and_near_ones_kept() -> None:
    d = np.array([14.0, 14.8, 14.6, 20.1, 16.9, 36.2]) * 1e6
    assert _keep_mask(d).tolist() == [True, True, True, True, True, False]


def test_short_or_flat_runs_keep_every_step() -> None:
    assert _keep_mask(np.array([1.0, 9.0, 1.0, 1.0])).all()  # 4 steps: too few to call one odd
    assert _keep_mask(np.full(7, 5.0)).all()  # MAD 0: nothing to compare against
    assert _keep_mask(np.array([5.0, 5.0, 5.0, 5.0, 5.0, 5.2])).all()  # MAD 0 again


def test_at_most_half_the_steps_are_ever_dropped() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        d = rng.standard_cauchy(int(rng.integers(5, 10)))
        assert _keep_mask(d).sum() * 2 >= d.size


def test_ten_steps_or_more_are_still_a_trimmed_mean() -> None:
    d = np.arange(20.0)
    keep = _keep_mask(d)
    assert keep.sum() == 16 and not keep[[0, 1, 18, 19]].any()


def _diagnose(pair: str):  # type: ignore[no-untyped-def]
    d = VAL / pair
    side = {s: next(p for p in d.iterdir() if p.name.startswith(f"{s}.") and "meta" not in p.name)
            for s in ("baseline", "treatment")}  # fmt: skip
    return api.diagnose(side["baseline"], side["treatment"])


def test_a_preempted_step_of_a_generate_pair_is_left_out_and_said() -> None:
    r = _diagnose("hf_generate_llama_after")
    kept = [s.kept for s in r.partition.per_step]
    assert kept == [True] * 5 + [False]
    assert "mean over 5 of 6 aligned steps (1 outlier step dropped" in r.partition.basis


@pytest.mark.xfail(
    strict=True,
    reason="a miss, not a pass (2026-12-05): the toll spun after each launch is paid in full "
    "(12.83 ms/step for 11.32 injected, 924 tolled launches a step since PyTorch's fmha kernels "
    "count as runtime launches; 13.22 ms before) and 1.12 ms/step of host code around the "
    "tolled launches that grew with them is claimed too (the side effect has no floor; cpu_ops "
    "1.15x, but the gaps beside no explaining call under 1.05x), yet 13.8 % of the delta is "
    "left unattributed (11.8 % before the fmha change, 17.8 % before the side effect had no "
    "floor; 10 % or less when unidentified per-kernel constants took it)",
)
def test_the_preempted_generate_pairs_delta_is_attributed() -> None:
    r = _diagnose("hf_generate_llama_after")
    assert r.unattributed_share <= 0.10


@pytest.mark.parametrize("pair", ["hf_generate_llama_nsys"])
def test_a_half_step_and_an_empty_last_step_of_an_nsys_range_are_left_out(pair: str) -> None:
    r = _diagnose(pair)
    dropped = [i for i, s in enumerate(r.partition.per_step) if not s.kept]
    assert dropped == [6, 8]
    launch = next(a for a in r.attribution if a.mechanism == "launch_toll")
    # what the tolled launches paid, less the toll's side effect on the host code around them
    # (which the paid cost counts too: LA01's host_side_effect): the shim's 11.32 ms/step
    side = launch.evidence["host_side_effect"]["ns_per_step"]
    assert side > 0
    assert 0.9 * 11_320_000 <= (launch.paid_ns_per_step or 0) - side <= 1.15 * 11_320_000
