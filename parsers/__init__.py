"""Trace readers: one module per format, each returning a :class:`ccdiag.schema.Trace`.

``read(path)`` sniffs the format from the file's content (never from its name alone) and
dispatches:

- ``kineto``         PyTorch profiler Chrome-trace JSON, plain or gzip
- ``nsys_sqlite``    Nsight Systems SQLite export
- ``nsys_rep``       ``.nsys-rep``, converted with ``nsys export`` (subprocess)
- ``nsys_csv``       ``nsys stats`` CSV reports (cuda_api_trace + cuda_gpu_trace [+ *_sum])

A folder is one trace: per-rank Kineto files (a ``rank`` column), or one set of nsys stats
CSV reports.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from ccdiag.errors import InputError
from ccdiag.schema import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


def sniff(path: Path) -> str:
    """Return the format name of a file or folder, or raise InputError."""
    if not path.exists():
        from ccdiag.parsers import nsys_csv

        if nsys_csv.find_set(path) is not None:  # a prefix of nsys stats CSV reports
            return "nsys_csv"
        raise InputError(path, "no such file or folder")
    if path.is_dir():
        from ccdiag.parsers import folder

        return folder.sniff_folder(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    if not head:
        raise InputError(path, "empty file")
    if head.startswith(SQLITE_MAGIC):
        return "nsys_sqlite"
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as fh:
                inner = fh.read(64)
        except (OSError, EOFError) as exc:
            raise InputError(path, f"corrupt gzip stream ({exc})") from None
        if inner.lstrip()[:1] in (b"{", b"["):
            return "kineto"
        if _is_stats_csv(inner):
            return "nsys_csv"
        raise InputError(path, "gzip file does not contain a JSON trace or an nsys stats CSV")
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    if path.suffix == ".gz":
        raise InputError(path, "named .gz but not gzip-compressed")
    if path.suffix == ".nsys-rep" or head[:4] in (b"NSYS", b"QDST"):
        return "nsys_rep"
    if _is_stats_csv(head):
        return "nsys_csv"
    raise InputError(
        path,
        "unrecognized trace format (expected Kineto JSON[.gz], Nsight Systems .sqlite/"
        ".nsys-rep, or nsys stats CSV)",
    )


def _is_stats_csv(head: bytes) -> bool:
    """An ``nsys stats`` CSV report starts with its header (after a possible BOM)."""
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    return text.startswith(("Start (ns)", "Time (%)"))


def read(path: str | Path, **options: object) -> Trace:
    """Read any supported trace into the event schema.

    Args:
        path: a trace file, or a folder of per-rank files / nsys stats CSV reports.
        **options: passed to the format's reader.

    Returns:
        The parsed trace (steps are assigned later by ``ccdiag.steps``).
    """
    p = Path(path)
    fmt = sniff(p)
    if p.is_dir():
        from ccdiag.parsers import folder

        return folder.read_folder(p, fmt, **options)
    if fmt == "kineto":
        from ccdiag.parsers import kineto

        return kineto.read(p, **options)
    if fmt == "nsys_sqlite":
        from ccdiag.parsers import nsys_sqlite

        return nsys_sqlite.read(p, **options)
    if fmt == "nsys_rep":
        from ccdiag.parsers import nsys_rep

        return nsys_rep.read(p, **options)
    if fmt == "nsys_csv":
        from ccdiag.parsers import nsys_csv

        return nsys_csv.read(p, **options)
    raise InputError(p, f"no reader for format {fmt}")
