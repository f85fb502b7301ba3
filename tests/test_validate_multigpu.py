"""The collectives cost model (ccdiag.collectives) and scripts/validate_multigpu.py's core."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ccdiag import collectives as cc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import validate_multigpu as vm  # noqa: E402

MB = 1 << 20


def _rows(points: list[tuple[int, float]], reps: int = 5) -> pl.DataFrame:
    """Collective rows: each (bytes, µs) repeated, plus slower copies (a late peer)."""
    b, d = [], []
    for nbytes, t in points:
        for i in range(reps):
            b.append(nbytes)
            d.append(int(t * 1000) + (0 if i < reps - 1 else 500_000))
    return pl.DataFrame({"bytes": b, "dur_ns": d})


def test_fit_recovers_fixed_and_bandwidth_from_the_fast_end() -> None:
    # arrange: 5 us + bytes / 250 GB/s at three sizes; one copy of each waits 500 us for a peer
    pts = [(0, 5.0), (64 * MB, 5.0 + 64 * MB / 250e3), (256 * MB, 5.0 + 256 * MB / 250e3)]
    # act
    fit = cc.fit_cost(_rows(pts), q=0.1)
    # assert
    assert fit.fixed_ns == pytest.approx(5000, abs=50)
    assert fit.gbps == pytest.approx(250, rel=0.01)


def test_fit_with_one_message_size_leaves_the_split_open() -> None:
    fit = cc.fit_cost(_rows([(64 * MB, 300.0)]))
    assert fit.fixed_ns is None and fit.gbps is None and fit.points[0]["bytes"] == 64 * MB


@pytest.mark.parametrize(
    ("sizes", "cap", "k"),
    [
        ([67_125_248] * 8, 25, 8),  # each 64 MiB layer exceeds 25 MiB: one bucket each
        ([67_125_248] * 8, 200, 2),  # 4 layers reach 200 MiB: 2 buckets (measured: 2)
        ([67_125_248] * 8, 400, 2),  # 7 layers reach 400 MiB, the 8th is a bucket of its own
        ([10 * MB, 10 * MB, 10 * MB], 25, 1),
    ],
)
def test_ddp_buckets_pack_whole_parameters_up_to_the_cap(sizes: list[int], cap: int, k: int):
    assert cc.ddp_buckets(sizes, cap) == k


def test_bigger_buckets_recover_only_the_fixed_cost() -> None:
    # arrange: CC doubles the per-byte cost, fixed cost unchanged -> nothing to recover
    fb = cc.CostFit(5000.0, 250.0)
    bw_only = cc.CostFit(5000.0, 125.0)
    fixed = cc.CostFit(25_000.0, 250.0)  # +20 us per collective
    # act
    p_bw = cc.predict_bucket_cap(fb, bw_only, k=8, k_new=2, share=1.0, dt=270_000)
    p_fixed = cc.predict_bucket_cap(fb, fixed, k=8, k_new=2, share=0.5, dt=20_000)
    # assert
    assert p_bw.recovery_ns == pytest.approx(0.0)
    assert p_fixed.recovery_ns == pytest.approx(6 * 20_000 * 0.5)


def test_bigger_buckets_with_an_undetermined_fit_give_zero_and_a_bound() -> None:
    open_fit = cc.CostFit(None, None)
    p = cc.predict_bucket_cap(open_fit, open_fit, k=8, k_new=2, share=0.5, dt=1_000_000)
    assert p.recovery_ns == 0.0 and p.upper_ns == pytest.approx(6 * 1_000_000 * 0.5)


def test_narrower_tp_to_one_gpu_recovers_all_exposed_growth() -> None:
    fb, ft = cc.CostFit(5000.0, 250.0), cc.CostFit(15_000.0, 125.0)
    nbytes = 1 * MB
    dt = 10_000 + nbytes / 125.0 - nbytes / 250.0
    p = cc.predict_narrower_tp(fb, ft, k=16, n=2, n_new=1, share=0.8, nbytes=nbytes, dt=dt)
    assert p.recovery_ns == pytest.approx(16 * dt * 0.8)


def test_narrower_tp_scales_crypto_ops_and_ring_traffic() -> None:
    # arrange: TP8 -> TP4 keeps 3/7 of the crypto operations and (3/4)/(7/8) of the traffic
    fb, ft = cc.CostFit(5000.0, 250.0), cc.CostFit(12_000.0, 250.0)  # fixed +7 us only
    # act
    p = cc.predict_narrower_tp(fb, ft, k=10, n=8, n_new=4, share=1.0, nbytes=MB, dt=7000)
    # assert
    assert p.recovery_ns == pytest.approx(10 * 7000 * (1 - 3 / 7))
    assert cc.crypto_ops(10, 8) == 280 and cc.crypto_ops(10, 4) == 120


def test_exposure_is_a_share() -> None:
    assert cc.exposure(50, 100) == 0.5
    assert cc.exposure(150, 100) == 1.0 and cc.exposure(-5, 100) == 0.0 and cc.exposure(5, 0) == 0


def test_difference_of_estimates_combines_the_cis() -> None:
    # arrange
    a, b = vm.Estimate(100.0, (90.0, 110.0)), vm.Estimate(40.0, (37.0, 44.0))
    # act
    d = a.minus(b)
    # assert
    assert d.value == 60.0
    assert d.ci == pytest.approx((60 - (10**2 + 4**2) ** 0.5, 60 + (10**2 + 3**2) ** 0.5))


def test_truth_of_averages_the_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # arrange
    d = tmp_path / "pair"
    d.mkdir()
    for r, v in ((0, 100), (1, 200)):
        g = {"delta_ns_per_step": {"value": v, "ci95": [v - 10, v + 20]}, "rank": r}
        (d / f"ground_truth.rank{r}.json").write_text(json.dumps(g))
    (d / "ground_truth.json").write_text((d / "ground_truth.rank0.json").read_text())
    monkeypatch.setattr(vm, "SAMPLES", tmp_path)
    # act
    g = vm.truth_of("pair")
    # assert
    assert g["delta_ns_per_step"] == {"value": 150, "ci95": [140, 170]} and g["ranks"] == 2


def test_bigger_buckets_on_the_samples_predict_no_recovery() -> None:
    # act
    rows, tp = vm.collect()
    # assert: the emulated CC slows bandwidth only; ccdiag predicts ~0 and says so
    for r in rows:
        assert r["predicted"] is not None and r["predicted"] <= 0.05 * r["small"].delta().value
        assert "4*k*(n-1): 32 -> 8" in r["advice"]
    assert tp["model"] is not None and tp["model"].recovery_ns < 20_000
    assert tp["step_treatment"][1] > tp["step_treatment"][0]  # TP1 is slower per step


def test_multigpu_doc_is_fresh() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_multigpu.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_co01_advises_narrower_tp_outside_ddp_with_its_crypto_ops() -> None:
    # arrange: the CO01 firing case (4 all-reduces of 16 MiB per step, 100 -> 300 us), no DDP;
    # one message size: the split is open, and TP 1 -> 1 keeps everything
    from factories import Workload

    from ccdiag.engine import diagnose_pair
    from ccdiag.pairing import pair_traces

    coll = {"n": 4, "bytes": 16 * MB}
    base = Workload(collective={**coll, "us": 100}).build("b")
    treat = Workload(collective={**coll, "us": 300}).build("t")
    # act
    r = diagnose_pair(pair_traces(base, treat))
    # assert
    rec = next(x for x in r.recommendations if x.fix == "narrower_tp")
    assert "crypto ops per GPU 4*k*(n-1)" in rec.text and "parallel speed" in rec.text
    assert not any(x.fix == "bucket_cap_mb" for x in r.recommendations)
