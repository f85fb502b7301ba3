"""``ccdiag.ledger.align.match_calls`` gathers both sides' rows in the order of its sorted keys
(rank, idx, t_k) instead of sorting the ~40-column matched frame afterwards (2.2 s CPU on the
200 MB nsys pair). The result must be the frame the joins and the sort gave: checked against
that path (taken when a gather does not apply) on real pairs whose steps' call sequences are
the same (the Kineto and nsys samples: the nsys emulator's own ``cuStreamSynchronize`` after each
readback is part of the copy call since ``ccdiag.ledger.host.merge_copy_syncs``) and differ in
every step (``validation/tv_train_gpu``, TUNE: the emulator's padding kernel after each copy, so
every step goes through the sequence alignment)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ccdiag import api
from ccdiag.ledger import align
from ccdiag.ledger.context import PairContext
from ccdiag.pairing import pair_traces

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
DIFFERS = ROOT / "validation" / "tv_train_gpu"  # every step's calls differ (TUNE)


def _differing_pair() -> PairContext:
    b, t = (api.load_trace(DIFFERS / f"{s}.json.gz") for s in ("baseline", "treatment"))
    return PairContext(pair_traces(b, t))


@pytest.mark.parametrize(
    "pair, ext",
    [("decode_eager", ".json.gz"), ("decode_eager_nsys", ".sqlite"), ("tv_train_gpu", "")],
)
def test_gathered_matches_are_the_sorted_joins(
    pair: str, ext: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange
    if pair == "tv_train_gpu":
        ctx = _differing_pair()
    else:
        b, t = (api.load_trace(SAMPLES / pair / f"{s}{ext}") for s in ("baseline", "treatment"))
        ctx = PairContext(pair_traces(b, t))
    seqs = (ctx.seq_b, ctx.seq_t)
    # act
    fast = align.match_calls(ctx.calls_b, ctx.calls_t, ctx.pair.aligned, seqs)
    monkeypatch.setattr(align, "_in_step", lambda *_: None)  # the joins, then a sort
    slow = align.match_calls(ctx.calls_b, ctx.calls_t, ctx.pair.aligned, seqs)
    # assert: the same rows in the same order, every column equal
    assert fast.height > 1000
    assert fast.columns == slow.columns
    assert fast.equals(slow)
    keys = fast.select("rank", "idx", "t_k")
    assert keys.equals(keys.sort("rank", "idx", "t_k"))


def test_the_differing_pair_goes_through_the_alignment_in_every_step() -> None:
    # arrange
    ctx = _differing_pair()
    # act
    same, diff = align._pairs_equal(ctx.seq_b, ctx.seq_t)
    # assert: the case the gathers must order (keys from the aligned steps, unordered)
    assert same.height == 0 and diff.height == ctx.pair.aligned.height >= 9


def test_name_codes_give_the_string_alignment() -> None:
    """The sequences are compared and aligned as integer codes the two runs share; the matched
    calls must be those the names themselves give (every step of the pair differs)."""
    # arrange
    ctx = _differing_pair()
    cb, ct = align._name_codes(ctx.seq_b, ctx.seq_t)
    # act
    by_name = align._diff_pairs(align._pairs_equal(ctx.seq_b, ctx.seq_t)[1])
    by_code = align._diff_pairs(align._pairs_equal(cb, ct)[1])
    # assert: codes are equal exactly where names are, within and across the runs
    names = pl.concat([ctx.seq_b.get_column("bname"), ctx.seq_t.get_column("bname")])
    codes = pl.concat([cb.get_column("bname"), ct.get_column("bname")])
    pairs = pl.DataFrame({"n": names, "c": codes}).unique()
    assert pairs.height == names.n_unique() == codes.n_unique()
    order = ["rank", "idx", "b_k"]  # the group-by gives the steps in any order
    assert by_code.height > 1000 and by_code.sort(order).equals(by_name.sort(order))
