"""The truth matrix's score line (``scripts/validate_matrix.py``): what it counts, on rows made
here, and on one shipped pair judged for real."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import validate_matrix as vm  # noqa: E402


def _row(att: float, truth: float, ci: tuple[float, float], delta: float, td: float) -> vm.Row:
    return vm.Row("p", "TUNE", "launch_toll", att, truth, ci, "only-X", None, None, delta, td)


def test_a_row_is_reachable_only_when_its_pair_s_delta_is_within_15_percent_of_the_truth_s():
    # a perfect share (100 %) of a delta 20 % short of the truth's misses by 20 %
    short = _row(8_000, 10_000, (9_000, 11_000), 8_000, 10_000)
    assert short.share_within() and not short.within() and not short.reachable()
    near = _row(9_000, 10_000, (9_000, 11_000), 9_000, 10_000)
    assert near.reachable() and near.within()


def test_the_score_counts_resolved_rows_and_the_reachable_ones_apart():
    rows = [
        _row(8_000, 10_000, (9_000, 11_000), 8_000, 10_000),  # unreachable, misses
        _row(9_000, 10_000, (9_000, 11_000), 9_000, 10_000),  # reachable, within
        _row(5_000, 10_000, (9_000, 11_000), 10_000, 10_000),  # reachable, misses (split)
        _row(100, 50, (-100, 200), 10_000, 10_000),  # unresolved, in its CI
    ]
    pr = vm.PairResult("p", "TUNE", 10_000, 10_000, (9_000, 11_000), rows, {}, 0.0)
    sc = vm.Score.of([pr, vm.PairResult("q", "TUNE", 0, 0, (0, 0), [], {}, 0, error="x")])
    assert (sc.n, sc.ok, sc.reach, sc.ok_reach) == (3, 1, 2, 1)
    assert (sc.unres, sc.unres_in, sc.pairs) == (1, 1, 1)
    assert "2 of 3 reachable at all" in sc.line()


@pytest.mark.skipif(not (vm.VAL / "flag_reads_launch").is_dir(), reason="validation pairs absent")
def test_a_shipped_pair_judged_for_real_gives_a_score_line():
    res = vm.judge(vm.VAL / "flag_reads_launch", "HELD-OUT-30")
    line = vm.Score.of([res]).line()
    (row,) = res.rows
    assert row.resolved and row.reachable() == (abs(res.delta / res.truth_delta - 1) <= vm.TOL)
    assert line.startswith(f"**Score:** {int(row.within())} of 1 resolved")
