"""One memory bound for every input shape (docs/limits.md), enforced by the readers.

Each shape of ``fuzz/shapes.py`` is built in tmp_path and run through the installed CLI; the
child's own peak RSS (``wait4``) must stay within ``ccdiag.limits.memory_bound(U)``, U the
uncompressed bytes, and shapes whose cost must not grow with their size (blanks, refusals) must
stay at the base. In-process tests show the mechanisms: the chunker decodes each byte a bounded
number of times (no quadratic re-decode), keeps no blanks, caps one element, adapts its chunks
to small events; ``limits.inflation_limit`` lowers the gzip limit for one context only.
"""

from __future__ import annotations

import gzip
import random
import sys
import threading
from pathlib import Path

import msgspec
import pytest
from bad_inputs.cli import check_contract, run
from ccdiag.parsers._chunked_json import ArrayChunks
from conftest import REPO, SAMPLES

from ccdiag import api, limits
from ccdiag.errors import InputError

sys.path.insert(0, str(REPO))
from fuzz import shapes  # noqa: E402

MiB = 1 << 20

#: (shape, MiB of input, must the peak stay at the base?)
CASES = [
    ("huge_string", 8, False),
    ("huge_string", 24, True),
    ("false_cuts", 8, False),
    ("empty_events", 4, True),
    ("empty_events_gz", 200, True),
    ("tiny_events_gz", 48, False),  # up to the lowered inflation limit (CCDIAG_GZIP_MAX_GB)
    ("min_kept_events", 12, False),
    ("ws_after_gz", 128, True),
    ("ws_inside_gz", 64, True),
    ("ws_open_array", 32, True),
    ("many_categories", 8, False),
    ("huge_header", 70, True),
    # a member ccdiag does not read after the array is dropped as it is scanned: 394 MiB at
    # 70 MiB before (the string was held and copied), 162 MiB at 70 and at 200 MiB after
    ("huge_tail", 70, True),
    ("huge_tail", 150, True),
    ("deep_nesting", 1, True),
    ("deep_nesting", 20, True),  # campaign-hostile case 3499 (20 MiB): killed (exit -9)
    ("deep_nesting", 32, True),  # campaign-hostile case 3249 (32 MiB): 147 s
    ("csv_rows_gz", 16, False),
    ("csv_tiny_rows", 8, True),
    ("csv_long_line", 4, True),
]


@pytest.mark.parametrize(("name", "mib", "flat"), CASES, ids=[f"{c[0]}-{c[1]}MiB" for c in CASES])
def test_each_shape_stays_within_the_bound(tmp_path: Path, name: str, mib: int, flat: bool) -> None:
    shape = shapes.SHAPES[name]
    path = tmp_path / shape.filename
    u = shape.build(path, mib * MiB, random.Random(1))
    res = run(["summary", path.name, "--json", "-"], tmp_path, dict(shape.env))
    check_contract(res, path.name)
    bound = limits.memory_bound(u)
    assert res.peak_bytes <= bound, f"{res.peak_mib:.0f} MiB > {bound >> 20} MiB"
    if flat:
        assert res.peak_bytes <= limits.MEMORY_BASE, f"{res.peak_mib:.0f} MiB"


def test_the_shapes_that_are_read_account_for_every_event(tmp_path: Path) -> None:
    # many distinct categories: counted under at most 200 reasons + one "others" reason
    path = tmp_path / "cats.json"
    shapes.many_categories(path, 2 * MiB, random.Random(1))
    trace = api.load_trace(path)
    n = trace.meta.n_events + sum(trace.meta.skipped.values())
    assert n == len(msgspec.json.decode(path.read_bytes())["traceEvents"])
    assert len(trace.meta.skipped) <= 202


# -- after the array: members read, members skipped unread ---------------------------------------
_EV = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"device":0}}'


def _trace_then(tmp_path: Path, tail: bytes, gz: bool = False) -> Path:
    text = b'{"schemaVersion":1,"traceEvents":[' + b",".join([_EV] * 40) + b"]" + tail + b"}"
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(text, 1) if gz else text)
    return p


@pytest.mark.parametrize("gz", [False, True])
def test_a_huge_unknown_member_after_the_array_is_skipped_and_counted(
    tmp_path: Path, gz: bool
) -> None:
    junk = b'"' + b"abc" * (3 * MiB) + b'"'  # 9 MiB, then members that are read
    tail = b',"x":' + junk + b',"distributedInfo":{"rank":3,"world_size":4},"cupti_version":7'
    trace = api.load_trace(_trace_then(tmp_path, tail, gz))
    assert (trace.meta.rank, trace.meta.world_size) == (3, 4)
    assert trace.meta.extra["cupti_version"] == "7"
    assert trace.meta.n_events == 40
    warn = [w for w in trace.meta.warnings if "skipped unread" in w]
    assert warn == ["9.0 MiB of top-level members ccdiag does not read ('x') skipped unread"]


def test_members_after_a_skipped_one_in_the_same_block_are_read(tmp_path: Path) -> None:
    # the skipped member ends inside a block that also holds members that are read
    tail = b',"x":[' + b'"ab",' * (MiB // 2) + b'"c"],"distributedInfo":{"rank":2},"y":{"z":[1]}'
    trace = api.load_trace(_trace_then(tmp_path, tail))
    assert trace.meta.rank == 2
    assert any("('x', 'y')" in w for w in trace.meta.warnings)


def test_small_unknown_members_are_not_a_warning(tmp_path: Path) -> None:
    trace = api.load_trace(_trace_then(tmp_path, b',"displayTimeUnit":"ms","traceName":"a"'))
    assert not any("skipped unread" in w for w in trace.meta.warnings)


@pytest.mark.parametrize(
    ("tail", "expect"),
    [
        (b',"x":1,"traceEvents":[]', "'traceEvents' twice"),
        (b',"traceEvents":[' + b'{"a":1},' * MiB + b"{}]", "'traceEvents' twice"),
        (b',"x":[1,,2]', "malformed JSON after the 'traceEvents' array"),
        (b',"x":"' + b"a" * (2 * MiB) + b'"]', "malformed JSON"),  # a skipped member, then ]
        (b',"x":"' + b"a" * (2 * MiB), "truncated JSON"),  # never closed (no closing brace)
        (b'"x":1', "malformed JSON after the 'traceEvents' array"),  # no separator
    ],
    ids=["twice", "twice-huge", "malformed", "skipped-then-bracket", "truncated", "no-comma"],
)
def test_what_follows_the_array_is_still_checked(tmp_path: Path, tail: bytes, expect: str) -> None:
    p = _trace_then(tmp_path, tail)
    if expect == "truncated JSON":
        p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(InputError, match=expect) as info:
        api.load_trace(p)
    assert info.value.line().startswith(p.name)


def test_a_member_that_is_read_is_capped_after_the_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ccdiag.parsers import _chunked_json

    monkeypatch.setattr(_chunked_json, "_MAX_HEADER", 2 * MiB)
    tail = b',"metadata":{"s":"' + b"a" * (3 * MiB) + b'"}'
    with pytest.raises(InputError, match="more than 2 MB after the 'traceEvents' array"):
        api.load_trace(_trace_then(tmp_path, tail))


# -- the chunker's mechanisms ----------------------------------------------------------------------
def _decoded_bytes(path: Path, chunk: int = 1 << 20) -> tuple[int, int]:
    """(bytes handed to decode in all, elements) for one read."""
    seen = [0]

    def decode(mv: memoryview) -> list:
        seen[0] += len(mv)
        return msgspec.json.decode(mv)

    n = sum(len(x) for x in ArrayChunks(path, chunk_bytes=chunk).map(decode, lambda x: x, len))
    return seen[0], n


def test_false_cut_points_cost_linear_decoding(tmp_path: Path) -> None:
    # fuzz-repro #6: each false "}, {" used to re-decode the growing buffer (quadratic)
    for mib in (2, 8):
        p = tmp_path / f"f{mib}.json"
        shapes.false_cuts(p, mib * MiB, random.Random(1))
        decoded, n = _decoded_bytes(p)
        assert n == 1
        assert decoded <= 10 * p.stat().st_size, (mib, decoded)


def test_false_cut_points_among_real_events_keep_every_event(tmp_path: Path) -> None:
    evs = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": ("x}, {y" * 30000) if i % 50 == 0 else "op",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
        }
        for i in range(3000)
    ]
    p = tmp_path / "mixed.json"
    p.write_bytes(msgspec.json.encode({"traceEvents": evs}))
    decoded, n = _decoded_bytes(p, chunk=256 << 10)
    assert n == 3000
    assert decoded <= 12 * p.stat().st_size


def test_blanks_are_not_kept(tmp_path: Path) -> None:
    p = tmp_path / "ws.json"
    p.write_bytes(
        b'{"traceEvents":[{"a":1},' + b" \n" * (20 * MiB) + b'{"a":2}]' + b" " * MiB + b"}"
    )
    chunks = ArrayChunks(p, chunk_bytes=1 << 20)
    seen: list[int] = []
    out = list(chunks.map(lambda mv: (seen.append(len(mv)), msgspec.json.decode(mv))[1], len, len))
    assert sum(out) == 2
    assert max(seen) < 4 * MiB  # never the 40 MiB of blanks


def test_one_element_is_capped(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    p.write_bytes(b'{"traceEvents":[{"a":"' + b"x" * (3 * MiB) + b'"}]}')
    with pytest.raises(InputError, match="spans more than"):
        list(
            ArrayChunks(p, chunk_bytes=256 << 10, max_element=1 * MiB).map(msgspec.json.decode, len)
        )


def test_deep_nesting_is_refused_by_the_scan_at_once(tmp_path: Path) -> None:
    # found by the campaign: 16 M nested brackets were scanned one token at a time (147 s)
    import time

    p = tmp_path / "deep.json"
    shapes.deep_nesting(p, 20 * MiB, random.Random(1))
    t0 = time.perf_counter()
    with pytest.raises(InputError, match="nested too deeply"):
        list(ArrayChunks(p).map(msgspec.json.decode, len, len))
    assert time.perf_counter() - t0 < 10


def test_small_events_get_small_chunks(tmp_path: Path) -> None:
    # 17-byte events: a chunk holds about MAX_EVENTS_PER_CHUNK of them, not 8 MB of them
    p = tmp_path / "tiny.json"
    p.write_bytes(b'{"traceEvents":[' + b",".join([b'{"ph":"i","s":1}'] * 600_000) + b"]}")
    sizes = list(ArrayChunks(p).map(msgspec.json.decode, len, len))
    assert sum(sizes) == 600_000
    assert max(sizes) <= 2 * limits.MAX_EVENTS_PER_CHUNK


def test_inflation_limit_lowers_the_limit_for_its_context_only(tmp_path: Path) -> None:
    text = gzip.decompress((SAMPLES / "decode_eager" / "baseline.json.gz").read_bytes())
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text, 6))
    errors: list[str] = []

    def other_thread() -> None:  # another analysis, outside the with block: the default limit
        try:
            api.load_trace(p)
        except InputError as exc:  # pragma: no cover - the failure case
            errors.append(str(exc))

    with limits.inflation_limit(max_bytes=4 * MiB) as lim:
        assert lim.max_bytes == 4 * MiB
        t = threading.Thread(target=other_thread)
        t.start()
        with pytest.raises(InputError, match="inflates to more than 4.0 MiB"):
            api.load_trace(p)
        t.join()
    assert errors == []
    assert api.load_trace(p).meta.n_events > 0  # the with block is over: default again
