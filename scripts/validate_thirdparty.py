"""Known costs injected into third-party traces: does the attribution take them back out?

    python scripts/validate_thirdparty.py            # write docs/validation_thirdparty.md
    python scripts/validate_thirdparty.py --check    # exit 1 if it would change
    python scripts/validate_thirdparty.py --no-write # print only

The truth matrix (``validation/``) holds our own captures: the workloads we chose, run under our
emulator. Here the workloads are other people's (Meta's HTA test traces, AMD's TraceLens H100 and
B200 traces, nsys-ai's 2-GPU Nsight Systems windows; ``tests/data/shared/external/``), and the
costs are put in by ccdiag's replay model (``ccdiag.replay.replay``), so the truth is exact: the
pair's whole delta is the injected mechanisms'. Two emulators lay the costs out:

- **queue-aware**: the model the attribution itself replays with (a GPU row queued behind its
  stream keeps the gap it had); the costs placed inside the launch calls ("call") or in the gap
  before them ("gap"), and copies made blocking with a 35 µs toll at 9.6 GB/s ("copies");
- **packed**: ``ccdiag.replay.synthesize`` (GPU rows packed behind their stream: a different
  timeline from the same costs, as another emulator would lay them out).

Criteria (issue #12's): the injected mechanism's share of the delta within ±15 % of 100 %
(copies: CP01 + CP02 together, their Shapley split has no independent truth here), every
mechanism not injected < 3 %, unattributed ≤ 10 %. What it cannot judge: real CC's side effects
on the host, which no replay injects (the device matrix does). Not held out: two of these traces
found the bugs fixed in ``00eb0da`` and ``86edcd8`` (the rows say which).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ccdiag import api
from ccdiag.engine import diagnose_pair
from ccdiag.pairing import pair_traces
from ccdiag.replay import Injection, synthesize
from ccdiag.schema import Trace
from ccdiag.units import duration

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "tests" / "data" / "shared" / "external"
DOC = ROOT / "docs" / "validation_thirdparty.md"
HTA = "HolisticTraceAnalysis/tests/data"
#: (label, path under EXT, what it is)
TRACES = (
    ("hta_trace_diff_test", f"{HTA}/trace_diff/test/test.json.gz",
     "V100 DDP rank, fbgemm on a side stream, CUDA graphs (found the anchor bug, 00eb0da)"),
    ("hta_trace_diff_control", f"{HTA}/trace_diff/control/control.json.gz",
     "A100 DDP rank 3 of 8, NCCL"),
    ("hta_negative_queue", f"{HTA}/negative_queue_length_values_check/rank0.json.gz",
     "A100 rank 0 of 16, Triton kernels in CUDA graphs, autograd thread"),
    ("hta_nccl_parser", f"{HTA}/nccl_parser_config/nccl_data.json.gz",
     "A100 rank 0 of 2, all-reduce and broadcast"),
    ("hta_ns_resolution", f"{HTA}/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
     "V100, ns timestamps"),
    ("tracelens_b200_eager", "TraceLens/tests/traces/b200/eager_trace.json.gz",
     "B200 eager inference, one step"),
    ("tracelens_h100_qwen", "TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
     "H100 Qwen1.5-0.5B, one step"),
    ("nsysai_mfu_before", "nsys-ai/tests/fixtures/mfu_2gpu_before.sqlite",
     "nsys, 0.3 s window of a 2-GPU training run (found the setup bug, 86edcd8)"),
    ("nsysai_h100_2gpu", "nsys-ai/tests/fixtures/h100_2gpu_1s.sqlite",
     "nsys, 1 s window of a 2-GPU video-diffusion inference"),
)  # fmt: skip
TOLL = 12_000
COPIES = {"copies_blocking": True, "copy_toll_ns": 35_000, "copy_gbps": 9.6}
#: (label, injection, mechanisms injected)
CASES = (
    ("toll in call", Injection(launch_toll_ns=TOLL), ("launch_toll",)),
    ("toll in gap", Injection(launch_toll_ns=TOLL, launch_toll_in_gap=True), ("launch_toll",)),
    ("copies", Injection(**COPIES), ("serialized_copies", "blocked_non_blocking")),
)


@dataclass
class Row:
    trace: str
    emulator: str
    case: str
    delta_ns: int
    injected: float  # share of the delta, the injected mechanisms together
    others: dict[str, float]
    unattributed: float
    error: str = ""

    def verdict(self) -> str:
        if self.error:
            return "error"
        if abs(self.delta_ns) < 1_000:
            return "no delta"
        if self.delta_ns < 0:  # costs only add time: the emulator's own fault, not judged
            return "emulator faster"
        ok = abs(self.injected - 1.0) <= 0.15 and all(abs(v) < 0.03 for v in self.others.values())
        return "yes" if ok and abs(self.unattributed) <= 0.10 else "no"


def _emulate(trace: Trace, inj: Injection, queue_aware: bool) -> Trace:
    return synthesize(trace, inj, queue_aware=queue_aware)


def collect() -> list[Row]:
    rows = []
    for label, rel, _ in TRACES:
        trace = api.load_trace(EXT / rel)
        for emulator, qa in (("queue-aware", True), ("packed", False)):
            base = _emulate(trace, Injection(), qa)
            for case, inj, mechs in CASES:
                try:
                    r = diagnose_pair(pair_traces(base, _emulate(trace, inj, qa)))
                except Exception as exc:  # noqa: BLE001 - a row that says why, not a stop
                    rows.append(Row(label, emulator, case, 0, 0.0, {}, 0.0, type(exc).__name__))
                    continue
                share = {a.mechanism: a.share for a in r.attribution}
                inj_share = sum(share.get(m, 0.0) for m in mechs)
                others = {m: s for m, s in share.items() if m not in mechs and abs(s) >= 0.005}
                rows.append(
                    Row(label, emulator, case, r.step_ns.delta, inj_share, others,
                        r.unattributed_share)
                )  # fmt: skip
    return rows


def render(rows: list[Row]) -> str:
    out = [
        "# Known costs injected into third-party traces",
        "",
        "Generated by `scripts/validate_thirdparty.py` (do not edit by hand); what it does and what "
        "it cannot judge: its docstring. The truth of every row is exact: the pair's whole delta "
        "is the injected mechanisms'. *injected*: their share of the delta in ccdiag's partition "
        "(copies: CP01 + CP02 together); *others*: mechanisms ccdiag reported that were not "
        "injected (≥ 0.5 %); *ok*: injected within ±15 % of 100 %, others < 3 %, unattributed "
        "≤ 10 %.",
        "",
        "| trace | what it is |",
        "|---|---|",
        *(f"| `{lab}` | {what} |" for lab, _, what in TRACES),
        "",
        "| trace | emulator | injected | delta / step | injected share | others | unattributed | ok |",
        "|---|---|---|---:|---:|---|---:|:-:|",
    ]
    for r in rows:
        others = ", ".join(f"{m} {s:.0%}" for m, s in r.others.items()) or "-"
        if r.error:
            out.append(
                f"| `{r.trace}` | {r.emulator} | {r.case} | error: {r.error} | | | | error |"
            )
            continue
        out.append(
            f"| `{r.trace}` | {r.emulator} | {r.case} | {duration(r.delta_ns)} | "
            f"{r.injected:.0%} | {others} | {r.unattributed:.1%} | {r.verdict()} |"
        )
    judged = [r for r in rows if r.verdict() in ("yes", "no")]
    ok = sum(r.verdict() == "yes" for r in judged)
    by = {}
    for em in ("queue-aware", "packed"):
        sel = [r for r in judged if r.emulator == em]
        by[em] = f"{sum(r.verdict() == 'yes' for r in sel)} of {len(sel)}"
    out += [
        "",
        f"**Score:** {ok} of {len(judged)} pairs meet all three criteria (queue-aware "
        f"{by['queue-aware']}, packed {by['packed']}); "
        f"{sum(r.verdict() == 'no delta' for r in rows)} injections changed nothing (no copy "
        f"to make blocking); {sum(r.verdict() == 'emulator faster' for r in rows)} made the "
        "emulated run faster, the replay's fault, not judged (`hta_negative_queue`'s copies: "
        "cross-stream waits anchored to rows launched after the next blocking call, a strict "
        "xfail in `tests/test_cross_stream_deps.py`).",
        "",
        "Why the misses of 2026-12-05 miss (the table has their numbers): `hta_trace_diff_test` "
        "under the packed emulator: the packed timeline's GPU rows keep no queue gaps, the "
        "attribution's replay does, so taking the exact toll back out does not give the packed "
        "baseline back; `nsysai_mfu_before`'s copies: the window starts with a copy queued "
        "behind 9.4 ms of work issued before the window, which blocking makes the first call "
        "wait for, and the replay of the treatment without its blocking gives back a third of "
        "the delta; `hta_negative_queue`'s copies under the packed emulator: not investigated.",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    doc = render(collect())
    if args.no_write:
        print(doc)
        return 0
    if args.check:
        stale = not DOC.exists() or DOC.read_text() != doc
        if stale:
            print(f"stale: {DOC.relative_to(ROOT)} (run python scripts/validate_thirdparty.py)")
        return 1 if stale else 0
    DOC.write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
