"""``vocab.join_on_unique``: the left join on an integer key held at most once on the right, by
binary search, gives the hash join's frame row for row (nulls, absent keys, an unsorted right,
an empty right; a repeated key falls back to the join)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.vocab import join_on_unique

KEY = st.one_of(st.none(), st.integers(-5, 30))


@settings(max_examples=400, deadline=None)
@given(
    left=st.lists(KEY, max_size=40),
    right=st.lists(st.tuples(KEY, st.one_of(st.none(), st.integers(0, 9))), max_size=30),
    dedupe=st.booleans(),
)
def test_equals_the_join(
    left: list[int | None], right: list[tuple[int | None, int | None]], dedupe: bool
) -> None:
    lf = pl.DataFrame({"k": left, "i": range(len(left))}, schema={"k": pl.Int64, "i": pl.Int64})
    rf = pl.DataFrame(right, schema={"k": pl.Int64, "v": pl.Int64}, orient="row").with_columns(
        pl.col("v").cast(pl.String).alias("s")
    )
    if dedupe:  # the case it is for: each key at most once (one null row may stay)
        rf = rf.filter(pl.col("k").is_first_distinct())
    want = lf.join(rf, on="k", how="left", maintain_order="left")
    assert join_on_unique(lf, rf, "k").equals(want)


def test_enum_columns_and_empty_right() -> None:
    kinds = pl.Enum(["HtoD", "DtoH"])
    lf = pl.DataFrame({"k": [3, 1, None, 7]})
    rf = pl.DataFrame({"k": [7, 3], "c": pl.Series(["DtoH", "HtoD"], dtype=kinds)})
    got = join_on_unique(lf, rf, "k")
    assert got.equals(lf.join(rf, on="k", how="left", maintain_order="left"))
    assert got.schema["c"] == kinds
    assert join_on_unique(lf, rf.clear(), "k").equals(lf.join(rf.clear(), on="k", how="left"))
