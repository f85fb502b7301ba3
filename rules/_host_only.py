"""Host-only and summary-only pairs: what the API trace and the ``*_sum`` tables still tell.

A pair is *host-only* when the treatment recorded no GPU activity: a CC-``on`` run, or an
``nsys stats`` folder with ``cuda_api_trace`` (+ ``cuda_gpu_kern_sum``) but no
``cuda_gpu_trace`` (BN's UVM run in the ISPASS'25 artifact). Then the host path is the
critical path (no GPU-critical windows: every call's whole duration is on the ledger) and the
mechanisms are measured from what is left:

- **launch toll**: per kernel-launch API, the growth of the call's mean duration (real CC puts the
  toll inside the call); other submissions in the launch class (memsets, device copies) are given
  at most that toll per call: what they grew beyond it is not a launch toll (a memset on managed
  memory waits for page migration);
- **GPU work the host waited for**: kernel time per step on each side, from the GPU trace where
  there is one, else from the ``cuda_gpu_kern_sum`` summary (``Trace.summaries``). Its growth is
  laid, per step, on the growth of the calls that wait for kernels, in this order: synchronize
  calls, implicitly synchronizing frees (``cudaFree`` waits for the device), blocking copies.
  What that explains is not a sync stall, a setup cost or a copy cost;
- **managed memory** (``cudaMallocManaged``, UVM rows or memsets on managed memory in a GPU trace)
  makes that waited-for kernel growth ``uvm_migration``, and memset growth beyond the launch toll
  too; without managed memory the kernel growth stays unattributed, said so.

What these tables cannot tell apart (the wait for slower kernels vs a slower wake-up of each
sync when the treatment's kernel time is unknown; migration inside a memset vs any other memset
cost) is stated in the rules' outcomes with low confidence, never dropped silently.

Pure functions of a :class:`~ccdiag.rules._base.RuleContext` (typed loosely here to keep this
module importable by the rules without a cycle).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ccdiag.rules import _expr as ex

#: Setup-class calls that wait for the device to finish (the runtime synchronizes first).
WAITING_SETUP = r"^cu(da)?(Free$|FreeHost|FreeAsync|MemFree$|MemFreeHost|DeviceReset|CtxDestroy)"
#: Managed allocations (the program uses unified memory).
MANAGED_ALLOC = r"^cu(da)?(MallocManaged|MemAllocManaged)"
#: Device allocations that are not managed (a memset may target them).
DEVICE_ALLOC = r"^cu(da)?(Malloc$|MallocAsync|MallocPitch|Malloc3D|MemAlloc$|MemAllocAsync|MemAllocPitch)"
#: Order in which waited-for kernel growth is laid on the waiting calls' growth.
WAIT_ORDER: tuple[str, ...] = ("sync", "setup_wait", "copy_wait")
_CATEGORY = {"sync": "sync_api", "setup_wait": "setup_api", "copy_wait": "copy_api"}


def _steps(ctx: Any) -> pl.DataFrame:
    return ctx.pair.aligned.select("rank", "idx")


def _per_step(ctx: Any, side: str, rows: pl.DataFrame, value: pl.Expr, name: str) -> pl.DataFrame:
    """rank, idx, ``name``: a per-step sum over ``rows`` (main-thread calls), 0 where none."""
    agg = rows.group_by("rank", "step").agg(value.sum().alias(name))
    out = ctx.aligned_steps(agg, side)
    return _steps(ctx).join(out, on=["rank", "idx"], how="left").fill_null(0)


def _waiting(calls: pl.DataFrame) -> pl.DataFrame:
    """Main-thread calls that wait for GPU work, with ``wclass`` (sync / setup_wait / copy_wait)."""
    n = ex.base_name()
    w = (
        pl.when(pl.col("cls") == "sync")
        .then(pl.lit("sync"))
        .when((pl.col("cls") == "setup") & n.str.contains(WAITING_SETUP))
        .then(pl.lit("setup_wait"))
        .when((pl.col("cls") == "copy") & ~n.str.ends_with("Async"))
        .then(pl.lit("copy_wait"))
    )
    return calls.with_columns(w.alias("wclass")).filter(pl.col("wclass").is_not_null())


def launch_tolls(ctx: Any) -> dict[str, Any]:
    """Per-call launch toll per API from the API trace (see the module docstring).

    Returns ``by_api`` (api, kernel, calls b/t, mean per call b/t, toll_ns, excess_ns per call),
    ``kernel_toll_ns`` (mean growth per kernel-launch call) and ``claims`` / ``excess`` frames
    (rank, idx, ns): per step, calls x toll, and calls x growth beyond the toll.
    """
    lb, lt = (c.filter(pl.col("cls") == "launch") for c in (ctx.calls_b, ctx.calls_t))
    if lb.height == 0 or lt.height == 0:
        empty = _steps(ctx).with_columns(pl.lit(0.0).alias("ns"))
        return {"by_api": [], "kernel_toll_ns": 0.0, "claims": empty, "excess": empty}

    def stats(d: pl.DataFrame, p: str) -> pl.DataFrame:
        return d.group_by(ex.base_name().alias("api")).agg(
            pl.len().alias(f"n_{p}"), pl.col("eff_ns").mean().alias(f"mean_{p}")
        )

    j = stats(lb, "b").join(stats(lt, "t"), on="api")
    j = j.with_columns(
        pl.col("api").str.contains(r"^cu(da)?(Launch|GraphLaunch)").alias("kernel"),
        (pl.col("mean_t") - pl.col("mean_b")).alias("growth"),
    )
    k = j.filter(pl.col("kernel"))
    kernel_toll = (
        float((k["growth"] * k["n_t"]).sum() / max(int(k["n_t"].sum()), 1)) if k.height else None
    )
    toll = (
        pl.when(pl.col("kernel"))
        .then(pl.col("growth"))
        .otherwise(
            pl.min_horizontal("growth", pl.lit(kernel_toll if kernel_toll is not None else 1e18))
        )
        .clip(lower_bound=0)
    )
    j = j.with_columns(toll.alias("toll_ns"))
    j = j.with_columns((pl.col("growth") - pl.col("toll_ns")).clip(lower_bound=0).alias("excess_ns"))
    per_api = j.select("api", "toll_ns", "excess_ns")
    rows = lt.with_columns(ex.base_name().alias("api")).join(per_api, on="api", how="left")
    rows = rows.with_columns(pl.col("toll_ns", "excess_ns").fill_null(0.0))
    return {
        "by_api": [
            {
                "api": r["api"],
                "calls": {"baseline": int(r["n_b"]), "treatment": int(r["n_t"])},
                "mean_call_ns": {"baseline": int(r["mean_b"]), "treatment": int(r["mean_t"])},
                "toll_ns": int(r["toll_ns"]),
                "beyond_toll_ns": int(r["excess_ns"]),
            }
            for r in j.sort("n_t", "api", descending=[True, False]).iter_rows(named=True)
        ],
        "kernel_toll_ns": kernel_toll or 0.0,
        "claims": _per_step(ctx, "t", rows, pl.col("toll_ns"), "ns"),
        "excess": _per_step(ctx, "t", rows.filter(~pl.col("api").is_in(k["api"].implode())),
                            pl.col("excess_ns"), "ns"),
    }  # fmt: skip


def side_gpu(side: Any) -> pl.DataFrame:
    """A run's GPU rows in its aligned steps, with ``gclass`` (a host-only pair's sides keep
    none: the baseline's GPU trace is read here, when it has one)."""
    if side.gpu.height or not side.has_gpu:
        return side.gpu  # type: ignore[no-any-return]
    return ex.gpu_rows(side.trace.events, side.windows)


def kernel_time(side: Any) -> tuple[float | None, str]:
    """Kernel time per step of one run: (ns or None, where it came from)."""
    steps = max(side.windows.height, 1)
    gpu = side_gpu(side)
    if side.has_gpu and gpu.height:
        k = gpu.filter(pl.col("gclass").is_in(["kernel", "collective"]))
        return float(k["dur_ns"].sum()) / steps, "cuda_gpu_trace kernels in the aligned steps"
    sums = side.trace.summaries
    ks = sums.filter(pl.col("report") == "kern_sum") if sums.height else sums
    if ks.height == 0:
        return None, "unknown (no GPU trace, no cuda_gpu_kern_sum)"
    total_steps = max(side.trace.steps.filter(pl.col("rank") == pl.col("rank").min()).height, 1)
    src = "cuda_gpu_kern_sum (whole trace"
    src += ")" if total_steps == 1 else f", spread over {total_steps} steps)"
    return float(ks["total_ns"].sum()) / total_steps, src


def managed_memory(ctx: Any) -> dict[str, int]:
    """Evidence that the program uses unified memory, from both runs."""

    def allocs(s: Any, pattern: str = MANAGED_ALLOC) -> int:
        ev = s.trace.events
        api = ev.filter(pl.col("kind").is_in(ex.API_KINDS))
        n = api.filter(ex.base_name().str.contains(pattern)).height
        sm = s.trace.summaries
        if n == 0 and sm.height:
            hit = sm.filter((pl.col("report") == "api_sum") & pl.col("name").str.contains(pattern))
            n = int(hit["count"].sum())
        return n

    def gpu(s: Any, what: str) -> int:
        g = side_gpu(s)
        if g.height == 0:
            return 0
        if what == "uvm":
            return g.filter(pl.col("gclass") == "uvm").height
        return g.filter(
            (pl.col("kind") == "memset") & (pl.col("dst_mem").cast(pl.String) == "managed")
        ).height

    b, t = ctx.pair.baseline, ctx.pair.treatment
    managed = allocs(b) + allocs(t)
    return {
        "managed_allocations": managed,
        # every allocation managed: memsets can only target managed memory
        "only_managed_allocations": int(
            managed > 0 and allocs(b, DEVICE_ALLOC) + allocs(t, DEVICE_ALLOC) == 0
        ),
        "uvm_migrations_in_gpu_traces": gpu(b, "uvm") + gpu(t, "uvm"),
        "memsets_on_managed_memory": gpu(b, "memset") + gpu(t, "memset"),
    }


def waited_split(ctx: Any) -> dict[str, Any]:
    """How much of the waiting calls' growth the growth of kernel time explains, per category.

    Returns ``kernel_ns`` {baseline, treatment, source}, ``kernel_growth_ns`` (per step, None
    when a side's kernel time is unknown), ``waiting_growth_ns`` {sync, setup_wait, copy_wait}
    (mean per step), ``explained`` {sync, setup_wait, copy_wait} frames (rank, idx, ns) and
    ``explained_ns`` (their mean per step), ``managed`` (:func:`managed_memory`).
    """
    cache = ctx.pair.derived.setdefault("host_only_split", {})
    if "split" not in cache:
        cache["split"] = _split(ctx)
    return cache["split"]  # type: ignore[no-any-return]


def _split(ctx: Any) -> dict[str, Any]:
    kb, src_b = kernel_time(ctx.pair.baseline)
    kt, src_t = kernel_time(ctx.pair.treatment)
    growth = None if kb is None or kt is None else kt - kb
    wb, wt = _waiting(ctx.calls_b), _waiting(ctx.calls_t)
    per: dict[str, pl.DataFrame] = {}
    for w in WAIT_ORDER:
        b = _per_step(ctx, "b", wb.filter(pl.col("wclass") == w), pl.col("eff_ns"), "b")
        t = _per_step(ctx, "t", wt.filter(pl.col("wclass") == w), pl.col("eff_ns"), "t")
        per[w] = b.join(t, on=["rank", "idx"]).select(
            "rank", "idx", (pl.col("t") - pl.col("b")).cast(pl.Float64).alias("d")
        )
    left = _steps(ctx).with_columns(pl.lit(max(growth or 0.0, 0.0)).alias("left"))
    explained: dict[str, pl.DataFrame] = {}
    for w in WAIT_ORDER:
        j = left.join(per[w], on=["rank", "idx"], how="left").with_columns(
            pl.col("d").fill_null(0.0)
        )
        take = pl.min_horizontal(pl.col("left"), pl.col("d").clip(lower_bound=0))
        j = j.with_columns(take.alias("ns"))
        explained[w] = j.select("rank", "idx", "ns")
        left = j.select("rank", "idx", (pl.col("left") - pl.col("ns")).alias("left"))
    return {
        "kernel_ns": {"baseline": kb, "treatment": kt, "source": {"baseline": src_b,
                                                                  "treatment": src_t}},
        "kernel_growth_ns": growth,
        "waiting_growth_ns": {w: float(per[w]["d"].mean() or 0.0) for w in WAIT_ORDER},
        "explained": explained,
        "explained_ns": {w: float(explained[w]["ns"].mean() or 0.0) for w in WAIT_ORDER},
        "managed": managed_memory(ctx),
        "category": dict(_CATEGORY),
    }  # fmt: skip
