"""Call-level alignment of the two runs: the same program, matched call by call inside each step.

Within each aligned step (``Pair.aligned``: rank, idx, b_step, t_step) the main host thread's
CUDA calls of the two runs are matched one to one by name and order:

- **fast path**: when a step's name sequences are equal (the common case), the k-th call of the
  baseline's step is the k-th call of the treatment's;
- otherwise the longest common subsequence of the two steps' name sequences (rapidfuzz's
  ``LCSseq.opcodes``, a bit-parallel LCS in C++: ~400x difflib's ``SequenceMatcher`` on a
  2,000-call step, the same number of matched calls), which tolerates inserted and missing
  calls; for very long steps (whole-program traces of more than ``MAX_DIFF`` calls) the k-th
  occurrence of each name is matched instead (a polars join).

Every matched call carries both runs' duration (its own time on the ledger, ``eff_ns``), the host
gap before it and the host gap after it, and their deltas (``d_dur``, ``d_gap``, ``d_gap_after``):
the evidence every mechanism measures its paid cost from (:class:`MatchedCallSchema`). GPU rows
are matched the same way by (kernel name, k-th occurrence) per step (:func:`match_gpu`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from rapidfuzz.distance import LCSseq
from threadpoolctl import threadpool_limits

from ccdiag import parallel
from ccdiag.ledger.removal import REMOVAL_GPU, Removal, call_rows
from ccdiag.ledger.vocab import (
    LAUNCH_PATHS,
    Codes,
    base_name,
    codes_of,
    in_step_shift,
    is_host_copy,
    launch_path_parts,
    per_value,
    same_keys_as,
    shared_codes,
    sort_once,
    strictly_sorted,
)

#: Steps with more calls than this are matched by (name, k-th occurrence), not by their LCS.
MAX_DIFF = 20_000
#: Columns of a side's calls carried onto the matched frame (prefixed b_ / t_).
SIDE_COLS = (
    "ev_row", "dur", "raw_dur", "gap", "gap_after", "start_ns", "gpu_dur", "blocking", "gpu_row",
    "tail", "hcopy", "bytes", "next_ev_row", "bare",
)  # fmt: skip

#: Columns of the calls :func:`_prepare` reads (those present).
PREPARE_COLS = (
    "rank", "step", "name", "cls", "gpu_name", "ev_row", "eff_ns", "raw_dur_ns", "dur_ns",
    "gap_ns", "w_end", "end_ns", "start_ns", "gpu_dur", "gpu_start", "blocking", "gpu_row",
    "bytes", "copy_kind", "src_mem", "dst_mem", "external_id",
)  # fmt: skip


def kernel_ids(*calls: pl.DataFrame) -> dict[str, str]:
    """Each kernel name (``gpu_name``) of these calls, and ``?`` (a launch without one), as a
    short id of fixed width numbered in the names' sorted order: the call sequences' keys are
    ``path:<id>``, so a million keys do not each copy a kernel name of hundreds of characters,
    and sorting keys gives the order the names would (:attr:`GapModel.names` shows them)."""
    names = {"?"}
    for c in calls:
        if "gpu_name" in c.columns:
            names |= set(c.get_column("gpu_name").drop_nulls().unique().to_list())
    width = len(str(len(names)))
    return {n: f"{i:0{width}d}" for i, n in enumerate(sorted(names))}


def _ordinal_in_step() -> pl.Expr:
    """``pl.int_range(pl.len()).over("rank", "idx")`` on a frame sorted by rank and idx: each
    row's index less its step's first row's (a forward fill, not a window over the steps)."""
    row = pl.int_range(pl.len())
    return row - pl.when(~same_keys_as(["rank", "idx"], 1)).then(row).forward_fill()


def _on_aligned(c: pl.DataFrame, a: pl.DataFrame) -> pl.DataFrame:
    """``c.join(a, on=["rank", "step"], how="inner")`` sorted by rank, idx, start_ns. When the
    aligned steps are each once and the calls, kept where their step is aligned, are already
    strictly in that order (calls come in step and start order), each call's ``idx`` is found
    by binary search and the calls filtered: the join's rows, without a join of ~20 columns of
    a million calls (the one order a sort can give them, so the same frame)."""
    joined = None
    if c.height and a.height and all(c[k].null_count() == 0 for k in ("rank", "step")):
        cr, cs = (c.get_column(k).to_numpy().astype(np.int64, copy=False) for k in ("rank", "step"))
        ar, as_ = (
            a.get_column(k).to_numpy().astype(np.int64, copy=False) for k in ("rank", "step")
        )
        ok = all(x.min() >= 0 and x.max() < (1 << 31) for x in (cr, cs, ar, as_))
        if ok and a["idx"].null_count() == 0:
            ac, cc = (ar << 32) | as_, (cr << 32) | cs
            order = np.argsort(ac, kind="stable")
            sk = ac[order]
            if sk.size < 2 or bool((sk[1:] > sk[:-1]).all()):  # each aligned step once
                pos = np.clip(np.searchsorted(sk, cc), 0, sk.size - 1)
                hit = sk[pos] == cc
                at = order[pos]
                idx = a.get_column("idx").gather(pl.Series(at)).alias("idx")
                cand = c.with_columns(idx).filter(pl.Series(hit))
                if strictly_sorted(cand, "rank", "idx", "start_ns"):
                    joined = cand
    if joined is None:
        joined = sort_once(c.join(a, on=["rank", "step"], how="inner"), "rank", "idx", "start_ns")
    return joined


def _prepare(
    calls: pl.DataFrame,
    aligned: pl.DataFrame,
    side: str,
    ids: dict[str, str] | None = None,
    names: Codes | None = None,
) -> pl.DataFrame:
    """One side's calls on the aligned index with name, ordinal ``k`` and the gap after each.
    ``names``: the codes of the run's event names (:func:`event_names`), read at the calls'
    ``ev_row`` and ``gpu_row``."""
    a = aligned.select("rank", "idx", pl.col(f"{side}_step").alias("step"))
    # the columns read here only, before the join and the sort (a million calls carry ~40)
    c = calls.select(k for k in PREPARE_COLS if k in calls.columns)
    c = _on_aligned(c, a)
    nxt = in_step_shift(pl.col("gap_ns"), -1)
    tail = (pl.col("w_end") - pl.col("end_ns")).clip(lower_bound=0)

    def col(name: str, default: pl.Expr) -> pl.Expr:
        return pl.col(name) if name in c.columns else default

    null = pl.lit(None, dtype=pl.Int64)
    gpu, blk = col("gpu_dur", null), col("blocking", pl.lit(False))
    # a blocking call's time after its GPU copy ended (host-side padding, wake-up)
    gpu_end = col("gpu_start", null) + gpu
    after_copy = pl.when(blk.fill_null(False)).then(
        (pl.col("end_ns") - gpu_end).clip(lower_bound=0)
    )
    hcopy = (pl.col("cls") == "copy") & (
        is_host_copy().fill_null(False) if "copy_kind" in c.columns else pl.lit(False)
    )

    def codes(rows: str) -> Codes | None:
        return names.at(c.get_column(rows)) if names is not None and rows in c.columns else None

    # the name matching once per distinct name and kernel, not per call (one pass per column:
    # the base name, the launch path's parts and the kernel's id together)
    if "gpu_name" in c.columns:
        by_name, by_kernel, path = launch_path_parts()
        ids = ids if ids is not None else kernel_ids(c)
        kid = pl.col("gpu_name").fill_null("?").replace_strict(ids, return_dtype=pl.String)
        c = per_value(c, "name", {"_bname": base_name(), **by_name}, codes("ev_row"))
        c = per_value(c, "gpu_name", {**by_kernel, "_kid": kid}, codes("gpu_row"))
        c = c.with_columns(path.alias("_path")).drop(*by_name, *by_kernel)
    else:
        c = per_value(c, "name", {"_bname": base_name()}, codes("ev_row"))
        c = c.with_columns(pl.lit(None, pl.String).alias("_path"), pl.lit("?").alias("_kid"))
    return (
        c.select(
            "rank",
            "idx",
            pl.col("_bname").alias("bname"),
            "cls",
            pl.col("_path").alias("path"),
            col("gpu_name", pl.lit(None, pl.String)).alias("gname"),
            pl.col("ev_row").cast(pl.Int64),
            pl.col("eff_ns").cast(pl.Int64).alias("dur"),
            col("raw_dur_ns", pl.col("dur_ns")).cast(pl.Int64).alias("raw_dur"),
            pl.col("gap_ns").cast(pl.Int64).alias("gap"),
            nxt.fill_null(tail).cast(pl.Int64).alias("gap_after"),
            "start_ns",
            gpu.cast(pl.Int64).alias("gpu_dur"),
            blk.fill_null(False).alias("blocking"),
            col("gpu_row", null).cast(pl.Int64).alias("gpu_row"),
            after_copy.otherwise(0).fill_null(0).cast(pl.Int64).alias("tail"),
            hcopy.alias("hcopy"),
            col("bytes", null).cast(pl.Int64).alias("bytes"),
            # a call no cpu_op issued (Nsight Systems): what an interposer adds beside it lies
            # in the gaps around it, not in an op that :func:`ccdiag.ledger.host._extend_copies`
            # could extend the call to
            col("external_id", null).is_null().alias("bare"),
            _ordinal_in_step().alias("k"),
            pl.col("_kid"),
        )
        .with_columns(
            # a launch's key is its path and kernel: a toll paid on some kernels of a path only
            # (a library kernel misread as the framework's, say) is measured where it is paid
            # (the kernel by its short id, :func:`kernel_ids`)
            pl.when(pl.col("path").is_not_null())
            .then(pl.concat_str("path", "_kid", separator=":"))
            .otherwise(pl.col("cls"))
            .alias("key"),
            in_step_shift(pl.col("ev_row"), -1).alias("next_ev_row"),
        )
        .drop("_kid")
        .with_columns(in_step_shift(pl.col("key"), 1).fill_null("start").alias("prev_key"))
    )


def sequence(
    calls: pl.DataFrame,
    aligned: pl.DataFrame,
    side: str,
    ids: dict[str, str] | None = None,
    names: Codes | None = None,
) -> pl.DataFrame:
    """One run's main-thread calls in the aligned steps, in order: rank, idx, bname, cls, path,
    key (``path:<kernel id>`` for launches, :func:`kernel_ids`, ``ids`` shared by the two runs;
    else the call class), prev_key (the previous call's key; ``start`` for a step's first
    call), ev_row, dur, gap, gap_after, k. ``names``: the run's :func:`event_names`."""
    return _prepare(calls, aligned, side, ids, names)


def _name_codes(b: pl.DataFrame, t: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """rank, idx and ``bname`` as an integer code the two runs share (equal names, equal codes):
    the per-step name sequences are then compared and aligned as lists of small integers, not
    of strings (the same equalities, so the same matches)."""
    cb, ct = shared_codes(*(f.select("rank", "idx", "bname") for f in (b, t)), col="bname")
    # both alive while the codes are read: they hold the shared mapping
    code = pl.col("bname").to_physical().cast(pl.Int64)
    return cb.with_columns(code), ct.with_columns(code)


def _pairs_equal(b: pl.DataFrame, t: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per step: whether the name sequences are equal; the steps that are not (rank, idx)."""
    sb = b.group_by("rank", "idx").agg(pl.col("bname").alias("nb"))
    st = t.group_by("rank", "idx").agg(pl.col("bname").alias("nt"))
    j = sb.join(st, on=["rank", "idx"], how="inner")
    same = j.filter(pl.col("nb") == pl.col("nt")).select("rank", "idx")
    diff = j.filter(pl.col("nb") != pl.col("nt")).select("rank", "idx", "nb", "nt")
    return same, diff


def _diff_pairs(diff: pl.DataFrame) -> pl.DataFrame:
    """(rank, idx, k_b, k_t) of matched calls in steps whose name sequences differ. The LCS's
    equal blocks are kept as (start, start, length) and expanded to calls at once (numpy), not
    a Python list extended call by call (~1.3 M calls)."""
    rank_l: list[int] = []
    idx_l: list[int] = []
    src: list[int] = []
    dst: list[int] = []
    size: list[int] = []
    for rank, idx, nb, nt in diff.iter_rows():
        if max(len(nb), len(nt)) > MAX_DIFF:
            kb, kt = _occurrence_pairs(nb, nt)  # one call a block
            rank_l += [rank] * len(kb)
            idx_l += [idx] * len(kb)
            src += kb
            dst += kt
            size += [1] * len(kb)
            continue
        for op in LCSseq.opcodes(nb, nt):
            if op.tag == "equal":
                rank_l.append(rank)
                idx_l.append(idx)
                src.append(op.src_start)
                dst.append(op.dest_start)
                size.append(op.src_end - op.src_start)
    n = np.asarray(size, dtype=np.int64)
    block = pl.Series(np.repeat(np.arange(n.size, dtype=np.int64), n))
    within = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return pl.DataFrame(
        {
            "rank": pl.Series(rank_l, dtype=pl.Int32).gather(block),
            "idx": pl.Series(idx_l, dtype=pl.Int64).gather(block),
            "b_k": np.repeat(np.asarray(src, dtype=np.int64), n) + within,
            "t_k": np.repeat(np.asarray(dst, dtype=np.int64), n) + within,
        },
        schema={"rank": pl.Int32, "idx": pl.Int64, "b_k": pl.Int64, "t_k": pl.Int64},
    )


def _occurrence_pairs(nb: list[int], nt: list[int]) -> tuple[list[int], list[int]]:
    """Match the k-th occurrence of each name (long sequences: linear time)."""

    def occ(names: list[int]) -> pl.DataFrame:
        f = pl.DataFrame({"n": names}).with_row_index("k")
        return f.with_columns(pl.int_range(pl.len()).over("n").alias("o"))

    j = occ(nb).join(occ(nt), on=["n", "o"], suffix="_t")
    return j["k"].cast(pl.Int64).to_list(), j["t_k"].cast(pl.Int64).to_list()


def match_calls(
    calls_b: pl.DataFrame,
    calls_t: pl.DataFrame,
    aligned: pl.DataFrame,
    seqs: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Matched main-thread calls of the two runs (:class:`MatchedCallSchema`).

    Args:
        calls_b: the baseline's :func:`ccdiag.ledger.host.host_calls`.
        calls_t: the treatment's.
        aligned: the pair's aligned steps (rank, idx, b_step, t_step).
        seqs: the two sides' :func:`sequence` of these calls when already built.

    Returns:
        One row per matched call: rank, idx, bname, cls, path, ``b_``/``t_`` of
        :data:`SIDE_COLS`, and ``d_dur``, ``d_gap``, ``d_gap_after`` (treatment − baseline).
    """
    b, t = seqs or (_prepare(calls_b, aligned, "b"), _prepare(calls_t, aligned, "t"))
    same, diff = _pairs_equal(*_name_codes(b, t))
    # the differing steps in (rank, idx) order: their pairs come out in the keys' sorted order
    # (t_k rises within a step), so the sort below has nothing to move when no step is the same
    diff = diff.sort("rank", "idx")
    keys = same.join(b.select("rank", "idx", "k"), on=["rank", "idx"])
    keys = keys.with_columns(pl.col("k").alias("b_k"), pl.col("k").alias("t_k")).drop("k")
    if diff.height:
        keys = pl.concat([keys.cast({"rank": pl.Int32, "idx": pl.Int64}), _diff_pairs(diff)])
    keys = keys.cast({"rank": pl.Int32, "idx": pl.Int64, "b_k": pl.Int64, "t_k": pl.Int64})
    # in the output's order (a call is matched once: (rank, idx, t_k) is unique), so the gathers
    # below need no sort of the wide frame after them (2.2 s CPU on the 200 MB nsys pair)
    keys = sort_once(keys, "rank", "idx", "t_k")
    side = {
        p: f.rename({c: f"{p}_{c}" for c in (*SIDE_COLS, "k")}).cast(
            {"rank": pl.Int32, "idx": pl.Int64, f"{p}_k": pl.Int64}
        )
        for p, f in (("b", b), ("t", t))
    }
    sb = side["b"].drop("cls", "path", "bname", "key", "prev_key")
    gb, gt = _in_step(keys, sb, "b_k"), _in_step(keys, side["t"], "t_k")
    if gb is not None and gt is not None:  # the joins below, as gathers, in keys' order
        gt = gt.rename({c: f"{c}_right" for c in gt.columns if c in gb.columns})  # as join names
        m = pl.concat([keys, gb, gt], how="horizontal")
    else:
        m = keys.join(sb, on=["rank", "idx", "b_k"]).join(side["t"], on=["rank", "idx", "t_k"])
        m = m.sort("rank", "idx", "t_k")
    return m.with_columns(
        (pl.col("t_dur") - pl.col("b_dur")).alias("d_dur"),
        (pl.col("t_gap") - pl.col("b_gap")).alias("d_gap"),
        (pl.col("t_gap_after") - pl.col("b_gap_after")).alias("d_gap_after"),
    )


def _in_step(keys: pl.DataFrame, f: pl.DataFrame, k: str) -> pl.DataFrame | None:
    """``keys.join(f, on=["rank", "idx", k])``'s columns from ``f``, in ``keys``' order, when
    every key has its row in ``f``: a :func:`_prepare` frame is in (rank, idx) order with ``k``
    its calls' ordinal in their step, so the row is the step's first row plus ``k`` (a gather,
    not a hash join on three columns; ~5x less CPU on a million calls). None when a key has no
    row there (the join then drops it). When the rows are ``f``'s own, in order (every call of
    the side matched: the baseline's, usually), ``f`` itself, not a gather of it."""
    rows = _step_rows(keys, f, k)
    if rows is None:
        return None
    out = f.drop("rank", "idx", k)
    if rows.shape[0] == f.height and bool((rows == np.arange(f.height)).all()):
        return out.rechunk()
    return out.rechunk().gather(pl.Series(rows))


def _step_rows(keys: pl.DataFrame, f: pl.DataFrame, k: str) -> np.ndarray | None:
    """The row of ``f`` of each key (its step's first row plus ``k``), checked: None when a key
    has no row there. The steps as one integer (rank, idx) found by binary search in ``f``'s,
    which rise (``f`` is in (rank, idx) order); else by a group-by and a join."""
    cols = ("rank", "idx", k)
    fr, kr = f.select(cols), keys.select(cols)
    if any(x.null_count() for d in (fr, kr) for x in d.get_columns()):
        return None
    ints = [d.get_column(c).to_numpy().astype(np.int64, copy=False) for d in (fr, kr) for c in cols]
    (f_rank, f_idx, f_k, k_rank, k_idx, k_k) = ints
    lo = min(int(x.min()) if x.size else 0 for x in (f_idx, k_idx))
    hi = max(int(x.max()) if x.size else 0 for x in (f_idx, k_idx))
    if lo >= 0 and hi < (1 << 32):
        fc, kc = (f_rank << 32) | f_idx, (k_rank << 32) | k_idx
        if fc.size > 1 and not bool((fc[1:] >= fc[:-1]).all()):
            return _step_rows_joined(fr, kr, k)
        rows = np.searchsorted(fc, kc, side="left") + k_k
    else:
        return _step_rows_joined(fr, kr, k)
    if rows.size and (rows.min() < 0 or rows.max() >= f.height):
        return None
    if not (bool((fc[rows] == kc).all()) and bool((f_k[rows] == k_k).all())):
        return None
    return rows


def _step_rows_joined(fr: pl.DataFrame, kr: pl.DataFrame, k: str) -> np.ndarray | None:
    first = fr.select("rank", "idx").with_row_index("_r").group_by("rank", "idx").agg(pl.min("_r"))
    at = kr.join(first, on=["rank", "idx"], how="left", maintain_order="left")
    rows = at["_r"].cast(pl.Int64) + at[k]
    if rows.null_count() or not ((rows >= 0) & (rows < fr.height)).all():
        return None
    if not fr.gather(rows).equals(kr):
        return None
    return rows.to_numpy()


def match_gpu(gpu_b: pl.DataFrame, gpu_t: pl.DataFrame, aligned: pl.DataFrame) -> pl.DataFrame:
    """Matched GPU rows per aligned step by (name, k-th occurrence in start order).

    Returns rank, idx, name, gclass, b_dur, t_dur, d_dur, t_ev_row (the treatment row in its
    events), b_bytes, t_bytes.
    """

    def side(g: pl.DataFrame, p: str) -> pl.DataFrame:
        a = aligned.select("rank", "idx", pl.col(f"{p}_step").alias("step"))
        g = g.join(a, on=["rank", "step"], how="inner").sort("rank", "idx", "start_ns")
        return g.select(
            pl.col("rank").cast(pl.Int32),
            pl.col("idx").cast(pl.Int64),
            "name",
            "gclass",
            pl.int_range(pl.len()).over("rank", "idx", "name").alias("o"),
            pl.col("dur_ns").cast(pl.Int64).alias(f"{p}_dur"),
            pl.col("ev_row").cast(pl.Int64).alias(f"{p}_ev_row"),
            pl.col("bytes").cast(pl.Int64).alias(f"{p}_bytes"),
        )

    if gpu_b.height == 0 or gpu_t.height == 0 or "ev_row" not in gpu_t.columns:
        return pl.DataFrame(schema={"rank": pl.Int32, "idx": pl.Int64, "d_dur": pl.Int64})
    m = side(gpu_b, "b").join(side(gpu_t, "t").drop("gclass"), on=["rank", "idx", "name", "o"])
    return m.with_columns((pl.col("t_dur") - pl.col("b_dur")).alias("d_dur"))


def huber_fit(x: np.ndarray, y: np.ndarray, iters: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Robust least squares ``y ≈ x @ beta`` (Huber IRLS): beta and its covariance.

    Used to read costs off matched deltas: a few outliers (a preempted call, a page fault) do
    not move the fit; a bimodal distribution whose two modes both scale does not look additive.
    """
    p = x.shape[1]

    def normal(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xw = x * w[:, None]
        return xw.T @ x, xw.T @ y

    return _irls(normal, lambda beta: x @ beta, y, p, iters)


def _irls(
    normal: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    predict: Callable[[np.ndarray], np.ndarray],
    y: np.ndarray,
    p: int,
    iters: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The Huber IRLS loop behind :func:`huber_fit` and :func:`huber_onehot`: ``normal(w)``
    gives the weighted normal equations (``XᵀWX``, ``XᵀWy``), solved through a pseudo-inverse
    (lstsq's minimum-norm solution) at a p x p solve per iteration; ``predict(beta)`` is
    ``X beta``. Returns beta and its covariance.

    Under one BLAS thread: its products are O(gaps) and a p x p solve, and a threaded OpenBLAS
    spins its idle threads around each call (on a 2-core machine the fits of a 200 MB Nsight
    Systems pair took 1.3 s CPU, 0.65 s on one thread; the same reports, byte for byte)."""
    n = y.size
    if n < p + 2:
        return np.zeros(p), np.diag(np.full(p, np.inf))
    with threadpool_limits(1, user_api="blas"):
        w = np.ones(n)
        beta = np.zeros(p)
        for _ in range(iters):
            a, rhs = normal(w)
            beta = _pinv_sym(a) @ rhs
            r = y - predict(beta)
            dev = r - _median(r)
            s = 1.4826 * _median(np.abs(dev, out=dev), inplace=True) or 1.0
            c = 1.345 * s
            # np.where(|r| <= c, 1, c / max(|r|, 1e-9)), the same values, |r| taken once and
            # the weights written in place
            ar = np.abs(r)
            w = np.maximum(ar, 1e-9)
            np.divide(c, w, out=w)
            w[ar <= c] = 1.0
        r = y - predict(beta)
        sigma2 = float((w * r**2).sum() / max(n - p, 1))
        return beta, sigma2 * _pinv_sym(normal(w)[0])


def _median(x: np.ndarray, inplace: bool = False) -> float:
    """``np.median`` of a 1-d float array, bit for bit, at a fraction of its cost: the middle
    order statistics (:func:`_middle`), the same mean of the middle values (the lower middle of
    an even count is the maximum below it). ``inplace``: ``x`` is a temporary, partitioned in
    place where a whole partition is needed (no copy)."""
    n = x.size
    if n == 0 or np.isnan(x).any():
        return float(np.median(x))
    k = n // 2
    if n % 2:
        return float(np.mean(_middle(x, (k,), inplace)))
    return float(np.mean(_middle(x, (k - 1, k), inplace)))


#: Arrays shorter than this are partitioned whole (:func:`_middle`).
BRACKET_MIN = 1 << 16
#: Every this-many-th value of a longer array is sorted to bracket its middle (:func:`_middle`).
BRACKET_SAMPLE = 4096


def _middle(x: np.ndarray, ks: tuple[int, ...], inplace: bool) -> np.ndarray:
    """The order statistics ``ks`` (neighbours, ascending) of ``x`` (no NaN), exactly.

    A long array is not partitioned whole (17 ms for the 1.3 M matched gaps of a 200 MB Nsight
    Systems pair, 16 times per robust fit): a sorted sample of every ``n / BRACKET_SAMPLE``-th
    value brackets the middle, with a margin of ~5 standard deviations of a sample quantile's
    rank; the values below the bracket are counted and only those inside it (~3 % of them) are
    partitioned. The k-th smallest value is unique, whichever values bracket it; where the
    bracket misses it (a sample that does not represent the array), the whole array is
    partitioned as before."""
    n = x.size
    if n >= BRACKET_MIN:
        step = n // BRACKET_SAMPLE
        sample = np.sort(x[::step])
        m = sample.size
        margin = int(5 * np.sqrt(m) / 2) + 2
        lo_i = max(ks[0] * m // n - margin, 0)
        hi_i = min(ks[-1] * m // n + margin, m - 1)
        lo, hi = sample[lo_i], sample[hi_i]
        below = int(np.count_nonzero(x < lo))
        inside = x[(x >= lo) & (x <= hi)]
        if below <= ks[0] and ks[-1] < below + inside.size:
            at = [k - below for k in ks]
            inside.partition(at)
            return inside[at]
    p = x if inplace else x.copy()
    p.partition(list(ks))
    return p[list(ks)]


#: Keys of the gap model: launch paths and the other call classes.
GAP_KEYS: tuple[str, ...] = (*LAUNCH_PATHS, "copy", "sync", "setup", "other")


@dataclass(frozen=True)
class GapModel:
    """How the host gaps between matched calls grew: per key of the call after the gap
    (``before``) and of the call before it (``after``), plus growth in proportion to the gap's
    own length (``h`` per ns of the gap's typical length: host code that got slower). ``before[k] + after[k]`` is identified (the
    split of a toll between the gap before and after a call is not, in a run of equal calls);
    ``var[k]`` is its variance. ``n``: gaps fitted."""

    before: dict[str, float]
    after: dict[str, float]
    var: dict[str, float]
    kept: frozenset[str]  # fine keys (path:kernel) with enough matched calls of their own
    h: float
    h_se: float
    n: int
    h_mean: float = 0.0  # least squares on what the calls leave: mean growth per ns of gap
    h_mean_se: float = float("inf")
    #: ``h`` in each of ``STEP_WINDOWS`` parts of the step by call order, where a part has
    #: enough gaps: slower host code holds across the step, work that moved does not
    #: (:func:`holds_across`)
    h_windows: tuple[float, ...] = ()
    #: Net growth per ns of gap: what the calls' constants leave of the gaps' growth, summed,
    #: over their summed typical length (``nan``: not measured), over the step and in each part.
    #: The robust ``h`` reads the bulk of the gaps; a thread that loses whole time slices grows
    #: a few gaps by a lot, which only the net growth sees
    net: float = float("nan")
    net_windows: tuple[float, ...] = ()
    #: A fine key (``path:<kernel id>``) as people read it: ``path:<kernel name>``
    names: dict[str, str] = field(default_factory=dict)
    #: Lost time slices (:func:`excursions`): each aligned step's net excursion (ns), the
    #: bursts beyond ``BURST_NS`` over the growth the same gap has in the other steps, the
    #: baseline's own bursts subtracted; empty with fewer than ``MIN_BURST_STEPS`` steps. The
    #: fit above leaves those gaps out
    bursts: tuple[float, ...] = ()
    #: The bursts: rank, idx, t_ev_row (the treatment's call), exc / exc_dur (ns: in the gap
    #: before it / in the call)
    burst_rows: pl.DataFrame | None = None
    #: What the matched gaps grew by in all, mean ns per step (bursts included)
    gap_growth: float = 0.0

    def label(self, key: str) -> str:
        """``key`` with its kernel's name in place of its id (:func:`kernel_ids`)."""
        return self.names.get(key, key)

    def per_call(self, key: str) -> float:
        """The gap growth a call of ``key`` brings (before it + after it)."""
        return self.before.get(key, 0.0) + self.after.get(key, 0.0)

    def key(self, col: str) -> pl.Expr:
        """The model's key for a sequence's ``key`` / ``prev_key`` column: the fine key where
        it has its own constants, else its launch path (or call class)."""
        return coarse_key(pl.col(col), self.kept)

    def keyed(self, seq: pl.DataFrame) -> pl.DataFrame:
        """``seq`` with ``_gk`` / ``_gp``: the model's key (:meth:`key`) of each row's ``key``
        / ``prev_key``, and ``_gk_path`` / ``_gp_path``: their launch path or call class, each
        worked out once per distinct value (a step's calls have a few dozen keys, each
        carrying a kernel name of hundreds of characters)."""
        for col, out in (("key", "_gk"), ("prev_key", "_gp")):
            seq = per_value(seq, col, {out: self.key(col), f"{out}_path": key_path(pl.col(col))})
        return seq


def lookup(col: str, table: dict[str, float]) -> pl.Expr:
    """``table[key]`` for each row's key in ``col`` (0 for a key the table lacks): how the
    rules read a :class:`GapModel`'s constants (``before``, ``after``) onto a call sequence."""
    return pl.col(col).replace_strict(table, default=0.0, return_dtype=pl.Float64)


#: Matched calls a fine key (launch path and kernel) needs for constants of its own.
MIN_KEY_CALLS = 30


def key_path(c: pl.Expr) -> pl.Expr:
    """A key's launch path (or call class): what stands before its first ``:``."""
    return c.str.split_exact(":", 1).struct.field("field_0")


def coarse_key(c: pl.Expr, kept: frozenset[str]) -> pl.Expr:
    """A key as the gap model knows it (see :meth:`GapModel.key`)."""
    return pl.when(c.is_in(list(kept))).then(c).otherwise(key_path(c))


def identified_keys(m: pl.DataFrame, kept: frozenset[str], rounds: int = 5) -> frozenset[str]:
    """The fine keys of ``kept`` whose constants the gaps identify: a key keeps constants of its
    own only where its ``before + after`` is the same in every solution of the fit, i.e. no
    direction the gaps leave free moves it (its indicator has no part in the null space of the
    (key, prev_key) cells' design); the others fall back to their launch path, and the test is
    repeated on what is left. In a step that repeats one program a kernel often sits between
    the same neighbours, and its constants and theirs trade against each other freely: a
    minimum-norm fit then gave Mistral's library launches -178 µs per call and its runtime
    launches +0.8 µs under a 12.25 µs toll spun before each runtime launch (12.2 and 1.9 µs
    with the unidentified keys on their paths; HELD-OUT-10, once judged)."""
    # the distinct (key, prev_key) pairs once: each round's cells are theirs (a few hundred
    # rows), not a pass over every matched call
    pairs = m.select("key", "prev_key").unique()
    for _ in range(rounds):
        cells = pairs.select(
            coarse_key(pl.col("key"), kept).alias("k"),
            coarse_key(pl.col("prev_key"), kept).alias("p"),
        ).unique()
        keys = sorted((set(cells["k"].to_list()) | set(cells["p"].to_list())) - {"start"})
        nk, code = len(keys), {k: i for i, k in enumerate(keys)}
        x = np.zeros((cells.height, 2 * nk))
        for j, (k, p) in enumerate(cells.iter_rows()):
            if k in code:
                x[j, code[k]] = 1.0
            if p in code:
                x[j, nk + code[p]] = 1.0
        _, sv, vt = np.linalg.svd(x, full_matrices=True)
        rank = int((sv > 1e-9 * sv.max(initial=0.0)).sum())
        null = vt[rank:]
        if null.shape[0] == 0:
            return kept
        # a key's before + after along each free direction
        moves = np.abs(null[:, :nk] + null[:, nk:]).max(axis=0)
        free = {k for k in kept if k in code and moves[code[k]] > 1e-6}
        if not free:
            return kept
        kept = kept - free
    return kept


def _cells(kc: np.ndarray, pc: np.ndarray, keys: list[str]) -> np.ndarray:
    """Each gap's (key, prev_key) cell as a code: one per distinct ``key|prev_key`` string (codes
    ``kc`` / ``pc`` of :func:`gap_model`; ``len(keys)``: ``start``), named once per distinct pair,
    not per gap."""
    names = [*keys, "start"]
    pair = kc * (len(names)) + pc
    # np.unique(pair, return_inverse=True) without its sort: the pairs are small ints
    present = np.bincount(pair, minlength=len(names) ** 2) > 0
    uniq, inv = np.flatnonzero(present), (np.cumsum(present) - 1)[pair]
    text = [f"{names[p // len(names)]}|{names[p % len(names)]}" for p in uniq.tolist()]
    code = {t: i for i, t in enumerate(dict.fromkeys(text))}
    return np.array([code[t] for t in text], dtype=np.int64)[inv.reshape(-1)]


def _within(cell: np.ndarray, z: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Growth per ns of gap from the variation *within* each (key, prev_key) cell (``cell``:
    :func:`_cells`): robust (Huber) and least squares (mean: a preempted thread loses a few gaps
    whole), each with its standard error. A gap whose growth is the same at every length is its
    neighbouring call's doing (a toll), not host code: between cells, lengths and tolls cannot be
    told apart."""
    f = pl.DataFrame({"c": cell, "z": z, "y": y})
    f = f.with_columns(
        (pl.col("z") - pl.col("z").mean().over("c")).alias("zd"),
        (pl.col("y") - pl.col("y").mean().over("c")).alias("yd"),
    )
    zd, yd = f["zd"].to_numpy(), f["yd"].to_numpy()
    zz = float((zd * zd).sum())
    if zz <= 0:
        return 0.0, float("inf"), 0.0, float("inf")
    beta, cov = huber_fit(zd[:, None], yd)
    h_mean = float((zd * yd).sum() / zz)
    r = yd - h_mean * zd
    se_mean = float(np.sqrt((r * r).sum() / max(zd.size - 1, 1) / zz))
    return float(beta[0]), float(np.sqrt(max(cov[0, 0], 0.0))), h_mean, se_mean


#: A key whose per-call constant is at least this (ns) and this many standard errors explains
#: the growth of the gaps beside its calls (they are not host code that got slower).
EXPLAINS_NS = 700
EXPLAINS_Z = 4.0
#: Gaps next to no explaining call that host-code growth is measured on, at least.
MIN_CLEAN_GAPS = 100


def _tail(cell: np.ndarray, z: np.ndarray, r0: np.ndarray) -> tuple[float, float]:
    """Growth per ns of gap of what the calls' constants leave (``r0``) on these gaps: the
    within-cell robust slope plus the least-squares mean of what that leaves (a preempted thread
    loses a few gaps whole: heavy tails, host time no call explains), and its standard error."""
    if z.size < MIN_CLEAN_GAPS:  # too few gaps beside no explaining call to tell
        return 0.0, float("inf")
    h, _, _, _ = _within(cell, z, r0)
    resid = r0 - h * z
    zz = float((z * z).sum())
    if zz <= 0:
        return 0.0, float("inf")
    tail = float((z * resid).sum() / zz)
    r = resid - tail * z
    return h + tail, float(np.sqrt((r * r).sum() / max(z.size - 1, 1) / zz))


def least_size_shift(
    before: np.ndarray, after: np.ndarray, w_before: np.ndarray, w_after: np.ndarray
) -> float:
    """The shift ``c`` of the gap model's free direction (``before + c``, ``after − c``) that
    minimises ``Σ w_b (before + c)² + w_a (after − c)²`` over the keys given: weighted by their
    calls, they end as close to 0 as the fit allows. :func:`_recentred` takes it over every key;
    LA01's removal (``rules/_tolls._untolled_zero``) over the keys of no fired path only."""
    den = float(w_before.sum() + w_after.sum())
    return float(((w_after * after) - (w_before * before)).sum() / den) if den > 0 else 0.0


def _recentred(beta: np.ndarray, nk: int, kc: np.ndarray, pc: np.ndarray) -> np.ndarray:
    """The constants with the fit's free direction fixed. Every gap has a call after it and
    (but a step's first) one before it, so ``before[k] + c`` and ``after[k] − c`` for every key
    predict the same gaps: only ``before[k] + after[p]`` is identified, and the fit leaves ``c``
    to the few first gaps of the steps (±100 µs seen on a training step). Take the ``c`` of
    least weighted size ``Σ n_k (before[k]² + after[k]²)`` (calls of a key as weights): an
    untolled call then has ~0 on both sides, a tolled one its toll, and a removal that keeps
    only some keys' constants removes what those calls brought, not an arbitrary offset.
    ``kc`` / ``pc``: each gap's key and previous key as codes (``nk``: none)."""
    b, a = beta[:nk].copy(), beta[nk : 2 * nk].copy()
    w_b = np.bincount(kc, minlength=nk + 1)[:nk].astype(float)
    w_a = np.bincount(pc, minlength=nk + 1)[:nk].astype(float)
    if w_b.sum() + w_a.sum() <= 0:
        return beta
    c = least_size_shift(b, a, w_b, w_a)
    out = beta.copy()
    out[:nk], out[nk : 2 * nk] = b + c, a - c
    return out


def _predict(beta: np.ndarray, kc: np.ndarray, pc: np.ndarray, nk: int) -> np.ndarray:
    """``before[key] + after[prev_key]`` of each gap (codes ``nk``: no constant)."""
    b = np.append(beta[:nk], 0.0)
    a = np.append(beta[nk : 2 * nk], 0.0)
    return b[kc] + a[pc]


def huber_onehot(
    kc: np.ndarray, pc: np.ndarray, nk: int, y: np.ndarray, iters: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`huber_fit` of ``y ≈ before[kc] + after[pc]`` without building the design matrix:
    its columns are one-hot, so ``XᵀWX`` is the weighted counts of keys and (key, prev_key)
    cells and each iteration costs O(gaps) plus a (2 nk)² solve (a 400k-gap Nsight Systems
    pair: 0.1 s, not 1.5 s). The same estimates, the same covariance."""
    p = 2 * nk
    cell = kc * (nk + 1) + pc

    def normal(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = np.zeros((p, p))
        a[np.arange(nk), np.arange(nk)] = np.bincount(kc, w, nk + 1)[:nk]
        a[nk + np.arange(nk), nk + np.arange(nk)] = np.bincount(pc, w, nk + 1)[:nk]
        cross = np.bincount(cell, w, (nk + 1) ** 2).reshape(nk + 1, nk + 1)[:nk, :nk]
        a[:nk, nk:], a[nk:, :nk] = cross, cross.T
        rhs = np.concatenate(
            [np.bincount(kc, w * y, nk + 1)[:nk], np.bincount(pc, w * y, nk + 1)[:nk]]
        )
        return a, rhs

    return _irls(normal, lambda beta: _predict(beta, kc, pc, nk), y, p, iters)


def _pinv_sym(a: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Pseudo-inverse of a symmetric positive semi-definite matrix, eigenvalues below ``rtol``
    of the largest taken as 0. The normal equations square the design's condition: a key that
    always follows the same key leaves a null direction whose eigenvalue comes out ~1e-16 of the
    largest, not 0, and inverting it moved constants by 11 µs on a tiled Nsight Systems pair
    (lstsq on the design itself had no such problem; a key with 30 calls in 400k gaps has an
    eigenvalue ~1e-4 of the largest, far above the cut)."""
    lam, v = np.linalg.eigh(a)
    keep = lam > rtol * max(float(lam.max(initial=0.0)), 0.0)
    return (v[:, keep] / lam[keep]) @ v[:, keep].T


#: Parts of a step (by call order) the growth of host gaps is measured in separately.
STEP_WINDOWS = 10


def step_part() -> pl.Expr:
    """Which of ``STEP_WINDOWS`` parts of its step a matched call is in (its ordinal ``t_k``
    over the step's matched calls), as ``part``."""
    n = pl.col("t_k").max().over("rank", "idx") + 1
    return (pl.col("t_k") / n * STEP_WINDOWS).floor().cast(pl.Int64).alias("part")


def _parts(pos: np.ndarray) -> list[np.ndarray]:
    """Masks of the ``STEP_WINDOWS`` parts of the step (``pos``: :func:`step_part`) that hold
    ``MIN_CLEAN_GAPS`` gaps or more, in order."""
    masks = (pos == w for w in range(STEP_WINDOWS))
    return [sel for sel in masks if sel.sum() >= MIN_CLEAN_GAPS]


def _windows(pos: np.ndarray, cell: np.ndarray, z: np.ndarray, y: np.ndarray) -> tuple[float, ...]:
    """The within-cell growth per ns of gap (:func:`_within`) in each of ``STEP_WINDOWS`` parts of the step (the
    matched call's ordinal over the step's calls), for the parts with ``MIN_CLEAN_GAPS`` gaps
    and a finite standard error. A training step whose blocking copy lets the DataLoader's
    threads run at its start shows its long gaps growing there and shrinking later
    (torchvision, copies only: +0.60 per ns in the first tenth, −0.09 to −0.34 in the others),
    a CPU-bound neighbour slows them everywhere. ``pos``: each gap's part (:func:`step_part`)."""
    out = []
    for sel in _parts(pos):
        hw, se, _, _ = _within(cell[sel], z[sel], y[sel])
        if np.isfinite(se):
            out.append(float(hw))
    return tuple(out)


#: The median part of the step grows by at least this share of the whole step's growth per ns
#: of gap when host code is slower (a CPU-bound neighbour, a slower profiler session: +0.47 of
#: +0.64, +0.72 of +0.68), not when work moved within the step (-0.01 of +0.22).
HOLDS_SHARE = 0.5
#: Parts of the step with a growth estimate that the test needs (fewer: it is not made).
MIN_WINDOWS = 5


def _net(pos: np.ndarray, z: np.ndarray, r0: np.ndarray) -> tuple[float, tuple[float, ...]]:
    """Net growth per ns of gap (``GapModel.net``): ``r0`` (each gap's growth less its calls'
    constants) summed over the summed typical length ``z``, over all gaps and in each part of
    the step (``pos``) with ``MIN_CLEAN_GAPS`` gaps."""
    if z.size == 0 or z.sum() <= 0:
        return float("nan"), ()
    out = [float(r0[sel].sum() / z[sel].sum()) for sel in _parts(pos) if z[sel].sum() > 0]
    return float(r0.sum() / z.sum()), tuple(out)


def holds_across(windows: tuple[float, ...], h: float, share: float = HOLDS_SHARE) -> bool:
    """Whether growth of ``h`` per ns of gap holds across the step: true when there are too few
    parts to tell (``MIN_WINDOWS``) or nothing grew, else the median part's at least ``share``
    of ``h``."""
    if len(windows) < MIN_WINDOWS or h <= 0:
        return True
    return float(np.median(windows)) >= share * h


#: A host gap that grew this much (ns) beyond the growth of the same gap (same place in the
#: step) in the other steps lost a time slice: more than any per-call cost (a launch toll is
#: µs), less than the scheduler's slices a CPU-bound neighbour takes (0.75-4 ms under CFS).
BURST_NS = 300_000
#: Aligned steps the excursions need (a median of the same gap's growth over the others).
MIN_BURST_STEPS = 3


def _steps_of(m: pl.DataFrame) -> pl.DataFrame:
    """``m.select("rank", "idx").unique().sort("rank", "idx")``: matched calls come in (rank,
    idx) order, so each step's first row, when those rise strictly (else the unique and sort)."""
    keys = m.select("rank", "idx")
    firsts = keys.filter(~same_keys_as(["rank", "idx"], 1))
    if strictly_sorted(firsts, "rank", "idx") and firsts.null_count().sum_horizontal().item() == 0:
        return firsts
    return keys.unique().sort("rank", "idx")


def excursions(m: pl.DataFrame) -> tuple[np.ndarray, tuple[float, ...], pl.DataFrame | None]:
    """Each matched gap's growth beyond the median growth of the same gap (``b_k``) over the
    steps, where it is a burst (at least ``BURST_NS`` either way, else 0); each step's net sum
    of them and of the same bursts inside launch and other API calls (in step order, every
    step, 0 where none); and the bursting rows (rank, idx, t_ev_row, exc: in the gap before,
    exc_dur: in the call). A thread that loses whole time slices (a CPU-bound neighbour) grows
    a few gaps or calls by milliseconds in most steps; a toll grows the same ones in every step
    (the median takes it); the baseline's own bursts come out negative. Calls that wait for
    the GPU (syncs, copies) are left out: their growth can be the GPU's."""
    steps = _steps_of(m)
    if m.height == 0 or int(steps.group_by("rank").len()["len"].min()) < MIN_BURST_STEPS:
        return np.zeros(m.height), (), None
    own = pl.col("cls").is_in(["launch", "other"])

    def burst(col: str, on: pl.Expr) -> pl.Expr:
        e = (pl.col(col) - pl.col(col).median().over("rank", "b_k")).cast(pl.Float64)
        return pl.when(on & (e.abs() >= BURST_NS)).then(e).otherwise(0.0)

    e = m.select(
        "rank", "idx", "t_ev_row", burst("d_gap", pl.lit(True)).alias("exc"),
        burst("d_dur", own).alias("exc_dur"),
    )  # fmt: skip
    net = (pl.col("exc") + pl.col("exc_dur")).sum()
    per = steps.join(e.group_by("rank", "idx").agg(net.alias("n")), on=["rank", "idx"], how="left")
    rows = e.filter((pl.col("exc") != 0) | (pl.col("exc_dur") != 0))
    return e["exc"].to_numpy(), tuple(per["n"].fill_null(0.0).to_list()), rows


def gap_model(m: pl.DataFrame, min_gaps: int = 20, ids: dict[str, str] | None = None) -> GapModel:
    """Fit ``Δgap = before[key] + after[prev_key] + h × typical gap`` on matched calls.

    ``h`` from the variation within each (key, prev_key) cell (:func:`_within`); then the
    per-key constants by a robust fit (Huber) of what ``h`` leaves; ``h_mean``: the growth per ns
    of gap (:func:`_tail`) of the gaps next to no key that explains them. Gaps that burst
    (:func:`excursions`: lost time slices) are measured apart and left out of every fit. A
    launch's kernel gets constants of its own (``kept``) only with ``MIN_KEY_CALLS`` calls and
    where the gaps identify them (:func:`identified_keys`); else its launch path's."""
    if m.height < min_gaps:
        return GapModel({}, {}, {}, frozenset(), 0.0, float("inf"), m.height)
    n = m.group_by("key").len()
    kept = frozenset(
        n.filter((pl.col("len") >= MIN_KEY_CALLS) & pl.col("key").str.contains(":"))["key"]
    )
    exc, bursts, burst_rows = excursions(m)
    growth = float(m["d_gap"].sum()) / max(_steps_of(m).height, 1)
    # lost time slices are not the calls' nor h's; the columns read below only (a filter
    # copies every column it keeps: ~40 of a million matched calls)
    read = ("rank", "idx", "b_k", "t_k", "key", "prev_key", "b_gap", "d_gap")
    m = m.select(read).filter(pl.Series(exc == 0))
    kept = identified_keys(m, kept)
    # once per distinct key, not per gap: each column's keys numbered in one hash pass, their
    # coarse keys and the model's codes worked out on the distinct keys, read at each gap's
    raw = {c: codes_of(m.get_column(c)) for c in ("key", "prev_key")}
    coarse = {
        c: pl.DataFrame({c: r.values}).select(coarse_key(pl.col(c), kept)).to_series().to_list()
        for c, r in raw.items()
    }
    held = {c: np.unique(r.code.to_numpy()).tolist() for c, r in raw.items()}
    keys = sorted({coarse[c][i] for c in raw for i in held[c]} - {"start"})
    nk = len(keys)
    code = {k: i for i, k in enumerate(keys)}

    def codes(c: str) -> np.ndarray:  # nk: "start" (no column)
        at = {**code, "start": nk}
        table = np.array([at.get(k, -1) for k in coarse[c]], dtype=np.int64)
        return table[raw[c].code.to_numpy()]

    kc, pc = codes("key"), codes("prev_key")
    cell = _cells(kc, pc, keys)
    # the regressor is the gap's typical length at its place in the step (the median over the
    # steps of the baseline's gap at the same ordinal), not the baseline's own: noise in one
    # run's length regresses to the mean (a long baseline gap is followed by a shorter treatment
    # one) and reads as host code that got faster. One-step traces keep their own length.
    z = m.select(pl.col("b_gap").median().over("rank", "b_k").cast(pl.Float64))["b_gap"].to_numpy()
    y = m["d_gap"].to_numpy().astype(float)
    # the whole's and the parts' within-cell growth, side by side (ccdiag.parallel)
    pos = m.select(step_part()).to_series().to_numpy()
    # (one BLAS thread for both: :func:`_irls`; set here, not by each fit, which would restore
    # the other's setting when it ends first)
    with threadpool_limits(1, user_api="blas"):
        (h, h_se, _, _), windows = parallel.both(
            lambda: _within(cell, z, y), lambda: _windows(pos, cell, z, y)
        )
    # growth in proportion to the gaps' length that does not hold across the step is work that
    # moved within it, not slower code: the constants are fitted net of what holds (the median
    # part's), so a toll beside long gaps is not taken for their growth (torchvision without
    # ProfilerStep: h +0.22 overall, median tenth -0.01; the runtime launches' constants came
    # out -2.7 µs with 13.7 µs of median growth in the gap before each)
    h_fit = h if holds_across(windows, h) else max(float(np.median(windows)), 0.0)
    beta, cov = huber_onehot(kc, pc, nk, y - h_fit * z)
    var = {
        k: float(cov[i, i] + cov[nk + i, nk + i] + 2 * cov[i, nk + i]) for i, k in enumerate(keys)
    }
    # host code no call explains: only gaps next to no call whose own constant stands out (a
    # tolled launch's neighbours may grow by more than the toll: the emulator's or the driver's
    # side effects are the toll's, not slower host code)
    per = {k: float(beta[i] + beta[nk + i]) for i, k in enumerate(keys)}
    beta = _recentred(beta, nk, kc, pc)
    loud = {k for k in keys if per[k] >= EXPLAINS_NS and per[k] >= EXPLAINS_Z * np.sqrt(var[k])}
    # a launch path with one loud kernel explains all its kernels' gaps (the split of a toll
    # among a path's kernels, and between the gap before and after them, is not identified)
    loud |= {k for k in keys if k.split(":")[0] in {q.split(":")[0] for q in loud}}
    loud_c = np.zeros(nk + 1, dtype=bool)
    loud_c[[code[k] for k in loud]] = True
    clean = ~(loud_c[kc] | loud_c[pc])
    r0 = y - _predict(beta, kc, pc, nk)
    h_mean, h_mean_se = _tail(cell[clean], z[clean], r0[clean])
    net, net_windows = _net(pos, z, r0)
    return GapModel(
        before={k: float(beta[i]) for i, k in enumerate(keys)},
        after={k: float(beta[nk + i]) for i, k in enumerate(keys)},
        var=var,
        kept=kept,
        h=h,
        h_se=h_se,
        n=m.height,
        h_mean=h_mean,
        h_mean_se=h_mean_se,
        h_windows=windows,
        net=net,
        net_windows=net_windows,
        names=_names(keys, ids or {}),
        bursts=bursts,
        burst_rows=burst_rows,
        gap_growth=growth,
    )


def _names(keys: list[str], ids: dict[str, str]) -> dict[str, str]:
    """Each fine key (``path:<id>``) of ``keys`` -> ``path:<kernel name>`` (``ids``: name -> id)."""
    name_of = {i: n for n, i in ids.items()}
    out = {}
    for k in keys:
        path, _, kid = k.partition(":")
        if kid in name_of:
            out[k] = f"{path}:{name_of[kid]}"
    return out


def call_growth_removal(matched: pl.DataFrame) -> Removal:
    """A removal that takes each matched call's growth out of the treatment's call (clipped to
    the traced call): setup calls, for one."""
    grown = pl.min_horizontal(pl.col("d_dur").clip(lower_bound=0), "t_raw_dur")
    calls = call_rows(matched, "t_ev_row", dur=grown)
    return Removal(calls=calls.filter(pl.col("dur_ns") > 0))


def gpu_growth_removal(matched_gpu: pl.DataFrame, classes: list[str]) -> Removal:
    """A removal that takes each matched GPU row's growth out of the treatment's row (rows of
    the GPU ``classes`` only)."""
    if matched_gpu.height == 0 or "t_ev_row" not in matched_gpu.columns:
        return Removal()
    gpu = matched_gpu.filter(pl.col("gclass").is_in(classes)).select(
        pl.col("t_ev_row").alias("ev_row"), pl.col("d_dur").clip(lower_bound=0).alias("dur_ns")
    )
    return Removal(gpu=gpu.filter(pl.col("dur_ns") > 0).cast(REMOVAL_GPU))
