"""Per-block medians of a phase's step times in the truths of HELD-OUT-36 to 39 (6 rounds of 5).

``validation/make_pairs.py`` copies each phase's block medians, as the session recorded them
(``ccdiag.emulate.pairs.run_session``: one block a round), into the pairs' ``ground_truth.json``,
so a reader can see how the phase's speed moved over the session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

VAL = Path(__file__).resolve().parents[1] / "validation"


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
