"""The launch toll's removal should take no more than the matched calls and gaps grew (a known miss).

LA01 fits a constant per neighbour key (the gap before a launch of kernel k after a call of
class c) from the two runs' matched gaps and removes it from the treatment. Where the two runs'
gaps hardly correlate, the fit's constant is the gaps' level, not a toll: nsys-ai's
``mfu_2gpu`` pair (two 0.3 s windows of a 2-GPU training run, before and after a code fix, no
CC at all) had LA01 "pay" 82.5 ms/step (runtime launches 40.4 µs each) out of matched calls
and gaps that grew 35 ms/step between the runs. A mechanism is measured from what the trace
shows, so its removal should be bounded by the growth of the calls and gaps it takes from.

Tried on 2026-12-05 and not adopted: capping the removal per aligned step at the matched calls'
and gaps' growth (net, or each row's growth clipped at zero) brings this pair to 35 / 45 ms/step,
but costs the truth matrix (all sixteen opened sets) 5 / 1 absolute, 7 / 3 share and 12 / 1
unattributed verdicts: in the emulated serving pairs the removal's rows grew less than the
injected toll (``serve_eager_async``: 1.63 ms paid for 1.49 injected became 0.89 / 1.20 ms),
since a slower host lets waits elsewhere, even inside launch calls, shrink.
"""

from __future__ import annotations

import polars as pl
import pytest

from ccdiag import api
from ccdiag.engine import diagnose_pair
from ccdiag.ledger.context import PairContext
from ccdiag.pairing import pair_traces
from tests.conftest import shared_path


@pytest.mark.xfail(
    strict=True,
    reason="a miss, not a pass (2026-12-05): LA01 pays 82.5 ms/step on a non-CC pair whose "
    "matched launches, their gaps before and after grew 79.7 ms/step (each clipped at zero; "
    "35 ms net); the cap that would bound it costs the truth matrix more than it mends",
)
def test_a_noisy_pair_pays_no_more_toll_than_its_matched_calls_grew() -> None:
    d = ("external", "nsys-ai", "tests", "fixtures")
    pair = pair_traces(
        api.load_trace(shared_path(*d, "mfu_2gpu_before.sqlite")),
        api.load_trace(shared_path(*d, "mfu_2gpu_after.sqlite")),
    )
    ctx = PairContext(pair)
    steps = max(ctx.ledger.height, 1)
    launches = ctx.matched.filter(pl.col("cls") == "launch")
    # the matched launches' own growth plus that of the gaps around them (before, and the gap
    # after, which is the next call's gap before): an upper bound of what a per-launch cost can
    # take from the calls the removal touches
    grew = launches.select(
        pl.col("d_dur").clip(lower_bound=0).sum()
        + pl.col("d_gap").clip(lower_bound=0).sum()
        + pl.col("d_gap_after").clip(lower_bound=0).sum()
    ).item()
    r = diagnose_pair(pair)
    toll = next(a for a in r.attribution if a.mechanism == "launch_toll")
    assert toll.paid_ns_per_step <= grew / steps
    # and the report's verdict says the delta is noise, so nothing is a finding
    assert "no significant slowdown" in r.verdict
