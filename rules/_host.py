"""Helpers of the host-code-slower rule (HS01): host growth that no call explains."""

from __future__ import annotations

import numpy as np
import polars as pl

from ccdiag.ledger.align import GapModel, holds_across, lookup
from ccdiag.ledger.removal import REMOVAL_CALLS, Removal


def host_removal(
    seq_t: pl.DataFrame,
    gaps: GapModel,
    h: float,
    matched: pl.DataFrame | None = None,
    scale: float = 0.0,
) -> tuple[Removal, pl.DataFrame]:
    """The treatment with its host gaps back at the baseline's speed, and the paid ns per step.

    A treatment gap is ``t ≈ (1 + h) b + c`` (``c``: the growth its neighbouring calls bring,
    ``before[key] + after[prev_key]``, only where positive; ``h``: the gap model's mean growth
    per ns of gap), so its host part is ``h / (1 + h) × (t − c)``. Returns the
    removal and rank, idx, gap_launch, gap_other, launch_api, other_api (ns per step; gaps by
    the class of the call after the gap). The matched gaps (``matched``: :func:`ccdiag.ledger.align.match_calls`) of a step give
    at most what they grew by in all: the model's mean growth per ns must not take 3.2 s from
    a step whose gaps grew 0.71 s (ISPASS hotspot3D's UVM build, h = 3.6 from its small launch
    gaps). ``scale`` (:func:`ccdiag.ledger.control.call_scale`): the growth per ns of call that
    slower host code explains inside the matched launch and other calls, at most each call's
    growth (``launch_api``, ``other_api``).
    """

    c = (lookup("_gk", gaps.before) + lookup("_gp", gaps.after)).clip(lower_bound=0.0)
    part = (h / (1.0 + h) * (pl.col("gap") - c)).clip(lower_bound=0.0)
    r = seq_t.with_columns(gaps.key("key").alias("_gk"), gaps.key("prev_key").alias("_gp"))
    r = r.with_columns(part.alias("_part"))
    if matched is not None and matched.height:
        # per step, no more than the matched gaps grew in all (a per-gap cap would bias noisy
        # gaps low: contention lengthens some gaps and shortens others)
        grew = matched.select(
            pl.col("t_ev_row").alias("ev_row"),
            pl.col("d_gap").alias("_grew"),
            pl.col("b_dur").alias("_bdur"),
            pl.col("d_dur").alias("_ddur"),
        )
        r = r.join(grew, on="ev_row", how="left")
        cell = ["rank", "idx"]
        est = pl.col("_part").filter(pl.col("_grew").is_not_null()).sum().over(cell)
        room = pl.col("_grew").sum().over(cell).clip(lower_bound=0)
        f = pl.when(est > room).then(room / est).otherwise(1.0).fill_nan(1.0).fill_null(1.0)
        r = r.with_columns(
            pl.when(pl.col("_grew").is_not_null())
            .then(pl.col("_part") * f)
            .otherwise(pl.col("_part"))
            .alias("_part")
        )
    in_call = (
        pl.col("dur").cast(pl.Float64) * 0.0
    )  # a column: polars 1.41 does not broadcast clip(lit)
    if scale > 0 and "_bdur" in r.columns:
        own = pl.col("cls").is_in(["launch", "other"]) & pl.col("_bdur").is_not_null()
        in_call = (
            pl.when(own)
            .then(pl.min_horizontal(scale * pl.col("_bdur"), pl.col("_ddur").clip(lower_bound=0)))
            .otherwise(0.0)
        )
    r = r.with_columns(
        pl.col("_part").round(0).cast(pl.Int64).alias("rm_gap"),
        in_call.clip(0, pl.col("dur")).round(0).cast(pl.Int64).alias("rm_dur"),
    )
    calls = r.filter((pl.col("rm_gap") > 0) | (pl.col("rm_dur") > 0)).select(
        "ev_row", pl.col("rm_dur").alias("dur_ns"), pl.col("rm_gap").alias("gap_ns"),
        pl.lit(0, dtype=pl.Int64).alias("eps_ns"), pl.lit(False).alias("unblock"),
    )  # fmt: skip
    launch = pl.col("cls") == "launch"

    def part_of(col: str, on: pl.Expr, name: str) -> pl.Expr:
        return pl.when(on).then(pl.col(col)).otherwise(0).sum().alias(name)

    per = r.group_by("rank", "idx").agg(
        part_of("rm_gap", launch, "gap_launch"),
        part_of("rm_gap", ~launch, "gap_other"),
        part_of("rm_dur", launch, "launch_api"),
        part_of("rm_dur", ~launch, "other_api"),
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


def moved_not_slower(windows: tuple[float, ...], h: float, share: float) -> str | None:
    """Why growth of ``h`` per ns of gap is not slower host code, or None when it may be
    (:func:`ccdiag.ledger.align.holds_across` the step's parts, ``GapModel.h_windows``)."""
    if holds_across(windows, h, share):
        return None
    med = float(np.median(windows))
    return (
        f"host gaps grew {h:+.3f} per ns of their length over the step, but not across it: the "
        f"median of its {len(windows)} parts {med:+.3f} (range {min(windows):+.2f} .. "
        f"{max(windows):+.2f}); work that moved within the step, not slower host code"
    )
