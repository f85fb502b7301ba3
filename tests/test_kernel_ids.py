"""The call sequences key a launch by its path and a short kernel id, not by the kernel's name
(``ccdiag.ledger.align.kernel_ids``): a 405 MiB nsys pair carried 1.3 M keys of ~260 bytes per
side (``seq_b`` alone 1.1 GB); the ids keep the names' sorted order, so the gap model's keys
sort as before, and reports show the names (``GapModel.label``)."""

from __future__ import annotations

from pathlib import Path

from ccdiag import api
from ccdiag.ledger.align import kernel_ids
from ccdiag.ledger.context import PairContext
from ccdiag.pairing import pair_traces

PAIR = Path(__file__).resolve().parents[1] / "sample_traces" / "decode_eager_nsys"


def _ctx() -> PairContext:
    b, t = (api.load_trace(PAIR / f"{s}.sqlite") for s in ("baseline", "treatment"))
    return PairContext(pair_traces(b, t))


def test_ids_keep_the_names_order_and_map_back() -> None:
    # arrange
    ctx = _ctx()
    names = sorted(kernel_ids(ctx.calls_b, ctx.calls_t))
    # act
    ids = ctx.kernel_ids
    g = ctx.gap_fit
    # assert: ids sort like the names, one per name, and every fine key reads as its kernel
    assert [ids[n] for n in names] == sorted(ids.values())
    assert len(set(ids.values())) == len(ids)
    fine = [k for k in g.before if ":" in k]
    assert fine and all(g.label(k).split(":", 1)[1] in ids for k in fine)
    assert all(g.label(k).split(":", 1)[0] == k.split(":", 1)[0] for k in fine)


def test_sequence_keys_are_short() -> None:
    # act
    ctx = _ctx()
    keys = ctx.seq_t["key"]
    # assert: path + ':' + a few digits, whatever the kernel's name
    assert keys.str.len_bytes().max() <= len("memset_copy:") + 6
    assert ctx.seq_t["gname"].str.len_bytes().max() > 100  # the names themselves are long
