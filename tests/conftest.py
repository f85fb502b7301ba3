"""Shared fixtures: where the real traces live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLES = REPO / "sample_traces"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, skipping the test when that folder is not checked out."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"../shared/{'/'.join(parts)} not available")
    return p
