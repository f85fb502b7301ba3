"""CO01 encrypted-collective."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _expr as ex
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.schema import Kind
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
    GPU busy time of collective kernels per aligned step (union over streams); claims the growth of
    GPU-critical collective time (``gpu_collective``), so only communication the host actually
    waited for (exposed communication) is attributed. Per collective name: calls per step, median
    bytes, duration and bandwidth.

    ## Example
    ``tests/rules/cases/encrypted-collective.yaml`` ``fires_when_allreduce_slows_down``.
    Published (DDP, 4 GPUs): 8.68x per iteration on average under GPU TEEs.

    ## Fix
    - Narrower tensor parallelism; DP / EP instead of TP (TP4 kept 94 % of TP8 throughput at half
      the CC overhead).
    - Larger DDP buckets (``bucket_cap_mb`` 44 → 400 MB cut the overhead 4.95–7.31x): fewer
      collectives, fewer crypto operations.

    ## Limits
    Overlapped communication that grew but stayed hidden behind compute is not attributed. Kernels
    are matched by name only; a changed NCCL algorithm between runs counts as CC.

    ## Options
    See below.

    ## References
    - DESIGN.md mechanism ``encrypted_collectives``; arXiv 2501.11771 (DDP under GPU TEEs).
    """

    code: ClassVar[str] = "CO01"
    name: ClassVar[str] = "encrypted-collective"
    mechanism: ClassVar[str] = "encrypted_collectives"
    requires: ClassVar[frozenset[Kind]] = frozenset()

    @dataclass(frozen=True)
    class Options:
        min_growth_ns: int = opt(10_000, "Smallest growth of collective busy time per step (ns).")
        min_ratio: float = opt(1.1, "Smallest treatment/baseline ratio of collective busy time.")
        bucket_cap_mb: int = opt(400, "DDP bucket size the bucket_cap_mb advice assumes (MB).")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        gb, gt = (
            s.gpu.filter(pl.col("gclass") == "collective")
            for s in (ctx.pair.baseline, ctx.pair.treatment)
        )
        if gt.height == 0:
            return Outcome.skipped("no collective (NCCL) kernels in the treatment")
        b, t = (float(ctx.busy[f"{p}_collective"].median() or 0) for p in ("b", "t"))
        if t - b < self.options.min_growth_ns or t < self.options.min_ratio * max(b, 1):
            return Outcome.clean(f"collective busy time {b / 1e3:.1f} -> {t / 1e3:.1f} us/step")
        meta = ctx.pair.treatment.trace.meta
        world = meta.world_size or max(ctx.pair.treatment.trace.events["rank"].n_unique(), 1)
        k = ex.per_step_median(gt, pl.len())
        nbytes = ex.per_step_median(gt, pl.col("bytes").fill_null(0).sum())
        gbps = (pl.col("bytes").median() / pl.col("dur_ns").median()).round(2)
        ev = {
            "collective_busy_ns_per_step": {"baseline": int(b), "treatment": int(t)},
            "collectives_per_step": ex.both(lambda d: ex.per_step_median(d, pl.len()), gb, gt),
            "by_name": ex.both(
                lambda d: ex.top_list(
                    d,
                    "name",
                    calls=pl.len(),
                    bytes_p50=pl.col("bytes").median(),
                    dur_p50_ns=pl.col("dur_ns").median(),
                    gbps=gbps,
                ),
                gb,
                gt,
            ),
            "bandwidth_vs_size": ex.both(
                lambda d: ex.top_list(
                    d.with_columns(ex.size_bucket().alias("bucket")),
                    "bucket",
                    8,
                    bytes=pl.col("bytes").median(),
                    n=pl.len(),
                    dur_ns=pl.col("dur_ns").median(),
                    gbps=gbps,
                ),
                gb,
                gt,
            ),
            "world_size": world,
            "crypto_ops_per_iteration": int(4 * k * (world - 1)) if world > 1 else None,
            "bytes_per_step": int(nbytes),
            "published": "B200 all-reduce 185 -> 156 GB/s; all-to-all 149 -> 130 GB/s",
        }
        summary = f"collective kernels {b / 1e3:.1f} -> {t / 1e3:.1f} us/step ({k:.0f} per step)"
        cl = claims(ctx.ledger, "gpu_collective", "d_gpu_collective")
        return self.fired(cl, summary, ev, "medium", k=k, bytes=nbytes, world=world)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        k, n = f.facts["k"], f.facts["world"]
        text = "Use narrower tensor parallelism, or DP / EP instead of TP: less encrypted traffic."
        how = (
            "published: TP4 kept 94 % of TP8 throughput at half the CC overhead -> 0.5 x attributed"
        )
        out = [recommendation("narrower_tp", 0.5 * ns, delta, text, how)]
        k_new = max(1, math.ceil(f.facts["bytes"] / (self.options.bucket_cap_mb * 1e6)))
        if k > k_new:
            ops = f"; crypto ops 4*k*(n-1): {int(4 * k * (n - 1))} -> {int(4 * k_new * (n - 1))}"
            text = (
                f"DDP: raise bucket_cap_mb to {self.options.bucket_cap_mb} ({k:.0f} -> {k_new} "
                f"collectives per step{ops if n > 1 else ''})."
            )
            how = (
                "attributed x share of collectives removed (fixed cost each); published 4.95-7.31x"
            )
            out.append(recommendation("bucket_cap_mb", ns * (1 - k_new / k), delta, text, how))
        return out
