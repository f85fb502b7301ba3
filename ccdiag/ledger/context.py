"""The per-pair context: the pair plus every derived frame of its model, computed once.

The engine, the rules (through :class:`ccdiag.rules._base.RuleContext`, an alias), the evidence
series, the timeline and annotate all read the same :class:`PairContext` (:meth:`PairContext.of`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import polars as pl

from ccdiag import parallel
from ccdiag.ledger import align
from ccdiag.ledger.control import gap_shape, host_slowdown, toll_fit
from ccdiag.ledger.critical import critical_windows, exposure
from ccdiag.ledger.critical import ledger as step_ledger
from ccdiag.ledger.gpu import copy_table, gpu_busy
from ccdiag.ledger.host import host_calls, host_intervals, launching_op_names, op_calls
from ccdiag.ledger.stats import aligned_delta
from ccdiag.ledger.vocab import (
    GPU_CATEGORIES,
    GPU_CLASSES,
    HOST_CATEGORIES,
    OP_CATEGORIES,
    event_names,
    is_kernel_launch,
    per_value,
)

if TYPE_CHECKING:
    from ccdiag.pairing import Pair, Side


class PairContext:
    """The pair plus derived frames, computed lazily and shared by all rules.

    Use :meth:`of` to get the pair's one context: every frame is then computed once per pair,
    whoever asks (the engine, the evidence series, the timeline, annotate)."""

    @classmethod
    def of(cls, pair: Pair) -> PairContext:
        """The pair's context, built on first use and kept with the pair."""
        ctx = pair.derived.get("rule_context")
        if ctx is None:
            ctx = pair.derived["rule_context"] = cls(pair)
        return ctx  # type: ignore[no-any-return]

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.host_only = pair.mode == "host_only"
        self.op_mode = pair.op_mode  # host-only with cpu_ops only: the ledger is made of ops
        self.host_categories = OP_CATEGORIES if self.op_mode else HOST_CATEGORIES
        self.categories = self.host_categories if self.op_mode else HOST_CATEGORIES + GPU_CATEGORIES
        # each run's GPU busy runs by grouping (ccdiag.ledger.critical.critical_windows): the
        # same for every window set of that run
        self.gpu_runs: dict[str, dict[tuple[str, ...], pl.DataFrame]] = {"b": {}, "t": {}}

    def warm(self) -> None:
        """Compute the frames every GPU pair's rules read, the baseline's beside the
        treatment's and independent frames side by side (:mod:`ccdiag.parallel`), in stages
        whose members only read frames of earlier stages: the same frames the rules would
        compute one after the other, sooner (the rules then run side by side too). A frame
        that fails here is left uncomputed: the rule that reads it computes it again and fails
        as it would have."""
        if self.host_only or self.op_mode or parallel.workers() == 1:
            return

        def get(*names: str) -> Callable[[], None]:
            def run() -> None:
                for n in names:
                    try:
                        getattr(self, n)
                    except Exception:  # noqa: BLE001 - raised again where a rule reads it
                        return

            return run

        # the call tables one after the other: side by side they saved 0.2 s of 0.9 on a
        # 200 MB Nsight Systems pair and raised a 1 GB Kineto pair's peak by ~100 MB (two
        # tables' temporaries at once), for no time there
        get("calls_b", "calls_t")()
        get("kernel_ids", "_kinds")()
        parallel.run_all(
            [get("seq_b", "crit_b", "intervals_b"), get("seq_t", "crit_t", "intervals_t")]
        )
        # the gap model's fits offer a piece to the worker, which takes it once the ledger is
        # done; the rest (gap shape, GPU busy, ...) the rules compute, side by side themselves
        parallel.run_all([get("matched", "gap_fit"), get("ledger")])

    @cached_property
    def _launching_ops(self) -> pl.Series:
        b = self.pair.baseline
        return launching_op_names(b.trace.events, b.windows, b.threads)

    def _calls(self, s: Side) -> pl.DataFrame:
        if self.op_mode:
            return op_calls(s.trace.events, s.windows, s.threads, self._launching_ops)
        return host_calls(s.trace.events, s.windows, s.threads, self.pair.whole_program)

    @cached_property
    def calls_b(self) -> pl.DataFrame:
        return self._calls(self.pair.baseline)

    @cached_property
    def calls_t(self) -> pl.DataFrame:
        return self._calls(self.pair.treatment)

    @cached_property
    def intervals_b(self) -> pl.DataFrame:
        """The baseline's labelled host intervals (:func:`ccdiag.ledger.host.host_intervals`)."""
        return host_intervals(self.calls_b, self.pair.baseline.windows)

    @cached_property
    def intervals_t(self) -> pl.DataFrame:
        return host_intervals(self.calls_t, self.pair.treatment.windows)

    def aligned_steps(self, frame: pl.DataFrame, side: str) -> pl.DataFrame:
        """Join a per-step frame (rank, step, ...) onto the aligned index (rank, idx)."""
        a = self.pair.aligned.select("rank", "idx", pl.col(f"{side}_step").alias("step"))
        return a.join(frame, on=["rank", "step"], how="left").drop("step")

    @cached_property
    def ledger(self) -> pl.DataFrame:
        """Aligned steps with b_/t_/d_ of step_ns, every category and every ``<host cat>_total``."""
        cols = ("step_ns", *self.categories, *[f"{c}_total" for c in self.host_categories])

        def side(s: Side, p: str) -> pl.DataFrame:
            calls = self.calls_b if p == "b" else self.calls_t
            win = self.crit_b if p == "b" else self.crit_t
            iv = self.intervals_b if p == "b" else self.intervals_t
            led = step_ledger(calls, s.gpu, s.windows, win, self.op_mode, iv)
            return self.aligned_steps(led, p).rename({c: f"{p}_{c}" for c in cols})

        sb, st = parallel.both(
            lambda: side(self.pair.baseline, "b"), lambda: side(self.pair.treatment, "t")
        )
        j = sb.join(st, on=["rank", "idx"]).fill_null(0)
        return j.with_columns((pl.col(f"t_{c}") - pl.col(f"b_{c}")).alias(f"d_{c}") for c in cols)

    @cached_property
    def slowdown(self) -> dict[str, Any]:
        """General host slowdown outside CUDA calls (``ccdiag.ledger.host_slowdown``). Without cpu_ops
        (Nsight traces) also ``gap_slope``: the slope of the quantile fit of the host gaps before
        kernel launches (``ccdiag.ledger.toll_fit``), a toll being the fit's constant."""
        b, t = self.pair.baseline.trace.events, self.pair.treatment.trace.events
        out = host_slowdown(b, t)
        if out["op_kinds"] == 0 and not self.op_mode:

            def gaps(c: pl.DataFrame, ev: pl.DataFrame) -> pl.Series:
                # the name matching once per distinct name of the events, not per call
                launches = c.select("name", "gap_ns", "ev_row").filter(c["cls"] == "launch")
                names = event_names(ev).at(launches.get_column("ev_row"))
                kl = per_value(launches, "name", {"_kl": is_kernel_launch()}, names)
                return kl.filter(pl.col("_kl")).get_column("gap_ns")

            gb, gt = gaps(self.calls_b, b), gaps(self.calls_t, t)
            fit = toll_fit(gb, gt)
            out["gap_slope"] = fit["slope"] if min(gb.len(), gt.len()) >= 100 else None
        return out

    @cached_property
    def crit_b(self) -> pl.DataFrame:
        """GPU-critical windows of the baseline (rank, step, ws, we)."""
        calls = self.calls_b.clear() if self.host_only else self.calls_b
        return critical_windows(calls, self.pair.baseline.gpu, self.gpu_runs["b"])

    @cached_property
    def crit_t(self) -> pl.DataFrame:
        calls = self.calls_t.clear() if self.host_only else self.calls_t
        return critical_windows(calls, self.pair.treatment.gpu, self.gpu_runs["t"])

    def exposed_calls(self, side: str, cls: str) -> pl.DataFrame:
        """Main-thread calls of one class with ``exposed_ns`` (outside GPU-critical windows)."""
        calls = (self.calls_b if side == "b" else self.calls_t).filter(pl.col("cls") == cls)
        iv = calls.select(
            "rank", "step", "name", pl.col("eff_start").alias("a"), pl.col("end_ns").alias("b")
        )
        return exposure(iv, self.crit_b if side == "b" else self.crit_t)

    def category_growth(
        self, per_side: Callable[[str], pl.DataFrame], cats: tuple[str, ...]
    ) -> pl.DataFrame:
        """Per aligned step (rank, idx): treatment minus baseline ns (``d_<cat>``) of each
        category of a (rank, step, cat, ns) table computed per run (``per_side("b" | "t")``)."""

        def wide(p: str) -> pl.DataFrame:
            t = per_side(p)
            w = t.pivot("cat", index=["rank", "step"], values="ns", aggregate_function="sum")
            return w.with_columns(pl.lit(0.0).alias(c) for c in cats if c not in w.columns)

        wb, wt = parallel.both(lambda: wide("b"), lambda: wide("t"))
        d = aligned_delta(self.pair.aligned, wb, wt, list(cats))
        return d.select("rank", "idx", *[pl.col(f"d_{c}").cast(pl.Float64) for c in cats])

    @cached_property
    def busy(self) -> pl.DataFrame:
        """Aligned steps with b_/t_/d_ GPU busy ns per class (and 'all')."""
        classes = (*GPU_CLASSES, "all")

        def wide(s: Side, p: str) -> pl.DataFrame:
            if s.gpu.height == 0:
                return self.pair.aligned.select("rank", "idx")
            w = gpu_busy(s.gpu).pivot("gclass", index=["rank", "step"], values="busy_ns")
            w = w.rename({c: f"{p}_{c}" for c in classes if c in w.columns})
            return self.aligned_steps(w, p)

        wb, wt = parallel.both(
            lambda: wide(self.pair.baseline, "b"), lambda: wide(self.pair.treatment, "t")
        )
        j = wb.join(wt, on=["rank", "idx"])
        cols = [
            pl.col(f"{p}_{c}").fill_null(0)
            if f"{p}_{c}" in j.columns
            else pl.lit(0).alias(f"{p}_{c}")
            for p in ("b", "t")
            for c in classes
        ]
        j = j.with_columns(cols)
        return j.with_columns(
            (pl.col(f"t_{c}") - pl.col(f"b_{c}")).alias(f"d_{c}") for c in classes
        )

    @cached_property
    def copies_b(self) -> pl.DataFrame:
        return copy_table(self.calls_b) if not self.op_mode else self.calls_b.clear()

    @cached_property
    def copies_t(self) -> pl.DataFrame:
        return copy_table(self.calls_t) if not self.op_mode else self.calls_t.clear()

    @cached_property
    def seq_b(self) -> pl.DataFrame:
        """The baseline's main-thread calls in the aligned steps, in order
        (:func:`ccdiag.ledger.align.sequence`)."""
        names = event_names(self.pair.baseline.trace.events)
        return align.sequence(self.calls_b, self.pair.aligned, "b", self.kernel_ids, names)

    @cached_property
    def seq_t(self) -> pl.DataFrame:
        names = event_names(self.pair.treatment.trace.events)
        return align.sequence(self.calls_t, self.pair.aligned, "t", self.kernel_ids, names)

    @cached_property
    def kernel_ids(self) -> dict[str, str]:
        """The two runs' kernel names as the short ids the call sequences' keys carry
        (:func:`ccdiag.ledger.align.kernel_ids`)."""
        return align.kernel_ids(self.calls_b, self.calls_t)

    @cached_property
    def matched(self) -> pl.DataFrame:
        """The two runs' main-thread calls matched one to one (:func:`ccdiag.ledger.align.match_calls`)."""
        if self.op_mode:
            return self.calls_t.clear()
        seqs = (self.seq_b, self.seq_t)
        return align.match_calls(self.calls_b, self.calls_t, self.pair.aligned, seqs)

    @cached_property
    def gap_fit(self) -> align.GapModel:
        """How the matched host gaps grew, per neighbouring call and in proportion to their
        length (:func:`ccdiag.ledger.align.gap_model`)."""
        return align.gap_model(self.matched, ids=self.kernel_ids)

    @cached_property
    def gap_shape(self) -> dict[str, Any]:
        """Whether the gaps beside the launches shifted or stretched
        (:func:`ccdiag.ledger.control.gap_shape`)."""
        return gap_shape(self.matched)

    @cached_property
    def matched_gpu(self) -> pl.DataFrame:
        """The two runs' GPU rows matched by (name, k-th occurrence) per aligned step."""
        return align.match_gpu(self.pair.baseline.gpu, self.pair.treatment.gpu, self.pair.aligned)

    @cached_property
    def _kinds(self) -> dict[str, set[str]]:
        def of(s: Side) -> set[str]:
            return set(s.trace.events["kind"].unique().cast(pl.String).to_list())

        return {"b": of(self.pair.baseline), "t": of(self.pair.treatment)}

    def kinds(self, side: str) -> set[str]:
        """Event kinds present in one run (``b`` or ``t``)."""
        return self._kinds[side]
