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

from ccdiag.rules import _expr as ex
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


def _top_calls(ev: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    api = ev.with_row_index("_row").filter(pl.col("kind").is_in(ex.API_KINDS))
    api = api.join(threads, on=["rank", "pid", "tid"]).sort(
        "rank", "start_ns", pl.col("dur_ns"), descending=[False, False, True]
    )
    end = pl.col("start_ns") + pl.col("dur_ns")
    prev = end.cum_max().shift(1).over("rank")
    api = api.with_columns(
        (pl.col("start_ns") >= prev.fill_null(pl.col("start_ns"))).alias("top"),
        ex.api_class().alias("cls"),
    )
    top = api.filter(pl.col("top")).with_columns(pl.int_range(pl.len()).over("rank").alias("ci"))
    return top.select(
        "_row", "rank", "pid", "correlation", "name", "start_ns", "dur_ns", "cls", "ci"
    )


def _gpu(ev: pl.DataFrame, top: pl.DataFrame) -> pl.DataFrame:
    g = ev.with_row_index("_row").filter(
        pl.col("kind").is_in(ex.GPU_KINDS) & pl.col("correlation").is_not_null()
    )
    pageable = (pl.col("src_mem").cast(pl.String) == "pageable") | (
        pl.col("dst_mem").cast(pl.String) == "pageable"
    )
    g = g.with_columns(
        ex.gpu_class().alias("gclass"),
        ex.is_host_copy().fill_null(False).alias("hcopy"),
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
    return g.select(
        "_row",
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
    g_gap: np.ndarray | None = None  # RowCosts.queue_aware: gap after the stream's previous row


def _prepare(
    top: pl.DataFrame, gpu: pl.DataFrame, inj: Injection, rc: RowCosts | None = None
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
    sync_sem = ~top["name"].str.contains("Async").to_numpy() | (
        (own >= 0) & at_own(gpu["pageable"].to_numpy(), False)
    )
    was_blocking = (own >= 0) & sync_sem & (e >= at_own(ge, 0))
    ready = _orig_ready(n, ci, ge)
    ready_at = np.where(own >= 0, at_own(ge, 0), ready)
    sync = cls == "sync"
    blocking = sync | was_blocking | ((own >= 0) & inj.copies_blocking)
    xc = _row_costs(top, gpu, rc)
    blocking &= ~xc["free"]
    waited = blocking & (ready_at > s)
    eps = np.where(waited, np.clip(e - ready_at, 0, None), 0)
    idle = sync & ~waited
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
    queued = gs <= prev + 1000
    lat = np.where(queued & ~rel, np.minimum(lat, _lat_cap(lat, queued)), lat)
    lat = np.where(queued & rel, np.minimum(lat, top["dur_ns"].to_numpy()[ci]), lat)
    gq = _queue_gaps(s, e, ci, gs, prev, rel) if rc is not None and rc.queue_aware else None
    if gq is not None:
        lat = gq[0]
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
        None if gq is None else gq[1],
    )


def _queue_gaps(
    s: np.ndarray, e: np.ndarray, ci: np.ndarray, gs: np.ndarray, prev: np.ndarray, rel: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(latency, queue gap) per GPU row for ``RowCosts.queue_aware``.

    A row whose call came before its stream's previous row ended was waiting for the stream: its
    latency from the call is capped at the median latency of rows that were not, and the gap it
    had after the previous row is kept as a queue gap. The replay then starts it at
    ``max(call + latency, previous row's end + gap)``: the original start when nothing changes.
    """
    ref = np.where(rel, s[ci], e[ci])
    raw = (gs - ref).astype(np.int64)
    behind = (prev >= 0) & (ref < prev)
    free = raw[~behind & (raw >= 0)]
    cap = int(np.median(free)) if free.size else 5000
    lat = np.where(behind, np.clip(raw, 0, cap), raw)
    gap = np.where(behind, np.maximum(gs - prev, 0), 0).astype(np.int64)
    return lat.astype(np.int64), gap


def _orig_ready(n: int, ci: np.ndarray, ge: np.ndarray) -> np.ndarray:
    """Per call: latest end of GPU work launched by earlier calls (original times)."""
    last = np.full(n + 1, np.iinfo(np.int64).min)
    np.maximum.at(last, ci + 1, ge)
    return np.maximum.accumulate(last)[:n]


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
            for key in np.unique(r.g_key[rows]):
                m = rows[r.g_key[rows] == key]
                am = a[r.g_key[rows] == key]
                dm = r.g_dur[m]
                prefix = np.concatenate([[0], np.cumsum(dm)[:-1]])
                if r.g_gap is not None:  # RowCosts.queue_aware
                    prefix = prefix + np.cumsum(r.g_gap[m])
                st = prefix + np.maximum(
                    np.maximum.accumulate(am - prefix), stream_end.get(key, np.iinfo(np.int64).min)
                )
                g2[m] = st
                stream_end[key] = int(st[-1] + dm[-1])
                ready = max(ready, int((st + dm).max()))
        if hi < n:
            own = r.own[hi]
            ready_at = (g2[own] + r.g_dur[own]) if own >= 0 else ready
            e2[hi] = max(s2[hi] + r.base[hi], ready_at + r.eps[hi]) + r.pad[hi]
        prev_e, lo = int(e2[k[-1]]), hi + 1
    return s2, e2, g2


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
    threads = threads if threads is not None else ex.main_threads(ev)
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


def synthesize(baseline: Trace, injection: Injection, source: str = "synthetic") -> Trace:
    """A synthetic treatment: the baseline replayed with injected CC costs."""
    t = replay(baseline, injection)
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
    threads = threads if threads is not None else ex.main_threads(ev)
    top = _top_calls(ev, threads)
    return top, _gpu(ev, top)


def main_threads(trace: Trace) -> pl.DataFrame:
    """The host threads the replay lays on one timeline per rank (rank, pid, tid)."""
    return ex.main_threads(trace.events)
