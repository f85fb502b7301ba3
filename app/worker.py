"""Analyses run in a child process whose memory and time are bounded.

The dashboard's server never parses a trace itself. A :class:`Worker` owns one child process
(``python -m ccdiag.app.worker``: a fresh interpreter, nothing inherited from the threaded
server, and nothing re-imported from the script that started the server) and sends it one
request at a time over a private socket pair (``multiprocessing.connection`` framing). While the child works, the server samples its
resident memory (``/proc/<pid>/status``) every 50 ms and kills it when it passes the limit, when
the request runs past its time limit, or when the user cancels; the next request starts a
fresh child. So a hostile or huge upload costs the server at most the limit, once, and the
memory is given back when the child ends; it cannot take the server down with it.

The child also reads gzip with the app's lower decompression limits (``CCDIAG_GZIP_MAX_RATIO``
and ``CCDIAG_GZIP_MAX_GB`` set in the child only, unless the user set them), and keeps the
last few loaded pairs for the timeline. A child that holds more than ``recycle_bytes`` after a
request is replaced, so memory a parse left behind is not kept for the next user.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The app's decompression limits (the CLI's: 100x, 64 GiB). Real traces inflate 12-16x.
APP_GZIP_MAX_RATIO = 40.0
APP_GZIP_MAX_GB = 4.0
DEFAULT_MAX_ANALYSIS_MB = 2048.0
DEFAULT_MAX_ANALYSIS_S = 300.0
POLL_S = 0.05


class RefusedError(Exception):
    """A request the worker did not finish; the message is one line for the user."""


class CancelledError(RefusedError):
    """The user cancelled the request."""


@dataclass(frozen=True)
class Limits:
    """What one request may cost the child."""

    memory_bytes: int = int(DEFAULT_MAX_ANALYSIS_MB * 1e6)
    timeout_s: float = DEFAULT_MAX_ANALYSIS_S
    idle_s: float = 600.0  # a child with nothing to do for this long exits (memory back)
    gzip_max_ratio: float = APP_GZIP_MAX_RATIO
    gzip_max_gb: float = APP_GZIP_MAX_GB

    def child_env(self) -> dict[str, str]:
        """Environment of the child: the app's gzip limits unless the user set their own."""
        from ccdiag.limits import BYTES_ENV, RATIO_ENV

        env = {}
        if RATIO_ENV not in os.environ:
            env[RATIO_ENV] = f"{self.gzip_max_ratio:g}"
        if BYTES_ENV not in os.environ:
            env[BYTES_ENV] = f"{self.gzip_max_gb:g}"
        return env


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (0 when it is gone or /proc is not there)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


class Worker:
    """One child process that runs requests one at a time, under :class:`Limits`."""

    def __init__(self, name: str, limits: Limits, max_pairs: int = 0, recycle_bytes: int = 0):
        self.name, self.limits, self.max_pairs = name, limits, max_pairs
        self.recycle_bytes = recycle_bytes or limits.memory_bytes // 2
        self._proc: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()
        self.peak_rss = 0  # largest child RSS seen (bytes), for tests and the log
        self.started = 0  # children started so far

    # -- the child's lifetime ----------------------------------------------------------------

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._drop()
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        ours, theirs = socket.socketpair()
        env = {**os.environ, **self.limits.child_env()}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ccdiag.app.worker",
                str(theirs.fileno()),
                str(self.max_pairs),
                str(self.limits.idle_s),
            ],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()
        self._proc, self._conn = proc, Connection(ours.detach())
        self.started += 1

    def _drop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(5)
            except Exception:  # noqa: BLE001 - a child that will not die is left to the OS
                pass

    def start(self) -> None:
        """Start the child now (its imports take seconds), so the first request need not wait."""
        with self._lock:
            self._ensure()

    def close(self) -> None:
        """End the child (if any)."""
        with self._lock:
            self._drop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- requests ----------------------------------------------------------------------------

    def call(
        self,
        op: str,
        *args: Any,
        progress: Callable[..., None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Any:
        """Run ``op`` in the child; its result, or RefusedError / CancelledError with a one-line reason."""
        with self._lock:
            self._ensure()
            try:
                self._conn.send((op, args))
            except OSError:  # the child had just left (idle): start another
                self._drop()
                self._ensure()
                self._conn.send((op, args))
            conn, proc = self._conn, self._proc
            start = time.monotonic()
            lim = self.limits
            while True:
                if conn.poll(POLL_S):
                    try:
                        kind, payload = conn.recv()
                    except (EOFError, OSError):
                        self._drop()
                        raise RefusedError(self._death(proc)) from None
                    if kind == "progress":
                        if progress is not None:
                            progress(*payload)
                        continue
                    self._after()
                    if kind == "ok":
                        return payload
                    raise RefusedError(payload)
                rss = rss_bytes(proc.pid)
                self.peak_rss = max(self.peak_rss, rss)
                if rss > lim.memory_bytes:
                    self._drop()
                    raise RefusedError(
                        f"refused: reading this pair needed more than {_mb(lim.memory_bytes)} "
                        "of memory (the app's limit per analysis, ccdiag app "
                        "--max-analysis-mb); analyse it with `ccdiag analyze` instead"
                    )
                if time.monotonic() - start > lim.timeout_s:
                    self._drop()
                    raise RefusedError(
                        f"refused: the analysis took longer than {lim.timeout_s:g} s (the "
                        "app's limit, --max-analysis-s); analyse it with `ccdiag analyze`"
                    )
                if cancel is not None and cancel.is_set():
                    self._drop()
                    raise CancelledError("cancelled")
                if proc.poll() is not None:
                    self._drop()
                    raise RefusedError(self._death(proc))

    def _death(self, proc: Any) -> str:
        code = proc.returncode if proc is not None else None
        return f"the analysis process ended unexpectedly (exit code {code}); see the server log"

    def _after(self) -> None:
        """Replace a child that kept much of its memory after the request."""
        if self._proc is not None and rss_bytes(self._proc.pid) > self.recycle_bytes:
            self._drop()


# --------------------------------------------------------------------------- in the child


def serve(conn: Any, max_pairs: int, idle_s: float = 600.0) -> None:
    """The child's loop: one request at a time until the connection closes or it idles."""
    from ccdiag.errors import InputError

    pairs: OrderedDict[tuple[str, str], Any] = OrderedDict()
    ops = {"analyse": _analyse, "timeline": _timeline, "annotate": _annotate, "sleep": _sleep}
    while True:
        try:
            if not conn.poll(idle_s):
                return
            op, args = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        last = [0.0]

        def progress(*p: Any) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.1 or p[:1] == ("stage",):
                last[0] = now
                conn.send(("progress", p))

        try:
            result = ops[op](pairs, max_pairs, progress, *args)
            conn.send(("ok", result))
        except InputError as exc:
            conn.send(("error", exc.line()))
        except MemoryError:
            pairs.clear()
            conn.send(("error", "refused: out of memory reading this pair"))
        except Exception as exc:  # noqa: BLE001 - shown to the user, logged in full
            import sys
            import traceback

            traceback.print_exc(file=sys.stderr)
            conn.send(("error", f"analysis failed ({type(exc).__name__}): {exc}"))


def _sleep(pairs: OrderedDict, max_pairs: int, progress: Any, seconds: float) -> float:
    """Hold the worker for ``seconds`` (a request that only waits: the tests' stuck analysis)."""
    time.sleep(seconds)
    return seconds


def _load(path: Path, i: int, progress: Callable[..., None]) -> Any:
    import inspect

    from ccdiag import api

    def step(task: str, done: int | None = None, total: int | None = None) -> None:
        if done is not None and total:
            progress("parse", i, done, total)

    if "progress" in inspect.signature(api.load_trace).parameters:
        return api.load_trace(path, progress=step)
    return api.load_trace(path)


def _remember(pairs: OrderedDict, max_pairs: int, key: tuple[str, str], pair: Any) -> None:
    if max_pairs <= 0:
        return
    pairs[key] = pair
    pairs.move_to_end(key)
    while len(pairs) > max_pairs:
        pairs.popitem(last=False)


def _pair(pairs: OrderedDict, max_pairs: int, b: Path, t: Path, progress: Any) -> Any:
    from ccdiag import api

    key = (str(b), str(t))
    if key in pairs:
        pairs.move_to_end(key)
        return pairs[key]
    bt = _load(b, 1, progress)
    tt = _load(t, 2, progress)
    pair = api.pair(bt, tt)
    _remember(pairs, max_pairs, key, pair)
    return pair


def _analyse(pairs: OrderedDict, max_pairs: int, progress: Any, b: Path, t: Path) -> Any:
    from ccdiag import api

    progress("stage", 1)
    bt = _load(b, 1, progress)
    progress("stage", 2)
    tt = _load(t, 2, progress)
    progress("stage", 3)
    pair = api.pair(bt, tt)
    progress("stage", 4)
    report = api.diagnose_pair(pair)
    progress("stage", 5)
    series = api.evidence_series(pair)
    _remember(pairs, max_pairs, (str(b), str(t)), pair)
    return report, series


def _timeline(
    pairs: OrderedDict, max_pairs: int, progress: Any, b: Path, t: Path, index: int, rank: Any
) -> Any:
    from ccdiag import api

    return api.step_timeline(_pair(pairs, max_pairs, b, t, progress), index, rank=rank)


def _annotate(
    pairs: OrderedDict, max_pairs: int, progress: Any, b: Path, t: Path, report: Any, out: Path
) -> str:
    from ccdiag import api

    api.annotate_diagnosed(_pair(pairs, max_pairs, b, t, progress), report, t, out)
    return str(out)


def main(argv: list[str]) -> None:
    """``python -m ccdiag.app.worker FD MAX_PAIRS``: serve the socket inherited as FD."""
    from multiprocessing.connection import Connection

    conn = Connection(int(argv[0]))
    import ccdiag.api  # noqa: F401 - import while the server has nothing for us yet

    serve(conn, int(argv[1]), float(argv[2]) if len(argv) > 2 else 600.0)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
