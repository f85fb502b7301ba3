"""``ledger.critical.exposure``: an interval's time outside the GPU-critical windows of its rank,
from the cumulative window length at its two ends (``_measure``, which puts its as-of join back
in the rows' order by a scatter). Checked against the overlap summed window by window."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.critical import exposure


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 60), m=st.integers(0, 12), seed=st.integers(0, 2**31))
def test_exposed_is_length_minus_the_overlaps(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    wins = []
    for rank in (0, 1):  # disjoint windows per rank, as critical_windows gives them
        edges = np.sort(rng.choice(np.arange(0, 10_000), size=2 * m, replace=False))
        wins += [(rank, int(a), int(b)) for a, b in edges.reshape(-1, 2)]
    windows = pl.DataFrame(wins, schema={"rank": pl.Int32, "ws": pl.Int64, "we": pl.Int64},
                           orient="row")  # fmt: skip
    a = rng.integers(0, 10_000, n)
    iv = pl.DataFrame({
        "rank": rng.integers(0, 2, n).astype(np.int32), "a": a, "b": a + rng.integers(0, 3_000, n),
        "row": np.arange(n),
    })  # fmt: skip
    got = exposure(iv, windows)
    want = [
        max(b - a - sum(max(0, min(b, we) - max(a, ws)) for r2, ws, we in wins if r2 == r), 0)
        for r, a, b in iv.select("rank", "a", "b").iter_rows()
    ]
    assert got.get_column("row").to_list() == list(range(n))  # the rows' own order
    assert got.get_column("exposed_ns").to_list() == want
