"""HS01 host-code-slower."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.schema import Kind
from ccdiag.verdict import Recommendation

#: Host categories whose time is host code: its own, and the CUDA runtime's inside launch calls.
HOST_CODE = ("gap_launch", "gap_other", "launch_api", "other_api")


class HostCodeSlower(Rule):
    """Host code runs slower at equal work: the CPU side of the confidential VM, or not CC at all.

    ## What it detects
    The host thread's own code (outside CUDA calls) taking longer in the treatment at equal work:
    the ratio of the total time of cpu_op kinds that make no CUDA call (``view``, ``empty``, ...;
    at least 3 kinds with 10 calls each) at the baseline's call counts — means, not medians, so
    a thread preempted now and then counts — or, without cpu_ops (Nsight, CSV),
    the slope of the quantile fit of the host gaps before launches (a launch toll is the fit's
    constant, slower host code its slope).

    ## Why it costs time
    A TDX / SEV-SNP guest pays on the CPU too: the first touch of each 4 KB private page is
    expensive (accept and encrypt), VM exits cost more, memory is encrypted. It can also be no CC
    at all: CPU frequency, contention, a profiler whose overhead differs between sessions. A trace
    cannot tell these apart; the evidence and the fixes say what to check.

    ## Evidence
    The ratio above and the op kinds it came from. Claims ``(ratio − 1) ×`` the baseline's mean
    exposed host-code time (``gap_launch``, ``gap_other``, ``launch_api``, ``other_api``), spread
    over the steps like each category's growth, capped by that growth (shared pro rata with
    LA01's toll where both claim the same category).

    ## Example
    ``tests/rules/cases/host-code-slower.yaml`` ``fires_when_host_code_slows``: host gaps 1.5x
    longer, no toll → 0.5 × the baseline's gaps claimed. Real, with truth: ``sample_traces/
    decode_eager_cpu`` (H200, B200 toll + a CPU-bound neighbour at nice 5): 5.05 ms/step vs
    6.08 ms by the truth's Shapley split; at nice 12 (no measurable effect) quiet. Real H100 +
    TDX: ISPASS'25 hotspot3D, +1.03 s of host code in the TD.

    ## Fix
    - Under TDX / SEV-SNP: back hot buffers with transparent huge pages (THP cuts the per-page
      accept operations 512x) and pre-fault them at start-up.
    - Pin the CPU frequency governor and isolate the cores that drive the GPU; compare with the
      same settings outside the CVM.
    - Re-capture both runs with the same profiler settings and repeat them: per-session profiler
      overhead can differ by 2x on the same work.

    ## Limits
    Cannot tell CPU-side CC cost from non-CC slowdown. Needs cpu_ops without CUDA calls, or at
    least 100 launches per run for the gap fit; a gap slope above ``max_gap_slope`` is read as
    waiting, not code. Host-only treatments (no GPU activity) are skipped: their host gaps hold
    waits the trace cannot show.

    ## Options
    See below.

    ## References
    - FLASH checkpointing artifact, ``artifact_flash/benchmarks/`` README (TDX first touch of
      4 KB pages, THP); ISPASS'25 artifact (hotspot3D).
    """

    code: ClassVar[str] = "HS01"
    name: ClassVar[str] = "host-code-slower"
    mechanism: ClassVar[str] = "host_slowdown"
    requires: ClassVar[frozenset[Kind]] = frozenset()
    requires_gpu: ClassVar[bool] = False  # host-only pairs: see _host_only

    @dataclass(frozen=True)
    class Options:
        min_ratio: float = opt(1.05, "Smallest treatment/baseline ratio of host-code time.")
        min_control_kinds: int = opt(3, "cpu_op kinds without CUDA calls the ratio needs.")
        min_ns: int = opt(5000, "Smallest claim per step (ns) worth a finding.")
        max_gap_slope: float = opt(3.0, "Largest gap slope read as slower code (beyond: waits).")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only and (skip := self._host_only(ctx)) is not None:
            return skip
        sd = ctx.slowdown
        if sd["op_kinds"] >= self.options.min_control_kinds:
            ratio = float(sd.get("mean_ratio", sd["ratio"]))
            basis = f"mean time of {sd['op_kinds']} cpu_op kinds without CUDA calls"
        elif sd.get("gap_slope") and sd["gap_slope"] <= self.options.max_gap_slope:
            ratio, basis = float(sd["gap_slope"]), "slope of the host gaps before launches"
        elif sd.get("gap_slope"):
            return Outcome.skipped(f"host gaps scale {sd['gap_slope']:.1f}x: waits, not code")
        else:
            return Outcome.skipped("no cpu_ops without CUDA calls and < 100 launches per run")
        if ratio < self.options.min_ratio:
            return Outcome.clean(f"host code {ratio:.2f}x ({basis})")
        led = ctx.ledger

        # how much: (ratio - 1) x the baseline's mean host-code time; where: spread over the
        # steps like the category's growth (a preempted thread loses whole steps, not a share
        # of each)
        def share(c: str) -> pl.Expr:
            pos = pl.col(f"d_{c}").clip(lower_bound=0)
            amount = (ratio - 1.0) * pl.col(f"b_{c}").mean()
            return (amount * pos / pl.max_horizontal(pos.mean(), pl.lit(1.0))).alias(c)

        per = led.select("rank", "idx", *[share(c) for c in HOST_CODE])
        claim = float(sum(per[c].mean() or 0 for c in HOST_CODE))
        if claim < self.options.min_ns:
            return Outcome.clean(f"host code {ratio:.2f}x, {claim / 1e3:.1f} us/step at most")
        cl = pl.concat([claims(per, c, c) for c in HOST_CODE])
        ev = {
            "ratio": round(ratio, 3),
            "basis": basis,
            "ops": sd.get("ops", []),
            "baseline_host_code_ns_per_step": {c: int(led[f"b_{c}"].median() or 0) for c in HOST_CODE},
            "claimed_ns_per_step": int(claim),
            "host_code_growth_ns_per_step": int(sum(led[f"d_{c}"].median() or 0 for c in HOST_CODE)),
            "published": "TDX guests: first touch of each 4 KB page is expensive; THP cuts it 512x",
        }  # fmt: skip
        summary = f"host code outside CUDA calls {ratio:.2f}x slower ({basis})"
        conf = "medium" if sd["op_kinds"] >= self.options.min_control_kinds else "low"
        return self.fired(cl, summary, ev, conf, ratio=ratio)

    def _host_only(self, ctx: RuleContext) -> Outcome | None:
        """Host-only pairs: from the API trace the host path is the critical path and the
        host gaps are on the ledger, so the main path applies; from cpu_ops only it does not."""
        if ctx.op_mode:
            return Outcome.skipped("treatment has no GPU activity (CC mode 'on'); needs GPU events")
        return None

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        text = (
            "Host code runs slower in the treatment: under TDX / SEV-SNP back hot buffers with "
            "transparent huge pages and pre-fault them; pin the CPU governor; re-capture both runs "
            "with the same profiler settings to rule out profiler overhead."
        )
        how = f"attributed time: the host code back at the baseline's speed ({f.facts['ratio']:.2f}x -> 1x)"
        return [recommendation("host_side_tuning", ns, delta, text, how)]
