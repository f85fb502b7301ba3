"""Limits on what reading one input may cost: decompression bombs.

A gzip file may inflate to about 1,000 times its size; a real trace does not come close (the
Kineto and nsys stats traces in tests/data inflate 12-16x). Every reader that inflates gzip data
(Kineto ``.json.gz``, nsys stats ``.csv.gz``) stops with an :class:`~ccdiag.errors.InputError`
once a file has produced more than

    min(max_bytes, max(GRACE_BYTES, max_ratio x its compressed size))

bytes. Defaults: ``max_ratio`` 100, ``max_bytes`` 64 GiB; set them with the environment
variables ``CCDIAG_GZIP_MAX_RATIO`` and ``CCDIAG_GZIP_MAX_GB`` (read at each file, so the CLI,
the app and the API follow them). Any file may inflate to ``GRACE_BYTES`` (64 MiB), whatever
its ratio: small inputs cost little.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ccdiag.errors import InputError

RATIO_ENV = "CCDIAG_GZIP_MAX_RATIO"
BYTES_ENV = "CCDIAG_GZIP_MAX_GB"
DEFAULT_RATIO = 100.0
DEFAULT_GB = 64.0
GRACE_BYTES = 64 << 20


def _size(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


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
            f"at least {_size(GRACE_BYTES)}, at most {_size(self.max_bytes)}); if the trace is "
            f"genuine, raise {RATIO_ENV} or {BYTES_ENV}",
        )


def gzip_limit(path: Path | None = None) -> GzipLimit:
    """The limit in force (environment variables, else the defaults); ``path``: for errors."""
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
    return GzipLimit(ratio, int(gb * (1 << 30)))


class Budget:
    """Counts one file's inflated bytes against the limit in force."""

    def __init__(self, path: Path, compressed: int | None = None) -> None:
        self.path = path
        self.limit = gzip_limit(path)
        self.compressed = path.stat().st_size if compressed is None else compressed
        self.allowed = self.limit.allowed(self.compressed)
        self.produced = 0

    def add(self, n: int) -> None:
        """Count ``n`` more inflated bytes; raises InputError past the limit."""
        self.produced += n
        if self.produced > self.allowed:
            raise self.limit.error(self.path, self.compressed)
