"""Traces cut out of a running process: the first call is not the context's creation.

Without step markers the whole trace is one step, and in a whole-program trace the process's
first CUDA runtime call creates the context lazily, whatever its name, so the ledger calls it
``setup``. A window cut out of a long run (nsys-ai's ``mfu_2gpu`` fixtures: 0.3 s of a 2-GPU
training capture) starts with an ordinary call: rank 1's first is a 14 µs ``cudaMemcpyAsync``.
With the copies made blocking and tolled (the replay model as the emulator), that copy's growth
was reported as ``one_time_setup``, 89 % of the delta, a mechanism nobody injected. The first
call is taken for the context's creation only when it lasts as long as one can
(``ccdiag.apis.CONTEXT_CALL_NS``, 50 ms; ``ccdiag predict`` uses the same bound).
"""

from __future__ import annotations

from ccdiag import api
from ccdiag.engine import diagnose_pair
from ccdiag.pairing import pair_traces
from ccdiag.replay import Injection, synthesize
from ccdiag.schema import Trace
from tests.conftest import shared_path


def _synthetic(trace: Trace, injection: Injection) -> Trace:
    return synthesize(trace, injection, queue_aware=True)


def test_a_window_of_a_running_process_has_no_context_creation_to_blame() -> None:
    b = api.load_trace(
        shared_path("external", "nsys-ai", "tests", "fixtures", "mfu_2gpu_before.sqlite")
    )
    copies = Injection(copies_blocking=True, copy_toll_ns=35_000, copy_gbps=9.6)
    r = diagnose_pair(pair_traces(_synthetic(b, Injection()), _synthetic(b, copies)))
    assert r.whole_program
    setup = [a for a in r.attribution if a.mechanism == "one_time_setup"]
    assert not setup or abs(setup[0].share) < 0.03
