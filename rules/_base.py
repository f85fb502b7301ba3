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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import polars as pl

from ccdiag.ledger import PairContext
from ccdiag.ledger.removal import Removal
from ccdiag.ledger.vocab import CALL_CLASSES, GPU_CATEGORIES, HOST_CATEGORIES, OP_CATEGORIES
from ccdiag.schema import Kind
from ccdiag.verdict import MECHANISMS, Recommendation

if TYPE_CHECKING:
    pass

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
class TimeShare:
    """A share of the thread's runnable time that this finding's mechanism takes (a CPU-bound
    neighbour's time slices), and the mechanisms whose costs run on the same CPU (``partners``:
    a launch toll is paid on the CPU, spun beside the call or inside it). The neighbour takes
    the same share of the time those costs add, so part of this finding's claim exists only
    because a partner acts; the replay removes each mechanism at its measured size and cannot
    see it. The engine gives each fired partner half of ``share`` × its paid cost per step (the
    Shapley value of the two-player interaction), at most what this finding holds."""

    share: float
    partners: tuple[str, ...]


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
    #: The mechanism's measured costs taken out of the treatment (its counterfactual for the
    #: replay attribution); None: the engine keeps the ledger's share for it.
    removal: Removal | None = None
    #: a share of the thread's runnable time taken alongside partners' CPU-busy costs
    time_share: TimeShare | None = None


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


#: The per-pair context rules read (the core's :class:`ccdiag.ledger.PairContext`).
RuleContext = PairContext


class Rule:
    """Base class of every rule. Subclasses set the class attributes below and ``evaluate``."""

    code: ClassVar[str]
    name: ClassVar[str]
    mechanism: ClassVar[str]
    requires: ClassVar[frozenset[Kind]]
    requires_gpu: ClassVar[bool] = True
    #: Ledger categories the rule claims (``ccdiag.ledger.vocab``): who claims ``gap_launch`` is
    #: visible here, without reading ``evaluate``.
    claimed: ClassVar[frozenset[str]]
    #: Call classes whose matched deltas the rule measures its paid cost from (may be empty).
    call_classes: ClassVar[frozenset[str]]
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
        _check_claims(cls, where)
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
        removal: Removal | None = None,
        time_share: TimeShare | None = None,
        **facts: Any,
    ) -> Outcome:
        """A fired outcome with this rule's finding (``removal``: its counterfactual)."""
        f = self.finding(claims_, summary, evidence, confidence, **facts)
        return Outcome.fired(
            dataclasses.replace(
                f, interactions=interactions, removal=removal, time_share=time_share
            )
        )

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


ALL_CATEGORIES = frozenset(HOST_CATEGORIES + GPU_CATEGORIES + OP_CATEGORIES)


def _check_claims(cls: type, where: str) -> None:
    claimed, classes = getattr(cls, "claimed", None), getattr(cls, "call_classes", None)
    if not isinstance(claimed, frozenset) or not claimed or not claimed <= ALL_CATEGORIES:
        raise TypeError(
            f"{where}: claimed must be a non-empty frozenset of {sorted(ALL_CATEGORIES)}"
        )
    if not isinstance(classes, frozenset) or not classes <= frozenset(CALL_CLASSES):
        raise TypeError(f"{where}: call_classes must be a frozenset of {CALL_CLASSES}")


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
