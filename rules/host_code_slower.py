"""HS01 host-code-slower."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl
from ccdiag.rules import _host as hs
from ccdiag.rules import _tolls as tl
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.ledger import control as ctl
from ccdiag.ledger.align import GapModel
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation

#: Host categories whose time is host code: its own, and the CUDA runtime's inside launch calls.
HOST_CODE = ("gap_launch", "gap_other", "launch_api", "other_api")


class HostCodeSlower(Rule):
    """Host code runs slower at equal work: the CPU side of the confidential VM, or not CC at all.

    ## What it detects
    Host time that no CUDA call explains. (1) Lost time slices: matched gaps (and launch calls)
    that grew by ``BURST_NS`` or more beyond the same gap in the other steps, net of the
    baseline's own, recurring over the steps (``rules/_host.lost_slices``); the neighbour takes
    its share of the toll's CPU time too, half of it the toll's (``time_share``). (2) Growth in
    proportion to length: the other matched gaps, after what the calls beside each gap bring (a
    toll beside a call is LA01's per-call constant), grew ``h`` per ns of their typical length.
    Without matched calls (cpu_op treatments): the mean time of cpu_op kinds without CUDA calls.

    ## Why it costs time
    A TDX / SEV-SNP guest pays on the CPU too: first touch of each 4 KB private page (accept and
    encrypt), costlier VM exits, encrypted memory. Or no CC at all: CPU frequency, contention, a
    profiler whose overhead differs between sessions; the evidence and the fixes say what to check.

    ## Evidence
    The bursts (net ns per step, its t over the steps, how many steps), ``h`` and its z, the
    per-call constants, ``h`` in each tenth of the step and the net growth (quiet when neither
    holds across the step: ``moved_not_slower``), the cpu_op control (medium confidence when it
    agrees or slices were lost, else low). Removal: each step's net burst time off its bursts,
    then ``h / (1 + h)`` of each gap beyond its calls' constants.

    ## Example
    ``tests/rules/cases/host-code-slower.yaml`` ``fires_when_host_code_slows``. Real, with truth:
    ``sample_traces/decode_eager_cpu`` (H200, B200 toll + a CPU-bound neighbour at nice 5); a pure
    launch toll on some launch paths (``decode_eager``: 122 of 185 launches tolled) stays quiet.

    ## Fix
    - Lost slices: pin the GPU-driving thread to an isolated core, find the neighbour; in a CVM
      check the vCPUs' steal time.
    - Under TDX / SEV-SNP: back hot buffers with transparent huge pages (THP cuts the per-page
      accept operations 512x) and pre-fault them; pin the CPU governor.
    - Re-capture both runs with the same profiler settings: per-session overhead can differ 2x.

    ## Limits
    Cannot tell CPU-side CC cost from non-CC slowdown. Gaps 80 % of which sit beside tolled
    launches, each stretched alike, are LA01's (``rules/_host.side_effect``) unless the cpu_ops
    and the gaps beside no explaining call (if any) both say host code got slower. Slices lost in
    under 3 steps are noise; growth inside calls common to every launch path is unattributed.

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
    requires_gpu: ClassVar[bool] = False  # host-only pairs: the API trace's gaps
    claimed: ClassVar[frozenset[str]] = frozenset(HOST_CODE)
    call_classes: ClassVar[frozenset[str]] = frozenset()

    @dataclass(frozen=True)
    class Options:
        min_ratio: float = opt(hs.MIN_RATIO, "Smallest treatment/baseline ratio of host-code time.")
        min_control_kinds: int = opt(3, "cpu_op kinds without CUDA calls the ratio needs.")
        min_ns: int = opt(5000, "Smallest claim per step (ns) worth a finding.")
        min_gaps: int = opt(100, "Matched host gaps the gap model needs (else the cpu_op control).")
        min_ratio_beside: float = opt(hs.MIN_RATIO_BESIDE, "Smallest ratio read off gaps beside explaining calls.")  # fmt: skip
        min_z: float = opt(hs.MIN_Z, "Smallest growth per ns of gap over its standard error.")
        min_spread: float = opt(0.5, "Median growth of the step's parts vs the whole step's.")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only and ctx.op_mode:  # from the API trace the main path applies
            return Outcome.skipped("treatment has no GPU activity (CC mode 'on'); needs GPU events")
        g, o = ctx.gap_fit, self.options
        if ctx.op_mode or g.n < o.min_gaps:
            return self._from_ops(ctx)
        lost = hs.lost_slices(ctx.seq_t, g, o.min_ns)  # whole time slices: a CPU-bound neighbour
        grown = self._grown(ctx, g, lost)
        if isinstance(grown, str) and lost is None:
            return Outcome.clean(grown)
        lost_part = [] if lost is None else [lost.part(ctx.slowdown)]
        p = hs.Part.joined(lost_part + ([] if isinstance(grown, str) else [grown]), HOST_CODE)
        cl = pl.concat([claims(p.per, c, c) for c in HOST_CODE])
        conf, share = ("medium" if p.confident else "low"), hs.time_share(ctx, p.per, lost)
        return self.fired(cl, p.summary, p.evidence, conf, removal=p.removal, ratio=p.ratio,
                          time_share=share)  # fmt: skip

    def _grown(self, ctx: RuleContext, g: GapModel, lost: hs.LostSlices | None) -> str | hs.Part:
        """Growth in proportion to the gaps' length beyond the lost slices: why it is not
        slower host code, or its part of the claim."""
        o = self.options
        # gaps beside no explaining call when there are enough, else every gap's growth within
        # its cell, but only a large one (a toll's side effects are not slower host code)
        clean = np.isfinite(g.h_mean_se)
        h, se = (g.h_mean, g.h_mean_se) if clean else (g.h, g.h_se)
        z = h / se if se > 0 else 0.0
        floor = o.min_ratio if clean else o.min_ratio_beside
        if h < floor - 1.0 or z < o.min_z:
            why = f"matched host gaps grew {h:+.3f} per ns of their length (z {z:.1f})"
            return why + " beyond what their neighbouring calls explain"
        if (moved := hs.moved_not_slower(g, h, o.min_spread)) is not None:
            return moved
        control = tl.host_control(ctx, o.min_control_kinds)  # cpu_ops, else the gaps' stretch
        side, paths = hs.toll_side_effect(ctx, control)
        if side.applies:  # issue 12: only what no call explains; LA01 claims the toll's effect
            return hs.left_to_the_toll(side, paths, h, z)
        scale = ctl.call_scale(ctx.matched, control)
        less, tolled = (lost.removal if lost else None), tl.gap_tolled_paths(ctx, control)
        removal, per = hs.host_removal(ctx.seq_t, g, h, ctx.matched, scale, less, tolled)
        claim = sum(float(per[c].mean() or 0) for c in HOST_CODE)
        if claim < o.min_ns:
            return f"host gaps {1 + h:.2f}x, {duration(claim)}/step at most"
        ev = hs.growth_evidence(g, h, z, scale, ctx.slowdown, tl.shape_evidence(ctx))
        summary = f"host gaps no call explains grew {1 + h:.2f}x ({g.n} matched gaps)" + (
            f", calls {1 + scale:.2f}x like the host-code control" if scale > 0 else "")  # fmt: skip
        # sure only by cpu_ops: the gaps' stretch is read off the same gaps, not a control
        sure = ctx.slowdown["op_kinds"] >= o.min_control_kinds and (control or 0) >= o.min_ratio
        return hs.Part(removal, per, ev, summary, 1.0 + h, sure)

    def _from_ops(self, ctx: RuleContext) -> Outcome:
        sd = ctx.slowdown
        if sd["op_kinds"] < self.options.min_control_kinds:
            return Outcome.skipped("no matched host gaps and no cpu_ops without CUDA calls")
        ratio = float(sd.get("mean_ratio", sd["ratio"]))
        basis = f"mean time of {sd['op_kinds']} cpu_op kinds without CUDA calls"
        if ratio < self.options.min_ratio:
            return Outcome.clean(f"host code {ratio:.2f}x ({basis})")
        per, claim = hs.ops_claims(ctx.ledger, ratio, HOST_CODE)
        if claim < self.options.min_ns:
            return Outcome.clean(f"host code {ratio:.2f}x, {duration(claim)}/step at most")
        cl = pl.concat([claims(per, c, c) for c in HOST_CODE])
        ev = {"ratio": round(ratio, 3), "basis": basis, "ops": sd.get("ops", []),
              "claimed_ns_per_step": int(claim)}  # fmt: skip
        summary = f"host code outside CUDA calls {ratio:.2f}x slower ({basis})"
        return self.fired(cl, summary, ev, "medium", ratio=ratio)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        text, how = hs.fix_text("lost_time_slices" in f.evidence, f.facts["ratio"])
        return [recommendation("host_side_tuning", ns, delta, text, how)]
