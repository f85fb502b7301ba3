"""Step windows, and the ``step`` of every event.

A step is one iteration of the workload's loop (a training step, one decode step). Windows are
found on each rank's host timeline, from the first source that exists:

1. ``marker`` (the CLI's ``--step NAME``): host annotations named ``NAME`` or ``NAME#<n>``
   (so ``--step ProfilerStep`` matches ``ProfilerStep#12``);
2. ``ProfilerStep#N`` annotations (``torch.profiler.schedule``);
3. a repeating annotation or NVTX range: among top-level host annotations (not inside another
   annotation on the same thread) whose name occurs at least twice on a rank, the one covering
   the most time (``decode_step``, ``train_step`` ...);
4. otherwise one step spanning the whole trace (whole-program traces, short CUDA apps).

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
from dataclasses import replace

import polars as pl

from ccdiag.errors import InputError
from ccdiag.schema import STEP_COLUMNS, Trace

PROFILER_STEP = "ProfilerStep"
WHOLE_TRACE = "whole trace"
_HOST_ANN = (pl.col("kind") == "annotation") & pl.col("device").is_null()


def assign_steps(trace: Trace, marker: str | None = None) -> Trace:
    """Find the step windows of a trace and fill its ``step`` column.

    Args:
        trace: a parsed trace (any format).
        marker: name of the step annotation / NVTX range; detected when None.

    Returns:
        A new trace with ``events.step``, ``steps`` and ``meta.step_marker`` filled.

    Raises:
        InputError: ``marker`` was given and no annotation of that name exists.
    """
    events = trace.events
    ann = events.filter(_HOST_ANN).select("rank", "pid", "tid", "name", "start_ns", "dur_ns")
    label: str | None
    if marker is not None:
        instances = ann.filter(_matches(marker))
        if instances.is_empty():
            raise InputError(trace.meta.source, _not_found(marker, ann))
        label, source = marker, "--step"
    else:
        label, source, instances = _detect(ann)
    windows = _windows(instances, events) if label is not None else _whole(events)
    stepped = _assign(events, windows)
    extra = {**trace.meta.extra, "steps_from": source}
    meta = trace.meta.model_copy(update={"step_marker": label, "extra": extra})
    return replace(trace, events=stepped, steps=windows, meta=meta)


def _matches(marker: str) -> pl.Expr:
    """Annotation named ``marker`` or ``marker#<n>`` (``ProfilerStep`` -> ``ProfilerStep#7``)."""
    base = marker[:-1] if marker.endswith("#") else marker
    pattern = rf"^{re.escape(base)}#\d+$"
    return (pl.col("name") == marker) | pl.col("name").str.contains(pattern)


def _not_found(marker: str, ann: pl.DataFrame) -> str:
    common = ann["name"].value_counts(sort=True).head(5)["name"].to_list()
    seen = ", ".join(repr(n) for n in common) if common else "none"
    return f"step marker {marker!r} not found (most frequent annotations: {seen})"


def _detect(ann: pl.DataFrame) -> tuple[str | None, str, pl.DataFrame]:
    """(marker, how it was found, its instances); marker None means the whole trace."""
    prof = ann.filter(pl.col("name").str.contains(rf"^{PROFILER_STEP}#\d+$"))
    if not prof.is_empty():
        return PROFILER_STEP, "ProfilerStep#N", prof
    top = _top_level(ann)
    ranked = (
        top.group_by("rank", "name")
        .agg(pl.len().alias("n"), pl.col("dur_ns").sum().alias("covered"))
        .filter(pl.col("n") >= 2)
        .group_by("name")
        .agg(pl.col("n").sum(), pl.col("covered").sum())
        .sort(["covered", "n", "name"], descending=[True, True, False])
    )
    if ranked.is_empty():
        return None, WHOLE_TRACE, ann.clear()
    name = ranked["name"][0]
    return name, "repeating annotation", top.filter(pl.col("name") == name)


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
        return events.with_columns(by_time.alias("step"))
    api = pl.col("kind").is_in(["runtime", "driver"]) & pl.col("correlation").is_not_null()
    keys = ["rank", "pid", "correlation"]
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
    inherit = looked["_hit"].fill_null(False)
    values = pl.select(
        pl.when(inherit).then(looked["_l"]).otherwise(by_time.gather(rows))
    ).to_series()
    return events.with_columns(by_time.scatter(rows, values).alias("step"))
