"""Terminal rendering of a job's per-rank results (``ccdiag analyze`` on rank folders / runs).

Pure presentation of the Report's ``ranks``, ``stragglers``, ``scheduler`` and ``job`` fields.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from ccdiag.report.units import duration
from ccdiag.verdict import Report

MAX_ROWS = 32


def job_renderables(r: Report) -> list[Any]:
    """The job's tables and lines; empty for a plain pair."""
    if r.ranks is None or r.job is None:
        return []
    out: list[Any] = [_ranks(r)]
    j = r.job
    if r.stragglers:
        for s in r.stragglers:
            out.append(Text(f"straggler: rank {s.rank}: {s.why}", style="yellow"))
    else:
        out.append(Text(f"stragglers: none ({j.straggler_test})", style="dim"))
    if j.runs is not None:
        lo, hi = j.runs.delta_ci95
        out.append(
            Text(
                f"runs: {j.runs.baseline_runs} baseline x {j.runs.treatment_runs} treatment; delta "
                f"{duration(j.runs.delta_ns)}/step, 95% CI {duration(lo)} .. {duration(hi)} "
                f"({j.runs.method})"
            )
        )
        for m in j.runs.per_mechanism:
            ci = (
                f", 95% CI {duration(m.ci95_low)} .. {duration(m.ci95_high)}"
                if m.ci95_low is not None and m.ci95_high is not None
                else ""
            )
            out.append(
                Text(
                    f"  {m.mechanism}: {duration(m.mean)}/step over runs "
                    f"(min {duration(m.min)}, max {duration(m.max)}{ci})"
                )
            )
    if j.collectives is not None:
        out.append(_collectives(r))
    out.append(Text(f"scheduler: {r.scheduler}", style="dim"))
    return out


def _ranks(r: Report) -> Table:
    assert r.ranks is not None and r.job is not None
    t = Table(
        title=f"Per rank ({r.job.n_ranks} ranks; slowest: rank {r.job.slowest_rank})",
        title_justify="left",
        show_edge=False,
    )
    for c in ("rank", "baseline", "treatment", "delta", "top mechanism", "note"):
        t.add_column(c, justify="left" if c in ("top mechanism", "note") else "right")
    strag = {s.rank for s in r.stragglers or []}
    shown = sorted(r.ranks, key=lambda x: -(x.step_ns.treatment if x.step_ns else 1 << 62))
    for x in shown[:MAX_ROWS]:
        if x.step_ns is None:
            t.add_row(str(x.rank), "-", "-", "-", "-", Text(x.error or "no result"), style="red")
            continue
        top = x.attribution[0] if x.attribution else None
        top_s = f"{top.mechanism} {duration(top.ns_per_step)}" if top else "-"
        note = "straggler" if x.rank in strag else (x.error or "")
        t.add_row(
            str(x.rank),
            duration(x.step_ns.baseline),
            duration(x.step_ns.treatment),
            duration(x.step_ns.delta, signed=True),
            top_s,
            Text(note),
        )
    if len(shown) > MAX_ROWS:
        t.add_row("...", "", "", "", f"{len(shown) - MAX_ROWS} more ranks (--json has all)", "")
    return t


def _collectives(r: Report) -> Table:
    c = r.job.collectives if r.job else None
    assert c is not None
    t = Table(
        title=(
            f"Collectives vs ring size ({c.name}: k = {c.k:g}/step measured at n = "
            f"{c.world_size}, {c.crypto_ops_per_step:,} crypto ops/step = 4·k·(n−1); "
            f"+{duration(c.growth_per_collective_ns)} per collective)"
        ),
        title_justify="left",
        show_edge=False,
    )
    for col in ("n", "crypto ops/step", "predicted CC collective cost/step"):
        t.add_column(col, justify="right")
    for p in c.predicted:
        lo, hi = p["cc_collective_ns_per_step"]["low"], p["cc_collective_ns_per_step"]["high"]
        cost = duration(lo) if lo == hi else f"{duration(lo)} .. {duration(hi)}"
        t.add_row(str(p["world_size"]), f"{p['crypto_ops_per_step']:,}", cost)
    return t
