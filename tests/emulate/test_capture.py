"""ccdiag.capture() and the capture / emulate commands, run for real on the CPU build of PyTorch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from ccdiag import api  # noqa: E402
from ccdiag.profiling import capture  # noqa: E402

WORKLOAD = textwrap.dedent(
    """
    import torch, ccdiag
    x = torch.randn(64, 64)
    with ccdiag.capture(steps=4, warmup=1) as cap:
        for i in range(cap.total_steps):
            y = (x @ x).relu().sum()
            cap.step()
    """
)


def test_capture_writes_a_trace_with_profiler_steps_and_clean_metadata(tmp_path: Path) -> None:
    # act
    x = torch.randn(32, 32)
    with capture(tmp_path, "cpu_run", steps=3, warmup=1) as cap:
        for _ in range(cap.total_steps):
            (x @ x).sum()
            cap.step()
    # assert
    trace = api.load_trace(tmp_path / "cpu_run.json.gz")
    assert trace.steps.height == 3
    assert trace.meta.step_marker and "ProfilerStep" in trace.meta.step_marker
    meta = json.loads((tmp_path / "cpu_run.meta.json").read_text())
    assert meta["label"] == "cpu_run" and meta["profiled_steps"] == 3
    text = (tmp_path / "cpu_run.meta.json").read_text() + (
        tmp_path / "cpu_run.json.gz"
    ).read_bytes().decode("latin-1")
    assert str(Path.home()) not in text and str(tmp_path) not in text


def test_capture_command_runs_an_instrumented_script(tmp_path: Path) -> None:
    # arrange
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    out = tmp_path / "runs"
    # act
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccdiag.cli",
            "capture",
            "--out",
            str(out),
            "--label",
            "cc_off",
            "--",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    # assert
    assert proc.returncode == 0, proc.stderr
    assert api.load_trace(out / "cc_off.json.gz").steps.height == 4


def test_emulate_command_preloads_the_shim_and_writes_ground_truth(tmp_path: Path) -> None:
    # arrange
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    # act
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccdiag.cli",
            "emulate",
            "--platform",
            "h100",
            "--mechanisms",
            "launch,copy",
            "--out",
            str(tmp_path / "emu"),
            "--",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            "CCDIAG_CACHE": str(tmp_path / "cache"),
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
        },
    )
    # assert: the workload ran with the shim (its step marks reached the emulator's counters)
    assert proc.returncode == 0, proc.stderr
    truth = json.loads((tmp_path / "emu" / "ground_truth.json").read_text())
    assert truth["platform"]["name"] == "h100" and truth["mechanisms"] == ["launch", "copy"]
    (process,) = truth["processes"]
    assert len(process["steps"]) == 6  # 5 marked steps + the open one
    assert process["config"]["launch_ns"] == 5100


def test_emulate_rejects_unknown_mechanisms(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", "emulate", "--mechanisms", "warp_drive", "--", "true"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("ccdiag: error: unknown mechanism 'warp_drive'")


def test_flag_reads_fix_keeps_the_flags_on_the_gpu_and_the_result_unchanged() -> None:
    """``flag_reads`` and its fix (``on_gpu=1``, the flags kept on the device with torch.where):
    the same result, so the fix measured on the device changes where the flags are read, not
    what the step computes."""
    from ccdiag.emulate.workloads import WORKLOADS

    out = []
    for on_gpu in (0, 1):
        wl = WORKLOADS["flag_reads"](layers=6, every=2, n=64, rows=16, on_gpu=on_gpu)
        wl.setup()
        wl.step(0)
        out.append(wl.result)
    assert out[0] == out[1] and out[0] != 0.0
