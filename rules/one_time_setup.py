"""SU01 one-time-setup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from ccdiag.rules import _host_only as hx
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.ledger import align as al
from ccdiag.ledger import stats
from ccdiag.ledger import vocab as vc
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class OneTimeSetup(Rule):
    """Context creation, allocation and module loading take longer: a one-time cost, not steady
    state.

    ## What it detects
    Growth of setup API time on the main thread: the call that creates the CUDA context (usually the
    first allocation), ``cudaMalloc*``/``cudaHostAlloc``/``cudaFree``, ``cudaGetDeviceProperties``,
    module loading, stream/event creation, graph instantiation.

    ## Why it costs time
    Under CC, context creation sets up the secure channels and keys (≈ +1 s on H100 + TDX), and
    pinned / managed allocations are backed by encrypted bounce buffers. Whole-program traces of
    short apps are dominated by it; a long-running server pays it once.

    ## Evidence
    The ledger's ``setup_api`` category per aligned step; the setup calls ranked by growth; the
    largest setup call (context creation) in both runs. The report separates this from the steady
    state (``partition.steady_state_ns_per_step``).

    ## Example
    ``tests/rules/cases/one-time-setup.yaml`` ``fires_when_context_creation_slows``. Published
    (H100, ISPASS): the context-creating ``cudaMallocHost`` 0.16–0.20 s off, 1.15–1.19 s on.

    ## Fix
    - Measure and optimize the steady state: warm up before profiling; keep processes (and their
      contexts) alive across requests.
    - Allocate once (caching allocators, memory pools); instantiate CUDA graphs once.

    ## Limits
    Allocation inside a step (a cache miss of the allocator) is counted here too. Context creation
    inside another thread's first call is not on the main thread's ledger. Without step markers
    the first runtime call counts as the context's creation only when it lasts 50 ms or more
    (``ccdiag.apis.CONTEXT_CALL_NS``): a window cut out of a running process starts with an
    ordinary call. Host-only pairs: a
    ``cudaFree`` that waited for slower kernels is not setup (``rules/_host_only.py``).

    ## Options
    See below.

    ## References
    - ISPASS'25 artifact (github.com/Elio-yang/hcc-ispass25-artifact) README, "Fixed start-up
      costs".
    """

    code: ClassVar[str] = "SU01"
    name: ClassVar[str] = "one-time-setup"
    mechanism: ClassVar[str] = "one_time_setup"
    requires: ClassVar[frozenset[Kind]] = frozenset({Kind.RUNTIME})
    requires_gpu: ClassVar[bool] = False  # host-only pairs: see _host_only
    claimed: ClassVar[frozenset[str]] = frozenset({"setup_api"})
    call_classes: ClassVar[frozenset[str]] = frozenset({"setup"})

    @dataclass(frozen=True)
    class Options:
        min_growth_ns: int = opt(50_000, "Smallest growth of setup API time per step (ns).")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only:
            return self._host_only(ctx)
        return self._evaluate(ctx, ctx.ledger, "d_setup_api")

    def _evaluate(self, ctx: RuleContext, growth: pl.DataFrame, col: str) -> Outcome:
        d = vc.num(growth[col].median())
        if d < self.options.min_growth_ns:
            return Outcome.clean(f"setup API time grew {duration(d)}/step")
        sb, st = (c.filter(pl.col("cls") == "setup") for c in (ctx.calls_b, ctx.calls_t))

        def calls(df: pl.DataFrame) -> list:
            return stats.top_list(
                df.with_columns(vc.base_name().alias("api")),
                "api",
                6,
                total_ns=pl.col("eff_ns").sum(),
                calls=pl.len(),
                max_ns=pl.col("eff_ns").max(),
            )

        largest = stats.both(
            lambda df: stats.top_list(df, "name", 1, ns=pl.col("eff_ns").max()), sb, st
        )
        ev = {
            "setup_ns_per_step": stats.both(
                lambda p: int(ctx.ledger[f"{p}_setup_api"].median() or 0), "b", "t"
            ),
            "top_calls": stats.both(calls, sb, st),
            "largest_call": largest,
            "published": "H100 + TDX context creation 0.16-0.20 s -> 1.15-1.19 s (ISPASS)",
        }
        big: dict[str, Any] = (
            largest["treatment"][0] if largest["treatment"] else {"name": "?", "ns": 0}
        )
        summary = (
            f"setup calls +{duration(d)}/step (largest: {big['name']} {big['ns'] / 1e6:.0f} ms)"
        )
        rm = (
            None
            if ctx.host_only
            else al.call_growth_removal(ctx.matched.filter(pl.col("cls") == "setup"))
        )
        return self.fired(claims(growth, "setup_api", col), summary, ev, "high", removal=rm)

    # ----------------------------------------------------------------- host-only branch

    def _host_only(self, ctx: RuleContext) -> Outcome:
        """No GPU trace in the treatment: setup calls that wait for the device (``cudaFree``)
        hold the wait for slower kernels too; the kernel-time growth they waited for
        (``rules/_host_only.waited_split``) is not setup."""
        if ctx.op_mode:
            return Outcome.skipped("host-only treatment from cpu_ops: no CUDA setup calls")
        waited = hx.waited_split(ctx)["explained"]["setup_wait"]
        g = ctx.ledger.select("rank", "idx", "d_setup_api").join(
            waited, on=["rank", "idx"], how="left"
        )
        g = g.with_columns((pl.col("d_setup_api") - pl.col("ns").fill_null(0)).alias("d_setup"))
        return self._evaluate(ctx, g, "d_setup")

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        if not ctx.pair.whole_program:
            text = "Allocate once and reuse (memory pools, caching allocator); build graphs once."
            how = "attributed setup time inside steps: gone when allocations are hoisted"
            return [recommendation("allocate_once", ns, delta, text, how)]
        text = (
            "One-time cost: keep the process and its CUDA context alive (a persistent server, a "
            "warm pool) and judge CC by the steady state."
        )
        how = "attributed one-time setup: paid once per process, not per step of a long run"
        return [recommendation("amortize_setup", ns, delta, text, how)]
