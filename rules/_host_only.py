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
from ccdiag.rules._base import Outcome, claims

from ccdiag.ledger import control as ctl
from ccdiag.ledger import gpu as gp
from ccdiag.ledger import stats as sts
from ccdiag.ledger import vocab as vc
from ccdiag.units import duration

#: Setup-class calls that wait for the device to finish (the runtime synchronizes first).
WAITING_SETUP = r"^cu(da)?(Free$|FreeHost|FreeAsync|MemFree$|MemFreeHost|DeviceReset|CtxDestroy)"
#: Managed allocations (the program uses unified memory).
MANAGED_ALLOC = r"^cu(da)?(MallocManaged|MemAllocManaged)"
#: Device allocations that are not managed (a memset may target them).
DEVICE_ALLOC = (
    r"^cu(da)?(Malloc$|MallocAsync|MallocPitch|Malloc3D|MemAlloc$|MemAllocAsync|MemAllocPitch)"
)
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
    n = vc.base_name()
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
        return {"by_api": [], "kernel_toll_ns": 0.0, "kernel_gap_toll_ns": 0.0, "claims": empty,
                "gap_claims": empty, "excess": empty}  # fmt: skip

    def stats(d: pl.DataFrame, p: str) -> pl.DataFrame:
        return d.group_by(vc.base_name().alias("api")).agg(
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
    j = j.with_columns(
        (pl.col("growth") - pl.col("toll_ns")).clip(lower_bound=0).alias("excess_ns")
    )
    # the toll beside the call (an LD_PRELOAD emulator pays it in the gap before the launch):
    # the additive constant of the gaps' quantile fit, per API (a slope is slower host code)
    gap = {
        a: max(ctl.toll_fit(*(d.filter(vc.base_name() == a)["gap_ns"] for d in (lb, lt)))["toll_ns"], 0)
        for a in j["api"].to_list()
    }  # fmt: skip
    kgap = max((gap[a] for a in k["api"].to_list()), default=None)
    j = j.with_columns(
        pl.col("api").replace_strict(gap, return_dtype=pl.Float64).alias("gap_toll_ns")
    ).with_columns(
        pl.when(pl.col("kernel") | pl.lit(kgap is None))
        .then(pl.col("gap_toll_ns"))
        .otherwise(pl.min_horizontal("gap_toll_ns", pl.lit(float(kgap or 0))))
        .alias("gap_toll_ns")
    )
    per_api = j.select("api", "toll_ns", "excess_ns", "gap_toll_ns")
    rows = lt.with_columns(vc.base_name().alias("api")).join(per_api, on="api", how="left")
    rows = rows.with_columns(pl.col("toll_ns", "excess_ns", "gap_toll_ns").fill_null(0.0))
    return {
        "by_api": [
            {
                "api": r["api"],
                "calls": {"baseline": int(r["n_b"]), "treatment": int(r["n_t"])},
                "mean_call_ns": {"baseline": int(r["mean_b"]), "treatment": int(r["mean_t"])},
                "toll_ns": int(r["toll_ns"]),
                "gap_toll_ns": int(r["gap_toll_ns"]),
                "beyond_toll_ns": int(r["excess_ns"]),
            }
            for r in j.sort("n_t", "api", descending=[True, False]).iter_rows(named=True)
        ],
        "kernel_toll_ns": kernel_toll or 0.0,
        "kernel_gap_toll_ns": float(kgap or 0),
        "claims": _per_step(ctx, "t", rows, pl.col("toll_ns"), "ns"),
        "gap_claims": _per_step(ctx, "t", rows, pl.col("gap_toll_ns"), "ns"),
        "excess": _per_step(ctx, "t", rows.filter(~pl.col("api").is_in(k["api"].implode())),
                            pl.col("excess_ns"), "ns"),
    }  # fmt: skip


def side_gpu(side: Any) -> pl.DataFrame:
    """A run's GPU rows in its aligned steps, with ``gclass`` (a host-only pair's sides keep
    none: the baseline's GPU trace is read here, when it has one)."""
    if side.gpu.height or not side.has_gpu:
        return side.gpu  # type: ignore[no-any-return]
    return gp.gpu_rows(side.trace.events, side.windows)


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
        api = ev.filter(pl.col("kind").is_in(vc.API_KINDS))
        n = api.filter(vc.base_name().str.contains(pattern)).height
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
        "waiting_growth_ns": {w: vc.num(per[w]["d"].mean()) for w in WAIT_ORDER},
        "explained": explained,
        "explained_ns": {w: vc.num(explained[w]["ns"].mean()) for w in WAIT_ORDER},
        "managed": managed_memory(ctx),
        "category": dict(_CATEGORY),
    }  # fmt: skip


# --------------------------------------------------------------------------- the rules' branches
# Each rule's host-only branch calls one of these with itself (options, ``fired``).


def launch_toll_outcome(rule: Any, ctx: Any) -> Outcome:
    """LA01 with no GPU trace in the treatment: each launch API's growth per call, read off the
    API trace, inside the call and in the gap before it (``launch_tolls``); the host path is
    the critical path."""
    lt = launch_tolls(ctx)
    if not lt["by_api"]:
        return Outcome.clean("no kernel launches on the main thread")
    toll, gap_toll = lt["kernel_toll_ns"], lt["kernel_gap_toll_ns"]
    d = float(lt["claims"]["ns"].mean() or 0) + float(lt["gap_claims"]["ns"].mean() or 0)
    kl = vc.is_kernel_launch()
    lb, lt_rows = (c.filter(pl.col("cls") == "launch") for c in (ctx.calls_b, ctx.calls_t))
    n = int(sts.per_step_median(lt_rows, kl.sum()))
    if max(toll, 0) + gap_toll < rule.options.min_toll_ns:
        return Outcome.clean(
            f"kernel launch calls grew {toll:.0f} ns each, their gaps by a constant "
            f"{gap_toll:.0f} ns (host-only: from the API trace)"
        )
    graphs = int(sts.per_step_median(lt_rows, vc.is_graph_launch().sum()))
    where = [w for w, v in (("inside the launch call", toll), ("in the gap before", gap_toll))
             if v >= rule.options.min_toll_ns]  # fmt: skip
    ev = {
        "method": (
            "host-only (no GPU trace in the treatment): growth of each launch API's mean "
            "call time x its calls, plus the additive constant of the quantile fit of the gaps "
            "before it (a toll beside the call); memsets and other submissions get at most the "
            "kernel-launch toll per call (what they grew beyond it is not a launch toll)"
        ),
        "launches_per_step": sts.both(lambda x: int(sts.per_step_median(x, kl.sum())), lb,
                                     lt_rows),
        "toll_per_kernel_launch_ns": {"call": int(toll), "gap_before": int(gap_toll)},
        "per_launch_call_ns": sts.both(lambda d: sts.percentiles(d.filter(kl)["eff_ns"]), lb, lt_rows),
        "pre_launch_gap_ns": sts.both(lambda d: sts.percentiles(d.filter(kl)["gap_ns"]), lb, lt_rows),
        "by_api": lt["by_api"],
        "claimed_ns_per_step": int(d),
        "toll_location": " + ".join(where) or "-",
        "published": "B200 3.45 -> 15.7 us per launch; H100 (ISPASS) 4.9 -> 10.0 us median",
    }  # fmt: skip
    per_launch = max(toll, 0) + gap_toll
    summary = f"{n} launches/step, ~{duration(per_launch)} more per launch (API trace, host-only)"
    cl = pl.concat([claims(lt["claims"], "launch_api", "ns"),
                    claims(lt["gap_claims"], "gap_launch", "ns")])  # fmt: skip
    return rule.fired(cl, summary, ev, "low", launches=n, graphs=graphs, tolls={})


def uvm_outcome(rule: Any, ctx: Any) -> Outcome:
    """No GPU trace in the treatment: kernel-time growth (GPU trace or ``cuda_gpu_kern_sum``)
    against the growth of the calls that waited for it (``rules/_host_only.waited_split``),
    and memsets on managed memory that grew beyond the launch toll."""
    if ctx.op_mode:
        return Outcome.skipped("host-only treatment from cpu_ops: no kernel times to compare")
    sp = waited_split(ctx)
    k, m, growth = sp["kernel_ns"], sp["managed"], sp["kernel_growth_ns"]
    waiting = sp["waiting_growth_ns"]
    wait_txt = ", ".join(f"{w} {v / 1e6:+.1f} ms" for w, v in waiting.items() if v)
    if growth is None:
        return Outcome.skipped(
            f"kernel time of the treatment unknown ({k['source']['treatment']}): the growth "
            f"of the calls that wait for kernels ({wait_txt or 'none'} per step) cannot be "
            "told apart from other waits; left unattributed"
        )
    kb, kt = k["baseline"] or 0.0, k["treatment"] or 0.0
    if not any(m.values()):
        return Outcome.clean(
            f"kernel time {duration(kb)} -> {duration(kt)}/step but no managed memory "
            "(no cudaMallocManaged, no UVM rows): kernel growth is not attributed to UVM"
        )
    cl = [claims(sp["explained"][w], sp["category"][w], "ns") for w in WAIT_ORDER]
    memset_ns = 0.0
    excess = launch_tolls(ctx)["excess"]
    if m["memsets_on_managed_memory"] or m["only_managed_allocations"]:
        cl.append(claims(excess, "launch_api", "ns"))
        memset_ns = float(excess["ns"].mean() or 0)
    explained = sum(sp["explained_ns"].values())
    if explained + memset_ns < rule.options.min_growth_ns:
        return Outcome.clean(
            f"kernel time {duration(kb)} -> {duration(kt)}/step; the calls that wait for "
            f"kernels grew {duration(sum(waiting.values()))}/step"
        )
    ev = {
        "method": (
            "host-only (no GPU trace in the treatment): kernel-time growth, from "
            f"{k['source']['treatment']} against {k['source']['baseline']}, laid on the "
            "growth of the calls that waited for it (syncs, then implicitly synchronizing "
            "frees, then blocking copies); memsets on managed memory: their growth beyond "
            "the kernel-launch toll per call"
        ),
        "kernel_ns_per_step": {"baseline": int(kb), "treatment": int(kt)},
        "kernel_growth_ns_per_step": int(growth),
        "waiting_calls_growth_ns_per_step": {w: int(v) for w, v in waiting.items()},
        "explained_ns_per_step": {w: int(v) for w, v in sp["explained_ns"].items()},
        "memset_beyond_launch_toll_ns_per_step": int(float(excess["ns"].mean() or 0)),
        "memset_claimed": bool(memset_ns),
        "managed_memory": m,
        "top_kernels": _top_summary(ctx),
        "cannot_tell_apart": (
            "without a GPU trace a kernel that waits for page migrations and a kernel slowed "
            "by anything else look the same; managed memory in the program is the reason "
            "given. Kernel growth larger than the waiting calls' growth was hidden"
        ),
        "published": "H100 UVM builds: kernel time up to ~250x (3DCONV 51.7 -> 12,971 ms)",
    }
    summary = (
        f"kernels {duration(kb)} -> {duration(kt)}/step (summary tables), waited for by "
        f"the host: {duration(explained)}/step"
        + (f"; memsets on managed memory +{duration(memset_ns)}" if memset_ns else "")
    )
    return rule.fired(pl.concat(cl), summary, ev, "low", bytes=0)


def sync_stall_outcome(rule: Any, ctx: Any) -> Outcome:
    """No GPU trace in the treatment: a sync's whole duration is on the host path, so its
    growth is the wait for slower kernels plus any stall per call. The kernel-time growth
    (GPU trace or ``cuda_gpu_kern_sum``, ``rules/_host_only.waited_split``) is taken out
    first; what is left, per sync, is the stall."""
    if ctx.op_mode:
        return Outcome.skipped("host-only treatment from cpu_ops: no synchronize calls")
    sb, st = (c.filter(pl.col("cls") == "sync") for c in (ctx.calls_b, ctx.calls_t))
    if sb.height == 0 or st.height == 0:
        return Outcome.clean("no synchronize calls on the main thread")
    sp = waited_split(ctx)
    led = ctx.ledger
    d_sync = float(led["d_sync_api"].mean() or 0)
    if sp["kernel_growth_ns"] is None:
        return Outcome.skipped(
            f"synchronize calls grew {duration(d_sync)}/step, but the treatment's kernel "
            f"time is unknown ({sp['kernel_ns']['source']['treatment']}): waiting for slower "
            "kernels cannot be told apart from a slower wake-up per sync; left unattributed"
        )
    rest = led.select("rank", "idx", "d_sync_api").join(
        sp["explained"]["sync"], on=["rank", "idx"], how="left"
    )
    rest = rest.with_columns(
        (pl.col("d_sync_api") - pl.col("ns").fill_null(0)).clip(lower_bound=0).alias("c")
    )
    n = float(sts.per_step_median(st, pl.len()))
    per_call = float(rest["c"].mean() or 0) / max(n, 1.0)
    if per_call < rule.options.min_floor_ns:
        return Outcome.clean(
            f"sync growth beyond the kernel-time growth: {duration(per_call)} per call (host-only)"
        )
    ev = {
        "method": (
            "host-only (no GPU trace in the treatment): growth of synchronize calls minus "
            "the kernel-time growth they waited for (summary tables), per sync"
        ),
        "syncs_per_step": sts.both(lambda d: sts.per_step_median(d, pl.len()), sb, st),
        "sync_growth_ns_per_step": int(d_sync),
        "explained_by_kernel_growth_ns_per_step": int(sp["explained_ns"]["sync"]),
        "increase_per_call_ns": int(per_call),
        "per_call_ns": sts.both(lambda d: sts.percentiles(d["eff_ns"]), sb, st),
        "cannot_tell_apart": (
            "a stall per sync and a longer wait for kernels the summary tables do not show "
            "(copies, memsets on the GPU)"
        ),
        "published": "H100 cudaEventSynchronize 4.1 -> 15.4 us; DeviceSynchronize +13-17 us",
    }
    summary = f"{n:.0f} syncs/step, ~{duration(per_call)} more each beyond the kernel growth"
    return rule.fired(claims(rest, "sync_api", "c"), summary, ev, "low", n=n)


def copies_outcome(rule: Any, ctx: Any) -> Outcome:
    """No GPU trace in the treatment: the growth of the copy calls (API trace), less what
    blocking copies waited for slower kernels (``rules/_host_only.waited_split``)."""
    kb, kt = (c.filter(pl.col("cls") == "copy") for c in (ctx.calls_b, ctx.calls_t))
    if kb.height == 0 or kt.height == 0:
        return Outcome.clean("no copy calls on the main thread")
    sp = waited_split(ctx)
    rest = ctx.ledger.select("rank", "idx", "d_copy_api").join(
        sp["explained"]["copy_wait"], on=["rank", "idx"], how="left"
    )
    rest = rest.with_columns(
        (pl.col("d_copy_api") - pl.col("ns").fill_null(0)).clip(lower_bound=0).alias("c")
    )
    n = float(sts.per_step_median(kt, pl.len()))
    per_copy = float(rest["c"].mean() or 0) / max(n, 1.0)
    if per_copy < rule.options.min_growth_ns:
        return Outcome.clean(f"copy calls grew {duration(per_copy)} each (host-only)")
    kinds = kb.filter(pl.col("copy_kind").is_not_null())
    ev = {
        "method": (
            "host-only (no GPU trace in the treatment): growth of the copy calls' time, less "
            "the kernel-time growth blocking copies waited for (summary tables)"
        ),
        "copies_per_step": sts.both(lambda d: sts.per_step_median(d, pl.len()), kb, kt),
        "per_call_ns": sts.both(lambda d: sts.percentiles(d["eff_ns"]), kb, kt),
        "growth_per_copy_ns": int(per_copy),
        "explained_by_kernel_growth_ns_per_step": int(sp["explained_ns"]["copy_wait"]),
        "baseline_copy_kinds": sts.top_list(
            kinds.with_columns(pl.col("copy_kind").cast(pl.String)), "copy_kind", copies=pl.len()
        ),
        "by_api": sts.both(
            lambda d: sts.top_list(
                d.with_columns(vc.base_name().alias("api")), "api", calls=pl.len(),
                median_ns=pl.col("eff_ns").median(),
            ),
            kb,
            kt,
        ),
        "cannot_tell_apart": (
            "sizes and directions of the treatment's copies are unknown without its GPU "
            "trace: bounce-buffer cost, pageable staging and waits for GPU work the summary "
            "tables do not show look the same"
        ),
        "published": "H100 pinned H2D 1 MB 39.9 -> 2.63 GB/s; 64 B 2.1 -> 21.9 us (ISPASS)",
    }  # fmt: skip
    summary = f"{n:.0f} copy calls/step, ~{duration(per_copy)} longer each (API trace)"
    cl = claims(rest, "copy_api", "c")
    return rule.fired(cl, summary, ev, "low", n_small=0, toll_ns=int(per_copy), large_share=0.0)


def launch_toll_ops_outcome(rule: Any, ctx: Any) -> Outcome:
    """LA01 on a host-only treatment from cpu_ops (CC mode 'on', Kineto): the growth of the ops
    that launched kernels in the baseline, per baseline launch."""
    led, b = ctx.ledger, ctx.pair.baseline
    api = b.trace.events.filter(pl.col("kind").is_in(vc.API_KINDS) & vc.is_kernel_launch())
    per_step = api.height / max(b.windows.height, 1)
    d = float(led["d_op_launch"].median() or 0)
    per_launch = d / per_step if per_step else 0.0
    if per_launch < rule.options.min_toll_ns:
        return Outcome.clean(f"launching ops grew {per_launch:.0f} ns per baseline launch")
    ev = {
        "baseline_launches_per_step": round(per_step, 1),
        "op_launch_growth_ns_per_step": int(d),
        "toll_per_launch_ns_estimate": int(per_launch),
        "method": "growth of ops that launched kernels in the baseline / its launches per step",
    }
    summary = f"launching ops grew ~{duration(per_launch)} per baseline launch (host-only)"
    cl = claims(led, "op_launch", "d_op_launch")
    return rule.fired(cl, summary, ev, "low", launches=int(per_step), graphs=0)


def _top_summary(ctx: Any) -> list[dict]:
    """Kernels ranked by growth of total time, from GPU traces or ``cuda_gpu_kern_sum``."""

    def per(s: object) -> pl.DataFrame:
        g = side_gpu(s)
        if s.has_gpu and g.height:  # type: ignore[attr-defined]
            k = g.filter(pl.col("gclass").is_in(["kernel", "collective"]))
            return k.group_by("name").agg(pl.col("dur_ns").sum().alias("ns"))
        sm = s.trace.summaries  # type: ignore[attr-defined]
        return (
            sm.filter(pl.col("report") == "kern_sum")
            .group_by("name")
            .agg(pl.col("total_ns").sum().alias("ns"))
        )

    j = per(ctx.pair.baseline).join(per(ctx.pair.treatment), on="name", suffix="_t")
    j = j.with_columns((pl.col("ns_t") - pl.col("ns")).alias("g")).sort(
        ["g", "name"], descending=[True, False]
    )
    return [
        {"kernel": r["name"][:100], "growth_ns": int(r["g"]), "baseline_ns": int(r["ns"])}
        for r in j.head(5).iter_rows(named=True)
    ]
