"""Progress reporting for long parses: an optional callback, called at a coarse granularity.

Parsers and the api call ``progress(task, done, total)``: ``task`` names the work (``reading
baseline.json.gz``), ``done`` and ``total`` count its units (bytes of trace text, table parts);
``total`` is None when unknown. Calls come a few dozen times per file at most (once per chunk of
JSON, once per part of an SQLite table), so a callback costs nothing measurable. The
``.nsys-rep`` reader calls the same callback with one argument (each line ``nsys export``
prints), so a callback takes ``done`` and ``total`` as optional.

Nothing here prints: the CLI turns the calls into rich progress bars, the app may ignore them.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Protocol

GZIP_MAGIC = b"\x1f\x8b"


class Progress(Protocol):
    """``progress(task, done=None, total=None)``; see the module docstring."""

    def __call__(self, task: str, done: int | None = None, total: int | None = None) -> None: ...


def uncompressed_size(path: Path) -> int:
    """Bytes of text a reader will go through: the file size, or for gzip its ISIZE trailer.

    The trailer holds the size modulo 2**32 of the last gzip member, exact for the single-member
    files the PyTorch profiler writes below 4 GiB; for others it is an estimate, which a progress
    bar tolerates (it only needs a total of the right order). Never raises.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if fh.read(2) != GZIP_MAGIC or size < 18:
                return size
            fh.seek(-4, 2)
            isize = struct.unpack("<I", fh.read(4))[0]
    except OSError:
        return 0
    while isize < size:  # wrapped past 4 GiB: text is larger than the compressed file
        isize += 1 << 32
    return isize
