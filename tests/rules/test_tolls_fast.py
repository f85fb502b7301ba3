"""The launch-toll helpers' fast paths give what direct evaluation gives: :func:`path_tolls`
(the launches split by path in one ``partition_by``, not a filter per path), :func:`toll_removal`
(per-path and per-key constants read once per distinct value by ``vocab.per_value`` and gathered
back, the removed calls filtered on their own columns) and :func:`evidence` (the per-step medians
from one group-by, the launches' columns filtered once), on the shipped nsys pair and the CC-on
decode pairs, with and without the toll's side effect. The reference is the same code with
``per_value`` evaluating its expressions on every row (its contract: ``df.with_columns``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from ccdiag.rules import _tolls as tl

from ccdiag import api
from ccdiag.ledger.context import PairContext

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ["decode_eager_nsys", "decode_eager", "decode_graph"]


def _pair_ctx(name: str) -> PairContext:
    d = ROOT / "sample_traces" / name
    b, t = (
        next(p for p in sorted(d.iterdir()) if p.name.startswith(s))
        for s in ("baseline", "treatment")
    )
    return PairContext.of(api.load_pair(b, t))


def _run(ctx: PairContext, side_h: float) -> dict[str, Any]:
    host = tl.host_control(ctx, 3)
    tolls = tl.path_tolls(
        ctx.matched, ctx.gap_fit, ctx.seq_t, tl.MIN_TOLL_Z, host, tl.stretched(ctx)
    )
    # every path with a matched call as fired: each lookup and filter sees rows on and off them
    fired = [t for t in tolls if t.matched] or tolls
    removal, per, taken = tl.toll_removal(ctx.seq_t, fired, ctx.gap_fit, side_h, ctx.matched)
    lb, lt = tl.launch_calls(ctx)
    ev = tl.evidence(lb, lt, tolls, fired, ctx.gap_fit) if lb.height and lt.height else None
    return {
        "tolls": tolls, "calls": removal.calls, "per": per.sort("rank", "idx"),
        "taken": taken, "ev": ev,
    }  # fmt: skip


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("side_h", [0.0, 0.3])
def test_fast_paths_are_the_code_they_replace(
    name: str, side_h: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange
    ctx = _pair_ctx(name)
    # act
    fast = _run(ctx, side_h)
    monkeypatch.setattr(
        tl.vc, "per_value", lambda df, col, exprs, codes=None: df.with_columns(**exprs)
    )
    slow = _run(ctx, side_h)
    # assert
    assert fast["tolls"] == slow["tolls"]
    for k in ("calls", "per"):
        assert fast[k].schema == slow[k].schema
        assert fast[k].equals(slow[k]), k
    # a float sum per path (a group-by) may differ in its last bits run to run
    assert fast["taken"] == pytest.approx(slow["taken"], rel=1e-12)
    assert fast["ev"] == slow["ev"]


def test_evidence_medians_on_a_frame_of_rows() -> None:
    # arrange: launches of two ranks' steps, some graph launches, a step of one launch
    lt = pl.DataFrame(
        {
            "rank": [0, 0, 0, 0, 1, 1, 1], "step": [1, 1, 2, 2, 1, 1, 3],
            "_kl": [True, False, True, True, True, True, False],
            "_graph": [False, False, True, False, False, True, False],
        }
    )  # fmt: skip
    # act
    got = tl._per_step(lt)
    # assert
    from ccdiag.ledger import stats

    assert got == {
        "n": stats.per_step_median(lt, pl.col("_kl").sum()),
        "graphs": stats.per_step_median(lt, pl.col("_graph").sum()),
        "all": stats.per_step_median(lt, pl.len()),
    }


def test_evidence_medians_of_an_empty_side_are_zero_as_before() -> None:
    empty = pl.DataFrame(
        schema={"rank": pl.Int32, "step": pl.Int32, "_kl": pl.Boolean, "_graph": pl.Boolean}
    )
    from ccdiag.ledger import stats

    assert tl._per_step(empty) == {"n": 0.0, "graphs": 0.0, "all": 0.0}
    assert stats.per_step_median(empty, pl.len()) == 0.0


@pytest.mark.parametrize("name", PAIRS)
def test_launches_split_by_path_in_one_pass_are_the_filters_per_path(name: str) -> None:
    ctx = _pair_ctx(name)
    launches = ctx.matched.filter(pl.col("cls") == "launch")
    by_path = launches.partition_by("path", as_dict=True, maintain_order=True)
    for path in launches["path"].drop_nulls().unique().to_list():
        assert by_path[(path,)].equals(launches.filter(pl.col("path") == path))
