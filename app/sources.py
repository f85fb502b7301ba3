"""Where trace pairs come from, on the server: shipped samples, a configured folder, uploads.

The browser never names a file. It sends an opaque id from the lists built here (a sample or a
pair found under ``--trace-dir``) or an upload token that the server handed out when it stored
the uploaded bytes. Anything else is refused with a message: :func:`Sources.resolve` looks ids
up in a dict and never turns a string from the browser into a path.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
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
    side: str = "baseline"


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


#: Bytes of staged uploads the server keeps (least recently used evicted first).
DEFAULT_QUOTA_BYTES = 2_000_000_000
_B64_CHUNK = 4 << 20  # base64 characters decoded at a time (a multiple of 4)


@dataclass
class Sources:
    """The pairs this server offers and the uploads it has stored.

    Uploads are checked when they arrive (size, base64, and the first bytes of each file: a
    file that is not a trace is refused at once, before any analysis) and kept under a byte
    quota: the least recently used uploads are deleted to make room, never one that an
    analysis is reading (see :meth:`hold`).
    """

    staging: Path
    max_upload_bytes: int
    quota_bytes: int = DEFAULT_QUOTA_BYTES
    default: Source | None = None
    listed: dict[str, Source] = field(default_factory=dict)
    _staged: OrderedDict[str, Staged] = field(default_factory=OrderedDict)
    _held: dict[str, int] = field(default_factory=dict)
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
                    self._staged.move_to_end(token)
                    return hit
        raise SourceError("unknown upload (or deleted to make room for newer ones): upload the files again")  # fmt: skip

    @property
    def staged_bytes(self) -> int:
        """Bytes of uploads stored now."""
        with self._lock:
            return sum(s.nbytes for s in self._staged.values())

    @contextmanager
    def hold(self, source: Source) -> Iterator[None]:
        """Keep an uploaded pair's files while an analysis reads them (no eviction)."""
        tokens = list(source.digests or ()) if source.kind == "upload" else []
        with self._lock:
            for t in tokens:
                if t not in self._staged:
                    raise SourceError("this upload was deleted to make room for newer ones: upload the files again")  # fmt: skip
            for t in tokens:
                self._held[t] = self._held.get(t, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for t in tokens:
                    self._held[t] -= 1
                    if not self._held[t]:
                        del self._held[t]

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
            SourceError: too large, not base64, not a trace, no room, or a bad request.
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
        named = []
        for content, raw_name in zip(contents, filenames):
            name = safe_name(str(raw_name), f"{side}{len(named)}")
            if not name.lower().endswith(TRACE_SUFFIXES):
                continue  # README, logs, ...: what the folder reader would ignore anyway
            while name in (n for n, _ in named):
                name = "_" + name
            named.append((name, content))
        if not named:
            raise SourceError(
                f"no trace files in the {side} upload (expected {', '.join(TRACE_SUFFIXES)})"
            )
        self._make_room(sum(decoded_size(c) for _, c in named))
        self.staging.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=self.staging))
        try:
            digests = {name: _decode_to(content, tmp / name) for name, content in named}
            for name in digests:
                _check_trace(tmp / name)
            return self._store(side, tmp, digests)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _make_room(self, nbytes: int) -> None:
        """Delete least recently used uploads (not held) until ``nbytes`` more fit the quota."""
        with self._lock:
            used = sum(s.nbytes for s in self._staged.values())
            for token in list(self._staged):
                if used + nbytes <= self.quota_bytes:
                    break
                if token in self._held:
                    continue
                st = self._staged.pop(token)
                used -= st.nbytes
                shutil.rmtree(self.staging / token / st.side, ignore_errors=True)
                with contextlib.suppress(OSError):
                    (self.staging / token).rmdir()
            if used + nbytes > self.quota_bytes:
                raise SourceError(
                    f"no room for this upload: the server keeps at most "
                    f"{self.quota_bytes / 1e6:g} MB of uploads and {used / 1e6:.0f} MB are in "
                    "use by running analyses; try again when they finish"
                )

    def _store(self, side: str, tmp: Path, digests: dict[str, bytes]) -> Staged:
        h = hashlib.sha256()
        for name in sorted(digests):
            h.update(name.encode() if len(digests) > 1 else b"")
            h.update(digests[name])
        token = h.hexdigest()[:32]
        folder = self.staging / token / side
        folder.parent.mkdir(parents=True, exist_ok=True)
        if not folder.exists():
            tmp.rename(folder)
        one = len(digests) == 1
        path = folder / next(iter(digests)) if one else folder
        label = next(iter(digests)) if one else f"{len(digests)} files"
        nbytes = sum(f.stat().st_size for f in folder.iterdir())
        st = Staged(token, path, label, nbytes, len(digests), side)
        with self._lock:
            self._staged[token] = st
            self._staged.move_to_end(token)
        return st

    def clear(self) -> None:
        """Delete every staged upload, and the staging folder when it is left empty (at exit)."""
        with self._lock:
            self._staged.clear()
        try:
            entries = list(self.staging.iterdir())
        except OSError:
            return
        for p in entries:
            if _TOKEN.match(p.name) or p.name.startswith(".incoming-"):
                shutil.rmtree(p, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.staging.rmdir()


def _decode_to(content: str, dest: Path) -> bytes:
    """Decode a ``data:...;base64,`` upload into ``dest`` piece by piece; its sha256 digest."""
    b64 = content.partition(",")[2]
    h = hashlib.sha256()
    with open(dest, "wb") as fh:
        for i in range(0, len(b64), _B64_CHUNK):
            try:
                data = base64.b64decode(b64[i : i + _B64_CHUNK], validate=True)
            except (binascii.Error, ValueError):
                raise SourceError(f"{dest.name}: the upload is not valid base64 data") from None
            h.update(data)
            fh.write(data)
    return h.digest()


def _check_trace(path: Path) -> None:
    """Refuse a file whose first bytes are no trace format ccdiag reads."""
    from ccdiag import api
    from ccdiag.errors import InputError

    try:
        api.sniff_format(path)
    except InputError as exc:
        raise SourceError(f"{exc.line()}; nothing was analysed") from None
