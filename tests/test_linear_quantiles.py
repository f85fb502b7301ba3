"""``ccdiag.ledger.control.linear_quantiles``: polars' ``quantile(q, "linear")`` bit for bit from
one sort. ``toll_fit`` reads the nine quantiles of every launch path's matched durations with it
(the launch-toll rule's host-code control: 3.1 s of one polars quantile pass per quantile on the
200 MB nsys pair, 0.3 s now), so every report stays byte-identical only if it is exact."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.control import linear_quantiles, toll_fit

QS = np.linspace(0.1, 0.9, 9)


def _polars(s: pl.Series) -> np.ndarray:
    return np.array([s.quantile(q, "linear") for q in QS], dtype=float)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=400))
def test_integer_series_give_polars_quantiles_bit_for_bit(xs: list[int]) -> None:
    s = pl.Series(xs, dtype=pl.Int64)
    assert linear_quantiles(s, QS).tolist() == _polars(s).tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9),
        min_size=1,
        max_size=400,
    )
)
def test_float_series_give_polars_quantiles_bit_for_bit(xs: list[float]) -> None:
    s = pl.Series(xs, dtype=pl.Float64)
    assert linear_quantiles(s, QS).tolist() == _polars(s).tolist()


def test_nan_takes_polars_own_path_and_toll_fit_is_unchanged() -> None:
    # arrange: a float series with a NaN, and durations of a toll (+12 us) on a scaled path
    nan = pl.Series([1.0, float("nan"), 3.0, 2.0, 5.0, 4.0])
    rng = np.random.default_rng(7)
    b = pl.Series(rng.integers(3_000, 9_000, 5_000))
    t = pl.Series((b.to_numpy() * 1.1 + 12_000).astype(np.int64))
    # act
    got = linear_quantiles(nan, QS)
    fit = toll_fit(b, t)
    # assert
    assert np.array_equal(got, _polars(nan), equal_nan=True)
    assert fit["slope"] == 1.1 and abs(fit["toll_ns"] - 12_000) <= 1
