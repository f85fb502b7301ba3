"""Convert a ``.nsys-rep`` to SQLite with ``nsys export``: standard library only.

Kept free of ccdiag and polars imports so that it also runs as a script on a machine that has
Nsight Systems but not ccdiag's dependencies (a GPU box)::

    python3 parsers/_nsys_export.py trace.nsys-rep      # prints the export's path

``nsys`` is found through the ``NSYS`` environment variable (the binary, or the folder holding
it) or on ``PATH``. The command is

    nsys export --type sqlite --force-overwrite true --output <cache> <report>

and the export is cached, keyed by the report's size and modification time: next to the report
(``<stem>.ccdiag-<key>.sqlite``) when that folder is writable, else in ``$XDG_CACHE_HOME/ccdiag``
(default ``~/.cache/ccdiag``). A second read of an unchanged report reuses the export; a
rewritten report is exported again. The export is written under a temporary name and renamed
when complete, so an interrupted export is never reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO

#: Called with each line nsys prints while exporting (progress bars included).
Progress = Callable[[str], None]

HOW_TO_EXPORT = (
    "export it on the machine that recorded it with "
    "`nsys export --type sqlite -o trace.sqlite trace.nsys-rep` and pass the .sqlite, "
    "or set NSYS=/path/to/nsys"
)


class ExportError(Exception):
    """The report could not be converted (one line saying why and what to do)."""


def find_nsys() -> str | None:
    """The ``nsys`` binary: ``$NSYS`` (a file, or a folder holding ``nsys``), else ``PATH``."""
    env = os.environ.get("NSYS")
    if env:
        p = Path(env)
        if p.is_dir():
            p = p / "nsys"
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which("nsys")


def cache_dir() -> Path:
    """Where exports go when the report's folder is not writable."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ccdiag"


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def cached_export_path(rep: Path) -> Path:
    """The export's path for this version of the report (it may not exist yet)."""
    st = rep.stat()
    key = f"{st.st_size}:{st.st_mtime_ns}"
    if _writable(rep.parent):
        digest = hashlib.sha1(key.encode()).hexdigest()[:12]
        return rep.parent / f"{rep.stem}.ccdiag-{digest}.sqlite"
    digest = hashlib.sha1(f"{rep.resolve()}:{key}".encode()).hexdigest()[:12]
    return cache_dir() / f"{rep.stem}.ccdiag-{digest}.sqlite"


def _lines(stream: IO[bytes], progress: Progress | None, tail: deque[str]) -> None:
    """Forward nsys's output line by line (progress bars end in '\\r')."""
    buf = b""
    while chunk := stream.read1(4096):  # type: ignore[attr-defined]
        buf += chunk
        *done, buf = re.split(rb"[\r\n]", buf)
        for raw in done:
            _emit(raw, progress, tail)
    _emit(buf, progress, tail)


def _emit(raw: bytes, progress: Progress | None, tail: deque[str]) -> None:
    line = raw.decode("utf-8", "replace").strip()
    if line:
        tail.append(line)
        if progress is not None:
            progress(line)


def export(rep: str | Path, *, progress: Progress | None = None) -> Path:
    """Convert a report to SQLite with ``nsys export`` (or reuse the cached export).

    Args:
        rep: the ``.nsys-rep`` file.
        progress: called with each line nsys prints.

    Returns:
        The SQLite export.

    Raises:
        ExportError: no ``nsys``, or the export failed (with nsys's last line).
    """
    rep = Path(rep)
    out = cached_export_path(rep)
    if out.is_file():
        return out
    nsys = find_nsys()
    if nsys is None:
        raise ExportError(f"cannot read a .nsys-rep without Nsight Systems: {HOW_TO_EXPORT}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.stem}.tmp-{os.getpid()}.sqlite")
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true"]
    cmd += ["--output", str(tmp), str(rep)]
    tail: deque[str] = deque(maxlen=5)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        with proc.stdout:
            _lines(proc.stdout, progress, tail)
        code = proc.wait()
    except OSError as exc:
        raise ExportError(f"could not run {nsys}: {exc.strerror}; {HOW_TO_EXPORT}") from None
    if code != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        said = tail[-1] if tail else "no output"
        raise ExportError(f"`nsys export` failed (exit status {code}): {said}")
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 _nsys_export.py TRACE.nsys-rep")
    try:
        print(export(sys.argv[1], progress=lambda line: print(line, file=sys.stderr)))
    except ExportError as err:
        sys.exit(f"{Path(sys.argv[1]).name}: {err}")
