"""Analyses run in a background thread, with progress, cached by the traces' content.

The key of an analysis is a hash of the bytes of both sides (and of the file names inside a
folder of ranks, since ranks may come from names), so re-opening the same pair — from the
sample list, the trace folder or a new upload of the same files — is answered from the cache.
The cache keeps reports and evidence samples (small) for many pairs and the loaded pair (the
events, large) for the few most recent ones; the timeline reloads an evicted pair.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccdiag.app.sources import Source

from ccdiag import api
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
        }


@dataclass
class Entry:
    """A finished analysis."""

    key: str
    label: str
    source: Source
    report: Any
    series: dict[str, Any]
    pair: Any = None


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
    """Runs analyses one at a time in a worker thread and caches them by content."""

    def __init__(self, max_reports: int = 64, max_pairs: int = 3) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ccdiag-analysis")
        self._lock = threading.RLock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._by_source: dict[str, str] = {}
        self._digests: dict[tuple[str, int, int], str] = {}
        self._timelines: OrderedDict[tuple[str, int, int | None], dict[str, Any]] = OrderedDict()
        self.max_reports, self.max_pairs = max_reports, max_pairs

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
            return self._jobs.get(job_id) if isinstance(job_id, str) else None

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
        self._pool.submit(self._run, job, source)
        return job

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
                self._analyse(job, source, key)
            else:
                job.cached = True
            job.key, job.progress, job.state, job.stage = key, 1.0, "done", "done"
        except InputError as exc:
            job.state, job.message = "error", exc.line()
        except Exception as exc:  # noqa: BLE001 - shown to the user, logged in full
            traceback.print_exc(file=sys.stderr)
            job.state, job.message = "error", f"analysis failed ({type(exc).__name__}): {exc}"

    def _load(self, job: Job, i: int, path: Path) -> Any:
        """Parse one side, moving the progress bar through stage ``i`` as the reader reports."""
        self._stage(job, i)
        lo, hi = STAGES[i][1], STAGES[i + 1][1]
        base = job.stage

        def progress(task: str, done: int | None = None, total: int | None = None) -> None:
            if done is not None and total:
                job.progress = lo + (hi - lo) * min(done / total, 1.0)
                job.stage = f"{base} ({100 * done / total:.0f} %)"

        if "progress" in inspect.signature(api.load_trace).parameters:
            return api.load_trace(path, progress=progress)
        return api.load_trace(path)

    def _analyse(self, job: Job, source: Source, key: str) -> None:
        b = self._load(job, 1, source.baseline)
        t = self._load(job, 2, source.treatment)
        self._stage(job, 3)
        pair = api.pair(b, t)
        self._stage(job, 4)
        report = api.diagnose_pair(pair)
        self._stage(job, 5)
        series = api.evidence_series(pair)
        self._put(Entry(key, source.label, source, report, series, pair))

    def _put(self, e: Entry) -> None:
        with self._lock:
            self._entries[e.key] = e
            self._entries.move_to_end(e.key)
            while len(self._entries) > self.max_reports:
                self._entries.popitem(last=False)
            with_pair = [x for x in reversed(self._entries.values()) if x.pair is not None]
            for old in with_pair[self.max_pairs :]:
                old.pair = None

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

    def _loaded_pair(self, e: Entry) -> Any:
        with self._lock:
            if e.pair is None:
                e.pair = api.load_pair(e.source.baseline, e.source.treatment)
                self._put(e)
            return e.pair

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
        out = folder / f"annotated-{key[:16]}.json.gz"
        api.annotate_diagnosed(self._loaded_pair(e), e.report, e.source.treatment, out)
        if out.stat().st_size > max_bytes:
            out.unlink()
            raise InputError(None, "the annotated trace is too large to download here: use `ccdiag annotate`")  # fmt: skip
        return out

    def timeline(self, key: str, index: int, rank: int | None) -> dict[str, Any]:
        """One aligned step of a finished analysis (reloads the pair when it was evicted)."""
        e = self.entry(key)
        if e is None:
            raise InputError(None, "this analysis is no longer loaded; choose the pair again")
        tkey = (key, index, rank)
        with self._lock:
            if tkey in self._timelines:
                return self._timelines[tkey]
        pair = self._loaded_pair(e)
        tl = api.step_timeline(pair, index, rank=rank)
        with self._lock:
            self._timelines[tkey] = tl
            while len(self._timelines) > 16:
                self._timelines.popitem(last=False)
        return tl
