"""``units.listed``: the one way a one-line message shows a long list (ranks, step names, rank
files): the first k items and how many more."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccdiag import distributed
from ccdiag.errors import InputError
from ccdiag.units import listed


def test_listed() -> None:
    assert listed([]) == ""
    assert listed([1, 2, 3]) == "1, 2, 3"
    assert listed([1, 2, 3, 4, 5], 2) == "1, 2 and 3 more"
    assert listed(["'a'"], 1) == "'a'"


def test_rank_file_mismatch_names_the_files(tmp_path: Path) -> None:
    b, t = tmp_path / "b", tmp_path / "t"
    b.mkdir(), t.mkdir()
    files_b = [(r, b / f"rank{r}.json") for r in range(5)]
    files_t = [(r, t / f"rank{r}.json") for r in range(2)]
    with pytest.raises(InputError) as e:
        distributed._match_ranks(files_b, files_t, b, t)
    assert "(rank0.json, rank1.json, rank2.json and 2 more vs rank0.json, rank1.json)" in str(
        e.value
    )
