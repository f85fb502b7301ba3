"""CO01 encrypted-collective."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag import collectives as cc
from ccdiag.ledger import align as al
from ccdiag.ledger import gpu as gp
from ccdiag.ledger import stats
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class EncryptedCollective(Rule):
    """NCCL collectives run longer at equal bytes: NVLink / network traffic is encrypted.

    ## What it detects
    Collective kernels (``collective`` rows, or kernels named ``nccl*``) whose busy time per step
    grew, with their effective bandwidth (bytes / duration) per message size in both runs.

    ## Why it costs time
    Multi-GPU CC encrypts NVLink traffic (Blackwell) or runs software AES-GCM per ring step: each
    GPU does 4·k·(n−1) crypto operations per iteration for k collectives over n ranks. All-reduce
    185 → 156 GB/s, small P2P write 3.7 → 14.5 µs (B200).

    ## Evidence
    Collective busy time per aligned step; per collective name: calls, bytes, duration,
    bandwidth; per run a fit ``time = fixed + bytes / bandwidth`` (``ccdiag.collectives``) that
    predicts each fix. Removal (replay): each matched collective kernel's growth. Ledger claim:
    the growth of GPU-critical collective time (``gpu_collective``).

    ## Example
    ``tests/rules/cases/encrypted-collective.yaml`` ``fires_when_allreduce_slows_down``.
    Published (DDP, 4 GPUs): 8.68x per iteration on average under GPU TEEs.

    ## Fix
    - Narrower tensor parallelism; DP / EP instead of TP (published: TP4 kept 94 % of TP8
      throughput at half the CC overhead). Predicted: the crypto operations scale with n−1, the
      ring traffic per GPU with 2(n−1)/n; it also gives up parallel speed.
    - Larger DDP buckets (published: ``bucket_cap_mb`` 44 → 400 MB cut the overhead 4.95–7.31x).
      Predicted: collectives removed × the growth of the fixed cost per collective; the same
      bytes are still encrypted, so bandwidth-bound growth is not recovered.

    ## Limits
    Overlapped communication that grew but stayed hidden behind compute is not attributed. Kernels
    are matched by name only; a changed NCCL algorithm between runs counts as CC.

    ## Options
    See below.

    ## References
    - Lee et al., "Characterization of GPU TEE Overheads in Distributed Data Parallel ML
      Training", arXiv 2501.11771.
    """

    code: ClassVar[str] = "CO01"
    name: ClassVar[str] = "encrypted-collective"
    mechanism: ClassVar[str] = "encrypted_collectives"
    requires: ClassVar[frozenset[Kind]] = frozenset()
    claimed: ClassVar[frozenset[str]] = frozenset({"gpu_collective"})
    call_classes: ClassVar[frozenset[str]] = frozenset()

    @dataclass(frozen=True)
    class Options:
        min_growth_ns: int = opt(10_000, "Smallest growth of collective busy time per step (ns).")
        min_ratio: float = opt(1.1, "Smallest treatment/baseline ratio of collective busy time.")
        bucket_cap_mb: int = opt(400, "DDP bucket size the bucket_cap_mb advice assumes (MB).")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        gb, gt = (s.gpu.filter(pl.col("gclass") == "collective") for s in (ctx.pair.baseline, ctx.pair.treatment))  # fmt: skip
        if gt.height == 0:
            return Outcome.skipped("no collective (NCCL) kernels in the treatment")
        b, t = (float(ctx.busy[f"{p}_collective"].median() or 0) for p in ("b", "t"))
        if t - b < self.options.min_growth_ns or t < self.options.min_ratio * max(b, 1):
            return Outcome.clean(f"collective busy time {duration(b)} -> {duration(t)}/step")
        meta = ctx.pair.treatment.trace.meta
        world = meta.world_size or max(ctx.pair.treatment.trace.events["rank"].n_unique(), 1)
        k = stats.per_step_median(gt, pl.len())
        nbytes = stats.per_step_median(gt, pl.col("bytes").fill_null(0).sum())
        gbps = (pl.col("bytes").median() / pl.col("dur_ns").median()).round(2)
        cf = cc.facts_of_pair(ctx.pair)
        top = {
            "calls": pl.len(),
            "bytes_p50": pl.col("bytes").median(),
            "dur_p50_ns": pl.col("dur_ns").median(),
            "gbps": gbps,
        }
        sized = {
            "bytes": pl.col("bytes").median(),
            "n": pl.len(),
            "dur_ns": pl.col("dur_ns").median(),
            "gbps": gbps,
        }
        fit = (
            {
                "kernel": cf.name,
                "per_collective_growth_ns": int(cf.dt_ns),
                "baseline": cf.fit_b.as_dict(),
                "treatment": cf.fit_t.as_dict(),
            }
            if cf
            else None
        )
        ev = {
            "collective_busy_ns_per_step": {"baseline": int(b), "treatment": int(t)},
            "collectives_per_step": stats.both(lambda d: stats.per_step_median(d, pl.len()), gb, gt),
            "by_name": stats.both(lambda d: stats.top_list(d, "name", **top), gb, gt),
            "bandwidth_vs_size": stats.both(lambda d: stats.top_list(
                d.with_columns(gp.size_bucket().alias("bucket")), "bucket", 8, **sized), gb, gt),
            "cost_fit": fit, "world_size": world,
            "crypto_ops_per_iteration": cc.crypto_ops(k, world) if world > 1 else None,
            "bytes_per_step": int(nbytes),
            "published": "B200 all-reduce 185 -> 156 GB/s; all-to-all 149 -> 130 GB/s",
        }  # fmt: skip
        summary = f"collective kernels {duration(b)} -> {duration(t)}/step ({k:.0f} per step)"
        cl, rm = claims(ctx.ledger, "gpu_collective", "d_gpu_collective"), al.gpu_growth_removal(ctx.matched_gpu, ["collective"])  # fmt: skip
        facts = {"k": k, "world": world, "cf": cf, "ddp": _is_ddp(ctx), "grew": t - b}
        return self.fired(cl, summary, ev, "medium", removal=rm, **facts)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        cf, n = f.facts["cf"], int(f.facts["world"])
        if cf is None or ns <= 0:
            return []
        share = cc.exposure(ns, f.facts["grew"])
        if f.facts["ddp"]:
            cap = self.options.bucket_cap_mb
            k, k_new = cf.k, cc.ddp_buckets(cf.sizes, cap)
            if k_new >= k:
                return []
            p = cc.predict_bucket_cap(cf.fit_b, cf.fit_t, k, k_new, share, cf.dt_ns)
            ops = f"; crypto ops per GPU 4*k*(n-1): {cc.crypto_ops(k, n)} -> {cc.crypto_ops(k_new, n)}"
            text = (f"DDP: raise bucket_cap_mb to {cap} ({k:.0f} -> {k_new} all-reduces per step"
                    f"{ops if n > 1 else ''}). Fewer collectives save their fixed cost only: the "
                    "same bytes are still encrypted.")  # fmt: skip
            return [recommendation("bucket_cap_mb", p.recovery_ns, delta, text, _how(p))]
        n_new = cc.tp_new_width(n)
        p = cc.predict_narrower_tp(cf.fit_b, cf.fit_t, cf.k, n, n_new, share, cf.nbytes, cf.dt_ns)
        text = (f"Narrower tensor parallelism (TP {n} -> {n_new}), or DP / EP instead of TP: crypto "
                f"ops per GPU 4*k*(n-1) {cc.crypto_ops(cf.k, n)} -> {cc.crypto_ops(cf.k, n_new)}. "
                "It also gives up parallel speed: weigh the step time, not only the CC overhead.")  # fmt: skip
        return [recommendation("narrower_tp", p.recovery_ns, delta, text, _how(p))]


def _how(p: cc.Prediction) -> str:
    return p.method + ("" if p.upper_ns is None else f" (upper bound {duration(p.upper_ns)}/step)")


def _is_ddp(ctx: RuleContext) -> bool:
    """DistributedDataParallel marks its forward (``DistributedDataParallel.forward``)."""
    ev = ctx.pair.treatment.trace.events
    names = ev.filter(pl.col("kind").is_in(["python", "cpu_op", "annotation"]))["name"]
    return bool(names.str.contains("DistributedDataParallel|ddp_comm_hook").any())
