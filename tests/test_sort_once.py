"""``vocab.sort_once``: the frame as it is when already strictly in order, else the sort; in
both cases what ``df.sort`` gives (keys with ties or nulls always go through the sort)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.vocab import sort_once

KEY = st.one_of(st.none(), st.integers(-3, 3))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(KEY, KEY, st.integers(0, 5)), max_size=40), presort=st.booleans())
def test_equals_the_sort(rows: list[tuple[int | None, int | None, int]], presort: bool) -> None:
    df = pl.DataFrame(rows, schema={"a": pl.Int64, "b": pl.Int64, "v": pl.Int64}, orient="row")
    if presort:
        df = df.sort("a", "b", maintain_order=True)
    got = sort_once(df, "a", "b")
    want = df.sort("a", "b", maintain_order=True)
    unique_keys = df.select(pl.struct("a", "b").is_unique().all()).item() if df.height else True
    if unique_keys:  # the order is then the only one: the same frame, row for row
        assert got.equals(want)
    else:  # ties: the same keys in order (tie order is the sort's own)
        assert got.select("a", "b").equals(want.select("a", "b"))


def test_sorted_frame_is_returned_as_is() -> None:
    df = pl.DataFrame({"a": [1, 1, 2], "b": [1, 2, 0]})
    assert sort_once(df, "a", "b") is df
    assert sort_once(df, "b") is not df  # not in b's order: sorted
    tie = pl.DataFrame({"a": [1, 1], "b": [2, 2]})
    assert sort_once(tie, "a", "b") is not tie  # a tie goes through the sort
    down = pl.DataFrame({"a": [1, 1, 2], "b": [5, 3, 9]})
    assert sort_once(down, "a", "b", descending=[False, True]) is down
    assert sort_once(down, "a", "b").equals(down.sort("a", "b"))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(KEY, KEY), max_size=30),
    desc=st.lists(st.booleans(), min_size=2, max_size=2),
)
def test_descending_keys(rows: list[tuple[int | None, int | None]], desc: list[bool]) -> None:
    df = pl.DataFrame(rows, schema={"a": pl.Int64, "b": pl.Int64}, orient="row")
    df = df.with_row_index("i").sort("a", "b", descending=desc, maintain_order=True)
    got = sort_once(df, "a", "b", descending=desc)
    want = df.sort("a", "b", descending=desc)
    assert got.select("a", "b").equals(want.select("a", "b"))
    if df.select(pl.struct("a", "b").is_unique().all()).item() if df.height else True:
        assert got.equals(want)


def test_same_keys_as_rows_n_away() -> None:
    from ccdiag.ledger.vocab import same_keys_as

    df = pl.DataFrame({"a": [None, None, 1, 1], "b": [2, 2, None, 3]})
    prev = df.select(same_keys_as(["a", "b"], 1)).to_series().to_list()
    nxt = df.select(same_keys_as(["a", "b"], -1)).to_series().to_list()
    # nulls equal nulls; the rows off the frame (before the first, after the last) never match
    assert prev == [False, True, False, False]
    assert nxt == [True, False, False, False]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4)), max_size=50))
def test_ordinal_in_step_is_the_window(rows: list[tuple[int, int]]) -> None:
    """The calls' ordinal in their step by a forward fill equals the window over the steps,
    on a frame sorted by rank and idx (as the call sequences are)."""
    from ccdiag.ledger.align import _ordinal_in_step

    df = pl.DataFrame(rows, schema={"rank": pl.Int32, "idx": pl.Int64}, orient="row")
    df = df.sort("rank", "idx")
    got = df.select(_ordinal_in_step().alias("k"))
    assert got.equals(df.select(pl.int_range(pl.len()).over("rank", "idx").alias("k")))
