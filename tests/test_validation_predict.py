"""`ccdiag predict` on the real H100 CC pairs of the ISPASS 2025 artifact (docs/validation_predict.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import validate_predict as vp  # noqa: E402


@pytest.mark.parametrize("app", ["GRAMSCHM", "FDTD-2D", "3DCONV"])
def test_explicit_copy_builds_are_predicted_within_25_percent(app: str) -> None:
    # act: the CC run predicted from the CC-off run alone, judged against the real CC run
    r = vp.judge(app, "nor", "h100", partition=False)
    # assert
    assert abs(r["err"]) <= 0.25, r["err"]
    b_ctx, pred_ctx, real_ctx = r["ctx"]
    assert abs(pred_ctx / real_ctx - 1) < 0.05


def test_validation_doc_is_fresh() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_predict.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_emulated_validation_doc_is_fresh() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_predict_emulated.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.skipif(
    not (REPO / "validation" / "measured_stepTimes.json").exists(),
    reason="the device measurements (validation/, the capture helper's) are not in this checkout",
)
def test_device_validation_doc_is_fresh() -> None:
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "validate_predict_emulated.py"),
            "--device",
            str(REPO / "validation"),
            "--held-out",
            "--check",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
