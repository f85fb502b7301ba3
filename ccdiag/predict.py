"""Predict what CC will cost a workload, from one CC-off trace and a platform profile.

The CC-off trace is replayed by :mod:`ccdiag.replay` (the same model the attribution uses) with
the platform's published costs put where real CC puts them:

- ``launch_toll``: every kernel launch, per launch path (runtime ``cudaLaunchKernel``, driver /
  library ``cuLaunchKernel``, ``cudaGraphLaunch``), pays its toll inside the call;
- ``serialized_copies``: every host<->device copy takes at least ``toll + bytes / bandwidth`` on
  the GPU (the bounce buffer and the CPU's AES-GCM);
- ``blocked_non_blocking``: host-crossing ``cudaMemcpyAsync`` blocks the calling thread until
  the stream drains and the copy ends (so copies serialize on the main thread);
- ``sync_stall``: a synchronize pays the platform's sync toll;
- ``encrypted_collectives``: collective kernels run at the CC bandwidth ratio and pay an added
  latency per ring step (``2(n-1)`` for an all-reduce over ``n`` ranks);
- ``uvm_migration``: every UVM migration in the trace costs ``toll + bytes / crypto
  throughput``, inside the kernel that faulted;
- ``one_time_setup``: the context-creating call pays the platform's context-creation toll.

The predicted per-step slowdown is partitioned exactly by Shapley values over the mechanisms
that apply (the replay with every subset of them on), so an interaction (a blocking copy that
exposes a launch toll) is split, never double counted. The band replays with every constant at
the cheap end of its published range (``low``) and at the dear end (``high``). Each fix is the
full CC replay with that fix applied; fixes that are alternatives say so and are never summed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ccdiag import apis
from ccdiag.platforms import Platform, load_platform
from ccdiag.replay import (
    Injection,
    RowCosts,
    main_threads,
    model_rows,
    queue_wait_floor,
    replay,
)
from ccdiag.schema import Trace

SCHEMA_VERSION = "1.1"

#: Fixes whose effect on the CC-off run the model represents (see FixPrediction).
FIXES_WITHOUT_CC = ("cuda_graphs", "drain_thread", "fewer_sync_copies")
#: Mechanisms in the order they are reported.
MECHANISMS = (
    "launch_toll",
    "serialized_copies",
    "blocked_non_blocking",
    "sync_stall",
    "encrypted_collectives",
    "uvm_migration",
    "one_time_setup",
)
#: A call at least this long that is not a launch, copy or sync creates the context.
CONTEXT_CALL_NS = apis.CONTEXT_CALL_NS
#: Copies at least this large are "bulk" (weights, KV blocks): keeping them resident removes them.
BULK_BYTES = 1 << 20
#: Copies below this size pay mostly the per-copy toll: batching them into one per step and
#: direction saves all tolls but one (16 MiB: where B200's 7.21 -> 9.6 GB/s curve flattens).
BATCH_BYTES = 16 << 20
#: Calibration to an unprofiled step stops within this much of it (run-to-run noise of a step).
CALIBRATION_TOLERANCE = 0.03
#: A trace whose replay without any host overhead is within this much of the unprofiled step is
#: GPU-bound there: calibration then leaves its host gaps alone.
GPU_BOUND_MARGIN = 0.05
#: Most replays for the Shapley partition (2^k); above it the mechanisms are added in order.
MAX_EXACT_PLAYERS = 5


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Band(_Model):
    """A predicted time: the median prediction and the band from the constants' ranges (ns)."""

    median: int
    low: int = Field(description="every constant at the cheap end of its published range")
    high: int = Field(description="every constant at the dear end of its published range")


class MechanismCost(_Model):
    """The part of the predicted per-step slowdown one mechanism (and launch path) explains."""

    mechanism: str
    path: str | None = Field(default=None, description="launch path: runtime | library | graph")
    ns_per_step: int = Field(description="what it adds to the step time (its Shapley share)")
    paid_ns_per_step: int | None = Field(
        default=None,
        description="what it costs where it is paid (API calls, GPU rows), summed over a step "
        "before any overlap: the step grows by ns_per_step of it, the rest is hidden behind other "
        "work; null where only the replay can tell (a blocked copy's wait depends on the queue)",
    )
    count_per_step: float = Field(description="calls, copies, collectives or migrations per step")
    text: str


class FixPrediction(_Model):
    """The CC step time with one fix applied."""

    fix: str = Field(description="short id, e.g. cuda_graphs, drain_thread, batch_small_copies")
    predicted_step_ns: int = Field(description="the CC step time with this fix (median)")
    recovery_ns_per_step: int = Field(description="predicted CC step minus this")
    recovery_without_cc_ns_per_step: int | None = Field(
        default=None,
        description="what the same fix saves on the CC-off run (its replay without any CC cost): "
        "the part of recovery_ns_per_step that is not CC's. Given for the fixes whose effect "
        "without CC the model represents (cuda_graphs: the launch calls and the gaps between "
        "them; drain_thread: the main thread's waits for readbacks; fewer_sync_copies: the "
        "synchronous small copies and their waits); null for the others, which "
        "the model charges only through CC's costs",
    )
    alternative_to: list[str] = Field(
        default_factory=list, description="fixes this one replaces: pick one, never sum them"
    )
    text: str
    method: str


class Prediction(_Model):
    """``ccdiag predict --json``: the CC cost of a CC-off trace on one platform."""

    schema_version: str = SCHEMA_VERSION
    source: str = Field(description="the CC-off trace (file name)")
    format: str
    platform: str
    platform_description: str
    constants: dict[str, dict[str, Any]] = Field(
        description="every constant used: value, low, high, unit, source"
    )
    n_steps: int
    baseline_step_ns: int = Field(
        description="CC off: the median step in the trace (over the steps that did not begin "
        "behind GPU work the trace does not hold, as every median of the prediction)"
    )
    predicted_step_ns: Band = Field(description="CC on: the median step, one-time costs included")
    steady_step_ns: Band = Field(description="CC on without one-time costs (context creation)")
    one_time_ns: int = Field(description="context creation: added once, inside or before the trace")
    one_time_in_steps: bool = Field(description="the context-creating call is inside a step")
    mechanisms: list[MechanismCost]
    fixes: list[FixPrediction]
    warnings: list[str] = Field(default_factory=list)
    method: str


def prediction_schema() -> dict[str, Any]:
    """JSON Schema of ``ccdiag predict --json`` (``docs/schema/predict-v<major>.json``)."""
    schema = Prediction.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ccdiag.dev/schema/predict-v{SCHEMA_VERSION.split('.')[0]}.json"
    return schema


# --------------------------------------------------------------------------------- the context


def _num(x: object, default: float = 0.0) -> float:
    """A polars scalar (a median: a number or None) as a float."""
    return float(x) if isinstance(x, (int, float)) else default


@dataclass
class _Ctx:
    """The CC-off trace as the replay sees it, plus the per-row facts the costs need."""

    trace: Trace
    threads: pl.DataFrame
    calls: pl.DataFrame  # top-level host calls (replay order), with path / step columns
    gpu: pl.DataFrame  # GPU rows launched by them, with copy facts
    uvm: pl.DataFrame  # UVM migration rows, with the call / kernel that pays for them
    n_rows: int
    world: int
    context_row: int | None
    enqueue_ns: int
    counts: dict[str, float] = field(default_factory=dict)
    calib_u: float = 0.0  # > 0: the profiler's host overhead taken out (see calibrate)
    n_orig: int = 0  # rows of the trace itself (the model trace adds backlog rows after them)
    early_syncs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    wake_ns: int = 0  # wake-up after a blocking wait, from the trace's syncs
    async_copies: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # the step's small host copies that were synchronous already split from the others (two
    # or more a step, as CP01 splits its advice): fewer_sync_copies for them, packing the rest
    sync_split: bool = False
    # the steps whose medians a prediction takes (rank, step), None for all (:func:`_steady_steps`)
    kept_steps: pl.DataFrame | None = None

    def zeros(self) -> np.ndarray:
        return np.zeros(self.n_rows, dtype=np.int64)


#: Kernels of vendor libraries (cuBLAS, cuBLASLt, cuDNN, CUTLASS, cuFFT, NCCL): their launches
#: are made by the library (which may link the CUDA runtime statically), not by the application.
LIBRARY_KERNELS = (
    r"(?i)^(void )?(cublas|cutlass|cudnn|cufft|nccl|magma|nvjet|xmma|sm\d+_xmma|"
    r"(ampere|hopper|volta|turing)_|gemmSN|gemvN|gemvT|gemv2|gemmk|sgemm|dgemm|hgemm|"
    r"scal_kernel|dot_kernel|axpy_kernel|nrm2_kernel|asum_kernel|splitKreduce)"
)


def _launch_path(name: pl.Expr, kind: pl.Expr, lib: pl.Expr) -> pl.Expr:
    """runtime (the application's cudaLaunchKernel), library (a vendor library's kernel, or a
    driver-API launch: Triton, JIT), graph (cudaGraphLaunch)."""
    n = name.str.replace(r"_v\d+$", "")
    return (
        pl.when(n.str.contains("GraphLaunch"))
        .then(pl.lit("graph"))
        .when((kind == "driver") | lib)
        .then(pl.lit("library"))
        .otherwise(pl.lit("runtime"))
    )


def _steps_of(trace: Trace, ts: pl.Series, ranks: pl.Series) -> pl.Series:
    """Step index of each time (null outside every step window)."""
    st = trace.steps
    if st.height == 0:
        return pl.Series([None] * ts.len(), dtype=pl.Int64)
    f = pl.DataFrame({"t": ts, "rank": ranks, "_i": np.arange(ts.len())}).sort("t")
    w = st.select(
        pl.col("rank").cast(ranks.dtype), "start_ns", "end_ns", pl.col("step").cast(pl.Int64)
    ).sort("start_ns")
    j = f.join_asof(w, left_on="t", right_on="start_ns", by="rank", check_sortedness=False)
    j = j.with_columns(
        pl.when(pl.col("t") < pl.col("end_ns")).then(pl.col("step")).otherwise(None).alias("step")
    )
    return j.sort("_i")["step"]


def context_call(calls: pl.DataFrame, gpu: pl.DataFrame) -> int | None:
    """Event row of the call that creates the CUDA context, or None (created before the trace).

    The longest call of at least 50 ms that is a setup call (allocation, ``cudaFree(0)``,
    ``cudaSetDevice``...) or, before any GPU work, a synchronize (which then has nothing to wait
    for but the context).
    """
    first = gpu.group_by("rank").agg(pl.col("ci").min().alias("first_ci"))
    c = calls.join(first, on="rank", how="left").with_columns(pl.col("first_ci").fill_null(1 << 62))
    cand = c.filter(
        (pl.col("dur_ns") >= CONTEXT_CALL_NS)
        & (
            ~pl.col("cls").is_in(["launch", "copy", "sync"])
            | ((pl.col("cls") == "sync") & (pl.col("ci") < pl.col("first_ci")))
        )
    )
    return int(cand.sort("dur_ns", descending=True)["_row"][0]) if cand.height else None


#: A stream's first GPU row that started this long after its launch returned waited for work
#: queued on that stream before the trace began.
BACKLOG_NS = 50_000
#: Name of the rows that stand for the work queued before the trace (removed from every output).
BACKLOG_NAME = "ccdiag:queued_before_trace"
#: A synchronize that returned this long before earlier GPU work ended did not wait for all of it.
EARLY_SYNC_NS = 1_000


def _with_backlog(trace: Trace, threads: pl.DataFrame) -> tuple[Trace, pl.DataFrame]:
    """The trace with the GPU work queued before it, or before one of its profiling windows,
    made explicit.

    A stream's row that started long after its launch returned, where the trace shows nothing
    it waited for (the stream's first row, or a row on a device that ran nothing the trace
    holds from that launch's return to the row's start), waited for work the trace does not
    hold: work queued before the trace began (a loop that never synchronizes keeps the GPU tens
    of ms behind the host), or before one of the windows of a profiler ``schedule`` (the warmup
    step's work runs into the active window: HELD-OUT-38's ResNet-18 loop has 6 windows, each
    starting 26 ms behind its host). The replay cannot see that work, so it would take the wait
    for a launch latency and give every later queued row that latency. Stand-in rows, launched
    by empty host calls just before the row's launch (before the trace's first call for a
    stream's first row), fill the stream up to the row's start: the trace replays exactly as
    before, and a blocking call that drains the stream waits for that work once.

    While that unseen work ran on an otherwise idle device, a launch that waited for room in
    CUDA's launch queue returned when one of its rows ended: the stand-in is cut there, one row
    per such launch, so that :func:`ccdiag.replay._queue_full_waits` finds what released each
    (in that loop, 116 of the 297 launches over 200 µs, which it missed). The cut takes the
    detector's own threshold (:func:`ccdiag.replay.queue_wait_floor`), nothing fitted.

    Returns:
        the model trace, and the backlogged rows' (``rank``, ``ce``: their launch's return),
        from which :func:`_steady_steps` leaves out the steps that began behind unseen work.
    """
    calls, gpu = model_rows(trace, threads)
    none = pl.DataFrame(schema={"rank": pl.Int64, "ce": pl.Int64})
    if gpu.height == 0:
        return trace, none
    g = (
        gpu.sort("rank", "device", "start_ns")
        .with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("_end"))
        .with_columns(
            pl.col("_end").cum_max().shift(1).over(["rank", "device"]).alias("_busy_to"),
            pl.col("_end").shift(1).over(["rank", "device", "stream"]).alias("_prev_end"),
        )
    )
    quiet = pl.col("_busy_to").is_null() | (pl.col("_busy_to") <= pl.col("ce"))
    cand = g.filter(
        (pl.col("start_ns") - pl.col("ce") > BACKLOG_NS) & (pl.col("_prev_end").is_null() | quiet)
    ).with_columns(quiet.alias("_quiet"))
    if cand.height == 0:
        return trace, none
    ev = trace.events
    cs = calls.sort("rank", "start_ns").with_columns(
        (pl.col("start_ns") + pl.col("dur_ns")).alias("_cend")
    )
    lead = cs.group_by("rank", maintain_order=True).first()
    lead = lead.join(threads.group_by("rank").first(), on="rank")
    leads = {r["rank"]: r for r in lead.iter_rows(named=True)}
    cuts = _queue_cuts(cs, cand.filter(pl.col("_quiet")))
    corr = int(_num(ev["correlation"].max(), 0)) + 1
    # per rank: its calls' starts in order and the latest end of the calls up to each
    busy = {
        k[0]: (part["start_ns"].to_numpy(), np.maximum.accumulate(part["_cend"].to_numpy()))
        for k, part in cs.partition_by("rank", as_dict=True, maintain_order=True).items()
    }
    cand = cand.join(
        cs.select("rank", "ci", pl.col("start_ns").alias("_call_start")),
        on=["rank", "ci"],
        how="left",
        maintain_order="left",
    )
    plans = []  # (candidate, its rank's lead call, times of its stand-in calls, their rows' ends)
    n_first = sum(
        len(cuts.get(_key(r), [])) + 1 for r in cand.iter_rows(named=True) if r["_prev_end"] is None
    )
    j = 0
    for r in cand.iter_rows(named=True):
        l0r = leads.get(r["rank"])
        if l0r is None:
            continue
        ends = [*cuts.get(_key(r), []), int(r["start_ns"])]
        if r["_prev_end"] is None:
            anchor = min(int(l0r["start_ns"]), int(r["ce"]))
            times = [anchor - 2 * (n_first - j - k) for k in range(len(ends))]
            j += len(ends)
        else:
            own = int(r["_call_start"])
            times = [own - 2 * (len(ends) - k) for k in range(len(ends))]
            starts, reach = busy[r["rank"]]
            n = int(np.searchsorted(starts, times[0], side="left"))
            if n and reach[n - 1] >= times[0]:  # a call before them still runs: no room
                continue
        plans.append((r, l0r, times, ends))
    new_calls, new_rows = [], []
    for r, l0r, times, ends in plans:
        begin = times[0] + 1 if r["_prev_end"] is None else max(times[0] + 1, int(r["_prev_end"]))
        for t, end in zip(times, ends, strict=True):
            base = {"rank": r["rank"], "pid": l0r["pid"], "correlation": corr, "name": BACKLOG_NAME}
            corr += 1
            new_calls.append(
                {**base, "kind": "runtime", "tid": l0r["tid"], "start_ns": t, "dur_ns": 1}
            )
            start = max(begin, t + 1)
            new_rows.append(
                {
                    **base,
                    "kind": "kernel",
                    "device": r["device"],
                    "stream": r["stream"],
                    "start_ns": start,
                    "dur_ns": end - start,
                }
            )
            begin = end
    if not new_calls:
        return trace, none
    extra = pl.DataFrame(new_calls + new_rows, infer_schema_length=None).with_columns(
        [pl.col(c).cast(ev.schema[c]) for c in ("kind", "rank", "pid", "correlation", "name")]
        + [pl.col(c).cast(ev.schema[c]) for c in ("tid", "device", "stream", "start_ns", "dur_ns")]
    )
    out = pl.concat([ev, extra], how="diagonal_relaxed").select(ev.columns)
    held = pl.DataFrame(
        {"rank": [r["rank"] for r, *_ in plans], "ce": [r["ce"] for r, *_ in plans]},
        schema=none.schema,
    )
    return Trace(events=out.cast(ev.schema), meta=trace.meta, steps=trace.steps), held


def _steady_steps(trace: Trace, behind: pl.DataFrame) -> pl.DataFrame | None:
    """The steps a prediction's medians are taken over (``rank``, ``step``), or None for all.

    A step that began behind GPU work the trace does not hold (:func:`_with_backlog`: each
    window of a profiler ``schedule`` starts behind its warmup steps' work) is left out: its
    wait depends on steps the trace does not show, which the mechanisms would have changed too
    (a blocking copy keeps the host from running two steps ahead, so the backlog it drains
    under CC is not the CC-off one). The step is the first whose window ends after the
    backlogged row's launch returned. Steps are left out only where two or more of the rank's
    steps stay; the trace's own median step is taken over the same steps.
    """
    st = trace.steps
    if behind.height == 0 or st.height == 0:
        return None
    w = st.select(pl.col("rank").cast(pl.Int64), pl.col("step").cast(pl.Int64), "end_ns").sort(
        "end_ns"
    )
    hit = (
        behind.sort("ce")
        .join_asof(
            w,
            left_on="ce",
            right_on="end_ns",
            by="rank",
            strategy="forward",
            check_sortedness=False,
        )
        .drop_nulls("step")
        .select("rank", "step")
        .unique()
    )
    if hit.height == 0:
        return None
    kept = w.select("rank", "step").join(hit, on=["rank", "step"], how="anti")
    enough = kept.group_by("rank").len().filter(pl.col("len") >= 2)["rank"]
    out = pl.concat(
        [
            kept.filter(pl.col("rank").is_in(enough)),
            w.select("rank", "step").filter(~pl.col("rank").is_in(enough)),
        ]
    )
    return out.sort("rank", "step") if out.height < st.height else None


def _median_step(steps: pl.DataFrame, kept: pl.DataFrame | None) -> float:
    """Median of ``steps``' durations over the kept steps (:func:`_steady_steps`)."""
    if kept is not None:
        steps = steps.with_columns(
            pl.col("rank").cast(pl.Int64), pl.col("step").cast(pl.Int64)
        ).join(kept, on=["rank", "step"], how="semi")
    return _num(steps["dur_ns"].median()) if steps.height else 0.0


#: A launch woken by a freed slot in CUDA's launch queue returns about this long after the row
#: that freed it ended (HELD-OUT-32's ConvNeXt: a median 5.5 µs; any value under the detector's
#: ``QUEUE_WAKE_NS`` gives the same replay).
QUEUE_WOKE_NS = 1_000


def _key(r: dict) -> tuple:
    return (r["rank"], r["device"], r["stream"], r["start_ns"])


def _queue_cuts(calls: pl.DataFrame, cand: pl.DataFrame) -> dict[tuple, list[int]]:
    """Per backlogged row (:func:`_key`): when unseen rows ended within its wait, read off the
    launches that waited for room in the launch queue and returned within it (on a device that
    ran nothing the trace holds). A launch inside several rows' waits goes to the longest wait."""
    out: dict[tuple, list[int]] = {}
    launches = calls.filter(pl.col("cls") == "launch")
    for rank in cand["rank"].unique().to_list():
        lr = launches.filter(pl.col("rank") == rank)
        if lr.height == 0:
            continue
        floor = queue_wait_floor(_num(lr["dur_ns"].median(), 0))
        cr = cand.filter(pl.col("rank") == rank).with_columns(
            (pl.col("start_ns") - pl.col("ce")).alias("_wait")
        )
        for c in lr.filter(pl.col("dur_ns") > floor).iter_rows(named=True):
            e = int(c["_cend"]) - QUEUE_WOKE_NS
            inside = cr.filter((pl.col("ce") <= c["start_ns"]) & (pl.col("start_ns") > e))
            if inside.height:
                h = inside.sort("_wait", descending=True).row(0, named=True)
                out.setdefault(_key(h), []).append(e)
    return {k: sorted(set(v)) for k, v in out.items()}


def _without_backlog(replayed: Trace, n_rows: int) -> Trace:
    """A replayed model trace cut back to the trace's own rows."""
    if replayed.events.height == n_rows:
        return replayed
    return Trace(events=replayed.events[:n_rows], meta=replayed.meta, steps=replayed.steps)


def _early_syncs(calls: pl.DataFrame, gpu: pl.DataFrame) -> np.ndarray:
    """Event rows of synchronize calls that returned while GPU work launched before them was
    still running.

    The replay makes a synchronize wait for all GPU work launched before it. An event or stream
    synchronize that returned earlier waited on a part of it only (step i-1's readback event,
    say); which part, the trace does not say. Predict's replays let such a call wait for nothing
    (it keeps its traced duration): a device-wide wait would add work it provably did not wait
    for, and the CC-off replay would not reproduce the trace. What this misses: an event whose
    work CC delays past the call (the replay has no per-event dependency; see the report of #13).
    """
    syncs = calls.filter(pl.col("cls") == "sync")
    if syncs.height == 0 or gpu.height == 0:
        return np.zeros(0, dtype=np.int64)
    out = []
    for rank in syncs["rank"].unique().to_list():
        g = gpu.filter(pl.col("rank") == rank)
        ci = g["ci"].to_numpy()
        ge = (g["start_ns"] + g["dur_ns"]).to_numpy()
        order = np.argsort(ci, kind="stable")
        ci, run_max = ci[order], np.maximum.accumulate(ge[order])
        sr = syncs.filter(pl.col("rank") == rank)
        k = np.searchsorted(ci, sr["ci"].to_numpy(), side="left")  # rows launched before it
        end = (sr["start_ns"] + sr["dur_ns"]).to_numpy()
        late = np.where(k > 0, run_max[np.maximum(k - 1, 0)], np.iinfo(np.int64).min)
        out.append(sr["_row"].to_numpy()[late > end + EARLY_SYNC_NS])
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)


def _context(trace: Trace) -> _Ctx:
    n_orig = trace.events.height
    # the threads that take turns driving the GPU, without those that run beside them (a drain
    # worker): :func:`ccdiag.ledger.host.thread_roles`
    threads = main_threads(trace)
    trace, behind = _with_backlog(trace, threads)
    ev = trace.events
    calls, gpu = model_rows(trace, threads)
    kinds = ev["kind"].cast(pl.String)
    calls = calls.with_columns(
        pl.Series("kind", kinds.gather(calls["_row"].to_numpy()).to_list(), dtype=pl.String)
    )
    names = ev["name"]
    lib_ci = (
        gpu.select("rank", "ci", pl.Series("kname", names.gather(gpu["_row"].to_numpy()).to_list()))
        .filter(pl.col("kname").str.contains(LIBRARY_KERNELS))
        .select("rank", "ci")
        .unique()
        .with_columns(pl.lit(True).alias("lib"))
    )
    calls = calls.join(lib_ci, on=["rank", "ci"], how="left").with_columns(
        pl.col("lib").fill_null(False)
    )
    calls = calls.with_columns(
        _launch_path(pl.col("name"), pl.col("kind"), pl.col("lib")).alias("path"),
        pl.col("cls").shift(1).over("rank").alias("prev_cls"),
    )
    calls = calls.with_columns(_steps_of(trace, calls["start_ns"], calls["rank"]).alias("step"))
    facts = ev.select(
        pl.col("copy_kind").cast(pl.String),
        pl.col("src_mem").cast(pl.String),
        pl.col("dst_mem").cast(pl.String),
        pl.col("name").alias("gname"),
    )
    gr = gpu["_row"].to_numpy()
    gpu = pl.concat([gpu, facts[gr]], how="horizontal")
    host = ["pageable", "pinned", "managed"]
    gpu = gpu.with_columns(
        (
            (pl.col("copy_kind") == "DtoH")
            | (pl.col("dst_mem").is_in(host) & ~pl.col("src_mem").is_in(host).fill_null(False))
        )
        .fill_null(False)
        .alias("d2h"),
        (
            (pl.col("copy_kind") == "HtoD")
            | (pl.col("src_mem").is_in(host) & ~pl.col("dst_mem").is_in(host).fill_null(False))
        )
        .fill_null(False)
        .alias("h2d"),
    )
    # a host copy is a copy call's (cudaMemcpy*): a cudaMemset of managed memory is marked with a
    # host memory kind, but it is a launch on the GPU, not a transfer over the bridge (BN's UVM
    # build has 4,500 a step, which were offered a drain thread as readbacks)
    gpu = gpu.with_columns((pl.col("hcopy") & (pl.col("cls") == "copy")).alias("hcopy"))
    ci_step = calls.select("rank", "ci", "step")
    gpu = _held_copies(calls, gpu.join(ci_step, on=["rank", "ci"], how="left"))
    # UVM migrations (not launched by a call): the kernel running when the migration starts pays
    # it; a migration outside every kernel (a CPU fault) delays the next host call instead
    uv = ev.with_row_index("_row").filter(
        (pl.col("kind") == "uvm_fault")
        | ((pl.col("kind") == "memcpy") & pl.col("name").str.contains("(?i)unified"))
    )
    kern = gpu.filter(pl.col("gclass") == "kernel").select(
        "rank",
        "device",
        pl.col("start_ns").alias("k_start"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("k_end"),
        pl.col("_row").alias("k_row"),
    )
    if uv.height:
        uv = uv.select("_row", "rank", "device", "start_ns", "dur_ns", pl.col("bytes").fill_null(0))
        uv = uv.sort("start_ns").join_asof(
            kern.sort("k_start"),
            left_on="start_ns",
            right_on="k_start",
            by=["rank", "device"],
            check_sortedness=False,
        )
        uv = uv.with_columns(
            pl.when(pl.col("start_ns") < pl.col("k_end")).then(pl.col("k_row")).alias("k_row")
        )
        nxt = calls.select(
            "rank", pl.col("start_ns").alias("c_start"), pl.col("_row").alias("c_row")
        )
        uv = uv.with_columns((pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns")).sort("end_ns")
        uv = uv.join_asof(
            nxt.sort("c_start"),
            left_on="end_ns",
            right_on="c_start",
            by="rank",
            strategy="forward",
            check_sortedness=False,
        )
        uv = uv.with_columns(_steps_of(trace, uv["start_ns"], uv["rank"]).alias("step"))
    ctx_row = context_call(calls, gpu)
    launches = calls.filter(pl.col("cls") == "launch")["dur_ns"]
    enqueue = int(_num(launches.median(), 5_000)) if launches.len() else 5_000
    world = trace.meta.world_size or max(len(trace.meta.ranks), 1)
    ctx = _Ctx(trace, threads, calls, gpu, uv, ev.height, world, ctx_row, enqueue, n_orig=n_orig)
    ctx.early_syncs = _early_syncs(calls, gpu)
    ctx.kept_steps = _steady_steps(trace, behind)
    ctx.wake_ns, ctx.async_copies = _wake_up(calls, gpu)
    per_step = gpu.filter(_HELD_SMALL).group_by("rank", "step").len()["len"]
    n_steps = max(trace.steps.height, 1)
    ctx.sync_split = bool(per_step.sum() / n_steps >= 2) if per_step.len() else False
    return ctx


#: A step's small host copy that the host waited for without CC (see :func:`_held_copies`).
_HELD_SMALL = pl.col("held") & pl.col("small") & pl.col("step").is_not_null()


def _held_copies(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """Mark the host copies the host waited for without CC, and those the step then went on from.

    ``held``: the copy call returned after its copy ended, or a synchronize came right after the
    call (``.item()``, ``nonzero``, ``.tolist()``, an upload from pageable memory). ``consumed``:
    a held readback (D2H) after which the step's thread launched more work: a size, a flag or
    ``if tensor:`` read in the middle of the step (HF BERT's ``aten::is_nonzero``, generate()'s
    stopping check, detection's post-processing: 26 of its 30 readbacks a step). The step's code
    needs such a value to go on, so a drain thread cannot take it; a readback the host did not
    wait for, or one after the step's last launch (the step's result: a token, a loss), it can.
    ``small``: below :data:`BATCH_BYTES`. ``call_row`` / ``sync_row``: the rows of the copy's
    call and of the synchronize right after it (null when the next call is not one)."""
    nxt = calls.select(
        "rank",
        "ci",
        (pl.col("start_ns") + pl.col("dur_ns")).alias("_c_end"),
        pl.col("_row").alias("call_row"),
        pl.when(pl.col("cls").shift(-1).over("rank") == "sync")
        .then(pl.col("_row").shift(-1).over("rank"))
        .alias("sync_row"),
    )
    last = (
        calls.filter((pl.col("cls") == "launch") & pl.col("step").is_not_null())
        .group_by("rank", "step")
        .agg(pl.col("ci").max().alias("_last_launch"))
    )
    held = pl.col("hcopy") & (
        (pl.col("_c_end") >= pl.col("start_ns") + pl.col("dur_ns"))
        | pl.col("sync_row").is_not_null()
    )
    after = pl.col("ci") < pl.col("_last_launch").fill_null(-1)
    return (
        gpu.join(nxt, on=["rank", "ci"], how="left")
        .join(last, on=["rank", "step"], how="left")
        .with_columns(
            held.fill_null(False).alias("held"),
            (held & pl.col("d2h") & after).fill_null(False).alias("consumed"),
            (pl.col("bytes").fill_null(0) < BATCH_BYTES).alias("small"),
        )
        .drop("_c_end", "_last_launch")
    )


def _wake_up(calls: pl.DataFrame, gpu: pl.DataFrame) -> tuple[int, np.ndarray]:
    """The trace's wake-up after a blocking wait, and the copy calls that did not wait.

    A synchronize that waited for the GPU returns a few µs after the work it waited for ended
    (the median of ``end - last GPU end`` over the trace's syncs that waited; 0 when none did).
    A copy that CC makes blocking (``blocked_non_blocking``) waits the same way, so it pays that
    wake-up once more than in the trace, where it returned before its copy ended.
    """
    none = (0, np.zeros(0, dtype=np.int64))
    if gpu.height == 0:
        return none
    eps = []
    for rank in calls["rank"].unique().to_list():
        g = gpu.filter(pl.col("rank") == rank)
        ci = g["ci"].to_numpy()
        ge = (g["start_ns"] + g["dur_ns"]).to_numpy()
        order = np.argsort(ci, kind="stable")
        ci, run_max = ci[order], np.maximum.accumulate(ge[order]) if ge.size else ge
        sr = calls.filter((pl.col("rank") == rank) & (pl.col("cls") == "sync"))
        if sr.height == 0 or ci.size == 0:
            continue
        k = np.searchsorted(ci, sr["ci"].to_numpy(), side="left")
        start = sr["start_ns"].to_numpy()
        end = start + sr["dur_ns"].to_numpy()
        ready = np.where(k > 0, run_max[np.maximum(k - 1, 0)], np.iinfo(np.int64).min)
        waited = (k > 0) & (ready > start) & (ready <= end + EARLY_SYNC_NS)
        eps.append(np.clip(end - ready, 0, None)[waited])
    got = np.concatenate(eps) if eps else np.zeros(0)
    wake = int(np.median(got)) if got.size else 0
    c = _async_host_copies(calls, gpu)
    did_not_wait = c.filter(pl.col("start_ns") + pl.col("dur_ns") < pl.col("g_end"))
    return wake, did_not_wait["_row"].to_numpy().astype(np.int64)


def _async_host_copies(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """The ``cudaMemcpyAsync`` calls whose copy crosses the bridge, with their copy's end
    (``g_end``): the copies CC makes blocking. A device-to-device ``cudaMemcpyAsync`` is neither
    staged nor encrypted (TraceLens' B200 trace: 146 of its 161 async copies a step)."""
    own = gpu.filter(pl.col("hcopy") & (pl.col("cls") == "copy")).select(
        "rank", "ci", (pl.col("start_ns") + pl.col("dur_ns")).alias("g_end")
    )
    is_async = (pl.col("cls") == "copy") & pl.col("name").str.contains("Async")
    return calls.filter(is_async).join(own, on=["rank", "ci"])


# ------------------------------------------------------------------------------ the mechanisms


def _ring_steps(name: pl.Expr, n: int) -> pl.Expr:
    """Ring steps of one collective over n ranks (all-reduce 2(n-1); gather / scatter n-1)."""
    return (
        pl.when(name.str.contains("(?i)allreduce|all_reduce"))
        .then(pl.lit(2 * (n - 1)))
        .when(name.str.contains("(?i)sendrecv|send|recv"))
        .then(pl.lit(1))
        .otherwise(pl.lit(n - 1))
    )


def _sync_copies_gone(ctx: _Ctx) -> tuple[np.ndarray, np.ndarray]:
    """``fewer_sync_copies``: the values stay on the GPU. Of each step's small copies the host
    waited for, one (its last) is left; the others go (their GPU rows: the first array) with
    their calls and the synchronize right after each (the second: call rows)."""
    held = ctx.gpu.filter(_HELD_SMALL).filter(
        pl.int_range(pl.len()).over("rank", "step") < pl.len().over("rank", "step") - 1
    )
    calls = pl.concat([held["call_row"], held["sync_row"]]).drop_nulls()
    return held["_row"].to_numpy(), calls.to_numpy()


def _copy_costs(
    ctx: _Ctx,
    k: dict[str, float],
    fix: str | None,
    copy_at: str,
    call: np.ndarray,
    gpu_x: np.ndarray,
    free: np.ndarray,
) -> None:
    """``serialized_copies``: every host copy takes ``toll + bytes / bandwidth``, on the GPU (real
    CC: the bounce-buffer copy is the copy) or, for a profile with ``copy_cost_at: host`` (an
    LD_PRELOAD emulator's busy wait), inside its host call (after the wait of a blocking one).
    The fixes that change the copies (batching, resident data, a context pool) change them here."""
    c, g = ctx.calls, ctx.gpu
    # the copies of copy calls, as the replay pads them (a UVM migration is uvm_migration's)
    hc = g.filter(pl.col("hcopy") & (pl.col("cls") == "copy")).join(
        c.select("rank", "ci", pl.col("_row").alias("crow")), on=["rank", "ci"], how="left"
    )
    if hc.height == 0:
        return
    by = hc["bytes"].fill_null(0).to_numpy().astype(np.float64)
    gd = hc["dur_ns"].to_numpy().astype(np.float64)
    grow = hc["_row"].to_numpy()
    crow = hc["crow"].fill_null(-1).to_numpy()
    target = k["copy_toll_ns"] + by / k["copy_bandwidth_gbps"]
    gone = np.zeros(hc.height, dtype=bool)
    big = by >= BULK_BYTES
    if fix == "resident_weights":
        gone = big  # bulk data kept on the GPU: neither offload nor restore copies
    elif fix == "context_pool":
        # a loader with a pool of CUDA contexts: bulk H2D at 0.65x of CC-off bandwidth
        pool = 0.65 * by / np.maximum(gd, 1)  # B/ns = GB/s
        sel = big & hc["h2d"].to_numpy()
        target = np.where(
            sel, k["copy_toll_ns"] + by / np.maximum(pool, k["copy_bandwidth_gbps"]), target
        )
    elif fix == "batch_small_copies":
        # one copy per step and direction carries the bytes of all the small ones: the others
        # (their calls, their GPU copies) are gone, the one left pays one toll for all the bytes
        small = hc.with_columns(pl.lit(np.arange(hc.height)).alias("_i")).filter(
            pl.col("small") & pl.col("step").is_not_null() & ~(pl.col("held") & ctx.sync_split)
        )
        for _, grp in small.group_by(["rank", "step", "h2d"]):
            if grp.height < 2:
                continue
            idx = grp["_i"].to_numpy()
            keep, drop = idx[-1], idx[:-1]
            gone[drop] = True
            target[keep] = k["copy_toll_ns"] + by[idx].sum() / k["copy_bandwidth_gbps"]
            gd[keep] = gd[idx].sum()  # the batched copy moves all the bytes at the native speed too
    elif fix == "fewer_sync_copies":
        gone = np.isin(grow, _sync_copies_gone(ctx)[0])
    gpu_x[grow[gone]] = -(10**15)
    has_call = gone & (crow >= 0)
    call[crow[has_call]] = -(10**15)
    free[crow[has_call]] = True
    extra = np.where(gone, 0, np.maximum(target - gd, 0)).astype(np.int64)
    if copy_at == "host":
        on_host = ~gone & (crow >= 0)
        np.add.at(call, crow[on_host], extra[on_host])
        # a batched copy moves its bytes on the GPU too: the dropped copies' native time
        if fix == "batch_small_copies":
            native = np.maximum(gd - hc["dur_ns"].to_numpy(), 0).astype(np.int64)
            gpu_x[grow[~gone]] += native[~gone]
    else:
        gpu_x[grow[~gone]] += extra[~gone] + (
            np.maximum(gd - hc["dur_ns"].to_numpy(), 0).astype(np.int64)[~gone]
            if fix == "batch_small_copies"
            else 0
        )


def _costs(
    ctx: _Ctx,
    on: frozenset[str],
    k: dict[str, float],
    fix: str | None = None,
    copy_at: str = "gpu",
) -> tuple[Injection, RowCosts]:
    """The injection and per-row costs of the mechanisms in ``on`` (+ one fix) at constants ``k``."""
    call, gap, gpu_x = ctx.zeros(), ctx.zeros(), ctx.zeros()
    free = np.zeros(ctx.n_rows, dtype=bool)
    c, g = ctx.calls, ctx.gpu
    rows = c["_row"].to_numpy()
    inj: dict[str, Any] = {}
    is_l = (c["cls"] == "launch").to_numpy()
    if fix == "cuda_graphs":
        # consecutive launches in a step collapse into one graph launch: the calls and the host
        # gaps between them vanish (with CC or without), the first pays one graph launch's toll
        inside = is_l & (c["prev_cls"] == "launch").fill_null(False).to_numpy()
        call[rows[inside]] = -c["dur_ns"].to_numpy()[inside]
        gap[rows[inside]] = -(10**15)
    if "launch_toll" in on:
        toll = {
            "runtime": k["kernel_launch_toll_ns"],
            "library": k["library_launch_toll_ns"],
            "graph": k["graph_launch_toll_ns"],
        }
        path = c["path"].to_numpy()
        add = np.array([toll[p] for p in path], dtype=np.float64) * is_l
        if fix == "cuda_graphs":
            add = np.where(is_l & ~inside, k["graph_launch_toll_ns"], 0.0)
        elif fix == "fewer_graph_splits":
            is_g = path == "graph"
            stp = c["step"].fill_null(-1).to_numpy()
            seen: set[tuple[int, int]] = set()
            first_g = np.zeros(len(stp), dtype=bool)
            rk = c["rank"].to_numpy()
            for i in np.nonzero(is_g)[0]:
                key = (int(rk[i]), int(stp[i]))
                if key not in seen:
                    seen.add(key)
                    first_g[i] = True
            add = np.where(is_g & ~first_g, 0.0, add)
        call[rows] += add.astype(np.int64)
    if "serialized_copies" in on:
        _copy_costs(ctx, k, fix, copy_at, call, gpu_x, free)
    if "blocked_non_blocking" in on:
        inj["copies_blocking"] = True
        # each copy that now waits for its stream wakes up as the trace's syncs do (that wake-up
        # is API-call time under the profiler too: calibration takes out the same share of it)
        wake = ctx.wake_ns * (1.0 - min(ctx.calib_u, 1.0))
        call[ctx.async_copies] += int(wake)
    if fix == "drain_thread":
        # readbacks (D2H) and the synchronize right after them move to a worker thread
        d2h = g.filter(pl.col("hcopy") & pl.col("d2h") & ~pl.col("consumed"))
        if d2h.height:
            ci = d2h["ci"].to_numpy()
            is_d2h_call = np.zeros(c.height, dtype=bool)
            is_d2h_call[ci] = True
            nxt_sync = np.zeros(c.height, dtype=bool)
            nxt_sync[1:] = is_d2h_call[:-1] & (c["cls"] == "sync").to_numpy()[1:]
            sel = is_d2h_call | nxt_sync
            dur = c["dur_ns"].to_numpy()
            free[rows[sel]] = True
            call[rows[sel]] = np.minimum(call[rows[sel]], 0) - np.maximum(
                dur[sel] - ctx.enqueue_ns, 0
            )
    if fix == "fewer_sync_copies":
        gone_gpu, gone_calls = _sync_copies_gone(ctx)
        gpu_x[gone_gpu] = -(10**15)
        call[gone_calls] = -(10**15)
        free[gone_calls] = True
    if "sync_stall" in on:
        inj["sync_toll_ns"] = int(k["sync_toll_ns"])
    if "encrypted_collectives" in on:
        inj["collective_factor"] = 1.0 / float(k["collective_bandwidth_ratio"])
        col = g.filter(pl.col("gclass") == "collective")
        if col.height and k["collective_step_latency_ns"] > 0:
            lat = col.select(_ring_steps(pl.col("gname"), max(ctx.world, 2)))[:, 0].to_numpy()
            extra = lat * k["collective_step_latency_ns"]
            if fix == "bigger_buckets":
                keep = ~col.select(pl.struct("rank", "step").is_duplicated())[:, 0].to_numpy()
                extra = np.where(keep, extra, 0)
            gpu_x[col["_row"].to_numpy()] += extra.astype(np.int64)
    if "uvm_migration" in on and ctx.uvm.height:
        uv = ctx.uvm
        by = uv["bytes"].to_numpy().astype(np.float64)
        dur = uv["dur_ns"].to_numpy()
        if fix == "prefetch_managed":
            cost = by / k["copy_bandwidth_gbps"]  # one bulk prefetch at the copy bandwidth
        else:
            cost = k["uvm_migration_toll_ns"] + by / k["uvm_bandwidth_gbps"]
        extra = np.maximum(cost - dur, 0).astype(np.int64)
        krow = uv["k_row"].to_numpy()
        crow = uv["c_row"].to_numpy()
        in_k = (
            ~np.isnan(krow.astype(np.float64))
            if krow.dtype != object
            else np.array([x is not None for x in krow])
        )
        np.add.at(gpu_x, krow[in_k].astype(np.int64), extra[in_k])
        ok_c = ~in_k & np.array(
            [x is not None and not (isinstance(x, float) and math.isnan(x)) for x in crow]
        )
        np.add.at(call, crow[ok_c].astype(np.int64), extra[ok_c])
    if "one_time_setup" in on and ctx.context_row is not None:
        call[ctx.context_row] += int(k["context_creation_ns"])
    if ctx.calib_u > 0:
        # the profiler's host overhead taken out (see calibrate): launch calls shrink first (to
        # 2 µs at most), then the host gaps
        cu, gu = min(ctx.calib_u, 1.0), max(ctx.calib_u - 1.0, 0.0)
        gaps = c.select(
            (pl.col("start_ns") - (pl.col("start_ns") + pl.col("dur_ns")).shift(1).over("rank"))
            .fill_null(0)
            .clip(0)
        )[:, 0].to_numpy()
        gap[rows] -= (gu * gaps).astype(np.int64)
        is_l = (c["cls"] == "launch").to_numpy()
        dur = c["dur_ns"].to_numpy()
        over = dur - np.minimum(dur, 2_000)
        call[rows[is_l]] -= (cu * over[is_l]).astype(np.int64)
    free[ctx.early_syncs] = True
    rc = RowCosts(
        call_ns=call, gap_ns=gap, gpu_ns=gpu_x, nonblocking=free, queue_aware=True,
        launch_queue=True,
    )  # fmt: skip
    return Injection(**inj), rc


def _active(ctx: _Ctx, k: dict[str, float]) -> list[str]:
    """The mechanisms that can cost anything on this trace and platform."""
    c, g = ctx.calls, ctx.gpu
    on = []
    if (c["cls"] == "launch").any():
        on.append("launch_toll")
    hc = g.filter(pl.col("hcopy"))
    if hc.height:
        on.append("serialized_copies")
        if _async_host_copies(c, g).height:
            on.append("blocked_non_blocking")
    if (c["cls"] == "sync").any() and k["sync_toll_ns"] > 0:
        on.append("sync_stall")
    if (g["gclass"] == "collective").any() and (
        k["collective_bandwidth_ratio"] < 1 or k["collective_step_latency_ns"] > 0
    ):
        on.append("encrypted_collectives")
    if ctx.uvm.height:
        on.append("uvm_migration")
    return on


# ----------------------------------------------------------------------------------- replays


def _gpu_busy_per_step(ctx: _Ctx, out: Trace) -> float:
    """The median over steps of the time the GPU is busy with a step's work (the union of the
    replayed rows its calls launched, per rank): a loop in steady state cannot run its steps
    faster than the GPU runs their work. The replayed step windows are the main thread's; when
    a fix frees the host of every wait (a drain thread taking the readbacks), the host alone
    runs ahead of the GPU, and its windows would shrink below the work they queue (the eager
    H200 graph decode's with a drain thread: 179 µs a step for 752 µs of GPU work)."""
    g = ctx.gpu.filter(pl.col("step").is_not_null())
    if g.height == 0:
        return 0.0
    rows = g["_row"].to_numpy()
    start = out.events["start_ns"].to_numpy()[rows]
    end = start + out.events["dur_ns"].to_numpy()[rows]
    iv = pl.DataFrame({"rank": g["rank"], "step": g["step"], "s": start, "e": end}).sort(
        "rank", "step", "s"
    )
    prev = pl.col("e").cum_max().shift(1).over("rank", "step")
    busy = iv.with_columns(
        (pl.col("e") - pl.max_horizontal("s", prev.fill_null(pl.col("s")))).clip(0).alias("b")
    )
    per = busy.group_by("rank", "step").agg(pl.col("b").sum().alias("dur_ns"))
    return _median_step(per, ctx.kept_steps)


class _Replayer:
    """Replays of the CC-off trace, cached by (mechanisms, constants end, fix)."""

    def __init__(self, ctx: _Ctx, platform: Platform) -> None:
        self.ctx, self.platform = ctx, platform
        self.cache: dict[tuple[frozenset[str], str, str | None], float] = {}
        self.keep: tuple[frozenset[str], str, str | None] | None = None
        self.kept: Trace | None = None
        st = ctx.trace.steps
        self.base = _median_step(st, ctx.kept_steps)

    def step(self, on: frozenset[str], end: str = "value", fix: str | None = None) -> float:
        key = (on, end, fix)
        if key not in self.cache:
            if not on and fix is None and self.ctx.calib_u == 0:
                self.cache[key] = self.base
            else:
                inj, rc = _costs(
                    self.ctx,
                    on,
                    self.platform.at(end),  # type: ignore[arg-type]
                    fix,
                    self.platform.copy_cost_at,
                )
                out = replay(self.ctx.trace, inj, self.ctx.threads, costs=rc)
                host = _median_step(out.steps, self.ctx.kept_steps)
                # a fix's replay is bounded by the GPU's work (see _gpu_busy_per_step); the
                # mechanisms' replays keep the main thread's steps, as the trace's own step does
                # (its host markers may run a little ahead of the GPU's work: a floor there
                # would move the Shapley split, not correct it)
                floor = _gpu_busy_per_step(self.ctx, out) if fix is not None else 0.0
                self.cache[key] = max(host, floor)
                if key == self.keep:
                    self.kept = out
        return self.cache[key]


def _shapley(players: list[str], f: Callable[[frozenset[str]], float]) -> dict[str, float]:
    """Exact Shapley values of ``f`` over ``players`` (in order when there are too many)."""
    n = len(players)
    if n == 0:
        return {}
    if n > MAX_EXACT_PLAYERS:
        out: dict[str, float] = {}
        on: frozenset[str] = frozenset()
        for p in players:
            nxt = on | {p}
            out[p] = f(nxt) - f(on)
            on = nxt
        return out
    phi = dict.fromkeys(players, 0.0)
    for p in players:
        rest = [q for q in players if q != p]
        for r in range(n):
            w = math.factorial(r) * math.factorial(n - r - 1) / math.factorial(n)
            for sub in itertools.combinations(rest, r):
                s = frozenset(sub)
                phi[p] += w * (f(s | {p}) - f(s))
    return phi


# --------------------------------------------------------------------------------- the result


_TEXT = {
    "launch_toll": "{n:.0f} {path} launches per step, each {toll} slower inside the call",
    "serialized_copies": "{n:.0f} host copies per step at {toll} + bytes / {bw} GB/s",
    "blocked_non_blocking": "{n:.0f} cudaMemcpyAsync per step block until the stream drains",
    "sync_stall": "{n:.0f} synchronize calls per step, each {toll} slower",
    "encrypted_collectives": "{n:.0f} collectives per step at {ratio:.2f}x bandwidth + {toll} per ring step",
    "uvm_migration": "{n:.0f} UVM migrations per step at {toll} + bytes / {bw} GB/s",
    "one_time_setup": "context creation {toll} slower, once",
}

_FIX_TEXT = {
    "cuda_graphs": "capture the step's launches in a CUDA graph (one graph launch per run of launches)",
    "fewer_graph_splits": "one graph launch per step instead of several",
    "drain_thread": "move readbacks (D2H copies and the synchronize after them) to a worker thread",
    "batch_small_copies": "pack the host copies (< 16 MiB) of each step into one per direction",
    "fewer_sync_copies": (
        "keep the small values the step waits for (sizes, flags, constants) on the GPU: one "
        "synchronous copy a step, not one per value"
    ),
    "resident_weights": "keep bulk data (weights, KV blocks) resident on the GPU: no bulk copies",
    "context_pool": "load bulk H2D data through a pool of CUDA contexts (0.65x of CC-off bandwidth)",
    "bigger_buckets": "bigger collective buckets: one collective's latency per step",
    "prefetch_managed": "prefetch managed memory in bulk instead of faulting it in",
}

_FIX_ALTERNATIVES = {
    "cuda_graphs": ["fewer_graph_splits"],
    "fewer_graph_splits": ["cuda_graphs"],
    "resident_weights": ["context_pool", "batch_small_copies"],
    "context_pool": ["resident_weights"],
    "batch_small_copies": ["resident_weights"],
}


def _fmt_ns(ns: float) -> str:
    from ccdiag.report.units import duration

    return duration(ns)


def _counts(ctx: _Ctx) -> dict[str, float]:
    """Per-step counts of what each mechanism charges (mean over the trace's steps)."""
    n_steps = max(ctx.trace.steps.height, 1)
    c, g = (
        ctx.calls.filter(pl.col("step").is_not_null()),
        ctx.gpu.filter(pl.col("step").is_not_null()),
    )
    launches = c.filter(pl.col("cls") == "launch")
    out = {
        f"launch.{p}": launches.filter(pl.col("path") == p).height / n_steps
        for p in ("runtime", "library", "graph")
    }
    out["copies"] = g.filter(pl.col("hcopy")).height / n_steps
    out["async"] = _async_host_copies(c, ctx.gpu).height / n_steps
    out["syncs"] = c.filter(pl.col("cls") == "sync").height / n_steps
    out["collectives"] = g.filter(pl.col("gclass") == "collective").height / n_steps
    uv = ctx.uvm.filter(pl.col("step").is_not_null()) if ctx.uvm.height else ctx.uvm
    out["uvm"] = uv.height / n_steps
    return out


def _describe(m: str, cnt: dict[str, float], k: dict[str, float]) -> tuple[float, str]:
    """Count per step and one line of what a (non-launch) mechanism charges."""
    d, t = _fmt_ns, _TEXT[m]
    if m == "serialized_copies":
        bw = f"{k['copy_bandwidth_gbps']:.3g}"
        return cnt["copies"], t.format(n=cnt["copies"], toll=d(k["copy_toll_ns"]), bw=bw)
    if m == "blocked_non_blocking":
        return cnt["async"], t.format(n=cnt["async"])
    if m == "sync_stall":
        return cnt["syncs"], t.format(n=cnt["syncs"], toll=d(k["sync_toll_ns"]))
    if m == "encrypted_collectives":
        return cnt["collectives"], t.format(
            n=cnt["collectives"],
            ratio=k["collective_bandwidth_ratio"],
            toll=d(k["collective_step_latency_ns"]),
        )
    if m == "uvm_migration":
        bw = f"{k['uvm_bandwidth_gbps']:.3g}"
        return cnt["uvm"], t.format(n=cnt["uvm"], toll=d(k["uvm_migration_toll_ns"]), bw=bw)
    return 1.0, t.format(toll=d(k["context_creation_ns"]))


def _paid_base(ctx: _Ctx, k: dict[str, float], copy_at: str) -> tuple[RowCosts, np.ndarray]:
    """What :func:`_paid` compares each mechanism's costs with, computed once: the costs with no
    mechanism on (the calibration's alone) and which event rows lie in a step."""
    _, without = _costs(ctx, frozenset(), k, copy_at=copy_at)
    in_step = np.zeros(ctx.n_rows, dtype=bool)
    for f in (ctx.calls, ctx.gpu):
        in_step[f.filter(pl.col("step").is_not_null())["_row"].to_numpy()] = True
    return without, in_step


def _paid(
    ctx: _Ctx,
    m: str,
    k: dict[str, float],
    copy_at: str,
    base: tuple[RowCosts, np.ndarray],
) -> int | None:
    """What mechanism ``m`` costs per step where it is paid, before any overlap: the costs its
    injection puts on the calls and GPU rows inside steps (less the calibration's, common to every
    replay), plus what the replay itself scales (the sync toll, the collectives' bandwidth).
    None for ``blocked_non_blocking``, whose cost is a wait only the replay gives."""
    if m == "blocked_non_blocking":
        return None
    n_steps = max(ctx.trace.steps.height, 1)
    if m == "sync_stall":
        syncs = ctx.calls.filter((pl.col("cls") == "sync") & pl.col("step").is_not_null())
        return round(syncs.height * k["sync_toll_ns"] / n_steps)
    _, with_m = _costs(ctx, frozenset({m}), k, copy_at=copy_at)
    without, in_step = base
    total = 0.0
    for a, b in (
        (with_m.call_ns, without.call_ns),
        (with_m.gap_ns, without.gap_ns),
        (with_m.gpu_ns, without.gpu_ns),
    ):
        total += float((a - b)[in_step].sum())
    if m == "encrypted_collectives":
        col = ctx.gpu.filter((pl.col("gclass") == "collective") & pl.col("step").is_not_null())
        scale = 1.0 / float(k["collective_bandwidth_ratio"]) - 1.0
        total += scale * float(col["dur_ns"].sum())
    return round(total / n_steps)


def _mechanism_rows(
    ctx: _Ctx, phi: dict[str, float], k: dict[str, float], platform: Platform
) -> list[MechanismCost]:
    cnt = _counts(ctx)
    base = _paid_base(ctx, k, platform.copy_cost_at)
    rows: list[MechanismCost] = []
    for m in MECHANISMS:
        if m not in phi:
            continue
        if m == "launch_toll":
            tolls = {
                "runtime": k["kernel_launch_toll_ns"],
                "library": k["library_launch_toll_ns"],
                "graph": k["graph_launch_toll_ns"],
            }
            paid = {p: cnt[f"launch.{p}"] * tolls[p] for p in tolls}
            total = sum(paid.values())
            for p, v in paid.items():
                if cnt[f"launch.{p}"] == 0:
                    continue
                share = v / total if total else 1.0 / 3
                rows.append(
                    MechanismCost(
                        mechanism=m,
                        path=p,
                        ns_per_step=round(phi[m] * share),
                        paid_ns_per_step=round(v),
                        count_per_step=round(cnt[f"launch.{p}"], 2),
                        text=_TEXT[m].format(n=cnt[f"launch.{p}"], path=p, toll=_fmt_ns(tolls[p])),
                    )
                )
            continue
        n, text = _describe(m, cnt, k)
        rows.append(
            MechanismCost(
                mechanism=m,
                ns_per_step=round(phi[m]),
                paid_ns_per_step=_paid(ctx, m, k, platform.copy_cost_at, base),
                count_per_step=round(n, 2),
                text=text,
            )
        )
    return rows


def _cc_warnings(trace: Trace, ctx: _Ctx) -> list[str]:
    """Signs that the trace given is already a CC-on trace."""
    out = []
    mode = (trace.meta.cc_mode or "").lower()
    if mode in ("on", "devtools", "synthetic"):
        out.append(
            f"the trace's metadata says CC mode {mode!r}: predict expects a CC-off trace, so "
            "the prediction adds CC costs on top of CC costs"
        )
    emulated = trace.meta.extra.get("emulated_cc", "")
    if emulated and "no mechanism" not in emulated:  # a baseline runs under the shim, all off
        out.append(
            f"the trace ran under emulated CC ({emulated}): its costs are already tolled, so the "
            "prediction adds CC costs on top of CC costs; give the CC-off (baseline) trace"
        )
    hc = ctx.gpu.filter(pl.col("hcopy"))
    relabel = hc.filter(
        pl.col("gname").str.contains("(?i)device-to-device|dtod")
        & ((pl.col("src_mem") == "managed") | (pl.col("dst_mem") == "managed"))
    )
    bulk = hc.filter(pl.col("bytes").fill_null(0) >= BULK_BYTES)
    gbps = _num((bulk["bytes"] / bulk["dur_ns"].clip(1)).median()) if bulk.height else None
    if relabel.height and hc.height and relabel.height >= 0.5 * hc.height:
        out.append(
            f"{relabel.height} of {hc.height} host copies are labelled device-to-device with a "
            "managed host buffer, as CC's emulated pinned memory shows them: this looks like a "
            "CC-on trace"
        )
    if gbps is not None and gbps < 5.0:
        out.append(
            f"bulk host copies run at {gbps:.2f} GB/s (median over {bulk.height}), a CC bridge's "
            "speed: this looks like a CC-on trace"
        )
    return out


def predict_trace(
    trace: Trace,
    platform: Platform | str | Path = "b200",
    *,
    warnings: list[str] | None = None,
    fixes: bool = True,
    unprofiled_step_ns: float | None = None,
) -> Prediction:
    """Predict the CC-on step time of a loaded CC-off trace (see the module docstring).

    Args:
        trace: the CC-off trace (steps assigned).
        platform: a profile, or its name or YAML path.
        warnings: added to the prediction's warnings.
        fixes: predict each fix too (one replay per fix).
        unprofiled_step_ns: the CC-off step measured without a profiler, if known: the trace's
            profiler overhead is taken out first (:func:`calibrate`).
    """
    return _predict(
        trace, platform, warnings=warnings, fixes=fixes, unprofiled_step_ns=unprofiled_step_ns
    )[0]


def predict_with_trace(
    trace: Trace, platform: Platform | str | Path, *, fixes: bool = False, partition: bool = True
) -> tuple[Prediction, Trace]:
    """:func:`predict_trace` and the predicted CC-on run itself (the replayed trace, one-time
    costs included), for validations that compare it with a real CC run. ``partition=False``
    skips the Shapley replays (``mechanisms`` then holds only the one-time setup)."""
    pred, kept, _, _ = _predict(trace, platform, fixes=fixes, keep=True, partition=partition)
    assert kept is not None
    return pred, kept


def calibrate(ctx: _Ctx, platform: Platform, unprofiled_step_ns: float) -> tuple[float, str]:
    """Take the profiler's host overhead out of the trace, given the CC-off step time measured
    *without* a profiler (no CC data).

    A profiler adds host time per launch (torch.profiler: ~30-40 µs per launch on an H200, more
    than a CC launch toll; a ``cudaGraphLaunch`` of a big graph takes ~260 µs instead of ~10 µs
    under CUPTI), so a profiled trace over-predicts a host-bound step. One knob ``u``, found by
    bisection so the CC-off replay's median step matches ``unprofiled_step_ns``: for ``u`` in
    0..1 the launch calls shrink toward 2 µs; in 1..2 the host gaps between calls shrink too (by
    ``u - 1``). Launch calls go first: the overhead of graph launches sits there, and host code
    that really runs (a scheduler, sampling) should survive. GPU time is left as traced (a
    profiler's slowdown of kernels inside graphs is not taken out).

    Returns:
        ``u`` (0: nothing taken out) and a note for the prediction's warnings.
    """
    rp = _Replayer(ctx, platform)
    traced = rp.base
    if unprofiled_step_ns * (1 + CALIBRATION_TOLERANCE) >= traced:
        return 0.0, (
            f"the unprofiled CC-off step ({_fmt_ns(unprofiled_step_ns)}) is not shorter than the "
            f"traced one ({_fmt_ns(traced)}): no profiler overhead taken out"
        )
    # the least overhead taken out that brings the replay within the run-to-run noise of the
    # measured step: a GPU-bound step says nothing about host time below it, and host code that
    # really runs must stay to be serialized by CC's blocking copies
    target = unprofiled_step_ns * (1 + CALIBRATION_TOLERANCE)
    lo, hi = 0.0, 1.98
    ctx.calib_u = hi
    floor = _Replayer(ctx, platform).step(frozenset())
    gpu_bound = floor >= unprofiled_step_ns * (1 - GPU_BOUND_MARGIN)
    if gpu_bound:
        # without any host overhead the replay is within 5 % of the measured step: that step is
        # GPU-bound and says nothing about the host time below it, so only the launch calls shrink
        hi = 1.0
    for _ in range(9):
        mid = (lo + hi) / 2
        ctx.calib_u = mid
        got = _Replayer(ctx, platform).step(frozenset())
        if got > target:
            lo = mid
        else:
            hi = mid
    ctx.calib_u = (lo + hi) / 2
    what = (
        f"launch calls shrunk by {ctx.calib_u:.0%} of their time above 2 µs"
        + (" (the CC-off step is GPU-bound: host gaps kept)" if gpu_bound else "")
        if ctx.calib_u <= 1
        else f"launch calls shrunk to 2 µs and host gaps by {ctx.calib_u - 1:.0%}"
    )
    return ctx.calib_u, (
        f"profiler overhead taken out: {what}, so the CC-off replay matches the unprofiled "
        f"step {_fmt_ns(unprofiled_step_ns)} (traced {_fmt_ns(traced)})"
    )


def _predict(
    trace: Trace,
    platform: Platform | str | Path,
    *,
    warnings: list[str] | None = None,
    fixes: bool = True,
    keep: bool = False,
    partition: bool = True,
    unprofiled_step_ns: float | None = None,
) -> tuple[Prediction, Trace | None, _Replayer, list[str]]:
    """The prediction, the predicted run when ``keep``, and the replayer and mechanisms it was
    made with (for validations that ask it more)."""
    plat = platform if isinstance(platform, Platform) else load_platform(platform)
    ctx = _context(trace)
    notes: list[str] = []
    if unprofiled_step_ns:
        notes.append(calibrate(ctx, plat, unprofiled_step_ns)[1])
    rp = _Replayer(ctx, plat)
    k = plat.at("value")
    players = _active(ctx, k)
    steady = frozenset(players)
    full = steady | ({"one_time_setup"} if ctx.context_row is not None else set())
    if keep:
        rp.keep = (full, "value", None)
        if not full:
            rp.kept = trace

    def f(s: frozenset[str]) -> float:
        return rp.step(s)

    if partition:
        phi = _shapley(players, f)
    else:  # the whole predicted slowdown, unsplit (validations that only need the total)
        phi = {}
    one_time_step = rp.step(full) - rp.step(steady) if full != steady else 0.0
    if ctx.context_row is not None:
        phi["one_time_setup"] = one_time_step
    base = rp.base if ctx.calib_u == 0 else rp.step(frozenset())
    steady_band = Band(
        median=round(rp.step(steady)),
        low=round(rp.step(steady, "low")),
        high=round(rp.step(steady, "high")),
    )
    # the context toll is one host call made longer: it adds to the step as it does at the
    # median constants, scaled to the range's ends (saves two replays)
    toll = k["context_creation_ns"]
    scale = {
        e: (plat.at(e)["context_creation_ns"] / toll if toll else 0.0) for e in ("low", "high")
    }
    band = Band(
        median=round(rp.step(full)),
        low=round(steady_band.low + one_time_step * scale["low"]),
        high=round(steady_band.high + one_time_step * scale["high"]),
    )
    fix_rows = _fixes(ctx, rp, steady, plat) if fixes else []
    in_steps = False
    if ctx.context_row is not None:
        row = ctx.calls.filter(pl.col("_row") == ctx.context_row)
        in_steps = bool(row["step"].is_not_null().any())
    warn = list(warnings or []) + notes + _cc_warnings(trace, ctx)
    if trace.meta.host_only:
        warn.append(
            "the trace has no GPU activity: only host-side costs (launch and sync tolls) are predicted"
        )
    if ctx.kept_steps is not None:
        left = trace.steps.height - ctx.kept_steps.height
        warn.append(
            f"{left} of {trace.steps.height} steps left out of the medians: each began behind GPU "
            "work the trace does not hold (queued before the trace or before a profiler window), "
            "whose wait depends on steps the trace does not show"
        )
    method = (
        "replay of the CC-off trace (ccdiag.replay: main thread + streams, sync and copy "
        f"dependencies) with the {plat.name} profile's costs; mechanisms by exact Shapley values "
        f"over {len(players)} mechanisms ({2 ** len(players)} replays) on the median step; band: "
        "every constant at the cheap / dear end of its published range"
        if len(players) <= MAX_EXACT_PLAYERS
        else "replay; mechanisms added in order (too many for exact Shapley values)"
    )
    pred = Prediction(
        source=trace.meta.source,
        format=trace.meta.format,
        platform=plat.name,
        platform_description=plat.description,
        constants=plat.sources(),
        n_steps=trace.steps.height,
        baseline_step_ns=round(base),
        predicted_step_ns=band,
        steady_step_ns=steady_band,
        one_time_ns=int(k["context_creation_ns"]),
        one_time_in_steps=in_steps,
        mechanisms=_mechanism_rows(ctx, phi, k, plat),
        fixes=fix_rows,
        warnings=warn,
        method=method,
    )
    kept = _without_backlog(rp.kept, ctx.n_orig) if rp.kept is not None else None
    return pred, kept, rp, players


def _fixes(ctx: _Ctx, rp: _Replayer, steady: frozenset[str], plat: Platform) -> list[FixPrediction]:
    """Every fix that applies, each replayed alone on top of the full CC prediction."""
    cnt = _counts(ctx)
    hc = ctx.gpu.filter(pl.col("hcopy") & pl.col("step").is_not_null())
    cands: list[str] = []
    if "launch_toll" in steady and cnt["launch.runtime"] + cnt["launch.library"] >= 2:
        cands.append("cuda_graphs")
    if "launch_toll" in steady and cnt["launch.graph"] >= 2:
        cands.append("fewer_graph_splits")
    if hc.filter(pl.col("d2h") & ~pl.col("consumed")).height:
        cands.append("drain_thread")
    if ctx.sync_split:
        cands.append("fewer_sync_copies")
    small = hc.filter(pl.col("small") & ~(pl.col("held") & ctx.sync_split))
    if small.height and small.group_by(["rank", "step", "h2d"]).len()["len"].max() >= 2:  # type: ignore[operator]
        cands.append("batch_small_copies")
    bulk = hc.filter(pl.col("bytes").fill_null(0) >= BULK_BYTES)
    if bulk.height:
        cands.append("resident_weights")
    if bulk.filter(pl.col("h2d")).height:
        cands.append("context_pool")
    if "encrypted_collectives" in steady and cnt["collectives"] >= 2:
        cands.append("bigger_buckets")
    if "uvm_migration" in steady:
        cands.append("prefetch_managed")
    cc = rp.step(steady)
    off = rp.step(frozenset())
    out = []
    for fx in cands:
        t = rp.step(steady, "value", fx)
        if cc - t < 0.01 * max(cc - rp.base, 1):
            continue  # recovers nothing worth saying (e.g. graphs where every launch is synced)
        without = round(off - rp.step(frozenset(), "value", fx)) if fx in FIXES_WITHOUT_CC else None
        out.append(
            FixPrediction(
                fix=fx,
                predicted_step_ns=round(t),
                recovery_ns_per_step=round(cc - t),
                recovery_without_cc_ns_per_step=without,
                alternative_to=[a for a in _FIX_ALTERNATIVES.get(fx, []) if a in cands],
                text=_FIX_TEXT[fx],
                method=f"replay of the CC prediction ({plat.name}) with the fix applied",
            )
        )
    return sorted(out, key=lambda x: x.predicted_step_ns)


def predict(
    trace_or_path: Trace | str | Path,
    platform: Platform | str | Path = "b200",
    *,
    step: str | None = None,
    unprofiled_step_ns: float | None = None,
) -> Prediction:
    """:func:`predict_trace` of a trace, or of a trace file / folder (loaded with its steps)."""
    plat = platform if isinstance(platform, Platform) else load_platform(platform)
    if isinstance(trace_or_path, Trace):
        return predict_trace(trace_or_path, plat, unprofiled_step_ns=unprofiled_step_ns)
    from ccdiag.api import load_trace

    tr = load_trace(trace_or_path, step=step)
    return predict_trace(tr, plat, unprofiled_step_ns=unprofiled_step_ns)


def ablation(
    trace: Trace,
    platform: Platform | str | Path,
    fixes: tuple[str, ...] = (),
    unprofiled_step_ns: float | None = None,
) -> dict[str, float]:
    """One-at-a-time predictions, the form of an emulator's ablation truth (ns per step).

    Returns:
        ``baseline``, ``cc`` (every steady mechanism), ``only_<mechanism>`` for each mechanism
        that applies, and ``fix_<id>`` (the CC step with that fix) for each of ``fixes``.
    """
    plat = platform if isinstance(platform, Platform) else load_platform(platform)
    ctx = _context(trace)
    if unprofiled_step_ns:
        calibrate(ctx, plat, unprofiled_step_ns)
    return _alone(ctx, _Replayer(ctx, plat), _active(ctx, plat.at("value")), fixes)


def _alone(
    ctx: _Ctx, rp: _Replayer, players: list[str], fixes: tuple[str, ...]
) -> dict[str, float]:
    """:func:`ablation`'s values from a built context and its replayer."""
    steady = frozenset(players)
    base = rp.base if ctx.calib_u == 0 else rp.step(frozenset())
    out = {"baseline": base, "cc": rp.step(steady)}
    for m in players:
        out[f"only_{m}"] = rp.step(frozenset({m}))
    for fx in fixes:
        out[f"fix_{fx}"] = rp.step(steady, "value", fx)
    return out


def predict_and_ablation(
    trace: Trace,
    platform: Platform | str | Path,
    over: Iterable[Iterable[str]] = (),
) -> tuple[Prediction, dict[str, float], dict[frozenset[str], dict[str, float]]]:
    """:func:`predict_trace` (no fixes), :func:`ablation`, and predict's Shapley values over each
    set of mechanisms in ``over``, from one context and one set of replays: the model of the
    trace is built once, and most replays are those the partition already ran.

    The Shapley values over a set are those of the game restricted to its mechanisms (the others
    off), the form of an emulator's Shapley truth over the mechanisms it injected; a mechanism
    of the set that predict does not find in the trace gets 0.
    """
    pred, _, rp, players = _predict(trace, platform, fixes=False)
    shap = {}
    for o in map(frozenset, over):  # the game restricted to each set, on the same replays
        phi = _shapley([m for m in players if m in o], rp.step)
        shap[o] = {m: phi.get(m, 0.0) for m in sorted(o)}
    return pred, _alone(rp.ctx, rp, players, ()), shap
