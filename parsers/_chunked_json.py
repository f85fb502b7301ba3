"""Read one big array inside a JSON document in bounded chunks (plain or gzip files).

A Kineto trace is ``{"schemaVersion": 1, ..., "traceEvents": [ {...}, {...}, ... ], ...}``
where the array holds nearly all the bytes. :class:`ArrayChunks` streams the file (gzip is
decompressed on a background thread, which zlib lets run beside the parser), cuts the array at
event boundaries and hands each piece, as a memoryview of a valid JSON array, to a decode
function. Neither the whole text nor all decoded objects are ever alive at once.

How the cuts are found — a fast heuristic, verified: a cut is placed at the last ``}`` ``,``
``{`` sequence (whitespace allowed) before the chunk size. Such a sequence can also occur inside
a string or inside a nested value; the piece up to the cut is then not a complete JSON array and
decoding it fails (a JSON string cannot close itself: quotes inside are escaped). Because the
previous cut was verified, a piece that decodes is a sequence of complete array elements, so the
cut is a true element boundary. On failure the previous candidate is tried, then more data is
read; a malformed file ends in one ``InputError`` at the end.

Everything outside the array (the header before it, the tail after it) is decoded into one dict.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from ccdiag.errors import InputError
from ccdiag.limits import Budget

T = TypeVar("T")

GZIP_MAGIC = b"\x1f\x8b"
_READ_COMPRESSED = 4 << 20
#: Largest header (bytes before the array) we search through.
_MAX_HEADER = 256 << 20
_WS = b" \t\r\n"
_LEAD = re.compile(rb"[ \t\r\n]*(\S)")
_BOM = b"\xef\xbb\xbf"


def _iter_plain(path: Path, block: int) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while data := fh.read(block):
            yield data


def _iter_gzip(path: Path, block: int) -> Iterator[bytes]:
    """Decompress a (possibly multi-member) gzip file in blocks of at most ``block`` bytes.

    Stops with an InputError once the file inflates past ``ccdiag.limits`` (a gzip bomb).
    """
    budget = Budget(path)
    with open(path, "rb") as fh:
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
    """Decompressed blocks of a plain or gzip file, read ahead on a thread."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    it = _iter_gzip(path, block) if magic == GZIP_MAGIC else _iter_plain(path, block)
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


class ArrayChunks:
    """Stream the array under top-level ``key`` of a JSON file through ``decode``.

    Iterating yields ``fn(decode(chunk))`` for consecutive chunks (``map``); afterwards
    :attr:`meta` holds every other top-level member. A document that is itself an array is read
    as the array (``meta`` is empty).

    Args:
        path: the file (plain or gzip).
        key: the top-level key of the array.
        chunk_bytes: target size of one chunk of array text.
    """

    def __init__(self, path: Path, key: str = "traceEvents", chunk_bytes: int = 8 << 20) -> None:
        self.path = path
        self.key = key
        self.chunk_bytes = chunk_bytes
        self.meta: dict[str, Any] = {}
        self.found = False
        self.offset = 0  # file offset (uncompressed) of the start of ``buf``
        self.total_bytes = 0
        self._bare = False
        self._key_re = re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*\[')

    def map(self, decode: Callable[[memoryview], T], fn: Callable[[T], Any]) -> Iterator[Any]:
        """Yield ``fn(decode(piece))`` per piece; decoded objects die before the buffer moves."""
        blocks = open_blocks(self.path, self.chunk_bytes)
        try:
            yield from self._run(iter(blocks), decode, fn)
        except (EOFError, zlib.error) as exc:
            raise _gzip_error(self.path, exc) from None
        except OSError as exc:
            raise InputError(self.path, f"cannot read: {exc.strerror or exc}") from None
        except RecursionError:  # msgspec and Python's json recurse per nesting level
            raise InputError(self.path, "JSON nested too deeply to be a trace") from None
        finally:
            blocks.close()

    def _run(
        self, blocks: Iterator[bytes], decode: Callable[[memoryview], T], fn: Callable[[T], Any]
    ) -> Iterator[Any]:
        buf, eof = self._find_array(blocks)
        fails = 0
        while not eof:
            while len(buf) < self.chunk_bytes * (1 + fails) and not eof:
                block = next(blocks, None)
                if block is None:
                    eof = True
                else:
                    buf += block
                    self.total_bytes += len(block)
            if eof:
                break
            cut = self._decode_before(buf, len(buf), decode)
            if cut is None:
                fails += 1
                continue
            fails = 0
            start, result = cut
            del cut
            yield fn(result)
            del result
            buf = self._consume(buf, start)
        yield from self._finish(buf, decode, fn)

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

    def _consume(self, buf: bytearray, start: int) -> bytearray:
        """Drop the decoded elements; the buffer again starts with '[' before the next one."""
        buf[start - 1] = 0x5B  # '['
        self.offset += start - 1
        try:
            del buf[: start - 1]
        except BufferError:  # a decoded object still views the buffer: copy instead
            buf = bytearray(buf[start - 1 :])
        return buf

    def _find_array(self, blocks: Iterator[bytes]) -> tuple[bytearray, bool]:
        """Read until the array opens; return the buffer (starting at '[') and the EOF flag."""
        buf = bytearray()
        eof = False
        pos = 0
        while True:
            if buf.startswith(_BOM):  # a UTF-8 byte-order mark (Windows editors write one)
                del buf[:3]
                self.offset += 3
            first = _LEAD.match(buf)
            lead = first.group(1) if first else b""
            if first is not None and lead == b"[":  # a bare array document
                self.found = True
                self.offset = first.start(1)
                self._bare = True
                del buf[: first.start(1)]
                return buf, eof
            if lead and lead != b"{":
                raise InputError(self.path, "not a JSON object or array")
            for m in self._key_re.finditer(buf, max(0, pos - 64)):
                head = bytes(buf[: m.start()]) + b'"' + self.key.encode() + b'": null}'
                try:
                    meta = msgspec.json.decode(head)
                except msgspec.DecodeError:
                    continue
                if isinstance(meta, dict):
                    self.meta = meta
                    self.found = True
                    self._bare = False
                    self.offset = m.end() - 1
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
            doc = msgspec.json.decode(bytes(buf))
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"malformed or truncated JSON ({exc})") from None
        if isinstance(doc, dict) and self.key in doc:
            raise InputError(self.path, f"{self.key!r} is not an array: not a trace")
        raise InputError(self.path, f"JSON without a {self.key!r} array: not a trace")

    def _finish(
        self, buf: bytearray, decode: Callable[[memoryview], T], fn: Callable[[T], Any]
    ) -> Iterator[Any]:
        """The last piece: find the ']' closing the array, decode the rest and the tail."""
        first_error: str | None = None
        hi = len(buf)
        for _ in range(64):
            p = buf.rfind(b"]", 0, hi)
            if p < 0:
                break
            hi = p
            tail = bytes(buf[p + 1 :])
            if not self._tail_ok(tail):
                continue
            mv = memoryview(buf)
            try:
                result = decode(mv[: p + 1])
            except msgspec.DecodeError as exc:
                first_error = first_error or str(exc)
                continue
            finally:
                del mv
            yield fn(result)
            del result
            return
        if first_error is not None:
            raise InputError(self.path, f"malformed JSON in the {self.key!r} array ({first_error})")
        raise InputError(
            self.path,
            f"truncated JSON: the file ends inside the {self.key!r} array "
            f"(read {self.total_bytes:,} bytes)",
        )

    def _tail_ok(self, tail: bytes) -> bool:
        """Is ``tail`` what may follow the array: the rest of the top-level object (or nothing)?"""
        if self._bare:
            return not tail.strip()
        try:
            rest = msgspec.json.decode(b'{"' + self.key.encode() + b'": null' + tail)
        except msgspec.DecodeError:
            return False
        if not isinstance(rest, dict):
            return False
        rest.pop(self.key, None)
        self.meta.update(rest)
        return True
