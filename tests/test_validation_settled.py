"""A copies-only torchvision training pair in steady state (``validation/tv_train_settled_copies``,
TUNE split): the launch toll nobody injected must not be found.

Found on this pair: after each step's blocking H2D copy the main thread's gaps before the
runtime launches grew 11-14 µs (median, first four tenths of the step) and shrank in the other
six, so the gap model's runtime constants came out 38.9 µs per launch and LA01 took 2.09 ms/step
(25 % of the delta) as ``launch_toll``. A toll is paid by every launch of its path wherever it is
in the step: across the step this path's gaps grew 0.6 µs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccdiag import api

PAIR = Path(__file__).resolve().parents[1] / "validation" / "tv_train_settled_copies"

pytestmark = pytest.mark.skipif(
    not (PAIR / "ground_truth.json").exists(), reason="validation/tv_train_settled_copies missing"
)


def test_gap_growth_in_part_of_the_step_is_not_a_launch_toll():
    # act
    r = api.diagnose(PAIR / "baseline.json.gz", PAIR / "treatment.json.gz")
    truth = json.loads((PAIR / "ground_truth.json").read_text())
    att = {a.mechanism: a.share for a in r.attribution}
    la01 = next(x for x in r.rules if x.code == "LA01")
    # assert: no launch toll; the copies' mechanisms take the delta
    assert "launch_toll" not in truth["mechanisms"]
    assert la01.outcome != "fired" and abs(att.get("launch_toll", 0.0)) < 0.03
    assert att["blocked_non_blocking"] > 0.75
    assert abs(r.unattributed_share) <= 0.10


def test_a_toll_beside_every_launch_still_fires_in_the_same_workload():
    """The same session's launch-only phase (``tv_train_settled_launch``: 12.25 µs spun before
    each of the 89 runtime launches per step): its gaps grew across the step (11.3 µs)."""
    pair = PAIR.parent / "tv_train_settled_launch"
    # act
    r = api.diagnose(pair / "baseline.json.gz", pair / "treatment.json.gz")
    la = next(a for a in r.attribution if a.mechanism == "launch_toll")
    runtime = next(p for p in la.evidence["paths"] if p["path"] == "runtime")
    # assert: the paid toll per runtime launch within 25 % of what was spun
    assert abs(runtime["paid_per_call_ns"] - 12_250) <= 0.25 * 12_250
