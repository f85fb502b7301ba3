"""What every page says about a report, computed once so that no two pages disagree.

- **One delta per pair**: the per-step delta the attribution adds up to (the partition's
  total; the median per-step delta when the report has no partition). Shares, the verdict, the
  waterfall's total and the step-time figure all quote this number.
- **What fired**: a mechanism counts as found when its attributed time is at least
  :data:`NEGLIGIBLE_SHARE` of the delta. A rule that "fired" with ~0 ns is listed as such,
  never coloured, ranked or marked in the navigation.
- **Fixes**: one row per fix id (a fix proposed by two mechanisms is shown once, with the
  larger recovery); within one mechanism the best fix is the primary and the others are
  *alternatives* to it (instead of, not in addition to); fixes predicted to recover ~0 are
  kept aside with the reason; the combined recovery of the primaries is capped at the delta.

Plain Python on the Report model (no Dash, no plotly); code defensively: fields the engine adds
later (``paid_ns_per_step`` ...) are not needed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ccdiag.app.units import fmt_ns, fmt_share, mechanism_label

#: Attributed time or predicted recovery below this share of the delta reads as "0 %".
NEGLIGIBLE_SHARE = 0.005


def delta_ns(report: Any) -> int:
    """The pair's one per-step delta (ns)."""
    part = getattr(report, "partition", None)
    if part is not None and getattr(part, "total_ns_per_step", None) is not None:
        return int(part.total_ns_per_step)
    return int(report.step_ns.delta)


def delta_basis(report: Any) -> str:
    """How the delta was aggregated (the partition's basis)."""
    part = getattr(report, "partition", None)
    return str(part.basis) if part is not None and part.basis else "median per-step delta"


def delta_text(report: Any) -> str:
    """``+1.61 ms per step``."""
    return f"{fmt_ns(delta_ns(report), True)} per step"


def share_of_delta(report: Any, ns: float) -> float:
    """``ns`` as a share of the delta (0 when the delta is not positive)."""
    d = delta_ns(report)
    return ns / d if d > 0 else 0.0


def is_negligible(report: Any, ns: float) -> bool:
    """Too small to draw, rank or mark: at most 0, or under 0.5 % of a positive delta."""
    return ns <= 0 or share_of_delta(report, ns) < NEGLIGIBLE_SHARE


def found(report: Any) -> list[Any]:
    """The attributions that explain a real part of the delta, largest first."""
    atts = [a for a in report.attribution if not is_negligible(report, a.ns_per_step)]
    return sorted(atts, key=lambda a: -a.ns_per_step)


def found_mechanisms(report: Any) -> set[str]:
    """Ids of the mechanisms :func:`found` returns."""
    return {a.mechanism for a in found(report)}


def fired_with_nothing(report: Any) -> list[Any]:
    """Attributions whose rule fired but whose time is ~0 (or negative)."""
    keep = found_mechanisms(report)
    return [a for a in report.attribution if a.mechanism not in keep]


def verdict_line(report: Any) -> str:
    """The one-line verdict, from the same delta and formatter as every page."""
    st = report.step_ns
    head = (
        f"treatment {st.ratio:.2f}x the baseline (median step {fmt_ns(st.baseline)} → "
        f"{fmt_ns(st.treatment)}); delta {delta_text(report)}"
    )
    atts = found(report)
    if not atts:
        return head + ": no mechanism explains a measurable part of it"
    parts = ", ".join(
        f"{mechanism_label(a.mechanism)} {fmt_share(share_of_delta(report, a.ns_per_step))}"
        for a in atts
    )
    return f"{head}: {parts}"


@dataclass
class Fix:
    """One fix as the pages show it."""

    fix: str
    text: str
    method: str
    ns: int
    share: float  # of the delta, capped at 1
    mechanism: str  # the mechanism it recovers time from
    alternative_to: str | None = None  # the primary fix of the same mechanism
    also: list[str] = field(default_factory=list)  # other mechanisms that proposed it
    rank: str = ""  # "#1", "#2", "#2 alt" ...
    negligible: bool = False


@dataclass
class Fixes:
    """Every fix of a report, ordered and marked."""

    shown: list[Fix]
    hidden: list[Fix]  # predicted to recover ~0
    combined_ns: int  # the primaries together, capped at the delta
    capped: bool  # the primaries summed past the delta
    top_without_fix: Any = None  # the top found mechanism, when no shown fix recovers its time

    @property
    def primaries(self) -> list[Fix]:
        return [f for f in self.shown if f.alternative_to is None]


def _owned(report: Any) -> list[tuple[str, Any]]:
    """(mechanism, recommendation) for every fix, from the attributions, then leftovers."""
    out = [(a.mechanism, r) for a in report.attribution for r in a.recommendations]
    seen = {(r.fix, r.text) for _, r in out}
    out += [("", r) for r in report.recommendations if (r.fix, r.text) not in seen]
    return out


def fixes(report: Any) -> Fixes:
    """The report's fixes, deduplicated, with alternatives marked and ~0 fixes set aside."""
    best: dict[str, Fix] = {}
    for mech, r in _owned(report):
        ns = int(r.predicted_recovery_ns_per_step)
        f = Fix(r.fix, r.text, r.method, ns, min(share_of_delta(report, ns), 1.0), mech)
        old = best.get(r.fix)
        if old is None:
            best[r.fix] = f
        elif ns > old.ns:
            f.also = [*old.also, old.mechanism] if old.mechanism else list(old.also)
            best[r.fix] = f
        elif mech and mech != old.mechanism:
            old.also.append(mech)
    every = list(best.values())
    for f in every:
        f.also = [m for m in dict.fromkeys(f.also) if m and m != f.mechanism]
        f.negligible = is_negligible(report, f.ns)
    shown = [f for f in every if not f.negligible]
    hidden = [f for f in every if f.negligible]
    # within a mechanism the largest fix is the primary, the others are alternatives to it
    by_mech: dict[str, list[Fix]] = {}
    for f in sorted(shown, key=lambda f: -f.ns):
        by_mech.setdefault(f.mechanism or f.fix, []).append(f)
    for group in by_mech.values():
        for alt in group[1:]:
            alt.alternative_to = group[0].fix
    primaries = sorted((g[0] for g in by_mech.values()), key=lambda f: -f.ns)
    ordered: list[Fix] = []
    for i, p in enumerate(primaries, start=1):
        p.rank = f"#{i}"
        ordered.append(p)
        for alt in by_mech[p.mechanism or p.fix][1:]:
            alt.rank = f"#{i} alt"
            ordered.append(alt)
    total = sum(p.ns for p in primaries)
    d = max(delta_ns(report), 0)
    top = found(report)[:1]
    top_without = None
    if top and not any(
        f.mechanism == top[0].mechanism or top[0].mechanism in f.also for f in shown
    ):
        top_without = top[0]
    return Fixes(ordered, hidden, min(total, d), total > d, top_without)


def no_fix_text(report: Any, a: Any) -> str:
    """What to say when the top mechanism has no fix with a predicted recovery."""
    return (
        f"The top mechanism, {mechanism_label(a.mechanism)} "
        f"({fmt_ns(a.ns_per_step)} per step, {fmt_share(share_of_delta(report, a.ns_per_step))} "
        "of the delta), has no fix with a predicted recovery; the fixes below address smaller "
        "parts of the delta. See its page for the evidence."
    )


def hidden_text(report: Any, f: Fix) -> str:
    """Why a fix is not ranked."""
    a = next((x for x in report.attribution if x.mechanism == f.mechanism), None)
    head = (
        f"{f.fix}: predicted to recover {fmt_ns(f.ns)} per step ({fmt_share(f.share)} of the delta)"
    )
    if a is None:
        return head
    if is_negligible(report, a.ns_per_step):
        return (
            f"{head} — {mechanism_label(a.mechanism)}, the mechanism it addresses, costs "
            f"{fmt_ns(a.ns_per_step)} per step here: nothing to recover"
        )
    return (
        f"{head} — {mechanism_label(a.mechanism)} costs {fmt_ns(a.ns_per_step)} per step here, "
        "but the prediction for this fix recovers none of it (see how it was predicted on the "
        f"mechanism's page): {f.method}"
    )


def unfixed(report: Any) -> list[Any]:
    """Found mechanisms that no ranked fix recovers time from, largest first."""
    shown = fixes(report).shown
    covered = {f.mechanism for f in shown} | {m for f in shown for m in f.also}
    return [a for a in found(report) if a.mechanism not in covered]


def unfixed_text(report: Any, a: Any) -> str:
    """One line for a found mechanism without a fix that has a predicted recovery."""
    return (
        f"{mechanism_label(a.mechanism)} ({fmt_ns(a.ns_per_step)} per step, "
        f"{fmt_share(share_of_delta(report, a.ns_per_step))} of the delta) has no fix with a "
        "predicted recovery."
    )
