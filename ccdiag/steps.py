"""Step windows, and the ``step`` of every event.

A step is one iteration of the workload's loop (a training step, one decode step). Windows are
found on each rank's host timeline, from the first source that exists:

1. ``marker`` (the CLI's ``--step NAME``): host annotations named ``NAME`` or ``NAME#<n>``
   (so ``--step ProfilerStep`` matches ``ProfilerStep#12``);
2. ``ProfilerStep#N`` annotations (``torch.profiler.schedule``);
3. a repeating annotation or NVTX range: among top-level host annotations (not inside another
   annotation on the same thread) whose name occurs at least twice on a rank, the one covering
   the most time (``decode_step``, ``train_step`` ...). Record_functions the framework emits
   itself are never steps (:data:`FRAMEWORK_ANNOTATIONS`: the DataLoader's
   ``enumerate(DataLoader)#..._DataLoaderIter.__next__`` fetch windows, ``Optimizer.step#...``,
   ``aten::``, ``nccl:``, CUDA API names, profiler internals ...);
4. the loop's period (:func:`loop_anchor`): on the main host thread (the thread with the most
   DataLoader fetch / optimizer annotations, else the most top-level cpu_ops and annotations),
   the sequence of top-level host events repeats once per
   iteration. An *anchor* is a name that occurs once per iteration: the sequences between its
   consecutive occurrences are the same multiset of names (at least 60 % of them exactly, and the
   typical one holds >= 90 % of the names that recur; an iteration is at least 4 top-level events
   of 3 names, and it holds a readback, sync, backward or optimizer op (:data:`BOUNDARY_OPS`:
   the layers of one forward pass are not a loop), and the iterations hold at least half the
   main thread's top-level events), and no finer anchor passes. The DataLoader
   fetch, then ``Optimizer.zero_grad``, then ``Optimizer.step`` are tried first (a training
   iteration starts with its fetch); otherwise the anchor that passes with the most occurrences,
   the earliest in the iteration. A step runs from one occurrence's start to the next one's
   (the last occurrence: to the end of its iteration when that iteration is complete);
5. otherwise one step spanning the whole trace (whole-program traces, short CUDA apps), said
   plainly. A trace whose host side is CUDA API calls only (nsys without NVTX) is not searched
   for a period: a whole-program CUDA app's setup and teardown are part of its run.

``meta.extra["steps_from"]`` names the source and ``meta.extra["steps_why"]`` says, in a
sentence, why that marker was used (``ccdiag summary`` shows both).

Windows are numbered 0, 1, ... in time order on each rank. Events get their step:

- host events (no device): the window on their rank that contains their start (any thread of
  the rank's process);
- GPU events (kernels, copies, memsets, collectives, GPU-side syncs and annotations): the step
  of the API call that launched them (same rank, pid and correlation id), so a kernel that runs
  after its step's host window still counts for the step that launched it; GPU events without a
  launcher: by their start time.

Events outside every window keep a null step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ccdiag.errors import InputError
from ccdiag.frame import align_chunks, like_chunks
from ccdiag.schema import STEP_COLUMNS, Trace
from ccdiag.units import listed

PROFILER_STEP = "ProfilerStep"
WHOLE_TRACE = "whole trace"
LOOP = "repeating op sequence"
_HOST_ANN = (pl.col("kind") == "annotation") & pl.col("device").is_null()
_HOST_SEQ = pl.col("kind").is_in(["cpu_op", "annotation"]) & pl.col("device").is_null()

#: Record_functions / NVTX ranges the framework emits itself (regular expressions, searched in
#: the name): never a step, whatever their count. The DataLoader fetch wraps only ``__next__``
#: (~56 us), the optimizer annotations only the update.
FRAMEWORK_ANNOTATIONS: tuple[str, ...] = (
    r"^enumerate\(DataLoader\)#",
    r"DataLoaderIter\.__next__",
    r"^Optimizer\.",
    r"^aten::",
    r"^prim::",
    r"^c10d::",
    r"^nccl:",
    r"^nccl[A-Z]",
    r"^record_param_comms",
    r"^cuda[A-Z]",
    r"^cu[A-Z][a-z]",
    r"^autograd::",
    r"^torch::autograd",
    r"^AccumulateGrad",
    r"Backward\d*$",
    r"^PyTorch Profiler",
    r"^profiler::",
    r"^\[memory\]",
    r"^Activity Buffer",
    r"^DistributedDataParallel\.",
    r"^FullyShardedDataParallel",
    r"^FSDP::",
    r"^## Call CompiledFxGraph",
    r"^Torch-Compiled Region",
    r"^CompiledFunction",
    r"^TorchDynamo",
    r"^torch/",
    r"^<built-in",
)
_FRAMEWORK_RE = "|".join(f"(?:{p})" for p in FRAMEWORK_ANNOTATIONS)
#: Anchors tried first, in order: a training iteration starts with its fetch.
PREFERRED_ANCHORS: tuple[str, ...] = (
    r"^enumerate\(DataLoader\)#",
    r"^Optimizer\.zero_grad#",
    r"^Optimizer\.step#",
)
#: Share of iterations whose op sequence must be exactly the typical one, and the share of the
#: recurring names the typical iteration must hold, for a name to count as once per iteration.
MIN_AGREE = 0.6
MIN_COVER = 0.9
#: An iteration holds at least this many top-level events of this many names: a loop of two
#: ops (a copy micro-benchmark) is a whole program, not a workload's iteration.
MIN_PERIOD = 4
MIN_NAMES = 3
#: The iterations found must hold at least this share of the main thread's top-level events.
MIN_SPAN = 0.5
#: Outside the preferred anchors, an iteration must hold one of these: an end-of-iteration
#: readback or sync, a backward or optimizer op, a fetch. Without it a run of identical blocks
#: (the layers of one forward pass) would look like a loop.
BOUNDARY_OPS = (
    r"^aten::(item|_local_scalar_dense|equal|is_nonzero|nonzero|tolist)$|Synchronize|^cuda.*Sync"
    r"|^Optimizer\.|evaluate_function|Backward|backward|^enumerate\(DataLoader\)#|^optimizer"
)
#: Names checked as anchors at most (most frequent first): bounds the search on huge traces.
MAX_CANDIDATES = 96


def is_framework(name: pl.Expr) -> pl.Expr:
    """A record_function / range the framework emits itself (:data:`FRAMEWORK_ANNOTATIONS`)."""
    return name.str.contains(_FRAMEWORK_RE)


def assign_steps(trace: Trace, marker: str | None = None) -> Trace:
    """Find the step windows of a trace and fill its ``step`` column.

    Args:
        trace: a parsed trace (any format).
        marker: name of the step annotation / NVTX range; detected when None.

    Returns:
        A new trace with ``events.step``, ``steps`` and ``meta.step_marker`` filled, and
        ``meta.extra`` ``steps_from`` / ``steps_why`` saying where the steps came from.

    Raises:
        InputError: ``marker`` was given and no annotation of that name exists.
    """
    events = align_chunks(trace.events)  # misaligned chunks: every filter copies the frame
    ann = events.filter(_HOST_ANN).select("rank", "pid", "tid", "name", "start_ns", "dur_ns")
    label: str | None
    windows: pl.DataFrame | None
    if marker is not None:
        instances = ann.filter(_matches(marker))
        if instances.is_empty():
            raise InputError(trace.meta.source, _not_found(marker, ann))
        label, source = marker, "--step"
        why = f"asked for with --step ({instances.height} instances)"
        windows = _windows(instances, events)
    else:
        label, source, instances, why = _detect(ann)
        windows = _windows(instances, events) if label is not None else None
        if label is None:
            loop = loop_anchor(events)
            if loop is not None:
                label, source, why = loop.name, LOOP, loop.why
                windows = _conform(_fill_ranks(loop.windows, events))
        if windows is None:
            why = why or _whole_why(events)
            windows = _whole(events)
    stepped = _assign(events, windows)
    extra = {**trace.meta.extra, "steps_from": source, "steps_why": why}
    meta = trace.meta.model_copy(update={"step_marker": label, "extra": extra})
    return replace(trace, events=stepped, steps=windows, meta=meta)


def _whole_why(events: pl.DataFrame) -> str:
    host = events.filter(_HOST_SEQ)
    if host.is_empty():
        return (
            "no step marker (no ProfilerStep#N, no repeating annotation) and no cpu_ops to find "
            "the loop in: the whole trace is one step"
        )
    return (
        "no step marker (no ProfilerStep#N, no repeating user annotation) and no name that "
        "occurs once per iteration of a repeating top-level op sequence: the whole trace is "
        "one step"
    )


def _matches(marker: str) -> pl.Expr:
    """Annotation named ``marker`` or ``marker#<n>`` (``ProfilerStep`` -> ``ProfilerStep#7``)."""
    base = marker[:-1] if marker.endswith("#") else marker
    pattern = rf"^{re.escape(base)}#\d+$"
    return (pl.col("name") == marker) | pl.col("name").str.contains(pattern)


def _not_found(marker: str, ann: pl.DataFrame) -> str:
    common = ann["name"].value_counts(sort=True).head(5)["name"].to_list()
    seen = ", ".join(repr(n) for n in common) if common else "none"
    return f"step marker {marker!r} not found (most frequent annotations: {seen})"


def _detect(ann: pl.DataFrame) -> tuple[str | None, str, pl.DataFrame, str]:
    """(marker, how it was found, its instances, why); marker None: no annotation to use."""
    prof = ann.filter(pl.col("name").str.contains(rf"^{PROFILER_STEP}#\d+$"))
    if not prof.is_empty():
        why = f"torch.profiler schedule steps ({prof.height} ProfilerStep#N annotations)"
        return PROFILER_STEP, "ProfilerStep#N", prof, why
    user = ann.filter(~is_framework(pl.col("name")))
    top = _top_level(user)
    ranked = (
        top.group_by("rank", "name")
        .agg(pl.len().alias("n"), pl.col("dur_ns").sum().alias("covered"))
        .filter(pl.col("n") >= 2)
        .group_by("name")
        .agg(pl.col("n").sum(), pl.col("covered").sum())
        .sort(["covered", "n", "name"], descending=[True, True, False])
    )
    if ranked.is_empty():
        return None, WHOLE_TRACE, ann.clear(), ""
    name, n = ranked["name"][0], int(ranked["n"][0])
    skipped = ann.filter(is_framework(pl.col("name")))["name"].unique().sort().to_list()
    why = f"the top-level user annotation covering the most time ({n} instances)"
    if skipped:
        why += (
            "; framework record_functions are never steps ("
            + listed([repr(n[:60]) for n in skipped])
            + ")"
        )
    return name, "repeating annotation", top.filter(pl.col("name") == name), why


def _top_level(ann: pl.DataFrame) -> pl.DataFrame:
    """Annotations not contained in an earlier-starting annotation on the same thread."""
    end = pl.col("start_ns") + pl.col("dur_ns")
    return (
        ann.with_columns(end.alias("_end"))
        .sort(
            ["rank", "pid", "tid", "start_ns", "_end"],
            descending=[False, False, False, False, True],
        )
        .with_columns(
            pl.col("_end").cum_max().shift(1).over(["rank", "pid", "tid"]).alias("_outer_end")
        )
        .filter(pl.col("_outer_end").is_null() | (pl.col("_end") > pl.col("_outer_end")))
        .drop("_end", "_outer_end")
    )


# --------------------------------------------------------------------------- loop period


@dataclass(frozen=True)
class Loop:
    """Steps found from the period of the main thread's top-level host events."""

    name: str  # the anchor: a name that occurs once per iteration
    windows: pl.DataFrame  # rank, step, name, start_ns, end_ns, dur_ns
    why: str


def loop_anchor(events: pl.DataFrame) -> Loop | None:
    """The loop's iterations from the repeating top-level op sequence (rule 4 of the module
    docstring), or None when no name occurs once per iteration.

    The anchor is searched on the lowest rank; every rank gets windows from the same name on its
    own main thread.
    """
    host = events.filter(_HOST_SEQ).select("rank", "pid", "tid", "name", "start_ns", "dur_ns")
    if host.height < 6:
        return None
    seqs = _main_sequences(host)
    if not seqs:  # no name occurs twice on any thread
        return None
    ranks = sorted(seqs)
    first = seqs[ranks[0]]
    found = _find_anchor(first)
    if found is None:
        return None
    name, stats = found
    frames = [_anchor_windows(seqs[r], name, r) for r in ranks]
    windows = pl.concat([f for f in frames if f.height]) if any(f.height for f in frames) else None
    if windows is None or windows.is_empty():
        return None
    why = (
        f"no step marker: {name!r} occurs once per iteration of the main thread's repeating "
        f"top-level op sequence ({stats['agree']} of {stats['segments']} iterations the same "
        f"{stats['period']} top-level events); a step runs from one occurrence to the next"
    )
    return Loop(name, windows, why)


def _main_sequences(host: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Per rank: the main thread's top-level host events in time order (name, start_ns, end_ns).

    The main thread is the one with the most DataLoader fetch / optimizer annotations (the
    training loop's Python thread, not the autograd thread with more ops), else the one with
    the most top-level events.

    Names that occur once on a thread (an outer ``record_function`` around the whole loop, setup
    ops) are left out before the top level is taken, so a wrapper does not hide the loop.
    """
    keys = ["rank", "pid", "tid"]
    rep = host.filter(pl.len().over([*keys, "name"]) >= 2)
    top = _top_level(rep)
    preferred = pl.col("name").str.contains("|".join(PREFERRED_ANCHORS))
    counts = (
        top.group_by(keys)
        .agg(preferred.sum().alias("pref"), pl.len().alias("len"))
        .sort(["rank", "pref", "len", "pid", "tid"], descending=[False, True, True, False, False])
    )
    main = counts.unique("rank", keep="first", maintain_order=True).select(keys)
    seq = top.join(main, on=keys).sort("rank", "start_ns")
    out: dict[int, pl.DataFrame] = {}
    for (rank,), part in seq.group_by(["rank"], maintain_order=True):
        out[int(rank)] = part.select(  # type: ignore[arg-type]
            "name", "start_ns", (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns")
        )
    return out


def _find_anchor(seq: pl.DataFrame) -> tuple[str, dict[str, int]] | None:
    """The name that occurs once per iteration (preferred anchors first), with its stats."""
    n = seq.height
    names = seq["name"]
    codes = names.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    rng = np.random.default_rng(12345)
    hashes = rng.integers(1, np.iinfo(np.int64).max, size=int(codes.max()) + 1, dtype=np.int64)
    h = hashes[codes].astype(np.uint64)
    vc = (
        names.value_counts(name="n")
        .filter((pl.col("n") >= 3) & (pl.col("n") * 2 <= n))
        .sort(["n", "name"], descending=[True, False])
    )
    if vc.is_empty():
        return None
    code_of = dict(zip(names.to_list(), codes.tolist()))
    for pattern in PREFERRED_ANCHORS:
        for name in vc.filter(pl.col("name").str.contains(pattern))["name"].to_list():
            st = _anchor_stats(codes, h, code_of[name])
            if st is not None:
                return name, st
    distinct = names.unique()
    boundary = set(distinct.filter(distinct.str.contains(BOUNDARY_OPS)).to_list())
    if not boundary:
        return None
    bcodes = {code_of[b] for b in boundary}
    best: tuple[int, int, str, dict[str, int]] | None = None
    for name, count in vc.head(MAX_CANDIDATES).iter_rows():
        if best is not None and count < best[0]:
            break  # only names as frequent as the accepted one can compete (phase)
        st = _anchor_stats(codes, h, code_of[name], bcodes)
        if st is None:
            continue
        key = (count, -st["first"], name, st)
        if best is None or (key[0], key[1]) > (best[0], best[1]):
            best = key
    return (best[2], best[3]) if best is not None else None


def _anchor_stats(
    codes: np.ndarray, h: np.ndarray, a: int, boundary: set[int] | None = None
) -> dict[str, int] | None:
    """Is code ``a`` once per iteration? Stats when it is (module docstring, rule 4)."""
    pos = np.flatnonzero(codes == a)
    if pos.size < 3 or pos[-1] - pos[0] < MIN_SPAN * codes.size:
        return None
    # complete segments: [pos[k], pos[k+1]); multiset hash = wrapping sum of per-name hashes
    sums = np.add.reduceat(h[pos[0] : pos[-1]], pos[:-1] - pos[0])
    lengths = np.diff(pos)
    uniq, inv, cnt = np.unique(sums, return_inverse=True, return_counts=True)
    mode = int(np.argmax(cnt))
    agree = int(cnt[mode])
    segments = int(pos.size - 1)
    if agree < 2 or agree < MIN_AGREE * segments:
        return None
    k = int(np.flatnonzero(inv == mode)[0])
    typical = set(codes[pos[k] : pos[k + 1]].tolist())
    if lengths[k] < MIN_PERIOD or len(typical) < MIN_NAMES:
        return None
    if boundary is not None and not typical & boundary:
        return None
    seg_id = np.repeat(np.arange(segments), lengths)
    pairs = np.unique(np.stack([seg_id, codes[pos[0] : pos[-1]]]), axis=1)
    per_code = np.bincount(pairs[1], minlength=int(codes.max()) + 1)
    recurring = set(np.flatnonzero(per_code >= 2).tolist())
    if recurring and len(typical & recurring) < MIN_COVER * len(recurring):
        return None
    return {
        "agree": agree,
        "segments": segments,
        "period": int(lengths[k]),
        "first": int(pos[0]),
        "hash": int(uniq[mode]),
    }


def _anchor_windows(seq: pl.DataFrame, name: str, rank: int) -> pl.DataFrame:
    """Windows from each occurrence of ``name`` to the next; the last occurrence's window ends
    with its iteration when the events after it hold a whole typical iteration."""
    names = seq["name"].to_list()
    starts, ends = seq["start_ns"].to_numpy(), seq["end_ns"].to_numpy()
    pos = [i for i, x in enumerate(names) if x == name]
    if len(pos) < 2:
        return pl.DataFrame(schema=STEP_COLUMNS)
    lo = [int(starts[p]) for p in pos[:-1]]
    hi = [int(starts[q]) for q in pos[1:]]
    period = sorted(q - p for p, q in zip(pos, pos[1:]))[(len(pos) - 1) // 2]
    last = pos[-1]
    typical = sorted(names[pos[-2] : pos[-1]])
    if last + period <= len(names) and sorted(names[last : last + period]) == typical:
        lo.append(int(starts[last]))
        hi.append(int(ends[last : last + period].max()))
    return pl.DataFrame(
        {
            "rank": [rank] * len(lo),
            "step": list(range(len(lo))),
            "name": [name] * len(lo),
            "start_ns": lo,
            "end_ns": hi,
            "dur_ns": [b - a for a, b in zip(lo, hi)],
        }
    ).select([pl.col(c).cast(t) for c, t in STEP_COLUMNS.items()])


def _fill_ranks(steps: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    missing = set(events["rank"].unique().to_list()) - set(steps["rank"].unique().to_list())
    if missing:  # ranks without the marker: one whole-trace step each
        steps = pl.concat([steps, _whole(events.filter(pl.col("rank").is_in(sorted(missing))))])
    return steps


def _conform(steps: pl.DataFrame) -> pl.DataFrame:
    return steps.select([pl.col(c).cast(t) for c, t in STEP_COLUMNS.items()]).sort("rank", "step")


def _windows(instances: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Step table from marker instances, numbered per rank in time order."""
    steps = instances.sort(["rank", "start_ns", "name"]).select(
        pl.col("rank").cast(pl.Int32),
        pl.int_range(pl.len()).over("rank").cast(pl.Int32).alias("step"),
        "name",
        "start_ns",
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        "dur_ns",
    )
    missing = set(events["rank"].unique().to_list()) - set(steps["rank"].unique().to_list())
    if missing:  # ranks without the marker: one whole-trace step each
        steps = pl.concat([steps, _whole(events.filter(pl.col("rank").is_in(sorted(missing))))])
    return steps.select([pl.col(c).cast(t) for c, t in STEP_COLUMNS.items()])


def _whole(events: pl.DataFrame) -> pl.DataFrame:
    """One step per rank spanning all its events."""
    return (
        events.group_by("rank")
        .agg(
            pl.col("start_ns").min().alias("start_ns"),
            (pl.col("start_ns") + pl.col("dur_ns")).max().alias("end_ns"),
        )
        .sort("rank")
        .select(
            pl.col("rank").cast(pl.Int32),
            pl.lit(0, pl.Int32).alias("step"),
            pl.lit(WHOLE_TRACE).alias("name"),
            "start_ns",
            "end_ns",
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        )
        .select([pl.col(c).cast(t) for c, t in STEP_COLUMNS.items()])
    )


def _by_time(events: pl.DataFrame, windows: pl.DataFrame) -> pl.Series:
    """Step of each row by its start: the latest window of its rank starting at or before it,
    if the row starts before that window ends (null otherwise). In the order of ``events``.

    One ``search_sorted`` over (rank, start) keys packed into an Int64: no sort of the events.
    """
    n = events.height
    if windows.is_empty() or n == 0:
        return pl.repeat(None, n, dtype=pl.Int32, eager=True)
    lo = min(events["start_ns"].min(), windows["start_ns"].min())  # type: ignore[type-var]
    hi = max(events["start_ns"].max(), windows["end_ns"].max())  # type: ignore[type-var]
    ranks = sorted(set(windows["rank"].to_list()) | set(events["rank"].unique().to_list()))
    span = int(hi) - int(lo) + 1  # type: ignore[arg-type]
    if len(ranks) * span >= 1 << 62:  # cannot pack: fall back to an as-of join
        return _by_time_asof(events.select("rank", "start_ns"), windows)
    index = {r: i for i, r in enumerate(ranks)}

    rank_idx = pl.col("rank").replace_strict(index, return_dtype=pl.Int64)
    key = rank_idx * span + (pl.col("start_ns") - lo)
    w = windows.select(key.alias("k"), "rank", "step", "end_ns").sort("k")
    k = events.select(key).to_series()
    pos = (w["k"].search_sorted(k, side="right").cast(pl.Int64) - 1).alias("pos")
    hit = pl.DataFrame({"pos": pos.clip(0), "ok": pos >= 0})
    got = hit.select(
        pl.col("ok"),
        w["rank"].gather(hit["pos"]).alias("w_rank"),
        w["step"].gather(hit["pos"]).alias("w_step"),
        w["end_ns"].gather(hit["pos"]).alias("w_end"),
    )
    inside = got["ok"] & (got["w_rank"] == events["rank"]) & (events["start_ns"] < got["w_end"])
    return pl.select(pl.when(inside).then(got["w_step"])).to_series().cast(pl.Int32)


def _by_time_asof(keys: pl.DataFrame, windows: pl.DataFrame) -> pl.Series:
    """:func:`_by_time` with an as-of join (any number of ranks, any time range)."""
    w = windows.select("rank", "step", pl.col("start_ns").alias("w_start"), "end_ns").sort(
        "w_start"
    )
    hit = (
        keys.with_row_index("_i")
        .sort("start_ns")
        .join_asof(
            w,
            left_on="start_ns",
            right_on="w_start",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
        .select(
            "_i",
            pl.when(pl.col("start_ns") < pl.col("end_ns")).then(pl.col("step")).alias("step"),
        )
        .sort("_i")
    )
    return hit["step"].cast(pl.Int32)


def _assign(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Fill ``step``: host rows by time; GPU rows from their launcher (else by time)."""
    if events.is_empty():
        return events
    by_time = _by_time(events, windows)
    gpu = pl.col("device").is_not_null() & pl.col("correlation").is_not_null()
    rows = events.select(gpu.arg_true()).to_series()
    if rows.is_empty():
        return events.with_columns(like_chunks(by_time.alias("step"), events))
    api = pl.col("kind").is_in(["runtime", "driver"]) & pl.col("correlation").is_not_null()
    keys = ["rank", "pid", "correlation"]
    packed = _packed_key(events, keys)
    if packed is not None:
        inherit, launched = _launcher_steps(events, by_time, rows, api, packed)
    else:  # keys too wide to pack into one Int64: a join on the three columns
        launchers = (
            events.select(*keys, "kind", by_time.alias("_l"))
            .filter(api)
            .select(*keys, "_l", pl.lit(True).alias("_hit"))
            .unique(keys, keep="first")
        )
        looked = (
            events.select(keys)[rows]
            .join(launchers, on=keys, how="left", maintain_order="left")
            .select(pl.when(pl.col("_hit").fill_null(False)).then(pl.col("_l")).alias("_l"), "_hit")
        )
        inherit, launched = looked["_hit"].fill_null(False), looked["_l"]
    values = pl.select(pl.when(inherit).then(launched).otherwise(by_time.gather(rows))).to_series()
    step = by_time.scatter(rows, values).alias("step")
    return events.with_columns(like_chunks(step, events))  # aligned: no copy of the frame later


def _packed_key(events: pl.DataFrame, keys: list[str]) -> pl.Expr | None:
    """``keys`` (integer columns) packed into one Int64 per row, or None when their ranges are
    too wide together. Equal keys pack to equal values; a null in any key packs to null."""
    bounds = events.select(
        *(pl.col(k).min().alias(f"lo{i}") for i, k in enumerate(keys)),
        *(pl.col(k).max().alias(f"hi{i}") for i, k in enumerate(keys)),
    ).row(0)
    n = len(keys)
    lows, highs = bounds[:n], bounds[n:]
    if any(v is None for v in bounds):
        return None  # a column of nulls only: nothing to look up by it
    spans = [int(h) - int(lo) + 1 for lo, h in zip(lows, highs)]
    total = 1
    for sp in spans:
        total *= sp
    if total >= 1 << 62:
        return None
    key: pl.Expr = pl.lit(0, pl.Int64)
    for k, lo, sp in zip(keys, lows, spans):
        key = key * sp + (pl.col(k).cast(pl.Int64) - int(lo))
    return key


def _launcher_steps(
    events: pl.DataFrame, by_time: pl.Series, rows: pl.Series, api: pl.Expr, key: pl.Expr
) -> tuple[pl.Series, pl.Series]:
    """For each GPU row (``rows``): whether an API call with its key exists, and the step of the
    first such call (in row order). A stable sort and a binary search: no hash table over the
    millions of API calls of a big nsys export."""
    calls = (
        events.select(key.alias("k"), by_time.alias("_l"), api.alias("_api"))
        .filter(pl.col("_api") & pl.col("k").is_not_null())
        .select("k", "_l")
        .sort("k", maintain_order=True)  # stable: the first call of a key comes first
    )
    wanted = events.select(key.alias("k")).to_series().gather(rows)
    if calls.is_empty():
        n = rows.len()
        return pl.repeat(False, n, eager=True), pl.repeat(None, n, dtype=pl.Int32, eager=True)
    pos = calls["k"].search_sorted(wanted, side="left").clip(0, calls.height - 1)
    found = (calls["k"].gather(pos) == wanted).fill_null(False)
    return found, calls["_l"].gather(pos)
