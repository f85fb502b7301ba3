"""Kineto reader: chunk boundaries, odd and bad input, small written traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from ccdiag.parsers import kineto
from goldens import shared_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from ccdiag.errors import InputError


def _ev(name: str, cat: str = "cpu_op", ts: Any = 1000.0, dur: Any = 5.0, **args: Any) -> dict:
    e: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": 7}
    if ts is not None:
        e["ts"] = ts
    if dur is not None:
        e["dur"] = dur
    if args:
        e["args"] = args
    return e


def _write(
    path: Path, events: list[Any], pretty: bool = False, compress: bool = False, **top: Any
) -> Path:
    doc = {"schemaVersion": 1, **top, "traceEvents": events, "traceName": "t"}
    text = json.dumps(doc, indent=2 if pretty else None)
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


# -- chunk boundaries -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel,chunk",
    [
        ("traces/h200_decode_graph.kineto.json.gz", 16 << 10),  # compact `}, {`
        (
            "external/HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/"
            "event_sync_trace.json.gz",
            512,
        ),  # pretty-printed `},\n  {`
        ("external/HolisticTraceAnalysis/tests/data/trace_file_list/inference_rank_1.json.gz", 300),
        # record_param_comms sizes come from a second (lazy) decode of each chunk's text
        (
            "external/HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/"
            "rank0.json.gz",
            1 << 20,
        ),
    ],
)
def test_tiny_chunks_give_the_same_frame(rel: str, chunk: int):
    # arrange
    path = shared_path(*rel.split("/"))
    # act
    whole = kineto.read(path, chunk_bytes=1 << 30)
    pieces = kineto.read(path, chunk_bytes=chunk)
    # assert
    assert_frame_equal(whole.events, pieces.events)
    assert whole.meta == pieces.meta


_pieces = st.sampled_from(list('ab}{][,: "\\\n\té€\x00') + ["}, {", '"}, {"', "]}", "},\n  {"])
_tricky = st.lists(_pieces, max_size=12).map("".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=st.lists(_tricky, min_size=1, max_size=40),
    pretty=st.booleans(),
    chunk=st.integers(64, 700),
)
def test_strings_that_look_like_boundaries_do_not_break_chunking(
    tmp_path: Path, names: list[str], pretty: bool, chunk: int
):
    # arrange: names and args full of `}, {`, brackets, quotes and escapes
    events = [
        _ev(n, ts=1000.0 + i, **{"External id": i, "Concrete Inputs": [n, "", "True"]})
        for i, n in enumerate(names)
    ]
    path = _write(tmp_path / "t.json", events, pretty=pretty)
    # act
    whole = kineto.read(path, chunk_bytes=1 << 30)
    pieces = kineto.read(path, chunk_bytes=chunk)
    # assert
    assert whole.events["name"].to_list() == names
    assert_frame_equal(whole.events, pieces.events)


def test_multi_member_gzip(tmp_path: Path):
    # arrange: a gzip made of two members (e.g. written by a streaming compressor)
    data = json.dumps({"traceEvents": [_ev("a"), _ev("b")]}).encode()
    cut = data.index(b'{"ph"', 20)
    (tmp_path / "m.json.gz").write_bytes(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
    # act
    trace = kineto.read(tmp_path / "m.json.gz")
    # assert
    assert trace.events["name"].to_list() == ["a", "b"]


def test_bare_array_document(tmp_path: Path):
    (tmp_path / "a.json").write_text(json.dumps([_ev("x"), {"ph": "M", "name": "process_name"}]))
    trace = kineto.read(tmp_path / "a.json")
    assert trace.events["name"].to_list() == ["x"]
    assert trace.meta.skipped == {"metadata": 1}


# -- odd events: counted, never silently dropped ----------------------------------------------


def test_bad_times_are_skipped_with_a_reason(tmp_path: Path):
    # arrange
    events = [
        _ev("ok"),
        _ev("neg", dur=-3.0),
        _ev("nots", ts=None),
        _ev("nodur", dur=None),
        {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0},
        "not an object",
        _ev("strts", ts="soon"),
    ]
    path = _write(tmp_path / "t.json", events)
    # act
    trace = kineto.read(path)
    # assert
    assert trace.events["name"].to_list() == ["ok"]
    assert trace.meta.skipped == {
        "negative dur": 1,
        "missing ts": 2,
        "missing dur": 1,
        "missing name": 1,
        "malformed event": 1,
    }


def test_nan_and_infinity_literals_are_counted_not_fatal(tmp_path: Path):
    # Python's json writes NaN / Infinity (not JSON); a trace with them still loads
    text = json.dumps(
        {"traceEvents": [_ev("ok"), _ev("nan", dur=float("nan")), _ev("inf", ts=float("inf"))]}
    )
    (tmp_path / "n.json").write_text(text)
    trace = kineto.read(tmp_path / "n.json")
    assert trace.events["name"].to_list() == ["ok"]
    assert trace.meta.skipped == {"non-finite time": 2}


def test_unknown_categories_and_phases_are_counted(tmp_path: Path):
    events = [_ev("a"), _ev("b", cat="mystery"), {"ph": "C", "name": "counter", "ts": 1, "pid": 1}]
    trace = kineto.read(_write(tmp_path / "t.json", events))
    assert trace.meta.skipped == {"category:mystery": 1, "phase:C": 1}


# -- copies: direction from memory kinds ------------------------------------------------------


@pytest.mark.parametrize(
    "name,kind,src,dst",
    [
        ("Memcpy HtoD (Pinned -> Device)", "HtoD", "pinned", "device"),
        ("Memcpy DtoH (Device -> Pageable)", "DtoH", "device", "pageable"),
        ("Memcpy DtoD (Device -> Device)", "DtoD", "device", "device"),
        # under CC, pinned memory is emulated: the host side shows as Managed in a "DtoD"
        ("Memcpy DtoD (Managed -> Device)", "HtoD", "managed", "device"),
        ("Memcpy DtoD (Device -> Managed)", "DtoH", "device", "managed"),
        ("Memcpy PtoP (Device -> Device)", "PtoP", "device", "device"),
        ("Memcpy HtoH (Pinned -> Pageable)", "HtoH", "pinned", "pageable"),
        ("Memcpy HtoD", "HtoD", "unknown", "unknown"),
    ],
)
def test_copy_direction_from_memory_kinds(tmp_path: Path, name: str, kind: str, src: str, dst: str):
    # arrange
    ev = _ev(name, cat="gpu_memcpy", device=0, stream=7, correlation=1, bytes=64)
    # act
    row = kineto.read(_write(tmp_path / "c.json", [ev])).events.row(0, named=True)
    # assert
    assert (row["copy_kind"], row["src_mem"], row["dst_mem"], row["bytes"]) == (kind, src, dst, 64)


def test_gpu_name_is_the_device_kernels_ran_on(tmp_path: Path):
    props = [{"id": 0, "name": "GPU Zero"}, {"id": 1, "name": "GPU One"}]
    events = [_ev("k", cat="kernel", device=1, stream=7, correlation=5)]
    trace = kineto.read(_write(tmp_path / "g.json", events, deviceProperties=props))
    assert (trace.meta.gpu, trace.meta.gpus) == ("GPU One", ["GPU One"])


# -- bad files: one InputError naming the file ------------------------------------------------


def _bad_files(tmp: Path) -> dict[str, Path]:
    src = shared_path("traces", "h200_decode_eager.kineto.json.gz")
    raw = gzip.decompress(src.read_bytes())
    files = {
        "truncated gzip": (tmp / "tg.json.gz", src.read_bytes()[:100_000]),
        "truncated json": (tmp / "tj.json", raw[:2_000_000]),
        "truncated json.gz": (tmp / "tjg.json.gz", gzip.compress(raw[:2_000_000])),
        "not gzip": (tmp / "ng.json.gz", b"hello, I am not gzip\n"),
        "empty": (tmp / "e.json", b""),
        "empty gz": (tmp / "eg.json.gz", gzip.compress(b"")),
        "not a trace": (tmp / "nt.json", b'{"nvidia_smi": "H200", "copies": {}}'),
        "array of numbers": (tmp / "an.json", b"[1, 2, 3]"),
        "traceEvents not a list": (tmp / "tn.json", b'{"traceEvents": 5}'),
        "empty traceEvents": (tmp / "et.json", b'{"traceEvents": []}'),
        "garbage in the middle": (tmp / "gm.json", raw[:3_000_000] + b"}}]}"),
        "corrupt gzip": (tmp / "cg.json.gz", _flip(gzip.compress(raw[:500_000]))),
    }
    for path, data in files.values():
        path.write_bytes(data)
    return {k: p for k, (p, _) in files.items()}


def _flip(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    return bytes(b)


BAD = [
    "truncated gzip",
    "truncated json",
    "truncated json.gz",
    "not gzip",
    "empty",
    "empty gz",
    "not a trace",
    "array of numbers",
    "traceEvents not a list",
    "empty traceEvents",
    "garbage in the middle",
    "corrupt gzip",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_input_error_naming_the_file(tmp_path: Path, case: str):
    # arrange
    path = _bad_files(tmp_path)[case]
    # act
    from ccdiag import parsers

    with pytest.raises(InputError) as info:
        parsers.read(path)
    # assert
    line = info.value.line()
    assert line.startswith(path.name + ": ")
    assert "\n" not in line
