"""Per-block medians of a phase's step times in the truths of HELD-OUT-36 to 39 (6 rounds of 5).

``validation/make_pairs.py``'s ``block_medians`` cuts a phase's step times, which the session
appends block after block, into one block a round; the pairs' ``ground_truth.json`` keeps them so
a reader can see how the phase's speed moved over the session.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VAL = REPO / "validation"
sys.path.insert(0, str(VAL))
from make_pairs import block_medians  # noqa: E402


def test_blocks_are_cut_in_session_order_one_per_round() -> None:
    # arrange: 3 rounds of 2 steps, the second block slow
    steps = [10, 12, 50, 52, 11, 13]
    # act
    got = block_medians(steps, 3)
    # assert
    assert got == {"median_per_block_ns": [11, 51, 12]}


@pytest.mark.parametrize(("steps", "rounds"), [([1, 2, 3], 2), ([1, 2], 1), ([1, 2], None)])
def test_no_blocks_when_the_rounds_do_not_divide_the_steps_or_there_is_one(steps, rounds) -> None:
    assert block_medians(steps, rounds) == {}


@pytest.mark.skipif(
    not (VAL / "tv_train_squeezenet_both").exists(), reason="validation/ not in this checkout"
)
@pytest.mark.parametrize(
    "pair",
    ["tv_train_shufflenet_both", "tv_train_regnet_r6_both", "tv_train_squeezenet_both"],
)
def test_a_captured_truth_keeps_six_blocks_a_phase_around_its_median(pair: str) -> None:
    g = json.loads((VAL / pair / "ground_truth.json").read_text())
    assert g["rounds"] == 6
    for name, phase in g["session_phases"].items():
        blocks = phase["median_per_block_ns"]
        assert len(blocks) == 6, name
        assert min(blocks) <= phase["step_ns"]["median"] <= max(blocks), name
