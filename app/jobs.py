"""Analyses run in a bounded worker process (``worker``), in a queue, cached by content.

The key of an analysis is a hash of the bytes of both sides (and of the file names inside a
folder of ranks, since ranks may come from names), so re-opening the same pair — from the
sample list, the trace folder or a new upload of the same files — is answered from the cache.
The server keeps reports and evidence samples (small) for many pairs; the loaded pairs (the
events, large) live only in the browse worker process, for the few most recent ones.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict, deque
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccdiag.app.sources import Source, SourceError
from ccdiag.app.worker import CancelledError, Limits, RefusedError, Worker

from ccdiag.errors import InputError

#: (stage, progress when it starts)
STAGES = (
    ("hashing the files", 0.0),
    ("parsing the baseline", 0.05),
    ("parsing the treatment", 0.45),
    ("aligning steps", 0.85),
    ("attributing the delta", 0.9),
    ("sampling the evidence", 0.97),
)


@dataclass
class Job:
    """One analysis: its state, current stage and result key."""

    id: str
    label: str
    source_id: str = ""
    state: str = "queued"  # queued | running | done | error
    stage: str = "waiting for the previous analysis"
    progress: float = 0.0
    message: str = ""
    key: str | None = None
    started: float = field(default_factory=time.monotonic)
    cached: bool = False
    position: int = 0  # place in the queue while queued (1 = next)
    cancel: threading.Event = field(default_factory=threading.Event)

    def status(self) -> dict[str, Any]:
        """What the browser may see (no paths)."""
        return {
            "state": self.state,
            "stage": self.stage,
            "progress": round(self.progress, 3),
            "message": self.message,
            "key": self.key,
            "label": self.label,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "cached": self.cached,
            "position": self.position,
        }


@dataclass
class Entry:
    """A finished analysis."""

    key: str
    label: str
    source: Source
    report: Any
    series: dict[str, Any]


def _file_digest(p: Path, memo: dict[tuple[str, int, int], str]) -> str:
    st = p.stat()
    k = (str(p), st.st_size, st.st_mtime_ns)
    if k not in memo:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        memo[k] = h.hexdigest()
    return memo[k]


def trace_files(p: Path) -> list[Path]:
    """The files of a trace path: the file itself, or a folder's files (per-rank sets), sorted."""
    return [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())


def path_digest(p: Path, memo: dict[tuple[str, int, int], str]) -> str:
    """Content hash of a file, or of a folder's files and their names."""
    if p.is_file():
        return _file_digest(p, memo)[:32]
    h = hashlib.sha256()
    for f in trace_files(p):
        h.update(f.relative_to(p).as_posix().encode())
        h.update(bytes.fromhex(_file_digest(f, memo)))
    return h.hexdigest()[:32]


def pair_key(b_digest: str, t_digest: str) -> str:
    """The cache key of a pair: ccdiag's version and both sides' content."""
    from ccdiag import __version__

    return hashlib.sha256(f"{__version__}|{b_digest}|{t_digest}".encode()).hexdigest()[:32]


class Analyses:
    """Runs analyses one at a time, in order, in a bounded worker process; caches by content.

    Jobs wait in a queue (each knows its position); a queued or running job can be cancelled.
    The analysis runs in ``worker.Worker`` (memory, time and gzip limits, see ``worker``); the
    timeline and the annotated trace are served by a second worker that keeps the last few
    pairs loaded, so browsing one analysis is not held up by the next one's parse.
    """

    def __init__(
        self,
        max_reports: int = 64,
        max_pairs: int = 3,
        limits: Limits | None = None,
        hold: Any = None,
    ) -> None:
        self.limits = limits or Limits()
        self.worker = Worker("analysis", self.limits)
        self.browser = Worker("browse", self.limits, max_pairs=max_pairs)
        self._hold = hold  # context manager factory: keeps an upload's files while in use
        self._lock = threading.RLock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._queue: deque[tuple[Job, Source]] = deque()
        self._wake = threading.Condition(self._lock)
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._by_source: dict[str, str] = {}
        self._digests: dict[tuple[str, int, int], str] = {}
        self._timelines: OrderedDict[tuple[str, int, int | None], dict[str, Any]] = OrderedDict()
        self.max_reports, self.max_pairs = max_reports, max_pairs
        self._running: Job | None = None
        threading.Thread(target=self._dispatch, name="ccdiag-analysis", daemon=True).start()

    def start_workers(self) -> None:
        """Start both worker processes now rather than at the first request."""
        self.worker.start()
        self.browser.start()

    def close(self) -> None:
        """End the worker processes."""
        self.worker.close()
        self.browser.close()

    # -- lookups ---------------------------------------------------------------------------

    def entry(self, key: object) -> Entry | None:
        """A finished analysis by key (None for anything unknown)."""
        if not isinstance(key, str):
            return None
        with self._lock:
            e = self._entries.get(key)
            if e is not None:
                self._entries.move_to_end(key)
            return e

    def job(self, job_id: object) -> Job | None:
        """A job by id (None for anything unknown)."""
        with self._lock:
            j = self._jobs.get(job_id) if isinstance(job_id, str) else None
            if j is not None and j.state == "queued":
                pos = next((i for i, (q, _) in enumerate(self._queue) if q is j), None)
                j.position = 0 if pos is None else pos + 1
                j.stage = f"queued, {_ordinal(j.position)} in line" + (
                    f" (running: {self._running.label})" if self._running else ""
                )
            return j

    def cached_key(self, source: Source) -> str | None:
        """The key of a source already analysed (files unchanged), without hashing anything."""
        with self._lock:
            key = self._by_source.get(self._source_stamp(source))
            return key if key in self._entries else None

    # -- running -----------------------------------------------------------------------------

    def submit(self, source: Source) -> Job:
        """Queue an analysis of a pair (or join the one already queued for it)."""
        with self._lock:
            for j in self._jobs.values():
                if j.source_id == source.id and j.state in ("queued", "running"):
                    return j
            job = Job(uuid.uuid4().hex, source.label, source.id)
            self._jobs[job.id] = job
            while len(self._jobs) > 200:
                self._jobs.popitem(last=False)
            self._queue.append((job, source))
            self._wake.notify()
        return job

    def cancel(self, job_id: object) -> bool:
        """Cancel a queued or running job; False when there is no such active job."""
        with self._lock:
            j = self._jobs.get(job_id) if isinstance(job_id, str) else None
            if j is None or j.state not in ("queued", "running"):
                return False
            j.cancel.set()
            if j.state == "queued":
                self._queue = deque(x for x in self._queue if x[0] is not j)
                j.state, j.message, j.stage = "error", "cancelled", "cancelled"
            return True

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                job, source = self._queue.popleft()
                self._running = job
            try:
                self._run(job, source)
            finally:
                with self._lock:
                    self._running = None

    def _stage(self, job: Job, i: int) -> None:
        job.stage, job.progress = STAGES[i]
        job.state = "running"

    def _run(self, job: Job, source: Source) -> None:
        try:
            self._stage(job, 0)
            if source.digests is not None:
                digests = source.digests
            else:
                digests = (
                    path_digest(source.baseline, self._digests),
                    path_digest(source.treatment, self._digests),
                )
            key = pair_key(*digests)
            with self._lock:
                self._by_source[self._source_stamp(source)] = key
            if self.entry(key) is None:
                with self._hold(source) if self._hold else nullcontext():
                    self._analyse(job, source, key)
            else:
                job.cached = True
            job.key, job.progress, job.state, job.stage = key, 1.0, "done", "done"
        except (InputError, SourceError) as exc:
            job.state = "error"
            job.message = exc.line() if isinstance(exc, InputError) else str(exc)
        except CancelledError:
            job.state, job.message, job.stage = "error", "cancelled", "cancelled"
        except RefusedError as exc:
            job.state, job.message = "error", str(exc)
        except Exception as exc:  # noqa: BLE001 - shown to the user, logged in full
            traceback.print_exc(file=sys.stderr)
            job.state, job.message = "error", f"analysis failed ({type(exc).__name__}): {exc}"

    def _progress(self, job: Job) -> Any:
        def on(kind: str, i: int, done: int = 0, total: int = 0) -> None:
            if kind == "stage":
                self._stage(job, i)
            elif kind == "parse" and total:
                lo, hi = STAGES[i][1], STAGES[i + 1][1]
                job.progress = lo + (hi - lo) * min(done / total, 1.0)
                job.stage = f"{STAGES[i][0]} ({100 * done / total:.0f} %)"

        return on

    def _analyse(self, job: Job, source: Source, key: str) -> None:
        report, series = self.worker.call(
            "analyse",
            source.baseline,
            source.treatment,
            progress=self._progress(job),
            cancel=job.cancel,
        )
        self._put(Entry(key, source.label, source, report, series))

    def _put(self, e: Entry) -> None:
        with self._lock:
            self._entries[e.key] = e
            self._entries.move_to_end(e.key)
            while len(self._entries) > self.max_reports:
                self._entries.popitem(last=False)

    @staticmethod
    def _source_stamp(source: Source) -> str:
        if source.digests is not None:
            return "|".join(source.digests)
        parts = []
        for p in (source.baseline, source.treatment):
            try:
                st = p.stat()
                parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append(str(p))
        return "|".join(parts)

    # -- timeline ----------------------------------------------------------------------------

    def _browse(self, e: Entry, op: str, *args: Any) -> Any:
        """A request to the browse worker about a finished analysis; InputError when refused."""
        try:
            with self._hold(e.source) if self._hold else nullcontext():
                return self.browser.call(op, e.source.baseline, e.source.treatment, *args)
        except RefusedError as exc:
            raise InputError(None, str(exc)) from None

    def annotated(self, key: str, folder: Path, max_bytes: int) -> Path:
        """The treatment with the diagnosis as tracks (``ccdiag annotate``), gzip, in ``folder``.

        Raises InputError when the analysis is gone or the file would exceed ``max_bytes``
        (checked on the treatment's size before writing and on the result)."""
        e = self.entry(key)
        if e is None:
            raise InputError(None, "this analysis is no longer loaded; choose the pair again")
        size = sum(f.stat().st_size for f in trace_files(e.source.treatment))
        if size > max_bytes:
            raise InputError(None, f"the treatment is {size / 1e6:.0f} MB: annotate it with `ccdiag annotate` instead")  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / f"annotated-{key[:16]}.json.gz"
        self._browse(e, "annotate", e.report, out)
        if out.stat().st_size > max_bytes:
            out.unlink()
            raise InputError(None, "the annotated trace is too large to download here: use `ccdiag annotate`")  # fmt: skip
        return out

    def timeline(self, key: str, index: int, rank: int | None) -> dict[str, Any]:
        """One aligned step of a finished analysis (the browse worker loads the pair)."""
        e = self.entry(key)
        if e is None:
            raise InputError(None, "this analysis is no longer loaded; choose the pair again")
        tkey = (key, index, rank)
        with self._lock:
            if tkey in self._timelines:
                return self._timelines[tkey]
        tl = self._browse(e, "timeline", index, rank)
        with self._lock:
            self._timelines[tkey] = tl
            while len(self._timelines) > 16:
                self._timelines.popitem(last=False)
        return tl


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
