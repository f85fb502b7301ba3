"""The partition's reconciliation on the means, and the samples the engine fixes were made for."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from ccdiag.rules import _expr as ex

from ccdiag import api
from ccdiag.engine import UNATTRIBUTED, _claim_pass

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def test_noise_in_a_claimed_category_averages_out() -> None:
    # arrange: a category whose growth is noise around zero (+500 / -500 us), claimed whole by one
    # mechanism; per step only the positive steps can be given, which alone would average +250 us
    d = np.array([500_000.0, -500_000.0] * 10)
    led = pl.DataFrame({"rank": [0] * 20, "idx": list(range(20)), "d_gpu_collective": d})
    ctx = SimpleNamespace(categories=("gpu_collective",))
    claims = {("encrypted_collectives", "gpu_collective"): np.clip(d, 0, None)}
    keep = np.ones(20, dtype=bool)
    # act
    parts = _claim_pass(ctx, ["encrypted_collectives"], claims, led, keep)  # type: ignore[arg-type]
    # assert: nothing on average, and every step still adds up
    got = parts["encrypted_collectives"].total(20)
    assert got.mean() == pytest.approx(0.0, abs=1.0)
    assert np.allclose(got + parts[UNATTRIBUTED].total(20), d)


def test_real_growth_under_noise_is_kept() -> None:
    # arrange: +200 us of real growth under +-500 us of noise
    d = np.array([700_000.0, -300_000.0] * 10)
    led = pl.DataFrame({"rank": [0] * 20, "idx": list(range(20)), "d_gpu_collective": d})
    ctx = SimpleNamespace(categories=("gpu_collective",))
    claims = {("encrypted_collectives", "gpu_collective"): np.clip(d, 0, None)}
    # act
    parts = _claim_pass(ctx, ["encrypted_collectives"], claims, led, np.ones(20, dtype=bool))  # type: ignore[arg-type]
    # assert
    assert parts["encrypted_collectives"].total(20).mean() == pytest.approx(200_000.0, rel=1e-6)


def test_async_device_copy_is_a_submission_not_a_host_copy() -> None:
    # arrange: DDP's gradient-bucket copies (cudaMemcpyAsync, device to device)
    ev = api.load_trace(SAMPLES / "ddp_2gpu" / "baseline").events
    threads = ex.main_threads(ev)
    windows = api.load_trace(SAMPLES / "ddp_2gpu" / "baseline").steps.select(
        "rank", "step", "start_ns", "end_ns"
    )
    # act
    calls = ex.host_calls(ev, windows, threads)
    copies = calls.filter(ex.base_name() == "cudaMemcpyAsync")
    # assert: the H2D input copy stays a copy; the device copies are launch-class submissions
    host = copies.filter(ex.is_host_copy().fill_null(False))
    assert host.height > 0 and (host["cls"] == "copy").all()
    assert (copies.filter(~ex.is_host_copy().fill_null(True))["cls"] == "launch").all()


def test_nsys_decode_launch_toll_is_the_injected_toll_not_the_slower_host() -> None:
    # arrange: the eager decode under Nsight Systems; cuKernelGetName precedes every launch and
    # the treatment's host code ran ~1.7x slower (no cpu_ops to check it directly)
    d = SAMPLES / "decode_eager_nsys"
    truth = json.loads((SAMPLES / "decode_eager" / "ground_truth.json").read_text())
    injected = truth["injected_ns_per_step"]["launch_toll"]
    # act
    r = api.diagnose(d / "baseline.sqlite", d / "treatment.sqlite")
    # assert
    got = next(a.ns_per_step for a in r.attribution if a.mechanism == "launch_toll")
    assert abs(got - injected) <= 0.15 * injected
    assert any("host gaps before launches scale" in w for w in r.warnings)
