"""ccdiag: why is this GPU workload slower under NVIDIA Confidential Computing?

The public API lives in :mod:`ccdiag.api`; the names below are re-exported from it.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ccdiag.api import diagnose, explain, list_rules, load_pair, load_trace, summarize

__all__ = ["__version__", "diagnose", "explain", "list_rules", "load_pair", "load_trace", "summarize"]
