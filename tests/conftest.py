"""Shared fixtures: where the real traces live."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Vendored copy of ../shared/traces and ../shared/external (MIT; licenses kept beside the files).
#: The nsys stats CSVs of hcc-ispass25 are stored gzip-compressed; nothing else was changed.
SHARED = REPO / "tests" / "data" / "shared"
SAMPLES = REPO / "sample_traces"


def shared_path(*parts: str) -> Path:
    """A path under the vendored shared data (fails loudly when missing)."""
    p = SHARED.joinpath(*parts)
    assert p.exists(), f"missing test data {p}"
    return p
