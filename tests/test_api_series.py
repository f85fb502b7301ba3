"""api.evidence_series and api.step_timeline on real sample pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccdiag import api
from ccdiag.errors import InputError

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def _paths(name: str) -> tuple[Path, Path]:
    return SAMPLES / name / "baseline.json.gz", SAMPLES / name / "treatment.json.gz"


@pytest.fixture(scope="module")
def kv_pair():  # noqa: ANN201
    return api.load_pair(*_paths("kv_offload"))


def test_evidence_series_holds_every_section_for_both_runs(kv_pair) -> None:  # noqa: ANN001
    # act
    s = api.evidence_series(kv_pair)
    # assert
    sections = (
        "launch_call",
        "launch_gap",
        "gpu_idle_gap",
        "copies",
        "copy_concurrency",
        "async_copies",
        "collectives",
        "uvm",
    )
    for key in sections:
        assert set(s[key]) == {"baseline", "treatment"}
    assert s["copies"]["treatment"]["n"] == 16 * s["steps"]  # 16 copies of 1 MiB per step
    assert set(s["copies"]["treatment"]["bytes"]) == {1 << 20}
    assert s["copy_concurrency"]["treatment"]["levels"] == [1]
    assert json.loads(json.dumps(s)) == s


def test_evidence_series_matches_the_reported_percentiles(kv_pair) -> None:  # noqa: ANN001
    # arrange
    report = api.diagnose_pair(kv_pair)
    ev = next(a for a in report.attribution if a.mechanism == "serialized_copies").evidence
    # act
    lat = sorted(api.evidence_series(kv_pair)["copies"]["treatment"]["latency_ns"])
    # assert: the samples are the ones the rule summarised
    assert lat[len(lat) // 2] == pytest.approx(ev["latency_ns"]["treatment"]["p50"], rel=0.02)


def test_evidence_series_caps_lists_but_keeps_the_count() -> None:
    s = api.evidence_series(_paths("decode_eager"), max_points=100)
    launches = s["launch_call"]["treatment"]
    assert len(launches["ns"]) == 100 and launches["n"] > 3000
    assert launches["ns"] == sorted(launches["ns"])


def test_step_timeline_lanes_and_mechanisms(kv_pair) -> None:  # noqa: ANN001
    # act
    tl = api.step_timeline(kv_pair, 4)
    # assert
    assert tl["index"] == 4 and tl["n_steps"] == kv_pair.aligned.height
    assert tl["lanes"][0] == "main thread: ops"
    for run in ("baseline", "treatment"):
        ev = tl[run]["events"]
        assert len(ev["lane"]) == len(ev["start_ns"]) == len(ev["mechanism"]) == tl[run]["n_events"]
        assert min(ev["start_ns"]) >= -tl[run]["step_ns"] // 10
        assert max(s + d for s, d in zip(ev["start_ns"], ev["dur_ns"])) <= 1.1 * tl[run]["step_ns"]
    mech_t = set(tl["treatment"]["events"]["mechanism"])
    assert {"launch_toll", "serialized_copies", "blocked_non_blocking"} <= mech_t
    assert "blocked_non_blocking" not in set(tl["baseline"]["events"]["mechanism"])


def test_step_timeline_accepts_paths_and_caps_events() -> None:
    tl = api.step_timeline(_paths("decode_eager"), 0, max_events=200)
    assert tl["treatment"]["n_events"] > 200 and len(tl["treatment"]["events"]["lane"]) == 200
    assert tl["treatment"]["truncated"] == tl["treatment"]["n_events"] - 200


def test_step_timeline_of_a_host_only_treatment() -> None:
    b, _ = _paths("decode_eager")
    tl = api.step_timeline((b, SAMPLES / "decode_eager" / "treatment_host_only.json.gz"), 2)
    assert "launch_toll" in tl["treatment"]["events"]["mechanism"]
    assert not any(lane.startswith("GPU") for lane in tl["treatment"]["events"]["lane"])


@pytest.mark.parametrize("index, rank", [(-1, None), (10_000, None), (0, 7)])
def test_step_timeline_refuses_steps_that_do_not_exist(kv_pair, index: int, rank) -> None:  # noqa: ANN001
    with pytest.raises(InputError, match="no aligned step"):
        api.step_timeline(kv_pair, index, rank=rank)


def test_step_timeline_of_the_second_rank() -> None:
    d = SAMPLES / "ddp_2gpu_ctas2"
    tl = api.step_timeline((d / "baseline", d / "treatment"), 1, rank=1)
    assert tl["rank"] == 1
    assert "encrypted_collectives" in tl["treatment"]["events"]["mechanism"]


def test_step_timeline_of_every_step_and_one_chunk_layout() -> None:
    """Regression (2026-12-04): gpu_rows added its launch ends to GPU rows cut as the events'
    filter cut them ([0, n] chunks) and polars panicked in the timeline's select; every column
    of the GPU rows is now cut at the same rows."""
    from ccdiag.ledger.gpu import gpu_rows
    from ccdiag.pairing import pair_traces

    b, t = _paths("decode_eager")
    pair = pair_traces(api.load_trace(b), api.load_trace(t))
    g = gpu_rows(pair.treatment.trace.events, pair.treatment.windows)
    assert len({tuple(g[c].chunk_lengths()) for c in g.columns}) == 1
    for i in range(pair.aligned.height):
        assert api.step_timeline(pair, i)["treatment"]["n_events"] > 0
