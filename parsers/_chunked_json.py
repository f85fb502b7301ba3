"""Read one big array inside a JSON document in bounded chunks (plain or gzip files).

A Kineto trace is ``{"schemaVersion": 1, ..., "traceEvents": [ {...}, {...}, ... ], ...}``
where the array holds nearly all the bytes. :class:`ArrayChunks` streams the file (gzip is
decompressed on a background thread, which zlib lets run beside the parser), cuts the array at
element boundaries and hands each piece, as a memoryview of a valid JSON array, to a decode
function. Neither the whole text nor all decoded objects are ever alive at once.

How the cuts are found. The fast path is a heuristic, verified: a cut is placed at the last
``}`` ``,`` ``{`` sequence (whitespace allowed) before the chunk's target size. Such a sequence
can also occur inside a string or a nested value; the piece up to it is then not a complete JSON
array and decoding it fails (a JSON string cannot close itself: quotes inside are escaped).
Because the previous cut was verified, a piece that decodes is a sequence of complete array
elements, so the cut is a true element boundary.

When the heuristic fails (no candidate, or the candidates tried do not decode), an exact
structural scan (:class:`_Scan`: strings, escapes and nesting, resumable across reads) finds the
true boundaries. The scan keeps its state while a large element is still open, so no byte is
scanned twice and text full of false cut points costs linear time, not quadratic. While it
scans, whitespace between tokens is not kept (a file padded with gigabytes of blanks costs no
memory). The same scan finds where the array ends, so what follows it (the rest of the
top-level object) is read with a bounded buffer too.

Limits, all checked on bytes read (``ccdiag.limits``): one element at most ``MAX_EVENT_BYTES``;
the text before the array and after it at most ``MAX_HEADER_BYTES``; chunks of at most about
``MAX_EVENTS_PER_CHUNK`` elements (the target size adapts to the elements' size); elements of
fewer than ``MIN_EVENT_BYTES`` bytes on average are refused; gzip within the inflation limit.
So the reader's own memory is bounded by a constant (a few chunks) whatever the input.

Text that msgspec refuses but Python's ``json`` reads (a lone UTF-16 surrogate escape such as
``\\ud800``, bytes that are not UTF-8) is repaired by :func:`repair_text` (U+FFFD) and counted.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ccdiag import limits
from ccdiag.errors import InputError
from ccdiag.limits import Budget, GzipLimit, open_regular, size_text

T = TypeVar("T")

GZIP_MAGIC = b"\x1f\x8b"
_READ_COMPRESSED = 4 << 20
#: Largest header (bytes before the array) we search through.
_MAX_HEADER = limits.MAX_HEADER_BYTES
#: The first chunk's target size (the target then adapts to the size of the elements).
_FIRST_CHUNK = 1 << 20
_MIN_CHUNK = 64 << 10
#: An exact scan stays on while the open element already spans this much (else it restarts).
_KEEP_SCAN = 1 << 20
#: Deepest nesting the exact scan follows (a trace nests 4-6 levels; msgspec stops near 1,000).
_MAX_DEPTH = 512
_WS = b" \t\r\n"
_LEAD = re.compile(rb"[ \t\r\n]*(\S)")
_BOM = b"\xef\xbb\xbf"
_NONWS = re.compile(rb"[^ \t\r\n]")
_TOKEN = re.compile(rb'[][{}",]')
_STR_STOP = re.compile(rb'["\\]')
#: The start of a top-level member after the array: separator, key, colon (key up to 1 KiB).
_MEMBER_KEY = re.compile(rb'[ \t\r\n]*,[ \t\r\n]*("(?:[^"\\]|\\.){0,1024}")[ \t\r\n]*:')
_RAW_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
#: A \\uD800-\\uDFFF escape that is not half of a pair (after an even number of backslashes).
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)((?:\\\\)*)(?:\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)


def repair_text(data: bytes | bytearray | memoryview) -> tuple[bytes, int, int]:
    """JSON text with lone surrogate escapes and invalid UTF-8 replaced by U+FFFD.

    Returns:
        (the text, surrogate escapes replaced, invalid UTF-8 sequences replaced).
    """
    raw = bytes(data)
    fixed, n_sur = _LONE_SURROGATE.subn(rb"\1\\ufffd", raw)
    n_bad = 0
    try:
        fixed.decode("utf-8")
    except UnicodeDecodeError:
        text = fixed.decode("utf-8", "replace")
        n_bad = text.count("\ufffd") - fixed.count(b"\xef\xbf\xbd")
        fixed = text.encode("utf-8")
    return fixed, n_sur, max(n_bad, 0)


def decode_lenient(data: bytes | bytearray | memoryview) -> tuple[Any, int]:
    """``msgspec.json.decode``, retried on repaired text; returns (object, characters repaired).

    Raises msgspec.DecodeError when the text is malformed even after repair.
    """
    try:
        return msgspec.json.decode(data), 0
    except msgspec.DecodeError:
        fixed, n_sur, n_bad = repair_text(data)
        if not (n_sur or n_bad):
            raise
        return msgspec.json.decode(fixed), n_sur + n_bad


def _iter_plain(fh: Any, block: int) -> Iterator[bytes]:
    with fh:
        while data := fh.read(block):
            yield data


def _iter_gzip(fh: Any, path: Path, block: int, limit: GzipLimit) -> Iterator[bytes]:
    """Decompress a (possibly multi-member) gzip file in blocks of at most ``block`` bytes.

    Stops with an InputError once the file inflates past ``limit`` (a gzip bomb).
    """
    budget = Budget(path, limit=limit)
    with fh:
        dec = zlib.decompressobj(wbits=31)
        fed = False
        while raw := fh.read(_READ_COMPRESSED):
            data = raw
            while data:
                if not fed and not data.strip(b"\0"):
                    data = b""  # zero padding after the last member
                    break
                fed = True
                out = dec.decompress(data, block)
                if out:
                    budget.add(len(out))
                    yield out
                if dec.eof:
                    data = dec.unused_data
                    dec, fed = zlib.decompressobj(wbits=31), False
                else:
                    data = dec.unconsumed_tail
        if fed and not dec.eof:
            while out := dec.decompress(b"", block):
                budget.add(len(out))
                yield out
            raise EOFError("compressed file ended before the end-of-stream marker")


class _Prefetch:
    """Run a block iterator on a thread, two blocks ahead; re-raise its errors here."""

    _END = object()

    def __init__(self, it: Iterator[bytes]) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, args=(it,), daemon=True)
        self._t.start()

    def _run(self, it: Iterator[bytes]) -> None:
        try:
            for block in it:
                if self._stop.is_set():
                    return
                self._q.put(block)
            self._q.put(self._END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._q.put(exc)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            item = self._q.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        while self._t.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass


def open_blocks(path: Path, block: int) -> _Prefetch:
    """Decompressed blocks of a plain or gzip file, read ahead on a thread.

    The limits in force are resolved here, in the caller's thread (``limits.inflation_limit``
    is per context); a FIFO, device or other special file is refused before any read.
    """
    fh = open_regular(path)
    try:
        magic = fh.read(2)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    if magic == GZIP_MAGIC:
        try:
            limit = limits.gzip_limit(path)
        except BaseException:
            fh.close()
            raise
        it = _iter_gzip(fh, path, block, limit)
    else:
        it = _iter_plain(fh, block)
    return _Prefetch(it)


def _gzip_error(path: Path, exc: BaseException) -> InputError:
    if isinstance(exc, EOFError):
        return InputError(path, "truncated gzip stream (the file ends before the gzip end marker)")
    return InputError(path, f"corrupt gzip data ({exc})")


def _last_boundary(buf: bytearray, hi: int) -> tuple[int, int] | None:
    """(index of ``}``, index of ``{``) of the last ``} , {`` before ``hi``; None if none."""
    while True:
        i = buf.rfind(b"{", 1, hi)
        if i < 0:
            return None
        k = i - 1
        while k > 0 and buf[k] in _WS:
            k -= 1
        if buf[k] == 0x2C:  # ','
            j = k - 1
            while j > 0 and buf[j] in _WS:
                j -= 1
            if buf[j] == 0x7D:  # '}'
                return j, i
        hi = i


class _Scan:
    """Exact structural scan of JSON text, resumable: where strings, nesting and the top-level
    separators are, without decoding.

    Indices are into the caller's buffer (:meth:`shift` follows a drop of its head). ``depth``
    counts the open brackets and braces (1: between the elements of the array being read);
    ``comma`` is the last separator seen at depth 1; ``closed`` the index of the bracket that
    brought the depth to 0 (the end of the array, or of the object), -1 while open.
    """

    __slots__ = ("pos", "in_str", "depth", "comma", "closed")

    def __init__(self, pos: int, depth: int = 1) -> None:
        self.pos = pos
        self.in_str = False
        self.depth = depth
        self.comma = -1
        self.closed = -1

    def advance(self, buf: bytearray, stop_after: int | None = None) -> None:
        """Scan to the end of ``buf``, or until the depth reaches 0, or until a depth-1
        separator at or past ``stop_after``."""
        if self.closed >= 0:
            return
        pos, depth, in_str, comma = self.pos, self.depth, self.in_str, self.comma
        end = len(buf)
        tok, stop = _TOKEN.search, _STR_STOP.search
        while pos < end:
            if in_str:
                m = stop(buf, pos, end)
                if m is None:
                    pos = end
                    break
                i = m.start()
                if buf[i] == 0x5C:  # a backslash escapes the next byte
                    if i + 1 >= end:
                        pos = i
                        break
                    pos = i + 2
                    continue
                in_str = False
                pos = i + 1
                continue
            m = tok(buf, pos, end)
            if m is None:
                pos = end
                break
            i = m.start()
            c = buf[i]
            pos = i + 1
            if c == 0x22:  # '"'
                in_str = True
            elif c == 0x2C:  # ','
                if depth == 1:
                    comma = i
                    if stop_after is not None and i >= stop_after:
                        break
            elif c == 0x7B or c == 0x5B:  # '{' '['
                depth += 1
                if depth > _MAX_DEPTH:
                    self.pos, self.depth, self.in_str, self.comma = pos, depth, in_str, comma
                    raise RecursionError("JSON nested too deeply")
            else:  # '}' ']'
                depth -= 1
                if depth == 0:
                    self.closed = i
                    break
        self.pos, self.depth, self.in_str, self.comma = pos, depth, in_str, comma

    def at_rest(self, buf: bytearray) -> bool:
        """Scanned to the end of ``buf`` and outside any string (blanks may be dropped)."""
        return self.pos == len(buf) and not self.in_str and self.closed < 0

    def shift(self, n: int) -> None:
        """The buffer lost its first ``n`` bytes."""
        self.pos -= n
        self.comma = self.comma - n if self.comma >= n else -1
        self.closed = self.closed - n if self.closed >= n else -1


def _append(buf: bytearray, block: bytes, scan: _Scan | None) -> None:
    """Add a block; while an exact scan has reached the buffer's end outside a string, leading
    blanks of the block are not kept (one stays, so that tokens never merge)."""
    if scan is not None and scan.at_rest(buf):
        stripped = block.lstrip(_WS)
        if len(stripped) < len(block):
            if buf and buf[-1] not in _WS:
                buf += b" "
            block = stripped
    buf += block


class ArrayChunks:
    """Stream the array under top-level ``key`` of a JSON file through ``decode``.

    Iterating yields ``fn(decode(chunk))`` for consecutive chunks (``map``); afterwards
    :attr:`meta` holds every other top-level member. A document that is itself an array is read
    as the array (``meta`` is empty).

    Args:
        path: the file (plain or gzip).
        key: the top-level key of the array.
        chunk_bytes: largest size of one chunk of array text (the target adapts below it).
        max_element: largest element (``ccdiag.limits.MAX_EVENT_BYTES`` by default).
        keep: the top-level members the caller reads (None: all). Other members are not
            decoded; their bytes are counted in :attr:`skipped_bytes`. After the array, a member
            not in ``keep`` that grows past 1 MiB is not held either: its bytes are dropped as
            they are scanned (only its strings and brackets are checked), so trailing junk
            costs no memory.
    """

    def __init__(
        self,
        path: Path,
        key: str = "traceEvents",
        chunk_bytes: int = 8 << 20,
        max_element: int | None = None,
        keep: Collection[str] | None = None,
    ) -> None:
        self.path = path
        self.key = key
        self.keep = frozenset(keep) if keep is not None else None
        #: bytes of top-level members that are not in ``keep``, skipped unread
        self.skipped_bytes = 0
        #: their names (the first few)
        self.skipped_members: list[str] = []
        self.chunk_bytes = max(int(chunk_bytes), 1 << 10)
        self.max_element = max_element or limits.MAX_EVENT_BYTES
        self.meta: dict[str, Any] = {}
        self.found = False
        self.offset = 0  # file offset (uncompressed) of the start of ``buf``
        self.total_bytes = 0
        #: characters repaired (lone surrogate escapes, invalid UTF-8) outside the array
        self.repaired = 0
        self._bare = False
        self._key_re = re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*\[')
        self._items = 0
        self._item_bytes = 0

    def map(
        self,
        decode: Callable[[memoryview], T],
        fn: Callable[[T], Any],
        count: Callable[[T], int] | None = None,
    ) -> Iterator[Any]:
        """Yield ``fn(decode(piece))`` per piece; decoded objects die before the buffer moves.

        ``count(decoded)``: the number of elements in a piece (adapts the chunk size to small
        elements, and refuses elements of fewer than ``MIN_EVENT_BYTES`` bytes on average).
        """
        blocks = open_blocks(self.path, self.chunk_bytes)
        try:
            yield from self._run(iter(blocks), decode, fn, count)
        except (EOFError, zlib.error) as exc:
            raise _gzip_error(self.path, exc) from None
        except OSError as exc:
            raise InputError(self.path, f"cannot read: {exc.strerror or exc}") from None
        except RecursionError:  # msgspec and Python's json recurse per nesting level
            raise InputError(self.path, "JSON nested too deeply to be a trace") from None
        except MemoryError:
            raise InputError(self.path, "out of memory while reading the trace") from None
        finally:
            blocks.close()

    # -- the array --------------------------------------------------------------------------
    def _run(
        self,
        blocks: Iterator[bytes],
        decode: Callable[[memoryview], T],
        fn: Callable[[T], Any],
        count: Callable[[T], int] | None,
    ) -> Iterator[Any]:
        buf, eof = self._find_array(blocks)
        target = min(self.chunk_bytes, _FIRST_CHUNK)
        scan: _Scan | None = None
        while True:
            while len(buf) < target and not eof:
                block = next(blocks, None)
                if block is None:
                    eof = True
                    break
                self.total_bytes += len(block)
                _append(buf, block, scan)
            if eof:
                break
            cut: tuple[int, T] | None = None
            if scan is None:
                cut = self._decode_before(buf, min(len(buf), target), decode)
                if cut is None:  # no verified candidate: scan exactly from the last cut
                    scan = _Scan(1)
            if cut is None:
                assert scan is not None
                scan.advance(buf, stop_after=target)
                if scan.closed >= 0:
                    break
                if scan.comma < 0:  # one element still open: read on (bounded)
                    self._check_element(buf, scan)
                    block = next(blocks, None)
                    if block is None:
                        eof = True
                        break
                    self.total_bytes += len(block)
                    _append(buf, block, scan)
                    continue
                cut = self._decode_at(buf, scan.comma, decode)
            start, result = cut
            del cut
            target = self._adapt(start, result, count, target)
            yield fn(result)
            del result
            buf = self._consume(buf, start)
            if scan is not None:
                scan.shift(start - 1)
                # keep the exact scan only while a large element is still open
                if scan.pos > _KEEP_SCAN and not (scan.depth == 1 and not scan.in_str):
                    scan.comma = -1
                else:
                    scan = None
                    buf = self._strip_head(buf)
        yield from self._finish(buf, blocks, eof, scan, decode, fn)

    def _check_element(self, buf: bytearray, scan: _Scan, end: int | None = None) -> None:
        """The open element (from the last separator, or the head) must stay under the cap."""
        start = scan.comma if scan.comma > 0 else 0
        if (len(buf) if end is None else end) - start > self.max_element + 2:
            raise InputError(
                self.path,
                f"refused: an element of {self.key!r} spans more than "
                f"{size_text(self.max_element)} (from byte {self.offset + start + 1:,}); no profiler "
                "writes events that large: not a trace",
            )

    def _adapt(
        self, start: int, result: Any, count: Callable[[Any], int] | None, target: int
    ) -> int:
        """The next chunk's target size; refuse elements that are too small to be events."""
        if count is None:
            return self.chunk_bytes
        n = count(result)
        self._items += n
        self._item_bytes += start
        if self._items >= 50_000 and self._item_bytes < limits.MIN_EVENT_BYTES * self._items:
            raise InputError(
                self.path,
                f"refused: {self._items:,} elements of {self.key!r} in its first "
                f"{size_text(self._item_bytes)} ({self._item_bytes / self._items:.1f} bytes each); "
                f"a profiler event takes at least {limits.MIN_EVENT_BYTES} bytes: not a trace",
            )
        per_item = start / max(n, 1)
        want = int(per_item * limits.MAX_EVENTS_PER_CHUNK)
        return max(_MIN_CHUNK, min(self.chunk_bytes, want, 2 * target))

    def _decode_before(
        self, buf: bytearray, hi: int, decode: Callable[[memoryview], T]
    ) -> tuple[int, T] | None:
        """Decode the elements before the last boundary below ``hi`` (trying 8 candidates)."""
        for _ in range(8):
            b = _last_boundary(buf, hi)
            if b is None:
                return None
            j, i = b
            saved = buf[j + 1]
            buf[j + 1] = 0x5D  # ']': the piece is a JSON array (the byte is consumed after)
            mv = memoryview(buf)
            try:
                return i, decode(mv[: j + 2])
            except msgspec.DecodeError:
                buf[j + 1] = saved
                hi = i
            finally:
                del mv
        return None

    def _decode_at(
        self, buf: bytearray, comma: int, decode: Callable[[memoryview], T]
    ) -> tuple[int, T]:
        """Decode the elements before a separator the exact scan found (a true boundary)."""
        buf[comma] = 0x5D  # ']'
        mv = memoryview(buf)
        try:
            return comma + 1, decode(mv[: comma + 1])
        except msgspec.DecodeError as exc:
            raise self._malformed(exc) from None
        finally:
            del mv

    def _malformed(self, exc: BaseException) -> InputError:
        where = ""
        m = re.search(r"\(byte (\d+)\)", str(exc))
        msg = str(exc)
        if m:
            msg = msg.replace(m.group(0), "").strip()
            where = f" at byte {self.offset + int(m.group(1)) + 1:,}"
        return InputError(self.path, f"malformed JSON in the {self.key!r} array{where} ({msg})")

    def _consume(self, buf: bytearray, start: int) -> bytearray:
        """Drop the decoded elements; the buffer again starts with '[' before the next one."""
        buf[start - 1] = 0x5B  # '['
        self.offset += start - 1
        try:
            del buf[: start - 1]
        except BufferError:  # a decoded object still views the buffer: copy instead
            buf = bytearray(buf[start - 1 :])
        return buf

    def _strip_head(self, buf: bytearray) -> bytearray:
        """Blanks right after the '[' at the head are not kept (bounded whitespace)."""
        m = _NONWS.search(buf, 1)
        n = (m.start() if m else len(buf)) - 1
        if n > 0:
            try:
                del buf[1 : 1 + n]
            except BufferError:
                buf = bytearray(buf[:1]) + buf[1 + n :]
            self.offset += n
        return buf

    # -- before the array -------------------------------------------------------------------
    def _find_array(self, blocks: Iterator[bytes]) -> tuple[bytearray, bool]:
        """Read until the array opens; return the buffer (starting at '[') and the EOF flag."""
        buf = bytearray()
        eof = False
        pos = 0
        while True:
            if buf.startswith(_BOM):  # a UTF-8 byte-order mark (Windows editors write one)
                del buf[:3]
                self.offset += 3
            if len(buf) > 1 << 16 and _NONWS.search(buf) is None:  # leading blanks: not kept
                self.offset += len(buf)
                buf.clear()
                pos = 0
            first = _LEAD.match(buf)
            lead = first.group(1) if first else b""
            if first is not None and lead == b"[":  # a bare array document
                self.found = True
                self.offset += first.start(1)
                self._bare = True
                del buf[: first.start(1)]
                return buf, eof
            if lead and lead != b"{":
                raise InputError(self.path, "not a JSON object or array")
            for m in self._key_re.finditer(buf, max(0, pos - 64)):
                # one copy of the header (a slice, bytes() and + made three: 70 MiB headers)
                head = bytearray(memoryview(buf)[: m.start()])
                head += b'"' + self.key.encode() + b'": null}'
                try:
                    meta, fixed = self._members(head)
                except msgspec.DecodeError:
                    continue
                if isinstance(meta, dict):
                    self.meta = meta
                    self.repaired += fixed
                    self.found = True
                    self._bare = False
                    self.offset += m.end() - 1
                    return buf[m.end() - 1 :], eof
            pos = len(buf)
            if eof:
                self._no_array(buf)
            if len(buf) > _MAX_HEADER:
                raise InputError(
                    self.path,
                    f"no {self.key!r} array in the first {_MAX_HEADER >> 20} MB: not a trace",
                )
            block = next(blocks, None)
            if block is None:
                eof = True
            else:
                buf += block
                self.total_bytes += len(block)

    def _no_array(self, buf: bytearray) -> None:
        """The whole document was read and has no array under ``key``: say what it is."""
        if not buf.strip():
            raise InputError(self.path, "empty file")
        try:
            doc, _ = decode_lenient(bytes(buf))
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"malformed or truncated JSON ({exc})") from None
        if isinstance(doc, dict) and self.key in doc:
            raise InputError(self.path, f"{self.key!r} is not an array: not a trace")
        raise InputError(self.path, f"JSON without a {self.key!r} array: not a trace")

    # -- the last piece and what follows the array --------------------------------------------
    def _finish(
        self,
        buf: bytearray,
        blocks: Iterator[bytes],
        eof: bool,
        scan: _Scan | None,
        decode: Callable[[memoryview], T],
        fn: Callable[[T], Any],
    ) -> Iterator[Any]:
        """The last piece: find the ']' closing the array, decode the rest and the tail."""
        if eof and scan is None:  # fast path: a ']' whose tail is the end of the object
            hi = len(buf)
            for _ in range(4):
                p = buf.rfind(b"]", 0, hi)
                if p < 0 or len(buf) - p > 1 << 20:
                    break
                hi = p
                tail = bytes(buf[p + 1 :])
                if not self._tail_ok(tail, check_only=True):
                    continue
                mv = memoryview(buf)
                try:
                    result = decode(mv[: p + 1])
                except msgspec.DecodeError:
                    continue
                finally:
                    del mv
                self._tail_ok(tail)
                yield fn(result)
                return
        # exact: scan to the bracket that closes the array
        scan = scan or _Scan(1)
        while True:
            scan.advance(buf)
            if scan.closed >= 0:
                break
            if scan.comma > _KEEP_SCAN:  # decode what is complete, keep the buffer bounded
                start, result = self._decode_at(buf, scan.comma, decode)
                yield fn(result)
                del result
                buf = self._consume(buf, start)
                scan.shift(start - 1)
                continue
            self._check_element(buf, scan)
            block = None if eof else next(blocks, None)
            if block is None:
                raise InputError(
                    self.path,
                    f"truncated JSON: the file ends inside the {self.key!r} array "
                    f"(read {self.total_bytes:,} bytes)",
                )
            self.total_bytes += len(block)
            _append(buf, block, scan)
        end = scan.closed
        self._check_element(buf, scan, end)
        mv = memoryview(buf)
        try:
            result = decode(mv[: end + 1])
        except msgspec.DecodeError as exc:
            raise self._malformed(exc) from None
        finally:
            del mv
        tail = bytearray(buf[end + 1 :])
        del buf
        yield fn(result)
        del result
        self._read_tail(tail, blocks, eof)

    def _read_tail(self, tail: bytearray, blocks: Iterator[bytes], eof: bool) -> None:
        """What follows the array, read to the end of the file in a bounded buffer.

        Complete members are decoded (or skipped, see ``keep``) as soon as a separator ends
        them; a member not in ``keep`` that grows past ``_KEEP_SCAN`` is dropped as it is
        scanned; any other open member may hold at most ``MAX_HEADER_BYTES``.
        """
        if self._bare:
            end = -1
        else:
            end = self._tail_members(tail, blocks, eof)
        rest = tail[end + 1 :]
        at = self.total_bytes - len(rest)
        while True:
            if rest.strip(_WS):
                lead = len(rest) - len(rest.lstrip(_WS))
                raise InputError(
                    self.path,
                    f"malformed JSON: characters after the end of the document "
                    f"(byte {at + lead + 1:,})",
                )
            at += len(rest)
            block = None if eof else next(blocks, None)
            if block is None:
                break
            self.total_bytes += len(block)
            rest = block

    def _tail_members(self, tail: bytearray, blocks: Iterator[bytes], eof: bool) -> int:
        """Read the members after the array up to the brace that closes the top-level object
        (into :attr:`meta`); returns that brace's index in ``tail``."""
        scan = _Scan(0, depth=1)
        skipping: str | None = None  # the member whose bytes are being dropped
        while True:
            # while skipping, stop at the first separator: the members after it are read
            scan.advance(tail, stop_after=0 if skipping is not None else None)
            if scan.closed >= 0:
                break
            if skipping is not None:
                n = scan.comma if scan.comma >= 0 else scan.pos
                self.skipped_bytes += n
                del tail[:n]
                scan.shift(n)
                if scan.comma == 0:  # the skipped member ended at that separator
                    skipping = None
                    continue
            elif scan.comma > 0:  # complete members before the last separator
                self._take_tail(bytes(tail[: scan.comma]))
                n = scan.comma
                del tail[:n]
                scan.shift(n)
            if skipping is None and len(tail) > _KEEP_SCAN:
                skipping = self._skippable(tail)
                if skipping is not None:
                    self._note_skipped(skipping)
                    n = scan.pos
                    self.skipped_bytes += n
                    del tail[:n]
                    scan.shift(n)
            if skipping is None and len(tail) > _MAX_HEADER:
                raise InputError(
                    self.path,
                    f"more than {_MAX_HEADER >> 20} MB after the {self.key!r} array: not a trace",
                )
            block = None if eof else next(blocks, None)
            if block is None:
                raise InputError(
                    self.path,
                    f"truncated JSON: the file ends after the {self.key!r} array, inside the "
                    f"top-level object (read {self.total_bytes:,} bytes)",
                )
            self.total_bytes += len(block)
            _append(tail, block, scan)
        end = scan.closed
        if skipping is None and end > _MAX_HEADER:
            raise InputError(
                self.path,
                f"more than {_MAX_HEADER >> 20} MB after the {self.key!r} array: not a trace",
            )
        if skipping is not None:
            self.skipped_bytes += end
            self._take_tail(b"")
        else:
            self._take_tail(bytes(tail[:end]))
        return end

    def _skippable(self, tail: bytearray) -> str | None:
        """The key of the open member at the head of ``tail`` when it may be dropped unread
        (a well-formed ``, "key":`` not in ``keep``); None: it is kept (and capped)."""
        if self.keep is None:
            return None
        m = _MEMBER_KEY.match(tail, 0, 4096)
        if m is None:
            return None
        try:
            key = msgspec.json.decode(m.group(1))
        except msgspec.DecodeError:
            return None
        if not isinstance(key, str) or key in self.keep:
            return None
        if key == self.key:
            raise self._twice()
        return key

    def _note_skipped(self, key: str) -> None:
        if key not in self.skipped_members and len(self.skipped_members) < 3:
            self.skipped_members.append(key[:40])

    def _twice(self) -> InputError:
        return InputError(
            self.path,
            f"the top-level object has {self.key!r} twice (the first array is read; "
            "Python's json would keep the last): keep one",
        )

    def _take_tail(self, body: bytes) -> None:
        """Members after the array (``, "k": v, ...`` without the closing brace) into meta."""
        try:
            rest, fixed = self._members(b'{"": null' + body + b"}", tail=True)
        except msgspec.DecodeError as exc:
            raise InputError(
                self.path, f"malformed JSON after the {self.key!r} array ({exc})"
            ) from None
        rest.pop("", None)
        self.repaired += fixed
        self.meta.update(rest)

    def _members(
        self, text: bytes | bytearray, tail: bool = False, count: bool = True
    ) -> tuple[dict[str, Any], int]:
        """Decode the JSON object ``text``; members not in ``keep`` are not decoded (their
        bytes are counted when ``count``). Returns (members, characters repaired).

        Raises msgspec.DecodeError (malformed even after repair, or not an object).
        """
        fixed = 0
        try:
            raw = _RAW_OBJECT.decode(text)
        except msgspec.DecodeError:
            text, n_sur, n_bad = repair_text(text)
            if not (n_sur or n_bad):
                raise
            raw = _RAW_OBJECT.decode(text)
            fixed = n_sur + n_bad
        if tail and self.key in raw:
            raise self._twice()
        out: dict[str, Any] = {}
        for k, v in raw.items():
            if self.keep is None or k in self.keep or k == self.key or (tail and k == ""):
                out[k] = msgspec.json.decode(v)
            elif count:
                self.skipped_bytes += len(v)
                self._note_skipped(k)
        return out, fixed

    def _tail_ok(self, tail: bytes, check_only: bool = False) -> bool:
        """Is ``tail`` what may follow the array: the rest of the top-level object (or nothing)?"""
        if self._bare:
            return not tail.strip()
        try:
            rest, fixed = self._members(b'{"": null' + tail, tail=True, count=not check_only)
        except msgspec.DecodeError:
            return False
        if check_only:
            return True
        rest.pop("", None)
        self.repaired += fixed
        self.meta.update(rest)
        return True
