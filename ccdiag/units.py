"""ccdiag's one unit formatter: durations, sizes, bandwidths, shares, plain numbers, lists.

Every surface uses it: the reports (``ccdiag.report``, which re-exports it as
``ccdiag.report.units``), the dashboard (``ccdiag.app.units``) and the text the CLI prints.
Fixed and locale-free: the same number always gives the same text, so reports of the same
inputs are byte-identical.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def duration(ns: float | None, *, signed: bool = False) -> str:
    """A duration in the unit that reads best: ``850 ns``, ``9.6 µs``, ``1.51 ms``, ``2.30 s``."""
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "—"
    sign = "+" if signed and ns > 0 else ""
    a = abs(ns)
    if a < 1_000:
        text = f"{ns:.0f} ns"
    elif a < 1_000_000:
        text = f"{ns / 1e3:.1f} µs"
    elif a < 1_000_000_000:
        text = f"{ns / 1e6:.2f} ms"
    else:
        text = f"{ns / 1e9:.2f} s"
    return sign + text


def size(n: float | None) -> str:
    """Bytes in B, KB, MB or GB (decimal, as bandwidths are quoted)."""
    if n is None:
        return "—"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def bandwidth(gbps: float | None) -> str:
    """A bandwidth in GB/s (bytes per ns)."""
    if gbps is None or (isinstance(gbps, float) and not math.isfinite(gbps)):
        return "—"
    return f"{gbps:.2f} GB/s"


def share(x: float | None, *, signed: bool = False) -> str:
    """A fraction as a percentage with one decimal: ``0.7618`` -> ``76.2 %``."""
    if x is None:
        return "—"
    pct = 100.0 * x
    if abs(pct) < 0.05:
        pct = 0.0
    return f"{pct:+.1f} %" if signed else f"{pct:.1f} %"


def number(v: object) -> str:
    """A plain number: integers with thousands separators, floats with 4 significant digits."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "—"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:.4g}"
    return str(v)


def quantity(key: str, v: object) -> str:
    """A value formatted by what its key says it is (``*_ns`` durations, ``bytes``, shares)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return number(v)
    k = key.lower()
    if k.endswith("_ns") or k.endswith("ns_per_step") or k in ("ns", "median_ns"):
        return duration(v)
    if "bytes" in k and "per_s" not in k:
        return size(v)
    if (
        k == "share"
        or k.startswith(("share_", "overlap_"))
        or k.endswith(("utilization", "_share"))
    ):
        return share(v)
    if k == "ratio" or k.endswith("_ratio"):  # treatment / baseline
        return f"{v:.2f}x"
    return number(v)


def listed(items: Sequence[object], k: int = 3) -> str:
    """The first ``k`` items, comma-separated, and how many more: ``a, b, c and 5 more``
    (long lists in one-line messages: ranks, step names, file names)."""
    shown = ", ".join(str(i) for i in items[:k])
    return shown + (f" and {len(items) - k} more" if len(items) > k else "")
