"""The layers stay visible: import-linter contracts checked on an installed (non-editable) copy.

import-linter cannot follow the editable install's package-dir mapping (``parsers/`` installed as
``ccdiag.parsers``), so the test installs the project into a temporary folder and lints that.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    """The ``lint-imports`` of the interpreter running the tests (the venv's), else PATH's."""
    here = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    found = here or shutil.which("lint-imports")
    # a missing tool fails the test instead of skipping it: CI must check the layers
    assert found, "lint-imports not found: install the dev extra (pip install -e '.[dev]')"
    return found


def test_import_contracts_hold(tmp_path: Path) -> None:
    # arrange: a plain install of the package, as users get it
    lint = _lint_imports()
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--target",
            str(target),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    # act
    proc = subprocess.run(
        [lint, "--config", str(REPO / "pyproject.toml")],
        cwd=tmp_path,
        env={
            "PYTHONPATH": str(target),
            "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
    )
    # assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_every_rule_module_is_in_the_independence_contract() -> None:
    rules = sorted(p.stem for p in (REPO / "rules").glob("[!_]*.py"))
    contract = (REPO / "pyproject.toml").read_text()
    for name in rules:
        assert f'"ccdiag.rules.{name}"' in contract, f"rules/{name}.py missing from the contract"
