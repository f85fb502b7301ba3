"""LA01 kernel-launch-toll."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _host as hs
from ccdiag.rules import _host_only as hx
from ccdiag.rules import _tolls as tl
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class KernelLaunchToll(Rule):
    """Every kernel launch costs more host time: the encrypted command-submission toll.

    ## What it detects
    A per-launch increase of host time on the thread that launches kernels: inside the launch
    call (real CC hooks the driver entry points) and/or in the host gap right before each launch
    (an emulator that spins before the runtime call, or driver work outside the traced call).

    ## Why it costs time
    Under CC every command submission crosses an encrypted, authenticated path. In a host-bound
    step (eager decode, small kernels) the GPU idles while the host launches, so each launch's toll
    lands on the step time: extra time ≈ launches per step × toll per launch.

    ## Evidence
    The two runs' main-thread calls matched one to one in each aligned step (name and order,
    ``ccdiag.ledger.align``). Per launch path (runtime, driver, graph, library — kernels a math
    library launches itself —, memset/device copy) the paid toll per call is read off the matched
    deltas: inside the call a robust fit ``Δdur = add + slope × baseline dur`` (real CC scales the
    call, H100 + TDX ×2.5; an additive toll is the constant), beside it the gap model's growth of
    the gaps before and after the path's calls (an LD_PRELOAD emulator). A toll in the gaps
    shifts them: where every path's gaps stretched and none shifted by ``MIN_TOLL_NS``
    (``rules/_tolls.stretched``), no path pays one there, and without a cpu_op control the
    stretch is the host-code control (a CPU-bound neighbour). A path fires when its
    paid cost per call is at least ``min_toll_ns`` and ``min_z`` standard errors; a toll paid on
    some paths only is measured on those paths, not read as a slope. Removal (for the replay):
    the fitted cost out of each treatment launch of a fired path and out of the gaps beside it.
    Ledger claims: ``launch_api`` and ``gap_launch``. Host-only treatments: the growth of ops
    that launched kernels. The toll's side effect: where 80 % of the host gap time sits beside
    tolled launches and nothing outside them says host code got slower (the cpu_op control
    and, where there are any, the gaps beside no explaining call), the gaps' growth in
    proportion to their length is claimed too, however small (``host_side_effect`` in the
    evidence, part of the paid cost; ``rules/_host.side_effect``).

    ## Example
    ``tests/rules/cases/kernel-launch-toll.yaml`` ``fires_when_every_launch_pays_a_toll``: 100
    launches per step at 5 µs (baseline) vs 15 µs (treatment) → 1 ms per step claimed.
    Published: B200 launch 3.45 → 15.7 µs; eager decode (181 kernels/step) 2644 → 6358 µs/step.

    ## Fix
    - Capture the steady-state step in a CUDA graph (one submission per step).
    - With graphs already: fewer graph splits (piecewise capture leaves eager launches).
    - Fuse kernels; larger batches amortize the toll.

    ## Limits
    Extra launches in the treatment (a slightly different workload) count as toll. When the GPU is
    the bottleneck the host growth is hidden by GPU slack; the engine then gives the toll only the
    exposed part. Host-only evidence cannot separate the toll from slower Python. Host-only with an
    API trace: each launch API's growth per call (``rules/_host_only.py``).

    ## Options
    See below.

    ## References
    - Phala, "TEE is Really Fast on Nvidia Blackwell": a B200 CUDA graph of 96k matmuls at 1.0012x.
    - ISPASS 2025 (H100, TDX): ``cudaLaunchKernel`` median 4.5–5.9 → 10.7–17.6 µs.
    """

    code: ClassVar[str] = "LA01"
    name: ClassVar[str] = "kernel-launch-toll"
    mechanism: ClassVar[str] = "launch_toll"
    requires: ClassVar[frozenset[Kind]] = frozenset({Kind.RUNTIME})
    requires_gpu: ClassVar[bool] = False
    claimed: ClassVar[frozenset[str]] = frozenset({"launch_api", "gap_launch", "op_launch"})
    call_classes: ClassVar[frozenset[str]] = frozenset({"launch"})

    @dataclass(frozen=True)
    class Options:
        min_toll_ns: int = opt(
            tl.MIN_TOLL_NS,
            "Smallest paid cost per launch (ns, on one path) called a toll; published CC tolls "
            "are 5 us (H100 + TDX) to 12 us (B200) per launch.",
        )
        min_control_kinds: int = opt(3, "cpu_op kinds without CUDA calls the host control needs.")
        min_z: float = opt(
            tl.MIN_TOLL_Z,
            "Smallest ratio of a part of a path's cost (in the call, in the gaps) to its standard error.",
        )

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only:  # no GPU trace in the treatment: rules/_host_only.py
            return (hx.launch_toll_ops_outcome if ctx.op_mode else hx.launch_toll_outcome)(
                self, ctx
            )
        lb, lt = tl.launch_calls(ctx)
        if lb.height == 0 or lt.height == 0:
            return Outcome.clean("no kernel launches on the main thread")
        o = self.options
        # the host-code control: cpu_ops that make no CUDA call, else the gaps' stretch
        host = tl.host_control(ctx, o.min_control_kinds)
        tolls = tl.path_tolls_of(ctx, o.min_z, host)
        fired = [t for t in tolls if t.paid_ns >= o.min_toll_ns]
        if not fired:
            rows = [t.row() for t in tolls]
            return Outcome.clean(f"no per-launch cost on any launch path (matched calls: {rows})")
        # host code beside the tolled launches that grew with the toll, where no control
        # outside CUDA calls says host code got slower (HS01 leaves it: rules/_host.py)
        fired_paths = {t.path for t in fired}
        side, _ = hs.toll_side_effect(ctx, host, fired_paths)
        side_h = side.h if side.applies else 0.0
        removal, per, taken = tl.toll_removal(
            ctx.seq_t, fired, ctx.gap_fit, side_h=side_h, matched=ctx.matched
        )
        cl = pl.concat([claims(per, "launch_api", "in_call"), claims(per, "gap_launch", "gap")])
        ev, n, graphs = tl.evidence(lb, lt, tolls, fired, ctx.gap_fit)
        side_ev, side_text = tl.side_effect_evidence(side, side_h, per, max(ctx.ledger.height, 1))
        ev |= side_ev | {"gap_shape": tl.shape_evidence(ctx)}
        conf = "high" if n >= 20 and min(t.z for t in fired) >= 5 else "medium"
        # what the removal takes (each part clipped to the call or gap that holds it), not the
        # fitted constants: where launches run back to back a path's before/after constants are
        # one sum split by the fit's free direction (hf_generate_gpt2_nsys: 65.7 us per runtime
        # launch by the constants, "35.1 ms/step paid" against a 19.5 ms delta, while the
        # removal took 18.4 ms)
        steps = max(ctx.ledger.height, 1)  # per aligned step, as the report's paid_ns_per_step
        paid = removal.paid_ns() / steps
        summary = f"{n} launches/step, {duration(paid)}/step paid on " + ", ".join(
            f"{t.path} ({duration(taken.get(t.path, 0.0) / steps / max(t.per_step, 1e-9))} x "
            f"{t.per_step:.0f})"
            for t in fired
        )
        summary += side_text
        return self.fired(cl, summary, ev, conf, removal=removal, launches=n, graphs=graphs)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        n, graphs = f.facts["launches"], f.facts["graphs"]
        if n <= 0 or ns <= 0:
            return []
        if graphs == 0:
            text = (
                f"Capture the steady-state step in a CUDA graph: one submission per step, not "
                f"{n}. Published: B200 CUDA-graph decode 2500 -> 2589 us/step under CC (1.04x)."
            )
            how = f"attributed toll x launches removed ({n} launches -> 1 graph launch per step)"
            return [recommendation("cuda_graphs", ns * (n - 1) / n, delta, text, how)]
        eager = max(n - graphs, 0)
        if eager == 0:
            return []
        text = (
            f"{eager} of {n} submissions per step are outside CUDA graphs: capture them too "
            "(fewer piecewise-graph splits, fuse the eager ops)."
        )
        how = "attributed toll x share of submissions that are not graph launches"
        return [recommendation("fewer_graph_splits", ns * eager / n, delta, text, how)]
