"""A cost model of collectives, for predicting what a change of parallel layout recovers under CC.

Each collective costs ``fixed + bytes / bandwidth`` (per run, fitted over message sizes on a low
quantile of the kernel durations, which leaves out the time a rank waits for a late peer). CC
can raise either part: software AES-GCM adds crypto operations per ring step (a fixed cost per
collective: 4·k·(n−1) per GPU per iteration for k collectives over n ranks), encrypted links or
fewer NCCL channels lower the bandwidth. The fixes act on different parts:

- **bigger DDP buckets** (``bucket_cap_mb``) send the same bytes in fewer collectives: they save
  (collectives removed) × Δfixed, nothing of the bandwidth-bound time;
- **narrower tensor parallelism** (TP n → n′) keeps the message (an activation) and the number
  of collectives, and shrinks the per-GPU ring work: crypto operations scale with (n−1), ring
  traffic per GPU with 2(n−1)/n; at n′ = 1 there is no collective left.

Only the exposed part of the collectives' growth lengthens a step: predictions are scaled by
the share of the collective growth that the partition attributed (``exposure``).

    fit_cost(rows)                     fixed + bytes / bandwidth of one run's collectives
    ddp_buckets(sizes, cap_mb)         buckets per step at another bucket_cap_mb
    predict_bucket_cap(...)            recovery of bigger buckets
    predict_narrower_tp(...)           recovery of a narrower TP width
    crypto_ops(k, n)                   4·k·(n−1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

#: Low quantile of the durations per message size: a collective kernel also lasts while it
#: waits for the slowest rank to arrive; the fast end of the distribution is its own cost.
QUANTILE = 0.1
MIB = 1 << 20


@dataclass(frozen=True)
class CostFit:
    """``time = fixed + bytes / bandwidth`` of one run's collectives (ns, GB/s = bytes/ns)."""

    fixed_ns: float | None  # None: one message size only, fixed and per-byte cost inseparable
    gbps: float | None
    points: list[dict[str, Any]] = field(default_factory=list)  # bytes, n, time_ns per size

    def as_dict(self) -> dict[str, Any]:
        return {
            "fixed_ns": None if self.fixed_ns is None else int(self.fixed_ns),
            "gbps": None if self.gbps is None else round(self.gbps, 2),
            "points": self.points,
        }


def fit_cost(rows: pl.DataFrame, q: float = QUANTILE) -> CostFit:
    """Fit ``fixed + bytes / bandwidth`` to collective rows (``bytes``, ``dur_ns``).

    Per message size the ``q`` quantile of the durations, then least squares over the sizes.
    Rows without a byte count (collectives inside CUDA graphs carry none) are left out.

    Args:
        rows: collective rows of one run (one operation, e.g. all-reduce).
        q: quantile of the durations per size.

    Returns:
        The fit; ``fixed_ns`` is None with fewer than two message sizes.
    """
    d = rows.filter(pl.col("bytes").is_not_null())
    if d.height == 0:
        return CostFit(None, None, [])
    per = (
        d.group_by("bytes")
        .agg(pl.len().alias("n"), pl.col("dur_ns").quantile(q, "linear").alias("t"))
        .sort("bytes")
    )
    points = [
        {"bytes": int(r["bytes"]), "n": int(r["n"]), "time_ns": int(r["t"])}
        for r in per.iter_rows(named=True)
    ]
    if per.height < 2:
        return CostFit(None, None, points)
    x, y = per["bytes"].to_numpy().astype(float), per["t"].to_numpy().astype(float)
    slope, fixed = np.polyfit(x, y, 1)
    gbps = 1.0 / slope if slope > 0 else None
    return CostFit(float(fixed), None if gbps is None else float(gbps), points)


def ddp_buckets(sizes: list[int], cap_mb: float) -> int:
    """How many buckets the same gradients make at ``bucket_cap_mb = cap_mb``.

    DDP fills a bucket with parameters, in order, until it reaches the cap (MiB), then starts
    the next; the observed buckets hold whole parameters, so they are packed the same way (a
    bucket is never split: at a smaller cap than observed the count cannot be told and stays).

    Args:
        sizes: bytes of the observed buckets (all-reduces) of one step, in issue order.
        cap_mb: the new ``bucket_cap_mb``.

    Returns:
        The number of buckets per step.
    """
    cap, k, cur = cap_mb * MIB, 0, 0
    for s in sizes:
        cur += s
        if cur >= cap:
            k, cur = k + 1, 0
    return k + (cur > 0)


def crypto_ops(k: float, n: int) -> int:
    """Crypto operations per GPU per iteration with software AES-GCM per ring step: 4·k·(n−1)."""
    return int(round(4 * k * max(n - 1, 0)))


@dataclass(frozen=True)
class Prediction:
    """A predicted recovery (ns per step) and how it was made."""

    recovery_ns: float
    method: str
    upper_ns: float | None = None  # the bound when the model cannot be determined
    facts: dict[str, Any] = field(default_factory=dict)


def exposure(attributed_ns: float, busy_growth_ns: float) -> float:
    """Share of the collectives' busy-time growth that lengthened the step (0..1)."""
    if busy_growth_ns <= 0:
        return 0.0
    return float(min(max(attributed_ns / busy_growth_ns, 0.0), 1.0))


def _growth(fb: CostFit, ft: CostFit) -> tuple[float, float] | None:
    """(Δfixed per collective, Δ per-byte ns) between the runs, or None when undetermined."""
    if fb.fixed_ns is None or ft.fixed_ns is None or not fb.gbps or not ft.gbps:
        return None
    return ft.fixed_ns - fb.fixed_ns, 1.0 / ft.gbps - 1.0 / fb.gbps


def predict_bucket_cap(
    fb: CostFit, ft: CostFit, k: float, k_new: int, share: float, dt: float
) -> Prediction:
    """Recovery of sending the same bytes in ``k_new`` instead of ``k`` collectives per step.

    Args:
        fb: the baseline's cost fit.
        ft: the treatment's cost fit.
        k: collectives per step now.
        k_new: collectives per step with bigger buckets.
        share: exposure of the collectives' growth (:func:`exposure`).
        dt: measured growth of one collective now (``Facts.dt_ns``; for the bound when the fit
            is undetermined).

    Returns:
        (k − k_new) × Δfixed × share; with one message size the fixed part cannot be
        separated, the prediction is 0 and ``upper_ns`` the bound if all growth were fixed.
    """
    removed = max(k - k_new, 0.0)
    g = _growth(fb, ft)
    if g is None:
        dt = max(dt, 0.0)
        return Prediction(
            0.0,
            "one message size per run: the fixed cost per collective cannot be told from the "
            f"per-byte cost; bigger buckets recover 0 if the growth is bandwidth-bound, at most "
            f"{removed:.0f} collectives removed x {dt / 1e3:.1f} us growth each x {share:.2f} "
            "exposed if it were all fixed cost",
            upper_ns=removed * dt * share,
            facts={"removed": removed, "dt_ns": dt},
        )
    dfixed, _ = g
    rec = removed * max(dfixed, 0.0) * share
    f0, f1 = fb.fixed_ns or 0.0, ft.fixed_ns or 0.0
    return Prediction(
        rec,
        f"fit time = fixed + bytes/bandwidth in both runs: fixed {f0 / 1e3:.1f} -> "
        f"{f1 / 1e3:.1f} us, {fb.gbps:.0f} -> {ft.gbps:.0f} GB/s; recovery = "
        f"{removed:.0f} collectives removed x {dfixed / 1e3:+.1f} us fixed each x {share:.2f} "
        "exposed (the same bytes still cross the link: bandwidth-bound time is not recovered)",
        facts={"removed": removed, "dfixed_ns": dfixed},
    )


def _tp_scale(n: int, n_new: int) -> tuple[float, float]:
    """(fixed-cost, bandwidth-cost) factor of the per-GPU ring work from TP n to n_new."""
    fixed = (n_new - 1) / (n - 1) if n > 1 else 1.0
    ring = ((n_new - 1) / n_new) / ((n - 1) / n) if n > 1 else 1.0
    return fixed, ring


def predict_narrower_tp(
    fb: CostFit, ft: CostFit, k: float, n: int, n_new: int, share: float, nbytes: float, dt: float
) -> Prediction:
    """Recovery of running the same collectives at TP width ``n_new`` instead of ``n``.

    Args:
        fb: the baseline's cost fit.
        ft: the treatment's cost fit.
        k: collectives per step.
        n: TP width now (ranks in the collectives).
        n_new: the narrower width.
        share: exposure of the collectives' growth (:func:`exposure`).
        nbytes: bytes of one collective (the activation all-reduced).
        dt: measured growth of one collective (``Facts.dt_ns``).

    Returns:
        k × (Δfixed × (1 − (n′−1)/(n−1)) + Δbandwidth × (1 − ring′/ring)) × share, where
        ring = 2(n−1)/n is the per-GPU traffic of a ring all-reduce; at n′ = 1 the whole growth.
    """
    f_fixed, f_ring = _tp_scale(n, n_new)
    g = _growth(fb, ft)
    if g is None or nbytes <= 0:
        # split unknown: each part scales by its own factor; the two bound the recovery
        lo, hi = sorted((1 - f_fixed, 1 - f_ring))
        rec_lo, rec_hi = k * max(dt, 0.0) * lo * share, k * max(dt, 0.0) * hi * share
        how = (
            f"growth per collective {dt / 1e3:+.2f} us (fast-end quantile), fixed and per-byte "
            f"parts not separable (one size or no byte counts); TP {n} -> {n_new} keeps "
            f"{f_fixed:.2f} of the crypto operations and {f_ring:.2f} of the ring traffic per "
            f"GPU; recovery = {k:.0f} collectives x growth x (1 - kept) x {share:.2f} exposed"
        )
        return Prediction(rec_lo, how, upper_ns=rec_hi, facts={"dt_ns": dt})
    dfixed, dper_byte = g
    dbw = dper_byte * nbytes
    rec = k * (max(dfixed, 0.0) * (1 - f_fixed) + max(dbw, 0.0) * (1 - f_ring)) * share
    how = (
        f"fit time = fixed + bytes/bandwidth in both runs: {dfixed / 1e3:+.2f} us fixed and "
        f"{dbw / 1e3:+.2f} us of bandwidth per {nbytes / MIB:.2f} MiB collective; TP {n} -> "
        f"{n_new} keeps {f_fixed:.2f} of the crypto operations (n-1) and {f_ring:.2f} of the "
        f"ring traffic per GPU (2(n-1)/n); x {k:.0f} collectives x {share:.2f} exposed"
    )
    return Prediction(rec, how, facts={"dfixed_ns": dfixed, "dbw_ns": dbw})


def tp_new_width(n: int) -> int:
    """The next narrower TP width: half, at least 1."""
    return max(1, math.ceil(n / 2)) if n > 1 else 1


@dataclass(frozen=True)
class Facts:
    """What the cost model needs from a pair's collective rows (``kind`` collective)."""

    name: str  # the dominant collective kernel (most rows per step)
    k: float  # its collectives per step (median over steps and ranks)
    nbytes: float  # bytes per collective (median; 0 when the trace has no byte counts)
    sizes: list[int]  # the message sizes of one typical step, in issue order
    dt_ns: float  # growth of one collective: treatment minus baseline fast-end quantile, in steps
    fit_b: CostFit
    fit_t: CostFit


def facts(
    gb: pl.DataFrame, gt: pl.DataFrame, all_b: pl.DataFrame, all_t: pl.DataFrame
) -> Facts | None:
    """The cost-model facts of a pair's collective rows in steps (``gb``, ``gt``: ``rank``,
    ``step``, ``name``, ``bytes``, ``dur_ns``, ``start_ns``), for the kernel that runs most often
    per step; its cost is fitted on every row of that kernel name in each run (``all_b``,
    ``all_t``: also outside steps, where barriers, near-zero-byte collectives of the same
    kernel, pin down the fixed cost)."""
    if gt.height == 0:
        return None
    per_step = gt.filter(pl.col("step").is_not_null()).group_by("name").agg(pl.len().alias("n"))
    if per_step.height == 0:
        return None
    name = str(per_step.sort("n", "name", descending=[True, False])["name"][0])
    steps = gt.filter((pl.col("name") == name) & pl.col("step").is_not_null())
    counts = steps.group_by("rank", "step").agg(pl.len().alias("k"))
    k = _median(counts["k"])
    nbytes = _median(steps["bytes"].drop_nulls())
    typical = counts.filter(pl.col("k") == int(round(k))).sort("rank", "step")
    sizes: list[int] = []
    if typical.height:
        first = typical.row(0, named=True)
        one = steps.filter((pl.col("rank") == first["rank"]) & (pl.col("step") == first["step"]))
        sizes = [int(b) for b in one.sort("start_ns")["bytes"].fill_null(0).to_list()]
    raw = [
        g.filter(pl.col("name") == name)["dur_ns"].quantile(QUANTILE, "linear") for g in (gb, gt)
    ]
    q = [float(v) if v is not None else 0.0 for v in raw]
    fb = fit_cost(all_b.filter(pl.col("name") == name))
    ft = fit_cost(all_t.filter(pl.col("name") == name))
    return Facts(name, k, nbytes, sizes, q[1] - q[0], fb, ft)


def _median(s: pl.Series) -> float:
    m = s.median()
    return float(m) if isinstance(m, (int, float)) else 0.0


def facts_of_pair(pair: Any) -> Facts | None:
    """:func:`facts` of an aligned pair (``ccdiag.pairing.Pair``)."""
    from ccdiag.rules import _expr as ex  # late: the rules import this module

    gb, gt = (
        s.gpu.filter(pl.col("gclass") == "collective") for s in (pair.baseline, pair.treatment)
    )
    every = (
        s.trace.events.filter(pl.col("kind").is_in(ex.GPU_KINDS) & (ex.gpu_class() == "collective"))
        for s in (pair.baseline, pair.treatment)
    )
    return facts(gb, gt, *every)


def cost_at_world_size(
    fb: CostFit, ft: CostFit, k: float, n: int, n_new: int, nbytes: float, dt: float
) -> tuple[float, float, str]:
    """CC growth of the collectives per step (low, high ns) at ring size ``n_new``, from what
    was measured at ``n``: the fixed cost per collective scales with the crypto operations
    (n−1), the bandwidth cost with the per-GPU ring traffic 2(n−1)/n (:func:`_tp_scale`).

    Returns:
        (low, high, method); low == high when the fits separate the fixed and per-byte parts.
    """
    f_fixed, f_ring = _tp_scale(n, n_new)
    g = _growth(fb, ft)
    if g is None or nbytes <= 0:
        lo, hi = sorted((f_fixed, f_ring))
        base = k * max(dt, 0.0)
        how = (
            f"{k:.0f} collectives/step x {dt / 1e3:+.2f} us growth each at n={n}; fixed and "
            f"per-byte parts not separable, so between x{lo:.2f} and x{hi:.2f} at n={n_new} "
            "((n'-1)/(n-1) crypto operations, 2(n'-1)/n' ring traffic)"
        )
        return base * lo, base * hi, how
    dfixed, dper_byte = g
    dbw = dper_byte * nbytes
    cost = k * (max(dfixed, 0.0) * f_fixed + max(dbw, 0.0) * f_ring)
    how = (
        f"{k:.0f} collectives/step x ({dfixed / 1e3:+.2f} us fixed x {f_fixed:.2f} + "
        f"{dbw / 1e3:+.2f} us bandwidth x {f_ring:.2f}) at n={n_new}"
    )
    return cost, cost, how
