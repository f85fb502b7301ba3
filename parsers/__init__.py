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
import zlib
from pathlib import Path
from typing import Any

import pydantic

from ccdiag.errors import InputError
from ccdiag.schema import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


def sniff(path: Path) -> str:
    """Return the format name of a file or folder, or raise InputError.

    A path that is not a regular file or a folder (a FIFO, a device, a socket, a dangling
    symbolic link) is refused from ``stat`` alone, before any ``open`` that could block.
    """
    from ccdiag.limits import open_regular, special_file

    why = special_file(path)
    if why == "no such file":
        from ccdiag.parsers import nsys_csv

        if nsys_csv.find_set(path) is not None:  # a prefix of nsys stats CSV reports
            return "nsys_csv"
        raise InputError(path, "no such file or folder")
    if why == "a folder":
        from ccdiag.parsers import folder

        return folder.sniff_folder(path)
    if why is not None:
        raise InputError(path, f"{why}: not a trace file" if why.startswith("a ") else why)
    with open_regular(path) as fh:
        try:
            head = fh.read(64)
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not head:
        raise InputError(path, "empty file")
    if head.startswith(SQLITE_MAGIC):
        return "nsys_sqlite"
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as fh:
                inner = fh.read(64)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, f"corrupt gzip stream ({exc})") from None
        if inner.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"["):
            return "kineto"
        if _is_stats_csv(inner):
            return "nsys_csv"
        if not inner.strip():
            raise InputError(path, "gzip file holds no trace (blank or empty content)")
        raise InputError(path, "gzip file does not contain a JSON trace or an nsys stats CSV")
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 byte-order mark
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


def sidecar_path(path: Path) -> Path:
    """Where ``ccdiag capture`` puts a trace's metadata: ``<label>.meta.json`` beside it."""
    name = path.name
    for suffix in (".json.gz", ".json", ".sqlite", ".nsys-rep"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return path.with_name(f"{name}.meta.json")


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True, extra="ignore", frozen=True)


class SidecarEmulation(_Strict):
    """The ``emulation`` block of a sidecar (only the platform is read)."""

    platform: str | None = None


class Sidecar(_Strict):
    """A capture metadata sidecar (``<label>.meta.json``, written by ``ccdiag capture``).

    Only the fields ccdiag reads are declared; each must have its type (strings are strings:
    a number where a name belongs, or a string holding a lone UTF-16 surrogate, is refused).
    """

    label: str
    gpu: str | None = None
    driver_version: str | None = None
    torch_version: str | None = None
    nccl_version: str | None = None
    cc_mode: str | None = None
    emulation: SidecarEmulation | None = None
    emulated_shim_mechanisms: list[str] | None = None

    @pydantic.field_validator("*", mode="after")
    @classmethod
    def _utf8(cls, v: Any) -> Any:
        for s in v if isinstance(v, list) else [v]:
            if isinstance(s, str):
                s.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError -> ValueError
        return v


#: Largest sidecar read (ccdiag writes about 1 KB).
_MAX_SIDECAR = 1 << 20


def read_sidecar(side: Path) -> Sidecar | str | None:
    """The validated sidecar, or why it cannot be used (a one-line reason), or None when the
    file is not ccdiag's (JSON without a ``label``)."""
    import pydantic_core

    from ccdiag.limits import open_regular

    try:
        with open_regular(side, "a metadata file") as fh:
            raw = fh.read(_MAX_SIDECAR + 1)
    except InputError as exc:
        return exc.problem
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if len(raw) > _MAX_SIDECAR:
        return f"larger than {_MAX_SIDECAR >> 20} MiB"
    try:
        doc = pydantic_core.from_json(raw)
    except ValueError as exc:
        from ccdiag.parsers._chunked_json import _LONE_SURROGATE

        if _LONE_SURROGATE.search(raw):
            return "a string holds a lone UTF-16 surrogate escape such as \\ud800 (not text)"
        return f"not valid JSON ({str(exc)[:120]})"
    if not isinstance(doc, dict) or "label" not in doc:
        return None
    try:
        return Sidecar.model_validate(doc)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        return f"{where}: {first['msg'][:120]}"


def apply_sidecar(trace: Trace, path: Path) -> Trace:
    """Merge the capture metadata sidecar (CC mode, emulation) into the trace's metadata.

    Only facts are taken (GPU, versions, CC mode, emulated platform and mechanisms); a sidecar
    that is not ccdiag's is ignored; one that is unreadable or invalid (wrong types, lone
    surrogates) is ignored with a warning saying why.
    """
    side = sidecar_path(path)
    if path.is_dir() or not (side.exists() or side.is_symlink()):
        return trace
    meta = trace.meta
    doc = read_sidecar(side)
    if doc is None:
        return trace
    if isinstance(doc, str):
        meta.warnings.append(f"{side.name}: invalid capture metadata ({doc}); ignored")
        return trace
    for field in ("gpu", "driver_version", "torch_version", "nccl_version", "cc_mode"):
        if getattr(meta, field, None) is None and getattr(doc, field) is not None:
            setattr(meta, field, getattr(doc, field))
    emu, mechs = doc.emulation, doc.emulated_shim_mechanisms
    if emu is not None and emu.platform:
        meta.extra["emulated_cc"] = emu.platform + (
            f" ({', '.join(mechs)})" if mechs else " (no mechanism on)"
        )
    meta.extra["capture_label"] = doc.label
    return trace


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
    trace = _read_as(p, fmt, **options)
    if trace.events.is_empty():
        raise InputError(p, _nothing_read(trace))
    named = _named_format(p)
    if named is not None and named != fmt and not p.is_dir():
        trace.meta.warnings.append(
            f"named {_suffix(p)} but holds {_FORMAT_NAMES.get(fmt, fmt)}: read as such "
            "(ccdiag goes by the content, not the name)"
        )
    return trace


#: How a format is named in messages.
_FORMAT_NAMES = {
    "kineto": "a Kineto JSON trace",
    "nsys_sqlite": "an Nsight Systems SQLite export",
    "nsys_rep": "an Nsight Systems report",
    "nsys_csv": "an nsys stats CSV report",
}
_SUFFIX_FORMATS = (
    (".json.gz", "kineto"),
    (".json", "kineto"),
    (".sqlite", "nsys_sqlite"),
    (".nsys-rep", "nsys_rep"),
    (".csv.gz", "nsys_csv"),
    (".csv", "nsys_csv"),
)


def _suffix(p: Path) -> str:
    return next((s for s, _ in _SUFFIX_FORMATS if p.name.endswith(s)), p.suffix)


def _named_format(p: Path) -> str | None:
    """The format a file's name suggests (None: the name says nothing)."""
    return next((f for s, f in _SUFFIX_FORMATS if p.name.endswith(s)), None)


def _nothing_read(trace: Trace) -> str:
    """Why a trace without a single event row cannot be analyzed, with what was skipped."""
    skipped = trace.meta.skipped
    if not skipped:
        return "no events to analyze: the trace holds no events ccdiag reads"
    top = sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{r}: {n:,}" for r, n in top[:4]) + (", ..." if len(top) > 4 else "")
    return f"no events to analyze: all {sum(skipped.values()):,} events were skipped ({shown})"


def _read_as(p: Path, fmt: str, **options: object) -> Trace:
    if p.is_dir():
        from ccdiag.parsers import folder

        return folder.read_folder(p, fmt, **options)
    if fmt == "kineto":
        from ccdiag.parsers import kineto

        return apply_sidecar(kineto.read(p, **options), p)
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
