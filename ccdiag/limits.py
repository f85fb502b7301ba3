"""Limits on what reading one input may cost: decompression bombs, huge tokens, tiny events.

Every reader enforces these while it reads (on bytes read, before any frame is built), so that
one memory bound holds for every input shape (docs/limits.md states it and measures it).

**Decompression.** A gzip file may inflate to about 1,000 times its size; a real trace does not
come close (the Kineto and nsys stats traces in tests/data inflate 12-16x). Every reader that
inflates gzip data (Kineto ``.json.gz``, nsys stats ``.csv.gz``) stops with an
:class:`~ccdiag.errors.InputError` once a file has produced more than

    min(max_bytes, max(GRACE_BYTES, max_ratio x its compressed size))

bytes. Defaults: ``max_ratio`` 100, ``max_bytes`` 64 GiB; set them with the environment
variables ``CCDIAG_GZIP_MAX_RATIO`` and ``CCDIAG_GZIP_MAX_GB`` (read at each file, so the CLI,
the app and the API follow them). Any file may inflate to ``GRACE_BYTES`` (64 MiB), whatever
its ratio, unless ``max_bytes`` is lower: small inputs cost little.

A server (the dashboard) lowers the limit for what it reads with :func:`inflation_limit`::

    from ccdiag import limits
    with limits.inflation_limit(max_bytes=512 << 20):   # uploads: at most 512 MiB of text
        report = api.diagnose(baseline, treatment)

The lower of that and the environment's limit applies, in the calling thread (and in the
reader threads it starts); other threads keep theirs.

**Tokens and buffers.** One JSON element of ``traceEvents`` (one event) may hold at most
:data:`MAX_EVENT_BYTES`; the text before the array (and after it) at most
:data:`MAX_HEADER_BYTES`; one CSV line at most :data:`MAX_LINE_BYTES`.

**Events per byte.** A trace whose events average fewer than :data:`MIN_EVENT_BYTES` bytes of
text each is refused after its first chunks (a profiler never writes such events; ``{}`` repeated
millions of times is a decoding-cost bomb), and no chunk decodes more than
:data:`MAX_EVENTS_PER_CHUNK` events at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ccdiag.errors import InputError

RATIO_ENV = "CCDIAG_GZIP_MAX_RATIO"
BYTES_ENV = "CCDIAG_GZIP_MAX_GB"
DEFAULT_RATIO = 100.0
DEFAULT_GB = 64.0
GRACE_BYTES = 64 << 20

#: Largest single element of a JSON event array (one event), in bytes of text.
MAX_EVENT_BYTES = 16 << 20
#: Largest text before the event array (or after it), whitespace not counted after it.
MAX_HEADER_BYTES = 64 << 20
#: Largest line of a CSV report.
MAX_LINE_BYTES = 1 << 20
#: Fewest bytes of text per event, on average, that a trace may have (checked from 50,000 on).
MIN_EVENT_BYTES = 16
#: Fewest bytes per row, on average, that a CSV report may have (checked from 50,000 rows on).
MIN_ROW_BYTES = 40
#: Events decoded at once (a chunk of the array holds at most about this many).
MAX_EVENTS_PER_CHUNK = 100_000


def size_text(n: float) -> str:
    """Bytes in binary units (``64.0 MiB``), for messages."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


_size = size_text


@dataclass(frozen=True)
class GzipLimit:
    """How far one gzip file may inflate."""

    max_ratio: float = DEFAULT_RATIO
    max_bytes: int = int(DEFAULT_GB * (1 << 30))

    def allowed(self, compressed: int) -> int:
        """Most decompressed bytes a file of ``compressed`` bytes may produce."""
        return int(min(self.max_bytes, max(GRACE_BYTES, self.max_ratio * compressed)))

    def error(self, path: Path, compressed: int) -> InputError:
        """The one-line refusal."""
        return InputError(
            path,
            f"refused: gzip data inflates to more than {_size(self.allowed(compressed))} from "
            f"{_size(compressed)} (decompression limit: {self.max_ratio:g}x the compressed size, "
            f"at least {_size(min(GRACE_BYTES, self.max_bytes))}, at most "
            f"{_size(self.max_bytes)}); if the trace is genuine, raise {RATIO_ENV} or {BYTES_ENV}",
        )


#: A lower limit set by :func:`inflation_limit` for the current context (None: none).
_OVERRIDE: contextvars.ContextVar[GzipLimit | None] = contextvars.ContextVar(
    "ccdiag_gzip_override", default=None
)


@contextlib.contextmanager
def inflation_limit(
    max_bytes: int | None = None, max_ratio: float | None = None
) -> Iterator[GzipLimit]:
    """Lower the decompression limit for every file read inside the ``with`` block.

    Args:
        max_bytes: most bytes one gzip file may inflate to (e.g. ``512 << 20`` for uploads);
            below ``GRACE_BYTES`` it is the limit for every file, small ones included.
        max_ratio: most inflated bytes per compressed byte.

    The limit in force is the lower of this and the environment's (``CCDIAG_GZIP_*``); it
    applies in this thread and in the reader threads started from it. Yields the limit.
    """
    if (max_bytes is not None and max_bytes <= 0) or (max_ratio is not None and max_ratio <= 0):
        raise ValueError("inflation_limit: max_bytes and max_ratio must be positive")
    base = _OVERRIDE.get() or GzipLimit()
    lim = GzipLimit(
        min(base.max_ratio, max_ratio) if max_ratio is not None else base.max_ratio,
        min(base.max_bytes, int(max_bytes)) if max_bytes is not None else base.max_bytes,
    )
    token = _OVERRIDE.set(lim)
    try:
        yield lim
    finally:
        _OVERRIDE.reset(token)


def gzip_limit(path: Path | None = None) -> GzipLimit:
    """The limit in force: the environment variables (else the defaults), lowered by any
    :func:`inflation_limit` in force; ``path``: for errors."""
    ratio, gb = DEFAULT_RATIO, DEFAULT_GB
    try:
        ratio = float(os.environ.get(RATIO_ENV, ratio))
        gb = float(os.environ.get(BYTES_ENV, gb))
    except ValueError:
        raise InputError(
            path, f"{RATIO_ENV} and {BYTES_ENV} must be numbers (e.g. {RATIO_ENV}=200)"
        ) from None
    if not (ratio > 0 and gb > 0):
        raise InputError(path, f"{RATIO_ENV} and {BYTES_ENV} must be positive numbers")
    lim = GzipLimit(ratio, int(gb * (1 << 30)))
    low = _OVERRIDE.get()
    if low is not None:
        lim = GzipLimit(min(lim.max_ratio, low.max_ratio), min(lim.max_bytes, low.max_bytes))
    return lim


class Budget:
    """Counts one file's inflated bytes against the limit in force.

    Create it in the thread that asked for the read (it resolves the limit there); it may then
    be used on a reader thread.
    """

    def __init__(
        self, path: Path, compressed: int | None = None, limit: GzipLimit | None = None
    ) -> None:
        self.path = path
        self.limit = limit or gzip_limit(path)
        self.compressed = path.stat().st_size if compressed is None else compressed
        self.allowed = self.limit.allowed(self.compressed)
        self.produced = 0

    def add(self, n: int) -> None:
        """Count ``n`` more inflated bytes; raises InputError past the limit."""
        self.produced += n
        if self.produced > self.allowed:
            raise self.limit.error(self.path, self.compressed)


# -- special files ----------------------------------------------------------------------------
def _kind(mode: int) -> str | None:
    """What a non-regular file is, for messages (None: a regular file)."""
    import stat

    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def special_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a trace file without risk of a hang, or None (a regular
    file). Never opens it: a FIFO would block ``open``; a device may never end."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return "a symbolic link to a file that does not exist"
        return "no such file"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return _kind(st.st_mode)


def open_regular(path: Path, what: str = "a trace file"):  # type: ignore[no-untyped-def]
    """Open a regular file for binary reading; anything else (FIFO, device, socket, folder,
    dangling link) is an InputError, never a hang.

    The file is opened with ``O_NONBLOCK`` (a FIFO swapped in after a check cannot block the
    open) and checked with ``fstat`` on the open descriptor, so there is no window between the
    check and the read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        why = special_file(path) or "no such file"
        raise InputError(path, f"cannot read: {why}") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(path, f"is {kind}, not {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# -- the memory bound -------------------------------------------------------------------------
#: Interpreter, libraries and a few chunks in flight.
MEMORY_BASE = int(0.35 * (1 << 30))
#: Peak bytes per byte of uncompressed input, for the densest input that is read.
MEMORY_FACTOR = 8.0


def memory_bound(uncompressed: int) -> int:
    """The most resident memory one ``ccdiag summary`` of an input of ``uncompressed`` bytes
    of text may take: ``MEMORY_BASE + MEMORY_FACTOR x uncompressed`` (docs/limits.md; for
    ``analyze``, ``uncompressed`` is the two inputs together). For gzip, ``uncompressed`` is at
    most the inflation limit, so the bound is also ``MEMORY_BASE + MEMORY_FACTOR x limit``."""
    return int(MEMORY_BASE + MEMORY_FACTOR * max(0, uncompressed))
