"""Controls that are facts of the pair, not of a mechanism: how much slower host code got."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ccdiag.ledger.vocab import API_KINDS, COPY_OPS, SYNC_OPS, num


def _pure_host_ops(ev: pl.DataFrame, limit: int = 200_000) -> pl.DataFrame:
    """cpu_ops that contain no CUDA API call (on their thread) and are no copy / sync op.

    Only the first ``limit`` cpu_ops (by time) are looked at: a sample is enough for a ratio.
    """
    ops_all = ev.filter(pl.col("kind") == "cpu_op")
    if ops_all.height > limit:
        cut = ops_all["start_ns"].sort()[limit]
        ev = ev.filter(pl.col("start_ns") < cut)
    ops = ev.filter((pl.col("kind") == "cpu_op") & ~pl.col("name").is_in([*COPY_OPS, *SYNC_OPS]))
    ops = ops.select("pid", "tid", "name", "start_ns", "dur_ns").with_row_index("_i")
    if ops.height == 0:  # no op to test (Nsight Systems traces): the same empty result, at once
        api = ev.select("pid", "tid", "start_ns").clear()
    else:
        api = ev.select("kind", "pid", "tid", "start_ns").filter(pl.col("kind").is_in(API_KINDS))
        api = api.drop("kind")
    api = api.sort("start_ns")
    api = api.with_columns(pl.int_range(1, pl.len() + 1).over("pid", "tid").alias("k"))

    def count_at(col: pl.Expr) -> pl.DataFrame:
        x = ops.select("_i", "pid", "tid", col.alias("t")).sort("t")
        j = x.join_asof(
            api, left_on="t", right_on="start_ns", by=["pid", "tid"], check_sortedness=False
        )
        return j.select("_i", pl.col("k").fill_null(0))

    k0 = count_at(pl.col("start_ns")).rename({"k": "k0"})
    k1 = count_at(pl.col("start_ns") + pl.col("dur_ns")).rename({"k": "k1"})
    ops = ops.join(k0, on="_i").join(k1, on="_i")
    return ops.filter(pl.col("k1") == pl.col("k0"))


def host_slowdown(ev_b: pl.DataFrame, ev_t: pl.DataFrame) -> dict[str, Any]:
    """How much slower host code got, outside CUDA calls: the control for per-call tolls.

    Ratio treatment/baseline of the median duration of cpu_op kinds that contain no CUDA API call
    and are no copy or sync op (view, empty, as_strided, ...), the call-weighted median over kinds
    with at least 10 calls in both runs. CC adds no cost to them; when they slow down, so does all
    host code (CPU frequency, contention, profiler or emulator side effects). 1.0 when unknown.
    ``mean_ratio``: the ratio of their total time at the baseline's call counts (sees preemption).
    """

    def per(ev: pl.DataFrame) -> pl.DataFrame:
        ops = _pure_host_ops(ev)
        return ops.group_by("name").agg(
            pl.len().alias("n"),
            pl.col("dur_ns").median().alias("m"),
            pl.col("dur_ns").mean().alias("mean"),
        )

    j = per(ev_b).join(per(ev_t), on="name", suffix="_t")
    j = j.filter((pl.col("n") >= 10) & (pl.col("n_t") >= 10) & (pl.col("m") > 0))
    if j.height == 0:
        return {"ratio": 1.0, "mean_ratio": 1.0, "op_kinds": 0, "ops": []}
    j = j.with_columns((pl.col("m_t") / pl.col("m")).alias("r"))
    w = j.sort("r").with_columns((pl.col("n").cum_sum() / pl.col("n").sum()).alias("c"))
    ratio = float(w.filter(pl.col("c") >= 0.5)["r"][0])
    # the same ops' mean time, weighted by the baseline's calls: a neighbour that preempts the
    # thread now and then leaves the medians alone but not the means
    mean_ratio = num((j["mean_t"] * j["n"]).sum()) / max(num((j["mean"] * j["n"]).sum()), 1.0)
    ops = [
        {
            "op": r["name"],
            "calls": r["n"],
            "median_ns": {"baseline": int(r["m"]), "treatment": int(r["m_t"])},
        }
        for r in j.sort(["n", "name"], descending=[True, False]).head(5).iter_rows(named=True)
    ]
    return {
        "ratio": round(ratio, 3),
        "mean_ratio": round(mean_ratio, 3),
        "op_kinds": j.height,
        "ops": ops,
    }


def linear_quantiles(s: pl.Series, qs: np.ndarray) -> np.ndarray:
    """``[s.quantile(q, "linear") for q in qs]``, bit for bit, from one partition at the order
    statistics it reads (not a sort): polars' linear interpolation ``lo + (hi - lo) × frac`` at
    ``(n - 1) × q`` (checked equal on 27,000 random quantiles of integer and float series;
    numpy's ``np.quantile`` differs in the last bit in a few). A million launches' nine
    quantiles in 0.03 s, not 1.5 s. ``s``: no nulls; a float series holding NaN takes polars'
    own path."""
    if s.dtype.is_float() and bool(s.is_nan().any()):
        return np.array([s.quantile(q, "linear") for q in qs], dtype=float)
    v = s.to_numpy()
    at = [(v.size - 1) * float(q) for q in qs]
    # the order statistics read, not the whole sort (each is the same value either way)
    v = np.partition(v, sorted({i for f in at for i in (int(np.floor(f)), int(np.ceil(f)))}))
    out = np.empty(len(qs), dtype=float)
    for i, f in enumerate(at):
        lo, hi = int(np.floor(f)), int(np.ceil(f))
        a, b = float(v[lo]), float(v[hi])
        out[i] = a if lo == hi else a + (b - a) * (f - lo)
    return out


def toll_fit(base: pl.Series, treat: pl.Series) -> dict[str, Any]:
    """Fit treatment quantiles = toll + slope x baseline quantiles (p10..p90, least squares).

    A CC toll adds a constant to every call (``toll_ns`` > 0, slope ~1); host code that merely
    got slower scales them (toll ~0, slope > 1). Both at once give both.
    """
    b, t = base.drop_nulls(), treat.drop_nulls()
    if b.len() < 5 or t.len() < 5:
        return {"toll_ns": 0, "slope": 1.0}
    qs = np.linspace(0.1, 0.9, 9)
    qb, qt = linear_quantiles(b, qs), linear_quantiles(t, qs)
    if np.ptp(qb) <= 0:
        return {"toll_ns": int(np.median(qt - qb)), "slope": 1.0}
    slope, toll = np.polyfit(qb, qt, 1)
    return {"toll_ns": int(toll), "slope": round(float(slope), 3)}


#: Matched launch calls a launch path needs to serve as the control of in-call growth.
CONTROL_CALLS = 50


def call_scale(matched: pl.DataFrame, host_ratio: float | None) -> float:
    """Growth per ns of call that slower host code explains, not a toll: the least scale of the
    launch paths' matched durations (quantile fit, paths with :data:`CONTROL_CALLS` calls or
    more) up to the host-code control's ratio (``host_ratio``: cpu_ops that make no CUDA call,
    treatment / baseline; None without a control: then 0, nothing is taken off a toll).

    The launch-toll rule takes it off its in-call growth; the host-code rule claims it (a
    CPU-bound neighbour lengthens the calls as well as the gaps between them)."""
    if not host_ratio or host_ratio <= 1.0:
        return 0.0
    launches = matched.select("cls", "path", "b_dur", "t_dur")
    launches = launches.filter((pl.col("cls") == "launch") & pl.col("path").is_not_null())
    rates = []
    for _path, mp in launches.group_by("path"):
        if mp.height >= CONTROL_CALLS:
            fit = toll_fit(mp["b_dur"], mp["t_dur"])
            rates.append(max(float(fit["slope"]) - 1.0, 0.0))
    return min(min(rates), host_ratio - 1.0) if rates else 0.0


def gap_shape(matched: pl.DataFrame) -> dict[str, Any]:
    """How the host gaps beside the kernel launches changed between the runs, per launch path:
    a quantile fit ``t = shift + scale × b`` (:func:`toll_fit`, p10..p90) of the gap before the
    path's matched launches and of the gap after them (launch paths with :data:`CONTROL_CALLS`
    calls or more). A toll paid beside the calls shifts the gaps (every gap grows by it, the
    shortest too); host code that runs slower (a CPU-bound neighbour, a slower CPU) stretches
    them (each grows in proportion to its length, the shortest little). ``shift_ns``: the
    largest shift of any path on either side; ``scale``: the least scale; ``paths``: their
    fits; ``shift_ns`` None when no path has enough calls (CUDA-graph steps)."""
    cols = ["path", "b_gap", "t_gap", "b_gap_after", "t_gap_after"]
    launches = matched.select("cls", *cols)
    launches = launches.filter((pl.col("cls") == "launch") & pl.col("path").is_not_null())
    fits = []
    for (path,), mp in sorted(launches.select(cols).group_by("path"), key=lambda g: str(g[0][0])):
        if mp.height >= CONTROL_CALLS:
            before = toll_fit(mp["b_gap"], mp["t_gap"])
            after = toll_fit(mp["b_gap_after"], mp["t_gap_after"])
            fits.append({"path": path, "calls": mp.height, "before": before, "after": after})
    if not fits:
        return {"shift_ns": None, "scale": None, "paths": []}
    sides = [f[s] for f in fits for s in ("before", "after")]
    return {
        "shift_ns": max(int(s["toll_ns"]) for s in sides),
        "scale": min(float(s["slope"]) for s in sides),
        "paths": fits,
    }
