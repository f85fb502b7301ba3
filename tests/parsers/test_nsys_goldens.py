"""Golden summaries of every Nsight Systems export and nsys stats CSV set (tests/golden)."""

from __future__ import annotations

import json
from pathlib import Path

import goldens
import pytest

TRACES = goldens.nsys_traces()


def test_every_nsys_export_and_csv_set_is_covered() -> None:
    # act
    ids = {goldens.trace_id(p) for p in TRACES}
    # assert: 7 SQLite exports, 24 CSV sets (6 apps x 4 configurations)
    assert sum(i.endswith(".sqlite") for i in ids) == 7
    assert sum("hcc-ispass25" in i for i in ids) == 24


@pytest.mark.parametrize("path", TRACES, ids=goldens.trace_id)
def test_summary_matches_its_golden(path: Path) -> None:
    # arrange
    golden = json.loads(goldens.golden_path(path).read_text())
    # act
    summary = goldens.summary_of(path)
    # assert (on a difference: run scripts/update_goldens.py and review the diff)
    assert summary == golden
