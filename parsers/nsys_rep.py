"""``.nsys-rep`` -> SQLite export (``nsys export``, a subprocess) -> the SQLite reader.

A report is an Nsight Systems binary; only ``nsys`` can read it. The conversion, its cache and
how ``nsys`` is found are in :mod:`ccdiag.parsers._nsys_export` (standard library only, so it
also runs as a script on a GPU machine without ccdiag's dependencies); the export is read with
:mod:`ccdiag.parsers.nsys_sqlite`. Without ``nsys`` (no ``NSYS`` variable, nothing on ``PATH``)
reading a report is an input error that says how to export it where it was recorded.
"""

from __future__ import annotations

from pathlib import Path

from ccdiag.parsers import _nsys_export, nsys_sqlite
from ccdiag.parsers._nsys_export import HOW_TO_EXPORT

from ccdiag.errors import InputError
from ccdiag.progress import Progress
from ccdiag.schema import Trace

__all__ = ["HOW_TO_EXPORT", "Progress", "export", "read"]


def export(rep: str | Path, *, progress: Progress | None = None) -> Path:
    """Convert a report to SQLite (or reuse the cached export); see ``_nsys_export.export``.

    Raises:
        InputError: no ``nsys``, or the export failed (with nsys's last line).
    """
    try:
        return _nsys_export.export(rep, progress=progress)
    except _nsys_export.ExportError as err:
        raise InputError(rep, str(err)) from None


def read(path: str | Path, *, progress: Progress | None = None, **options: object) -> Trace:
    """Read a ``.nsys-rep`` report (converted with ``nsys export``, cached).

    Args:
        path: the report.
        progress: called with each line nsys prints while exporting (one argument), then
            once per table part read (``ccdiag.progress``: task, done, total).
        **options: passed to :func:`ccdiag.parsers.nsys_sqlite.read` (``rank``, ``workers``).

    Returns:
        The trace; ``meta.format`` is ``nsys_rep`` and names the report, not the export.
    """
    rep = Path(path)
    sqlite = export(rep, progress=progress)
    trace = nsys_sqlite.read(sqlite, progress=progress, **options)
    trace.meta = trace.meta.model_copy(
        update={
            "source": rep.name,
            "format": "nsys_rep",
            "files": [rep.name],
            "size_bytes": rep.stat().st_size,
        }
    )
    return trace
