"""``ccdiag.parallel``: pieces run side by side give what the loop gives, raise what it raises,
nest without waiting for a piece nobody runs, and run inline when one core is asked for."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ccdiag import parallel


def test_results_in_order_and_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    # arrange: two pieces that can only finish if both run at once
    monkeypatch.delenv("CCDIAG_THREADS", raising=False)
    if parallel.workers() == 1:
        pytest.skip("polars runs on one thread here")
    gate = threading.Barrier(2, timeout=10)

    def piece(v: int) -> int:
        gate.wait()
        return v

    # act
    got = parallel.run_all([lambda: piece(1), lambda: piece(2)])
    # assert
    assert got == [1, 2]


def test_first_failure_in_order_is_raised() -> None:
    # arrange
    def bad(msg: str) -> int:
        raise ValueError(msg)

    # act / assert: the first failing piece's exception, as the loop raises it
    with pytest.raises(ValueError, match="first"):
        parallel.run_all([lambda: 1, lambda: bad("first"), lambda: bad("second")])


def test_nested_pieces_finish() -> None:
    # arrange: pieces that run pieces of their own, three deep (the worker busy with an outer
    # one while the inner ones are offered to it)
    def outer(v: int, depth: int) -> list[Any]:
        if depth == 0:
            return [v]
        return parallel.run_all([lambda: outer(v, depth - 1), lambda: outer(v + 1, depth - 1)])

    # act
    got = parallel.run_all([lambda: outer(0, 3), lambda: outer(10, 3)])
    # assert
    assert got == [outer(0, 3), outer(10, 3)]
    assert got[0] == [[[[0], [1]], [[1], [2]]], [[[1], [2]], [[2], [3]]]]


def test_one_thread_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # arrange
    monkeypatch.setenv("CCDIAG_THREADS", "1")
    seen: list[str] = []

    def piece() -> None:
        seen.append(threading.current_thread().name)

    # act
    parallel.run_all([piece, piece])
    # assert: both on the caller's thread
    assert parallel.workers() == 1
    assert seen == [threading.current_thread().name] * 2


@pytest.mark.parametrize(
    "pair",
    [
        ("decode_eager/baseline.json.gz", "decode_eager/treatment.json.gz"),
        ("decode_eager_nsys/baseline.sqlite", "decode_eager_nsys/treatment.sqlite"),
    ],
)
def test_side_by_side_gives_the_same_report(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange: a shipped Kineto and Nsight Systems pair, analyzed with pieces one after the
    # other and side by side (the context's stages, the rules, the gap model's fits)
    from ccdiag import api

    root = Path(__file__).resolve().parents[1] / "sample_traces"
    paths = [root / p for p in pair]

    def report(threads: str) -> str:
        monkeypatch.setenv("CCDIAG_THREADS", threads)
        rep = api.diagnose_pair(api.pair(*(api.load_trace(p) for p in paths)))
        return rep.model_dump_json()

    # act
    one, two = report("1"), report("2")
    # assert
    if parallel.workers() == 1:
        pytest.skip("polars runs on one thread here: both runs went one after the other")
    assert one == two
