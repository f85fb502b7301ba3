"""ccdiag: why is this GPU workload slower under NVIDIA Confidential Computing?

The public API lives in :mod:`ccdiag.api`; its functions are re-exported here lazily, so that
light modules (``ccdiag.profiling``, ``ccdiag.emulate``) import on a GPU machine that has PyTorch but
not ccdiag's analysis dependencies. ``dir(ccdiag)`` lists what is here; in a notebook::

    import ccdiag
    report = ccdiag.diagnose("baseline.json.gz", "treatment.json.gz")
    report                       # renders as a table (Report._repr_html_)
    report.to_polars()           # one row per mechanism
    ccdiag.figures.delta_waterfall(report)

See docs/notebook.md for a whole session.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# functions of ccdiag.api, re-exported (a name the api does not define yet, e.g. ``predict``
# before it lands, is left out of dir() and raises AttributeError)
_API = (
    "load_trace",
    "load_pair",
    "pair",
    "diagnose",
    "diagnose_pair",
    "summarize",
    "evidence_series",
    "step_timeline",
    "predict",
    "explain",
    "list_rules",
    "render_report",
    "report_schema",
    "load_report",
    "compare_reports",
    "annotate",
)
# the models the api returns: module that defines them
_TYPES = {"Report": "ccdiag.verdict", "Pair": "ccdiag.pairing", "Trace": "ccdiag.schema"}
# public submodules, imported on first use
_MODULES = ("api", "figures")


def _api_names() -> list[str]:
    from ccdiag import api

    return [n for n in _API if hasattr(api, n)]


def __getattr__(name: str) -> Any:
    import importlib

    if name in _API:
        from ccdiag import api

        if hasattr(api, name):
            return getattr(api, name)
    elif name in _TYPES:
        return getattr(importlib.import_module(_TYPES[name]), name)
    elif name in _MODULES:
        return importlib.import_module(f"ccdiag.{name}")
    elif name == "__all__":
        return _public()
    elif name == "capture":
        from ccdiag.profiling import capture

        return capture
    raise AttributeError(f"module 'ccdiag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(_public())


def _public() -> list[str]:
    """What ``from ccdiag import *`` and ``dir(ccdiag)`` list (imports ccdiag.api)."""
    return ["__version__", "capture", *_api_names(), *_TYPES, *_MODULES]


# ``__all__`` is computed on first use (PEP 562: module __getattr__ answers it), because listing
# the api's names imports ccdiag.api (polars, pydantic): ``import ccdiag`` itself stays light for
# the CLI's start-up and for a GPU machine that has only the capture dependencies.
