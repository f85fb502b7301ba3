"""Helpers of the launch-toll rule (LA01): per-launch-path tolls read off matched calls.

For each launch path (``ccdiag.ledger.vocab.LAUNCH_PATHS``) the paid toll per call is

- **inside the call**: a robust fit ``Δdur = add + slope × baseline dur`` over the path's matched
  launch calls (real CC: the driver's encrypted submission lengthens the call; on H100 + TDX the
  calls scale, ×2.5, so the fit's slope carries it, not its constant);
- **beside the call**: the gap model's ``before + after`` for the path (an LD_PRELOAD emulator
  that spins before or after the runtime call), :class:`ccdiag.ledger.align.GapModel`.

No fit of unmatched distributions decides whether a toll exists: a mixture of tolled and untolled
paths is measured per path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ccdiag.ledger import control as ctl
from ccdiag.ledger import stats
from ccdiag.ledger import vocab as vc
from ccdiag.ledger.align import (
    HOLDS_SHARE,
    MIN_WINDOWS,
    GapModel,
    least_size_shift,
    lookup,
    step_part,
)
from ccdiag.ledger.context import PairContext
from ccdiag.ledger.removal import Removal, call_rows, within_growth
from ccdiag.units import duration


@dataclass(frozen=True)
class PathToll:
    """The toll measured on one launch path, per call (ns)."""

    path: str
    matched: int  # matched launch calls of the path
    per_step: float  # treatment launches of the path per step
    add_ns: float  # quantile fit of the matched durations: t = add + scale × b
    scale: float
    in_call_ns: float  # mean paid inside the call
    gap_ns: float  # paid in the host gaps beside the call
    z: float  # the larger z of its parts (each part is kept only at min_z or more)
    scaled_share: float  # share of the in-call cost that scales with the call's duration
    mean_t_ns: float  # mean treatment duration of the path's matched calls

    @property
    def paid_ns(self) -> float:
        return self.in_call_ns + self.gap_ns

    def row(self) -> dict[str, object]:
        return {
            "path": self.path, "matched_calls": self.matched,
            "launches_per_step": round(self.per_step, 1), "paid_per_call_ns": int(self.paid_ns),
            "in_call_ns": int(self.in_call_ns), "gap_ns": int(self.gap_ns),
            "quantile_fit": {"additive_ns": int(self.add_ns), "scale": round(self.scale, 3)},
            "scaled_share": round(self.scaled_share, 2),
            "z": round(self.z, 1) if np.isfinite(self.z) else None,
        }  # fmt: skip


def _in_call(mp: pl.DataFrame) -> tuple[float, float, float, float]:
    """Paid inside the call per matched call, its (robust) standard error, and the quantile fit
    ``t = add + scale × b`` of the path's matched durations (p10..p90) it is read from:
    ``add + (scale − 1) × mean b``. Quantiles see the shape (additive, scaled — a bimodal
    distribution whose two modes both scale —, or both) and ignore a few outliers (a launch that
    waited on a lock); regression to the mean does not bias them."""
    d = mp["d_dur"].to_numpy().astype(float)
    mad = float(np.median(np.abs(d - np.median(d)))) * 1.4826
    se = mad / np.sqrt(d.size) if d.size > 1 else np.inf
    qs = np.linspace(0.1, 0.9, 9)
    b = mp["b_dur"].to_numpy()
    qb, qt = np.quantile(b, qs), np.quantile(mp["t_dur"].to_numpy(), qs)
    scale, add = np.polyfit(qb, qt, 1) if np.ptp(qb) > 0 else (1.0, float(np.median(qt - qb)))
    return float(add + (scale - 1.0) * trimmed_mean(b)), float(se), float(add), float(scale)


def trimmed_mean(x: np.ndarray) -> float:
    """Mean of the p10..p90 range (the range the quantile fit sees: the first launch of a
    process, which loads modules, stays out)."""
    if x.size == 0:
        return 0.0
    lo, hi = np.quantile(x, [0.1, 0.9])
    kept = x[(x >= lo) & (x <= hi)]
    return float(kept.mean()) if kept.size else float(np.median(x))


def _path_gap(mp: pl.DataFrame, gaps: GapModel) -> tuple[float, float]:
    """A path's gap growth per call: its calls' keys' constants (before + after), weighted by
    the calls, and the variance of that mean."""
    n = mp.group_by("key").len().select(gaps.key("key").alias("k"), "len")
    n = n.group_by("k").agg(pl.col("len").sum())
    tot = float(n["len"].sum()) or 1.0
    mean = sum(gaps.per_call(k) * c for k, c in n.iter_rows()) / tot
    var = sum(gaps.var.get(k, np.inf) * c * c for k, c in n.iter_rows()) / tot**2
    return float(mean), float(var)


def _across_step(mp: pl.DataFrame, min_calls: int = 10) -> float | None:
    """The gap growth beside a path's launches that holds across the step: the larger of the
    median over the step's parts (:func:`ccdiag.ledger.align.step_part`) of the median growth
    of the gap before and of the gap after its calls; None with fewer than ``MIN_WINDOWS``
    parts of ``min_calls`` calls. A toll is paid by every launch of its path wherever it is in
    the step; growth beside them in part of the step only is not a toll (torchvision training,
    copies only: the runtime launches' gaps grew 11-14 µs in the first four tenths, after the
    blocking copy, and shrank in the rest: 0.6 µs across the step; a 12.25 µs toll spun
    before each: 11.3 µs)."""
    per = mp.group_by("part").agg(
        pl.len().alias("n"), pl.col("d_gap").median().alias("b"),
        pl.col("d_gap_after").median().alias("a"),
    ).filter(pl.col("n") >= min_calls)  # fmt: skip
    if per.height < MIN_WINDOWS:
        return None
    return max(float(per["b"].median() or 0.0), float(per["a"].median() or 0.0))


def _raw_beside(mp: pl.DataFrame) -> float:
    """The most a path's gap toll can be where it has too few calls to say whether its growth
    holds across the step (:func:`_across_step` is None): the median over its matched calls of
    the growth of the gap before and the gap after each (never below 0). A toll beside a call
    lengthens one of them in every step; the gap model's constants, fitted with the growth in
    proportion to the gaps' length, are not identified apart from it where a step holds a few
    calls (a CUDA-graph serving loop: three main-thread calls and one long host gap a step, a
    copies-only pair whose gaps beside the graph launch shrank by 4-16 µs got 32 µs before and
    after it). With the calls to check it across the step the bound is not needed, nor right
    where host noise moves time between the two gaps (an eager loop with a CPU neighbour: the
    gap before each tolled launch +6.2 µs, the gap after it -2.1 µs at the median)."""
    both = (mp["d_gap"] + mp["d_gap_after"].fill_null(0)).to_numpy()
    return max(float(np.median(both)), 0.0) if both.size else 0.0


def _z(x: float, var: float) -> float:
    return x / np.sqrt(var) if var > 0 else (np.inf if x > 0 else 0.0)


def path_tolls(
    matched: pl.DataFrame,
    gaps: GapModel,
    seq_t: pl.DataFrame,
    min_z: float,
    host_ratio: float | None = None,
    stretch: float | None = None,
) -> list[PathToll]:
    """The toll of every launch path with matched calls (parts below ``min_z`` count 0).

    In-call growth that scales with the call is a toll (real CC: H100 + TDX launch calls grew
    x2.5 on every path) except for the part that host code outside CUDA grew by too:
    ``host_ratio`` is the control (cpu_ops that make no CUDA call, treatment / baseline); up to
    that ratio a call's growth is slower host code (the profiler's slow mode, a loaded host),
    not a toll. Without a control (no cpu_ops) nothing is taken off: a scale on every path is
    what real CC shows, and the smallest toll a rule calls one (``min_toll_ns``) keeps small
    scalings out. ``stretch`` (:func:`stretched`): the gaps beside the launches stretched and
    did not shift, so no path pays a toll in them; without a cpu_op control it is the control."""
    if stretch is not None and host_ratio is None:
        host_ratio = stretch
    steps = max(seq_t.select("rank", "idx").unique().height, 1)
    # only the columns read below: a filter copies every column it keeps (1.3 M matched calls)
    cols = ["rank", "idx", "t_k", "cls", "path", "key", "b_dur", "t_dur", "d_dur", "d_gap"]
    launches = matched.select(*cols, "d_gap_after").with_columns(step_part())
    launches = launches.filter(pl.col("cls") == "launch")
    calls_on = dict(seq_t.group_by("path").len().iter_rows())  # treatment calls per path
    fits = {}
    # each path's launches in one pass over the rows (in their order), not a filter per path
    by_path = launches.partition_by("path", as_dict=True, maintain_order=True)
    for path in sorted(launches["path"].drop_nulls().unique().to_list()):
        mp = by_path[(path,)]
        if mp.height >= 3:
            fits[path] = (mp, *_in_call(mp), trimmed_mean(mp["b_dur"].to_numpy()))
    # the scaled part of each path's in-call growth (quantile fit) up to the host-code
    # control's ratio is slower host code (HS01 claims it), the rest a toll
    common = ctl.call_scale(matched, host_ratio)
    beside = {p: (*_path_gap(f[0], gaps), _across_step(f[0])) for p, f in fits.items()}
    # a toll in the gaps holds across the step on its path; when one path's does, the others'
    # gap constants stand (the growth after a tolled launch is split between its key and the
    # next call's: HF generate's untolled cuBLAS launches after tolled ones); when none does,
    # each path keeps what holds across the step (copies only: none). Only a path whose own gap
    # toll is one (MIN_TOLL_NS, min_z) vouches for the others: a CPU neighbour's 1.8 µs on
    # BLOOM's runtime launches, holding across the step, had kept 6.7 and 5.7 µs of its
    # library and memset paths that held in a third and a fifth of it (a 21 % false toll)
    held = any(
        a is None or a >= HOLDS_SHARE * g
        for g, var, a in beside.values()
        if g >= MIN_TOLL_NS and _z(g, var) >= min_z
    )
    out = []
    for path, (mp, in_call, se, add, scale, mean_b) in fits.items():
        in_call -= common * mean_b
        # each part counts when it stands out of its own noise (a whole-program trace's gaps
        # hold the app's own host code and are too noisy to say anything, its calls are not)
        gap, var_gap, across = beside[path]
        gap = gap if held or across is None else min(gap, max(across, 0.0))
        gap = min(gap, _raw_beside(mp)) if across is None else gap
        in_call = in_call if _z(in_call, se**2) >= min_z else 0.0
        gap = gap if _z(gap, var_gap) >= min_z and stretch is None else 0.0
        z = max(_z(in_call, se**2), _z(gap, var_gap)) if in_call or gap else 0.0
        n_t = calls_on.get(path, 0)
        grown = (scale - 1.0 - common) * mean_b
        share = float(np.clip(grown / in_call, 0.0, 1.0)) if in_call > 0 else 0.0
        out.append(
            PathToll(
                path,
                mp.height,
                n_t / steps,
                add,
                scale,
                in_call,
                gap,
                float(z),
                share,
                float(mp["t_dur"].mean() or 0.0),
            )  # fmt: skip
        )
    return out


#: LA01's defaults (its options read them): the smallest paid cost per launch called a toll, and
#: the z its parts need.
MIN_TOLL_NS, MIN_TOLL_Z = 2000, 4.0


def _beside(paths: set[str]) -> pl.Expr:
    """The call after the gap or the call before it is on ``paths`` (the launch path of each
    side's model key, ``_gk_path`` / ``_gp_path``: :meth:`GapModel.keyed`)."""
    on = pl.col("_gk_path").is_in(list(paths)) | pl.col("_gp_path").is_in(list(paths))
    return on.fill_null(False)


def path_tolls_of(ctx: PairContext, min_z: float, host_ratio: float | None) -> list[PathToll]:
    """:func:`path_tolls` of the pair's context, computed once per (``min_z``, ``host_ratio``)
    whoever asks (LA01, and HS01 to know which gaps sit beside a toll)."""
    key = f"rules._tolls.path_tolls:{min_z}:{host_ratio}"
    if key not in ctx.pair.derived:
        args = (ctx.matched, ctx.gap_fit, ctx.seq_t, min_z, host_ratio, stretched(ctx))
        ctx.pair.derived[key] = path_tolls(*args)
    return ctx.pair.derived[key]  # type: ignore[no-any-return]


#: The least scale of the gaps beside the launches (``PairContext.gap_shape``) that says they
#: stretched: HS01's smallest ratio of host-code time (``rules/_host.MIN_RATIO``).
MIN_STRETCH = 1.05


def stretched(ctx: PairContext) -> float | None:
    """The gaps' scale when the gaps beside every launch path stretched (each path's least scale,
    before and after its calls, at least ``MIN_STRETCH``) and none shifted (no path's shift,
    before or after, reaches the smallest toll, ``MIN_TOLL_NS``): host code that runs slower,
    not a toll in the gaps. None otherwise, or with no launch path of enough calls. A toll paid
    beside the calls shifts their gaps whatever else happens (HF ``generate()`` and serving
    loops with the toll spun before or after each launch: 8.6-18.4 µs, Kineto and nsys); a
    CPU-bound neighbour stretches them (GPT-J under nsys: x1.53-1.62, shifts -2.4 to -0.2 µs),
    which the gap model's per-call constants otherwise read as a toll of 9.2 µs per launch."""
    shape = ctx.gap_shape
    if shape["shift_ns"] is None or shape["shift_ns"] >= MIN_TOLL_NS:
        return None
    return float(shape["scale"]) if shape["scale"] >= MIN_STRETCH else None


def shape_evidence(ctx: PairContext) -> dict[str, Any]:
    """``PairContext.gap_shape`` for the evidence: per launch path the shift and scale of the
    gaps before and after its calls, and whether they stretched without shifting."""
    shape = ctx.gap_shape

    def side(fit: dict[str, Any]) -> dict[str, Any]:
        return {"shift_ns": int(fit["toll_ns"]), "scale": fit["slope"]}

    paths = [
        {
            "path": f["path"],
            "calls": f["calls"],
            "before": side(f["before"]),
            "after": side(f["after"]),
        }
        for f in shape["paths"]
    ]
    return {
        "stretched": stretched(ctx) is not None, "largest_shift_ns": shape["shift_ns"],
        "least_scale": shape["scale"], "paths": paths,
        "basis": "quantile fit t = shift + scale x b of the matched gaps before / after each "
        "launch path's calls: a toll beside the calls shifts them, slower host code stretches them",
    }  # fmt: skip


def host_control(ctx: PairContext, min_kinds: int) -> float | None:
    """How much slower host code got, for LA01 and HS01: the cpu_op control (cpu_ops that make
    no CUDA call, their mean time, treatment / baseline) with ``min_kinds`` kinds or more; else
    the gaps' stretch (:func:`stretched`); else None (nothing says)."""
    sd = ctx.slowdown
    if sd["op_kinds"] >= min_kinds:
        return float(sd["mean_ratio"])
    return stretched(ctx)


def tolled_gap_share(seq_t: pl.DataFrame, gaps: GapModel, paths: set[str]) -> float:
    """Share of the treatment's main-thread host gap time that sits beside a launch of a tolled
    path (``paths``): the call after the gap or the call before it is one of theirs."""
    if not paths or seq_t.height == 0:
        return 0.0
    # per distinct (key, prev_key): a few hundred rows, not one per call
    cells = seq_t.group_by("key", "prev_key").agg(pl.col("gap").clip(lower_bound=0).sum())
    cells = gaps.keyed(cells)
    tot = cells.select(pl.col("gap").sum()).item() or 0
    if tot <= 0:
        return 0.0
    near = cells.select(pl.when(_beside(paths)).then(pl.col("gap")).otherwise(0).sum())
    return float(near.item() or 0) / float(tot)


def tolled_paths(ctx: PairContext, host_ratio: float | None) -> set[str]:
    """The launch paths LA01 calls tolled at its default options (``MIN_TOLL_Z``,
    ``MIN_TOLL_NS``): what HS01 needs to know which host gaps sit beside a toll."""
    tolls = path_tolls_of(ctx, MIN_TOLL_Z, host_ratio)
    return {t.path for t in tolls if t.paid_ns >= MIN_TOLL_NS}


def gap_tolled_paths(ctx: PairContext, host_ratio: float | None) -> set[str]:
    """Of :func:`tolled_paths`, those whose toll LA01 takes from the host gaps beside the calls
    (an emulator's placement), not only inside them (real CC): HS01 leaves their constants."""
    tolls = path_tolls_of(ctx, MIN_TOLL_Z, host_ratio)
    return {t.path for t in tolls if t.paid_ns >= MIN_TOLL_NS and t.gap_ns > 0}


def _untolled_zero(seq_t: pl.DataFrame, gaps: GapModel, fired: set[str]) -> float:
    """The gap model's free direction (``before[k] + c``, ``after[k] - c`` for every key predict
    the same gaps) chosen so that the keys of no fired path, weighted by their calls, stay as
    close to 0 as they can: a removal of the tolls then takes what the tolled calls brought.
    The model's own choice (least size over *all* keys) splits a toll between the tolled call and
    an untolled neighbour when the two alternate: tp1_decode's one graph launch and one sync per
    step got before/after 59.9 / 30.2 µs and the sync -29.7 / 30.0 µs, so the removal took
    59.9 µs from the 89.9 µs growth before each graph launch."""
    cells = gaps.keyed(seq_t.group_by("key", "prev_key").len())
    n_b = dict(cells.group_by("_gk").agg(pl.col("len").sum()).iter_rows())
    n_a = dict(cells.group_by("_gp").agg(pl.col("len").sum()).iter_rows())
    others = sorted(k for k in set(gaps.before) | set(gaps.after) if k.split(":")[0] not in fired)

    def col(d: dict) -> np.ndarray:
        return np.array([float(d.get(k, 0.0)) for k in others])

    return least_size_shift(col(gaps.before), col(gaps.after), col(n_b), col(n_a))


def _side_effect(fired: set[str], h: float) -> pl.Expr:
    """ns per row of the toll's side effect on the host code beside its launches: of each gap
    before a launch next to a tolled one (the launch itself or the call before it on a fired
    path), what is left once the toll's constants are out, grown by ``h`` per ns
    (``h / (1 + h)`` of it). :func:`toll_removal` caps a step's matched gaps at what they grew."""
    beside = (pl.col("cls") == "launch") & _beside(fired)
    left = (pl.col("gap") - pl.col("rm_gap")).clip(lower_bound=0)
    return pl.when(beside).then(h / (1.0 + h) * left).otherwise(0.0)


def toll_removal(
    seq_t: pl.DataFrame,
    tolls: list[PathToll],
    gaps: GapModel,
    side_h: float = 0.0,
    matched: pl.DataFrame | None = None,
) -> tuple[Removal, pl.DataFrame, dict[str, float]]:
    """The treatment without the tolls of ``tolls`` (fired paths), and the paid ns per step.

    In the call: the path's mean paid cost, its scaled share spread in proportion to each call's
    duration; in the gaps: the path's ``before`` (gap before the call) and ``after``
    (gap before the next call). Each clipped to what the treatment's call or gap holds.
    Returns the removal, rank, idx, in_call, gap (ns per step), and the ns removed per launch
    path in all (a gap's removal split between the call after it and the call before it in
    proportion to their constants).
    """
    fired = {t.path: t for t in tolls}
    seq_t = seq_t.select("rank", "idx", "ev_row", "cls", "path", "dur", "gap", "key", "prev_key")
    keep = [k for k in gaps.before if k.split(":")[0] in fired]
    c = _untolled_zero(seq_t, gaps, set(fired))
    before = {k: gaps.before[k] + c for k in keep if fired[k.split(":")[0]].gap_ns}
    after = {k: gaps.after[k] - c for k in keep if fired[k.split(":")[0]].gap_ns}

    # per call: the path's mean paid in-call cost, its scaled share in proportion to the call's
    # own duration (a ×2.5 call pays in proportion), the rest as a constant
    mean = lookup("path", {p: t.in_call_ns for p, t in fired.items()})
    f = lookup("path", {p: t.scaled_share for p, t in fired.items()})
    mean_t = lookup("path", {p: max(t.mean_t_ns, 1.0) for p, t in fired.items()}).clip(1.0)
    on_path = pl.col("path").is_in(list(fired)).fill_null(False)
    # each lookup once per distinct path / key (a lookup hashes 1.3 M strings), gathered back
    r = vc.per_value(
        gaps.keyed(seq_t), "path", {"_m": mean, "_f": f, "_mt": mean_t, "_on": on_path}
    )
    r = vc.per_value(
        r, "_gk", {"_bg": lookup("_gk", before), "_bv": lookup("_gk", before).clip(0.0)}
    )
    r = vc.per_value(r, "_gp", {"_ag": lookup("_gp", after), "_av": lookup("_gp", after).clip(0.0)})
    mean, f, mean_t = pl.col("_m"), pl.col("_f"), pl.col("_mt")
    # at most 3x the path's mean: a call that was long for another reason (module loading in the
    # first launch) does not pay a toll in proportion to that
    per = pl.min_horizontal(mean * ((1.0 - f) + f * pl.col("dur") / mean_t), 3.0 * mean)
    in_call = pl.when(pl.col("_on")).then(per).otherwise(0.0)
    gap = pl.col("_bg") + pl.col("_ag")
    r = r.with_columns(
        in_call.clip(0, pl.col("dur")).round(0).cast(pl.Int64).alias("rm_dur"),
        gap.clip(0, pl.col("gap")).round(0).cast(pl.Int64).alias("rm_gap"),
    )
    if side_h > 0 and matched is not None and matched.height:
        r = r.with_columns(_side_effect(set(fired), side_h).alias("_side"))
        grew = matched.select(pl.col("t_ev_row").alias("ev_row"), pl.col("d_gap").alias("_grew"))
        r = vc.join_on_unique(r, grew, "ev_row")  # a call is matched once
        room, known = pl.col("_grew") - pl.col("rm_gap"), pl.col("_grew").is_not_null()
        r = within_growth(r, pl.col("_side"), room, known, "rm_side")
        r = r.with_columns(pl.col("rm_side").round(0).cast(pl.Int64))
    else:
        r = r.with_columns(pl.lit(0, dtype=pl.Int64).alias("rm_side"))
    r = r.with_columns(
        (pl.col("rm_gap") + pl.col("rm_side")).clip(0, pl.col("gap")).alias("rm_gap")
    )
    # only the columns kept: a filter copies every column (the keys' strings)
    calls = r.select("ev_row", "rm_dur", "rm_gap")
    calls = calls.filter((pl.col("rm_dur") > 0) | (pl.col("rm_gap") > 0))
    calls = call_rows(calls, dur=pl.col("rm_dur"), gap=pl.col("rm_gap"))
    per = r.group_by("rank", "idx").agg(
        pl.col("rm_dur").sum().alias("in_call"),
        pl.col("rm_gap").sum().alias("gap"),
        pl.col("rm_side").sum().alias("side_effect"),
    )
    own = (pl.col("_bv") / (pl.col("_bv") + pl.col("_av"))).fill_nan(0.5)
    parts = r.with_columns(
        (pl.col("rm_dur") + pl.col("rm_gap") * own).alias("_own"),
        (pl.col("rm_gap") * (1.0 - own)).alias("_prev"),
        # the call before in the step (seq_t's order: rank, idx, then call order)
        vc.in_step_shift(pl.col("path"), 1).alias("_prev_path"),
    )
    by_path = (
        pl.concat(
            [
                parts.select(pl.col("path").alias("p"), pl.col("_own").alias("ns")),
                parts.select(pl.col("_prev_path").alias("p"), pl.col("_prev").alias("ns")),
            ]
        )
        .group_by("p")
        .agg(pl.col("ns").sum())
    )
    taken = {p: float(ns) for p, ns in by_path.iter_rows() if p is not None}
    return Removal(calls=calls), per, taken


def side_effect_evidence(
    side: Any, side_h: float, per: pl.DataFrame, steps: int
) -> tuple[dict[str, Any], str]:
    """LA01's evidence and summary text of the toll's side effect (``rules/_host.SideEffect``,
    ``side_h`` as claimed; ``per``: :func:`toll_removal`'s per-step frame), empty when none."""
    side_ns = float(per["side_effect"].sum() or 0) / steps
    if side_h <= 0:
        return {}, ""
    ev = {
        "host_side_effect": {
            "gap_growth_per_ns": round(side_h, 4),
            "ns_per_step": int(side_ns),
            "tolled_gap_share": round(side.tolled_share, 3),
            "why": "host gaps beside the tolled launches grew in proportion to their length "
            "and no host code away from them is seen to grow (no cpu_op control, or it did "
            "not grow, or the gaps beside no explaining call did not): the toll's side "
            "effect, not slower host code (HS01 stays quiet)",
        }
    }
    text = (
        f"; of it {duration(side_ns)}/step host code beside the tolled launches that grew "
        f"{1 + side_h:.2f}x with the toll (no host-code control says host code got slower)"
        if side_ns > 0
        else ""
    )
    return ev, text


CALL = "inside the launch call"
GAP = "in the host gaps beside the launch"


def launch_calls(ctx: PairContext) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both runs' main-thread launch calls, with the columns :func:`evidence` reads (a filter
    copies every column it keeps: 45 of them, 1.3 M calls a side on the 200 MB nsys pair), and
    ``_kl`` / ``_graph``: a kernel or graph launch / a graph launch, matched once per name."""
    cols = ("rank", "step", "name", "cls", "eff_ns", "gap_ns", "gpu_name")
    flags = {"_kl": vc.is_kernel_launch(), "_graph": vc.is_graph_launch()}

    def side(calls: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
        c = calls.select(*cols, "ev_row").filter(pl.col("cls") == "launch")
        names = vc.event_names(ev).at(c.get_column("ev_row"))
        return vc.per_value(c, "name", flags, names).drop("ev_row")

    p = ctx.pair
    return side(ctx.calls_b, p.baseline.trace.events), side(ctx.calls_t, p.treatment.trace.events)


def _per_step(d: pl.DataFrame) -> dict[str, float]:
    """:func:`ccdiag.ledger.stats.per_step_median` of a side's launches, kernel launches and
    graph launches from one group-by (0 for an empty ``d``, as ``per_step_median`` gives)."""
    g = d.group_by("rank", "step").agg(
        pl.col("_kl").sum().alias("n"), pl.col("_graph").sum().alias("graphs"),
        pl.len().alias("all"),
    )  # fmt: skip
    return {c: vc.num(g[c].median()) for c in ("n", "graphs", "all")}


def evidence(
    lb: pl.DataFrame, lt: pl.DataFrame, tolls: list[PathToll], fired: list[PathToll], gaps: GapModel
) -> tuple[dict[str, Any], int, int]:
    """LA01's evidence, launches per step and graph launches per step (``lb``, ``lt``: from
    :func:`launch_calls`)."""
    kl = pl.col("_kl")  # kernel and graph launches (not memsets, device copies)
    # the three per-step medians of a side in one group-by; the launches' two columns filtered
    # once (a filter copies every column it keeps: the names' strings)
    per = {s: _per_step(d) for s, d in (("baseline", lb), ("treatment", lt))}
    lk = {
        s: d.select("eff_ns", "gap_ns", "_kl").filter(kl)
        for s, d in (("baseline", lb), ("treatment", lt))
    }
    n, graphs = int(per["treatment"]["n"]), int(per["treatment"]["graphs"])
    launches = {s: int(v["all"]) for s, v in per.items()}
    call_ns = {s: stats.percentiles(d["eff_ns"]) for s, d in lk.items()}
    gap_ns = {s: stats.percentiles(d["gap_ns"]) for s, d in lk.items()}
    where = [CALL] if any(t.in_call_ns > t.gap_ns for t in fired) else []
    where += [GAP] if any(t.gap_ns >= t.in_call_ns for t in fired) else []
    ev = {
        "launches_per_step": launches,
        "graph_launches_per_step": graphs,
        "per_launch_call_ns": call_ns,
        "pre_launch_gap_ns": gap_ns,
        "paths": [t.row() for t in tolls],
        "tolled_paths": [t.path for t in fired],
        "toll_per_call_ns": [{"api": t.path, "where": "all", "toll_ns": int(t.paid_ns)} for t in fired],
        "host_gap_growth": {"per_ns_of_gap": round(gaps.h, 4), "gaps_fitted": gaps.n},
        "toll_location": " + ".join(where),
        "top_kernels": stats.top_list(lt.filter(pl.col("gpu_name").is_not_null()), "gpu_name",
                                      launches=pl.len(), median_call_ns=pl.col("eff_ns").median()),
        "published": "B200 3.45 -> 15.7 us per launch; H100 (ISPASS) 4.9 -> 10.0 us median",
    }  # fmt: skip
    return ev, n, graphs
