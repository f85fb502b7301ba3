"""The CC emulation shim, tested without a GPU against a fake CUDA driver and runtime.

``fake_cuda.c`` builds a fake ``libcuda.so.1`` (with cuGetProcAddress_v2), a fake ``libcudart.so``
that fetches driver entry points the way the real runtime does and records each API call's
[start, end] like CUPTI, and an app that launches kernels through the runtime and straight through
the driver (as cuBLAS does), launches a graph, and copies 1 MiB each way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ccdiag.emulate.shim import MASK, build_shim

HERE = Path(__file__).parent
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")

TOLL_NS = 20_000
N = 50


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fake_cuda")
    src = str(HERE / "fake_cuda.c")
    for args in (
        [
            "-shared",
            "-fPIC",
            "-DFAKE_DRIVER",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            str(d / "libcuda.so.1"),
        ],
        ["-shared", "-fPIC", "-DFAKE_RUNTIME", "-o", str(d / "libcudart.so")],
        ["-DFAKE_APP", "-o", str(d / "app"), f"-L{d}", "-lcudart", f"-Wl,-rpath,{d}"],
    ):
        subprocess.run([CC, "-O1", src, *args, "-ldl"], check=True)
    return d


def run_app(
    fake: Path, shim: Path | None, layer: str, tmp_path: Path, mech: str = "launch,copy"
) -> tuple[dict, dict]:
    env = dict(
        os.environ,
        LD_LIBRARY_PATH=str(fake),
        CCDIAG_EMU_LAYER=layer,
        CCDIAG_EMU_MECH=mech,
        CCDIAG_EMU_LAUNCH_NS=str(TOLL_NS),
        CCDIAG_EMU_COPY_TOLL_NS="50000",
        CCDIAG_EMU_COPY_BW="1e9",
        CCDIAG_EMU_LOG=str(tmp_path / "counters"),
    )
    if shim:
        env["LD_PRELOAD"] = str(shim)
    proc = subprocess.run(
        [str(fake / "app"), str(N)], env=env, capture_output=True, text=True, check=True
    )
    logs = list(tmp_path.glob("counters.*"))
    counters = json.loads(logs[0].read_text()) if logs else {}
    return json.loads(proc.stdout), counters


def test_shim_builds_and_exports_its_control_api(tmp_path: Path) -> None:
    # act
    so = build_shim(out_dir=tmp_path, force=True)
    # assert
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True
    ).stdout
    for name in (
        "ccdiag_emu_set_mask",
        "ccdiag_emu_mark_step",
        "ccdiag_emu_dump",
        "cudaLaunchKernel",
        "__cudaLaunchKernel",
        "cudaGraphLaunch",
        "cudaMemcpyAsync",
    ):
        assert f" {name}\n" in symbols
    assert " dlsym\n" not in symbols  # the driver layer is opt-in
    assert so == build_shim(out_dir=tmp_path)  # cached by source hash


def test_without_the_shim_nothing_is_added(fake: Path, tmp_path: Path) -> None:
    out, counters = run_app(fake, None, "runtime", tmp_path)
    assert out["launch_wall_ns"] < N * TOLL_NS / 4
    assert counters == {}


def test_runtime_layer_tolls_each_runtime_launch_outside_the_api_range(
    fake: Path, tmp_path: Path
) -> None:
    # arrange
    shim = build_shim(out_dir=tmp_path / "so")
    # act
    out, counters = run_app(fake, shim, "runtime", tmp_path)
    # assert: N launches tolled, before the runtime call (its CUPTI-like range stays short)
    step0 = counters["steps"][0]
    assert step0["launches"] == N and step0["launch_ns"] == N * TOLL_NS
    assert out["launch_wall_ns"] >= N * TOLL_NS
    assert out["launch_range_ns"] < N * TOLL_NS / 4
    # launches made straight through the driver (like cuBLAS) are not reached at this layer
    assert counters["steps"][1]["launches"] == 0 and out["direct_wall_ns"] < N * TOLL_NS / 4
    assert counters["calls"]["runtime_launch_tolled"] == N + 1  # + the graph launch
    # the two 1 MiB copies: 50 us + 1 MiB / 1 GB/s each, serialized and synchronous
    copy = counters["steps"][2]
    assert copy["copies"] == 2 and copy["copy_bytes"] == 2 << 20
    assert copy["copy_pad_ns"] == 2 * (50_000 + round((1 << 20) * 1e9 / 1e9))
    assert out["copy_wall_ns"] >= copy["copy_pad_ns"]


def test_driver_layer_puts_the_toll_inside_the_runtime_call(fake: Path, tmp_path: Path) -> None:
    # arrange
    shim = build_shim(out_dir=tmp_path / "so", driver_layer=True)
    # act
    out, counters = run_app(fake, shim, "driver", tmp_path)
    # assert: the toll now sits inside the runtime API range, as under real CC,
    # and launches made straight through the driver are tolled too
    assert out["launch_range_ns"] >= N * TOLL_NS
    assert counters["steps"][1]["launches"] == N
    assert counters["calls"]["driver_launch_tolled"] == 2 * N + 1
    assert out["copy_range_ns"] >= 2 * 50_000


def test_mechanisms_can_be_switched_off(fake: Path, tmp_path: Path) -> None:
    shim = build_shim(out_dir=tmp_path / "so")
    out, counters = run_app(fake, shim, "runtime", tmp_path, mech="copy_pad")
    assert counters["steps"][0]["launches"] == 0
    assert counters["config"]["mask"] == MASK["copy_pad"]
    assert (
        counters["steps"][2]["copy_wait_ns"] < 1_000_000
    )  # copy_sync is off: no stream wait added
