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


def test_same_form_rows_are_judged_from_their_declared_set_on() -> None:
    import validate_predict_emulated as vpe

    # arrange: a row of a pair that injected two mechanisms, its Shapley truth resolved
    row = {
        "pair": "p_both",
        "split": "HELD-OUT-42",
        "mechanism": "blocked_non_blocking",
        "pred": 2.2e6,
        "truth": 3.1e6,
        "ci": [-1e5, 6e6],
        "judged": False,
        "modelled": True,
        "form": "shapley",
        "same": 2.2e6,
        "same_truth": 4.2e6,
        "same_ci": [3.5e6, 5.8e6],
        "same_judged": True,
    }
    # act
    verdict = vpe._mech_verdict(row, "same_")
    why = vpe._why_mech([row, {**row, "split": "HELD-OUT-41"}])
    # assert: the same-form column has its own truth; only the declared sets list its misses
    assert verdict == ("-48 %", "**no**")
    assert vpe._mech_verdict(row) == ("-", "noise")
    assert [w for w in why if "same form" in w] == [
        "- `p_both` blocked_non_blocking, same form (Shapley, -48 %): not explained."
    ]
    assert [vpe._held_out_number(s) for s in ("HELD-OUT", "HELD-OUT-42", "TUNE")] == [1, 42, 0]
