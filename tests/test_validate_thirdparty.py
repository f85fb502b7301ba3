"""docs/validation_thirdparty.md is what scripts/validate_thirdparty.py writes today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_third_party_injection_table_is_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_thirdparty.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
