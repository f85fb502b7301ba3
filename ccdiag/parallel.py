"""Independent pieces of one analysis computed side by side: the baseline's and the treatment's
frames, a robust fit beside a ledger.

Most of an analysis is polars and numpy, which release the GIL; polars parallelizes inside an
operation, but many of the pair's operations are short or serial (a sort, a join, a partition),
so two of them on two threads finish sooner than one after the other (``bench/bench_analyze.py
--format nsys --size-mb 200`` on 2 cores: analysis / load 2.6-3.0x wall before, 1.9-2.0x with
the pieces of ``pairing``, ``ledger.context``, the gap model and the engine side by side). The
results are the same objects computed by the same functions: only the order in which they
finish changes.

Two pieces at most run at once: the caller's thread runs the first piece itself while one
worker thread takes the next; what the worker has not started when the caller is done, the
caller runs too. A piece may run pieces of its own (the gap model's fits inside a rule run side
by side): no thread ever waits for a piece that nobody runs. One after the other where polars
runs on one thread (``POLARS_MAX_THREADS=1``: a user or a worker process that asked for one
core), or ``CCDIAG_THREADS=1``.
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
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ccdiag")
        return _POOL


def run_all(fns: Sequence[Callable[[], Any]]) -> list[Any]:
    """``[f() for f in fns]``, two at a time: the first on this thread, the others offered to the
    worker and run here when it has not started them. An exception is raised as the loop would
    raise it: the first failing piece's, in ``fns``' order (the pieces not started are
    dropped)."""
    if len(fns) <= 1 or workers() == 1:
        return [f() for f in fns]
    futures: list[Future[Any]] = [_pool().submit(f) for f in fns[1:]]
    try:
        out = [fns[0]()]
        for f, fut in zip(fns[1:], futures):
            out.append(f() if fut.cancel() else fut.result())
        return out
    finally:
        for fut in futures:
            fut.cancel()


def both(f: Callable[[], A], g: Callable[[], B]) -> tuple[A, B]:
    """``(f(), g())``, side by side (:func:`run_all`)."""
    a, b = run_all([f, g])
    return a, b
