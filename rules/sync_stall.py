"""SY01 sync-stall."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _host_only as hx
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.ledger import stats
from ccdiag.ledger import vocab as vc
from ccdiag.ledger.removal import Removal, call_rows
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class SyncStall(Rule):
    """Every synchronization / readback costs a fixed extra stall, even when the GPU is idle.

    ## What it detects
    A higher cost per synchronize call (``cudaStreamSynchronize``, ``cudaEventSynchronize``,
    ``cudaDeviceSynchronize`` and driver equivalents) beyond the wait itself: the median *exposed*
    time per call (outside GPU-critical windows), compared like with like: syncs that found the GPU
    idle, and the wake-up of syncs that waited, each when both runs have at least three.

    ## Why it costs time
    Under CC completion is signalled through encrypted / authenticated paths; on H100 + TDX a sync
    costs 11–17 µs more per call. Steps with many readbacks (``.item()``, ``.cpu()``) pay it each
    time.

    ## Evidence
    Main-thread sync calls per aligned step and their duration percentiles per API name in both
    runs. Claims exposed ``sync_api`` time (sync calls while the GPU had nothing left to do) up to
    syncs per step × floor increase.

    ## Example
    ``tests/rules/cases/sync-stall.yaml`` ``fires_when_every_sync_costs_more``. Published (H100,
    ISPASS): ``cudaEventSynchronize`` median 4.1 → 15.4 µs; ``cudaDeviceSynchronize`` +13–17 µs.

    ## Fix
    - Fewer synchronizations per step: drop ``.item()`` in the loop, batch readbacks.
    - Move readbacks to a drain thread.

    ## Limits
    A sync that waits longer because the GPU is slower is not this rule: that wait is GPU-critical
    time and goes to the GPU-side mechanism. Few syncs per step make the floor estimate noisy.
    Host-only pairs: sync growth beyond the kernel-time growth of the summary tables; without
    kernel times for both runs, nothing (``rules/_host_only.py``).

    ## Options
    See below.

    ## References
    - ISPASS 2025 (H100, TDX): ``cudaEventSynchronize`` median 4.1 → 15.4 µs,
      ``cudaDeviceSynchronize`` median +13–17 µs.
    """

    code: ClassVar[str] = "SY01"
    name: ClassVar[str] = "sync-stall"
    mechanism: ClassVar[str] = "sync_stall"
    requires: ClassVar[frozenset[Kind]] = frozenset({Kind.RUNTIME})
    requires_gpu: ClassVar[bool] = False  # host-only pairs: see _host_only
    claimed: ClassVar[frozenset[str]] = frozenset({"sync_api"})
    call_classes: ClassVar[frozenset[str]] = frozenset({"sync"})

    @dataclass(frozen=True)
    class Options:
        min_floor_ns: int = opt(2000, "Smallest increase of exposed sync time per call (ns).")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only:  # no GPU trace in the treatment: rules/_host_only.py
            return hx.sync_stall_outcome(self, ctx)
        sb, st = (c.filter(pl.col("cls") == "sync") for c in (ctx.calls_b, ctx.calls_t))
        if sb.height == 0 or st.height == 0:
            return Outcome.clean("no synchronize calls on the main thread")
        idle = (pl.col("exposed_ns") >= pl.col("b") - pl.col("a")).alias("idle")
        eb, et = (ctx.exposed_calls(p, "sync").with_columns(idle) for p in ("b", "t"))
        inc: dict[bool, float] = {}
        for cls in (True, False):  # syncs on an idle GPU; syncs that waited (their wake-up)
            xb, xt = eb.filter(pl.col("idle") == cls), et.filter(pl.col("idle") == cls)
            if xb.height >= 3 and xt.height >= 3:
                inc[cls] = float(xt["exposed_ns"].median()) - float(xb["exposed_ns"].median())
        basis = {True: "syncs on an idle GPU", False: "wake-up after the GPU finished"}
        if not inc:
            return Outcome.clean("no comparable syncs (each kind of sync in one run only)")
        if max(inc.values()) < self.options.min_floor_ns:
            return Outcome.clean(
                f"cost per sync beyond the wait grew {duration(max(inc.values()))}"
            )
        rate = pl.col("idle").replace_strict({k: max(v, 0.0) for k, v in inc.items()}, default=0.0)
        per = ctx.aligned_steps(
            et.group_by("rank", "step").agg(rate.sum().alias("c"), pl.len().alias("n")), "t"
        )
        per = per.fill_null(0)
        basis_txt = ", ".join(f"{basis[k]} +{duration(v)}" for k, v in inc.items())
        n = float(per["n"].median() or 0)
        ev = {
            "syncs_per_step": stats.both(lambda d: stats.per_step_median(d, pl.len()), sb, st),
            "increase_per_call_ns": {basis[k]: int(v) for k, v in inc.items()},
            "exposed_per_call_ns": stats.both(lambda d: stats.percentiles(d["exposed_ns"]), eb, et),
            "per_call_ns": stats.both(lambda d: stats.percentiles(d["eff_ns"]), sb, st),
            "by_api": stats.both(
                lambda d: stats.top_list(
                    d.with_columns(vc.base_name().alias("api")),
                    "api",
                    calls=pl.len(),
                    median_ns=pl.col("eff_ns").median(),
                ),
                sb,
                st,
            ),
            "published": "H100 cudaEventSynchronize 4.1 -> 15.4 us; DeviceSynchronize +13-17 us",
        }
        summary = f"{n:.0f} syncs/step stall longer beyond their wait ({basis_txt})"
        conf = "high" if st.height >= 20 else "medium"
        rm = _removal(ctx.seq_t.filter(pl.col("cls") == "sync"), inc)
        return self.fired(claims(per, "sync_api", "c"), summary, ev, conf, removal=rm, n=n)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        n = f.facts["n"]
        if n <= 1:
            text = "Move the per-step readback / sync to a drain thread."
            how = "attributed sync stall: off the main thread it no longer delays launches"
            return [recommendation("drain_thread", ns, delta, text, how)]
        text = f"Cut {n:.0f} syncs/step to one: no .item()/.cpu() in the loop, batch readbacks."
        how = f"attributed stall x syncs removed ({n:.0f} -> 1 per step)"
        return [recommendation("fewer_syncs", ns * (n - 1) / n, delta, text, how)]


def _removal(syncs: pl.DataFrame, inc: dict[bool, float]) -> Removal:
    """Each treatment sync's stall out: its own cost on an idle GPU, its wake-up after a wait."""
    own, wake = max(inc.get(True, 0.0), 0.0), max(inc.get(False, 0.0), 0.0)
    # the replay ends a sync at max(own cost, GPU done + wake-up): both come down
    dur = pl.min_horizontal(pl.lit(int(own)), "raw_dur").cast(pl.Int64)
    return Removal(calls=call_rows(syncs, dur=dur, eps=pl.lit(int(max(own, wake)))))
