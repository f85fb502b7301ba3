"""Fast paths of the ledger that must give what the joins and group-bys they replace give:
``critical._measure_sorted`` (binary search in each rank's windows, no sort of the intervals nor
as-of join), ``critical._host_sums`` (the group-by on one packed integer key) and
``align._on_aligned`` (each call's aligned index by binary search, then a filter)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger import align, critical


def _windows(rng: np.random.Generator, ranks: int, m: int) -> pl.DataFrame:
    wins = []
    for rank in range(ranks):  # disjoint windows per rank, as critical_windows gives them
        edges = np.sort(rng.choice(np.arange(0, 10_000), size=2 * m, replace=False))
        wins += [(rank, int(a), int(b)) for a, b in edges.reshape(-1, 2)]
    w = pl.DataFrame(wins, schema={"rank": pl.Int32, "ws": pl.Int64, "we": pl.Int64}, orient="row")
    cum = (pl.col("we") - pl.col("ws")).cum_sum().shift(1).over("rank").fill_null(0)
    return w.sort("rank", "ws").with_columns(cum.alias("cum")).sort("ws")


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 60), m=st.integers(0, 12), ranks=st.integers(1, 3), seed=st.integers(0, 2**31)
)
def test_measure_by_search_is_the_asof_join(n: int, m: int, ranks: int, seed: int) -> None:
    # arrange: rows on the windows' ranks and on one without windows, times before, inside and
    # after the windows
    rng = np.random.default_rng(seed)
    win = _windows(rng, ranks, m)
    x = pl.DataFrame(
        {"rank": rng.integers(0, ranks + 1, n).astype(np.int32), "t": rng.integers(-50, 10_050, n)}
    )
    # act
    fast = critical._measure_sorted(x, "t", win)
    # assert
    want = _joined(x, win)
    assert fast is not None
    assert fast.dtype == want.dtype and fast.to_list() == want.to_list()


def _joined(x: pl.DataFrame, win: pl.DataFrame) -> pl.Series:
    saved = critical._measure_sorted
    critical._measure_sorted = lambda *_: None  # type: ignore[assignment]
    try:
        return critical._measure(x, "t", win)
    finally:
        critical._measure_sorted = saved


CATS = st.sampled_from([*critical.INTERVAL_CATS[:4], "gap_launch", "gap_other"])


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 5), CATS, st.integers(0, 9), st.integers(0, 9)),
        max_size=60,
    ),
    odd=st.booleans(),
)
def test_host_sums_are_the_group_by(rows: list[tuple[int, int, str, int, int]], odd: bool) -> None:
    # arrange (``odd``: a label the packed codes do not know: the group-by itself)
    iv = pl.DataFrame(
        rows,
        schema={"rank": pl.Int32, "step": pl.Int32, "cat": pl.String, "a": pl.Int64,
                "exposed_ns": pl.Int64},
        orient="row",
    ).with_columns((pl.col("a") + pl.col("exposed_ns")).alias("b"))  # fmt: skip
    if odd and iv.height:
        iv = iv.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("odd"))
                             .otherwise(pl.col("cat")).alias("cat"))  # fmt: skip
    # act
    got = critical._host_sums(iv)
    # assert
    want = iv.group_by("rank", "step", "cat").agg(
        pl.col("exposed_ns").sum().alias("ns"), (pl.col("b") - pl.col("a")).sum().alias("tot")
    )
    order = ["rank", "step", "cat"]
    assert got.schema == want.schema
    assert got.sort(order).equals(want.sort(order))


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 6), st.integers(0, 30)), max_size=50
    ),
    steps=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 6)), max_size=10),
    presort=st.booleans(),
)
def test_calls_on_the_aligned_steps_are_the_join(
    calls: list[tuple[int, int, int]], steps: list[tuple[int, int]], presort: bool
) -> None:
    # arrange: calls in step and start order or not, aligned steps once or repeated
    c = pl.DataFrame(calls, schema={"rank": pl.Int32, "step": pl.Int32, "start_ns": pl.Int64},
                     orient="row").with_row_index("v")  # fmt: skip
    if presort:
        c = c.sort("rank", "step", "start_ns", maintain_order=True)
    a = pl.DataFrame(steps, schema={"rank": pl.Int32, "step": pl.Int32}, orient="row")
    a = a.with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64) * 3)
    a = a.select("rank", "idx", "step")
    # act
    got = align._on_aligned(c, a)
    # assert
    want = c.join(a, on=["rank", "step"], how="inner").sort("rank", "idx", "start_ns", "v")
    assert got.columns == want.columns
    assert got.sort("rank", "idx", "start_ns", "v").equals(want)
    keys = got.select("rank", "idx", "start_ns")
    assert keys.equals(keys.sort("rank", "idx", "start_ns"))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 1),
            st.integers(0, 4),
            st.floats(0, 1e4),
            st.integers(-500, 500),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_within_growth_is_the_wide_join(rows: list[tuple[int, int, float, int, bool]]) -> None:
    """``removal.within_growth`` joins the steps' sums onto the key columns alone: the frame the
    join of the whole frame gave, column for column."""
    from ccdiag.ledger.removal import within_growth

    # arrange
    df = pl.DataFrame(
        rows,
        schema={"rank": pl.Int32, "idx": pl.Int64, "part": pl.Float64, "grew": pl.Int64,
                "known": pl.Boolean},
        orient="row",
    ).with_row_index("v")  # fmt: skip
    part, room, known = pl.col("part"), pl.col("grew"), pl.col("known")
    # act
    got = within_growth(df, part, room, known, "out")
    # assert
    sums = df.group_by("rank", "idx").agg(
        part.filter(known).sum().alias("_wg_est"),
        room.filter(known).sum().clip(lower_bound=0).alias("_wg_total"),
    )
    est, total = pl.col("_wg_est"), pl.col("_wg_total")
    f = pl.when(est > total).then(total / est).otherwise(1.0).fill_nan(1.0).fill_null(1.0)
    want = (
        df.join(sums, on=["rank", "idx"], how="left", maintain_order="left")
        .with_columns(pl.when(known).then(part * f).otherwise(part).alias("out"))
        .drop("_wg_est", "_wg_total")
    )
    assert got.equals(want)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 3),
                  st.integers(-(10**12), 10**12)),
        max_size=40,
    )
)  # fmt: skip
def test_prev_max_in_groups_is_the_window(rows: list[tuple[int | None, int, int]]) -> None:
    """``vocab.prev_max_in_groups`` on a frame sorted by its groups (null keys a group, as in
    the window): ``cum_max().shift(1).over(by)``, value for value."""
    from ccdiag.ledger.vocab import prev_max_in_groups

    # arrange
    df = pl.DataFrame(rows, schema={"g": pl.Int32, "h": pl.Int64, "v": pl.Int64}, orient="row")
    df = df.sort("g", "h", maintain_order=True)
    # act
    got = prev_max_in_groups(df, ["g", "h"], "v")
    # assert
    want = df.select(pl.col("v").cum_max().shift(1).over("g", "h")).to_series()
    assert got is not None or df.height == 0
    if got is not None:
        assert got.dtype == want.dtype and got.to_list() == want.to_list()


def test_a_removal_counts_a_wait_and_the_gpu_row_it_waited_for_once() -> None:
    """``Removal.twice_ns``: an untraced host wait for a padding kernel and the kernel itself are
    the same time; ``paid_ns`` counts it once, and ``plus`` keeps it."""
    from ccdiag.ledger.removal import REMOVAL_CALLS, REMOVAL_GPU, Removal

    calls = pl.DataFrame(
        {"ev_row": [1], "dur_ns": [0], "gap_ns": [120], "eps_ns": [0], "unblock": [False]},
        schema=REMOVAL_CALLS,
    )
    gpu = pl.DataFrame({"ev_row": [7], "dur_ns": [118]}, schema=REMOVAL_GPU)
    r = Removal(calls, gpu, twice_ns=118.0)
    assert r.paid_ns() == 120.0
    both = r.plus(Removal(gpu=pl.DataFrame({"ev_row": [8], "dur_ns": [5]}, schema=REMOVAL_GPU)))
    assert both.twice_ns == 118.0 and both.paid_ns() == 125.0


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 3 * align.BRACKET_MIN),
    kind=st.sampled_from(["normal", "few", "sorted", "reversed", "heavy", "zeros"]),
    seed=st.integers(0, 2**31),
)
def test_bracketed_median_is_numpy_median(n: int, kind: str, seed: int) -> None:
    # arrange: long arrays take the bracket (a sorted sample of every n/4096-th value), short
    # ones a whole partition; ties, sorted runs, heavy tails and signed zeros
    rng = np.random.default_rng(seed)
    x = {
        "normal": lambda: rng.normal(size=n),
        "few": lambda: rng.integers(-3, 3, n).astype(float),
        "sorted": lambda: np.sort(rng.normal(size=n)),
        "reversed": lambda: np.sort(rng.normal(size=n))[::-1].copy(),
        "heavy": lambda: rng.standard_cauchy(n) * 1e6,
        "zeros": lambda: np.where(rng.random(n) < 0.5, 0.0, -0.0),
    }[kind]()
    # act
    got, got_inplace = align._median(x), align._median(x.copy(), inplace=True)
    # assert: the same float, bit for bit, and x untouched
    want = np.float64(np.median(x)).tobytes()
    assert np.float64(got).tobytes() == want
    assert np.float64(got_inplace).tobytes() == want


def test_bracket_that_misses_the_middle_falls_back() -> None:
    # arrange: every sampled value (every n/4096-th) is 0 but the rest are 1s: the sample's
    # bracket [0, 0] holds none of the middle values
    n = 2 * align.BRACKET_MIN
    x = np.ones(n)
    x[:: n // align.BRACKET_SAMPLE] = 0.0
    # act / assert
    assert align._median(x) == np.median(x) == 1.0
