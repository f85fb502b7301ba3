"""The attribution engine: run every rule on a pair and partition the per-step delta.

How the partition is built (per aligned step, then aggregated):

1. **Critical path ledger** (``rules/_expr.py``). Each step of the main host thread is tiled by
   labelled intervals (launch API, gaps before launches, copy API, sync API, setup API, other API,
   other gaps). Every host wait (a sync, or a copy call that covered its GPU copy) that ended on a
   GPU busy run makes a *GPU-critical window* from that run's start to the wait's end: there the
   GPU, not the host, was the critical path, and host work under it was hidden. The step is then
   exactly: exposed host time per category + GPU-critical time per GPU class (compute, collective,
   host copies, other copies, UVM, idle). So the deltas of the categories add up to the step delta.
2. **Claims.** Rules claim the growth of the categories their mechanism explains (LA01 the exposed
   launch time, CO01 the critical collective time, ...). Claims on one category never exceed its
   growth (scaled down pro rata): no double counting. What no rule claims is ``unattributed``.
   Extra host time the GPU hid never reaches the ledger; extra GPU time the host waited for does.
   **Interactions.** Where a rule declares that part of another mechanism's claim exists only
   because both act (``rules._base.Interaction``: padding exposed only because the copy blocked
   first), that part is split between the two (Shapley: half each), never more than the partner
   holds in that category. **Time shares** (``rules._base.TimeShare``): a CPU neighbour that
   takes ``s`` ns per ns the host thread runs takes as much of a toll's CPU time; the replay
   removes each mechanism at its measured size and cannot see it, so after the replay half of
   ``s`` × the partner's paid cost per step moves to the partner (``_time_share_pass``, noted).
3. **Slack.** When host growth made the host critical where the GPU was before, GPU-critical time
   shrinks while GPU work did not: that shrink (not explained by less GPU busy time) is taken back
   from the host-side parts in proportion to their growth (``hidden_by_gpu_slack``).
4. **Aggregate.** The steps whose total delta is in the lowest or highest 10 % are dropped
   (when there are at least 10 steps) and every part is averaged over the same steps, so the
   parts add up to the reported total; medians and p10–p90 per mechanism are reported too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from ccdiag import parallel
from ccdiag.ledger import vocab as vc
from ccdiag.ledger.stats import bootstrap_median_cis
from ccdiag.pairing import Pair, spread
from ccdiag.rules import REGISTRY
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext
from ccdiag.shapley import MAX_PLAYERS, ShapleyResult, replay_attribution
from ccdiag.units import duration
from ccdiag.verdict import (
    Attribution,
    LedgerRow,
    Partition,
    Recommendation,
    ReplayCheck,
    Report,
    RuleOutcome,
    StepPartition,
    TraceInfo,
)

UNATTRIBUTED = "unattributed"


@dataclass
class _Parts:
    """Per-step arrays (steps x parts) for one mechanism."""

    parts: dict[str, np.ndarray]

    def add(self, key: str, v: np.ndarray) -> None:
        self.parts[key] = self.parts.get(key, 0) + v

    def total(self, n: int) -> np.ndarray:
        return sum(self.parts.values(), np.zeros(n))


def _claims_matrix(
    findings: list[Finding], keys: pl.DataFrame
) -> dict[tuple[str, str], np.ndarray]:
    """(mechanism, category) -> per-step claimed ns, in the order of ``keys``."""
    out: dict[tuple[str, str], np.ndarray] = {}
    for f in findings:
        if f.claims.height == 0:
            continue
        c = f.claims.group_by("rank", "idx", "category").agg(pl.col("ns").sum())
        wide = c.pivot("category", index=["rank", "idx"], values="ns")
        j = keys.join(wide, on=["rank", "idx"], how="left").fill_null(0.0)
        for cat in wide.columns[2:]:
            out[(f.mechanism, cat)] = j[cat].to_numpy().astype(float)
    return out


def _mean_scale(given: np.ndarray, bound: float, keep: np.ndarray) -> float:
    """Factor that brings the mean of per-step amounts (``given``, >= 0) over the kept steps down
    to ``bound`` (>= 0) when it exceeds it: per-step clipping at zero turns noise into a positive
    mean, so every per-step clip is checked again on the means."""
    mean = float(given[keep].mean()) if keep.any() else 0.0
    return min(1.0, max(bound, 0.0) / mean) if mean > 0 else 1.0


def _claim_pass(
    ctx: RuleContext, mechs: list[str], claimed_by: dict, led: pl.DataFrame, keep: np.ndarray
) -> dict[str, _Parts]:
    """Claims on a category never exceed its growth: per step, and on the mean over the steps
    used (a category whose growth is noise around zero gives nothing on average)."""
    n = led.height
    parts = {m: _Parts({}) for m in [*mechs, UNATTRIBUTED]}
    for cat in ctx.categories:
        d = led[f"d_{cat}"].to_numpy().astype(float)
        claimed = sum((claimed_by.get((m, cat), np.zeros(n)) for m in mechs), np.zeros(n))
        pos = np.clip(d, 0, None)
        scale = np.where(
            claimed > pos, np.divide(pos, claimed, where=claimed > 0, out=np.zeros(n)), 1.0
        )
        scale = scale * _mean_scale(claimed * scale, float(d[keep].mean()) if n else 0.0, keep)
        given = np.zeros(n)
        for m in mechs:
            if (m, cat) in claimed_by:
                v = claimed_by[(m, cat)] * scale
                parts[m].add(cat, v)
                given += v
        parts[UNATTRIBUTED].add(cat, d - given)
    return parts


def shared_part(category: str, partner: str) -> str:
    """Name of the part that holds a category's time shared with ``partner`` (an interaction)."""
    return f"{category}, shared with {partner}"


def _category_of(part: str) -> str:
    return part.split(",", 1)[0]


def _interaction_pass(fired: list[Finding], parts: dict[str, _Parts], keys: pl.DataFrame) -> None:
    """Move the declared share of each interaction from the partner to the declaring finding,
    per step and category (``rules._base.Interaction``). Totals are unchanged."""
    n = keys.height
    for f in fired:
        for it in f.interactions:
            if it.partner not in parts or it.ns.height == 0:
                continue
            j = keys.join(
                it.ns.select(pl.col("rank").cast(pl.Int32), pl.col("idx").cast(pl.Int64), "ns"),
                on=["rank", "idx"],
                how="left",
            )
            size = np.clip(j["ns"].fill_null(0).to_numpy().astype(float), 0, None)
            held = np.clip(parts[it.partner].parts.get(it.category, np.zeros(n)), 0, None)
            moved = it.fraction * np.minimum(size, held)
            parts[it.partner].add(it.category, -moved)
            parts[f.mechanism].add(shared_part(it.category, it.partner), moved)


def _shrink(d: np.ndarray, d_busy: np.ndarray) -> np.ndarray:
    return np.clip(np.clip(-d, 0, None) - np.clip(-d_busy, 0, None), 0, None)


def _slack_pass(
    ctx: RuleContext,
    parts: dict[str, _Parts],
    led: pl.DataFrame,
    mechs: list[str],
    keep: np.ndarray,
) -> None:
    """GPU-critical time that shrank while GPU work did not: host growth hid it; take it back."""
    if ctx.host_only:
        return
    n = led.height
    d_gpu = sum((led[f"d_{c}"].to_numpy().astype(float) for c in vc.GPU_CATEGORIES), np.zeros(n))
    d_busy = (
        ctx.busy["d_all"].to_numpy().astype(float) if "d_all" in ctx.busy.columns else np.zeros(n)
    )
    shrink = _shrink(d_gpu, d_busy)
    if keep.any():
        mean_shrink = _shrink(np.array([d_gpu[keep].mean()]), np.array([d_busy[keep].mean()]))
        shrink = shrink * _mean_scale(shrink, float(mean_shrink[0]), keep)
    host = [c for c in vc.HOST_CATEGORIES]
    pos = {
        m: np.clip(
            sum((v for k, v in parts[m].parts.items() if _category_of(k) in host), np.zeros(n)),
            0,
            None,
        )
        for m in mechs
    }
    total = sum(pos.values(), np.zeros(n))
    taken = np.minimum(shrink, total)
    for m, p in pos.items():
        share = np.divide(p, total, where=total > 0, out=np.zeros(n))
        parts[m].add("hidden_by_gpu_slack", -taken * share)
    parts[UNATTRIBUTED].add("hidden_by_gpu_slack", taken)


PURE_HOST = ("launch_api", "gap_launch", "setup_api", "other_api", "gap_other")


def _hidden_host_pass(
    ctx: RuleContext, parts: dict[str, _Parts], led: pl.DataFrame, keep: np.ndarray
) -> None:
    """Host time that was exposed and is now hidden (its exposed time shrank): GPU-critical time
    grew over it, so that much of the GPU growth did not lengthen the step. Taken from the
    GPU-side parts in proportion to their growth, given back to the (negative) unattributed host
    parts. (Copy calls are left out: a copy that starts to block moves into a window by itself.)"""
    if ctx.host_only:
        return
    n = led.height
    loss = [-led[f"d_{c}"].to_numpy().astype(float) for c in (*PURE_HOST, "sync_api")]
    hidden = sum((np.clip(v, 0, None) for v in loss), np.zeros(n))
    if keep.any():
        mean_loss = sum(max(float(v[keep].mean()), 0.0) for v in loss)
        hidden = hidden * _mean_scale(hidden, mean_loss, keep)
    gpu = {
        m: np.clip(
            sum((p.parts.get(c, np.zeros(n)) for c in vc.GPU_CATEGORIES), np.zeros(n)), 0, None
        )
        for m, p in parts.items()
    }
    total = sum(gpu.values(), np.zeros(n))
    taken = np.minimum(hidden, total)
    for m, g in gpu.items():
        share = np.divide(g, total, where=total > 0, out=np.zeros(n))
        parts[m].add("host_work_hidden_by_gpu", -taken * share)
    parts[UNATTRIBUTED].add("host_work_hidden_by_gpu", taken)


def _keep_mask(delta: np.ndarray, trim: float = 0.1) -> np.ndarray:
    """Steps kept for the mean partition.

    From 10 steps on: a trimmed mean (the lowest and highest ``trim`` of the steps by total delta
    dropped). Below 10 a trim would drop nothing, so one disturbed step (a preempted host, a
    page-cache miss: hf_generate_llama_after's sixth step grew 36 ms against 14–20 ms for the
    other five, all of it outside any CUDA call) would carry the mean; from 5 steps on, a step
    whose delta is an outlier by the modified z-score (``_OUTLIER_Z``, Iglewicz & Hoaglin) is
    dropped instead. Dropped steps are counted in the report's basis and marked in ``steps``.
    """
    n = delta.size
    keep = np.ones(n, dtype=bool)
    if n >= 10:
        k = int(np.floor(n * trim))
        order = np.argsort(delta, kind="stable")
        keep[order[:k]] = False
        keep[order[n - k :]] = False
    elif n >= 5:
        med = float(np.median(delta))
        mad = float(np.median(np.abs(delta - med)))
        if mad > 0:
            keep = 0.6745 * np.abs(delta - med) / mad <= _OUTLIER_Z
    return keep


#: Modified z-score above which a step's delta is an outlier (Iglewicz & Hoaglin's 3.5).
_OUTLIER_Z = 3.5


def _trace_info(side: Any, steps: int) -> TraceInfo:
    m = side.trace.meta
    meta = m.model_dump(
        exclude={"source", "format", "profiler", "skipped", "warnings", "files", "extra"}
    )
    return TraceInfo(
        source=m.source,
        format=m.format,
        profiler=m.profiler,
        steps=steps,
        step_marker=m.step_marker,
        metadata={k: v for k, v in meta.items() if v not in (None, [], {})},
        skipped=dict(m.skipped),
    )


def _ledger_rows(ctx: RuleContext, keep: np.ndarray) -> tuple[list[LedgerRow], list[LedgerRow]]:
    led = ctx.ledger.filter(pl.Series(keep))

    def mean(c: str) -> int:
        return int(led[c].mean() or 0)

    rows = [
        LedgerRow(
            category=c,
            side="gpu" if c.startswith("gpu_") else "host",
            baseline=mean(f"b_{c}"),
            treatment=mean(f"t_{c}"),
            delta=mean(f"d_{c}"),
            baseline_total=mean(f"b_{c}_total") if f"b_{c}_total" in led.columns else None,
            treatment_total=mean(f"t_{c}_total") if f"t_{c}_total" in led.columns else None,
        )
        for c in ctx.categories
    ]
    gpu: list[LedgerRow] = []
    if not ctx.host_only:
        busy = ctx.busy.filter(pl.Series(keep))
        gpu = [
            LedgerRow(
                category=c,
                side="gpu",
                baseline=int(busy[f"b_{c}"].mean() or 0),
                treatment=int(busy[f"t_{c}"].mean() or 0),
                delta=int(busy[f"d_{c}"].mean() or 0),
            )
            for c in (*vc.GPU_CLASSES, "all")
        ]
    return rows, gpu


def _confidence(f: Finding, pair: Pair) -> Literal["low", "medium", "high"]:
    """The rule's confidence, lowered for host-only evidence and for deltas within the noise
    (single-step pairs keep the rule's: their per-event evidence is stronger than the assumed CI)."""
    if pair.mode == "host_only" or (
        not pair.step_times.significant and pair.step_times.n_steps >= 3
    ):
        return "low"
    return f.confidence


def _fmt(ns: float) -> str:
    return duration(ns)


def _signed(ns: float) -> str:
    """``+1.61 ms`` / ``-300.0 µs``: never ``+-`` (a treatment faster than its baseline)."""
    return ("+" if ns >= 0 else "-") + _fmt(abs(ns))


def _verdict(total: int, atts: list[Attribution], pair: Pair, steady: int) -> str:
    st = pair.step_times
    if not st.significant:
        line = (
            f"no significant slowdown: delta {_fmt(st.delta)}/step is within the noise "
            f"(95% CI {_fmt(st.delta_ci95[0])}..{_fmt(st.delta_ci95[1])})"
        )
        sure = [
            a for a in atts if a.confidence == "high" and a.ns_per_step > 0.05 * abs(st.baseline)
        ]
        if pair.whole_program and sure:
            line += "; per-event evidence: " + ", ".join(
                f"{a.mechanism} {_signed(a.ns_per_step)}" for a in sure
            )
        return line
    head = f"treatment is {st.ratio:.2f}x the baseline ({_signed(total)}/step)"
    ranked = [a for a in atts if a.ns_per_step > 0.005 * abs(total)]  # below 0.5 %: not named
    if not ranked:
        return head + "; no mechanism explains it"
    top = ", ".join(f"{a.mechanism} {a.share:.0%}" for a in ranked[:3])
    if pair.whole_program and any(a.mechanism == "one_time_setup" for a in ranked):
        steady_top = [a for a in ranked if a.mechanism != "one_time_setup"][:1]
        tail = f"; steady state {_signed(steady)}" + (
            f", led by {steady_top[0].mechanism}" if steady_top else ""
        )
        return head + f": {top}{tail}"
    return head + f": {top}"


HIDING_PARTS = ("hidden_by_gpu_slack",)


def _hidden_notes(
    claimed_by: dict[tuple[str, str], np.ndarray],
    given: dict[str, float],
    parts: dict[str, _Parts],
    keep: np.ndarray,
    total: int,
) -> list[str]:
    """Mechanisms whose evidence costs much more than lengthened the step: the rest ran under
    other critical-path work (claims beyond their categories' growth; host growth the GPU's
    slack absorbed). Said, so a small attribution is not read as a small cost: its fix recovers
    little until the work that covers it is fixed too. Shares moved to a partner by an
    interaction, and host work a mechanism's GPU wait now covers, are not counted as hidden."""
    if not keep.any():
        return []
    raw: dict[str, float] = {}
    for (m, _cat), v in claimed_by.items():
        raw[m] = raw.get(m, 0.0) + float(v[keep].mean())
    out = []
    for m, r in sorted(raw.items(), key=lambda kv: -kv[1]):
        hid = r - given.get(m, 0.0)
        hid -= sum(
            float(parts[m].parts[k][keep].mean()) for k in HIDING_PARTS if k in parts[m].parts
        )
        if r >= 0.05 * abs(total) and hid > max(0.25 * r, 0.02 * abs(total)):
            out.append(
                f"{m}: its evidence costs {_fmt(r)}/step in the treatment, {_fmt(hid)} of which did "
                "not lengthen the step (it ran under other critical-path work); fixing it alone "
                "recovers about its attributed time, more once the work that covered it is fixed"
            )
    return out


def _slowdown_warning(ctx: RuleContext, keep: np.ndarray, total: int) -> str | None:
    """A warning when host code outside CUDA calls got slower in the treatment, with what that
    would cost: (ratio - 1) x the baseline's exposed host time outside API calls."""
    if ctx.op_mode or not keep.any():
        return None
    slow = ctx.slowdown
    led = ctx.ledger.filter(pl.Series(keep))
    host = float(led["b_gap_launch"].mean() or 0) + float(led["b_gap_other"].mean() or 0)
    cost = (slow["ratio"] - 1.0) * host
    if slow["op_kinds"] >= 3:
        basis = f"host code that makes no CUDA call ran {slow['ratio']:.2f}x slower in the "
        basis += f"treatment ({slow['op_kinds']} cpu_op kinds)"
    elif slow.get("gap_slope"):
        cost = (slow["gap_slope"] - 1.0) * host
        basis = (
            f"the host gaps before launches scale {slow['gap_slope']:.2f}x between the runs "
            "beyond any fixed toll (quantile fit; no cpu_ops in the traces to check host code "
            "directly)"
        )
    else:
        return None
    ratio = slow.get("gap_slope") if slow["op_kinds"] < 3 else slow["ratio"]
    if ratio is None or ratio < 1.05 or (ratio < 1.1 and cost < 0.05 * max(total, 1)):
        return None
    return (
        f"{basis}: not a CC mechanism in ccdiag's model (CPU frequency, contention, profiler or "
        f"emulator side effects); at the baseline's {_fmt(host)}/step of host time outside CUDA "
        f"calls that could be up to ~{_fmt(max(cost, 0.0))}/step; ccdiag leaves it unattributed "
        "(the launch toll is only the fitted fixed cost per launch)"
    )


def _replay_pass(pair: Pair, fired: list[Finding], total: float) -> ShapleyResult | None:
    """Shapley values by counterfactual replay of the fired mechanisms that measured a removal
    paying at least 1 % of the delta (the :data:`MAX_PLAYERS` largest; the others keep their
    ledger share)."""
    floor = max(0.01 * abs(total), 1000.0)
    rem = {f.mechanism: f.removal for f in fired if f.removal is not None}
    n = max(pair.aligned.height, 1)
    rem = {m: r for m, r in rem.items() if r.paid_ns() / n >= floor}  # type: ignore[union-attr]
    if not rem or pair.mode == "host_only":
        return None
    top = sorted(rem, key=lambda m: -rem[m].paid_ns())[:MAX_PLAYERS]  # type: ignore[union-attr]
    return replay_attribution(pair, {m: rem[m] for m in top})  # type: ignore[misc]


#: The replay is kept when it leaves at most this share of the delta unexplained, or less than
#: the ledger does.
REPLAY_RESIDUAL = 0.10


def _replay_or_ledger(
    rp: ShapleyResult | None, ledger: dict[str, int], total: int, keep: np.ndarray
) -> tuple[ShapleyResult | None, str | None]:
    """The replay result, or None (the ledger partition stays) when the counterfactual replay
    cannot reproduce what the mechanisms' removal should give: removing every fired mechanism
    leaves more than :data:`REPLAY_RESIDUAL` of the delta in the replayed step while the ledger
    explains more of it (e.g. kernels slowed by UVM faults whose waits the replay does not
    move: 3DCONV's UVM build, 12.9 s paid, 6.0 s saved by the replay). The report says so."""
    if rp is None or total <= 0 or not keep.any():
        return rp, None
    phi = sum(float(v[keep].mean()) for v in rp.phi.values())
    outside = sum(v for m, v in ledger.items() if m not in rp.phi)
    left = total - phi - outside
    left_ledger = total - sum(ledger.values())
    if left <= REPLAY_RESIDUAL * total or abs(left_ledger) >= abs(left):
        return rp, None
    return None, (
        f"replay: removing every fired mechanism saves {_fmt(phi)}/step of the "
        f"{_fmt(total)}/step delta; the critical-path ledger explains more "
        f"({_fmt(total - left_ledger)}/step), so the ledger partition is reported (the "
        "replay model does not reproduce this pair's removals)"
    )


def _scale_to_delta(claimed: float, room: float) -> float:
    """The one factor both kinds of claims are scaled by: 1 when what they claim fits in the
    ``room`` the measured delta leaves them, else ``room / claimed`` (0 when there is none)."""
    if claimed <= 0 or claimed <= room:
        return 1.0
    return max(room, 0.0) / claimed


def _overshoot(
    rp: ShapleyResult | None, means: dict[str, int], total: int, keep: np.ndarray
) -> tuple[float, str | None]:
    """The factor the replay's Shapley values are scaled by, and the note that says so.

    The players' values add up to ``v(N)``, what removing all of them saves in the replay. When
    that (with the ledger shares of the mechanisms outside the replay) exceeds the measured
    delta, the removals took out more than the treatment added (the replay without them is
    faster than the baseline): the split between the mechanisms is the replay's, its size the
    measured delta's, and the report says by how much the replay overshot. Below the delta the
    values stand and the rest is unattributed."""
    if rp is None or total <= 0 or not keep.any():
        return 1.0, None
    phi = sum(float(v[keep].mean()) for v in rp.phi.values())
    room = total - max(sum(v for m, v in means.items() if m not in rp.phi), 0)
    f = _scale_to_delta(phi, room)
    if f == 1.0:
        return 1.0, None
    if f >= 0.995:  # the values move by less than 0.5 %: scaled, not worth a note ("by 1.00")
        return f, None
    return f, (
        f"replay: removing every fired mechanism saves {_fmt(phi)}/step, more than the measured "
        f"delta leaves them ({_fmt(max(room, 0))}/step); their Shapley values are scaled by "
        f"{f:.2f} to the measured delta (the split between them is the replay's)"
    )


def _host_only_overshoot(
    pair: Pair, rp: ShapleyResult | None, means: dict[str, int], total: int
) -> tuple[float, str | None]:
    """A host-only pair's claims scaled to the measured delta when they add up to more, like the
    replay's (:func:`_overshoot`, the same :func:`_scale_to_delta`): the host path is the
    critical path, each claim is a call's measured growth, and the same pair with its GPU trace
    is partitioned that way (ISPASS kmeans: setup +1.00 s in a 0.92 s delta)."""
    if pair.mode != "host_only" or rp is not None or total <= 0:
        return 1.0, None
    if any(v < 0 for v in means.values()):
        return 1.0, None
    pos = sum(means.values())
    f = _scale_to_delta(pos, total)
    if f == 1.0:
        return 1.0, None
    return f, (
        f"host-only pair: the mechanisms' measured growth adds up to {_fmt(pos)}/step, more than "
        f"the measured delta ({_fmt(total)}/step: other host time shrank); each is scaled by "
        f"{f:.2f} to the delta"
    )


def _time_share_pass(
    fired: list[Finding], per_mech: dict[str, np.ndarray], paid: dict[str, int], keep: np.ndarray
) -> tuple[set[str], list[str]]:
    """Each finding's :class:`rules._base.TimeShare`: half of ``share`` × a fired partner's paid
    ns per step moves from the finding's part to the partner's (the Shapley value of the
    interaction the replay cannot see), at most what the finding holds in each step. Returns
    the mechanisms whose parts changed and a note per move."""
    changed: set[str] = set()
    notes: list[str] = []
    for f in fired:
        ts = f.time_share
        if ts is None or f.mechanism not in per_mech:
            continue
        for partner in ts.partners:
            if partner not in per_mech or not paid.get(partner):
                continue
            held = np.clip(per_mech[f.mechanism], 0.0, None)
            d = np.minimum(0.5 * ts.share * float(paid[partner]), held)
            per_mech[f.mechanism] = per_mech[f.mechanism] - d
            per_mech[partner] = per_mech[partner] + d
            changed |= {f.mechanism, partner}
            moved = float(d[keep].mean()) if keep.any() else 0.0
            notes.append(
                f"{f.mechanism} cost the host thread {ts.share:.2f} ns per ns it ran, so as "
                f"much per ns of {partner}'s CPU time ({duration(paid[partner])}/step paid): "
                f"half of that, {duration(moved)}/step, is {partner}'s (Shapley; the replay "
                "removes each mechanism at its measured size and cannot see it)"
            )
    return changed, notes


def _paid(
    claimed_by: dict[tuple[str, str], np.ndarray], keep: np.ndarray, fired: list[Finding], n: int
) -> dict[str, int]:
    """What each mechanism costs in the treatment per step: its removal's total (measured on
    matched calls, gaps, GPU rows) per aligned step, else its raw ledger claims."""
    out: dict[str, int] = {}
    for (m, _cat), v in claimed_by.items():
        out[m] = out.get(m, 0) + int(round(v[keep].mean())) if keep.any() else 0
    for f in fired:
        if f.removal is not None and n:
            out[f.mechanism] = int(round(f.removal.paid_ns() / n))
    return out


def _replay_check(rp: ShapleyResult | None, pair: Pair, keep: np.ndarray) -> ReplayCheck | None:
    use = keep & rp.measured if rp is not None else keep
    if rp is None or not use.any():
        return None
    a = pair.aligned.filter(pl.Series(use))
    return ReplayCheck(
        measured_treatment_ns_per_step=int(a["t_ns"].mean() or 0),
        replayed_treatment_ns_per_step=int(rp.replayed[use].mean()),
        replayed_without_all_ns_per_step=int(rp.without_all[use].mean()),
        baseline_ns_per_step=int(a["b_ns"].mean() or 0),
        replays=rp.replays,
        mechanisms=sorted(rp.phi),
        steps_replayed=int(rp.measured.sum()),
    )


def _disagreements(atts: list[Attribution], total: int) -> list[str]:
    """Where the replay's Shapley value and the critical-path ledger disagree (cross-check)."""
    out = []
    for a in atts:
        if a.method != "replay_shapley" or a.ledger_ns_per_step is None:
            continue
        gap = a.ns_per_step - a.ledger_ns_per_step
        big = max(abs(a.ns_per_step), abs(a.ledger_ns_per_step))
        if abs(gap) > max(0.03 * abs(total), 0.25 * big, 1000):
            out.append(
                f"{a.mechanism}: replay attributes {_fmt(a.ns_per_step)}/step, the critical-path "
                f"ledger {_fmt(a.ledger_ns_per_step)}/step (replay alone {_fmt(a.alone_ns_per_step or 0)}"
                "; the replay's Shapley value splits interactions the ledger cannot see, the ledger "
                "sees overlaps the replay model simplifies)"
            )
    return out


def diagnose_pair(
    pair: Pair,
    rules: tuple[type[Rule], ...] | None = None,
    rule_options: dict[str, dict[str, Any]] | None = None,
) -> Report:
    """Run the rules on a pair and build the report (the partition of the per-step delta).

    Args:
        pair: an aligned pair from :func:`ccdiag.pairing.pair_traces`.
        rules: rule classes to run (default: the registry).
        rule_options: per rule code, option overrides.

    Returns:
        The validated report.
    """
    from ccdiag import __version__

    ctx = RuleContext.of(pair)
    ctx.warm()
    opts = rule_options or {}
    instances = [r(**opts.get(r.code, {})) for r in (rules or REGISTRY)]
    # the rules are independent of each other (they read the shared context): side by side
    runs = parallel.run_all([lambda r=r: r.run(ctx) for r in instances])  # type: ignore[misc]
    outcomes: list[tuple[Rule, Outcome]] = list(zip(instances, runs))
    fired = [(r, o.finding) for r, o in outcomes if o.status == "fired" and o.finding is not None]
    findings = [f for _, f in fired]
    mechs = [f.mechanism for f in findings]
    led = ctx.ledger
    keys = led.select("rank", "idx")
    claimed_by = _claims_matrix(findings, keys)
    n = led.height
    delta = led["d_step_ns"].to_numpy().astype(float)
    keep = _keep_mask(delta)
    parts = _claim_pass(ctx, mechs, claimed_by, led, keep)
    given = {m: float(parts[m].total(n)[keep].mean()) if n else 0.0 for m in mechs}
    _interaction_pass(findings, parts, keys)
    _slack_pass(ctx, parts, led, mechs, keep)
    _hidden_host_pass(ctx, parts, led, keep)

    total = int(round(delta[keep].mean())) if n else 0
    per_mech = {m: parts[m].total(n) for m in parts}
    means = {m: int(round(v[keep].mean())) for m, v in per_mech.items() if m != UNATTRIBUTED}
    ledger_means = dict(means)
    rp = _replay_pass(pair, findings, float(delta[keep].mean()) if n else 0.0)
    rp_run = rp
    rp, fallback = _replay_or_ledger(rp, means, total, keep)
    overshoot = _overshoot(rp, means, total, keep)
    if rp is not None:
        for m, phi in rp.phi.items():
            per_mech[m] = phi * overshoot[0]
            means[m] = int(round(per_mech[m][keep].mean()))
    host_scale = _host_only_overshoot(pair, rp, means, total)
    if host_scale[1]:
        for m in means:
            per_mech[m] = per_mech[m] * host_scale[0]
            means[m] = int(round(per_mech[m][keep].mean()))
    paid = _paid(claimed_by, keep, findings, n)
    shared, share_notes = _time_share_pass(findings, per_mech, paid, keep)
    means.update({m: int(round(per_mech[m][keep].mean())) for m in shared})
    unattr = total - sum(means.values())
    per_mech[UNATTRIBUTED] = delta - sum((v for k, v in per_mech.items() if k != UNATTRIBUTED), 0)
    atts: list[Attribution] = []
    # each mechanism's per-step spread, the bootstraps from one draw of the resamples
    cis = bootstrap_median_cis([per_mech[m] for m in mechs])
    spreads = {m: spread(per_mech[m], ci) for m, ci in zip(mechs, cis)}
    for rule, f in fired:
        ns = means[f.mechanism]
        # a mechanism that adds nothing to the step gets no fix (CP02's drain thread on a pair
        # whose readbacks blocked already without CC: HELD-OUT-30's flag reads); a fix that a
        # costly mechanism's model says recovers nothing stays: that is advice too (DDP buckets)
        fixes = rule.recommend(ctx, f, ns, total) if ns > 0 else []
        by_replay = rp is not None and f.mechanism in rp.phi
        alone = int(round(rp.alone[f.mechanism][keep].mean())) if by_replay else None  # type: ignore[union-attr]
        scaled = int(round((alone or 0) * overshoot[0]))  # parts add up to ns_per_step
        built = (
            {"alone": scaled, "interactions": ns - scaled}
            if by_replay
            else {k: int(round(v[keep].mean())) for k, v in parts[f.mechanism].parts.items()}
        )
        atts.append(
            Attribution(
                mechanism=f.mechanism,
                rule=f.code,
                ns_per_step=ns,
                share=round(ns / total, 4) if total else 0.0,
                confidence=_confidence(f, pair),
                summary=f.summary,
                evidence=f.evidence,
                recommendations=fixes,
                spread=spreads[f.mechanism],
                parts=built,
                method="replay_shapley" if by_replay else "ledger",
                paid_ns_per_step=paid.get(f.mechanism),
                ledger_ns_per_step=ledger_means[f.mechanism],
                alone_ns_per_step=alone,
            )
        )
    atts.sort(key=lambda a: -a.ns_per_step)
    steady = total - means.get("one_time_setup", 0)
    ledger_rows, gpu_rows = _ledger_rows(ctx, keep)
    per_step = [
        StepPartition(
            rank=int(led["rank"][i]),
            index=int(led["idx"][i]),
            baseline_step=int(pair.aligned["b_step"][i]),
            treatment_step=int(pair.aligned["t_step"][i]),
            delta=int(delta[i]),
            kept=bool(keep[i]),
            parts={m: int(round(v[i])) for m, v in per_mech.items()},
        )
        for i in range(min(n, 1000))
    ]
    recs: list[Recommendation] = sorted(
        (r for a in atts for r in a.recommendations),
        key=lambda r: -r.predicted_recovery_ns_per_step,
    )
    hidden = _hidden_notes(claimed_by, given, parts, keep, total)
    warnings = list(pair.warnings)
    slow = None if "host_slowdown" in mechs else _slowdown_warning(ctx, keep, total)
    if slow:
        warnings.append(slow)
    if not pair.step_times.significant:
        warnings.append(
            "the per-step delta is within the noise: nothing here is a finding; repeat the runs"
        )
    dropped = n - int(keep.sum())
    why = (
        " (10% lowest and highest deltas dropped)"
        if n >= 10
        else f" ({dropped} outlier step{'s' if dropped > 1 else ''} dropped: modified z-score "
        f"of its delta > {_OUTLIER_Z})"
    )
    basis = f"mean over {n - dropped} of {n} aligned steps" + (why if dropped else "")
    return Report(
        ccdiag_version=__version__,
        baseline=_trace_info(pair.baseline, n),
        treatment=_trace_info(pair.treatment, n),
        step_ns=pair.step_times,
        attribution=atts,
        unattributed_ns_per_step=unattr,
        unattributed_share=round(unattr / total, 4) if total else 0.0,
        rules=[
            RuleOutcome(
                code=r.code, name=r.name, mechanism=r.mechanism, outcome=o.status, reason=o.reason
            )
            for r, o in outcomes
        ],
        recommendations=recs,
        warnings=warnings,
        notes=[*pair.dropped, *pair.notes, *hidden, *share_notes, *_disagreements(atts, total)]
        + [x for x in (fallback, overshoot[1], host_scale[1]) if x],
        mode="host_only" if pair.mode == "host_only" else "gpu",
        whole_program=pair.whole_program,
        partition=Partition(
            basis=basis,
            total_ns_per_step=total,
            steps_used=int(keep.sum()),
            steps_total=n,
            ledger=ledger_rows,
            gpu_busy=gpu_rows,
            per_step=per_step,
            steady_state_ns_per_step=steady,
            method="replay_shapley" if rp is not None else "ledger",
            replay=_replay_check(rp_run, pair, keep),
        ),
        verdict=_verdict(total, atts, pair, steady),
    )
