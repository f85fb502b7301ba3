"""The Rule base class, the outcome and finding values, and the context rules read.

A rule is one class in one file (``rules/<name_snake>.py``). Its class attributes are validated
when the class is defined (``__init_subclass__``), the way sqlfluff validates rules in its
metaclass: a bad code, name, mechanism, missing docstring heading or undocumented option fails at
import time, not in a report.

A rule does not decide how many nanoseconds its mechanism gets. It *claims* ledger categories
(host time of the main thread, see ``_expr.HOST_CATEGORIES``) and GPU-wait shares, per aligned
step; the engine (``ccdiag.engine``) reconciles all claims into one partition of the delta.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import polars as pl
from ccdiag.rules import _expr as ex

from ccdiag.schema import Kind
from ccdiag.verdict import MECHANISMS, Recommendation

if TYPE_CHECKING:
    from ccdiag.pairing import Pair, Side

HEADINGS = (
    "## What it detects",
    "## Why it costs time",
    "## Evidence",
    "## Example",
    "## Fix",
    "## Limits",
    "## Options",
    "## References",
)
CODE_RE = re.compile(r"^[A-Z]{2}\d{2}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")
CLAIM_SCHEMA = {"rank": pl.Int32, "idx": pl.Int64, "category": pl.String, "ns": pl.Float64}


def opt(default: Any, doc: str) -> Any:
    """An option field with its one-line definition (shown in docs and ``ccdiag explain``)."""
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Interaction:
    """Time another mechanism claimed that exists only because both mechanisms act.

    Example: under CC a copy's host-side padding overlaps the GPU's queued work while the copy
    stays asynchronous; once the copy blocks first, the padding runs with the GPU idle. The
    exposed padding is claimed by ``serialized_copies`` (its category), but without the blocking
    most of it would be hidden. Such a term has no single owner; the engine splits it by the
    Shapley value of a two-player interaction: ``fraction`` (one half) goes to the finding that
    declares it. ``ns`` (rank, idx, ns) is the per-step size of the interaction; the engine never
    moves more than ``partner`` actually holds in ``category``.
    """

    partner: str
    category: str
    ns: pl.DataFrame
    fraction: float = 0.5
    how: str = ""


@dataclass(frozen=True)
class Finding:
    """What a rule found: claims on the ledger, evidence, confidence, facts for the fixes."""

    code: str
    mechanism: str
    claims: pl.DataFrame  # rank, idx, category, ns (>= 0)
    summary: str
    evidence: dict[str, Any]
    confidence: Literal["low", "medium", "high"]
    facts: dict[str, Any] = field(default_factory=dict)
    interactions: tuple[Interaction, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """fired (with a finding), clean (checked, nothing found) or skipped (could not check)."""

    status: Literal["fired", "clean", "skipped"]
    reason: str = ""
    finding: Finding | None = None

    @classmethod
    def fired(cls, finding: Finding) -> Outcome:
        return cls("fired", finding.summary, finding)

    @classmethod
    def clean(cls, reason: str) -> Outcome:
        return cls("clean", reason)

    @classmethod
    def skipped(cls, reason: str) -> Outcome:
        return cls("skipped", reason)


def claims(frame: pl.DataFrame, category: str, col: str) -> pl.DataFrame:
    """Claims of one category from a frame with rank, idx and a per-step ns column."""
    return frame.select(
        pl.col("rank").cast(pl.Int32),
        pl.col("idx").cast(pl.Int64),
        pl.lit(category).alias("category"),
        pl.col(col).cast(pl.Float64).clip(lower_bound=0).alias("ns"),
    )


def no_claims() -> pl.DataFrame:
    return pl.DataFrame(schema=CLAIM_SCHEMA)


class RuleContext:
    """The pair plus derived frames, computed lazily and shared by all rules.

    Use :meth:`of` to get the pair's one context: every frame is then computed once per pair,
    whoever asks (the engine, the evidence series, the timeline, annotate)."""

    @classmethod
    def of(cls, pair: Pair) -> RuleContext:
        """The pair's context, built on first use and kept with the pair."""
        ctx = pair.derived.get("rule_context")
        if ctx is None:
            ctx = pair.derived["rule_context"] = cls(pair)
        return ctx  # type: ignore[no-any-return]

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.host_only = pair.mode == "host_only"
        self.op_mode = pair.op_mode  # host-only with cpu_ops only: the ledger is made of ops
        self.host_categories = ex.OP_CATEGORIES if self.op_mode else ex.HOST_CATEGORIES
        self.categories = (
            self.host_categories if self.op_mode else ex.HOST_CATEGORIES + ex.GPU_CATEGORIES
        )

    @cached_property
    def _launching_ops(self) -> pl.Series:
        b = self.pair.baseline
        return ex.launching_op_names(b.trace.events, b.windows, b.threads)

    def _calls(self, s: Side) -> pl.DataFrame:
        if self.op_mode:
            return ex.op_calls(s.trace.events, s.windows, s.threads, self._launching_ops)
        return ex.host_calls(s.trace.events, s.windows, s.threads, self.pair.whole_program)

    @cached_property
    def calls_b(self) -> pl.DataFrame:
        return self._calls(self.pair.baseline)

    @cached_property
    def calls_t(self) -> pl.DataFrame:
        return self._calls(self.pair.treatment)

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
            led = ex.ledger(calls, s.gpu, s.windows, win, self.op_mode)
            return self.aligned_steps(led, p).rename({c: f"{p}_{c}" for c in cols})

        j = (
            side(self.pair.baseline, "b")
            .join(side(self.pair.treatment, "t"), on=["rank", "idx"])
            .fill_null(0)
        )
        return j.with_columns((pl.col(f"t_{c}") - pl.col(f"b_{c}")).alias(f"d_{c}") for c in cols)

    @cached_property
    def slowdown(self) -> dict[str, Any]:
        """General host slowdown outside CUDA calls (``_expr.host_slowdown``). Without cpu_ops
        (Nsight traces) also ``gap_slope``: the slope of the quantile fit of the host gaps before
        kernel launches (``_expr.toll_fit``), a toll being the fit's constant."""
        b, t = self.pair.baseline.trace.events, self.pair.treatment.trace.events
        out = ex.host_slowdown(b, t)
        if out["op_kinds"] == 0 and not self.op_mode:
            gb, gt = (
                c.filter((pl.col("cls") == "launch") & ex.is_kernel_launch())["gap_ns"]
                for c in (self.calls_b, self.calls_t)
            )
            fit = ex.toll_fit(gb, gt)
            out["gap_slope"] = fit["slope"] if min(gb.len(), gt.len()) >= 100 else None
        return out

    @cached_property
    def crit_b(self) -> pl.DataFrame:
        """GPU-critical windows of the baseline (rank, step, ws, we)."""
        return ex.critical_windows(
            self.calls_b.clear() if self.host_only else self.calls_b, self.pair.baseline.gpu
        )

    @cached_property
    def crit_t(self) -> pl.DataFrame:
        return ex.critical_windows(
            self.calls_t.clear() if self.host_only else self.calls_t, self.pair.treatment.gpu
        )

    def exposed_calls(self, side: str, cls: str) -> pl.DataFrame:
        """Main-thread calls of one class with ``exposed_ns`` (outside GPU-critical windows)."""
        calls = (self.calls_b if side == "b" else self.calls_t).filter(pl.col("cls") == cls)
        iv = calls.select(
            "rank", "step", "name", pl.col("eff_start").alias("a"), pl.col("end_ns").alias("b")
        )
        return ex.exposure(iv, self.crit_b if side == "b" else self.crit_t)

    def post_copy_exposure(self, side: str) -> pl.DataFrame:
        """Exposed host ns per step and category in the host time that follows async host copies
        for as long as the baseline's host work overlapped them (``_expr.post_copy_segments``):
        rank, step, cat, ns."""
        calls = self.calls_b if side == "b" else self.calls_t
        s = self.pair.baseline if side == "b" else self.pair.treatment
        lengths = ex.overlap_lengths(self.calls_b)
        if side == "t":
            a = self.pair.aligned.select("rank", pl.col("b_step").alias("step"), "t_step")
            lengths = lengths.join(a, on=["rank", "step"]).drop("step").rename({"t_step": "step"})
        seg = ex.post_copy_segments(calls, lengths)
        iv = ex.clip_to_segments(ex.host_intervals(calls, s.windows), seg)
        iv = ex.exposure(iv, self.crit_b if side == "b" else self.crit_t)
        return iv.group_by("rank", "step", "cat").agg(pl.col("exposed_ns").sum().alias("ns"))

    def copy_window_classes(self, side: str) -> pl.DataFrame:
        """GPU-critical ns per step and GPU category in windows ended by blocked async host
        copies (``_expr.copy_windows``): rank, step, cat, ns."""
        calls = self.calls_b if side == "b" else self.calls_t
        gpu = (self.pair.baseline if side == "b" else self.pair.treatment).gpu
        if self.host_only or gpu.height == 0:
            return pl.DataFrame(
                schema={"rank": pl.Int32, "step": pl.Int32, "cat": pl.String, "ns": pl.Float64}
            )
        return ex.window_classes(ex.copy_windows(calls, gpu), gpu)

    def category_growth(
        self, per_side: Callable[[str], pl.DataFrame], cats: tuple[str, ...]
    ) -> pl.DataFrame:
        """Per aligned step (rank, idx): treatment minus baseline ns (``d_<cat>``) of each
        category of a (rank, step, cat, ns) table computed per run (``per_side("b" | "t")``)."""

        def wide(p: str) -> pl.DataFrame:
            t = per_side(p)
            w = t.pivot("cat", index=["rank", "step"], values="ns", aggregate_function="sum")
            return w.with_columns(pl.lit(0.0).alias(c) for c in cats if c not in w.columns)

        d = ex.aligned_delta(self.pair.aligned, wide("b"), wide("t"), list(cats))
        return d.select("rank", "idx", *[pl.col(f"d_{c}").cast(pl.Float64) for c in cats])

    @cached_property
    def busy(self) -> pl.DataFrame:
        """Aligned steps with b_/t_/d_ GPU busy ns per class (and 'all')."""
        classes = (*ex.GPU_CLASSES, "all")

        def wide(s: Side, p: str) -> pl.DataFrame:
            if s.gpu.height == 0:
                return self.pair.aligned.select("rank", "idx")
            w = ex.gpu_busy(s.gpu).pivot("gclass", index=["rank", "step"], values="busy_ns")
            w = w.rename({c: f"{p}_{c}" for c in classes if c in w.columns})
            return self.aligned_steps(w, p)

        j = wide(self.pair.baseline, "b").join(wide(self.pair.treatment, "t"), on=["rank", "idx"])
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
        return ex.copy_table(self.calls_b) if not self.op_mode else self.calls_b.clear()

    @cached_property
    def copies_t(self) -> pl.DataFrame:
        return ex.copy_table(self.calls_t) if not self.op_mode else self.calls_t.clear()

    @cached_property
    def _kinds(self) -> dict[str, set[str]]:
        def of(s: Side) -> set[str]:
            return set(s.trace.events["kind"].unique().cast(pl.String).to_list())

        return {"b": of(self.pair.baseline), "t": of(self.pair.treatment)}

    def kinds(self, side: str) -> set[str]:
        """Event kinds present in one run (``b`` or ``t``)."""
        return self._kinds[side]


class Rule:
    """Base class of every rule. Subclasses set the class attributes below and ``evaluate``."""

    code: ClassVar[str]
    name: ClassVar[str]
    mechanism: ClassVar[str]
    requires: ClassVar[frozenset[Kind]]
    requires_gpu: ClassVar[bool] = True
    Options: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        where = f"rule {cls.__name__}"
        if not CODE_RE.match(getattr(cls, "code", "")):
            raise TypeError(f"{where}: code must be two capitals and two digits, e.g. LA01")
        if not NAME_RE.match(getattr(cls, "name", "")):
            raise TypeError(f"{where}: name must be kebab-case naming the mechanism")
        if cls.name.split("-")[0] in ("use", "avoid", "disallow", "no", "prefer"):
            raise TypeError(f"{where}: name must name the mechanism, not the fix")
        if getattr(cls, "mechanism", None) not in MECHANISMS:
            raise TypeError(f"{where}: mechanism must be one of {MECHANISMS}")
        req = getattr(cls, "requires", None)
        if not isinstance(req, frozenset) or not all(isinstance(k, Kind) for k in req):
            raise TypeError(f"{where}: requires must be a frozenset of Kind")
        _check_options(cls, where)
        _check_doc(cls, where)

    def __init__(self, **overrides: Any) -> None:
        self.options = self.Options(**overrides)

    @classmethod
    def summary(cls) -> str:
        """The docstring's first line."""
        return inspect.getdoc(cls).splitlines()[0].strip()  # type: ignore[union-attr]

    @classmethod
    def option_docs(cls) -> list[tuple[str, Any, str]]:
        """(name, default, definition) of every option."""
        return [(f.name, f.default, f.metadata["doc"]) for f in dataclasses.fields(cls.Options)]

    def check(self, ctx: RuleContext) -> Outcome | None:
        """Skip when the required kinds are missing; None when the rule can run."""
        if self.requires_gpu and ctx.host_only:
            return Outcome.skipped("treatment has no GPU activity (CC mode 'on'); needs GPU events")
        missing = {k.value for k in self.requires} - (ctx.kinds("b") | ctx.kinds("t"))
        if missing:
            return Outcome.skipped(f"no {', '.join(sorted(missing))} events in either trace")
        return None

    def run(self, ctx: RuleContext) -> Outcome:
        """check, then evaluate."""
        return self.check(ctx) or self.evaluate(ctx)

    def evaluate(self, ctx: RuleContext) -> Outcome:  # pragma: no cover - abstract
        raise NotImplementedError

    def recommend(
        self, ctx: RuleContext, finding: Finding, ns: int, delta: int
    ) -> list[Recommendation]:
        """Fixes with predicted recovery, given the ns per step the engine attributed."""
        return []

    def fired(
        self,
        claims_: pl.DataFrame,
        summary: str,
        evidence: dict[str, Any],
        confidence: Literal["low", "medium", "high"],
        interactions: tuple[Interaction, ...] = (),
        **facts: Any,
    ) -> Outcome:
        """A fired outcome with this rule's finding."""
        f = self.finding(claims_, summary, evidence, confidence, **facts)
        return Outcome.fired(dataclasses.replace(f, interactions=interactions))

    def finding(
        self,
        claims_: pl.DataFrame,
        summary: str,
        evidence: dict[str, Any],
        confidence: Literal["low", "medium", "high"],
        **facts: Any,
    ) -> Finding:
        """Build this rule's finding."""
        return Finding(self.code, self.mechanism, claims_, summary, evidence, confidence, facts)


def recommendation(fix: str, ns: float, delta: int, text: str, method: str) -> Recommendation:
    """A recommendation with its share of the step delta."""
    ns_i = max(int(ns), 0)
    return Recommendation(
        fix=fix,
        predicted_recovery_ns_per_step=ns_i,
        share=round(ns_i / delta, 4) if delta > 0 else 0.0,
        text=text,
        method=method,
    )


def _check_options(cls: type, where: str) -> None:
    opts = getattr(cls, "Options", None)
    if opts is None or not dataclasses.is_dataclass(opts):
        raise TypeError(f"{where}: Options must be a dataclass")
    if not getattr(opts, "__dataclass_params__").frozen:  # noqa: B009 (typed as a class)
        raise TypeError(f"{where}: Options must be frozen")
    for f in dataclasses.fields(opts):
        if f.default is dataclasses.MISSING or not f.metadata.get("doc"):
            raise TypeError(f"{where}: option {f.name} needs a default and a doc (use opt())")


def _check_doc(cls: type, where: str) -> None:
    doc = inspect.getdoc(cls) or ""
    pos = [doc.find(h) for h in HEADINGS]
    if not doc or any(p < 0 for p in pos):
        missing = [h for h, p in zip(HEADINGS, pos) if p < 0]
        raise TypeError(f"{where}: docstring lacks {missing}")
    if pos != sorted(pos):
        raise TypeError(f"{where}: docstring headings out of order")
