"""ccdiag: why is this GPU workload slower under NVIDIA Confidential Computing?

The public API lives in :mod:`ccdiag.api`; its functions are re-exported here lazily, so that
light modules (``ccdiag.profiling``, ``ccdiag.emulate``) import on a GPU machine that has PyTorch but
not ccdiag's analysis dependencies.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = ("diagnose", "explain", "list_rules", "load_pair", "load_trace", "summarize")
__all__ = ["__version__", "capture", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from ccdiag import api

        return getattr(api, name)
    if name == "capture":
        from ccdiag.profiling import capture

        return capture
    raise AttributeError(f"module 'ccdiag' has no attribute {name!r}")
