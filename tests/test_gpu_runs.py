"""``ledger.critical.gpu_runs`` reads each busy run off its first and last rows (the rows of a
run are contiguous once sorted): it must give the runs a group-by over (by, run) gives, with
queued launches, overlapping rows and null streams."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.critical import RUN_GAP_NS, gpu_runs


def _reference(gpu: pl.DataFrame, by: list[str], tol: int = RUN_GAP_NS) -> pl.DataFrame:
    g = gpu.select(
        *by, "start_ns", (pl.col("start_ns") + pl.col("dur_ns")).alias("e"),
        pl.col("launch_end").alias("le"),
    )  # fmt: skip
    g = g.sort(*by, "start_ns", maintain_order=True)
    prev = pl.col("e").cum_max().shift(1).over(by)
    queued = pl.col("le").is_not_null() & (pl.col("le") <= prev + 1000)
    new = ~(queued | (pl.col("start_ns") <= prev + tol)).fill_null(False)
    g = g.with_columns(new.cum_sum().over(by).alias("run"))
    return g.group_by(*by, "run").agg(
        pl.col("start_ns").min().alias("g0"), pl.col("e").max().alias("g1")
    )


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 2**31))
def test_runs_equal_the_group_by(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 200_000, n)
    late = rng.integers(-5_000, 20_000, n)
    gpu = pl.DataFrame(
        {
            "rank": rng.integers(0, 2, n).astype(np.int32),
            "device": pl.Series(rng.integers(0, 2, n), dtype=pl.Int32),
            "stream": pl.Series([None if x == 0 else int(x) for x in rng.integers(0, 3, n)]),
            "start_ns": start,
            "dur_ns": rng.integers(0, 30_000, n),
            "launch_end": pl.Series(
                [None if rng.random() < 0.3 else int(s - d) for s, d in zip(start, late)],
                dtype=pl.Int64,
            ),
        }
    )
    for by in (["rank"], ["rank", "device", "stream"]):
        keys = [*by, "run"]
        got = gpu_runs(gpu, by)
        assert got["g0"].is_sorted()
        want = _reference(gpu, by).sort(keys, nulls_last=True)
        assert got.sort(keys, nulls_last=True).equals(want)
