"""Where trace pairs come from, on the server: shipped samples, a configured folder, uploads.

The browser never names a file. It sends an opaque id from the lists built here (a sample or a
pair found under ``--trace-dir``) or an upload token that the server handed out when it stored
the uploaded bytes. Anything else is refused with a message: :func:`Sources.resolve` looks ids
up in a dict and never turns a string from the browser into a path.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

BASELINE_ROLES = ("baseline", "cc_off", "cc-off", "ccoff")
TREATMENT_ROLES = ("treatment", "cc_on", "cc-on", "ccon", "cc_devtools", "cc-devtools")
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".csv", ".csv.gz")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_TOKEN = re.compile(r"^[0-9a-f]{32}$")
MAX_DEPTH = 3
MAX_PAIRS = 500


class SourceError(Exception):
    """A request the server refuses; the message is shown to the user as is."""


@dataclass(frozen=True)
class Source:
    """One pair the server may analyse: two server-side paths and how to show them."""

    id: str
    label: str
    kind: str  # sample | dir | arg | upload
    baseline: Path
    treatment: Path
    digests: tuple[str, str] | None = None  # content hashes, when already known (uploads)


@dataclass(frozen=True)
class Staged:
    """One uploaded side, stored under the staging folder."""

    token: str
    path: Path
    label: str
    nbytes: int
    files: int


def _role(name: str) -> tuple[str, str] | None:
    low = name.lower()
    for role, words in (("baseline", BASELINE_ROLES), ("treatment", TREATMENT_ROLES)):
        for w in words:
            if low.startswith(w):
                return role, low[len(w) :]
    return None


def _is_trace(p: Path) -> bool:
    if p.name.startswith(".") or p.name.endswith(".meta.json"):
        return False
    return p.is_dir() or p.name.lower().endswith(TRACE_SUFFIXES)


def _pairs_in(folder: Path) -> list[tuple[Path, Path, str]]:
    """(baseline, treatment, variant) pairs among one folder's entries."""
    roles: dict[str, list[tuple[Path, str]]] = {"baseline": [], "treatment": []}
    for p in sorted(folder.iterdir()):
        r = _role(p.name)
        if r is not None and _is_trace(p):
            roles[r[0]].append((p, r[1]))
    out = []
    for t, suffix in roles["treatment"]:
        same = [b for b, s in roles["baseline"] if s == suffix]
        match = (
            same[0] if same else (roles["baseline"][0][0] if len(roles["baseline"]) == 1 else None)
        )
        if match is not None:
            variant = "" if same else t.name.split(".")[0]
            out.append((match, t, variant))
    return out


def discover(root: Path, kind: str, prefix: str) -> list[Source]:
    """Pairs under ``root`` (named baseline*/treatment*, or cc_off*/cc_on*), depth ≤ 3."""
    root = root.resolve()
    found: list[Source] = []
    stack = [(root, 0)]
    while stack and len(found) < MAX_PAIRS:
        folder, depth = stack.pop(0)
        try:
            pairs = _pairs_in(folder)
            subdirs = [
                p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")
            ]
        except OSError:
            continue
        for b, t, variant in pairs:
            if not (_inside(b, root) and _inside(t, root)):
                continue  # a symlink out of the folder: not ours to read
            rel = folder.relative_to(root).as_posix()
            label = (rel if rel != "." else root.name) + (f" ({variant})" if variant else "")
            sid = prefix + hashlib.sha1(f"{rel}|{b.name}|{t.name}".encode()).hexdigest()[:10]
            found.append(Source(sid, label, kind, b, t))
        if depth < MAX_DEPTH:
            stack += [(d, depth + 1) for d in subdirs if _role(d.name) is None]
    return found


def _inside(p: Path, root: Path) -> bool:
    try:
        return p.resolve().is_relative_to(root)
    except OSError:
        return False


def safe_name(name: str, fallback: str) -> str:
    """The last component of a browser-given file name, reduced to [A-Za-z0-9._-]."""
    last = re.split(r"[\\/]", name or "")[-1]
    last = _SAFE.sub("_", last).strip("._")[:100]
    return last or fallback


def decoded_size(content: str) -> int:
    """Bytes a ``data:...;base64,...`` upload decodes to, without decoding it."""
    b64 = content.partition(",")[2]
    return len(b64) * 3 // 4 - b64[-2:].count("=")


@dataclass
class Sources:
    """The pairs this server offers and the uploads it has stored."""

    staging: Path
    max_upload_bytes: int
    default: Source | None = None
    listed: dict[str, Source] = field(default_factory=dict)
    _staged: dict[str, Staged] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sources: list[Source]) -> None:
        """Offer these pairs (ids must be unique)."""
        for s in sources:
            self.listed[s.id] = s

    def options(self, kind: str) -> list[dict[str, str]]:
        """Dropdown options of one kind: label and opaque id."""
        return [{"label": s.label, "value": s.id} for s in self.listed.values() if s.kind == kind]

    def resolve(self, source_id: object) -> Source:
        """A listed pair by its id; anything else is refused."""
        if isinstance(source_id, str) and source_id in self.listed:
            return self.listed[source_id]
        raise SourceError("unknown trace pair: choose one from the list")

    def staged(self, token: object) -> Staged:
        """An upload by the token the server gave for it; anything else is refused."""
        if isinstance(token, str) and _TOKEN.match(token):
            with self._lock:
                hit = self._staged.get(token)
            if hit is not None:
                return hit
        raise SourceError("unknown upload: upload the files again")

    def upload_pair(self, baseline_token: object, treatment_token: object) -> Source:
        """The pair of two staged uploads."""
        b, t = self.staged(baseline_token), self.staged(treatment_token)
        label = f"upload: {b.label} vs {t.label}"
        return Source(
            f"u{b.token[:8]}{t.token[:8]}",
            label,
            "upload",
            b.path,
            t.path,
            digests=(b.token, t.token),
        )

    def stage(self, side: str, contents: object, filenames: object) -> Staged:
        """Check, decode and store one side's uploaded files; the token names them.

        Raises:
            SourceError: too large, not base64, no trace files, or a bad request.
        """
        if side not in ("baseline", "treatment"):
            raise SourceError("bad upload request")
        contents = [contents] if isinstance(contents, str) else contents
        filenames = [filenames] if isinstance(filenames, str) else filenames
        if (
            not isinstance(contents, list)
            or not contents
            or not all(isinstance(c, str) for c in contents)
        ):
            raise SourceError("bad upload request")
        if not isinstance(filenames, list) or len(filenames) != len(contents):
            filenames = [f"{side}{i}" for i in range(len(contents))]
        total = sum(decoded_size(c) for c in contents)
        if total > self.max_upload_bytes:
            raise SourceError(
                f"{side} upload is {total / 1e6:.1f} MB; this server accepts up to "
                f"{self.max_upload_bytes / 1e6:g} MB per side (ccdiag app --max-upload-mb). "
                "For larger traces start the app with --trace-dir DIR and pick the pair there."
            )
        files: dict[str, bytes] = {}
        for content, raw_name in zip(contents, filenames):
            name = safe_name(str(raw_name), f"{side}{len(files)}")
            if not name.lower().endswith(TRACE_SUFFIXES):
                continue  # README, logs, ...: what the folder reader would ignore anyway
            try:
                data = base64.b64decode(content.partition(",")[2], validate=True)
            except (binascii.Error, ValueError):
                raise SourceError(f"{name}: the upload is not valid base64 data") from None
            while name in files:
                name = "_" + name
            files[name] = data
        if not files:
            raise SourceError(
                f"no trace files in the {side} upload (expected {', '.join(TRACE_SUFFIXES)})"
            )
        return self._store(side, files)

    def _store(self, side: str, files: dict[str, bytes]) -> Staged:
        h = hashlib.sha256()
        for name in sorted(files):
            h.update(name.encode() if len(files) > 1 else b"")
            h.update(hashlib.sha256(files[name]).digest())
        token = h.hexdigest()[:32]
        folder = self.staging / token / side
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        one = len(files) == 1
        path = folder / next(iter(files)) if one else folder
        label = next(iter(files)) if one else f"{len(files)} files"
        st = Staged(token, path, label, sum(len(d) for d in files.values()), len(files))
        with self._lock:
            self._staged[token] = st
        return st
