"""A CPU neighbour's share of the toll's CPU time (``rules._base.TimeShare``, the engine's
``_time_share_pass``): the interaction the replay cannot see, split by its Shapley value.

A neighbour that takes ``s`` ns per ns the host thread runs takes ``s × P`` of a toll that adds
``P`` ns of CPU time per step: with the toll alone removed the step saves ``P + s P``, with the
neighbour alone removed ``s (T0 + P)``... the two-player game whose Shapley values move ``s P / 2``
from host code to the toll. The replay removes each mechanism at its measured size, so without
the pass the toll got ``P`` and host code the rest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from ccdiag.rules._base import Finding, TimeShare

from ccdiag import api
from ccdiag.engine import _time_share_pass

ROOT = Path(__file__).resolve().parents[1]


def _finding(mechanism: str, share: TimeShare | None) -> Finding:
    return Finding(
        code="XX01", mechanism=mechanism, claims=pl.DataFrame(), summary="", evidence={},
        confidence="medium", time_share=share,
    )  # fmt: skip


def test_half_of_the_share_of_the_partners_paid_cost_moves_to_the_partner() -> None:
    per = {"host_slowdown": np.array([20e6, 22e6, 1e6]), "launch_toll": np.array([8e6] * 3)}
    fired = [
        _finding("host_slowdown", TimeShare(0.5, ("launch_toll",))),
        _finding("launch_toll", None),
    ]
    keep = np.array([True, True, True])
    changed, notes = _time_share_pass(fired, per, {"launch_toll": 8_000_000}, keep)
    assert changed == {"host_slowdown", "launch_toll"}
    # 0.5 × 0.5 × 8 ms = 2 ms per step, at most what host code holds in the step (1 ms)
    assert np.allclose(per["launch_toll"], [10e6, 10e6, 9e6])
    assert np.allclose(per["host_slowdown"], [18e6, 20e6, 0.0])
    assert len(notes) == 1 and "is launch_toll's (Shapley" in notes[0]


def test_no_partner_no_move() -> None:
    per = {"host_slowdown": np.array([20e6])}
    fired = [_finding("host_slowdown", TimeShare(0.5, ("launch_toll",)))]
    changed, notes = _time_share_pass(fired, per, {}, np.array([True]))
    assert not changed and not notes and per["host_slowdown"][0] == 20e6


def test_a_toll_beside_a_waking_neighbour_gets_its_share_of_the_interaction() -> None:
    """HF OLMo (HELD-OUT-15, opened): toll alone +6.9 ms, neighbour alone +11.0, both +29.9; the
    Shapley truth gives the toll 12.87 ms and host code 17.02. Without the pass: toll 8.05 ms
    (its paid cost), host code 21.1 ms (+24 %)."""
    d = ROOT / "validation" / "hf_generate_olmo_both"
    r = api.diagnose(d / "baseline.json.gz", d / "treatment.json.gz")
    att = {a.mechanism: a for a in r.attribution}
    toll, host = att["launch_toll"], att["host_slowdown"]
    assert toll.ns_per_step > (toll.paid_ns_per_step or 0) * 1.1
    assert abs(host.ns_per_step - 17_020_039) <= 0.15 * 17_020_039
    assert any("is launch_toll's (Shapley" in n for n in r.notes)
