"""Independent pieces of one analysis computed side by side: the baseline's and the treatment's
frames, a robust fit beside a ledger.

Most of an analysis is polars and numpy, which release the GIL; polars parallelizes inside an
operation, but many of the pair's operations are short or serial (a sort, a join, a partition),
so two of them on two threads finish sooner than one after the other (a 200 MB Nsight Systems
pair's call tables, call sequences and critical windows: 2.1-2.3 s wall one after the other,
1.5 s side by side on 2 cores; ``bench/bench_analyze.py`` measures the whole). The results are the
same objects computed by the same functions: only the order in which they finish changes.

Two workers at most; none (one after the other) where polars runs on one thread
(``POLARS_MAX_THREADS=1``: a user or a worker process that asked for one core), or
``CCDIAG_THREADS=1``. A task run from inside a worker runs its pieces inline (no nested waits on
the same two workers).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

A = TypeVar("A")
B = TypeVar("B")

_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
_INSIDE = threading.local()


def workers() -> int:
    """How many pieces run at once: 2, or 1 where polars or ``CCDIAG_THREADS`` says one core."""
    env = os.environ.get("CCDIAG_THREADS", "").strip()
    if env.isdigit() and int(env) <= 1:
        return 1
    import polars as pl

    return 2 if pl.thread_pool_size() > 1 else 1


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ccdiag")
        return _POOL


def _inline() -> bool:
    return bool(getattr(_INSIDE, "on", False)) or workers() == 1


def _marked(fn: Callable[[], A]) -> Callable[[], A]:
    def run() -> A:
        _INSIDE.on = True
        try:
            return fn()
        finally:
            _INSIDE.on = False

    return run


def run_all(fns: Sequence[Callable[[], Any]]) -> list[Any]:
    """``[f() for f in fns]``, two at a time. An exception is raised as the loop would raise it:
    the first failing piece's, in ``fns``' order (every piece has run or been cancelled)."""
    if len(fns) <= 1 or _inline():
        return [f() for f in fns]
    futures: list[Future[Any]] = [_pool().submit(_marked(f)) for f in fns]
    try:
        return [f.result() for f in futures]
    finally:
        for f in futures:
            f.cancel()


def both(f: Callable[[], A], g: Callable[[], B]) -> tuple[A, B]:
    """``(f(), g())``, side by side (:func:`run_all`)."""
    a, b = run_all([f, g])
    return a, b
