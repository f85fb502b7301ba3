"""The pair's model: the core that every rule reads and nothing but the engine and the api extends.

Modules (each declares what it uses; none imports ``ccdiag.rules``):

- :mod:`~ccdiag.ledger.vocab`: ledger categories, API call classes, launch paths, GPU classes.
- :mod:`~ccdiag.ledger.host`: the main host thread's calls and gaps per step, host intervals.
- :mod:`~ccdiag.ledger.gpu`: GPU rows, busy time, host copies with their GPU copy.
- :mod:`~ccdiag.ledger.critical`: GPU-critical windows, exposure, the per-step ledger.
- :mod:`~ccdiag.ledger.align`: call-level alignment of the two runs (matched calls and gaps).
- :mod:`~ccdiag.ledger.control`: the host-slowdown control (cpu_ops that make no CUDA call).
- :mod:`~ccdiag.ledger.stats`: small statistics and per-step joins.
- :mod:`~ccdiag.ledger.schemas`: the frame schemas between the layers.
- :mod:`~ccdiag.ledger.context`: :class:`PairContext`, the per-pair context.
"""

from __future__ import annotations

from ccdiag.ledger.context import PairContext

__all__ = ["PairContext"]
