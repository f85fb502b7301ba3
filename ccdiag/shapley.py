"""Attribution by counterfactual replay: Shapley values over the fired mechanisms.

Each fired mechanism brings a :class:`ccdiag.replay.Removal` (its measured costs taken out of the
treatment's matched calls, gaps and GPU rows). The treatment is replayed
(:class:`ccdiag.replay.Replayer`) with every subset ``S`` of those mechanisms removed; ``v(S)`` is
the per-step time saved against the replay of the unmodified treatment. The Shapley value of a
mechanism is its marginal saving averaged over all orders:

    φ_i = Σ_{S ⊆ N∖{i}} |S|! (n − |S| − 1)! / n! · (v(S ∪ {i}) − v(S))

so Σ φ_i = v(N) exactly, and an interaction (a blocking copy that exposes a launch toll: both
together cost more than each alone) is split between the mechanisms, not left over. The rest of
the measured delta is the replay's model error (measured treatment − replayed treatment) plus
what no mechanism removed (replayed treatment without all mechanisms − baseline): both are
``unattributed``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ccdiag.ledger.gpu import union_ns
from ccdiag.ledger.removal import Removal
from ccdiag.replay import Replayer

#: Most mechanisms in one exact Shapley computation (2^k replays).
MAX_PLAYERS = 6
#: Least share of a mechanism's measured costs the replay must hold for it to be a player.
MIN_COVERAGE = 0.5
#: Most aligned steps replayed (a contiguous block from the middle of the run, + 1 warm-in).
MAX_REPLAY_STEPS = 24


@dataclass(frozen=True)
class ShapleyResult:
    """Per-step arrays (aligned steps order) of the replay attribution."""

    phi: dict[str, np.ndarray]  # mechanism -> Shapley value per step (ns saved = added)
    alone: dict[str, np.ndarray]  # mechanism -> v({i}): what removing it alone saves
    replayed: np.ndarray  # the unmodified treatment's replayed step
    without_all: np.ndarray  # the treatment replayed with every mechanism removed
    replays: int
    measured: np.ndarray  # bool per aligned step: replayed (else the block's mean)


def shapley(
    players: Sequence[str], value: Callable[[frozenset[str]], np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[frozenset[str], np.ndarray]]:
    """Exact Shapley values of ``players`` for a per-step value function (``value(∅)`` = 0).

    Args:
        players: the fired mechanisms (at most :data:`MAX_PLAYERS`).
        value: per-step saving of removing a subset (an array per step).

    Returns:
        Per player its Shapley value per step, and every subset's value.
    """
    n = len(players)
    if n > MAX_PLAYERS:
        raise ValueError(f"at most {MAX_PLAYERS} players in an exact Shapley value, got {n}")
    v: dict[frozenset[str], np.ndarray] = {}
    for r in range(n + 1):
        for combo in itertools.combinations(players, r):
            v[frozenset(combo)] = value(frozenset(combo))
    phi = {}
    for p in players:
        others = [q for q in players if q != p]
        acc = np.zeros_like(v[frozenset()], dtype=float)
        for r in range(n):
            w = math.factorial(r) * math.factorial(n - r - 1) / math.factorial(n)
            for combo in itertools.combinations(others, r):
                s = frozenset(combo)
                acc = acc + w * (v[s | {p}] - v[s])
        phi[p] = acc
    return phi, v


def _block(pair: Any, n_max: int) -> tuple[pl.DataFrame, tuple[int, int] | None]:
    """A contiguous block of aligned steps to replay (all when there are few): one warm-in step
    plus ``n_max`` measured steps from the middle of the run; the span of the events it needs."""
    idx = pair.aligned["idx"].unique().sort()
    if idx.len() <= n_max + 1:
        return pair.aligned.with_columns(pl.lit(True).alias("measured")), None
    i0 = int(idx[(idx.len() - n_max - 1) // 2])
    a = pair.aligned.filter(pl.col("idx").is_between(i0, i0 + n_max))
    w = pair.treatment.windows.join(
        a.select("rank", pl.col("t_step").alias("step")), on=["rank", "step"]
    )
    span = (int(w["start_ns"].min()), int(w["end_ns"].max()) + 1)
    return a.with_columns((pl.col("idx") > i0).alias("measured")), span


#: A run whose steps take within this factor of its GPU's busy time is GPU-bound.
GPU_BOUND = 0.05


def gpu_bound(side: Any) -> bool:
    """Whether a run's steps are GPU-bound in a steady state: their total time within
    ``GPU_BOUND`` of the busy time (union over streams) of their GPU rows (``side.gpu``: the rows
    of the kept steps, by their launch's step). Then its host ran ahead until CUDA's finite
    queue held it back, and a counterfactual of the other run is floored at its own GPU busy
    time (:func:`ccdiag.replay.gpu_floor`). Steps shorter than their GPU work are a transient
    (the host still running ahead of an emptied queue, as in a loop's first steps after a
    sync): no floor then; longer ones are host-bound."""
    return gpu_busy_share(side) is not None


def gpu_busy_share(side: Any) -> float | None:
    """The share of a GPU-bound run's step time its GPU is busy (:func:`gpu_bound`; ``None``
    when it is not GPU-bound). A GPU-bound loop's GPU still idles a little every step (the
    batch's upload, the optimizer's boundary): HELD-OUT-32's ConvNeXt training, 97.9 %. A
    counterfactual of the other run is floored at its replayed GPU busy time over this share,
    not at the busy time alone, which let the treatment without its tolls come out 1.1 ms a
    step shorter than the baseline it was measured against."""
    w = side.windows
    if w.height == 0 or side.gpu.height == 0:
        return None
    total = int((w["end_ns"] - w["start_ns"]).sum())
    busy = int(union_ns(side.gpu.select("rank", "start_ns", "dur_ns"), ["rank"])["busy_ns"].sum())
    if busy > 0 and abs(total - busy) <= GPU_BOUND * busy:
        return min(busy / total, 1.0)  # busy > 0 and within GPU_BOUND of it: total > 0
    return None


def replay_attribution(
    pair: Any, removals: dict[str, Removal], max_steps: int = MAX_REPLAY_STEPS
) -> ShapleyResult:
    """Shapley values of the mechanisms in ``removals`` by counterfactual replays of the
    treatment (``pair``: a :class:`ccdiag.pairing.Pair`), per aligned step.

    Every subset's removal is the sum of its members' (their measured costs are disjoint parts
    of the matched deltas); the replay model is built once (:class:`ccdiag.replay.Replayer`) on
    a block of at most ``max_steps`` steps (plus one warm-in step) from the middle of the run;
    steps outside the block get the block's mean (``ShapleyResult.measured`` says which).
    """
    t = pair.treatment
    block, span = _block(pair, max_steps)
    rp = Replayer(t.trace, t.threads, span, gpu_floor=gpu_busy_share(pair.baseline) or 0.0)
    keys = pair.aligned.select("rank", "idx")
    measured = keys.join(block.select("rank", "idx", "measured"), on=["rank", "idx"], how="left")
    mask = measured["measured"].fill_null(False).to_numpy()
    order = pair.aligned.select("rank", pl.col("t_step").alias("step"))

    def steps(rm: Removal | None) -> np.ndarray:
        d = rp.step_ns(t.windows, rm)
        j = order.join(d, on=["rank", "step"], how="left")
        x = j["dur_ns"].fill_null(0).to_numpy().astype(float)
        return np.where(mask, x, x[mask].mean() if mask.any() else 0.0)

    replayed = steps(None)
    # a mechanism whose measured costs mostly lie on rows the model does not replay (GPU work
    # launched from another thread, a block that does not hold them) keeps its ledger share
    players = [p for p, rm in removals.items() if rp.coverage(rm) >= MIN_COVERAGE]

    def value(s: frozenset[str]) -> np.ndarray:
        if not s:
            return np.zeros_like(replayed)
        rm = Removal()
        for p in sorted(s):
            rm = rm.plus(removals[p])
        return replayed - steps(rm)

    phi, v = shapley(players, value)
    alone = {p: v[frozenset({p})] for p in players}
    without = replayed - v[frozenset(players)]
    return ShapleyResult(phi, alone, replayed, without, len(v), mask)
