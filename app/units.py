"""Units people read and the mechanisms' labels, for the figures and the pages.

The numbers go through ccdiag's one formatter, :mod:`ccdiag.units` (the reports and the CLI
use it too); this module only adds the dashboard's names for them and its colours. Plain
Python (no Dash, no plotly).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ccdiag.units import bandwidth, duration, quantity, share, size

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
#: Events no mechanism claimed in the step shown (and every baseline event).
NEUTRAL_COLOR = "#c7c7c7"

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
    return bandwidth(gbps)


def fmt_share(x: float | None, signed: bool = False) -> str:
    """A share of the step delta as a percentage (one decimal)."""
    return share(x, signed=signed)


def fmt_value(key: str, v: object) -> str:
    """An evidence value in units people read, chosen from its key."""
    if v is None:
        return "—"
    k = key.lower()
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if k.endswith("gbps"):
            return bandwidth(v)
        if k in ("latency", "toll") or k.endswith(("_ns_per_call", "_ns_per_launch")):
            return duration(v)
        if "bytes" in k and not k.endswith(("per_s", "per_sec", "_per_second")):
            return size(v)
    return quantity(key, v)


_UNIT_SUFFIX = re.compile(r"(_ns_per_step|_ns|_bytes|_gbps)$|^(ns_per_step|ns)$")


def quantity_label(key: str) -> str:
    """A column or row name from an evidence key, without the unit suffix the value now shows.

    ``latency_p50_ns`` -> ``latency p50``; ``blocked_in_async_calls_ns_per_step`` ->
    ``blocked in async calls per step``; ``bytes`` stays ``bytes``.
    """
    k = str(key)
    m = _UNIT_SUFFIX.search(k)
    if m:
        per_step = "per_step" in m.group(0)
        k = k[: m.start()] + ("_per_step" if per_step else "")
        k = k.strip("_") or ("per step" if per_step else "time")
    return k.replace("_", " ").strip()


def time_unit(values: Iterable[float | None]) -> tuple[float, str]:
    """The divisor and unit (ns, µs, ms, s) that suit the largest of ``values`` (ns)."""
    top = max((abs(v) for v in values if v is not None), default=0.0)
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if top >= div:
            return div, unit
    return 1.0, "ns"
