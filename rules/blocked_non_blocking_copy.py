"""CP02 blocked-non-blocking-copy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _copies as cp
from ccdiag.rules._base import (
    Finding,
    Interaction,
    Outcome,
    Rule,
    RuleContext,
    claims,
    opt,
    recommendation,
)

from ccdiag.ledger import stats
from ccdiag.ledger import vocab as vc
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class BlockedNonBlockingCopy(Rule):
    """``copy_(non_blocking=True)`` blocks the host thread until the queue drains and the copy ends.

    ## What it detects
    Async copy calls (``cudaMemcpyAsync``) that, in the treatment, return only after earlier
    queued GPU work and the copy itself finished, where the baseline's returned at once. Host work
    that overlapped the GPU in the baseline now runs after it: the host waits, then the GPU waits.

    ## Why it costs time
    Under CC a pinned (bounce-buffer backed) H2D/D2H ``cudaMemcpyAsync`` is host-synchronous.
    Engines that overlap the next step's scheduling with the current step's GPU work (vLLM async
    scheduling, SGLang overlap) lose that overlap on every readback.

    ## Evidence
    Per aligned step, host time inside ``*Async`` copy calls that covered their GPU copy (the call
    waited for earlier queued work and the copy). Claims the growth of *exposure* beyond the growth
    of the work itself, where the blocking puts it: host work that ran under the GPU in the
    baseline and now runs after the blocked call (only in the host time right after async copies,
    as long as the baseline's host work overlapped them), and GPU work the host now waits for
    (GPU-critical time beyond GPU busy growth, only in waits that blocked async copies ended).
    Host-only treatments: growth of copy ops recorded with ``non_blocking=True``.

    Shared with CP01: copy-cost growth an async copy would have hidden under the other side's
    work (up to the baseline's slack) but a blocked one exposes; half moves from CP01's
    ``copy_api`` here (Shapley; ``_expr.padding_interaction``).

    ## Example
    ``tests/rules/cases/blocked-non-blocking-copy.yaml`` ``fires_when_async_copy_waits_for_queue``.
    Published: SGLang Qwen3-8B GPU utilization 74 → 57 %, throughput −34…−39 %.

    ## Fix
    - Move device→host readbacks to a drain / worker thread (TensorRT-LLM PR #8463).
    - vLLM: ``--no-async-scheduling`` under CC (recovered 57 % of the gap in the published case).

    ## Limits
    A copy that waits for queued work but where nothing useful overlapped in the baseline costs
    nothing and is not claimed (no host work became exposed). The shared term uses the whole
    step's slack, an upper bound where the baseline's host waited before the copies. The copy's own (slower) transfer
    and host-side padding are ``serialized_copies``. Without GPU events the blocked time is
    inferred from op durations.

    ## Options
    See below.

    ## References
    - ISPASS 2025 (Yang, Sonji, Jog; H100, TDX): ``cudaMemcpyAsync`` median 5.0 → 44.4 µs in CC.
    - vLLM PR #52226; SGLang PR #15188; Phala "TEE is really fast on Blackwell".
    """

    code: ClassVar[str] = "CP02"
    name: ClassVar[str] = "blocked-non-blocking-copy"
    mechanism: ClassVar[str] = "blocked_non_blocking"
    requires: ClassVar[frozenset[Kind]] = frozenset()
    requires_gpu: ClassVar[bool] = False
    claimed: ClassVar[frozenset[str]] = frozenset(
        {*vc.HOST_CATEGORIES, *cp.GPU_BUSY, "op_copy_async"}
    )
    call_classes: ClassVar[frozenset[str]] = frozenset({"copy"})

    @dataclass(frozen=True)
    class Options:
        min_blocked_ns: int = opt(5000, "Smallest growth of host time blocked in async copy calls.")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.op_mode:
            return self._host_only(ctx)
        cb, ct = ctx.copies_b, ctx.copies_t
        if ct.height == 0:
            return Outcome.clean("no host-crossing copies on the main thread")
        cols = cp.COPY_STEP_COLS
        st = stats.aligned_delta(ctx.pair.aligned, cp.copy_steps(cb), cp.copy_steps(ct), cols)
        grow = float(st["d_blocked_async_ns"].median() or 0)
        if grow < self.options.min_blocked_ns:
            return Outcome.clean(f"host time blocked in async copy calls grew {duration(grow)}")
        seg = ctx.category_growth(lambda s: cp.post_copy_exposure(ctx, s), vc.HOST_CATEGORIES)
        win = ctx.category_growth(lambda s: cp.copy_window_classes(ctx, s), tuple(cp.GPU_BUSY))
        led, busy = ctx.ledger, ctx.busy
        cl = pl.concat(
            [claims(cp.exposure_growth(led, seg, c), c, "x") for c in vc.HOST_CATEGORIES]
            + [claims(cp.gpu_exposure_growth(led, busy, win, c), c, "x") for c in cp.GPU_BUSY]
        )
        ev = cp.blocked_evidence(st, cb, ct, busy, led)
        inter = cp.padding_interaction(st, led, busy)  # CP01's cost that blocking exposed
        ev["padding_exposed_by_blocking_ns_per_step"] = int(vc.num(inter["ns"].median()))
        rm = cp.past_padding(cp.blocking_removal(ctx.matched), ctx)
        # the calls' growth includes any padding after their copy ended, which is CP01's cost:
        # say how much is the blocking's own (this mechanism's paid cost), or the two numbers
        # read as a contradiction side by side (decode_eager: +54.3 µs in the calls, 524 ns own)
        own = rm.paid_ns() / max(ctx.ledger.height, 1)
        summary = (
            f"async copy calls now block the host: +{duration(grow)}/step inside them, "
            f"{duration(own)}/step beyond the padding after their copies (CP01's)"
        )
        conf = "high" if grow > 5 * self.options.min_blocked_ns else "medium"
        its = (Interaction("serialized_copies", "copy_api", inter, 0.5, "see CP02 Evidence"),)
        return self.fired(cl, summary, ev, conf, its, removal=rm, vllm=_is_vllm(ctx))

    def _host_only(self, ctx: RuleContext) -> Outcome:
        d = float(ctx.ledger["d_op_copy_async"].median() or 0)
        if d < self.options.min_blocked_ns:
            return Outcome.clean(f"non_blocking copy ops grew {duration(d)}/step")
        ops = ctx.calls_t.filter(pl.col("cls") == "op_copy_async")
        ev = {
            "non_blocking_copy_ops_ns_per_step": int(d),
            "ops_ns": stats.percentiles(ops["eff_ns"]),
            "method": "host-only: growth of copy ops recorded with non_blocking=True",
        }
        cl = claims(ctx.ledger, "op_copy_async", "d_op_copy_async")
        summary = f"non_blocking copy ops grew {duration(d)}/step (host-only)"
        return self.fired(cl, summary, ev, "low", vllm=_is_vllm(ctx))

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        text = (
            "Issue the device-to-host readbacks from a drain / worker thread so the main thread "
            "keeps launching (as TensorRT-LLM PR #8463 does)."
        )
        how = "attributed blocked time: off the main thread the wait no longer delays launches"
        out = [recommendation("drain_thread", ns, delta, text, how)]
        if f.facts.get("vllm"):
            how = "published figure (vLLM recovered 57 % of its CC gap), not from this trace"
            text = "vLLM: run with --no-async-scheduling under CC."
            out.append(recommendation("vllm_no_async_scheduling", 0.57 * delta, delta, text, how))
        return out


def _is_vllm(ctx: RuleContext) -> bool:
    ev = ctx.pair.treatment.trace.events
    names = ev.filter(pl.col("kind").is_in(["python", "cpu_op", "annotation"]))["name"]
    return bool(names.str.contains("(?i)vllm").any())
