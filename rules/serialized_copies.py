"""CP01 serialized-copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _copies as cp
from ccdiag.rules import _host_only as hx
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.ledger import stats
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class SerializedCopies(Rule):
    """Host↔device copies cost a fixed toll plus bytes at CPU-crypto bandwidth, one at a time.

    ## What it detects
    Host-crossing copies (decided from memory kinds: pageable, pinned, or *managed*, which is how
    CC shows pinned buffers) whose exposed latency grew: a larger fixed cost per copy, a lower
    bandwidth (fit ``latency = toll + bytes / bandwidth`` in both runs), and copies on different
    streams that no longer overlap.

    ## Why it costs time
    Under CC the GPU cannot DMA into the VM's private memory: data is staged through bounce buffers
    and encrypted by the CPU (AES-GCM, a few GB/s per core), one transfer at a time per context.

    ## Evidence
    Copy API calls on the main thread joined (correlation, within pid) to their GPU copies. Claims
    the growth of exposed copy-call time (``copy_api``: issue cost, host-side padding) and of
    GPU-critical time in host-crossing copies (``gpu_copy``: the host waited for the transfer).
    Host work that became exposed because a copy now blocks is ``blocked_non_blocking`` (CP02).
    Copy time that an async copy would have hidden but a blocked one exposes is shared with CP02
    (half each, the Shapley split of an interaction): see CP02's Evidence. A padding kernel right
    after a copy (``Pair.copy_padding``) is the copy's cost (``_copies.with_gpu_padding``), and so
    is a host gap after a copy call no op issued that grew more than its like (``_copies._beside``),
    which counts as the copy's latency in the test of whether copies got slower.

    ## Example
    ``tests/rules/cases/serialized-copies.yaml`` ``fires_when_copies_pay_a_toll``. Published
    (H100, ISPASS): a 67 MB pinned H2D takes 1.58 ms off, 25.6 ms on; pinned 64 B 2.1 → 21.9 µs.

    ## Fix
    - Batch small copies into one (pack tensors; one H2D per step). Small copies that were
      synchronous already (uploads of small tensors, reads of sizes or flags inside the step)
      cannot be packed: keep those values on the GPU, read back once (``fewer_sync_copies``).
    - Keep weights and KV cache resident on the GPU; avoid offload on the hot path.
    - For bulk loads, a pool of CUDA contexts (one loader per context).

    ## Limits
    Device-to-device copies are not counted (CC does not change them). A copy whose size changed
    between runs counts as a slower copy. Copies issued from other threads are not on the ledger.
    Host-only pairs: copy-call growth from the API trace, sizes unknown (``rules/_host_only.py``).

    ## Options
    See below.

    ## References
    - NVIDIA Confidential Computing R550 release notes, Limitations (CPU encrypts and decrypts
      the bounce buffers); ISPASS 2025 (H100, TDX): pinned H2D 1 MB 39.9 → 2.63 GB/s; Phala,
      "TEE is Really Fast on Nvidia Blackwell": more streams give no more copy bandwidth.
    """

    code: ClassVar[str] = "CP01"
    name: ClassVar[str] = "serialized-copies"
    mechanism: ClassVar[str] = "serialized_copies"
    #: memcpy rows, checked in ``evaluate``: a host-only pair has copy calls without them
    requires: ClassVar[frozenset[Kind]] = frozenset()
    requires_gpu: ClassVar[bool] = False
    claimed: ClassVar[frozenset[str]] = frozenset({"copy_api", "gpu_copy", "op_copy"})
    call_classes: ClassVar[frozenset[str]] = frozenset({"copy"})

    @dataclass(frozen=True)
    class Options:
        min_growth_ns: int = opt(1000, "Smallest growth of the median copy latency (ns).")
        min_ratio: float = opt(1.2, "Smallest treatment/baseline ratio of median copy latency.")
        small_bytes: int = opt(65536, "Copies below this many bytes are batching candidates.")

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.op_mode:
            d = float(ctx.ledger["d_op_copy"].median() or 0)
            if d < self.options.min_growth_ns:
                return Outcome.clean("blocking copy ops did not grow")
            ev = {"op_copy_growth_ns_per_step": int(d), "method": "host-only: blocking copy ops"}
            cl, summary = claims(ctx.ledger, "op_copy", "d_op_copy"), f"copy ops +{duration(d)}"
            return self.fired(cl, summary, ev, "low", n_small=0, toll_ns=0, large_share=0.0)
        if ctx.host_only:  # no GPU trace in the treatment: rules/_host_only.py
            return hx.copies_outcome(self, ctx)
        if "memcpy" not in ctx.kinds("b") | ctx.kinds("t"):
            return Outcome.skipped("no memcpy events in either trace")
        cb, ct = ctx.copies_b, ctx.copies_t
        if cb.height == 0 or ct.height == 0:
            return Outcome.clean("no host-crossing copies on the main thread")
        mb, mt = float(cb["latency_ns"].median()), float(ct["latency_ns"].median())
        side_rows, side = cp.beside(ctx.matched)  # a pad spun beside the call is latency too
        fit = stats.both(cp.fit_toll_bandwidth, cb, ct)
        ov = stats.both(cp.copy_overlap, cb, ct)
        cb_, ct_ = (ov[k]["concurrency"] or 1.0 for k in ("baseline", "treatment"))
        o, eff = self.options, mt + side
        grew = eff - mb >= o.min_growth_ns and eff >= o.min_ratio * mb
        serial = cb_ > 1.2 and ct_ < 0.8 * cb_
        lat = f"median copy latency {duration(mb)} -> {duration(mt)}" + (
            f" (+{duration(side)} a copy beside the call)" if side >= 1000 else "")  # fmt: skip
        if not (grew or serial):
            return Outcome.clean(lat)
        led = ctx.ledger
        cl = pl.concat([claims(led, "copy_api", "d_copy_api"), claims(led, "gpu_copy", "d_gpu_copy")])  # fmt: skip
        ev = {
            "copies_per_step": stats.both(lambda d: stats.per_step_median(d, pl.len()), cb, ct),
            "latency_ns": stats.both(lambda d: stats.percentiles(d["latency_ns"]), cb, ct),
            "fit": fit,
            "buckets": cp.bucket_table(cb, ct),
            "overlap": ov,
            "memory_kinds_treatment": cp.memory_kinds(ct),
            "top_copies": stats.top_list(
                ct, "name", latency_ns=pl.col("latency_ns").max(), bytes=pl.col("bytes").max()
            ),
            "published": "H100 pinned H2D 1 MB 39.9 -> 2.63 GB/s; 64 B 2.1 -> 21.9 us (ISPASS)",
        }
        ft = fit["treatment"]
        bw = f", {ft['gbps']:.1f} GB/s" if ft["gbps"] else ""
        summary = f"{lat}; fitted toll {duration(ft['toll_ns'])}{bw}" + (
            "; copies no longer overlap" if serial else "")  # fmt: skip
        conf = "high" if grew and (ft["r2"] or 0) > 0.8 else "medium"
        is_small = pl.col("bytes") < self.options.small_bytes
        small_sync = is_small & pl.col("blocking")
        small = ct.filter(is_small)
        large = float(ct.filter(pl.col("bytes") >= 1 << 20)["latency_ns"].sum())
        removal = cp.with_gpu_padding(cp.serialization_removal(ctx.matched, side_rows), ctx)
        facts = {
            "n_small": stats.per_step_median(small, pl.len()),
            "n_small_sync": stats.per_step_median(cb.filter(small_sync), pl.len()),
            "toll_ns": max(ft["toll_ns"] - max(fit["baseline"]["toll_ns"], 0), 0),
            "large_share": large / max(float(ct["latency_ns"].sum()), 1.0),
        }
        return self.fired(cl, summary, ev, conf, removal=removal, **facts)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        n, toll, large = f.facts["n_small"], f.facts["toll_ns"], f.facts["large_share"]
        out = []
        for fix, k, text, how in cp.small_copy_advice(n, f.facts.get("n_small_sync", 0.0), toll):
            out.append(recommendation(fix, min(ns, (k - 1) * toll), delta, text, how))
        if large > 0.2:
            text = "Keep weights and KV cache resident on the GPU; no offload on the hot path."
            how = "attributed ns x share of copy latency in copies >= 1 MiB"
            out.append(recommendation("resident_weights", ns * large, delta, text, how))
            text = (
                "For bulk loads, a pool of CUDA contexts (one loader each): the secure copy "
                "channel serializes copies within a context. Published: model load 287 s -> 8.4 s."
            )
            how = (
                "published: more contexts recover ~0.6-0.7x of the lost bandwidth; 0.6 x bulk share"
            )
            out.append(recommendation("context_pool", 0.6 * ns * large, delta, text, how))
        return out
