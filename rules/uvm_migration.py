"""UV01 uvm-migration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from ccdiag.rules import _host_only as hx
from ccdiag.rules._base import Finding, Outcome, Rule, RuleContext, claims, opt, recommendation

from ccdiag.ledger import align as al
from ccdiag.ledger import stats
from ccdiag.schema import Kind
from ccdiag.units import duration
from ccdiag.verdict import Recommendation


class UvmMigration(Rule):
    """Kernels touching managed memory wait for page migrations that the CPU must encrypt.

    ## What it detects
    Unified-memory activity (``uvm_fault`` rows, ``[CUDA memcpy Unified ...]`` migrations) in the
    treatment together with compute kernels that run much longer than in the baseline: the fault
    servicing happens inside the kernels.

    ## Why it costs time
    Every migrated page of managed memory goes through encrypted DMA staging buffers (2 MB blocks,
    per-page auth tag), encrypted or decrypted by the CPU at ~1.3–3 GB/s per core.

    ## Evidence
    GPU busy time per aligned step of compute kernels and of UVM migrations in both runs; claims
    the growth of GPU-critical compute and migration time (``gpu_kernel``, ``gpu_uvm``): only
    what the host waited for is attributed. Migration counts,
    bytes and time; kernels ranked by growth.

    ## Example
    ``tests/rules/cases/uvm-migration.yaml`` ``fires_when_kernels_fault_on_managed_memory``.
    Published (H100, ISPASS UVM builds): 3DCONV kernel time 51.7 → 12,971 ms (up to ~250x).

    ## Fix
    - Prefetch managed memory (``cudaMemPrefetchAsync``) before the kernels that touch it.
    - Avoid managed memory on the hot path: explicit device buffers and bulk copies.

    ## Limits
    Kernel growth without any UVM activity is left unattributed (clocks, contention: not CC).
    Fault rows that nsys attributes to no step are placed by their start time. Host-only pairs
    (no ``cuda_gpu_trace``): kernel growth from ``cuda_gpu_kern_sum`` against the growth of the
    calls that waited for it, only with managed memory in the program (``rules/_host_only.py``).

    ## Options
    See below.

    ## References
    - NVIDIA developer forums, "UVM in Confidential Computing mode"; open-gpu-kernel-modules
      ``kernel-open/nvidia-uvm/uvm_conf_computing.h``; ISPASS 2025 artifact ``example_csv``.
    """

    code: ClassVar[str] = "UV01"
    name: ClassVar[str] = "uvm-migration"
    mechanism: ClassVar[str] = "uvm_migration"
    requires: ClassVar[frozenset[Kind]] = frozenset()
    requires_gpu: ClassVar[bool] = False  # host-only pairs: see _host_only
    claimed: ClassVar[frozenset[str]] = frozenset({"gpu_kernel", "gpu_uvm"})
    call_classes: ClassVar[frozenset[str]] = frozenset()

    @dataclass(frozen=True)
    class Options:
        min_ratio: float = opt(
            1.05, "Smallest treatment/baseline ratio of kernel + migration time."
        )
        min_growth_ns: int = opt(100_000, "...and smallest growth of it per step (ns).")
        bulk_gbps: float = opt(
            3.0, "CC bulk H2D bandwidth assumed for prefetching (GB/s; H100 ~3)."
        )

    def evaluate(self, ctx: RuleContext) -> Outcome:
        if ctx.host_only:  # no GPU trace in the treatment: rules/_host_only.py
            return hx.uvm_outcome(self, ctx)
        ub, ut = (
            s.gpu.filter(pl.col("gclass") == "uvm") for s in (ctx.pair.baseline, ctx.pair.treatment)
        )
        if ut.height == 0 and ub.height == 0:
            return Outcome.skipped("no unified-memory activity (uvm_fault rows or Unified memcpy)")
        busy = ctx.busy
        b, t = (float((busy[f"{p}_kernel"] + busy[f"{p}_uvm"]).median() or 0) for p in ("b", "t"))
        if t < self.options.min_ratio * max(b, 1) or t - b < self.options.min_growth_ns:
            return Outcome.clean(f"kernel + migration time {duration(b)} -> {duration(t)}/step")
        led, steps = ctx.ledger, max(ctx.ledger.height, 1)
        cl = pl.concat(
            [claims(led, "gpu_kernel", "d_gpu_kernel"), claims(led, "gpu_uvm", "d_gpu_uvm")]
        )

        def mig(u: pl.DataFrame) -> dict:
            return {
                "count": u.height,
                "bytes": int(u["bytes"].fill_null(0).sum()),
                "time_ns": int(u["dur_ns"].sum()),
                "per_step": round(u.height / steps, 1),
            }

        ev = {
            "kernel_and_migration_ns_per_step": {"baseline": int(b), "treatment": int(t)},
            "kernel_busy_ns_per_step": stats.both(
                lambda p: int(busy[f"{p}_kernel"].median() or 0), "b", "t"
            ),
            "migrations": stats.both(mig, ub, ut),
            "top_kernels": _top(ctx),
            "published": "H100 UVM builds: kernel time up to ~250x (3DCONV 51.7 -> 12,971 ms)",
        }
        summary = f"kernels + UVM migrations {duration(b)} -> {duration(t)}/step"
        nbytes = int(ut["bytes"].fill_null(0).sum() / steps)
        rm = al.gpu_growth_removal(ctx.matched_gpu, ["uvm", "kernel"])
        conf = "high" if ut.height else "medium"
        return self.fired(cl, summary, ev, conf, removal=rm, bytes=nbytes)

    def recommend(self, ctx: RuleContext, f: Finding, ns: int, delta: int) -> list[Recommendation]:
        bulk = f.facts["bytes"] / self.options.bulk_gbps  # ns at bulk CC bandwidth
        text = (
            "Prefetch managed memory (cudaMemPrefetchAsync) before the kernels, or use device "
            "buffers: migrations become bulk copies instead of faults inside kernels."
        )
        how = (
            f"attributed - migrated bytes per step / {self.options.bulk_gbps} GB/s (bulk CC copies)"
        )
        return [recommendation("prefetch_managed", ns - bulk, delta, text, how)]


def _top(ctx: RuleContext) -> list[dict]:
    def per(g: pl.DataFrame) -> pl.DataFrame:
        k = g.filter(pl.col("gclass") == "kernel")
        return k.group_by("name").agg(pl.col("dur_ns").sum().alias("ns"))

    j = per(ctx.pair.baseline.gpu).join(per(ctx.pair.treatment.gpu), on="name", suffix="_t")
    j = (
        j.with_columns(pl.col("ns_t") - pl.col("ns"))
        .sort(["ns_t", "name"], descending=[True, False])
        .head(5)
    )
    return [
        {"kernel": r["name"][:100], "growth_ns": r["ns_t"], "baseline_ns": r["ns"]}
        for r in j.iter_rows(named=True)
    ]
