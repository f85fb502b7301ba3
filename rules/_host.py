"""Helpers of the host-code-slower rule (HS01): host growth that no call explains."""

from __future__ import annotations

import polars as pl

from ccdiag.ledger.align import GapModel
from ccdiag.ledger.removal import REMOVAL_CALLS, Removal


def host_removal(
    seq_t: pl.DataFrame, gaps: GapModel, h: float, matched: pl.DataFrame | None = None
) -> tuple[Removal, pl.DataFrame]:
    """The treatment with its host gaps back at the baseline's speed, and the paid ns per step.

    A treatment gap is ``t ≈ (1 + h) b + c`` (``c``: the growth its neighbouring calls bring,
    ``before[key] + after[prev_key]``, only where positive; ``h``: the gap model's mean growth
    per ns of gap), so its host part is ``h / (1 + h) × (t − c)``. Returns the
    removal and rank, idx, gap_launch, gap_other (ns per step; by the class of the call after the
    gap). A gap matched to the baseline's (``matched``: :func:`ccdiag.ledger.align.match_calls`)
    gives at most what it grew by: the model's mean growth per ns must not take 3.2 s from a
    gap that grew 0.70 s (ISPASS hotspot3D's UVM build, h = 3.6 from its small launch gaps).
    """
    def lookup(col: str, table: dict[str, float]) -> pl.Expr:
        return pl.col(col).replace_strict(table, default=0.0, return_dtype=pl.Float64)

    c = (lookup("_gk", gaps.before) + lookup("_gp", gaps.after)).clip(lower_bound=0.0)
    part = (h / (1.0 + h) * (pl.col("gap") - c)).clip(lower_bound=0.0)
    r = seq_t.with_columns(gaps.key("key").alias("_gk"), gaps.key("prev_key").alias("_gp"))
    if matched is not None and matched.height:
        grew = matched.select(pl.col("t_ev_row").alias("ev_row"), pl.col("d_gap").alias("_grew"))
        r = r.join(grew, on="ev_row", how="left")
        part = pl.min_horizontal(part, pl.col("_grew").clip(lower_bound=0).fill_null(part))
    r = r.with_columns(part.round(0).cast(pl.Int64).alias("rm_gap"))
    calls = r.filter(pl.col("rm_gap") > 0).select(
        "ev_row", pl.lit(0, dtype=pl.Int64).alias("dur_ns"), pl.col("rm_gap").alias("gap_ns"),
        pl.lit(0, dtype=pl.Int64).alias("eps_ns"), pl.lit(False).alias("unblock"),
    )  # fmt: skip
    launch = pl.col("cls") == "launch"
    per = r.group_by("rank", "idx").agg(
        pl.when(launch).then(pl.col("rm_gap")).otherwise(0).sum().alias("gap_launch"),
        pl.when(~launch).then(pl.col("rm_gap")).otherwise(0).sum().alias("gap_other"),
    )
    return Removal(calls=calls.cast(REMOVAL_CALLS)), per


def ops_claims(
    led: pl.DataFrame, ratio: float, cats: tuple[str, ...]
) -> tuple[pl.DataFrame, float]:
    """Without matched calls: ``(ratio − 1) ×`` the baseline's mean host-code time per category,
    spread over the steps like the category's growth (a preempted thread loses whole steps, not
    a share of each). Returns rank, idx, <cat>... and the claim per step."""

    def share(c: str) -> pl.Expr:
        pos = pl.col(f"d_{c}").clip(lower_bound=0)
        amount = (ratio - 1.0) * pl.col(f"b_{c}").mean()
        return (amount * pos / pl.max_horizontal(pos.mean(), pl.lit(1.0))).alias(c)

    per = led.select("rank", "idx", *[share(c) for c in cats])
    return per, float(sum(per[c].mean() or 0 for c in cats))
