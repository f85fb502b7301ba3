"""Units people read (ns → µs/ms/s, bytes → KB/MB/GB, GB/s) and the mechanisms' labels.

Plain Python (no Dash, no plotly): used by the figures, the pages and ``ccdiag.report``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ccdiag.report.units import duration, size

MECHANISM_LABELS: dict[str, str] = {
    "launch_toll": "Kernel launch toll",
    "serialized_copies": "Serialized copies",
    "blocked_non_blocking": "Blocked non_blocking copies",
    "encrypted_collectives": "Encrypted collectives",
    "uvm_migration": "UVM migration",
    "sync_stall": "Sync stalls",
    "one_time_setup": "One-time setup",
    "host_slowdown": "Host code slower",
    "unattributed": "Unattributed",
}

MECHANISM_COLORS: dict[str, str] = {
    "launch_toll": "#d62728",
    "serialized_copies": "#1f77b4",
    "blocked_non_blocking": "#ff7f0e",
    "encrypted_collectives": "#9467bd",
    "uvm_migration": "#8c564b",
    "sync_stall": "#e377c2",
    "one_time_setup": "#17becf",
    "host_slowdown": "#bcbd22",
    "unattributed": "#9e9e9e",
}

RUN_LABELS = {"baseline": "baseline (CC off)", "treatment": "treatment (CC on)"}
RUN_COLORS = {"baseline": "#4c78a8", "treatment": "#f58518"}


def mechanism_label(mechanism: str) -> str:
    """A mechanism id as people read it (the id itself when unknown)."""
    return MECHANISM_LABELS.get(mechanism, mechanism.replace("_", " "))


def fmt_ns(ns: float | None, signed: bool = False) -> str:
    """A duration in the unit that reads best: ns, µs, ms or s (``—`` for None)."""
    return duration(ns, signed=signed)


def fmt_bytes(n: float | None) -> str:
    """A size in B, KB, MB or GB (decimal, as bandwidths are quoted)."""
    return size(n)


def fmt_gbps(gbps: float | None) -> str:
    """A bandwidth in GB/s (bytes per ns)."""
    return "—" if gbps is None else f"{gbps:.2f} GB/s"


def fmt_share(share: float | None) -> str:
    """A share of the step delta as a percentage."""
    return "—" if share is None else f"{100 * share:.0f} %"


def time_unit(values: Iterable[float | None]) -> tuple[float, str]:
    """The divisor and unit (ns, µs, ms, s) that suit the largest of ``values`` (ns)."""
    top = max((abs(v) for v in values if v is not None), default=0.0)
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if top >= div:
            return div, unit
    return 1.0, "ns"
