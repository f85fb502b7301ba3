"""Paired traces with known truth: baseline (CC off) and emulated CC (treatment) in one process.

    python -m ccdiag.emulate.pairs WORKLOAD --out DIR --platform b200 --mechanisms launch,copy

runs the workload under the LD_PRELOAD shim (re-executing itself with it when needed) through
interleaved phases that differ only in which emulated mechanisms are on:

    round r:  baseline (none) | treatment (all) | only_<m> for each mechanism m

Every phase is profiled the same way (torch.profiler, same schedule), so profiler overhead is the
same in all of them. Round 0's baseline and treatment traces are kept as the pair; all rounds give
step times. ``ground_truth.json`` records, per mechanism id:

- ``injected_ns_per_step``: what the shim injected in the treatment steps (exact counters);
- ``impact_ns_per_step``: median step time with only that mechanism on minus the baseline median,
  with a bootstrap 95 % interval — the mechanism's measured effect on the step, which is what
  ccdiag's attribution is judged against (injected time the GPU hides has no impact).

Mechanism names: launch -> launch_toll, copy_pad -> serialized_copies, copy_sync ->
blocked_non_blocking, collective -> encrypted_collectives ("copy" = copy_pad + copy_sync),
cpu -> host_slowdown: a CPU-bound neighbour process on the core that runs the workload's main
thread (nice ``$CCDIAG_EMU_CPU_NICE``, default 5: the main thread keeps ~3/4 of the core), a
stand-in for host code running slower in the confidential VM — not a calibrated TDX model.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

MECH_IDS = {
    "launch": "launch_toll",
    "copy_pad": "serialized_copies",
    "copy_sync": "blocked_non_blocking",
    "collective": "encrypted_collectives",
    "cpu": "host_slowdown",
}
#: Mechanisms the driver injects itself, not the LD_PRELOAD shim.
NOT_SHIM = ("collective", "cpu")


class CpuNeighbour:
    """A busy-looping process pinned to the main thread's core, paused unless ``on``.

    ``CCDIAG_EMU_CPU_NICE``: its nice value (default 5). ``CCDIAG_EMU_CPU_DUTY=BUSY/PERIOD``
    (ms, e.g. ``1/4``): it spins BUSY ms then sleeps the rest of each PERIOD (a waking sleeper
    preempts the main thread), instead of spinning all the time.
    """

    def __init__(self) -> None:
        import signal
        import subprocess

        self._signal = signal
        self.core = max(os.sched_getaffinity(0))
        self.nice = int(os.environ.get("CCDIAG_EMU_CPU_NICE", "5"))
        os.sched_setaffinity(0, {self.core})  # the main thread (and threads started later)
        code = f"import os, time\nos.sched_setaffinity(0, {{{self.core}}})\nos.nice({self.nice})\n"
        duty = os.environ.get("CCDIAG_EMU_CPU_DUTY", "")
        if duty:
            busy, period = (float(x) / 1e3 for x in duty.split("/"))
            code += (
                "while True:\n    t0 = time.perf_counter()\n"
                f"    while time.perf_counter() - t0 < {busy}: pass\n"
                f"    time.sleep({max(period - busy, 0.0)})\n"
            )
        else:
            code += "while True: pass"
        self.proc = subprocess.Popen([sys.executable, "-c", code])
        self.proc.send_signal(signal.SIGSTOP)
        self.running = False
        import atexit

        atexit.register(self.close)

    def set(self, on: bool) -> None:
        if on != self.running:
            self.proc.send_signal(self._signal.SIGCONT if on else self._signal.SIGSTOP)
            self.running = on
            time.sleep(0.01)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


_NEIGHBOUR: CpuNeighbour | None = None
#: The single-session run's phases and their per-step shim counters (for the truth file).
_PHASES: list[tuple[str, list[str]]] = []
_PHASE_COUNTERS: dict[str, list[dict]] = {}


def set_driver_mechanisms(wl: Any, mechs: list[str]) -> None:
    """The non-shim mechanisms of a phase: throttled collectives, the CPU neighbour."""
    if hasattr(wl, "collective_on"):
        wl.collective_on = "collective" in mechs
    if _NEIGHBOUR is not None:
        _NEIGHBOUR.set("cpu" in mechs)


def expand(mechanisms: list[str]) -> list[str]:
    """Split ``copy`` into its two parts; keep order; drop duplicates."""
    out: list[str] = []
    for m in mechanisms:
        for part in ["copy_pad", "copy_sync"] if m == "copy" else [m]:
            if part not in MECH_IDS:
                raise SystemExit(
                    f"unknown mechanism {part!r}; choose from launch, copy, collective, cpu"
                )
            if part not in out:
                out.append(part)
    return out


def spread(values: list[int], seed: int = 0) -> dict[str, Any]:
    """Median, p10, p90 and a bootstrap 95 % CI of the median."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        return {"n": 0}
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(v, k=n)) for _ in range(1000))
    return {
        "n": n,
        "median": int(statistics.median(v)),
        "p10": int(v[int(0.1 * (n - 1))]),
        "p90": int(v[int(0.9 * (n - 1))]),
        "ci95": [int(meds[25]), int(meds[974])],
    }


def diff_spread(a: list[int], b: list[int], seed: int = 0) -> dict[str, Any]:
    """median(b) - median(a) with a bootstrap 95 % CI."""
    rng = random.Random(seed)
    boots = sorted(
        statistics.median(rng.choices(b, k=len(b))) - statistics.median(rng.choices(a, k=len(a)))
        for _ in range(1000)
    )
    return {
        "value": int(statistics.median(b) - statistics.median(a)),
        "ci95": [int(boots[25]), int(boots[974])],
    }


def _ensure_shim(argv: list[str]) -> None:
    """Re-exec this process with the shim preloaded, unless it already is."""
    from ccdiag.emulate.shim import ShimControl, build_shim

    if ShimControl.loaded():
        return
    shim = build_shim(driver_layer=os.environ.get("CCDIAG_EMU_LAYER") == "driver")
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{shim}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(shim)
    os.execve(
        sys.executable,
        [sys.executable, "-X", "faulthandler", "-m", "ccdiag.emulate.pairs", *argv],
        env,
    )


def _init_dist() -> tuple[int, int]:
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    return rank, dist.get_world_size()


def run_phase(
    wl: Any,
    ctl: Any,
    mechs: list[str],
    out: Path | None,
    label: str,
    args: argparse.Namespace,
    rank: int,
    world: int,
    cpu_only: bool = False,
) -> tuple[list[int], list[dict]]:
    """Run warmup + profiled steps with these mechanisms on; return step ns and shim step counters."""
    import torch

    from ccdiag.profiling import Capture

    ctl.set_mechanisms([m for m in mechs if m not in NOT_SHIM])
    set_driver_mechanisms(wl, mechs)
    if world > 1:
        torch.distributed.barrier()
    if hasattr(wl, "block_boundary"):  # loops without a per-step sync start each phase empty
        wl.block_boundary()
    if args.backend == "none":  # timing only, no profiler at all
        first = ctl.current_step() + args.warmup
        plain: list[int] = []
        for i in range(args.warmup + args.steps):
            t0 = time.perf_counter_ns()
            wl.step(i)
            if i >= args.warmup:
                plain.append(time.perf_counter_ns() - t0)
            ctl.mark_step()
        return plain, ctl.counters()["steps"][first : first + args.steps]
    gc.collect()  # no collector pauses inside the measured steps
    cap = Capture(
        out or Path("/tmp/ccdiag-discard"),
        label,
        steps=args.steps,
        warmup=args.warmup,
        cpu_only=cpu_only,
        rank=rank if world > 1 else None,
        mode=args.backend,
    )
    if out is None:
        cap._export = lambda prof: None  # type: ignore[method-assign]  # ablation: times only
    first_counter_step = ctl.current_step() + args.warmup
    times: list[int] = []
    with cap:
        for i in range(cap.total_steps):
            t0 = time.perf_counter_ns()
            wl.step(i)
            t1 = time.perf_counter_ns()
            if i >= args.warmup:
                times.append(t1 - t0)
            cap.step()
    counters = ctl.counters()["steps"][first_counter_step : first_counter_step + args.steps]
    return times, counters


def run_session(
    wl: Any,
    ctl: Any,
    phases: list[tuple[str, list[str]]],
    out: Path,
    args: argparse.Namespace,
    rank: int,
    world: int,
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[dict]]]:
    """All phases in ONE profiler session, in blocks of ``--block-steps`` steps, then split.

    Round 0 runs the phases in the given order, later rounds shuffled. Returns per-phase step
    times, per-phase per-block medians, and per-phase shim counters; writes ``<phase>.json.gz``
    (``.rank<r>`` when distributed) for the baseline and treatment phases.
    """
    import torch

    from ccdiag.emulate.split import split_trace
    from ccdiag.profiling import Capture, scrub_trace_file

    order = random.Random(1234)
    blocks: list[tuple[str, list[str]]] = []
    for r in range(args.rounds):
        blocks += phases if r == 0 else order.sample(phases, len(phases))
    per = args.settle_steps + args.block_steps  # steps per block, the first ones not timed
    n = len(blocks) * per
    tmp = out / (f".session.rank{rank}" if world > 1 else ".session")
    tmp.mkdir(parents=True, exist_ok=True)
    if args.backend == "none":  # the same interleaved protocol, no profiler at all
        cap: Any = _NoCapture(n + args.warmup, ctl)
    else:
        cap = Capture(
            tmp,
            "session",
            steps=n,
            warmup=args.warmup,
            rank=rank if world > 1 else None,
            record_shapes=not args.no_record_shapes,
        )
    times: dict[str, list[int]] = {name: [] for name, _ in phases}
    per_block: dict[str, list[int]] = {name: [] for name, _ in phases}
    counters: dict[str, list[dict]] = {name: [] for name, _ in phases}
    step_of: dict[str, list[int]] = {name: [] for name, _ in phases}
    first = ctl.current_step()
    gc.collect()
    with cap:
        for i in range(cap.total_steps):
            k = i - args.warmup
            name, mechs = blocks[k // per] if k >= 0 else ("warmup", [])
            timed = k >= 0 and k % per >= args.settle_steps
            if k < 0 or k % per == 0:
                if hasattr(wl, "block_boundary"):  # loops without a per-step sync start empty
                    wl.block_boundary()
                ctl.set_mechanisms([m for m in mechs if m not in NOT_SHIM])
                set_driver_mechanisms(wl, mechs)
                if world > 1:
                    torch.distributed.barrier()
            t0 = time.perf_counter_ns()
            wl.step(i)
            t1 = time.perf_counter_ns()
            if timed:
                times[name].append(t1 - t0)
                step_of[name].append(i)  # ProfilerStep#i
                if (k + 1) % per == 0:
                    per_block[name].append(int(statistics.median(times[name][-args.block_steps :])))
            cap.step()
    all_counters = ctl.counters()["steps"]
    for name in step_of:
        counters[name] = [all_counters[first + i] for i in step_of[name]]
    if args.backend == "none":
        tmp.rmdir()
        return times, per_block, counters
    suffix = f".rank{rank}" if world > 1 else ""
    shipped = [name for name in ship_names(args) if name in step_of]
    cut = args.ship_steps or None
    keep = {f"{name}{suffix}": step_of[name][:cut] for name in shipped}
    assert cap.trace_path is not None
    from ccdiag.emulate.split import strip_step_markers

    for path in split_trace(cap.trace_path, keep, out).values():
        if args.strip_step_markers:
            strip_step_markers(path)
        scrub_trace_file(path)
    meta = json.loads((tmp / f"session{suffix}.meta.json").read_text())
    meta.pop("emulator_counters", None)
    for name in shipped:
        m = dict(
            meta,
            label=name,
            profiled_steps=len(keep[f"{name}{suffix}"]),
            profiler_steps=keep[f"{name}{suffix}"],
            step_markers="none (ProfilerStep events removed)"
            if args.strip_step_markers
            else "ProfilerStep",
            trace=f"{name}{suffix}.json.gz",
            emulated_shim_mechanisms=[x for x in dict(phases)[name] if x not in NOT_SHIM],
            placement=placement(),
            session="one profiler session, steps of every phase interleaved in blocks",
        )
        (out / f"{name}{suffix}.meta.json").write_text(json.dumps(m, indent=2) + "\n")
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    return times, per_block, counters


class _NoCapture:
    """Stands in for a profiler Capture in the timing-only single session (marks shim steps)."""

    def __init__(self, total: int, ctl: Any) -> None:
        self.total_steps, self._ctl = total, ctl

    def __enter__(self) -> _NoCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def step(self) -> None:
        self._ctl.mark_step()


def injected(counters: list[dict], mech: str) -> int:
    """Median per-step injected ns of one shim mechanism."""
    key = {
        "launch": lambda s: s["launch_ns"] + s["graph_ns"],
        "copy_pad": lambda s: s["copy_pad_ns"] + s.get("copy_pad_gpu_ns", 0),
        "copy_sync": lambda s: s["copy_wait_ns"],
    }.get(mech)
    if key is None or not counters:
        return 0
    return int(statistics.median(key(s) for s in counters))


def _counter_medians(counters: list[dict]) -> dict[str, int]:
    """Median per step of each shim counter (launches tolled, copies, bytes, injected ns)."""
    if not counters:
        return {}
    keys = [k for k in counters[0] if k != "step"]
    return {k: int(statistics.median(c.get(k, 0) for c in counters)) for k in keys}


def ship_names(args: argparse.Namespace) -> list[str]:
    """Phases whose traces are written (default: baseline and treatment)."""
    return [x for x in (args.ship or "baseline,treatment").split(",") if x]


def placement() -> dict[str, str]:
    """Where the shim puts each cost this run (from its environment)."""
    return {
        "launch_toll": "gap_after"
        if os.environ.get("CCDIAG_EMU_TOLL_AT") == "after"
        else "gap_before",
        "copy_pad": "gpu_delay_kernel"
        if os.environ.get("CCDIAG_EMU_COPY_PAD_AT") == "gpu"
        else "host_after_copy",
        "copy_sync": "host_after_copy (stream sync inside the interposed copy call)",
    }


def subset_phases(mechs: list[str]) -> list[tuple[str, list[str]]]:
    """Every proper non-empty subset of the mechanisms as a phase (only_<m>, on_<a>+<b>)."""
    import itertools

    out = []
    for r in range(1, len(mechs)):
        for sub in itertools.combinations(mechs, r):
            name = f"only_{sub[0]}" if r == 1 else "on_" + "+".join(sub)
            out.append((name, list(sub)))
    return out


def shapley(
    times: dict[str, list[int]],
    phases: list[tuple[str, list[str]]],
    mechs: list[str],
    seed: int = 0,
) -> dict[str, Any] | None:
    """Shapley values of the mechanisms over the medians of every subset's phase, with a
    bootstrap 95 % CI (each phase's steps resampled). None unless every subset was measured."""
    import itertools
    import math

    by_set = {frozenset(on): name for name, on in phases}
    by_set.setdefault(frozenset(), "baseline")
    k = len(mechs)
    if any(
        frozenset(c) not in by_set for r in range(k + 1) for c in itertools.combinations(mechs, r)
    ):
        return None

    def values(med: dict[frozenset, float]) -> dict[str, float]:
        out = {}
        for m in mechs:
            others = [x for x in mechs if x != m]
            acc = 0.0
            for r in range(k):
                w = math.factorial(r) * math.factorial(k - r - 1) / math.factorial(k)
                for sub in itertools.combinations(others, r):
                    acc += w * (med[frozenset(sub) | {m}] - med[frozenset(sub)])
            out[m] = acc
        return out

    med = {s: statistics.median(times[n]) for s, n in by_set.items()}
    point = values(med)
    rng = random.Random(seed)
    boots: dict[str, list[float]] = {m: [] for m in mechs}
    for _ in range(1000):
        bm = {
            s: statistics.median(rng.choices(times[n], k=len(times[n]))) for s, n in by_set.items()
        }
        for m, v in values(bm).items():
            boots[m].append(v)
    return {
        MECH_IDS[m]: {
            "value": int(point[m]),
            "ci95": [int(sorted(boots[m])[25]), int(sorted(boots[m])[974])],
        }
        for m in mechs
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        prog="python -m ccdiag.emulate.pairs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("workload")
    p.add_argument("--out", required=True)
    p.add_argument("--platform", default="b200")
    p.add_argument("--mechanisms", default="launch,copy")
    p.add_argument("--layer", default="auto", choices=["auto", "runtime", "driver"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--backend",
        default="torch",
        choices=["torch", "nsys", "none"],
        help="torch.profiler traces; NVTX ranges for a run under nsys; or timing only",
    )
    p.add_argument(
        "--phases", default="", help="run only these phases (comma list), e.g. treatment"
    )
    p.add_argument("--no-record-shapes", action="store_true", help="profile without input shapes")
    p.add_argument(
        "--session",
        default="single",
        choices=["single", "per-phase"],
        help="one profiler session for all phases (split afterwards), or one per phase",
    )
    p.add_argument(
        "--block-steps", type=int, default=10, help="steps per phase block (single session)"
    )
    p.add_argument(
        "--settle-steps",
        type=int,
        default=0,
        help="untimed, unshipped steps at the start of each block (single session): lets a "
        "loop without a per-step sync refill its queue after the phase switch",
    )
    p.add_argument(
        "--host-only-treatment",
        action="store_true",
        help="also write treatment_host_only (CPU-only profile, as in CC mode 'on')",
    )
    p.add_argument("--kw", action="append", default=[], help="workload option key=value")
    p.add_argument(
        "--all-subsets",
        action="store_true",
        help="a phase for every subset of the mechanisms (exact Shapley values in the truth)",
    )
    p.add_argument("--ship", default="", help="phases whose traces are written (comma list)")
    p.add_argument(
        "--ship-steps", type=int, default=0, help="write only each shipped phase's first N steps"
    )
    p.add_argument(
        "--strip-step-markers",
        action="store_true",
        help="remove ProfilerStep events from the written traces (a loop profiled without markers)",
    )
    args = p.parse_args(argv)

    from ccdiag.emulate.platforms import get_platform, shim_env

    platform = get_platform(args.platform)
    mechs = expand([m for m in args.mechanisms.split(",") if m])
    for k, v in shim_env(platform, ["launch", "copy"], args.layer).items():
        if k != "CCDIAG_EMU_MECH":
            os.environ.setdefault(k, v)
    os.environ["CCDIAG_EMU_PLATFORM"] = platform.name
    _ensure_shim(argv)  # re-exec with the shim and the environment above

    from ccdiag.emulate import workloads
    from ccdiag.emulate.shim import ShimControl

    ctl = ShimControl()
    ctl.set_mechanisms([])
    rank, world = _init_dist()
    kw = workloads.options(args.kw)
    global _NEIGHBOUR
    if "cpu" in mechs:  # pin before the workload starts its threads; every phase runs pinned
        _NEIGHBOUR = CpuNeighbour()
    wl = workloads.WORKLOADS[args.workload](**kw)
    wl.setup()
    out = Path(args.out)
    phases = [("baseline", []), ("treatment", mechs)]
    if len(mechs) > 1:
        phases += subset_phases(mechs) if args.all_subsets else [(f"only_{m}", [m]) for m in mechs]
    if args.phases:
        phases = [ph for ph in phases if ph[0] in args.phases.split(",")]
    if args.session == "single" and args.backend in ("torch", "none"):
        gc.disable()
        s_times, s_rounds, counters = run_session(wl, ctl, phases, out, args, rank, world)
        if args.host_only_treatment:
            run_phase(wl, ctl, mechs, out, "treatment_host_only", args, rank, world, cpu_only=True)
        gc.enable()
        global _PHASES, _PHASE_COUNTERS
        _PHASES, _PHASE_COUNTERS = phases, counters
        return write_truth(
            args,
            platform,
            mechs,
            kw,
            s_times,
            s_rounds,
            counters.get("treatment", []),
            ctl,
            rank,
            world,
            out,
        )
    times: dict[str, list[int]] = {name: [] for name, _ in phases}
    per_round: dict[str, list[int]] = {name: [] for name, _ in phases}
    phase_counters: dict[str, list[dict]] = {name: [] for name, _ in phases}
    gc.disable()
    # A first profiled phase pays one-time costs (CUPTI start-up, allocator growth): discard it.
    run_phase(wl, ctl, [], None, "discarded_warmup", args, rank, world)
    order = random.Random(1234)
    for r in range(args.rounds):
        # round 0 keeps baseline first, then treatment (the shipped pair); later rounds shuffle
        round_phases = phases if r == 0 else order.sample(phases, len(phases))
        for name, on in round_phases:
            keep = r == 0 and name in ("baseline", "treatment") and args.backend == "torch"
            t, c = run_phase(wl, ctl, on, out if keep else None, name, args, rank, world)
            times[name] += t
            per_round[name].append(int(statistics.median(t)))
            phase_counters[name] += c
    if args.host_only_treatment:
        run_phase(wl, ctl, mechs, out, "treatment_host_only", args, rank, world, cpu_only=True)
    gc.enable()
    if len(phases) > 2:  # subsets measured per phase too: the truth keeps each phase and Shapley
        _PHASES, _PHASE_COUNTERS = phases, phase_counters
    return write_truth(
        args,
        platform,
        mechs,
        kw,
        times,
        per_round,
        phase_counters.get("treatment", []),
        ctl,
        rank,
        world,
        out,
    )


def write_truth(
    args: argparse.Namespace,
    platform: Any,
    mechs: list[str],
    kw: dict[str, Any],
    times: dict[str, list[int]],
    per_round: dict[str, list[int]],
    treat_counters: list[dict],
    ctl: Any,
    rank: int,
    world: int,
    out: Path,
) -> int:
    """Write ground_truth.json (or timing_<backend>.json) from the phases' step times."""
    ctl.set_mechanisms([])
    calls = ctl.counters()["calls"]
    if "baseline" not in times or "treatment" not in times:
        print("PHASES " + json.dumps({"per_round_median_ns": per_round}))
        return 0
    base = times["baseline"]
    single = args.session == "single" and args.backend in ("torch", "none")
    truth = {
        "workload": {"name": args.workload, **kw},
        "platform": platform.to_dict(),
        "mechanisms": [MECH_IDS[m] for m in mechs],
        "emulator_layer": args.layer,
        "rank": rank,
        "world_size": world,
        "profiled_steps_per_phase": len(base),
        "rounds": args.rounds,
        "session": "single" if single else "per-phase",
        "step_ns": {name: spread(v) for name, v in times.items()},
        ("step_ns_median_per_block" if single else "step_ns_median_per_round"): per_round,
        "shipped_pair": (
            "all baseline and all treatment steps of one profiler session (blocks of "
            f"{args.block_steps} steps, phases interleaved over {args.rounds} rounds"
            + (
                f", {args.settle_steps} untimed settle steps before each block)"
                if args.settle_steps
                else ")"
            )
            if single
            else "round 0 (baseline then treatment, after one discarded warm-up phase)"
        ),
        "delta_ns_per_step": diff_spread(base, times["treatment"]),
        "impact_ns_per_step": {
            MECH_IDS[m]: diff_spread(
                base, times[f"only_{m}"] if f"only_{m}" in times else times["treatment"]
            )
            for m in mechs
            if f"only_{m}" in times or len(mechs) == 1
        },
        "injected_ns_per_step": {
            MECH_IDS[m]: injected(treat_counters, m) for m in mechs if m not in NOT_SHIM
        },
        "shim_calls": calls,
        "placement": placement(),
        **(
            {"shapley_ns_per_step": sh}
            if (sh := shapley(times, _PHASES or [("treatment", mechs)], mechs)) is not None
            and len(mechs) > 1
            else {}
        ),
        "phases": {
            name: {
                "mechanisms": [MECH_IDS[m] for m in on],
                "step_ns": times.get(name, []),
                "injected_ns_per_step": {
                    MECH_IDS[m]: injected(_PHASE_COUNTERS.get(name, []), m)
                    for m in on
                    if m not in NOT_SHIM
                },
                "shim_per_step_median": _counter_medians(_PHASE_COUNTERS.get(name, [])),
            }
            for name, on in (_PHASES or [])
        },
        **(
            {
                "cpu_neighbour": {
                    "core": _NEIGHBOUR.core,
                    "nice": _NEIGHBOUR.nice,
                    "duty_ms": os.environ.get("CCDIAG_EMU_CPU_DUTY") or "always busy",
                }
            }
            if _NEIGHBOUR is not None
            else {}
        ),
    }
    suffix = f".rank{rank}" if world > 1 else ""
    out.mkdir(parents=True, exist_ok=True)
    name = "ground_truth" if args.backend == "torch" else f"timing_{args.backend}"
    (out / f"{name}{suffix}.json").write_text(json.dumps(truth, indent=2) + "\n")
    if world > 1:
        # Tearing down NCCL communicators used inside captured CUDA graphs hung on the H200 box;
        # every rank has written its files, so leave without the teardown.
        sys.stdout.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
