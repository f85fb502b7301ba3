"""Chunk alignment of event frames (ccdiag.frame) and the steps' packed launcher lookup."""

from __future__ import annotations

import polars as pl
import pytest

from ccdiag import steps
from ccdiag.frame import align_chunks, like_chunks


def _misaligned() -> pl.DataFrame:
    # arrange helper: column a in 3 chunks, b in one, c in 2 chunks at other rows
    a = pl.concat([pl.Series("a", [1, 2]), pl.Series("a", [3]), pl.Series("a", [4, 5, 6])])
    b = pl.Series("b", ["p", "q", "r", "s", "t", "u"])
    c = pl.concat([pl.Series("c", [0.5] * 4), pl.Series("c", [1.5, None])])
    return pl.DataFrame([a, b, c])


def test_align_chunks_cuts_every_column_at_the_same_rows():
    df = _misaligned()
    assert len({tuple(df[c].chunk_lengths()) for c in df.columns}) > 1
    # act
    out = align_chunks(df)
    # assert: same values, one layout (the multi-chunk one most columns share or the first)
    assert out.equals(df)
    layouts = {tuple(out[c].chunk_lengths()) for c in out.columns}
    assert len(layouts) == 1
    assert sum(next(iter(layouts))) == df.height


def test_align_chunks_keeps_an_aligned_frame_as_it_is():
    df = pl.concat([pl.DataFrame({"x": [1, 2], "y": ["a", "b"]})] * 3, rechunk=False)
    assert align_chunks(df) is df


def test_like_chunks_matches_the_frame_so_a_filter_needs_no_rechunk():
    df = pl.concat([pl.DataFrame({"x": [1, 2, 3]})] * 4, rechunk=False)
    s = like_chunks(pl.Series("s", range(12)), df)
    assert s.chunk_lengths() == df["x"].chunk_lengths()
    assert s.to_list() == list(range(12))


def _events(rows: list[tuple]) -> pl.DataFrame:
    cols = ["rank", "pid", "correlation", "kind", "device"]
    return pl.DataFrame(
        rows,
        schema={
            "rank": pl.Int32,
            "pid": pl.Int64,
            "correlation": pl.Int64,
            "kind": pl.String,
            "device": pl.Int32,
        },
        orient="row",
    ).select(cols)


@pytest.mark.parametrize(
    "rows",
    [
        # duplicated launcher keys (the first call wins), a null pid, a GPU row without launcher,
        # two ranks with the same pid and correlation, negative and huge ids
        [
            (0, 10, 1, "runtime", None),
            (0, 10, 1, "driver", None),
            (0, 10, 1, "kernel", 0),
            (1, 10, 1, "runtime", None),
            (1, 10, 1, "kernel", 1),
            (0, None, 2, "runtime", None),
            (0, None, 2, "kernel", 0),
            (0, 11, 3, "kernel", 0),
            (0, -5, 2**40, "runtime", None),
            (0, -5, 2**40, "memcpy", 0),
            (0, 10, None, "runtime", None),
        ],
        [(0, 1, 1, "kernel", 0)],  # no API call at all
    ],
)
def test_packed_launcher_lookup_equals_the_join(rows):
    events = _events(rows)
    by_time = pl.Series("_l", list(range(events.height)), dtype=pl.Int32)
    gpu = pl.col("device").is_not_null() & pl.col("correlation").is_not_null()
    idx = events.select(gpu.arg_true()).to_series()
    api = pl.col("kind").is_in(["runtime", "driver"]) & pl.col("correlation").is_not_null()
    keys = ["rank", "pid", "correlation"]
    key = steps._packed_key(events, keys)
    assert key is not None
    # act
    found, launched = steps._launcher_steps(events, by_time, idx, api, key)
    # assert: the three-column join (the fallback) gives the same hits and steps
    launchers = (
        events.with_columns(by_time)
        .filter(api)
        .select(*keys, "_l", pl.lit(True).alias("_hit"))
        .unique(keys, keep="first", maintain_order=True)
    )
    looked = events.select(keys)[idx].join(launchers, on=keys, how="left", maintain_order="left")
    assert found.to_list() == looked["_hit"].fill_null(False).to_list()
    want = [v if h else None for v, h in zip(looked["_l"], looked["_hit"].fill_null(False))]
    assert [v if h else None for v, h in zip(launched, found)] == want


def test_keys_too_wide_to_pack_fall_back():
    events = _events([(0, -(2**62), 1, "runtime", None), (0, 2**62, 2**40, "kernel", 0)])
    assert steps._packed_key(events, ["rank", "pid", "correlation"]) is None
