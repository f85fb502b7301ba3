"""Pair a baseline trace with a treatment trace: align steps, check it is the same workload.

Rules, in order:

1. **Steps.** Each trace's step table (``Trace.steps``) gives the windows on each rank's host
   timeline. A trace without steps is one step spanning its main host thread (whole-program
   traces: research artifacts, short CUDA apps).
2. **Warm-up.** A leading step (at most the first two) is dropped from both runs when, in either
   run, it lasts more than ``warmup_factor`` (1.5) times that run's median step and the run has at
   least 4 steps. Nothing else is dropped: a slow step in the treatment may be CC's doing.
3. **Alignment.** Steps are aligned by index, per rank, after the drop; extra steps in the longer
   run are left out with a warning.
4. **Same workload.** Per aligned step, the multisets of GPU kernel names must overlap by at least
   ``min_overlap`` (80 %, median over steps), launch counts must agree within ``launch_tolerance``
   (25 %), and both runs must launch their kernels the same way (CUDA graph vs eager is a different
   workload). Kernels only the treatment runs, each starting right after a copy on its stream,
   are a copy's cost placed on the GPU (an emulator's padding kernel; real CC lengthens the copy
   itself): they and their launches are left out of the check, counted in a note. A host-only
   treatment (CC mode ``on``: no GPU events) is compared by cpu_op names
   instead. Otherwise :class:`~ccdiag.errors.PairMismatchError` (exit status 2).
5. **Noise.** Per-step delta with median, p10–p90, mean and a bootstrap 95 % CI of the median
   delta (paired steps). With fewer than 3 steps nothing can be measured: the CI assumes a 15 %
   run-to-run difference (``NOISE_ONE_STEP``, from DESIGN.md) and the report says so.
   ``significant`` only when the CI excludes 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ccdiag import parallel
from ccdiag.errors import PairMismatchError
from ccdiag.ledger import gpu as gp
from ccdiag.ledger import host as hc
from ccdiag.ledger import stats
from ccdiag.ledger import vocab as vc
from ccdiag.schema import Trace
from ccdiag.units import duration, listed
from ccdiag.verdict import Spread, StepTimes

WHOLE_TRACE = "whole trace"
#: GPU classes compared by name (copies are not: CC relabels pinned copies Device-to-Device)
KERNELS = ["kernel", "collective"]
#: A kernel starting this soon (ns) after a copy ended on its stream follows it directly.
PAD_AFTER_COPY_NS = 20_000
#: Run-to-run noise assumed for a pair of single-step (whole-program) traces, as a share of the
#: baseline: the same eager decode in two processes differed by 10-15 % per step (DESIGN.md).
NOISE_ONE_STEP = 0.15  # ccdiag.steps' marker label for traces without steps


@dataclass(frozen=True)
class PairOptions:
    """Tolerances of the workload check and the warm-up rule."""

    warmup_factor: float = 1.5
    min_overlap: float = 0.8
    launch_tolerance: float = 0.25
    graph_tolerance: float = 0.5


@dataclass(frozen=True)
class Side:
    """One run of the pair, with the frames every rule needs (computed once)."""

    trace: Trace
    windows: pl.DataFrame  # rank, step, start_ns, end_ns (kept, aligned steps only)
    threads: pl.DataFrame  # rank, pid, tid of the main host thread
    gpu: pl.DataFrame  # GPU rows with gclass and step, in kept steps
    has_gpu: bool


#: Schema of :attr:`Pair.copy_padding`.
PADDING_SCHEMA = {"rank": pl.Int32, "step": pl.Int32, "ev_row": pl.Int64, "copy_row": pl.Int64}


def _padding_rows(pad: pl.DataFrame | None = None) -> pl.DataFrame:
    """:attr:`Pair.copy_padding` of ``pad`` (rank, step, ev_row and the padded copy's
    ``copy_row`` of :func:`_copy_padding`), or none."""
    if pad is None:
        return pl.DataFrame(schema=PADDING_SCHEMA)
    return pad.select(list(PADDING_SCHEMA)).cast(PADDING_SCHEMA)


@dataclass(frozen=True)
class Pair:
    """Two aligned runs of the same workload."""

    baseline: Side
    treatment: Side
    aligned: pl.DataFrame  # rank, idx, b_step, t_step, b_ns, t_ns, delta_ns
    mode: str  # "gpu" | "host_only"
    op_mode: bool  # host-only and no CUDA API rows either: the ledger is built from cpu_ops
    whole_program: bool
    step_times: StepTimes
    dropped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The treatment's GPU rows that are a copy's cost placed on the GPU (an emulator's padding
    #: kernel right after a copy on its stream, a name the baseline never runs): rank, step,
    #: ev_row. Left out of the same-workload check; CP01 takes them out with the copy's cost.
    copy_padding: pl.DataFrame = field(default_factory=_padding_rows)
    #: Frames derived from the pair, built once and shared by whoever needs them (the rules'
    #: ``RuleContext``: the engine, the evidence series, the timeline, annotate).
    derived: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)


def _has_gpu(t: Trace) -> bool:
    kinds = t.events["kind"].unique().cast(pl.String).to_list()  # the few kinds, then names
    return not t.meta.host_only and any(k in kinds for k in ("kernel", "memcpy", "collective"))


def _windows(t: Trace, threads: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """Step windows (rank, step, start_ns, end_ns); whole-program when the trace has none."""
    whole = t.meta.step_marker == WHOLE_TRACE or t.meta.extra.get("steps_from") == WHOLE_TRACE
    if t.steps.height and not whole and not (t.steps["name"] == WHOLE_TRACE).all():
        return t.steps.select("rank", "step", "start_ns", "end_ns").sort("rank", "start_ns"), False
    host = hc.on_threads(t.events, threads)
    w = host.group_by("rank").agg(
        pl.col("start_ns").min(), (pl.col("start_ns") + pl.col("dur_ns")).max().alias("end_ns")
    )
    return w.with_columns(pl.lit(0, dtype=pl.Int32).alias("step")).select(
        "rank", "step", "start_ns", "end_ns"
    ), True


def _warmup_drop(wb: pl.DataFrame, wt: pl.DataFrame, factor: float) -> tuple[int, list[str]]:
    """How many leading steps to drop (same number in both runs), with the reasons."""
    drop, why = 0, []
    for w, side in ((wb, "baseline"), (wt, "treatment")):
        if w.is_empty():  # no step window on this side (the caller says so); no warm-up
            continue
        d = w.filter(pl.col("rank") == w["rank"].min())
        durs = (d["end_ns"] - d["start_ns"]).to_numpy()
        if durs.size < 4:
            continue
        med = float(np.median(durs))
        k = 0
        while k < 2 and durs[k] > factor * med:
            k += 1
        if k:
            why.append(
                f"{side}: first {k} step(s) dropped as warm-up "
                f"({durs[0] / 1e6:.3f} ms vs median {med / 1e6:.3f} ms, rule: > {factor}x median)"
            )
        drop = max(drop, k)
    return drop, why


def _index(w: pl.DataFrame, drop: int) -> pl.DataFrame:
    w = w.sort("rank", "start_ns").with_columns(pl.int_range(pl.len()).over("rank").alias("idx"))
    return w.filter(pl.col("idx") >= drop).with_columns(pl.col("idx") - drop)


def _align(wb: pl.DataFrame, wt: pl.DataFrame, opts: PairOptions) -> tuple[pl.DataFrame, list[str]]:
    drop, notes = _warmup_drop(wb, wt, opts.warmup_factor)
    b, t = _index(wb, drop), _index(wt, drop)
    dur = pl.col("end_ns") - pl.col("start_ns")
    a = b.select("rank", "idx", pl.col("step").alias("b_step"), dur.alias("b_ns")).join(
        t.select("rank", "idx", pl.col("step").alias("t_step"), dur.alias("t_ns")),
        on=["rank", "idx"],
    )
    if a.height < max(b.height, t.height):
        notes.append(
            f"step counts differ (baseline {b.height}, treatment {t.height} after warm-up): "
            f"the first {a.height} aligned steps are compared"
        )
    return a.with_columns((pl.col("t_ns") - pl.col("b_ns")).alias("delta_ns")).sort(
        "rank", "idx"
    ), notes


def _counts(rows: pl.DataFrame, step_col: str, key: str) -> pl.DataFrame:
    return rows.group_by("rank", step_col, key).len("n").rename({step_col: "_s"})


def _overlap(cb: pl.DataFrame, ct: pl.DataFrame, aligned: pl.DataFrame, key: str) -> float:
    """Median over aligned steps of Σ min(count) / max(Σ counts) of the name multisets."""
    b = aligned.select("rank", "idx", pl.col("b_step").alias("_s")).join(cb, on=["rank", "_s"])
    t = aligned.select("rank", "idx", pl.col("t_step").alias("_s")).join(ct, on=["rank", "_s"])
    j = b.drop("_s").join(t.drop("_s"), on=["rank", "idx", key], how="full", coalesce=True)
    j = j.with_columns(pl.col("n").fill_null(0), pl.col("n_right").fill_null(0))
    per = j.group_by("rank", "idx").agg(
        pl.min_horizontal("n", "n_right").sum().alias("common"),
        pl.col("n").sum().alias("nb"),
        pl.col("n_right").sum().alias("nt"),
    )
    per = per.with_columns((pl.col("common") / pl.max_horizontal("nb", "nt", 1)).alias("ov"))
    return vc.num(per["ov"].median(), 1.0) if per.height else 1.0


def _launch_stats(side: Trace, threads: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    ev = side.events
    keep = ev.select(pl.col("kind").is_in(vc.API_KINDS)).to_series()
    names = vc.event_names(ev)
    api = ev.select("rank", "pid", "tid", "name", "start_ns").filter(keep)
    api = hc.on_threads(api.with_columns(names.keep(keep).code.alias("_nc")), threads)
    flags = {"_kl": vc.is_kernel_launch(), "_graph": vc.base_name().str.contains("GraphLaunch")}
    # the codes of the rows on_threads kept (it filters; the column travelled with them)
    codes = vc.Codes(api.get_column("_nc"), names.values)
    api = vc.per_value(api.select("rank", "name", "start_ns"), "name", flags, codes)
    api = hc.assign_window(api.filter(pl.col("_kl")).select("rank", "_graph", "start_ns"), windows)
    return api.group_by("rank", "step").agg(
        pl.len().alias("launches"), pl.col("_graph").sum().alias("graphs")
    )


def _copy_padding(t: Side, kern_t: pl.DataFrame, only_t: pl.Series) -> pl.DataFrame:
    """The treatment's kernels that are a copy's cost placed on the GPU (an emulator's padding
    kernel; real CC makes the copy itself longer): a name the baseline never runs, starting on a
    stream within ``PAD_AFTER_COPY_NS`` of a copy's end there. Their rank, step and ev_row, and
    the padded copy's ev_row (``copy_row``)."""
    only = kern_t.select("ev_row").filter(only_t)
    if only.height == 0:  # every kernel name also runs in the baseline (real CC): no sort
        return _padding_rows()
    lane = ("rank", "device", "stream")
    rows = t.gpu.select(*lane, "step", "ev_row", "gclass", "start_ns", "dur_ns").sort(
        *lane, "start_ns"
    )
    end = pl.col("start_ns") + pl.col("dur_ns")
    after_copy = (pl.col("gclass").shift(1).over(lane) == "copy") & (
        pl.col("start_ns") - end.shift(1).over(lane) <= PAD_AFTER_COPY_NS
    )
    copy_row = pl.col("ev_row").shift(1).over(lane).alias("copy_row")
    cand = (
        rows.with_columns(copy_row).filter(after_copy).select("rank", "step", "ev_row", "copy_row")
    )
    return cand.join(only, on="ev_row", how="semi")


def _check_gpu_workload(
    b: Side, t: Side, aligned: pl.DataFrame, opts: PairOptions
) -> tuple[list[str], pl.DataFrame]:
    """The same-workload check of a pair with GPU rows (raises :class:`PairMismatchError`):
    its notes, and the treatment's copy padding rows (:func:`_copy_padding`)."""
    # the kernels' names as integers the two runs share (their events' codes, not hashed again)
    kern = [
        s.gpu.select("rank", "step", "ev_row").filter(s.gpu["gclass"].is_in(KERNELS))
        for s in (b, t)
    ]
    names = (
        vc.event_names(s.trace.events).at(k.get_column("ev_row")) for s, k in zip((b, t), kern)
    )
    cb, ct = vc.joint_codes(*names)
    pad = _copy_padding(t, kern[1], ~ct.is_in(cb.unique()).fill_null(False))
    notes = []
    per = pad.group_by("rank", "step").len("_p")  # padding kernels (and launches) per step
    if pad.height:  # left out of the check, counted and said
        keep = ~kern[1].get_column("ev_row").is_in(pad.get_column("ev_row"))
        kern[1], ct = kern[1].filter(keep), ct.filter(keep)
        notes.append(
            f"{pad.height} kernels of the treatment ({vc.num(per['_p'].median()):.0f} a step) "
            "that the baseline never runs start right after a copy on its stream: read as the "
            "copy's cost placed on the GPU (an emulator's padding kernel), left out of the "
            "same-workload check"
        )
    kb, kt = (
        _counts(k.select("rank", "step", c.alias("name")), "step", "name")
        for k, c in zip(kern, (cb, ct))
    )
    lb = _launch_stats(b.trace, b.threads, b.windows)
    lt = _launch_stats(t.trace, t.threads, t.windows)
    if pad.height:  # each padding kernel came with a launch of its own
        lt = lt.join(per, on=["rank", "step"], how="left")
        lt = lt.with_columns(pl.col("launches") - pl.col("_p").fill_null(0)).drop("_p")
    j = (
        aligned.join(lb, left_on=["rank", "b_step"], right_on=["rank", "step"], how="left")
        .join(lt, left_on=["rank", "t_step"], right_on=["rank", "step"], how="left", suffix="_t")
        .fill_null(0)
    )
    gb = vc.num((j["graphs"] > 0).mean())
    gt = vc.num((j["graphs_t"] > 0).mean())
    where = t.trace.meta.source
    if abs(gb - gt) > opts.graph_tolerance:
        modes = {True: "CUDA graphs", False: "eager launches"}
        raise PairMismatchError(
            where,
            f"not the same workload: baseline uses {modes[gb > 0.5]}, treatment uses "
            f"{modes[gt > 0.5]} (a CUDA-graph vs eager pair is a different workload; capture both "
            "runs in the same mode)",
        )
    nb, nt = vc.num(j["launches"].median()), vc.num(j["launches_t"].median())
    if max(nb, nt) > 0 and abs(nt - nb) / max(nb, 1.0) > opts.launch_tolerance:
        raise PairMismatchError(
            where,
            f"not the same workload: {nb:.0f} kernel launches per step in the baseline vs "
            f"{nt:.0f} in the treatment (tolerance {opts.launch_tolerance:.0%})",
        )
    ov = _overlap(kb, kt, aligned, "name")
    if kb.height and kt.height and ov < opts.min_overlap:
        raise PairMismatchError(
            where,
            f"not the same workload: only {ov:.0%} of the GPU kernels per step have the same "
            f"names in both runs (need {opts.min_overlap:.0%}); check --step and the traces",
        )
    return notes, _padding_rows(pad)


def _duration_ratio(b: pl.DataFrame, t: pl.DataFrame) -> float | None:
    """Median over names common to both runs of (treatment median / baseline median duration).
    ``name``: codes the two runs share (:func:`ccdiag.ledger.vocab.joint_codes`)."""
    mb = b.group_by("name").agg(pl.col("dur_ns").median().alias("b"))
    mt = t.group_by("name").agg(pl.col("dur_ns").median().alias("t"))
    j = mb.join(mt, on="name").filter((pl.col("b") > 0) & (pl.col("t") > 0))
    if j.height == 0:
        return None
    return vc.num((j["t"] / j["b"]).median())


def _check_time_units(b: Trace, t: Trace) -> None:
    """Refuse a pair whose clocks disagree by ~1000x (a trace written in ns read as µs).

    CC makes API calls 2-4x slower and UVM faults can stretch kernels ~250x, but not every kernel
    *and* every API call by three orders of magnitude; that is a unit mismatch.
    """
    ratios = []
    evs = (b.events, t.events)
    parallel.both(lambda: vc.event_names(evs[0]), lambda: vc.event_names(evs[1]))  # made once
    for kinds in (["kernel", "collective"], ["runtime", "driver"], ["cpu_op"]):
        keep = [e.select(pl.col("kind").is_in(kinds)).to_series() for e in evs]
        names = vc.joint_codes(*(vc.event_names(e).keep(k) for e, k in zip(evs, keep)))
        rows_b, rows_t = (
            e.select("dur_ns").filter(k).with_columns(c.alias("name"))
            for e, k, c in zip(evs, keep, names)
        )
        r = _duration_ratio(rows_b, rows_t)
        if r is not None:
            ratios.append(r)
    if ratios and (all(r >= 300 for r in ratios) or all(r <= 1 / 300 for r in ratios)):
        k = sorted(ratios)[len(ratios) // 2]
        raise PairMismatchError(
            t.meta.source,
            f"time units differ: the same kernels and calls last {k:,.3g}x as long as in the "
            "baseline (a trace written in ns read as µs, or the reverse?); re-export both traces "
            "with the same profiler settings",
        )


def _check_op_workload(b: Side, t: Side, aligned: pl.DataFrame, opts: PairOptions) -> None:
    def ops(s: Side) -> pl.DataFrame:
        rows = hc.on_threads(s.trace.events.filter(pl.col("kind") == "cpu_op"), s.threads)
        return _counts(
            hc.assign_window(rows.select("rank", "name", "start_ns"), s.windows), "step", "name"
        )

    ov = _overlap(*vc.shared_codes(ops(b), ops(t)), aligned, "name")
    if ov < opts.min_overlap:
        raise PairMismatchError(
            t.trace.meta.source,
            f"not the same workload: only {ov:.0%} of the cpu_ops per step match the baseline's "
            f"(need {opts.min_overlap:.0%}; host-only treatment compared by op names)",
        )


def spread(x: np.ndarray, ci: tuple[int, int] | None = None) -> Spread:
    """Median, p10, p90, mean and a 95 % CI of the median of per-step values (ns)."""
    if x.size == 0:
        return Spread(median=0, p10=0, p90=0, mean=0, ci95_low=0, ci95_high=0, n=0)
    lo, hi = ci if ci is not None else stats.bootstrap_median_ci(x)
    return Spread(
        median=int(np.median(x)),
        p10=int(np.percentile(x, 10)),
        p90=int(np.percentile(x, 90)),
        mean=int(np.mean(x)),
        ci95_low=lo,
        ci95_high=hi,
        n=int(x.size),
    )


def _step_times(b: Side, t: Side, aligned: pl.DataFrame) -> StepTimes:
    bn, tn, dn = (aligned[c].to_numpy().astype(np.int64) for c in ("b_ns", "t_ns", "delta_ns"))
    # the three bootstraps from one draw of the resamples (the same CIs as one at a time)
    ci_d, ci_b, ci_t = stats.bootstrap_median_cis([dn, bn, tn])
    spread_b, spread_t = spread(bn, ci_b), spread(tn, ci_t)
    if dn.size >= 3:
        ci = ci_d
        method = f"bootstrap of the median over {dn.size} paired steps (2000 resamples)"
    else:
        med = int(np.median(dn)) if dn.size else 0
        noise = int(NOISE_ONE_STEP * float(np.median(bn))) if bn.size else 0
        ci = (med - noise, med + noise)
        method = (
            f"only {dn.size} step(s): no spread can be measured; the CI assumes the "
            f"{NOISE_ONE_STEP:.0%} run-to-run difference seen between two processes of the same "
            "workload; repeat the runs for a real one"
        )
    med_b, med_t = int(np.median(bn)) if bn.size else 0, int(np.median(tn)) if tn.size else 0
    return StepTimes(
        baseline=med_b,
        treatment=med_t,
        delta=int(np.median(dn)) if dn.size else 0,
        ratio=round(med_t / med_b, 4) if med_b else 0.0,
        baseline_spread=spread_b,
        treatment_spread=spread_t,
        delta_ci95=ci,
        significant=bool(ci[0] > 0 or ci[1] < 0),
        delta_spread=spread(dn, ci),
        n_steps=int(dn.size),
        noise_method=method,
    )


def _beside(
    roles: list[pl.DataFrame],
) -> tuple[frozenset[tuple[int, int]], list[str]]:
    """The (rank, ordinal) of the threads that run beside the first one in either run (``roles``:
    :func:`ccdiag.ledger.host.thread_roles` of the two runs): left off the main-thread timeline
    in both runs (the same program's threads, matched by rank and ordinal), with a note."""
    beside = hc.beside_of(*roles)
    if not beside:
        return beside, []
    tids = sorted(
        {str(tid) for x in roles for r, o, tid in x.select("rank", "ordinal", "tid").iter_rows()
         if (r, o) in beside}
    )  # fmt: skip
    note = (
        f"{len(beside)} host thread(s) with CUDA calls run beside the main thread (their calls "
        f"overlap its calls in time, or they launch no kernel: tid {', '.join(tids[:4])}): left "
        "off the main-thread timeline, so their copies and waits are not read as the step's (a "
        "drain worker's readback, say); a wait between the threads that no CUDA call shows is "
        "not modelled"
    )
    return beside, [note]


def _copies_off_main(b: Side, t: Side) -> list[str]:
    """A note when copies run on threads off the main threads' timeline: no mechanism is
    measured from them, and the user should know they are there (a drain worker's readbacks,
    a loader's copies: HELD-OUT-26's eager drain loop, whose worker's copies the truth gives
    602 µs a step)."""
    per = {}
    for name, s in (("baseline", b), ("treatment", t)):
        c = hc.copies_off_main(s.trace.events, s.threads, s.windows)
        steps = max(s.windows.height, 1)
        per[name] = (int(c["calls"].sum()) / steps, int(c["ns"].sum()) / steps, c["tid"].to_list())
    if not per["treatment"][0] and not per["baseline"][0]:
        return []
    (nb, tb, _), (nt, tt, tids) = per["baseline"], per["treatment"]
    return [
        f"copies off the main threads' timeline (tid {', '.join(map(str, tids[:4])) or '-'}): "
        f"{nb:.1f} -> {nt:.1f} calls a step, {duration(tb)} -> {duration(tt)} a step inside "
        "them; no mechanism is measured from them, and their cost reaches the step only through "
        "the main thread's waits for that thread (unattributed where it does)"
    ]


def _side(
    t: Trace,
    host_only: bool,
    op_mode: bool,
    beside: frozenset[tuple[int, int]],
    roles: pl.DataFrame,
) -> tuple[Side, bool]:
    threads = hc.main_threads(t.events, host_only=op_mode, beside=beside, roles=roles)
    if threads.height == 0:
        raise PairMismatchError(t.meta.source, "no host thread with CUDA API calls or cpu_ops")
    windows, whole = _windows(t, threads)
    gpu = gp.gpu_rows(t.events, windows) if not host_only else t.events.clear()
    return Side(t, windows, threads, gpu, _has_gpu(t)), whole


def _keep(s: Side, steps: pl.Series) -> Side:
    w = s.windows.filter(pl.col("step").is_in(steps.implode()))
    g = s.gpu.filter(pl.col("step").is_in(steps.implode())) if s.gpu.height else s.gpu
    return Side(s.trace, w, s.threads, g, s.has_gpu)


def _warn_meta(b: Trace, t: Trace) -> list[str]:
    out = []
    if b.meta.gpu and t.meta.gpu and b.meta.gpu != t.meta.gpu:
        out.append(
            f"different GPU models ({b.meta.gpu} vs {t.meta.gpu}): per-launch and per-byte "
            "costs include the hardware difference, not only CC"
        )
    if b.meta.profiler != t.meta.profiler:
        out.append(
            f"different profilers ({b.meta.profiler} vs {t.meta.profiler}): profiler overhead "
            "per launch differs and lands in the delta"
        )
    return out


def _why_unaligned(wb: pl.DataFrame, wt: pl.DataFrame) -> str:
    """Why no step of the two runs could be aligned, in a line for the user."""
    if wt.height == 0:
        return "no steps in the treatment to align with the baseline's"
    if wb.height == 0:
        return "no steps in the baseline to align with the treatment's"
    rb, rt = (sorted(w["rank"].unique().to_list()) for w in (wb, wt))
    if not set(rb) & set(rt):
        return (
            f"no steps to align with the baseline: its steps are on rank {listed(rb, 8)}, the "
            f"treatment's on rank {listed(rt, 8)} (each rank is compared with the same rank of the "
            "other run: give both runs' traces of the same rank)"
        )
    return "no steps to align with the baseline once the warm-up steps are left out"


def pair_traces(baseline: Trace, treatment: Trace, options: PairOptions | None = None) -> Pair:
    """Align two traces step by step and check they are the same workload.

    Args:
        baseline: the CC-off run.
        treatment: the CC-on run.
        options: tolerances (defaults documented in the module docstring).

    Returns:
        The aligned pair.

    Raises:
        PairMismatchError: the two traces are not the same workload.
    """
    opts = options or PairOptions()
    _check_time_units(baseline, treatment)
    t_gpu = _has_gpu(treatment)
    host_only = not t_gpu
    kinds = set(treatment.events["kind"].unique().cast(pl.String).to_list())
    op_mode = host_only and not kinds & {"runtime", "driver"}
    # each run's threads, sides and checks: the baseline's beside the treatment's
    # (ccdiag.parallel; an error is the baseline's first, as one after the other)
    roles = list(
        parallel.both(
            lambda: hc.thread_roles(baseline.events, host_only=op_mode),
            lambda: hc.thread_roles(treatment.events, host_only=op_mode),
        )
    )
    beside, beside_notes = _beside(roles)
    (b, whole_b), (t, whole_t) = parallel.both(
        lambda: _side(baseline, host_only, op_mode, beside, roles[0]),
        lambda: _side(treatment, host_only, op_mode, beside, roles[1]),
    )
    aligned, notes = _align(b.windows, t.windows, opts)
    notes += beside_notes
    if aligned.height == 0:
        raise PairMismatchError(treatment.meta.source, _why_unaligned(b.windows, t.windows))
    b, t = _keep(b, aligned["b_step"]), _keep(t, aligned["t_step"])
    notes += _copies_off_main(b, t)
    pad = _padding_rows()
    if host_only:
        _check_op_workload(b, t, aligned, opts)
    else:
        more, pad = _check_gpu_workload(b, t, aligned, opts)
        notes += more
    warnings = _warn_meta(baseline, treatment)
    if host_only:
        warnings.append(
            "treatment has no GPU activity (CC mode 'on' blocks profiling): diagnosis from "
            "host-side evidence only, with low confidence; re-capture the treatment in CC "
            "'devtools' mode"
        )
    return Pair(
        baseline=b,
        treatment=t,
        aligned=aligned,
        mode="host_only" if host_only else "gpu",
        op_mode=op_mode,
        whole_program=whole_b or whole_t,
        step_times=_step_times(b, t, aligned),
        dropped=[n for n in notes if "dropped" in n],
        warnings=warnings,
        notes=[n for n in notes if "dropped" not in n],
        copy_padding=pad,
    )
