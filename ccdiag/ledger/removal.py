"""A mechanism's counterfactual: its measured costs, as amounts to take out of a trace's rows.

Rules build a :class:`Removal` from matched deltas (``ccdiag.ledger.align``); the replay
(``ccdiag.replay.Replayer``) applies it; the engine's Shapley attribution sums removals of subsets
of mechanisms (``ccdiag.shapley``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

#: Frame schema of :attr:`Removal.calls` (ns columns, all >= 0).
REMOVAL_CALLS = {
    "ev_row": pl.Int64, "dur_ns": pl.Int64, "gap_ns": pl.Int64, "eps_ns": pl.Int64,
    "unblock": pl.Boolean,
}  # fmt: skip
#: Frame schema of :attr:`Removal.gpu`.
REMOVAL_GPU = {"ev_row": pl.Int64, "dur_ns": pl.Int64}


def call_rows(
    frame: pl.DataFrame,
    ev_row: str | pl.Expr = "ev_row",
    *,
    dur: pl.Expr | None = None,
    gap: pl.Expr | None = None,
    eps: pl.Expr | None = None,
    unblock: pl.Expr | None = None,
) -> pl.DataFrame:
    """:attr:`Removal.calls` rows of ``frame``: the call ``ev_row`` (a column or an expression)
    and what comes off it, each part 0 (``unblock`` False) where not given."""
    zero = pl.lit(0, dtype=pl.Int64)
    row = pl.col(ev_row) if isinstance(ev_row, str) else ev_row
    return frame.select(
        row.alias("ev_row"), (zero if dur is None else dur).alias("dur_ns"),
        (zero if gap is None else gap).alias("gap_ns"),
        (zero if eps is None else eps).alias("eps_ns"),
        (pl.lit(False) if unblock is None else unblock).alias("unblock"),
    ).cast(REMOVAL_CALLS)  # fmt: skip


@dataclass(frozen=True)
class Removal:
    """Measured costs taken out of a trace's rows (a mechanism's counterfactual: its costs gone).

    Frames keyed by ``ev_row`` (the row in ``Trace.events``), each column in ns, all >= 0:

    - ``calls``: ev_row, ``dur_ns`` (taken off the call's own time), ``gap_ns`` (off the host gap
      before it), ``eps_ns`` (off the time a blocking call lasts after the GPU work it waited for
      ended), ``unblock`` (the call no longer waits for its copy: an async copy made blocking);
    - ``gpu``: ev_row, ``dur_ns`` (off a GPU row's duration).

    Removals of several mechanisms add up (:meth:`plus`): their measured costs are disjoint parts
    of the matched deltas. ``twice_ns``: ns two of its rows hold alike (an untraced host wait for
    a GPU row the removal also takes out: an emulator's padding kernel), counted once by
    :meth:`paid_ns`.
    """

    calls: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=REMOVAL_CALLS))
    gpu: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=REMOVAL_GPU))
    twice_ns: float = 0.0

    def plus(self, other: Removal) -> Removal:
        """Both removals at once (costs summed per row, unblock if either unblocks)."""
        c = pl.concat([self.calls, other.calls]).group_by("ev_row").agg(
            pl.col("dur_ns").sum(), pl.col("gap_ns").sum(), pl.col("eps_ns").sum(),
            pl.col("unblock").any(),
        )  # fmt: skip
        g = pl.concat([self.gpu, other.gpu]).group_by("ev_row").agg(pl.col("dur_ns").sum())
        twice = self.twice_ns + other.twice_ns
        return Removal(c.select(REMOVAL_CALLS.keys()), g.select(REMOVAL_GPU.keys()), twice)

    def paid_ns(self) -> float:
        """Total ns this removal takes out (host and GPU), before any replay."""
        c = self.calls.select(pl.sum_horizontal("dur_ns", "gap_ns", "eps_ns").sum()).item()
        return float(c or 0) + float(self.gpu["dur_ns"].sum() or 0) - self.twice_ns


def within_growth(
    df: pl.DataFrame, part: pl.Expr, room: pl.Expr, known: pl.Expr, out: str
) -> pl.DataFrame:
    """``df`` with ``out``: ``part`` (ns to take off each call's gap), scaled per aligned step
    (rank, idx) so that its rows with a matched gap (``known``) take at most ``room`` summed
    over those rows (what the step's matched gaps grew by, less what other parts take): a
    per-gap cap would bias noisy gaps low (contention lengthens some gaps and shortens others).
    Rows without a match keep their ``part``. The step's sums come from one group-by joined
    back, not two window expressions (half the time on a million calls)."""
    cell = ["rank", "idx"]
    sums = df.group_by(cell).agg(
        part.filter(known).sum().alias("_wg_est"),
        room.filter(known).sum().clip(lower_bound=0).alias("_wg_total"),
    )
    est, total = pl.col("_wg_est"), pl.col("_wg_total")
    f = pl.when(est > total).then(total / est).otherwise(1.0).fill_nan(1.0).fill_null(1.0)
    # the step's sums joined onto the key columns alone and added to the rows (each step once
    # in ``sums``: the same rows, in order), not a join that copies every column of ``df``
    back = df.select(cell).join(sums, on=cell, how="left", maintain_order="left")
    return (
        df.with_columns(back.get_column("_wg_est"), back.get_column("_wg_total"))
        .with_columns(pl.when(known).then(part * f).otherwise(part).alias(out))
        .drop("_wg_est", "_wg_total")
    )
