"""``vocab.per_value``: expressions of one column evaluated once per distinct value and gathered
back give what ``df.with_columns`` gives on every row (nulls, an all-null or empty column, a
column that is not a string, several chunks)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.vocab import api_class, event_names, per_value

NAME = st.one_of(st.none(), st.sampled_from(["cudaLaunchKernel", "cuLaunchKernel_v2", "cudaMemcpyAsync",
                                              "cudaStreamSynchronize", "", "x" * 300]))  # fmt: skip


def _exprs() -> dict[str, pl.Expr]:
    n = pl.col("name")
    return {
        "cls": api_class(),
        "_len": n.str.len_bytes(),
        "_null": n.is_null(),  # true on a null row: the gather must not leave it null
        "_up": n.str.to_uppercase(),
    }


@settings(max_examples=300, deadline=None)
@given(names=st.lists(NAME, max_size=60), cut=st.integers(0, 60))
def test_equals_every_row(names: list[str | None], cut: int) -> None:
    df = pl.DataFrame(
        {"name": names, "i": range(len(names))}, schema={"name": pl.String, "i": pl.Int64}
    )
    if 0 < cut < df.height:  # two chunks, as a filter or concat leaves them
        df = pl.concat([df.slice(0, cut), df.slice(cut)], rechunk=False)
    got = per_value(df, "name", _exprs())
    assert got.equals(df.with_columns(**_exprs()))


def test_all_null_and_empty_and_integers() -> None:
    for df in (
        pl.DataFrame({"name": [None, None]}, schema={"name": pl.String}),
        pl.DataFrame({"name": []}, schema={"name": pl.String}),
    ):
        assert per_value(df, "name", _exprs()).equals(df.with_columns(**_exprs()))
    ints = pl.DataFrame({"k": [3, None, 3, 7]})
    ex = {"_d": pl.col("k") * 2, "_n": pl.col("k").is_null()}
    assert per_value(ints, "k", ex).equals(ints.with_columns(**ex))


@settings(max_examples=200, deadline=None)
@given(names=st.lists(NAME, max_size=60), picks=st.lists(st.integers(0, 59), max_size=40))
def test_event_codes_equal_every_row(names: list[str | None], picks: list[int]) -> None:
    """Codes made once for a whole events frame (:func:`event_names`), read at some of its rows
    (``Codes.at``: a row index that is null too), give what ``with_columns`` gives on those rows:
    the expressions are evaluated on the values the rows hold only (a ``replace_strict`` that
    maps only those does not fail)."""
    ev = pl.DataFrame({"name": names}, schema={"name": pl.String})
    rows = pl.Series("ev_row", [p if p < ev.height else None for p in picks], dtype=pl.UInt32)
    df = pl.DataFrame({"name": ev["name"].gather(rows), "ev_row": rows})
    known = {v: v.upper() for v in df["name"].drop_nulls().unique()}
    ex = {**_exprs(), "_map": pl.col("name").replace_strict(known, return_dtype=pl.String)}
    got = per_value(df, "name", ex, event_names(ev).at(rows))
    assert got.equals(df.with_columns(**ex))
    assert event_names(ev) is event_names(ev)  # made once per frame
