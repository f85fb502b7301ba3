"""``vocab.join_first``: each left row gets the columns of the right's first row with its key,
as the left join on the right's first rows per key gives (nulls, repeated and absent keys)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.vocab import join_first

KEY = st.one_of(st.none(), st.integers(-3, 8))


@settings(max_examples=300, deadline=None)
@given(lk=st.lists(KEY, max_size=40), rk=st.lists(KEY, max_size=40))
def test_equals_the_join_on_first_rows(lk: list[int | None], rk: list[int | None]) -> None:
    left = pl.DataFrame({"k": lk, "a": range(len(lk))}, schema={"k": pl.Int64, "a": pl.Int64})
    right = pl.DataFrame(
        {"k": rk, "b": range(len(rk)), "c": [str(x) for x in range(len(rk))]},
        schema={"k": pl.Int64, "b": pl.Int64, "c": pl.String},
    )
    first = right.filter(pl.col("k").is_first_distinct() & pl.col("k").is_not_null())
    want = left.join(first, on="k", how="left", maintain_order="left")
    assert join_first(left, right, "k").equals(want)
