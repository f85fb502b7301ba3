"""The steady-state floor of a counterfactual: ``ccdiag.replay.gpu_floor`` and the GPU busy time
it is floored at (``ccdiag.ledger.gpu.union_ns``, the ledger's own union over streams)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from ccdiag.ledger.gpu import union_ns
from ccdiag.replay import gpu_floor


def busy_ns(s: np.ndarray, d: np.ndarray) -> int:
    rows = pl.DataFrame(
        {"k": [0] * s.size, "start_ns": s, "dur_ns": d},
        schema_overrides={"start_ns": pl.Int64, "dur_ns": pl.Int64},
    )
    return int(union_ns(rows, ["k"])["busy_ns"].sum())


def test_busy_time_is_the_union_over_streams() -> None:
    s = np.array([0, 5, 20, 22, 40])
    d = np.array([10, 10, 1, 5, 0])
    assert busy_ns(s, d) == 15 + 1 + 5 + 0
    assert busy_ns(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)), max_size=60))
def test_busy_time_is_bounded_by_the_sum_and_the_span(rows: list[tuple[int, int]]) -> None:
    s = np.array([r[0] for r in rows], dtype=np.int64)
    d = np.array([r[1] for r in rows], dtype=np.int64)
    b = busy_ns(s, d)
    assert 0 <= b <= int(d.sum())
    if rows:
        assert b <= int((s + d).max() - s.min())
        assert b >= int(d.max())


def test_the_floor_stretches_only_the_replayed_block_and_only_when_below() -> None:
    dur = np.array([10, 10, 10, 99])
    inside = np.array([True, True, True, False])
    assert gpu_floor(dur, inside, 45).tolist() == [15, 15, 15, 99]
    assert gpu_floor(dur, inside, 30).tolist() == dur.tolist()  # at the floor: unchanged
    assert gpu_floor(dur, inside, 10).tolist() == dur.tolist()
