"""Terminal rendering of an analysis :class:`~ccdiag.verdict.Report` (``ccdiag analyze``).

Pure presentation: reads only the Report, never frames; prints with rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ccdiag import units
from ccdiag.report.job import job_renderables
from ccdiag.report.layout import SentenceTable
from ccdiag.report.legend import PER_STEP_AND_PAID
from ccdiag.verdict import Report

if TYPE_CHECKING:
    from rich.text import JustifyMethod

_CONF = {"high": "green", "medium": "yellow", "low": "red"}


def _us(ns: float | None) -> str:
    """A duration for the CLI's tables: the one formatter (``ccdiag.units.duration``)."""
    return "-" if ns is None else units.duration(ns)


def _steps(r: Report) -> Table:
    st = r.step_ns
    t = Table(title="Per-step time", title_justify="left", show_edge=False)
    for c in ("", "median", "p10", "p90", "n"):
        t.add_column(c, justify="right" if c else "left")
    for name, sp in (("baseline", st.baseline_spread), ("treatment", st.treatment_spread)):
        t.add_row(name, _us(sp.median), _us(sp.p10), _us(sp.p90), str(sp.n))
    d = st.delta_spread
    if d is not None:
        t.add_row("delta", _us(d.median), _us(d.p10), _us(d.p90), str(d.n), style="bold")
    t.caption = (
        f"delta 95% CI {_us(st.delta_ci95[0])} .. {_us(st.delta_ci95[1])} "
        f"({'significant' if st.significant else 'NOT significant'}; {st.noise_method})"
    )
    t.caption_justify = "left"
    return t


def _attribution(r: Report) -> Group:
    """The partition: a row per mechanism with its two costs (``PER_STEP_AND_PAID``) and its
    finding (beside the numbers on a wide console, below the table on a narrow one)."""
    total = r.partition.total_ns_per_step if r.partition else r.step_ns.delta
    widest = max([len("unattributed"), *(len(a.mechanism) for a in r.attribution)])

    def make() -> Table:
        t = Table(title="Where the extra time goes", title_justify="left", show_edge=False)
        t.add_column("mechanism", min_width=widest)  # the name whole
        for c in ("per step", "paid", "share"):
            t.add_column(c, justify="right")
        t.add_column("conf.")
        return t

    rows: list[tuple[list[Any], str | None, str | None]] = [
        (
            [a.mechanism, _us(a.ns_per_step), _us(a.paid_ns_per_step), f"{a.share:.0%}",
             Text(a.confidence, style=_CONF[a.confidence])],
            f"[{a.rule}] {a.summary}",
            None,
        )
        for a in r.attribution
    ]  # fmt: skip
    un = r.unattributed_ns_per_step
    rows.append((["unattributed", _us(un), "", f"{r.unattributed_share:.0%}", ""], None, None))
    basis = r.partition.basis if r.partition else None
    rows.append((["total", _us(total), "", "100%", ""], basis, "bold"))
    table = SentenceTable(make, "finding", rows, no_wrap=range(1, 5))
    return Group(table, Text(PER_STEP_AND_PAID, style="dim"))


def _recommendations(r: Report, n: int = 6) -> Table | None:
    if not r.recommendations:
        return None
    t = Table(title="Fixes, by predicted recovery", title_justify="left", show_edge=False)
    cols: tuple[tuple[str, JustifyMethod], ...] = (
        ("fix", "left"),
        ("recovers", "right"),
        ("of gap", "right"),
        ("what / how predicted", "left"),
    )
    for c, j in cols:
        t.add_column(c, justify=j)
    for rec in r.recommendations[:n]:
        t.add_row(
            rec.fix,
            _us(rec.predicted_recovery_ns_per_step),
            f"{rec.share:.0%}",
            Text.assemble(rec.text, "\n", (rec.method, "dim")),  # text, not markup
        )
    return t


def _ledger(r: Report) -> Table | None:
    if r.partition is None or not r.partition.ledger:
        return None
    t = Table(title="Critical-path ledger (mean per step)", title_justify="left", show_edge=False)
    for c in ("category", "baseline", "treatment", "delta"):
        t.add_column(c, justify="left" if c == "category" else "right")
    for row in r.partition.ledger:
        if row.baseline == 0 and row.treatment == 0:
            continue
        t.add_row(
            f"{row.side}: {row.category}", _us(row.baseline), _us(row.treatment), _us(row.delta)
        )
    return t


def _rules(r: Report) -> Table:
    t = Table(title="Rules", title_justify="left", show_edge=False)
    for c in ("rule", "mechanism", "outcome", "reason"):
        t.add_column(c)
    style = {"fired": "bold", "clean": "green", "skipped": "dim"}
    for o in r.rules:
        t.add_row(
            f"{o.code} {o.name}", o.mechanism, Text(o.outcome, style=style[o.outcome]),
            Text(o.reason),
        )  # fmt: skip
    return t


def _skipped(r: Report) -> Table | Text:
    """Events the parsers did not turn into rows, by reason, both runs (nothing silently lost)."""
    b, t = r.baseline.skipped, r.treatment.skipped
    if not b and not t:
        return Text("skipped events: none (every event of both traces was read)", style="dim")
    table = Table(
        title="Skipped events (not read, by reason)", title_justify="left", show_edge=False
    )
    for c in ("reason", "baseline", "treatment"):
        table.add_column(c, justify="left" if c == "reason" else "right")
    for reason in sorted(set(b) | set(t), key=lambda k: (-(b.get(k, 0) + t.get(k, 0)), k)):
        table.add_row(reason, f"{b.get(reason, 0):,}", f"{t.get(reason, 0):,}")
    table.add_row("total", f"{sum(b.values()):,}", f"{sum(t.values()):,}", style="bold")
    return table


def verdict_renderable(r: Report, *, details: bool = True) -> Group:
    """The verdict as rich renderables."""
    head = Text.assemble(  # text, not markup: file names may hold brackets
        (r.verdict, "bold"),
        "\n"
        f"baseline {r.baseline.source} ({r.baseline.profiler}) vs treatment {r.treatment.source} "
        f"({r.treatment.profiler}); {r.step_ns.n_steps} aligned steps"
        + ("; whole-program trace (one step)" if r.whole_program else "")
        + ("; HOST-ONLY treatment" if r.mode == "host_only" else ""),
    )
    parts: list[Any] = [
        Panel(head, title="ccdiag analyze", expand=False),
        _steps(r),
        _attribution(r),
    ]
    rec = _recommendations(r)
    if rec is not None:
        parts.append(rec)
    if details:
        led = _ledger(r)
        if led is not None:
            parts.append(led)
        parts.append(_rules(r))
    parts.append(_skipped(r))
    parts += job_renderables(r)
    for w in r.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    for note in r.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def render_verdict(report: Report, console: Console | None = None, *, quiet: bool = False) -> None:
    """Print the verdict (one line when ``quiet``)."""
    con = console or Console()
    if quiet:
        con.print(report.verdict, highlight=False, soft_wrap=True)
        return
    con.print(verdict_renderable(report))
