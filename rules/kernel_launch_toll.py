"""LA01 kernel-launch-toll."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _expr as ex
from ccdiag.rules import _host_only as hx
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
    Main-thread submissions (``cu*Launch*``, ``*GraphLaunch``, ``*Memset*``, async device copies;
    state queries such as ``cuKernelGetName`` are part of the gap) and the host gaps before them.
    Per API, treatment quantiles are fitted as ``toll + slope x baseline``: a toll is additive,
    slower host code a slope. It fires on a fitted toll and claims the growth of launch-call time
    and of pre-launch gaps times the tolls' share of it, Σ launches x toll per call / Σ growth: the
    toll per call is the whole mean growth when the ``host_slowdown`` control (cpu_ops that make
    no CUDA call) says host code is not slower, else the fit's constant (also with no control, as
    in Nsight traces). Host-only treatments: the growth of ops that launched kernels.

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

    @dataclass(frozen=True)
    class Options:
        min_toll_ns: int = opt(700, "Smallest fitted additive cost per launch (ns) called a toll.")
        min_control_kinds: int = opt(3, "cpu_op kinds the host-slowdown control needs.")
        clean_ratio: float = opt(1.05, "Control ratio up to which host code counts as not slower.")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only:  # no GPU trace in the treatment: rules/_host_only.py
            return (hx.launch_toll_ops_outcome if ctx.op_mode else hx.launch_toll_outcome)(
                self, ctx
            )
        lb, lt = (c.filter(pl.col("cls") == "launch") for c in (ctx.calls_b, ctx.calls_t))
        if lb.height == 0 or lt.height == 0:
            return Outcome.clean("no kernel launches on the main thread")
        apis = sorted(lt.select(ex.base_name())["name"].unique().to_list())
        fits = {(a, c): ex.toll_fit(*(d.filter(ex.base_name() == a)[c] for d in (lb, lt)))
                for a in apis for c in ("eff_ns", "gap_ns")}  # fmt: skip
        found = {k: f for k, f in fits.items() if f["toll_ns"] >= self.options.min_toll_ns}
        if not found:
            return Outcome.clean(f"no additive per-launch cost (fits: {list(fits.values())})")
        sd, o = ctx.slowdown, self.options
        clean = sd["op_kinds"] >= o.min_control_kinds and sd["ratio"] <= o.clean_ratio
        per_call = ex.per_call_tolls(lb, lt, found, clean)
        cl, where = [], []
        for col, cat, label in (("eff_ns", "launch_api", CALL), ("gap_ns", "gap_launch", GAP)):
            tolls = {a: v for (a, c), v in per_call.items() if c == col}
            if tolls:
                cl.append(claims(ex.toll_claims(ctx.pair.aligned, lb, lt, col, tolls), cat, "c"))
                where.append(label)
        kl = ex.is_kernel_launch()  # kernel and graph launches (not memsets, device copies)
        n, toll = int(ex.per_step_median(lt, kl.sum())), max(f["toll_ns"] for f in found.values())
        graphs = int(ex.per_step_median(lt, ex.is_graph_launch().sum()))
        ev = {
            "launches_per_step": ex.both(lambda d: int(ex.per_step_median(d, pl.len())), lb, lt),
            "graph_launches_per_step": graphs,
            "per_launch_call_ns": ex.both(lambda d: ex.percentiles(d.filter(kl)["eff_ns"]), lb, lt),
            "pre_launch_gap_ns": ex.both(lambda d: ex.percentiles(d.filter(kl)["gap_ns"]), lb, lt),
            "fits": [{"api": k[0], "where": k[1][:3], **f} for k, f in fits.items()],
            "toll_per_call_ns": [{"api": a, "where": c[:3], "toll_ns": int(v)}
                                 for (a, c), v in per_call.items()],
            "host_slowdown": ctx.slowdown, "toll_location": " + ".join(where),
            "top_kernels": ex.top_list(lt.filter(pl.col("gpu_name").is_not_null()), "gpu_name",
                                       launches=pl.len(), median_call_ns=pl.col("eff_ns").median()),
            "published": "B200 3.45 -> 15.7 us per launch; H100 (ISPASS) 4.9 -> 10.0 us median",
        }  # fmt: skip
        conf = "high" if n >= 20 and ctx.slowdown["ratio"] < 1.2 else "medium"
        summary = f"{n} launches/step, ~{toll / 1e3:.1f} us toll each ({' + '.join(where)})"
        tolls = {k[1]: fit["toll_ns"] for k, fit in found.items()}
        return self.fired(pl.concat(cl), summary, ev, conf, launches=n, graphs=graphs, tolls=tolls)

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
            replayed = ex.replay_without_launch_toll(ctx.pair, f.facts.get("tolls", {}))
            if replayed is not None:
                how += f"; replay of the treatment without the toll: {replayed / 1e3:.0f} us/step"
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


CALL = "inside the launch call"
GAP = "in the host gap before each launch"
