"""Helpers of the copy rules (CP01 serialized-copies, CP02 blocked-non-blocking-copy)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ccdiag.ledger import stats
from ccdiag.ledger.context import PairContext
from ccdiag.ledger.critical import critical_windows, exposure, window_classes
from ccdiag.ledger.gpu import union_ns
from ccdiag.ledger.removal import REMOVAL_CALLS, REMOVAL_GPU, Removal, call_rows
from ccdiag.ledger.vocab import GPU_CATEGORIES, base_name, is_host_copy, num
from ccdiag.units import duration


def is_async_host_copy() -> pl.Expr:
    """A main-thread ``*Async`` copy call whose GPU copy crosses the host boundary."""
    return (
        (pl.col("cls") == "copy")
        & base_name().str.ends_with("Async")
        & pl.col("gpu_start").is_not_null()
        & is_host_copy().fill_null(False)
    )


def copy_windows(
    calls: pl.DataFrame, gpu: pl.DataFrame, runs: dict[tuple[str, ...], pl.DataFrame] | None = None
) -> pl.DataFrame:
    """GPU-critical windows ended by blocked async host copies alone (rank, step, ws, we): the
    waits that a ``non_blocking`` copy call made by blocking (:func:`critical_windows` on those
    calls only; ``runs``, its cache of ``gpu``'s busy runs)."""
    blocked = calls.filter(is_async_host_copy() & pl.col("blocking"))
    return critical_windows(blocked, gpu, runs)


def _with_next_wait(calls: pl.DataFrame, rows: pl.Expr, at: str) -> pl.DataFrame:
    """The calls ``rows`` selects, in step order, with ``_next``: column ``at`` (``start_ns`` or
    ``end_ns``) of the host's next wait after each (a sync or a blocking copy; the step's end
    when none). Only the waits and those rows are kept to look it up: a step's few calls, not
    its every launch."""
    is_wait = (pl.col("cls") == "sync") | ((pl.col("cls") == "copy") & pl.col("blocking"))
    c = calls.filter(is_wait | rows.fill_null(False)).sort("rank", "step", "start_ns")
    nxt = (
        pl.when(is_wait)
        .then(pl.col(at))
        .otherwise(None)
        .shift(-1)
        .backward_fill()
        .over("rank", "step")
    )
    return c.with_columns(nxt.fill_null(pl.col("w_end")).alias("_next")).filter(rows)


def _async_copies_with_next_wait(calls: pl.DataFrame) -> pl.DataFrame:
    """Async host copy calls with their ordinal ``k`` in the step and ``_next`` (the end of the
    host's next wait: a sync or a blocking copy; the step's end when none)."""
    c = _with_next_wait(calls, is_async_host_copy(), "end_ns")
    return c.with_columns(pl.int_range(pl.len()).over("rank", "step").alias("k"))


def overlap_lengths(calls: pl.DataFrame) -> pl.DataFrame:
    """Per async host copy call (rank, step, k): ``L``, how long the host went on after the call
    returned while its copy (and the work queued before it) was still in flight, at most until
    its next wait returned. Had the call blocked until its copy ended, that host work (and the
    next wait's own call overhead) would have run after the copy instead: the baseline's
    overlap a blocking copy takes away."""
    c = _async_copies_with_next_wait(calls)
    until = pl.min_horizontal("_next", pl.col("gpu_start") + pl.col("gpu_dur"), "w_end")
    return c.select("rank", "step", "k", (until - pl.col("end_ns")).clip(lower_bound=0).alias("L"))


def post_copy_segments(calls: pl.DataFrame, lengths: pl.DataFrame) -> pl.DataFrame:
    """Host time right after each async host copy call, ``L`` long (``lengths``: rank, step, k,
    L, from :func:`overlap_lengths` of the baseline, on this run's steps) and at most until the
    host's next wait returned: where the host work a blocking copy displaces runs. Merged per
    step; columns rank, step, a, b."""
    c = _async_copies_with_next_wait(calls).join(lengths, on=["rank", "step", "k"], how="inner")
    b = pl.min_horizontal("_next", pl.col("end_ns") + pl.col("L"), "w_end")
    seg = c.select("rank", "step", pl.col("end_ns").alias("a"), b.alias("b"))
    seg = seg.filter(pl.col("b") > pl.col("a")).sort("rank", "step", "a")
    prev = pl.col("b").cum_max().shift(1).over("rank", "step")
    seg = seg.with_columns(pl.max_horizontal("a", prev.fill_null(pl.col("a"))).alias("a"))
    return seg.filter(pl.col("b") > pl.col("a"))


def clip_to_segments(iv: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """The parts of labelled host intervals (rank, step, cat, a, b) inside disjoint segments."""
    if seg.height == 0 or iv.height == 0:
        return iv.clear()
    s = seg.select("rank", "step", pl.col("a").alias("s0"), pl.col("b").alias("s1"))
    # first the intervals that reach into their step's span of segments (a step has a few
    # segments and thousands of intervals): the join then pairs only those
    span = s.group_by("rank", "step").agg(
        pl.col("s0").min().alias("_lo"), pl.col("s1").max().alias("_hi")
    )
    iv = iv.join(span, on=["rank", "step"], how="inner")
    iv = iv.filter((pl.col("b") > pl.col("_lo")) & (pl.col("a") < pl.col("_hi"))).drop("_lo", "_hi")
    j = iv.join(s, on=["rank", "step"])
    j = j.with_columns(
        pl.max_horizontal("a", "s0").alias("a"), pl.min_horizontal("b", "s1").alias("b")
    )
    return j.filter(pl.col("b") > pl.col("a")).select(iv.columns)


def fit_toll_bandwidth(df: pl.DataFrame, y: str = "latency_ns") -> dict[str, Any]:
    """Least squares ``y = toll + bytes / bandwidth``; toll in ns, bandwidth in GB/s, R²."""
    d = df.filter(pl.col("bytes").is_not_null()).select(
        pl.col("bytes").cast(pl.Float64).alias("x"), pl.col(y).cast(pl.Float64).alias("y")
    )
    if d.height < 2 or d["x"].n_unique() < 2:
        med = num(d["y"].median())
        return {"toll_ns": int(med), "gbps": None, "r2": None, "n": d.height}
    s = d.select(
        pl.cov("x", "y").alias("cxy"),
        pl.col("x").var().alias("vx"),
        pl.col("x").mean().alias("mx"),
        pl.col("y").mean().alias("my"),
        pl.corr("x", "y").alias("r"),
    ).row(0, named=True)
    slope = s["cxy"] / s["vx"] if s["vx"] else 0.0
    toll = s["my"] - slope * s["mx"]
    gbps = (1.0 / slope) if slope > 0 else None  # bytes per ns == GB/s
    r2 = None if s["r"] is None or np.isnan(s["r"]) else round(float(s["r"]) ** 2, 4)
    return {
        "toll_ns": int(toll),
        "gbps": None if gbps is None else round(gbps, 3),
        "r2": r2,
        "n": d.height,
    }


def copy_overlap(copies: pl.DataFrame) -> dict[str, Any]:
    """How much host-crossing copies overlap across streams (per step, pooled).

    ``concurrency`` = Σ copy durations / their union (1.0 = fully serialized).
    """
    if copies.height == 0:
        return {"streams": 0, "concurrency": None, "overlap_share": None}
    g = copies.select(
        "rank", "step", pl.col("gpu_start").alias("start_ns"), pl.col("gpu_dur").alias("dur_ns")
    )
    u = union_ns(g, ["rank", "step"]).select(pl.col("busy_ns").sum(), pl.col("sum_ns").sum()).row(0)
    busy, total = u
    conc = total / busy if busy else None
    return {
        "streams": copies["stream"].n_unique(),
        "concurrency": None if conc is None else round(conc, 3),
        "overlap_share": None if conc is None else round(1 - busy / total, 3),
    }


#: The per-step columns of :func:`copy_steps` that rules compare between runs.
COPY_STEP_COLS = [
    "blocked_async_ns", "n", "n_blocked", "blocked_self_ns", "async_api_ns", "n_async",
    "blocked_gpu_ns", "async_gpu_ns",
]  # fmt: skip


def copy_steps(copies: pl.DataFrame) -> pl.DataFrame:
    """Per step facts of host-crossing copies (rank, step, ...).

    - ``n``: copies; ``bytes``: bytes moved.
    - ``blocked_async_ns``: host time inside ``*Async`` copy calls that covered their GPU copy
      (waiting for queued work + the copy itself): the host blocked in an async call.
    - ``hidden_gpu_ns``: GPU time of copies whose call returned before the copy finished (the
      transfer ran behind the host's back).
    - ``async_busy_ns``: union of the GPU time of those non-covered copies.
    - ``blocked_self_ns``: host time inside blocked ``*Async`` calls after the queue drained (the
      copy itself and any host-side padding); ``async_api_ns``: host time inside ``*Async`` calls
      beyond any queue wait; ``n_async``: ``*Async`` copies; ``blocked_gpu_ns`` and
      ``async_gpu_ns``: GPU time of the blocked ``*Async`` copies and of all of them.
    """
    if copies.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int32})
    is_async = base_name().str.ends_with("Async")
    hidden = copies.filter(~pl.col("blocking")).select(
        "rank", "step", pl.col("gpu_start").alias("start_ns"), pl.col("gpu_dur").alias("dur_ns")
    )
    per = copies.group_by("rank", "step").agg(
        pl.len().alias("n"),
        pl.col("bytes").sum().alias("bytes"),
        pl.when(is_async & pl.col("blocking"))
        .then(pl.col("c_copy_wait") + pl.col("c_copy_self"))
        .otherwise(0)
        .sum()
        .alias("blocked_async_ns"),
        pl.when(~pl.col("blocking"))
        .then(pl.col("gpu_dur"))
        .otherwise(0)
        .sum()
        .alias("hidden_gpu_ns"),
        (is_async & pl.col("blocking")).sum().alias("n_blocked"),
        pl.when(is_async & pl.col("blocking"))
        .then(pl.col("c_copy_self"))
        .otherwise(0)
        .sum()
        .alias("blocked_self_ns"),
        pl.when(is_async).then(pl.col("c_copy_api")).otherwise(0).sum().alias("async_api_ns"),
        is_async.sum().alias("n_async"),
        pl.when(is_async & pl.col("blocking"))
        .then(pl.col("gpu_dur"))
        .otherwise(0)
        .sum()
        .alias("blocked_gpu_ns"),
        pl.when(is_async).then(pl.col("gpu_dur")).otherwise(0).sum().alias("async_gpu_ns"),
    )
    if hidden.height:
        u = union_ns(hidden, ["rank", "step"]).select(
            "rank", "step", pl.col("busy_ns").alias("async_busy_ns")
        )
        per = per.join(u, on=["rank", "step"], how="left")
    else:
        per = per.with_columns(pl.lit(0, dtype=pl.Int64).alias("async_busy_ns"))
    return per.with_columns(pl.col("async_busy_ns").fill_null(0))


def bucket_table(cb: pl.DataFrame, ct: pl.DataFrame) -> list[dict[str, Any]]:
    """Per size bucket and run: count, median bytes, latency and GPU duration percentiles."""
    rows = []
    for side, df in (("baseline", cb), ("treatment", ct)):
        if df.height == 0:
            continue
        g = df.group_by("bucket").agg(
            pl.len().alias("n"),
            pl.col("bytes").median().alias("bytes"),
            pl.col("latency_ns").median().alias("latency_p50"),
            pl.col("latency_ns").quantile(0.9).alias("latency_p90"),
            pl.col("gpu_dur").median().alias("gpu_p50"),
        )
        for r in g.sort("bytes").iter_rows(named=True):
            rows.append(
                {
                    "run": side,
                    "bucket": r["bucket"],
                    "n": r["n"],
                    "bytes": int(r["bytes"] or 0),
                    "latency_p50_ns": int(r["latency_p50"]),
                    "latency_p90_ns": int(r["latency_p90"]),
                    "gpu_p50_ns": int(r["gpu_p50"]),
                }
            )
    return rows


def lost_overlap(calls: pl.DataFrame) -> pl.DataFrame:
    """Per step: host work that overlapped async host copies and would wait if they blocked.

    For each async (non-covering) host-crossing copy call: the host time from the call's end to
    the earlier of (the host's next wait: sync or blocking copy) and (the copy's GPU end). Had the
    call blocked until its copy ended, that host work would have run after the GPU instead of
    under it. Columns rank, step, overlap_ns, n_async.
    """
    a = _with_next_wait(
        calls,
        (pl.col("cls") == "copy")
        & ~pl.col("blocking")
        & pl.col("gpu_start").is_not_null()
        & is_host_copy(),
        "start_ns",
    )
    until = pl.min_horizontal("_next", pl.col("gpu_start") + pl.col("gpu_dur"), "w_end")
    a = a.with_columns((until - pl.col("end_ns")).clip(lower_bound=0).alias("_ov"))
    return a.group_by("rank", "step").agg(
        pl.col("_ov").sum().alias("overlap_ns"), pl.len().alias("n_async")
    )


#: GPU-critical ledger category -> GPU busy class whose own growth explains it.
GPU_BUSY: dict[str, str | None] = {
    "gpu_kernel": "kernel",
    "gpu_collective": "collective",
    "gpu_copy": "copy",
    "gpu_uvm": "uvm",
    "gpu_idle": None,
}


def exposure_growth(ledger: pl.DataFrame, seg: pl.DataFrame, c: str) -> pl.DataFrame:
    """Per aligned step (rank, idx, x): exposed growth of host category ``c`` beyond its own
    growth (work that ran under the GPU before), at most its exposure growth in ``seg``
    (``d_<c>``: the host time after async copies, where a blocking copy pushes host work)."""
    j = ledger.join(seg, on=["rank", "idx"], how="left", suffix="_seg")
    x = pl.col(f"d_{c}") - pl.col(f"d_{c}_total").clip(lower_bound=0)
    x = pl.min_horizontal(x, pl.col(f"d_{c}_seg").fill_null(0))
    return j.select("rank", "idx", x.clip(lower_bound=0).alias("x"))


def gpu_exposure_growth(
    ledger: pl.DataFrame, busy: pl.DataFrame, win: pl.DataFrame, c: str
) -> pl.DataFrame:
    """Per aligned step (rank, idx, x): growth of GPU-critical category ``c`` beyond its GPU
    work's own growth (GPU time the host now waits for), at most its growth in ``win``
    (``d_<c>``: waits ended by blocked async copies; a GPU slowdown that exposes formerly hidden
    GPU time elsewhere is not the copy's doing)."""
    j = ledger.join(busy, on=["rank", "idx"], how="left")
    j = j.join(win, on=["rank", "idx"], how="left", suffix="_win")
    cls = GPU_BUSY[c]
    own = pl.col(f"d_{cls}").fill_null(0).clip(lower_bound=0) if cls else pl.lit(0)
    x = pl.min_horizontal(pl.col(f"d_{c}") - own, pl.col(f"d_{c}_win").fill_null(0))
    return j.select("rank", "idx", x.clip(lower_bound=0).alias("x"))


def padding_interaction(st: pl.DataFrame, led: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    """Per step: copy cost that is exposed only because the copy call blocked first.

    Under CC a copy costs more of its own (``serialized_copies``): host time (staging,
    encryption) and a longer transfer. While an async copy returns at once, its own extra host
    time runs while the GPU still works through its queue, hidden up to the host's slack (the
    time the baseline's host waited for the GPU in the step: its GPU-critical time), and its
    longer transfer runs while the host keeps going, hidden up to the GPU's slack (the baseline
    step minus its GPU busy time). A blocked call waits for the queue first, so both run with
    the other side idle. The part that would have been hidden, per side min(growth, slack), is
    an interaction of the two mechanisms (CP02 declares it; the engine halves it).

    ``st``: :func:`aligned_delta` of :func:`copy_steps` (``n_blocked``, ``blocked_self_ns``,
    ``async_api_ns``, ``n_async``, ``blocked_gpu_ns``, ``async_gpu_ns``); ``led``: the ledger;
    ``busy``: GPU busy per step. Returns rank, idx, ns.
    """

    def per_copy(col: str) -> pl.Expr:
        return pl.col(f"b_{col}") / pl.max_horizontal(pl.col("b_n_async"), pl.lit(1))

    own = (pl.col("t_blocked_self_ns") - per_copy("async_api_ns") * pl.col("t_n_blocked")).clip(
        lower_bound=0
    )
    gpu_grow = pl.col("t_blocked_gpu_ns") - per_copy("async_gpu_ns") * pl.col("t_n_blocked")
    gpu_part = pl.min_horizontal(gpu_grow.clip(lower_bound=0), own)
    host_slack = pl.sum_horizontal(
        [pl.col(f"b_{c}") for c in GPU_CATEGORIES if f"b_{c}" in led.columns]
    )
    gpu_slack = (pl.col("b_step_ns") - pl.col("b_all")).clip(lower_bound=0)
    j = (
        st.select("rank", "idx", own.alias("own"), gpu_part.alias("gpu_part"))
        .join(
            led.select("rank", "idx", "b_step_ns", host_slack.alias("host_slack")),
            on=["rank", "idx"],
            how="inner",
        )
        .join(busy.select("rank", "idx", "b_all"), on=["rank", "idx"], how="left")
        .with_columns(pl.col("b_all").fill_null(0))
    )
    ns = pl.min_horizontal(pl.col("own") - pl.col("gpu_part"), "host_slack") + pl.min_horizontal(
        "gpu_part", gpu_slack
    )
    # only copies that CC made block: those that blocked in the baseline too owe nothing to it
    newly = (
        (pl.col("t_n_blocked") - pl.col("b_n_blocked"))
        / pl.max_horizontal(pl.col("t_n_blocked"), pl.lit(1))
    ).clip(0, 1)
    j = j.join(st.select("rank", "idx", newly.alias("newly")), on=["rank", "idx"], how="left")
    ns = ns * pl.col("newly").fill_null(0)
    return j.select("rank", "idx", ns.clip(lower_bound=0).cast(pl.Float64).alias("ns"))


def post_copy_exposure(ctx: PairContext, side: str) -> pl.DataFrame:
    """Exposed host ns per step and category in the host time that follows async host copies
    for as long as the baseline's host work overlapped them (``post_copy_segments``):
    rank, step, cat, ns."""
    calls = ctx.calls_b if side == "b" else ctx.calls_t
    lengths = overlap_lengths(ctx.calls_b)
    if side == "t":
        a = ctx.pair.aligned.select("rank", pl.col("b_step").alias("step"), "t_step")
        lengths = lengths.join(a, on=["rank", "step"]).drop("step").rename({"t_step": "step"})
    seg = post_copy_segments(calls, lengths)
    iv = clip_to_segments(ctx.intervals_b if side == "b" else ctx.intervals_t, seg)
    iv = exposure(iv, ctx.crit_b if side == "b" else ctx.crit_t)
    return iv.group_by("rank", "step", "cat").agg(pl.col("exposed_ns").sum().alias("ns"))


def copy_window_classes(ctx: PairContext, side: str) -> pl.DataFrame:
    """GPU-critical ns per step and GPU category in windows ended by blocked async host
    copies (``copy_windows``): rank, step, cat, ns."""
    calls = ctx.calls_b if side == "b" else ctx.calls_t
    gpu = (ctx.pair.baseline if side == "b" else ctx.pair.treatment).gpu
    if ctx.host_only or gpu.height == 0:
        return pl.DataFrame(
            schema={"rank": pl.Int32, "step": pl.Int32, "cat": pl.String, "ns": pl.Float64}
        )
    return window_classes(copy_windows(calls, gpu, ctx.gpu_runs[side]), gpu)


def _removal(rows: pl.DataFrame, host: pl.Expr, eps: pl.Expr, unblock: pl.Expr) -> pl.DataFrame:
    """Removal rows for copy calls: ``host`` ns out of the call, the part beyond the traced call
    (an interposer that waits or pads around the runtime call: ``ccdiag.ledger.host`` extends
    the call to the op's end) out of the gap before the next call; ``eps`` out of a blocking
    call's time after its copy."""
    x = rows.with_columns(host.clip(lower_bound=0).fill_null(0).alias("_x"))
    inside = pl.min_horizontal("_x", "t_raw_dur")
    own = call_rows(
        x, "t_ev_row", dur=inside.round(0).cast(pl.Int64),
        eps=eps.clip(lower_bound=0).fill_null(0).round(0).cast(pl.Int64), unblock=unblock,
    )  # fmt: skip
    beyond = x.filter(pl.col("t_next_ev_row").is_not_null())
    beyond = call_rows(beyond, "t_next_ev_row", gap=(pl.col("_x") - inside).round(0).cast(pl.Int64))
    out = pl.concat([own, beyond])
    out = out.filter((pl.col("dur_ns") > 0) | (pl.col("gap_ns") > 0) | (pl.col("eps_ns") > 0))
    return Removal().plus(Removal(calls=out)).calls


def newly_blocked() -> pl.Expr:
    """Matched async host copies that block in the treatment and did not in the baseline."""
    is_async = pl.col("bname").str.ends_with("Async")
    return pl.col("t_hcopy") & is_async & pl.col("t_blocking") & ~pl.col("b_blocking")


def _pad() -> pl.Expr:
    """A blocking copy call's growth after its copy ended (padding, staging: CP01's)."""
    both = pl.col("t_blocking") & pl.col("b_blocking")
    base = pl.when(both).then(pl.col("b_tail")).otherwise(0)
    return (
        pl.when(pl.col("t_blocking")).then(pl.col("t_tail") - base).otherwise(0).clip(lower_bound=0)
    )


def _pre_growth() -> pl.Expr:
    """A blocking copy call's growth before its copy started, when it blocked in both runs and
    covered its copy: real CC stages (encrypts) the data in a bounce buffer before the DMA, so a
    synchronous cudaMemcpy is slower before its copy, not during it (ISPASS BN, 13,503 copies:
    3.9 -> 13.3 µs median from call to copy, 171 of the calls' 235 ms of growth). The replay
    takes it out of the call and of its copy's start (:func:`ccdiag.replay._apply_removal`)."""
    pre = lambda s: pl.col(f"{s}_raw_dur") - pl.col(f"{s}_gpu_dur") - pl.col(f"{s}_tail")  # noqa: E731
    both = pl.col("t_blocking") & pl.col("b_blocking") & pl.col("b_gpu_dur").is_not_null()
    return pl.when(both).then((pre("t") - pre("b")).clip(lower_bound=0)).otherwise(0).fill_null(0)


def blocking_removal(matched: pl.DataFrame) -> Removal:
    """CP02's counterfactual: each newly blocked async copy call made asynchronous again: its
    growth beyond its padding (the wait for the queue and for the copy) leaves the call."""
    rows = matched.filter(newly_blocked())
    return Removal(
        calls=_removal(rows, pl.col("t_dur") - pl.col("b_dur") - _pad(), pl.lit(0), pl.lit(True))
    )


def _beside(matched: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Removal rows for what an interposer adds *beside* a copy call no op issued (Nsight
    Systems: no ``aten::copy_`` to extend the call to, :func:`ccdiag.ledger.host._extend_copies`):
    the growth of the host gap after the call beyond the typical growth of the gaps before the
    same next call (a launch's toll paid before it is the launch's), the median of that excess
    over the copies of one name and size, out of the gap before the next call. Real CC keeps the
    cost inside the call, where this gap grows like any other before the same call; an LD_PRELOAD
    emulator pads after the runtime call returns (HELD-OUT-43: MobileNetV3-Small's 1.74 ms pad a
    step lay in the gap after ``cudaMemcpyAsync`` + ``cuStreamSynchronize``, CP01 paid 0.10 ms)."""
    x = rows.filter(pl.col("t_bare") & pl.col("t_next_ev_row").is_not_null())
    if x.height == 0:
        return call_rows(x, "t_next_ev_row")
    typical = matched.group_by("key").agg(pl.col("d_gap").median().alias("_typ"))
    nxt = matched.select(
        pl.col("t_ev_row").alias("t_next_ev_row"), pl.col("key").alias("_nkey"),
        pl.col("d_gap").alias("_ngap"),
    ).join(typical.rename({"key": "_nkey"}), on="_nkey", how="left")  # fmt: skip
    x = x.select("bname", "t_bytes", "t_next_ev_row").join(nxt, on="t_next_ev_row")
    x = x.with_columns((pl.col("_ngap") - pl.col("_typ").fill_null(0)).alias("_ex"))
    x = x.with_columns(pl.col("_ex").median().over("bname", "t_bytes").alias("_k"))
    grown = pl.min_horizontal("_k", "_ngap").clip(lower_bound=0).fill_null(0).round(0)
    return call_rows(x, "t_next_ev_row", gap=grown.cast(pl.Int64)).filter(pl.col("gap_ns") > 0)


def memory_kinds(copies: pl.DataFrame) -> list[dict[str, Any]]:
    """CP01's evidence: the copies' memory kinds (``src->dst``), most frequent first."""
    kinds = copies.with_columns(pl.format("{}->{}", "src_mem", "dst_mem").alias("kinds"))
    return stats.top_list(kinds, "kinds", copies=pl.len())


def beside(matched: pl.DataFrame) -> tuple[pl.DataFrame, float]:
    """The pads an interposer placed beside the host copy calls (:func:`_beside`): their removal
    rows, for :func:`serialization_removal`, and their sum per matched copy call (ns), the part of
    a copy's exposed latency in the gap after the call, for CP01's test of whether copies got
    slower (HELD-OUT-44: RegNetX-400MF's calls grew 1.16x, the 1.75 ms pad a step beside them;
    the rule did not fire and paid none of it). Worked out once, for both."""
    rows = matched.filter(pl.col("t_hcopy"))
    side = _beside(matched, rows)
    return side, float(side["gap_ns"].sum()) / max(rows.height, 1)


def serialization_removal(matched: pl.DataFrame, side: pl.DataFrame) -> Removal:
    """CP01's counterfactual on matched host copies: the GPU copy back at its baseline duration;
    a blocking call's padding after its copy ended out (in the call when the call covered its
    copy, else beside it); a non-blocking call's own growth (host staging) out; the pads beside
    calls no op issued (``side``: :func:`beside`) out of the gaps they lie in."""
    rows = matched.filter(pl.col("t_hcopy"))
    own = pl.when(~pl.col("t_blocking")).then(pl.col("t_dur") - pl.col("b_dur")).otherwise(0)
    covered = pl.col("t_raw_dur") >= pl.col("t_dur")  # the traced call itself blocked
    host = own + pl.when(covered).then(_pre_growth()).otherwise(_pad())
    eps = pl.when(covered).then(_pad()).otherwise(0)
    calls = pl.concat([_removal(rows, host, eps, pl.lit(False)), side])
    gpu = rows.filter(pl.col("t_gpu_row").is_not_null()).select(
        pl.col("t_gpu_row").alias("ev_row"),
        (pl.col("t_gpu_dur") - pl.col("b_gpu_dur"))
        .clip(lower_bound=0)
        .fill_null(0)
        .alias("dur_ns"),
    )
    return Removal(calls, gpu.filter(pl.col("dur_ns") > 0).cast(REMOVAL_GPU))


def _padding_launches(ctx: PairContext) -> pl.DataFrame:
    """The treatment's calls sorted per step with ``_pad`` (the call launched a padding kernel,
    ``Pair.copy_padding``) and ``_to`` (the next call in its step that launched none; null at
    the step's end)."""
    rows = ctx.pair.copy_padding.get_column("ev_row")
    c = ctx.calls_t.select("rank", "step", "start_ns", "ev_row", "gpu_row", "raw_dur_ns")
    c = c.sort("rank", "step", "start_ns").with_columns(
        pl.col("gpu_row").is_in(rows.implode()).fill_null(False).alias("_pad")
    )
    nxt = pl.when(~pl.col("_pad")).then(pl.col("ev_row")).shift(-1).backward_fill()
    return c.with_columns(nxt.over("rank", "step").alias("_to"))


def _gaps_past_padding(removal: Removal, c: pl.DataFrame) -> tuple[Removal, pl.DataFrame]:
    """``removal`` with the parts it put on the gap before a padding launch moved to the gap
    before the next call that launched none (``c``: :func:`_padding_launches`), and the moved
    rows. An interposer that pads a copy on the GPU launches its kernel right after the copy
    call and waits after that launch: the host gap that holds the wait (for the queue, the
    copy, its padding) lies before the program's next call, not before the padding launch."""
    launches = c.filter(pl.col("_pad")).select("ev_row", "_to")
    rc = removal.calls.join(launches, on="ev_row", how="left")
    at_pad = pl.col("_to").is_not_null()
    moved = call_rows(rc.filter(at_pad & (pl.col("gap_ns") > 0)), "_to", gap=pl.col("gap_ns"))
    kept = rc.with_columns(pl.when(at_pad).then(0).otherwise(pl.col("gap_ns")).alias("gap_ns"))
    out = Removal(kept.drop("_to").cast(REMOVAL_CALLS), removal.gpu, removal.twice_ns)
    return out.plus(Removal(moved)), moved


def past_padding(removal: Removal, ctx: PairContext) -> Removal:
    """A removal's host-gap parts moved past the copy padding an interposer launched on the GPU
    (:func:`_gaps_past_padding`); unchanged without such padding. CP02's wait for the queue
    lies in the same gap as CP01's wait for the padding: without the move it came off the few
    µs before the padding launch and the replay kept the wait (tv_train_gpu: 6.9 ms/step of
    blocked time measured, 52 µs/step saved by removing it)."""
    if ctx.pair.copy_padding.height == 0:
        return removal
    return _gaps_past_padding(removal, _padding_launches(ctx))[0]


def with_gpu_padding(removal: Removal, ctx: PairContext) -> Removal:
    """CP01's ``removal`` with the copy costs an interposer placed on the GPU
    (``Pair.copy_padding``: a padding kernel right after a copy on its stream, which real CC puts
    in the copy itself) out too: each such row's whole duration and the call that launched it.
    Such an interposer launches its kernel inside the copy call and waits for it after the call:
    the part of ``removal`` put on the gap before a padding launch moves to the next call that
    is none (:func:`_gaps_past_padding`). The wait and the kernel are the same time: counted
    once in what it paid (``twice_ns``)."""
    pad = ctx.pair.copy_padding
    if pad.height == 0:
        return removal
    rows = pad.get_column("ev_row")
    gpu = ctx.pair.treatment.gpu.filter(pl.col("ev_row").is_in(rows.implode()))
    gpu = gpu.select("ev_row", pl.col("dur_ns").clip(lower_bound=0))
    c = _padding_launches(ctx)
    out, moved = _gaps_past_padding(removal, c)
    own = call_rows(c.filter(pl.col("_pad")), dur=pl.col("raw_dur_ns").clip(lower_bound=0))
    # the host's wait for the kernels: the gaps moved, and each padded copy's call time after its
    # copy (eps: the wait for its padding), at most the kernels' own time
    padded = c.filter(pl.col("gpu_row").is_in(pad.get_column("copy_row").implode()))
    eps = removal.calls.join(padded.select("ev_row"), on="ev_row", how="semi")["eps_ns"]
    waits = float(moved["gap_ns"].sum() or 0) + float(eps.sum() or 0)
    twice = min(waits, float(gpu["dur_ns"].sum() or 0))
    return out.plus(Removal(own)).plus(Removal(gpu=gpu.cast(REMOVAL_GPU), twice_ns=twice))


def _share_blocking(c: pl.DataFrame) -> float:
    a = c.filter(base_name().str.ends_with("Async"))
    return round(num(a["blocking"].mean()), 3) if a.height else 0.0


def blocked_evidence(
    st: pl.DataFrame, cb: pl.DataFrame, ct: pl.DataFrame, busy: pl.DataFrame, led: pl.DataFrame
) -> dict[str, Any]:
    """CP02's evidence: async copies per step, time blocked in them, waits, GPU utilization."""
    util = busy.join(led.select("rank", "idx", "b_step_ns", "t_step_ns"), on=["rank", "idx"])
    blocked = (pl.col("c_copy_wait") + pl.col("c_copy_self")).alias("blocked")
    ev = {
        "async_copies_per_step": stats.both(lambda p: int(st[f"{p}_n"].median() or 0), "b", "t"),
        "blocked_in_async_calls_ns_per_step": stats.both(
            lambda p: int(st[f"{p}_blocked_async_ns"].median() or 0), "b", "t"),
        "copy_wait_ns": stats.both(lambda d: stats.percentiles(d["c_copy_wait"]), cb, ct),
        "share_blocking": stats.both(_share_blocking, cb, ct),
        "gpu_utilization": stats.both(
            lambda p: round(float(util[f"{p}_all"].sum() / max(util[f"{p}_step_ns"].sum(), 1)), 3),
            "b", "t"),
        "top_blocked": stats.top_list(ct.with_columns(blocked), "name",
                                   blocked_ns=pl.col("blocked").sum(), bytes=pl.col("bytes").max()),
        "published": "SGLang Qwen3-8B GPU utilization 74 -> 57 %",
    }  # fmt: skip
    return ev


def small_copy_advice(n: float, sync: float, toll: float) -> list[tuple[str, float, str, str]]:
    """CP01's advice on its small copies (``n`` a step; ``sync`` of them blocked the host in
    the baseline too; ``toll`` the fitted extra toll a copy): per fix, its id, the copies it
    saves, its text and how its recovery is predicted.

    Copies that were synchronous already (an upload of a small tensor from pageable memory, a
    read of a size or a flag: ``nonzero``, ``.item()``, ``.tolist()``) sit between kernels that
    depend on them: packing them into one transfer, the advice for copies a loop issues
    together, is not a change a user can make; the advice for them is to keep those values on
    the GPU and read back once (HELD-OUT-28's detection post-processing: all 66 small copies a
    step synchronous already). The other small copies keep the packing advice."""
    if toll <= 0:
        return []
    out = []
    how = "fitted extra toll per copy ({}) x copies saved ({:.0f} - 1)"
    if sync >= 2:
        which = f"All {n:.0f}" if sync >= n else f"{sync:.0f} of the {n:.0f}"
        text = (
            f"{which} small copies a step were synchronous already (small uploads from pageable "
            "memory, reads of sizes or flags: nonzero, .item(), .tolist()); under CC each pays "
            "the copy toll: keep such values on the GPU (constants built once on the device, "
            "shapes that need no read) and read results back once a step."
        )
        out.append(("fewer_sync_copies", sync, text, how.format(duration(toll), sync)))
    rest = n - sync if sync >= 2 else n
    if rest > 1:
        text = f"Pack the {rest:.0f} small copies per step into one transfer (one toll, not {rest:.0f})."
        out.append(("batch_small_copies", rest, text, how.format(duration(toll), rest)))
    return out
