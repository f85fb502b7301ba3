"""The widened campaign's own machinery (``fuzz/hostile.py``): a few cases of every kind pass
their oracles, and the RSS oracle measures the child, not the campaign process."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from conftest import REPO

from ccdiag import limits

sys.path.insert(0, str(REPO))
from fuzz import hostile, shapes  # noqa: E402


def test_a_few_cases_of_every_kind_pass_their_oracles() -> None:
    seen: set[str] = set()
    for i in range(40):
        rec = hostile.one(18_000_000 + i, shape=False, timeout=30.0)
        assert rec["outcome"] in ("ok", "input_error"), rec
        seen.add(rec["kind"])
    assert seen == {"kineto", "csv", "sidecar", "folder", "special"}


def test_a_shape_case_goes_through_the_cli() -> None:
    rec = hostile.one(180003249, shape=True, timeout=30.0)  # campaign-hostile's case 3249
    assert rec["shape"] == "deep_nesting" and rec["U"] > 32 << 20
    assert rec["outcome"] == "input_error", rec
    assert rec["peak"] <= limits.MEMORY_BASE


def test_the_rss_oracle_reads_the_childs_own_peak(tmp_path: Path) -> None:
    # wait4's ru_maxrss carries this process's high-water mark into the child (fork + exec):
    # a confirmation run saw 461 MiB, the campaign process's, on every shape
    big = b"x" * (400 << 20)
    path = tmp_path / "trace.json"
    u = shapes.huge_tail(path, 1 << 20, random.Random(1))
    res = hostile.run_cli(path, {}, u)
    del big
    assert res["rc"] == 0, res["stderr"]
    assert res["peak"] < 300 << 20, f"{res['peak'] >> 20} MiB: not the child's own peak"
