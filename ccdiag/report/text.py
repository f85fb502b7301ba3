"""Terminal rendering (rich) of a trace summary (``ccdiag summary``)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ccdiag.report.units import duration, size


def fmt_ns(ns: float | None) -> str:
    """A duration in the unit that reads best: ns, µs, ms or s."""
    return duration(ns)


def fmt_bytes(n: float | None) -> str:
    """A size in B, KB, MB or GB (decimal, as bandwidths are quoted)."""
    return size(n)


def fmt_bw(nbytes: float | None, ns: float | None) -> str:
    """Bandwidth in GB/s (bytes per ns), without the unit."""
    if not nbytes or not ns:
        return "—"
    return f"{nbytes / ns:.2f}"


def _mean(total: float, count: int) -> str:
    return fmt_ns(total / count) if count else "—"


def _facts(s: dict[str, Any]) -> Table:
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    rank = s.get("rank")
    world = s.get("world_size")
    versions = ", ".join(
        f"{label} {s[key]}"
        for key, label in (
            ("driver_version", "driver"),
            ("cuda_runtime", "CUDA runtime"),
            ("cuda_driver", "CUDA driver API"),
            ("torch_version", "PyTorch"),
            ("nccl_version", "NCCL"),
        )
        if s.get(key)
    )
    rows = [
        ("trace", f"{s.get('source')} ({s.get('format')}, {s.get('profiler')})"),
        ("GPU", s.get("gpu") or "not recorded"),
        ("versions", versions or "not recorded"),
        ("rank", "—" if rank is None else f"{rank}" + (f" of {world}" if world else "")),
        ("CC mode", s.get("cc_mode") or "not recorded"),
        (
            "events",
            f"{s.get('n_events', 0):,} read, {sum(s.get('skipped', {}).values()):,} skipped",
        ),
        ("span", fmt_ns(s.get("span_ns"))),
    ]
    if s.get("host_only"):
        rows.append(("note", "no GPU activity recorded (host-side events only)"))
    for k, v in rows:
        t.add_row(k, Text(str(v)))  # text, not markup: file names, names read from the trace
    return t


def _steps(s: dict[str, Any]) -> Table:
    st, per = s.get("steps", {}), s.get("per_step", {})
    t = Table(
        title="Steps",
        caption="durations: host step windows; kernels, launches: median per step",
        box=box.SIMPLE_HEAVY,
        pad_edge=False,
        title_justify="left",
        caption_justify="left",
    )
    for col in ("steps", "marker", "median", "p10", "p90", "kernels", "launches"):
        t.add_column(col, justify="left" if col == "marker" else "right", no_wrap=True)
    t.add_row(
        str(st.get("count", 0)),
        str(st.get("marker") or f"({st.get('from') or 'whole trace'})")[:18],
        fmt_ns(st.get("median_ns")),
        fmt_ns(st.get("p10_ns")),
        fmt_ns(st.get("p90_ns")),
        "—" if per.get("kernels") is None else f"{per['kernels']:g}",
        "—" if per.get("launches") is None else f"{per['launches']:g}",
    )
    if st.get("why"):
        t.caption = f"steps: {st['why']}\n{t.caption}"
    return t


def _activity(s: dict[str, Any]) -> Table:
    t = Table(
        title="GPU work and host calls", box=box.SIMPLE_HEAVY, pad_edge=False, title_justify="left"
    )
    for col in ("what", "count", "total", "mean", "bytes", "GB/s"):
        t.add_column(col, justify="left" if col == "what" else "right", no_wrap=True)

    def row(label: str, d: dict[str, Any], with_bytes: bool = False) -> None:
        count, total = d.get("count", 0), d.get("total_ns", 0)
        nbytes = d.get("bytes") if with_bytes else None
        t.add_row(
            label,
            f"{count:,}",
            fmt_ns(total),
            _mean(total, count),
            fmt_bytes(nbytes) if with_bytes else "",
            fmt_bw(nbytes, total) if with_bytes else "",
        )

    k = s.get("kernels", {})
    row("kernels", k)
    if k.get("graph"):
        t.add_row("  launched by graphs", f"{k['graph']:,}", "", "", "", "")
    row("  collectives", s.get("collectives", {}), with_bytes=True)
    la = s.get("launches", {})
    row("launch calls", la)
    if la.get("graph_launches"):
        t.add_row("  graph launches", f"{la['graph_launches']:,}", "", "", "", "")
    row("host sync calls", s.get("sync", {}))
    mc = s.get("memcpy", {})
    row("memcpy", mc, with_bytes=True)
    for kind, d in mc.get("by_kind", {}).items():
        row(f"  {kind}", d, with_bytes=True)
    row("memset", s.get("memset", {}), with_bytes=True)
    for report, d in (s.get("summaries") or {}).items():
        t.add_row(f"{report} (summary table)", f"{d['count']:,}", fmt_ns(d["total_ns"]),
                  _mean(d["total_ns"], d["count"]), "", "")  # fmt: skip
    return t


def _skipped(s: dict[str, Any]) -> Table | None:
    skipped = s.get("skipped") or {}
    if not skipped:
        return None
    t = Table(title="Skipped events", box=box.SIMPLE, pad_edge=False, title_justify="left")
    t.add_column("reason")
    t.add_column("count", justify="right")
    for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        t.add_row(reason, f"{n:,}")
    return t


def summary_renderable(s: dict[str, Any]) -> Group:
    """The summary as rich renderables (pure: nothing is printed)."""
    parts: list[Any] = [_facts(s), Text(""), _steps(s), _activity(s)]
    skipped = _skipped(s)
    if skipped is not None:
        parts.append(skipped)
    for w in s.get("warnings") or []:
        parts.append(Text(f"warning: {w}", style="yellow"))
    return Group(*parts)


def render_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print a summary (``ccdiag.summary.summarize``) as readable tables.

    Args:
        summary: the summary dict.
        console: where to print; a new stdout console when None.
    """
    (console or Console()).print(summary_renderable(summary))
