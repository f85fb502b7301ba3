"""The diagnosis as data: the JSON contract of ``ccdiag analyze --json`` and ``ccdiag report``.

Pydantic models, so the contract has a published JSON Schema (``ccdiag schema``) and every
report is validated before it is written. Rendering (text, Markdown, HTML, figures) lives in
``ccdiag.report`` and ``ccdiag.app``, never here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.3"
"""Contract version, ``major.minor``: a minor bump only adds optional fields (1.1:
``generated_at``; 1.2: ``ranks``, ``stragglers``, ``scheduler``, ``job``; 1.3: ``Attribution.method``,
``paid_ns_per_step``, ``ledger_ns_per_step``, ``alone_ns_per_step`` and ``Partition.method``,
``replay``); a major bump breaks readers and gets a new ``docs/schema/report-v<major>.json``."""

MECHANISMS = (
    "launch_toll",
    "serialized_copies",
    "blocked_non_blocking",
    "encrypted_collectives",
    "uvm_migration",
    "sync_stall",
    "one_time_setup",
    "host_slowdown",
)
"""Mechanism ids. ``unattributed`` is the residual, reported separately."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Spread(_Model):
    """Per-step statistics of one quantity (ns)."""

    median: int
    p10: int
    p90: int
    mean: int
    ci95_low: int = Field(description="95% confidence interval of the median, low end")
    ci95_high: int
    n: int


class StepTimes(_Model):
    """Per-step time of both runs and their difference (ns per step, medians)."""

    baseline: int
    treatment: int
    delta: int
    ratio: float
    baseline_spread: Spread
    treatment_spread: Spread
    delta_ci95: tuple[int, int] = Field(description="95% CI of the median delta (bootstrap)")
    significant: bool = Field(description="delta exceeds the noise (CI excludes 0)")
    delta_spread: Spread | None = Field(default=None, description="per-step delta statistics")
    n_steps: int = Field(default=0, description="aligned steps used")
    noise_method: str = Field(default="", description="how delta_ci95 was estimated")


class Recommendation(_Model):
    """One fix with its predicted recovery."""

    fix: str = Field(description="short id, e.g. cuda_graphs, drain_thread, bucket_cap_mb")
    predicted_recovery_ns_per_step: int
    share: float = Field(description="predicted recovery as a share of the step delta")
    text: str
    method: str = Field(description="how the prediction was made")


class Attribution(_Model):
    """The part of the per-step delta one mechanism explains."""

    mechanism: str
    rule: str = Field(description="rule code, e.g. LA01")
    ns_per_step: int
    share: float = Field(description="share of the step delta")
    confidence: Literal["low", "medium", "high"]
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    recommendations: list[Recommendation] = Field(default_factory=list)
    spread: Spread | None = Field(default=None, description="per-step attributed ns")
    parts: dict[str, int] = Field(
        default_factory=dict,
        description="how ns_per_step was built: ledger category -> ns per step (signed); "
        "'hidden_by_gpu_slack' is host growth that shrank GPU-critical time instead of adding; "
        "for method 'replay_shapley': 'alone' (what removing it alone saves) and 'interactions' "
        "(its Shapley share of what mechanisms cost together beyond their costs alone)",
    )
    method: Literal["replay_shapley", "ledger"] = Field(
        default="ledger",
        description="replay_shapley: ns_per_step is the mechanism's Shapley value over "
        "counterfactual replays of the treatment with fired mechanisms' measured costs removed; "
        "ledger: its reconciled claim on the critical-path ledger",
    )
    paid_ns_per_step: int | None = Field(
        default=None,
        description="what the mechanism costs in the treatment per step, as measured on matched "
        "calls, gaps and GPU rows (before any overlap hides part of it)",
    )
    ledger_ns_per_step: int | None = Field(
        default=None, description="the critical-path ledger's share (evidence, cross-check)"
    )
    alone_ns_per_step: int | None = Field(
        default=None, description="replay: step time saved by removing this mechanism alone"
    )


class LedgerRow(_Model):
    """One category of the main host thread's step time, both runs (ns per step)."""

    category: str
    side: Literal["host", "gpu"] = Field(
        description="host: the main thread's exposed time; gpu: GPU-critical time (host waited)"
    )
    baseline_total: int | None = Field(
        default=None, description="host categories: incl. hidden time"
    )
    treatment_total: int | None = None
    baseline: int
    treatment: int
    delta: int


class StepPartition(_Model):
    """The partition of one aligned step's delta (ns)."""

    rank: int
    index: int
    baseline_step: int
    treatment_step: int
    delta: int
    kept: bool = Field(
        default=True, description="used in the aggregate (not trimmed, not an outlier step)"
    )
    parts: dict[str, int] = Field(description="mechanism (and 'unattributed') -> ns")


class ReplayCheck(_Model):
    """How well the replay model reproduces the treatment (its error is left unattributed)."""

    measured_treatment_ns_per_step: int
    replayed_treatment_ns_per_step: int = Field(
        description="the unmodified treatment replayed: measured - replayed is model error"
    )
    replayed_without_all_ns_per_step: int = Field(
        description="the treatment replayed with every fired mechanism removed"
    )
    baseline_ns_per_step: int
    replays: int
    mechanisms: list[str]
    steps_replayed: int = Field(
        default=0,
        description="aligned steps replayed (a contiguous block; the others get its mean)",
    )


class Partition(_Model):
    """How the per-step delta was split, and on which basis."""

    basis: str = Field(description="how per-step partitions were aggregated")
    total_ns_per_step: int = Field(description="the delta the attribution adds up to")
    steps_used: int
    steps_total: int
    ledger: list[LedgerRow] = Field(default_factory=list)
    gpu_busy: list[LedgerRow] = Field(
        default_factory=list, description="GPU busy time per class (union over streams)"
    )
    per_step: list[StepPartition] = Field(default_factory=list)
    steady_state_ns_per_step: int = Field(
        description="total minus one-time setup (whole-program traces)"
    )
    method: str = Field(
        default="ledger",
        description="replay_shapley (Shapley values over counterfactual replays; mechanisms "
        "without a removal keep their ledger share) or ledger",
    )
    replay: ReplayCheck | None = Field(
        default=None, description="the replay model's own error and the replays it took"
    )


class RuleOutcome(_Model):
    """Whether a rule fired, found nothing, or could not check."""

    code: str
    name: str
    mechanism: str
    outcome: Literal["fired", "clean", "skipped"]
    reason: str = ""


class TraceInfo(_Model):
    """What was read for one side of the pair."""

    source: str
    format: str
    profiler: str
    steps: int
    step_marker: str | None
    metadata: dict[str, Any]
    skipped: dict[str, int]


class Report(_Model):
    """The verdict of one paired analysis."""

    schema_version: str = SCHEMA_VERSION
    ccdiag_version: str
    baseline: TraceInfo
    treatment: TraceInfo
    step_ns: StepTimes
    attribution: list[Attribution]
    unattributed_ns_per_step: int
    unattributed_share: float
    rules: list[RuleOutcome]
    recommendations: list[Recommendation] = Field(
        description="all recommendations, ranked by predicted recovery"
    )
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    mode: Literal["gpu", "host_only"] = Field(
        default="gpu", description="host_only: treatment has no GPU activity (CC mode on)"
    )
    whole_program: bool = Field(default=False, description="no step markers: one step")
    partition: Partition | None = None
    verdict: str = Field(default="", description="one-line verdict")
    generated_at: str | None = Field(
        default=None,
        description="UTC time the report was written (ISO 8601), only when asked for "
        "(--timestamp): reports are otherwise byte-identical for the same inputs",
    )

    # --- jobs of several ranks or repeated runs (ccdiag.distributed, ccdiag.job) -------------
    ranks: list[RankResult] | None = Field(
        default=None, description="per-rank results of a job analyzed rank by rank"
    )
    stragglers: list[Straggler] | None = Field(
        default=None, description="ranks whose delta or mechanism mix is an outlier"
    )
    scheduler: str | None = Field(default=None, description="what ran the per-rank tasks")
    job: JobSummary | None = Field(
        default=None, description="job-level view: slowest rank, spread, runs, collectives"
    )

    # ---- notebook conveniences (added by the `pkg` helper, #16; data out, rendering elsewhere)

    def to_polars(self, table: str = "attribution") -> Any:
        """One of the report's tables as a polars DataFrame (times in ns, shares as fractions).

        Args:
            table: ``attribution`` (one row per mechanism, plus ``unattributed``), ``steps``
                (the per-step partition: one row per aligned step, one column per mechanism),
                ``recommendations``, ``rules`` (every rule's outcome) or ``ledger``.
        """
        from ccdiag.report.tables import report_table

        return report_table(self, table)

    def _repr_html_(self) -> str:
        """A compact HTML view for Jupyter: the verdict, the attribution and the top fixes."""
        from ccdiag.report.tables import report_html

        return report_html(self)


# --- jobs: per-rank results, stragglers, repeated runs ----------------------------------------


class RankStepNs(_Model):
    """One rank's per-step time (ns, medians over its aligned steps; means over its runs)."""

    baseline: int
    treatment: int
    delta: int


class MechanismNs(_Model):
    """One mechanism's attributed time (ns per step)."""

    mechanism: str
    ns_per_step: int


class RankResult(_Model):
    """One rank of a job: its step times and its own partition (mean over its runs)."""

    rank: int
    runs: int = 1
    step_ns: RankStepNs | None = None
    attribution: list[MechanismNs] = Field(default_factory=list)
    unattributed_ns_per_step: int = 0
    files: list[str] = Field(
        default_factory=list, description="file names, baseline then treatment"
    )
    error: str | None = Field(default=None, description="why this rank has no result")


class Straggler(_Model):
    """A rank singled out, and the test that singled it out."""

    rank: int
    why: str


class MechanismSpread(_Model):
    """A mechanism's attributed time across ranks (or runs): ns per step."""

    mechanism: str
    mean: int
    min: int
    max: int
    ci95_low: int | None = None
    ci95_high: int | None = None


class RunStats(_Model):
    """Repeated runs: the run-to-run CI of the step delta (hierarchical bootstrap)."""

    baseline_runs: int
    treatment_runs: int
    delta_ns: int
    delta_ci95: tuple[int, int]
    method: str
    per_mechanism: list[MechanismSpread] = Field(default_factory=list)


class CollectiveScaling(_Model):
    """Collectives as a function of ring size (the cost model of ccdiag.collectives)."""

    name: str = Field(description="the dominant collective kernel")
    world_size: int
    k: float = Field(description="collectives per step (measured)")
    crypto_ops_per_step: int = Field(description="4*k*(n-1) per GPU per step")
    growth_per_collective_ns: float = Field(description="CC growth of one collective (measured)")
    predicted: list[dict[str, Any]] = Field(
        default_factory=list,
        description="predicted CC collective cost per step at other world sizes",
    )
    method: str = ""


class JobSummary(_Model):
    """The job-level view of a per-rank analysis."""

    n_ranks: int
    missing_ranks: list[int] = Field(default_factory=list)
    slowest_rank: int | None = None
    slowest_rank_attribution: list[MechanismNs] = Field(default_factory=list)
    spread: list[MechanismSpread] = Field(default_factory=list)
    straggler_test: str = ""
    runs: RunStats | None = None
    collectives: CollectiveScaling | None = None


Report.model_rebuild()
