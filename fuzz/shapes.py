"""Memory-shaped inputs: files built to cost memory or time far beyond their size.

Each shape writes one input of a given uncompressed size into a folder and says how many
uncompressed bytes it holds (``U``). The RSS oracle (:func:`fuzz.hostile.run_cli`) runs the
installed CLI on it in a child process and fails the case when the child's peak resident memory
exceeds ``ccdiag.limits.memory_bound(U)`` or its time exceeds the time oracle. The same shapes
are the per-shape tests of ``tests/test_hostile_memory.py`` and the table in docs/limits.md.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MiB = 1 << 20


def _repeat(unit: bytes, n: int) -> Iterator[bytes]:
    """``n`` bytes of ``unit`` repeated, in 1 MiB pieces."""
    blk = unit * max(1, MiB // len(unit))
    left = n
    while left > 0:
        b = blk[:left]
        left -= len(b)
        yield b


def _write(path: Path, parts: Iterator[bytes] | list[bytes], gz: bool = False) -> int:
    n = 0
    opener = gzip.open if gz else open
    with opener(path, "wb", **({"compresslevel": 1} if gz else {})) as fh:  # type: ignore[operator]
        for p in parts:
            fh.write(p)
            n += len(p)
    return n


_KERNEL_HEAD = b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"'
_KERNEL_TAIL = b'","pid":0,"tid":7,"ts":1,"dur":1,"args":{"device":0,"stream":7}}]}'
_STEP = (
    b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%d,"dur":90},'
)


def huge_string(path: Path, n: int, rng: random.Random) -> int:
    """One kernel whose name is ``n`` bytes of plain text (one huge token)."""
    return _write(path, [_KERNEL_HEAD, *_repeat(b"abcdefgh ", n), _KERNEL_TAIL])


def false_cuts(path: Path, n: int, rng: random.Random) -> int:
    """One kernel whose name is ``n`` bytes of ``abcdefg}, {h`` (fuzz-repro #6): every
    ``}, {`` is a false cut point."""
    return _write(path, [_KERNEL_HEAD, *_repeat(b"abcdefg}, {h", n), _KERNEL_TAIL])


def empty_events(path: Path, n: int, rng: random.Random) -> int:
    """``{"traceEvents":[{},{},...]}``: millions of empty objects (fuzz-repro #10)."""
    return _write(path, [b'{"traceEvents":[{}', *_repeat(b",{}", n), b"]}"])


def empty_events_gz(path: Path, n: int, rng: random.Random) -> int:
    """The same in gzip (fuzz-repro #11): a few KB inflating to ``n`` bytes."""
    return _write(path, [b'{"traceEvents":[{}', *_repeat(b",{}", n), b"]}"], gz=True)


def tiny_events_gz(path: Path, n: int, rng: random.Random) -> int:
    """Gzip of the smallest events that are not refused (17 bytes each, instant events that
    are skipped and counted), up to ``n`` bytes: run with a lowered inflation limit."""
    unit = b',{"ph":"i","s":1}'
    return _write(path, [b'{"traceEvents":[{"ph":"i","s":1}', *_repeat(unit, n), b"]}"], gz=True)


def min_kept_events(path: Path, n: int, rng: random.Random) -> int:
    """The densest trace that is read: minimal complete events (about 52 bytes each), all
    kept, in steps."""

    def gen() -> Iterator[bytes]:
        yield b'{"traceEvents":['
        done, i = 0, 0
        while done < n:
            parts = [_STEP % (i, i * 100)]
            parts += [
                b'{"ph":"X","cat":"cpu_op","name":"a","ts":%d,"dur":1},' % (i * 100 + k)
                for k in range(1, 60)
            ]
            blob = b"".join(parts)
            done += len(blob)
            i += 1
            yield blob
        yield b'{"ph":"X","cat":"cpu_op","name":"a","ts":0,"dur":1}]}'

    return _write(path, gen())


def _blanks(rng: random.Random) -> bytes:
    pieces = [b" " * rng.randint(20, 200) + rng.choice([b"\n", b"\t", b"\r\n"]) for _ in range(512)]
    return b"".join(rng.choice(pieces) for _ in range(4096))


def _good_trace() -> bytes:
    from fuzz.hostile import small_trace

    return small_trace()


def ws_after_gz(path: Path, n: int, rng: random.Random) -> int:
    """A valid trace followed by ``n`` bytes of blanks, gzip (the issue-16 bomb)."""
    return _write(path, [_good_trace(), *_repeat(_blanks(rng), n)], gz=True)


def ws_inside_gz(path: Path, n: int, rng: random.Random) -> int:
    """A valid trace with ``n`` bytes of blanks between two of its events, gzip."""
    good = _good_trace()
    i = good.index(b"}, {") + 3
    return _write(path, [good[:i], *_repeat(_blanks(rng), n), good[i:]], gz=True)


def ws_open_array(path: Path, n: int, rng: random.Random) -> int:
    """``{"traceEvents":[`` and ``n`` bytes of blanks, never closed (truncated bomb)."""
    return _write(path, [b'{"traceEvents":[', *_repeat(_blanks(rng), n)])


def many_categories(path: Path, n: int, rng: random.Random) -> int:
    """Events of a million distinct categories (a skip counter per category)."""

    def gen() -> Iterator[bytes]:
        yield b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"dur":1}'
        done, i = 0, 0
        while done < n:
            blob = b"".join(
                b',{"ph":"X","cat":"c%d","name":"a","ts":1,"dur":1}' % (i + k) for k in range(1000)
            )
            done += len(blob)
            i += 1000
            yield blob
        yield b"]}"

    return _write(path, gen())


def huge_header(path: Path, n: int, rng: random.Random) -> int:
    """A string of ``n`` bytes in a top-level key before the array."""
    return _write(path, [b'{"x":"', *_repeat(b"abc", n), b'","traceEvents":[]}'])


def huge_tail(path: Path, n: int, rng: random.Random) -> int:
    """A valid trace whose top-level object goes on for ``n`` bytes after the array."""
    good = _good_trace()
    return _write(path, [good[:-1], b',"x":"', *_repeat(b"abc", n), b'"}'])


def deep_nesting(path: Path, n: int, rng: random.Random) -> int:
    """One event with ``n`` levels of nested arrays in its args."""
    depth = max(1, n // 2)
    head = b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"dur":1,"args":{"x":'
    return _write(path, [head, *_repeat(b"[", depth), *_repeat(b"]", depth), b"}}]}"])


_API_HEADER = b"Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name\n"


def csv_rows_gz(path: Path, n: int, rng: random.Random) -> int:
    """An nsys stats API trace of ``n`` bytes of rows in gzip (fuzz-repro #9's shape)."""
    row = b"1000,500,cudaLaunchKernel,0,1,4775,4775,20,app\n"
    return _write(path, [_API_HEADER, *_repeat(row, n)], gz=True)


def csv_tiny_rows(path: Path, n: int, rng: random.Random) -> int:
    """An API trace of the shortest rows (7 bytes): refused on its row density."""
    return _write(path, [b"Start (ns),Duration (ns),Name\n", *_repeat(b"1,1,ab\n", n)])


def csv_long_line(path: Path, n: int, rng: random.Random) -> int:
    """An API trace whose second line is ``n`` bytes without a newline."""
    return _write(path, [_API_HEADER, b'1000,500,"', *_repeat(b"x", n)])


@dataclass(frozen=True)
class Shape:
    name: str
    build: Callable[[Path, int, random.Random], int]
    filename: str
    #: environment for the run (a lowered inflation limit, ...)
    env: tuple[tuple[str, str], ...] = ()


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in [
        Shape("huge_string", huge_string, "trace.json"),
        Shape("false_cuts", false_cuts, "trace.json"),
        Shape("empty_events", empty_events, "trace.json"),
        Shape("empty_events_gz", empty_events_gz, "trace.json.gz"),
        Shape("tiny_events_gz", tiny_events_gz, "trace.json.gz", (("CCDIAG_GZIP_MAX_GB", "0.03"),)),
        Shape("min_kept_events", min_kept_events, "trace.json"),
        Shape("ws_after_gz", ws_after_gz, "trace.json.gz"),
        Shape("ws_inside_gz", ws_inside_gz, "trace.json.gz"),
        Shape("ws_open_array", ws_open_array, "trace.json"),
        Shape("many_categories", many_categories, "trace.json"),
        Shape("huge_header", huge_header, "trace.json"),
        Shape("huge_tail", huge_tail, "trace.json"),
        Shape("deep_nesting", deep_nesting, "trace.json"),
        Shape("csv_rows_gz", csv_rows_gz, "app_cuda_api_trace.csv.gz"),
        Shape("csv_tiny_rows", csv_tiny_rows, "app_cuda_api_trace.csv"),
        Shape("csv_long_line", csv_long_line, "app_cuda_api_trace.csv"),
    ]
}
