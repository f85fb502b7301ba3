"""The short fuzz run of CI: structure-aware mutants of real traces through every reader.

The same strategies and oracle as the documented campaign (``python -m fuzz.run``, see
fuzz/README.md), a few dozen cases per reader and a few folders of rank files (about 15 s in
all): every mutant is read, or
refused with ccdiag's one-line InputError; anything else fails the test with the plan that
built the mutant (hypothesis shrinks it). Nothing lost is checked too: a Kineto mutant that is
still valid JSON accounts for every event (read + skipped == len(traceEvents)).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from conftest import REPO
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(REPO))
from fuzz import mutations, oracle  # noqa: E402

CI = settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,  # the same cases on every CI run; the campaign explores new ones
    suppress_health_check=list(HealthCheck),
)


def _check(plan: mutations.Plan) -> None:
    with tempfile.TemporaryDirectory(prefix="ccdiag-fuzz-ci-") as tmp:
        # arrange
        case = mutations.build_case(plan, Path(tmp))
        # act / assert: returns "ok" or "input_error"; raises on a bug, naming the plan
        try:
            assert oracle.check(case, repeat=True) in ("ok", "input_error")
        except Exception as exc:
            raise AssertionError(f"{type(exc).__name__}: {exc}\nplan: {plan.describe()}") from exc


@CI
@given(plan=mutations.kineto_plan())
def test_kineto_mutants_are_read_or_refused_in_one_line(plan: mutations.Plan):
    _check(plan)


@settings(CI, max_examples=25)
@given(plan=mutations.sqlite_plan())
def test_nsys_sqlite_mutants_are_read_or_refused_in_one_line(plan: mutations.Plan):
    _check(plan)


@settings(CI, max_examples=25)
@given(plan=mutations.csv_plan())
def test_nsys_csv_mutants_are_read_or_refused_in_one_line(plan: mutations.Plan):
    _check(plan)


@settings(CI, max_examples=15)
@given(plan=mutations.folder_plan())
def test_folders_of_rank_files_are_read_or_refused_in_one_line(plan: mutations.Plan):
    _check(plan)
