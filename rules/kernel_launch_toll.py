"""LA01 kernel-launch-toll."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _expr as ex
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.schema import Kind
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
    Main-thread launch calls (``runtime``/``driver`` rows named ``cu*Launch*``, ``*GraphLaunch``,
    ``*Memset*``) and the host gaps before them, per aligned step; the quantile shift of per-launch
    cost between the runs. A fixed toll moves p10, p25 and p50 together; framework noise moves the
    tail only, so the gap part is claimed only when the shift is uniform. Host-only treatments: the
    growth of ops that launched kernels in the baseline, divided by the baseline's launches.

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
    exposed part. Host-only evidence cannot separate the toll from slower Python.

    ## Options
    See below.

    ## References
    - DESIGN.md mechanism ``launch_toll``; cc-cost-model.md §2.1.
    - ISPASS 2025 (H100, TDX): ``cudaLaunchKernel`` median 4.5–5.9 → 10.7–17.6 µs.
    """

    code: ClassVar[str] = "LA01"
    name: ClassVar[str] = "kernel-launch-toll"
    mechanism: ClassVar[str] = "launch_toll"
    requires: ClassVar[frozenset[Kind]] = frozenset({Kind.RUNTIME})
    requires_gpu: ClassVar[bool] = False

    @dataclass(frozen=True)
    class Options:
        min_toll_ns: int = opt(700, "Smallest per-launch increase (quantile shift, ns).")
        min_ratio: float = opt(
            0.1, "...and this fraction of the baseline call (half of it for the gap before)."
        )

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only:
            return self._host_only(ctx)
        lb, lt = (c.filter(pl.col("cls") == "launch") for c in (ctx.calls_b, ctx.calls_t))
        if lb.height == 0 or lt.height == 0:
            return Outcome.clean("no kernel launches on the main thread")
        call = ex.quantile_shift(lb["eff_ns"], lt["eff_ns"])
        gap = ex.quantile_shift(lb["gap_ns"], lt["gap_ns"])
        o = self.options
        f_call = max(o.min_toll_ns, o.min_ratio * float(lb["eff_ns"].median() or 0))
        f_gap = max(o.min_toll_ns, 0.5 * o.min_ratio * float(lb["gap_ns"].median() or 0))
        in_call = call["shift_ns"] >= f_call
        in_gap = gap["shift_ns"] >= f_gap and gap["uniform"]
        if not (in_call or in_gap):
            return Outcome.clean(
                f"per-launch cost moved {call['shift_ns']} ns in the call, {gap['shift_ns']} ns "
                f"before it (thresholds {int(f_call)} / {int(f_gap)} ns)"
            )
        per = ctx.aligned_steps(lt.group_by("rank", "step").len("n"), "t").fill_null(0)
        per = per.with_columns((pl.col("n") * gap["shift_ns"]).alias("g"))
        cl = [claims(ctx.ledger, "launch_api", "d_launch_api")] if in_call else []
        cl += [claims(per, "gap_launch", "g")] if in_gap else []
        toll = call["shift_ns"] * in_call + gap["shift_ns"] * in_gap
        where = " + ".join(w for w, on in ((CALL, in_call), (GAP, in_gap)) if on)
        n = int(ex.per_step_median(lt, pl.len()))
        graphs = int(ex.per_step_median(lt, ex.is_graph_launch().sum()))
        ev = {
            "launches_per_step": ex.both(lambda d: int(ex.per_step_median(d, pl.len())), lb, lt),
            "graph_launches_per_step": graphs,
            "per_launch_call_ns": ex.both(lambda d: ex.percentiles(d["eff_ns"]), lb, lt),
            "pre_launch_gap_ns": ex.both(lambda d: ex.percentiles(d["gap_ns"]), lb, lt),
            "toll_in_call": call,
            "toll_in_gap": gap,
            "toll_location": where,
            "top_kernels": ex.top_list(
                lt.filter(pl.col("gpu_name").is_not_null()),
                "gpu_name",
                launches=pl.len(),
                median_call_ns=pl.col("eff_ns").median(),
            ),
            "published": "B200 3.45 -> 15.7 us per launch; H100 (ISPASS) 4.9 -> 10.0 us median",
        }
        conf = "high" if (call if in_call else gap)["uniform"] and n >= 20 else "medium"
        summary = f"{n} launches/step pay ~{toll / 1e3:.1f} us more each ({where})"
        return self.fired(pl.concat(cl), summary, ev, conf, launches=n, graphs=graphs)

    def _host_only(self, ctx: RuleContext) -> Outcome:
        led, b = ctx.ledger, ctx.pair.baseline
        api = b.trace.events.filter(pl.col("kind").is_in(ex.API_KINDS) & ex.is_kernel_launch())
        per_step = api.height / max(b.windows.height, 1)
        d = float(led["d_op_launch"].median() or 0)
        per_launch = d / per_step if per_step else 0.0
        if per_launch < self.options.min_toll_ns:
            return Outcome.clean(f"launching ops grew {per_launch:.0f} ns per baseline launch")
        ev = {
            "baseline_launches_per_step": round(per_step, 1),
            "op_launch_growth_ns_per_step": int(d),
            "toll_per_launch_ns_estimate": int(per_launch),
            "method": "growth of ops that launched kernels in the baseline / its launches per step",
        }
        summary = f"launching ops grew ~{per_launch / 1e3:.1f} us per baseline launch (host-only)"
        cl = claims(led, "op_launch", "d_op_launch")
        return self.fired(cl, summary, ev, "low", launches=int(per_step), graphs=0)

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
        text = (
            f"{eager} of {n} submissions per step are outside CUDA graphs: capture them too "
            "(fewer piecewise-graph splits, fuse the eager ops)."
        )
        how = "attributed toll x share of submissions that are not graph launches"
        return [recommendation("fewer_graph_splits", ns * eager / n, delta, text, how)]


CALL = "inside the launch call"
GAP = "in the host gap before each launch"
