"""v3 emulator modes: toll after the call, GPU-side copy padding, all-subset phases and Shapley truth."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from test_shim import TOLL_NS, N, fake, pytestmark, run_app  # noqa: F401  (fixture, skip mark)

from ccdiag.emulate.pairs import shapley, ship_names, subset_phases
from ccdiag.emulate.shim import build_shim


def test_toll_after_the_call_tolls_every_runtime_launch_outside_its_range(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
) -> None:
    # arrange
    shim = build_shim(out_dir=tmp_path / "so")
    monkeypatch.setenv("CCDIAG_EMU_TOLL_AT", "after")
    # act
    out, counters = run_app(fake, shim, "runtime", tmp_path)
    # assert: same toll and count as before the call, still outside the runtime call's range
    assert counters["config"]["toll_at"] == "after"
    assert counters["steps"][0]["launches"] == N
    assert counters["steps"][0]["launch_ns"] == N * TOLL_NS
    assert out["launch_wall_ns"] >= N * TOLL_NS
    assert out["launch_range_ns"] < N * TOLL_NS / 4


def test_gpu_copy_padding_never_pads_on_the_host_and_counts_what_it_could_not_launch(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch,
) -> None:
    # arrange: the fake driver has no module API, so the delay kernel cannot be loaded
    shim = build_shim(out_dir=tmp_path / "so")
    monkeypatch.setenv("CCDIAG_EMU_COPY_PAD_AT", "gpu")
    # act
    out, counters = run_app(fake, shim, "runtime", tmp_path, mech="copy_pad")
    # assert
    copy = counters["steps"][2]
    assert counters["config"]["copy_pad_at"] == "gpu"
    assert copy["copies"] == 2 and copy["copy_pad_ns"] == 0
    assert copy["copy_pad_gpu_ns"] == 0 and copy["copy_pad_kernels"] == 0
    assert counters["calls"]["copy_pad_kernel_failures"] == 2
    assert out["copy_wall_ns"] < 2 * 50_000  # nothing spun on the host


def test_subset_phases_cover_every_proper_subset() -> None:
    phases = subset_phases(["launch", "copy_pad", "copy_sync"])
    names = [n for n, _ in phases]
    assert names == [
        "only_launch",
        "only_copy_pad",
        "only_copy_sync",
        "on_launch+copy_pad",
        "on_launch+copy_sync",
        "on_copy_pad+copy_sync",
    ]
    assert ship_names(argparse.Namespace(ship="")) == ["baseline", "treatment"]


def test_shapley_splits_an_interaction_evenly_and_adds_up_to_the_delta() -> None:
    # arrange: a alone +100, b alone +0, both +300 (an interaction of +200)
    rng = random.Random(0)

    def steps(center: int) -> list[int]:
        return [center + rng.randint(-2, 2) for _ in range(41)]

    times = {
        "baseline": steps(1000),
        "only_a": steps(1100),
        "only_b": steps(1000),
        "treatment": steps(1300),
    }
    phases = [("baseline", []), ("treatment", ["a", "b"]), ("only_a", ["a"]), ("only_b", ["b"])]
    import ccdiag.emulate.pairs as pairs

    ids = dict(pairs.MECH_IDS)
    pairs.MECH_IDS.update(a="mech_a", b="mech_b")
    try:
        # act
        sh = shapley(times, phases, ["a", "b"])
    finally:
        pairs.MECH_IDS.clear()
        pairs.MECH_IDS.update(ids)
    # assert
    assert sh is not None
    assert abs(sh["mech_a"]["value"] - 200) <= 4 and abs(sh["mech_b"]["value"] - 100) <= 4
    lo, hi = sh["mech_a"]["ci95"]
    assert lo <= sh["mech_a"]["value"] <= hi
    # missing subset -> no Shapley values
    assert shapley(times, phases[:2], ["a", "b"]) is None
