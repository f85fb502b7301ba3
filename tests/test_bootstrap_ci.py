"""The bootstrap CI of a median (``ledger.stats.bootstrap_median_ci``) reads resampled ranks
back through the sorted values: it must equal the plain resampling of the values with
``np.median``, bit for bit, for ints and floats, odd and even counts, with ties."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.stats import bootstrap_median_ci, bootstrap_median_cis


def _reference(x: np.ndarray, n_boot: int, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    med = np.median(x[idx], axis=1)
    return (int(np.percentile(med, 2.5)), int(np.percentile(med, 97.5)))


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 400),
    spread=st.sampled_from([3, 1_000, 10**9]),
    floats=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_equals_np_median_resampling(n: int, spread: int, floats: bool, seed: int) -> None:
    x = np.random.default_rng(seed).integers(-spread, spread, n)
    x = x.astype(np.float64) / 7 if floats else x.astype(np.int64)
    assert bootstrap_median_ci(x, 200, seed) == _reference(x, 200, seed)


def test_large_sample_and_edges() -> None:
    x = np.random.default_rng(1).integers(0, 50, 40_000).astype(np.int64)  # int64 ranks
    assert bootstrap_median_ci(x, 64, 3) == _reference(x, 64, 3)
    assert bootstrap_median_ci(np.array([], np.int64)) == (0, 0)
    assert bootstrap_median_ci(np.array([7], np.int64)) == (7, 7)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 2, 5, 37, 38]), min_size=1, max_size=6),
    seed=st.integers(0, 2**31),
)
def test_many_at_once_equal_one_at_a_time(sizes: list[int], seed: int) -> None:
    # arrange: arrays of shared and different lengths, ints and floats
    rng = np.random.default_rng(seed)
    xs = []
    for i, n in enumerate(sizes):
        x = rng.integers(-1_000, 1_000, n)
        xs.append(x.astype(np.float64) / 3 if i % 2 else x.astype(np.int64))
    # act
    many = bootstrap_median_cis(xs, 100, seed)
    # assert: the draws shared by length give each array its own CI
    assert many == [bootstrap_median_ci(x, 100, seed) for x in xs]
