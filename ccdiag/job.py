"""The job's report from per-rank (and per-run) results: partition, stragglers, runs, collectives.

:func:`reduce_job` turns the small results of :mod:`ccdiag.distributed`'s tasks into one
:class:`ccdiag.verdict.Report`:

- **the job's partition** is the mean over ranks of each rank's partition (a rank's own is the
  mean over its runs); the slowest rank's is given too, since collectives make every rank wait
  for it. Evidence, rule outcomes and fixes come from the slowest rank's report (the one whose
  cost the job pays), fixes scaled to the job's mean;
- **stragglers**: ranks whose step delta is an outlier — modified z-score
  ``0.6745 (x − median) / MAD > 3.5`` (Iglewicz & Hoaglin) with at least 3 ranks, or, with any
  number of ranks, a delta whose own 95 % CI lies above every other rank's delta and exceeds
  their median by more than 10 % — and ranks whose mechanism mix is an outlier (L1 distance of
  its mechanism shares from the median shares, same z-score test, and at least 0.2);
- **repeated runs**: the CI of the step delta from the runs, by a hierarchical bootstrap (runs
  with replacement, then steps within each run), not from the assumed run-to-run difference;
- **collectives as a function of ring size**: 4·k·(n−1) crypto operations per step, the measured
  k, and the cost model's prediction of the CC collective cost at other world sizes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ccdiag.collectives import CostFit, cost_at_world_size, crypto_ops
from ccdiag.errors import InputError
from ccdiag.report.units import duration
from ccdiag.verdict import (
    Attribution,
    CollectiveScaling,
    JobSummary,
    LedgerRow,
    MechanismNs,
    MechanismSpread,
    RankResult,
    RankStepNs,
    Report,
    RuleOutcome,
    RunStats,
    StepTimes,
    Straggler,
)

Z_CUT = 3.5
MIX_MIN = 0.2
N_BOOT = 2000


def _atts(report: Report) -> dict[str, int]:
    return {a.mechanism: a.ns_per_step for a in report.attribution}


def _total(report: Report) -> int:
    if report.partition is not None:
        return report.partition.total_ns_per_step
    return sum(_atts(report).values()) + report.unattributed_ns_per_step


def _mean(values: list[float]) -> int:
    return int(round(float(np.mean(values)))) if values else 0


def _per_rank(results: list[Any]) -> dict[int, list[Any]]:
    by: dict[int, list[Any]] = defaultdict(list)
    for r in results:
        by[r.rank].append(r)
    return dict(sorted(by.items()))


def _rank_result(rank: int, runs: list[Any]) -> RankResult:
    ok = [r for r in runs if r.report is not None]
    files = sorted({p.rsplit("/", 1)[-1] for r in runs for p in (r.baseline, r.treatment)})
    if not ok:
        return RankResult(
            rank=rank, runs=len(runs), files=files, error=runs[0].error or "no result"
        )
    mechs = sorted({m for r in ok for m in _atts(r.report)})
    att = [
        MechanismNs(mechanism=m, ns_per_step=_mean([_atts(r.report).get(m, 0) for r in ok]))
        for m in mechs
    ]
    att.sort(key=lambda a: -a.ns_per_step)
    return RankResult(
        rank=rank,
        runs=len(ok),
        step_ns=RankStepNs(
            baseline=_mean([r.report.step_ns.baseline for r in ok]),
            treatment=_mean([r.report.step_ns.treatment for r in ok]),
            delta=_mean([_total(r.report) for r in ok]),
        ),
        attribution=att,
        unattributed_ns_per_step=_mean([r.report.unattributed_ns_per_step for r in ok]),
        files=files,
        error=None if len(ok) == len(runs) else f"{len(runs) - len(ok)} run(s) failed",
    )


# --- stragglers -------------------------------------------------------------------------------


def _modified_z(x: np.ndarray) -> np.ndarray:
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad > 0:
        return 0.6745 * (x - med) / mad
    mean_ad = np.mean(np.abs(x - med))
    return (x - med) / (1.253314 * mean_ad) if mean_ad > 0 else np.zeros_like(x)


def stragglers(
    ranks: list[RankResult], cis: dict[int, tuple[int, int]]
) -> tuple[list[Straggler], str]:
    """Ranks whose delta or mechanism mix is an outlier (tests in the module docstring)."""
    ok = [r for r in ranks if r.step_ns is not None]
    if len(ok) < 2:
        return [], "not tested: fewer than 2 ranks with a result"
    d = np.array([r.step_ns.delta for r in ok if r.step_ns], dtype=float)
    out: dict[int, list[str]] = defaultdict(list)
    if len(ok) >= 3:
        z = _modified_z(d)
        med = float(np.median(d))
        for r, zi, di in zip(ok, z, d):
            if zi > Z_CUT and di > med + 0.05 * max(abs(med), 1.0):
                out[r.rank].append(
                    f"step delta {duration(di)} vs the ranks' median {duration(med)} "
                    f"(modified z-score {zi:.1f} > {Z_CUT})"
                )
        out_mix = _mix_outliers(ok)
        for rank, why in out_mix.items():
            out[rank].append(why)
    for i, r in enumerate(ok):
        others = np.delete(d, i)
        lo = cis.get(r.rank, (None, None))[0]
        med_o = float(np.median(others))
        if lo is not None and lo > others.max() and d[i] > med_o + 0.1 * max(abs(med_o), 1.0):
            out[r.rank].append(
                f"step delta {duration(d[i])}, its 95% CI from {duration(lo)}: above every "
                f"other rank's delta (median {duration(med_o)}) by more than 10%"
            )
    test = (
        f"modified z-score > {Z_CUT} of the step delta and of the mechanism mix (L1 distance "
        f">= {MIX_MIN} from the median shares) over {len(ok)} ranks; and a rank whose delta's "
        "95% CI lies above every other rank's delta by more than 10%"
        if len(ok) >= 3
        else f"{len(ok)} ranks: a rank whose delta's 95% CI lies above the other's delta by more "
        "than 10% (the z-score tests need at least 3 ranks)"
    )
    return [Straggler(rank=k, why="; ".join(v)) for k, v in sorted(out.items())], test


def _mix_outliers(ok: list[RankResult]) -> dict[int, str]:
    mechs = sorted({a.mechanism for r in ok for a in r.attribution})
    if not mechs:
        return {}
    shares = np.array(
        [
            [
                next((a.ns_per_step for a in r.attribution if a.mechanism == m), 0)
                / max(abs(r.step_ns.delta), 1)
                for m in mechs
            ]
            for r in ok
            if r.step_ns
        ]
    )
    med = np.median(shares, axis=0)
    dist = np.abs(shares - med).sum(axis=1)
    z = _modified_z(dist)
    out = {}
    for r, zi, di, row in zip(ok, z, dist, shares):
        if zi > Z_CUT and di >= MIX_MIN:
            top = mechs[int(np.argmax(np.abs(row - med)))]
            out[r.rank] = (
                f"mechanism mix differs from the other ranks' (L1 distance {di:.2f} of the "
                f"shares, modified z-score {zi:.1f}; most in {top})"
            )
    return out


# --- repeated runs ----------------------------------------------------------------------------


def hierarchical_ci(
    b_runs: list[np.ndarray], t_runs: list[np.ndarray], n_boot: int = N_BOOT, seed: int = 0
) -> tuple[int, int, int]:
    """(delta, low, high) of median(treatment steps) − median(baseline steps), 95 % CI by a
    two-level bootstrap: runs with replacement, then steps with replacement within each run."""
    rng = np.random.default_rng(seed)

    def med(runs: list[np.ndarray]) -> np.ndarray:
        out = np.empty(n_boot)
        for i in range(n_boot):
            pick = rng.integers(0, len(runs), len(runs))
            drawn = [runs[j][rng.integers(0, runs[j].size, runs[j].size)] for j in pick]
            out[i] = np.median(np.concatenate(drawn))
        return out

    b_runs = [r for r in b_runs if r.size]
    t_runs = [r for r in t_runs if r.size]
    if not b_runs or not t_runs:
        return 0, 0, 0
    delta = float(np.median(np.concatenate(t_runs)) - np.median(np.concatenate(b_runs)))
    boot = med(t_runs) - med(b_runs)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return int(round(delta)), int(round(lo)), int(round(hi))


def _runs_stats(results: list[Any], n_b: int, n_t: int) -> RunStats | None:
    if max(n_b, n_t) < 2:
        return None
    ok = [r for r in results if r.report is not None]
    by_run_b: dict[str, np.ndarray] = {}
    by_run_t: dict[str, np.ndarray] = {}
    for r in ok:  # one array per distinct run file (a reused run counts once)
        by_run_b.setdefault(r.baseline, np.asarray(r.b_steps, dtype=float))
        by_run_t.setdefault(r.treatment, np.asarray(r.t_steps, dtype=float))
    delta, lo, hi = hierarchical_ci(list(by_run_b.values()), list(by_run_t.values()))
    per_run: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        for m, v in _atts(r.report).items():
            per_run[r.run][m].append(v)
    mechs = sorted({m for d in per_run.values() for m in d})
    spreads = []
    for m in mechs:
        vals = np.array([np.mean(per_run[k].get(m, [0])) for k in sorted(per_run)], dtype=float)
        lo_m, hi_m = _t_interval(vals)
        spreads.append(
            MechanismSpread(
                mechanism=m, mean=int(vals.mean()), min=int(vals.min()), max=int(vals.max()),
                ci95_low=lo_m, ci95_high=hi_m,
            )
        )  # fmt: skip
    return RunStats(
        baseline_runs=n_b,
        treatment_runs=n_t,
        delta_ns=delta,
        delta_ci95=(lo, hi),
        method=(
            f"hierarchical bootstrap over {len(by_run_b)} baseline and {len(by_run_t)} treatment "
            f"runs, then steps within each run ({N_BOOT} resamples); per mechanism: mean over "
            f"{len(per_run)} run pairs with a 95% bootstrap interval"
        ),
        per_mechanism=spreads,
    )


def _t_interval(vals: np.ndarray, seed: int = 0) -> tuple[int | None, int | None]:
    """95 % bootstrap interval of the mean over run pairs (resampled with replacement); with
    few runs it is close to their min..max, which is what the runs can tell."""
    if vals.size < 2:
        return None, None
    rng = np.random.default_rng(seed)
    means = vals[rng.integers(0, vals.size, (N_BOOT, vals.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return int(round(lo)), int(round(hi))


# --- collectives ------------------------------------------------------------------------------


def _fit(d: dict[str, Any]) -> CostFit:
    return CostFit(fixed_ns=d.get("fixed_ns"), gbps=d.get("gbps"), points=d.get("points", []))


def collective_scaling(results: list[Any], n: int) -> CollectiveScaling | None:
    """4·k·(n−1) at the job's world size and the predicted CC collective cost at others."""
    facts = [r.collectives for r in results if r.report is not None and r.collectives]
    if not facts or n < 2:
        return None
    name = max({f["name"] for f in facts}, key=lambda x: sum(f["name"] == x for f in facts))
    same = [f for f in facts if f["name"] == name]
    k = float(np.median([f["k"] for f in same]))
    dt = float(np.median([f["dt_ns"] for f in same]))
    nbytes = float(np.median([f["bytes"] for f in same]))
    fb, ft = _fit(same[0]["fit_baseline"]), _fit(same[0]["fit_treatment"])
    predicted = []
    # anchored at what was measured: the model's shape, scaled so that at n it gives k x dt
    at_n = cost_at_world_size(fb, ft, k, n, n, nbytes, dt)[0]
    anchor = k * max(dt, 0.0) / at_n if at_n > 0 else 1.0
    for n_new in sorted({2, 4, 8, 16, 64, 256, n} - {1}):
        lo, hi, how = cost_at_world_size(fb, ft, k, n, n_new, nbytes, dt)
        predicted.append(
            {
                "world_size": n_new,
                "crypto_ops_per_step": crypto_ops(k, n_new),
                "cc_collective_ns_per_step": {"low": int(lo * anchor), "high": int(hi * anchor)},
                "method": how
                + (
                    f"; scaled x{anchor:.2f} to the growth measured at n={n}"
                    if abs(anchor - 1) > 0.01
                    else ""
                ),
            }
        )
    return CollectiveScaling(
        name=name,
        world_size=n,
        k=round(k, 2),
        crypto_ops_per_step=crypto_ops(k, n),
        growth_per_collective_ns=round(dt, 1),
        predicted=predicted,
        method=(
            "collective cost model (ccdiag.collectives): fixed cost x (n'-1)/(n-1), bandwidth "
            "cost x ring traffic 2(n'-1)/n'; the growth is the collectives' own (busy time), "
            "before any overlap with compute hides part of it; rank 0's fits, median k and growth"
        ),
    )


# --- the job's report -------------------------------------------------------------------------


def reduce_job(
    results: list[Any],
    *,
    scheduler: str,
    notes: list[str] | None = None,
    baseline_runs: int = 1,
    treatment_runs: int = 1,
    sources: tuple[str, str] | None = None,
) -> Report:
    """Combine per-rank (and per-run) task results into the job's report.

    Raises:
        InputError: no task produced a result (the first error is named).
    """
    ok = [r for r in results if r.report is not None]
    if not ok:
        first = next((r.error for r in results if r.error), "no tasks")
        raise InputError(results[0].treatment if results else "job", f"no rank analyzed: {first}")
    by_rank = _per_rank(results)
    ranks = [_rank_result(k, v) for k, v in by_rank.items()]
    good = [r for r in ranks if r.step_ns is not None]
    slowest = max(good, key=lambda r: r.step_ns.treatment if r.step_ns else 0)
    template = next(r.report for r in by_rank[slowest.rank] if r.report is not None)
    cis = {
        k: (
            int(np.mean([r.report.step_ns.delta_ci95[0] for r in v if r.report])),
            int(np.mean([r.report.step_ns.delta_ci95[1] for r in v if r.report])),
        )
        for k, v in by_rank.items()
        if any(r.report for r in v)
    }
    found, test = stragglers(ranks, cis)
    runs = _runs_stats(results, baseline_runs, treatment_runs)
    world = max([r.world_size or 0 for r in ok] + [len(by_rank)])
    missing = [r.rank for r in ranks if r.step_ns is None]
    job = JobSummary(
        n_ranks=len(ranks),
        missing_ranks=missing,
        slowest_rank=slowest.rank,
        slowest_rank_attribution=slowest.attribution,
        spread=_spread(good),
        straggler_test=test,
        runs=runs,
        collectives=collective_scaling(results, world),
    )
    return _combined(template, ok, good, job, found, scheduler, notes or [], ranks, sources)


def _spread(good: list[RankResult]) -> list[MechanismSpread]:
    mechs = sorted({a.mechanism for r in good for a in r.attribution})
    out = []
    for m in mechs:
        v = [next((a.ns_per_step for a in r.attribution if a.mechanism == m), 0) for r in good]
        out.append(MechanismSpread(mechanism=m, mean=_mean(v), min=min(v), max=max(v)))
    return out


def _step_times(ok: list[Any], good: list[RankResult], runs: RunStats | None) -> StepTimes:
    b = np.concatenate([np.asarray(r.b_steps, dtype=float) for r in ok])
    t = np.concatenate([np.asarray(r.t_steps, dtype=float) for r in ok])
    d = np.concatenate(
        [np.asarray(r.t_steps, dtype=float) - np.asarray(r.b_steps, dtype=float) for r in ok]
    )
    from ccdiag.pairing import spread

    mb = _mean([r.step_ns.baseline for r in good if r.step_ns])
    mt = _mean([r.step_ns.treatment for r in good if r.step_ns])
    if runs is not None:
        ci, delta = runs.delta_ci95, runs.delta_ns
        method = runs.method
    else:
        ds = spread(d.astype(np.int64))
        ci, delta = (ds.ci95_low, ds.ci95_high), mt - mb
        method = (
            f"medians per rank, mean over {len(good)} ranks; CI: bootstrap of the median over "
            f"{d.size} paired steps of all ranks (2000 resamples)"
        )
    return StepTimes(
        baseline=mb,
        treatment=mt,
        delta=delta,
        ratio=round(mt / mb, 4) if mb else 0.0,
        baseline_spread=spread(b.astype(np.int64)),
        treatment_spread=spread(t.astype(np.int64)),
        delta_ci95=ci,
        significant=bool(ci[0] > 0 or ci[1] < 0),
        delta_spread=spread(d.astype(np.int64), ci),
        n_steps=int(d.size),
        noise_method=method,
    )


def _attributions(
    template: Report, ok: list[Any], good: list[RankResult], total: int
) -> list[Attribution]:
    """The template's attributions (evidence, fixes) at the job's mean over ranks; mechanisms
    that fired only on other ranks come from the rank where they are largest."""
    mean = {a.mechanism: 0.0 for r in good for a in r.attribution}
    for r in good:
        for a in r.attribution:
            mean[a.mechanism] += a.ns_per_step / len(good)
    source: dict[str, Attribution] = {}
    for r in ok:  # the largest instance of each mechanism on any rank ...
        for a in r.report.attribution:
            if a.mechanism not in source or a.ns_per_step > source[a.mechanism].ns_per_step:
                source[a.mechanism] = a
    source.update({a.mechanism: a for a in template.attribution})  # ... the slowest rank's first
    out = []
    for m, ns in mean.items():
        a = source[m]
        v = int(round(ns))
        k = v / a.ns_per_step if a.ns_per_step else 0.0
        recs = [
            rec.model_copy(
                update={
                    "predicted_recovery_ns_per_step": int(rec.predicted_recovery_ns_per_step * k),
                    "share": round(rec.predicted_recovery_ns_per_step * k / total, 4)
                    if total
                    else 0.0,
                }
            )
            for rec in a.recommendations
        ]
        out.append(
            a.model_copy(
                update={
                    "ns_per_step": v,
                    "share": round(v / total, 4) if total else 0.0,
                    "recommendations": recs,
                    "spread": _step_spread(ok, m),
                    "parts": {key: int(val * k) for key, val in a.parts.items()},
                }
            )
        )
    out.sort(key=lambda a: -a.ns_per_step)
    return out


def _step_spread(ok: list[Any], mechanism: str) -> Any:
    """Per-step spread of a mechanism's attributed ns over the kept steps of every rank."""
    from ccdiag.pairing import spread

    v = [
        s.parts.get(mechanism, 0)
        for r in ok
        if r.report.partition is not None
        for s in r.report.partition.per_step
        if s.kept
    ]
    return spread(np.asarray(v, dtype=np.int64)) if v else None


def _rules(ok: list[Any]) -> list[RuleOutcome]:
    order = {"fired": 0, "clean": 1, "skipped": 2}
    best: dict[str, RuleOutcome] = {}
    fired_on: dict[str, list[int]] = defaultdict(list)
    for r in ok:
        for o in r.report.rules:
            if o.outcome == "fired":
                fired_on[o.code].append(r.rank)
            cur = best.get(o.code)
            if cur is None or order[o.outcome] < order[cur.outcome]:
                best[o.code] = o
    out = []
    for code, o in best.items():
        ranks = sorted(set(fired_on.get(code, [])))
        if o.outcome == "fired" and len(ranks) < len({r.rank for r in ok}):
            o = o.model_copy(update={"reason": f"{o.reason} (fired on ranks {ranks})"})
        out.append(o)
    return out


def _ledger(ok: list[Any]) -> list[LedgerRow]:
    rows: dict[str, list[LedgerRow]] = defaultdict(list)
    for r in ok:
        if r.report.partition is not None:
            for row in r.report.partition.ledger:
                rows[row.category].append(row)
    return [
        v[0].model_copy(
            update={
                "baseline": _mean([x.baseline for x in v]),
                "treatment": _mean([x.treatment for x in v]),
                "delta": _mean([x.delta for x in v]),
                "baseline_total": None,
                "treatment_total": None,
            }
        )
        for v in rows.values()
    ]


def _side_info(info: Any, ok: list[Any], side: str, steps: int, sources: Any) -> Any:
    """One side of the job: the ranks it holds, its events and bytes summed over the ranks."""
    infos = [getattr(r.report, side) for r in ok]
    meta = dict(info.metadata)
    meta["ranks"] = sorted({r.rank for r in ok})
    for key in ("n_events", "size_bytes"):
        vals = [i.metadata.get(key) for i in infos]
        if vals and all(isinstance(v, int) for v in vals):
            meta[key] = sum(vals)
    skipped: dict[str, int] = defaultdict(int)
    for i in infos:
        for k, v in i.skipped.items():
            skipped[k] += v
    update: dict[str, Any] = {
        "steps": steps,
        "metadata": meta,
        "skipped": dict(sorted(skipped.items())),
    }
    if sources:
        update["source"] = sources[0] if side == "baseline" else sources[1]
    return info.model_copy(update=update)


def _verdict(st: StepTimes, atts: list[Attribution], total: int, n: int, slow: int) -> str:
    head = f"job of {n} rank(s)"
    if not st.significant:
        return (
            f"{head}: no significant slowdown: delta {duration(st.delta)}/step is within the "
            f"noise (95% CI {duration(st.delta_ci95[0])}..{duration(st.delta_ci95[1])})"
        )
    ranked = [a for a in atts if a.ns_per_step > 0.005 * abs(total)]
    top = (
        ", ".join(f"{a.mechanism} {a.share:.0%}" for a in ranked[:3]) or "no mechanism explains it"
    )
    return (
        f"{head}: treatment is {st.ratio:.2f}x the baseline (+{duration(total)}/step, mean over "
        f"ranks): {top}; slowest rank {slow}"
    )


def _combined(
    template: Report,
    ok: list[Any],
    good: list[RankResult],
    job: JobSummary,
    found: list[Straggler],
    scheduler: str,
    notes: list[str],
    ranks: list[RankResult],
    sources: tuple[str, str] | None = None,
) -> Report:
    st = _step_times(ok, good, job.runs)
    total = _mean([_total(r.report) for r in ok])
    atts = _attributions(template, ok, good, total)
    unattr = total - sum(a.ns_per_step for a in atts)
    warnings = list(dict.fromkeys(w for r in ok for w in r.report.warnings))
    for r in ranks:
        if r.error:
            warnings.insert(0, f"rank {r.rank}: {r.error}")
    if job.missing_ranks:
        warnings.insert(
            0,
            f"partial result: ranks {job.missing_ranks} have no result (see their errors); "
            f"the job's partition is over {len(good)} of {len(ranks)} ranks",
        )
    partition = None
    if template.partition is not None:
        per_step = [s for r in ok if r.report.partition for s in r.report.partition.per_step]
        partition = template.partition.model_copy(
            update={
                "basis": f"mean over {len(good)} ranks of each rank's partition "
                f"({template.partition.basis} per rank)",
                "total_ns_per_step": total,
                "steps_used": sum(r.report.partition.steps_used for r in ok if r.report.partition),
                "steps_total": sum(
                    r.report.partition.steps_total for r in ok if r.report.partition
                ),
                "ledger": _ledger(ok),
                "per_step": per_step[:1000],
                "steady_state_ns_per_step": total
                - next((a.ns_per_step for a in atts if a.mechanism == "one_time_setup"), 0),
            }
        )
    recs = sorted(
        (x for a in atts for x in a.recommendations),
        key=lambda x: -x.predicted_recovery_ns_per_step,
    )
    return template.model_copy(
        update={
            "baseline": _side_info(template.baseline, ok, "baseline", st.n_steps, sources),
            "treatment": _side_info(template.treatment, ok, "treatment", st.n_steps, sources),
            "step_ns": st,
            "attribution": atts,
            "unattributed_ns_per_step": unattr,
            "unattributed_share": round(unattr / total, 4) if total else 0.0,
            "rules": _rules(ok),
            "recommendations": recs,
            "warnings": warnings,
            "notes": list(
                dict.fromkeys(
                    [*notes, *(f"rank {r.rank}: {n}" for r in ok for n in r.report.notes)]
                )
            ),
            "partition": partition,
            "verdict": _verdict(st, atts, total, len(ranks), job.slowest_rank or 0),
            "ranks": ranks,
            "stragglers": found,
            "scheduler": scheduler,
            "job": job,
        }
    )
