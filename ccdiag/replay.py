"""Replay a trace's main host thread and its GPU streams with changed costs.

A small discrete-event model of one process per rank, used for two things:

- **synthetic treatments** with known injected costs (:func:`synthesize`): add a toll to every
  launch, make host copies blocking and padded to ``toll + bytes / bandwidth``, add a per-sync
  stall, slow collectives down; the ground truth of each mechanism is then measured by ablation
  (replaying with all mechanisms but one), exactly as on real hardware;
- **counterfactuals** (:func:`replay_steps`): the treatment with one mechanism's costs set back,
  to predict what a fix recovers.

Model. The main thread's top-level API calls keep their order and the host gaps between them.
A GPU row starts at ``max(its launch call's end + the latency it had, the end of the previous row
on its stream)``; a synchronize call ends at ``max(start + its own cost, the GPU work launched
before it + wake-up)``; a blocking copy ends when its GPU copy ends (+ padding). Everything else
(cpu_ops, other threads, annotations, step windows) moves with the main thread's time shift at
that instant. Cross-stream event dependencies are kept only as the fixed delays they had.

The host↔GPU coupling at blocking calls is sequential: the replay loops over *blocking calls*
(a few per step), and everything between two of them is vectorized (cumulative sums for the host,
a prefix-max recurrence per stream for the GPU). It never loops over events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ccdiag import apis
from ccdiag.ledger import gpu as gp
from ccdiag.ledger import host as hc
from ccdiag.ledger import vocab as vc
from ccdiag.ledger.removal import Removal
from ccdiag.schema import Trace


@dataclass(frozen=True)
class Injection:
    """Costs to add (negative values remove). Zero everywhere = replay the trace as it is."""

    launch_toll_ns: int = 0
    launch_toll_in_gap: bool = False  # spin before the call (emulator fallback) instead of inside
    copies_blocking: bool = False  # host-crossing cudaMemcpyAsync waits for the stream + copy
    copy_toll_ns: int = 0  # a host copy takes at least toll + bytes / bandwidth ...
    copy_gbps: float = 0.0  # ... (0: no bandwidth term)
    copy_pad_on_host: bool = (
        False  # emulator style: pad the blocking call; else the GPU copy is slower
    )
    sync_toll_ns: int = 0
    collective_factor: float = 1.0
    kernel_factor: float = 1.0  # scale compute kernels (to build GPU-bound scenarios)


@dataclass(frozen=True)
class RowCosts:
    """Per-event costs for :func:`replay` (added for ``ccdiag predict``; all optional).

    Arrays are indexed by the trace's event rows (length ``events.height``); only the rows the
    replay models read them: top-level host API calls for ``call_ns``, ``gap_ns`` and
    ``nonblocking``; GPU rows for ``gpu_ns``. Negative values remove cost (never below zero).
    """

    call_ns: np.ndarray | None = None  # inside the call (a blocking call pays it after its wait)
    gap_ns: np.ndarray | None = None  # the host gap before the call
    gpu_ns: np.ndarray | None = None  # the GPU row's duration
    nonblocking: np.ndarray | None = None  # the call never waits (e.g. moved to a drain thread)
    # measure a GPU row's latency from the later of its call and its stream's previous row (a row
    # queued behind its stream with a small gap keeps that gap, not the whole wait, as latency);
    # a plain replay stays exact either way
    queue_aware: bool = False
    # a launch that waited for room in CUDA's launch queue (``_queue_full_waits``) waits for the
    # GPU row whose end freed it, not for as long as it did (``ccdiag predict``: a counterfactual
    # that drains the queue, CC's blocking copies, frees it); off, it keeps its length
    launch_queue: bool = False


def _row_costs(top: pl.DataFrame, gpu: pl.DataFrame, rc: RowCosts | None) -> dict[str, np.ndarray]:
    """The :class:`RowCosts` arrays cut to this rank's calls and GPU rows (zeros when absent)."""
    rows, grows = top["_row"].to_numpy(), gpu["_row"].to_numpy()

    def cut(a: np.ndarray | None, idx: np.ndarray, dtype: type) -> np.ndarray:
        return np.zeros(idx.size, dtype=dtype) if a is None else np.asarray(a)[idx].astype(dtype)

    return {
        "call": cut(rc.call_ns if rc else None, rows, np.int64),
        "gap": cut(rc.gap_ns if rc else None, rows, np.int64),
        "gpu": cut(rc.gpu_ns if rc else None, grows, np.int64),
        "free": cut(rc.nonblocking if rc else None, rows, bool),
    }


def _indexed(ev: pl.DataFrame) -> pl.DataFrame:
    """Events with ``_row``, their row in the full trace (kept when a part was cut out)."""
    return ev if "_row" in ev.columns else ev.with_row_index("_row")


def _top_calls(ev: pl.DataFrame, threads: pl.DataFrame, merge: bool = False) -> pl.DataFrame:
    """The main threads' top-level API calls; with ``merge``, a copy call and the sync right
    after it that waits for it are one blocking copy call (``hc.merge_copy_syncs``: a
    counterfactual of the measured trace then unblocks both; :func:`replay`, which moves every
    event, keeps them apart)."""
    api = _indexed(ev).filter(pl.col("kind").is_in(vc.API_KINDS))
    # state queries (cuKernelGetName, cudaStreamIsCapturing) are host code inside the gap before
    # the next call, as on the ledger (``ccdiag.ledger.host.host_calls``)
    api = api.filter(~vc.base_name().is_in(list(apis.QUERY_APIS)))
    api = api.join(threads, on=["rank", "pid", "tid"]).sort(
        "rank", "start_ns", pl.col("dur_ns"), descending=[False, False, True]
    )
    end = pl.col("start_ns") + pl.col("dur_ns")
    prev = end.cum_max().shift(1).over("rank")
    api = api.with_columns(
        (pl.col("start_ns") >= prev.fill_null(pl.col("start_ns"))).alias("top"),
        vc.api_class().alias("cls"),
    )
    top = api.filter(pl.col("top"))
    top = hc.merge_copy_syncs(top) if merge else top.with_columns(pl.lit(False).alias("synced"))
    top = top.with_columns(pl.int_range(pl.len()).over("rank").alias("ci"))
    return top.select(
        "_row", "rank", "pid", "correlation", "name", "start_ns", "dur_ns", "cls", "ci", "synced"
    )


def _gpu(ev: pl.DataFrame, top: pl.DataFrame) -> pl.DataFrame:
    g = _indexed(ev).filter(
        pl.col("kind").is_in(vc.GPU_KINDS) & pl.col("correlation").is_not_null()
    )
    pageable = (pl.col("src_mem").cast(pl.String) == "pageable") | (
        pl.col("dst_mem").cast(pl.String) == "pageable"
    )
    g = g.with_columns(
        vc.gpu_class().alias("gclass"),
        vc.is_host_copy().fill_null(False).alias("hcopy"),
        pageable.fill_null(False).alias("pageable"),
    )
    calls = top.select(
        "rank",
        "pid",
        "correlation",
        "ci",
        pl.col("start_ns").alias("cs"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("ce"),
        "cls",
    )
    g = g.join(calls, on=["rank", "pid", "correlation"]).sort(
        "rank", "device", "stream", "start_ns"
    )
    prev = (
        (pl.col("start_ns") + pl.col("dur_ns")).cum_max().shift(1).over("rank", "device", "stream")
    )
    g = g.with_columns(prev.alias("prev_end"))
    g = _cross_stream_deps(g)
    return g.select(
        "_row",
        "dep",
        "dep_delay",
        "rank",
        "ci",
        "device",
        "stream",
        "start_ns",
        "dur_ns",
        "bytes",
        "gclass",
        "hcopy",
        "pageable",
        "cs",
        "ce",
        "cls",
        "prev_end",
    )


#: A GPU row that started this long after its launch returned, with its own stream idle, waited
#: for something else than its launch: another stream's work (an event), a peer rank.
WAIT_NS = 5_000
#: Probe tolerance: a row ending this soon after the waiting row's start still counts.
DEP_TOL_NS = 1_000


def _cross_stream_deps(g: pl.DataFrame) -> pl.DataFrame:
    """Add ``dep`` (index, within the rank's rows in this frame's order, of the row this row
    waited for; -1 none) and ``dep_delay`` (its start minus that row's end).

    A row that waited (its stream idle, its launch long done) is anchored to the device's last
    row that ended before it started: in a replay it starts ``dep_delay`` after that row, or
    after its launch when the host is later, never from a fixed delay after a launch that moved
    while the GPU work it waited for did not. A wait on a peer rank stays as long as it was."""
    g = g.with_columns(pl.int_range(pl.len()).over("rank").alias("_gi"))
    ends = g.select(
        "rank", "device", pl.col("stream").alias("_dstream"), pl.col("_gi").alias("_dgi"),
        (pl.col("start_ns") + pl.col("dur_ns")).alias("_dend"),
    ).sort("_dend")  # fmt: skip
    j = g.with_columns((pl.col("start_ns") + DEP_TOL_NS).alias("_probe")).sort("_probe")
    j = j.join_asof(
        ends, left_on="_probe", right_on="_dend", by=["rank", "device"], check_sortedness=False
    )
    idle = pl.col("prev_end").is_null() | (pl.col("start_ns") > pl.col("prev_end") + 1000)
    late = pl.col("start_ns") - pl.col("ce") > WAIT_NS
    # the row it waited for is on another stream: its own stream's previous row ending just
    # before it says only that the stream ran dry (the host was late), and a fixed delay after
    # that row would keep the host's lateness in every counterfactual (tv_train's treatment:
    # kernels 34 us after their tolled launches, anchored to the row before, kept the toll)
    # and it ended after the launch returned: a row that ended before the work was submitted
    # released nothing (trace_diff's V100 rank: a kernel 8 us after its launch, on a GPU idle for
    # 13.7 ms, was anchored to the memset that ended then, and kept the host's lateness)
    after_launch = pl.col("_dend") > pl.col("ce")
    other = (pl.col("_dgi") != pl.col("_gi")) & (pl.col("_dstream") != pl.col("stream"))
    dep = idle & late & after_launch & other
    j = j.with_columns(
        pl.when(dep.fill_null(False)).then(pl.col("_dgi")).otherwise(-1).alias("dep"),
        pl.when(dep.fill_null(False))
        .then((pl.col("start_ns") - pl.col("_dend")).clip(lower_bound=0))
        .otherwise(0)
        .alias("dep_delay"),
    )
    return j.sort("rank", "device", "stream", "start_ns").drop(
        "_gi", "_dstream", "_dgi", "_dend", "_probe"
    )


@dataclass
class _Rank:
    s: np.ndarray
    d: np.ndarray
    gap: np.ndarray
    blocking: np.ndarray
    base: np.ndarray
    eps: np.ndarray
    own: np.ndarray  # index into GPU rows of a blocking copy's own copy, -1 otherwise
    pad: np.ndarray
    g_ci: np.ndarray
    g_lat: np.ndarray
    g_rel_start: np.ndarray  # bool: latency measured from the call's start (blocking copy)
    g_dur: np.ndarray
    g_key: np.ndarray
    g_dep: np.ndarray  # index of the row on another stream this row waited for, -1 none
    g_dep_delay: np.ndarray
    g_gap: np.ndarray | None = None  # RowCosts.queue_aware: gap after the stream's previous row
    # per call, the GPU row a sync waited for where it was not all the work queued before it
    # (:func:`_sync_targets`; -1 that work, -2 none of it)
    wait: np.ndarray | None = None


def _prepare(
    top: pl.DataFrame,
    gpu: pl.DataFrame,
    inj: Injection,
    rc: RowCosts | None = None,
    observed: bool = False,
) -> _Rank:
    s = top["start_ns"].to_numpy().astype(np.int64)
    d = top["dur_ns"].to_numpy().astype(np.int64)
    cls = top["cls"].to_numpy()
    e = s + d
    gap = np.diff(s, prepend=s[0]) - np.concatenate([[0], d[:-1]])
    gap[0] = 0
    n, gs, gd = s.size, gpu["start_ns"].to_numpy(), gpu["dur_ns"].to_numpy().astype(np.int64)
    ci = gpu["ci"].to_numpy()
    ge = gs + gd
    is_copy_call = cls == "copy"
    own = np.full(n, -1)
    hcopy = gpu["hcopy"].to_numpy() & is_copy_call[ci]
    own[ci[hcopy]] = np.nonzero(hcopy)[0]

    def at_own(arr: np.ndarray, fill: int | float | bool) -> np.ndarray:
        """``arr[own]`` for calls that own a copy, else ``fill`` (``arr`` may be empty)."""
        if arr.size == 0:
            return np.full(n, fill, dtype=arr.dtype)
        return np.where(own >= 0, arr[np.maximum(own, 0)], fill)

    # CUDA semantics: cudaMemcpy (no Async) and pageable copies block; pinned Async ones do not
    sync_sem = (
        ~top["name"].str.contains("Async").to_numpy()
        | ((own >= 0) & at_own(gpu["pageable"].to_numpy(), False))
        | top["synced"].to_numpy()  # a copy and the sync after it (``hc.merge_copy_syncs``)
    )
    # a treatment replayed as measured: a copy call that covered its copy blocked, whatever CUDA's
    # semantics say (CC makes pinned async copies block)
    sync_sem = sync_sem | observed
    was_blocking = (own >= 0) & sync_sem & (e >= at_own(ge, 0))
    ready = _orig_ready(n, ci, ge)
    ready_at = np.where(own >= 0, at_own(ge, 0), ready)
    sync = cls == "sync"
    # replayed as measured (the attribution's counterfactuals), a sync waits for what it waited
    # for; an emulation (:func:`replay`) keeps CUDA's semantics: every sync waits for its work
    wait = _sync_targets(sync, e, ci, ge, ready) if observed else np.full(n, -1)
    ready_at = np.where(wait >= 0, ge[np.maximum(wait, 0)] if ge.size else 0, ready_at)
    ready_at = np.where(wait == -2, np.iinfo(np.int64).min, ready_at)
    blocking = sync | was_blocking | ((own >= 0) & inj.copies_blocking)
    xc = _row_costs(top, gpu, rc)
    blocking &= ~xc["free"]
    waited = blocking & (ready_at > s)
    eps = np.where(waited, np.clip(e - ready_at, 0, None), 0)
    # an idle sync tells the call's own cost only if it could have waited for something the model
    # holds: a sync before any GPU row (the trace's or block's first call) may wait for work
    # launched before it (tv_train's first cudaDeviceSynchronize: 13 ms, taken as the own cost
    # of every blocked copy, which then kept its whole observed wait in every counterfactual)
    idle = sync & ~waited & (ready > np.iinfo(np.int64).min)
    ovh = (
        int(np.median(d[idle]))
        if idle.any()
        else (int(np.median(eps[sync & waited])) if (sync & waited).any() else 0)
    )
    wake = int(np.median(eps[sync & waited])) if (sync & waited).any() else ovh
    # an idle sync that must wait in a replay pays a wake-up (bounded so a plain replay is exact)
    eps = np.where(idle, np.clip(np.minimum(wake, d + s - ready_at), 0, None), eps)
    base = np.where(waited, np.minimum(d, ovh), d)
    base = np.where(sync, base + inj.sync_toll_ns, base)
    eps = np.where(sync & waited, eps + inj.sync_toll_ns, eps)
    new_blocking = (own >= 0) & ~was_blocking & inj.copies_blocking
    base = np.where(new_blocking, d, base)
    launch = cls == "launch"
    if inj.launch_toll_in_gap:
        gap = np.maximum(gap + np.where(launch, inj.launch_toll_ns, 0), 0)
    else:  # a negative toll (a counterfactual) never makes a call shorter than nothing
        d = np.maximum(d + np.where(launch, inj.launch_toll_ns, 0), 0)
        base = np.where(launch, d, base)
    # ``RowCosts.launch_queue`` (``ccdiag predict``): a launch that waited for room in CUDA's
    # launch queue waits for the row whose end freed it, paying only a launch's own time beyond
    # that wait. The attribution's counterfactuals (``observed``) keep such launches as measured
    # and floor a GPU-bound loop at its GPU's busy time (``Replayer``): with these waits their
    # first step after the block's start (no queue yet) absorbed the floor, HELD-OUT-32's
    # ConvNeXt pairs replayed without their copies at 40.3 ms a step for a 54.7 ms baseline.
    # ``synthesize`` keeps them too: its emulated treatments are the third-party validation's
    # truths, judged as they were built
    qf = (
        _queue_full_waits(launch & ~blocking & ~xc["free"], s, e, ci, ge)
        if rc is not None and rc.launch_queue and not observed
        else np.full(n, -1)
    )
    if (qf >= 0).any():
        q = qf >= 0
        own_cost = int(np.median(d[launch & ~q])) if (launch & ~q).any() else 0
        blocking = blocking | q
        wait = np.where(q, qf, wait)
        eps = np.where(q, np.clip(e - ge[np.maximum(qf, 0)], 0, None), eps)
        base = np.where(q, own_cost, base)
        d = np.where(q, own_cost, d)
    # per-row costs (RowCosts): inside non-blocking calls, after the wait of blocking ones
    d = np.where(blocking, d, np.maximum(d + xc["call"], 0))
    base = np.where(blocking, base, d)
    gap = np.maximum(gap + xc["gap"], 0)
    pad = np.where(blocking, np.maximum(xc["call"], 0), 0).astype(np.int64)
    if inj.copy_toll_ns or inj.copy_gbps:
        by = gpu["bytes"].fill_null(0).to_numpy()
        per_byte = by / inj.copy_gbps if inj.copy_gbps else np.zeros(by.size)
        target = (inj.copy_toll_ns + per_byte).astype(np.int64)
        if inj.copy_pad_on_host:
            t_own = at_own(target, 0)
            pad = pad + np.where(
                blocking & (own >= 0), np.clip(t_own - at_own(gd, 0), 0, None), 0
            ).astype(np.int64)
        else:
            gd = np.where(hcopy, np.maximum(gd, target), gd)
    rel = (blocking | xc["free"])[ci] & (own[ci] >= 0)
    lat = np.where(rel, gs - s[ci], gs - e[ci])
    prev = gpu["prev_end"].fill_null(-1).to_numpy()
    # a row queued behind its stream's previous row: it starts at that row's end in a replay.
    # Back to back (within 1 µs), or launched while the previous row still ran and started
    # within QUEUE_SLACK_NS of its end (H100 CC runs kernels ~1.2 µs apart: ISPASS hotspot3D)
    launched = np.where(rel, s[ci], e[ci]) if ci.size else gs
    queued = (gs <= prev + 1000) | ((prev >= launched) & (gs <= prev + QUEUE_SLACK_NS))
    lat = np.where(queued & ~rel, np.minimum(lat, _lat_cap(lat, queued)), lat)
    lat = np.where(queued & rel, np.minimum(lat, top["dur_ns"].to_numpy()[ci]), lat)
    dep = gpu["dep"].to_numpy().astype(np.int64)
    gq = _queue_gaps(s, e, ci, gs, prev, rel, dep) if rc is not None and rc.queue_aware else None
    if gq is not None:
        lat = gq[0]
    # a row that waited on another stream starts from that row's end in a replay, not from a
    # fixed delay after its launch (the launch may move while the row it waited for does not)
    lat = np.where(dep >= 0, np.minimum(lat, _lat_cap(lat, queued)), lat)
    gcls = gpu["gclass"].to_numpy()
    gdur = np.where(
        gcls == "collective", (gd * inj.collective_factor).astype(np.int64), gd.astype(np.int64)
    )
    gdur = np.where(gcls == "kernel", (gdur * inj.kernel_factor).astype(np.int64), gdur)
    gdur = np.maximum(gdur + xc["gpu"], 0)
    key = gpu.select(
        pl.concat_str(
            pl.col("device").cast(pl.String), pl.col("stream").cast(pl.String), separator=":"
        )
    )
    return _Rank(
        s,
        d,
        gap,
        blocking,
        base.astype(np.int64),
        eps.astype(np.int64),
        own,
        pad,
        ci,
        lat.astype(np.int64),
        rel,
        gdur,
        key.to_series().to_numpy(),
        dep,
        gpu["dep_delay"].to_numpy().astype(np.int64),
        None if gq is None else gq[1],
        wait,
    )


#: The fewest rows that waited for nothing a launch latency is read off (:func:`_queue_gaps`) ...
MIN_FREE_ROWS = 20
#: ... and the latency used with fewer: a launch reaches the GPU a few µs after its call returns.
LAUNCH_LATENCY_NS = 5_000


def _queue_gaps(
    s: np.ndarray,
    e: np.ndarray,
    ci: np.ndarray,
    gs: np.ndarray,
    prev: np.ndarray,
    rel: np.ndarray,
    dep: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(latency, queue gap) per GPU row for ``RowCosts.queue_aware``.

    A row whose call came before its stream's previous row ended was waiting for the stream: its
    latency from the call is capped at the median latency of rows that were not, and the gap it
    had after the previous row is kept as a queue gap. The replay then starts it at
    ``max(call + latency, previous row's end + gap)``: the original start when nothing changes.
    A row anchored to another stream's row (``dep`` >= 0) keeps no gap: the gap after its own
    stream's row held that wait, which the anchor already replays.
    """
    ref = np.where(rel, s[ci], e[ci])
    raw = (gs - ref).astype(np.int64)
    behind = (prev >= 0) & (ref < prev)
    # the latency of a launch is read off rows that waited for nothing: neither their stream nor
    # another stream's row (``dep``); with fewer than MIN_FREE_ROWS of them, a GPU-bound trace's
    # few idle-stream rows (HELD-OUT-32's ConvNeXt training: 3 of 22,831, each waiting 16-78 ms
    # on a stream it had no event for) would set every queued row's latency: predict made its
    # blocking copies wait 78 ms each and the step 211.8 ms instead of about 56 ms
    free = raw[~behind & (raw >= 0) & (dep < 0)]
    cap = int(np.median(free)) if free.size >= MIN_FREE_ROWS else LAUNCH_LATENCY_NS
    lat = np.where(behind, np.clip(raw, 0, cap), raw)
    gap = np.where(behind & (dep < 0), np.maximum(gs - prev, 0), 0).astype(np.int64)
    return lat.astype(np.int64), gap


#: A launch call this long (and QUEUE_FULL_FACTOR times its rank's median launch) that returned
#: within QUEUE_WAKE_NS of one of the GPU rows launched before it ending waited for room in
#: CUDA's launch queue (:func:`_queue_full_waits`).
QUEUE_FULL_MIN_NS = 200_000
QUEUE_FULL_FACTOR = 20
QUEUE_WAKE_NS = 100_000


def queue_wait_floor(median_launch_ns: float) -> float:
    """The length over which a launch call counts as a long wait for room in the launch queue:
    ``QUEUE_FULL_MIN_NS``, and ``QUEUE_FULL_FACTOR`` times the median launch given."""
    return max(QUEUE_FULL_MIN_NS, QUEUE_FULL_FACTOR * median_launch_ns)


def _queue_full_waits(
    launch: np.ndarray, s: np.ndarray, e: np.ndarray, ci: np.ndarray, ge: np.ndarray
) -> np.ndarray:
    """Per call: the GPU row whose end let a launch call return, for launches that waited for
    room in CUDA's launch queue (a GPU-bound loop whose host runs a queue ahead); -1 for every
    other call. Such a launch takes milliseconds and returns a few µs after one of the rows
    queued before it ends (HELD-OUT-32's ConvNeXt training: 828 launches, 15.4 ms a step, a
    median 5.5 µs after a row's end). Replayed with its length kept, a counterfactual whose
    queue has drained (CC's blocking copies) still waited there while the GPU idled: predict
    put the CC step at 71.7 ms for about 56 ms measured.

    Shorter waits are found from the queue's depth: the rows launched before a call and not yet
    ended when it began. The long waits show the depth at which the queue is full (the median
    over them, ``QUEUE_FULL_DEPTH`` of it taken as full); a launch that began at that depth, took
    over ``QUEUE_SHORT_FACTOR`` times the median launch and returned within ``QUEUE_WAKE_NS`` of
    a row's end waited for it too (HELD-OUT-40's ResNeXt-50 loop: 140 launches a step of
    20-200 µs, 9.9 ms a step, at the depth of its long waits, 1,135 rows)."""
    out = np.full(s.size, -1)
    d = e - s
    if not launch.any() or ge.size == 0:
        return out
    med = float(np.median(d[launch]))
    long = np.nonzero(launch & (d > queue_wait_floor(med)))[0]
    if long.size == 0:
        return out
    # the latest row launched before the call (row's call index < call's) that ended by its end
    order = np.lexsort((ci, ge))
    ges, cis = ge[order], ci[order]

    def released(i: int) -> int:
        j = int(np.searchsorted(ges, e[i], side="right")) - 1
        while j >= 0 and cis[j] >= i:
            j -= 1
        if j >= 0 and e[i] - ges[j] <= QUEUE_WAKE_NS and ges[j] > s[i]:
            return int(order[j])
        return -1

    for i in long.tolist():
        out[i] = released(i)
    found = out >= 0
    if int(found.sum()) < QUEUE_MIN_WAITS:
        return out
    # depth at each call's start: rows launched by earlier calls less those ended by then
    depth = np.searchsorted(np.sort(ci), np.arange(s.size), side="left") - np.searchsorted(
        np.sort(ge), s, side="right"
    )
    full = QUEUE_FULL_DEPTH * float(np.median(depth[found]))
    short = launch & ~found & (d > QUEUE_SHORT_FACTOR * med) & (depth >= full)
    for i in np.nonzero(short)[0].tolist():
        out[i] = released(i)
    return out


#: The fewest long waits (:func:`_queue_full_waits`) the queue's full depth is read off ...
QUEUE_MIN_WAITS = 10
#: ... the share of their median depth at which the queue counts as full ...
QUEUE_FULL_DEPTH = 0.95
#: ... and how much longer than the median launch a launch at that depth must take.
QUEUE_SHORT_FACTOR = 2


def _sync_targets(
    sync: np.ndarray, e: np.ndarray, ci: np.ndarray, ge: np.ndarray, ready: np.ndarray
) -> np.ndarray:
    """Per call: the GPU row a sync waited for, where the trace shows it did not wait for all
    the work queued before it (it returned while some of it still ran: an event or stream sync
    of other work, a drain worker's wait beside the main thread's launches): the latest-ending
    row launched before it that had ended when it returned; -2 when none had; -1 for every
    other call (a sync that returned after all the queued work waited for all of it)."""
    out = np.full(e.size, -1)
    early = np.nonzero(sync & (ready > e))[0]
    if early.size == 0 or ge.size == 0:
        return out
    by_end = np.argsort(ge, kind="stable")
    ends = ge[by_end]
    for i in early:
        j = int(np.searchsorted(ends, e[i], side="right")) - 1
        while j >= 0 and ci[by_end[j]] >= i:  # launched after the sync: not what it waited for
            j -= 1
        out[i] = by_end[j] if j >= 0 else -2
    return out


def _orig_ready(n: int, ci: np.ndarray, ge: np.ndarray) -> np.ndarray:
    """Per call: latest end of GPU work launched by earlier calls (original times)."""
    last = np.full(n + 1, np.iinfo(np.int64).min)
    np.maximum.at(last, ci + 1, ge)
    return np.maximum.accumulate(last)[:n]


#: Slack between a queued GPU row's start and its stream's previous row's end.
QUEUE_SLACK_NS = 20_000


def _lat_cap(lat: np.ndarray, queued: np.ndarray) -> int:
    free = lat[~queued]
    return int(np.median(free)) if free.size else 5000


def _run(r: _Rank) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """New call starts/ends and GPU row starts."""
    n = r.s.size
    s2, e2 = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    g2 = np.zeros(r.g_ci.size, dtype=np.int64)
    order = np.argsort(r.g_ci, kind="stable")
    bounds = np.searchsorted(r.g_ci[order], np.arange(n + 1))
    stream_end: dict = {}
    ready = np.iinfo(np.int64).min
    stops = np.nonzero(r.blocking)[0].tolist() + [n]
    prev_e, lo = int(r.s[0]), 0
    for hi in stops:
        k = np.arange(lo, min(hi + 1, n))
        if k.size == 0:
            break
        step = r.gap[k] + np.concatenate([[0], r.d[k[:-1]]])
        s2[k] = prev_e + np.cumsum(step)
        e2[k] = s2[k] + r.d[k]
        rows = order[bounds[lo] : bounds[min(hi + 1, n)]]
        if rows.size:
            ci = r.g_ci[rows]
            a = np.where(r.g_rel_start[rows], s2[ci], e2[ci]) + r.g_lat[rows]
            stream_end, seg_ready = _segment_gpu(r, rows, a, stream_end, g2)
            ready = max(ready, seg_ready)
        if hi < n:
            own = r.own[hi]
            w = -1 if r.wait is None else int(r.wait[hi])
            if own >= 0:
                ready_at = g2[own] + r.g_dur[own]
            elif w >= 0:
                ready_at = g2[w] + r.g_dur[w]
            else:
                ready_at = ready if w == -1 else np.iinfo(np.int64).min
            e2[hi] = max(s2[hi] + r.base[hi], ready_at + r.eps[hi]) + r.pad[hi]
        prev_e, lo = int(e2[k[-1]]), hi + 1
    return s2, e2, g2


def _groups(r: _Rank, rows: np.ndarray) -> list[np.ndarray]:
    """The segment's GPU rows split by stream (launch order kept)."""
    keys = r.g_key[rows]
    order = np.argsort(keys, kind="stable")
    cuts = np.nonzero(keys[order][1:] != keys[order][:-1])[0] + 1
    return np.split(order, cuts)


def _streams(
    r: _Rank, rows: np.ndarray, a: np.ndarray, stream_end: dict, g2: np.ndarray, groups: list
) -> tuple[dict, int]:
    """Start the segment's GPU rows (arrivals ``a``) on their streams, in order (prefix max)."""
    ends = dict(stream_end)
    ready = np.iinfo(np.int64).min
    for sel in groups:
        m, am, dm = rows[sel], a[sel], r.g_dur[rows[sel]]
        key = r.g_key[m[0]]
        prefix = np.concatenate([[0], np.cumsum(dm)[:-1]])
        if r.g_gap is not None:  # RowCosts.queue_aware
            prefix = prefix + np.cumsum(r.g_gap[m])
        st = prefix + np.maximum(
            np.maximum.accumulate(am - prefix), ends.get(key, np.iinfo(np.int64).min)
        )
        g2[m] = st
        ends[key] = int(st[-1] + dm[-1])
        ready = max(ready, int((st + dm).max()))
    return ends, ready


def _segment_gpu(
    r: _Rank, rows: np.ndarray, a0: np.ndarray, stream_end: dict, g2: np.ndarray
) -> tuple[dict, int]:
    """The segment's GPU rows with their cross-stream waits: iterate to a fixed point (each
    pass settles one more link of a chain of waits across streams)."""
    dep = r.g_dep[rows]
    has = dep >= 0
    groups = _groups(r, rows)
    a = a0
    d, delay = dep[has], r.g_dep_delay[rows[has]]
    for _ in range(256):
        ends, ready = _streams(r, rows, a, stream_end, g2, groups)
        if not has.any():
            break
        new = a0.copy()
        new[has] = np.maximum(a0[has], g2[d] + r.g_dur[d] + delay)
        if np.array_equal(new, a):
            break
        a = new
    return ends, ready


def _removed(frame: pl.DataFrame, rows: pl.Series, rm: pl.DataFrame, cols: list[str]) -> dict:
    """Removal columns aligned to ``rows`` (event rows of the replayed calls or GPU rows)."""
    if rm.height == 0:
        return {c: np.zeros(rows.len(), dtype=np.int64) for c in cols}
    j = pl.DataFrame({"ev_row": rows.cast(pl.Int64)}).join(rm, on="ev_row", how="left")
    return {c: j[c].fill_null(0).to_numpy() for c in cols}


def _apply_removal(r: _Rank, top: pl.DataFrame, gpu: pl.DataFrame, rm: Removal) -> _Rank:
    """The rank's replay inputs with a mechanism's measured costs taken out."""
    c = _removed(top, top["_row"], rm.calls, ["dur_ns", "gap_ns", "eps_ns", "unblock"])
    g = _removed(gpu, gpu["_row"], rm.gpu, ["dur_ns"])
    unblock = c["unblock"].astype(bool) & r.blocking & (r.own >= 0)
    d = np.maximum(r.d - c["dur_ns"], 0)
    base = np.where(r.blocking & ~unblock, np.maximum(r.base - c["dur_ns"], 0), d)
    # a blocking copy call's own time comes before its copy starts (its latency from the call's
    # start): taken out of the call, it moves the copy earlier too (real CC's staging)
    lat = r.g_lat
    still = (r.own >= 0) & r.blocking & ~unblock & (c["dur_ns"] > 0)
    if still.any():
        lat = lat.copy()
        own = r.own[still]
        lat[own] = np.maximum(lat[own] - c["dur_ns"][still], 0)
    return _Rank(
        r.s, d, np.maximum(r.gap - c["gap_ns"], 0), r.blocking & ~unblock, base,
        np.maximum(r.eps - c["eps_ns"], 0), r.own, r.pad, r.g_ci, lat, r.g_rel_start,
        np.maximum(r.g_dur - g["dur_ns"], 0), r.g_key, r.g_dep, r.g_dep_delay, r.g_gap, r.wait,
    )  # fmt: skip


def _block_events(ev: pl.DataFrame, span: tuple[int, int]) -> pl.DataFrame:
    """The events that start in ``span`` and the GPU rows their calls launched that start after
    it: where the GPU lags the host (a GPU-bound loop, the host a queue ahead) the block's last
    steps launch work that runs past its end, and a model without it holds less GPU work than
    its steps (HELD-OUT-32's ConvNeXt training: 50.4 ms a step of GPU rows inside the span for
    53.5 launched, so :func:`gpu_floor` let the treatment without its tolls come out 4.2 ms a
    step shorter than the GPU-bound baseline)."""
    inside = ev.filter(pl.col("start_ns").is_between(span[0], span[1], closed="left"))
    calls = inside.filter(
        pl.col("kind").is_in(vc.API_KINDS) & pl.col("correlation").is_not_null()
    ).select("rank", "pid", "correlation")
    late = ev.filter(
        (pl.col("start_ns") >= span[1])
        & pl.col("kind").is_in(vc.GPU_KINDS)
        & pl.col("correlation").is_not_null()
    ).join(calls.unique(), on=["rank", "pid", "correlation"], how="semi")
    return pl.concat([inside, late]) if late.height else inside


class Replayer:
    """Replays of one trace's steps with measured costs removed, the model built once.

    ``step_ns(windows, removal)`` gives every window's replayed duration; the engine calls it
    once per subset of fired mechanisms (``2^k`` replays) for the Shapley attribution.
    ``gpu_floor``: for a GPU-bound baseline, the share of its step time its GPU is busy
    (``ccdiag.shapley.gpu_busy_share``); a counterfactual's steps are then floored at their
    replayed GPU busy time over that share (:func:`gpu_floor`); 0 = no floor.
    """

    def __init__(
        self,
        trace: Trace,
        threads: pl.DataFrame,
        span: tuple[int, int] | None = None,
        gpu_floor: float = 0.0,
    ) -> None:
        ev = trace.events.with_row_index("_row")
        self.span, self.gpu_floor = span, gpu_floor
        if span is not None:  # a block of steps: the events that start in [span) ...
            ev = _block_events(ev, span)
        self.rows = ev["_row"].cast(pl.Int64)  # the rows this model holds
        top_all = _top_calls(ev, threads, merge=True)
        gpu_all = _gpu(ev, top_all)
        self.ranks: dict[int, tuple[pl.DataFrame, pl.DataFrame, _Rank]] = {}
        for rank in top_all["rank"].unique().to_list():
            top = top_all.filter(pl.col("rank") == rank)
            gpu = gpu_all.filter(pl.col("rank") == rank)
            if top.height:
                # queue-aware: a GPU row queued behind its stream keeps the gap it had after the
                # previous row (a graph's kernels run ~0.5 us apart: decode_graph's 185 gaps are
                # 87 us of its step, which a replay that packs them back to back loses)
                rc = RowCosts(queue_aware=True)
                self.ranks[rank] = (top, gpu, _prepare(top, gpu, Injection(), rc, observed=True))

    def coverage(self, removal: Removal) -> float:
        """Share of a removal's ns on rows this model replays (calls on the main threads, GPU
        rows they launched): a mechanism whose costs lie elsewhere cannot be replayed."""
        rows_c = pl.concat([top["_row"] for top, _, _ in self.ranks.values()]).cast(pl.Int64)
        rows_g = pl.concat([gpu["_row"] for _, gpu, _ in self.ranks.values()]).cast(pl.Int64)
        inside = pl.col("ev_row").is_in(self.rows.implode())
        rm = Removal(removal.calls.filter(inside), removal.gpu.filter(inside))  # in the block
        c = rm.calls.filter(pl.col("ev_row").is_in(rows_c.implode()))
        g = rm.gpu.filter(pl.col("ev_row").is_in(rows_g.implode()))
        return Removal(c, g).paid_ns() / rm.paid_ns() if rm.paid_ns() > 0 else 0.0

    def step_ns(self, windows: pl.DataFrame, removal: Removal | None = None) -> pl.DataFrame:
        """rank, step, dur_ns of each window (rank, step, start_ns, end_ns) after the replay."""
        out = []
        for rank, (top, gpu, r0) in self.ranks.items():
            r = _apply_removal(r0, top, gpu, removal) if removal is not None else r0
            s2, e2, g2 = _run(r)
            t0 = np.concatenate([r0.s, r0.s + top["dur_ns"].to_numpy()])
            t1 = np.concatenate([s2, e2])
            w = windows.filter(pl.col("rank") == rank)
            ws = _shift_map(w["start_ns"], t0, t1)
            we = _shift_map(w["end_ns"], t0, t1)
            dur = (we - ws).to_numpy().astype(np.int64)
            if removal is not None and self.gpu_floor and g2.size:
                starts = w["start_ns"].to_numpy()
                inside = (
                    np.ones(dur.size, dtype=bool)
                    if self.span is None
                    else (starts >= self.span[0]) & (starts < self.span[1])
                )
                rows = pl.DataFrame({"rank": rank, "start_ns": g2, "dur_ns": r.g_dur})
                busy = int(gp.union_ns(rows, ["rank"])["busy_ns"].sum())
                dur = gpu_floor(dur, inside, round(busy / self.gpu_floor))
            out.append(w.select("rank", "step", pl.Series("dur_ns", dur)))
        schema = {"rank": pl.Int32, "step": pl.Int32, "dur_ns": pl.Int64}
        return pl.concat(out).cast(schema) if out else pl.DataFrame(schema=schema)


def gpu_floor(dur: np.ndarray, inside: np.ndarray, busy: int) -> np.ndarray:
    """Counterfactual steps no shorter, together, than the GPU work they hold.

    For a loop whose baseline is GPU-bound (its steps as long as its GPU's busy time: the host
    ran ahead until CUDA's finite queue held it back). The model has no launch queue: with a
    blocking call taken out of such a loop (a training step that never synchronizes), the
    replayed host runs ahead of the GPU without bound and its steps come out shorter than the
    GPU's busy time, which a steady-state loop cannot be. tv_train_settled_both: baseline steps
    25.9 ms for 25.3 ms of GPU work, launches blocking with ~540 outstanding; the treatment
    replayed without its copies and tolls took 22.0 ms a step. The windows ``inside`` the
    replayed block are stretched in proportion until their sum is ``busy``; a loop that waits for
    its GPU is never below it, so this binds only where the host ran ahead.
    """
    total = int(dur[inside].sum())
    if total <= 0 or busy <= total:
        return dur
    return np.where(inside, np.round(dur * (busy / total)), dur).astype(np.int64)


def _shift_map(x: pl.Series, t0: np.ndarray, t1: np.ndarray) -> pl.Series:
    """Move times by the main thread's shift at that instant (last call boundary <= x)."""
    b = pl.DataFrame({"t": t0, "sh": t1 - t0}).sort("t")
    f = (
        pl.DataFrame({"x": x, "_i": np.arange(x.len())})
        .sort("x")
        .join_asof(b, left_on="x", right_on="t")
    )
    f = f.sort("_i").with_columns(pl.col("sh").fill_null(0))
    return f["x"] + f["sh"]


def replay(
    trace: Trace,
    injection: Injection,
    threads: pl.DataFrame | None = None,
    *,
    costs: RowCosts | None = None,
) -> Trace:
    """The trace replayed with ``injection`` applied (a new Trace; the input is unchanged).

    ``costs`` adds per-event costs on top (:class:`RowCosts`, used by ``ccdiag predict``).
    """
    ev = trace.events
    threads = threads if threads is not None else hc.main_threads(ev)
    top_all, gpu_all = _top_calls(ev, threads), None
    gpu_all = _gpu(ev, top_all)
    start = ev["start_ns"].to_numpy().copy()
    dur = ev["dur_ns"].to_numpy().copy()
    moved = np.zeros(ev.height, dtype=bool)
    steps = trace.steps
    for rank in top_all["rank"].unique().to_list():
        top = top_all.filter(pl.col("rank") == rank)
        gpu = gpu_all.filter(pl.col("rank") == rank)
        if top.height == 0:
            continue
        r = _prepare(top, gpu, injection, costs)
        s2, e2, g2 = _run(r)
        rows = top["_row"].to_numpy()
        start[rows], dur[rows], moved[rows] = s2, e2 - s2, True
        grow = gpu["_row"].to_numpy()
        start[grow], dur[grow], moved[grow] = g2, r.g_dur, True
        t0 = np.concatenate([r.s, r.s + top["dur_ns"].to_numpy()])
        t1 = np.concatenate([s2, e2])
        other = np.nonzero(~moved & (ev["rank"].to_numpy() == rank))[0]
        if other.size:
            xs = pl.Series(start[other])
            xe = pl.Series(start[other] + dur[other])
            ns, ne = _shift_map(xs, t0, t1).to_numpy(), _shift_map(xe, t0, t1).to_numpy()
            start[other], dur[other] = ns, np.maximum(ne - ns, 0)
        if steps.height:
            st = steps.filter(pl.col("rank") == rank)
            ws = _shift_map(st["start_ns"], t0, t1)
            we = _shift_map(st["end_ns"], t0, t1)
            steps = pl.concat(
                [
                    steps.filter(pl.col("rank") != rank),
                    st.with_columns(
                        ws.alias("start_ns"), we.alias("end_ns"), (we - ws).alias("dur_ns")
                    ),
                ]
            ).sort("rank", "start_ns")
    out = ev.with_columns(pl.Series("start_ns", start), pl.Series("dur_ns", dur))
    return Trace(events=out, meta=trace.meta.model_copy(), steps=steps)


def synthesize(
    baseline: Trace, injection: Injection, source: str = "synthetic", *, queue_aware: bool = False
) -> Trace:
    """A synthetic treatment: the baseline replayed with injected CC costs.

    ``queue_aware``: GPU rows queued behind their stream keep the gaps they had (the model the
    attribution replays with); by default they are packed behind their stream (another
    emulator's timeline of the same costs).
    """
    costs = RowCosts(queue_aware=True) if queue_aware else None
    t = replay(baseline, injection, costs=costs)
    return Trace(
        t.events, t.meta.model_copy(update={"source": source, "cc_mode": "synthetic"}), t.steps
    )


def model_rows(
    trace: Trace, threads: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What the replay models, for callers that build :class:`RowCosts` (``ccdiag predict``).

    Returns:
        ``(calls, gpu)``: the main threads' top-level host API calls in replay order (``_row``
        the event row, ``rank``, ``name``, ``start_ns``, ``dur_ns``, ``cls`` launch | copy |
        sync | setup | other, ``ci`` the call's index on its rank), and the GPU rows launched by
        them (``_row``, ``rank``, ``ci``, ``gclass`` kernel | collective | copy | uvm, ``hcopy``
        a host-crossing copy, ``bytes``, ``start_ns``, ``dur_ns``, ...).
    """
    ev = trace.events
    threads = threads if threads is not None else hc.main_threads(ev)
    top = _top_calls(ev, threads)
    return top, _gpu(ev, top)


def main_threads(trace: Trace) -> pl.DataFrame:
    """The host threads the replay lays on one timeline per rank (rank, pid, tid)."""
    return hc.main_threads(trace.events)
