"""Failure class 4 (issue 12): host-only and summary-only pairs.

``nsys stats`` folders without ``cuda_gpu_trace`` (only ``cuda_api_trace`` + ``*_sum``) are
diagnosed from what they have: launch and copy deltas from the API trace, UVM from kernel-time
growth in ``cuda_gpu_kern_sum`` against the growth of the calls that waited for it. Real data:
the ISPASS'25 H100 + TDX pairs (BN's UVM run has no GPU trace upstream; the other apps are made
summary-only here by leaving their ``cuda_gpu_trace`` out) and small CSV sets built in tmp_path.

Before this change: BN UVM 36.5 s delta, 0 ms uvm_migration, 97 % unattributed; every app made
summary-only came out 93-100 % unattributed (even its ~1 s of context creation).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from goldens import shared_path

from ccdiag import api, parsers
from ccdiag.verdict import Report

ISPASS = shared_path("external", "hcc-ispass25", "example_csv")
APPS = ("3DCONV", "BN", "FDTD-2D", "GRAMSCHM", "hotspot3D", "kmeans")


def parts(r: Report) -> dict[str, float]:
    return {a.mechanism: a.ns_per_step for a in r.attribution}


def outcome(r: Report, code: str) -> tuple[str, str]:
    o = next(o for o in r.rules if o.code == code)
    return o.outcome, o.reason


def _set(tmp: Path, app_side: str, drop_gpu: bool) -> Path:
    d = tmp / app_side
    d.mkdir(parents=True, exist_ok=True)
    for f in ISPASS.glob(f"{app_side}_*.csv*"):
        if not (drop_gpu and "gpu_trace" in f.name):
            (d / f.name).symlink_to(f)
    return d


@cache
def full(app: str, mem: str) -> Report:
    return api.diagnose(ISPASS / f"{app}-nor-{mem}", ISPASS / f"{app}-cc-{mem}")


# --------------------------------------------------------------------------- the parser


def test_summary_tables_are_carried_as_data():
    # act
    t = parsers.read(ISPASS / "BN-cc-uvm_cuda_api_trace.csv.gz")
    sm = t.summaries
    # assert: the numbers of BN-cc-uvm_cuda_gpu_kern_sum.csv and _cuda_api_sum.csv
    ks = sm.filter(sm["report"] == "kern_sum")
    assert sorted(ks["count"].to_list()) == [1, 4500]
    assert int(ks["total_ns"].sum()) == 29_344_951_567 + 1_717_927_173
    assert set(ks["kind"].cast(str).to_list()) == {"kernel"}
    sync = sm.filter((sm["report"] == "api_sum") & (sm["name"] == "cudaDeviceSynchronize"))
    assert sync["count"].to_list() == [4502] and sync["total_ns"].to_list() == [31_164_476_642]
    assert t.meta.host_only
    assert any("cuda_gpu_kern_sum" in w for w in t.meta.warnings)
    assert api.summarize(t)["summaries"]["kern_sum"]["total_ns"] == 31_062_878_740


# --------------------------------------------------------------------------- BN UVM (real)


def test_bn_uvm_kernel_growth_is_uvm_migration_not_unattributed():
    # arrange: kernel time 0.400 s -> 31.063 s (cuda_gpu_kern_sum), syncs 0.416 -> 31.164 s
    kern_growth = (29_344_951_567 + 1_717_927_173) - (276_689_516 + 123_121_136)
    # act
    r = full("BN", "uvm")
    p = parts(r)
    total = r.partition.total_ns_per_step
    # assert
    assert r.mode == "host_only"
    assert 0.95 * kern_growth <= p["uvm_migration"] <= total
    assert abs(r.unattributed_ns_per_step) <= 0.10 * total
    # cudaMallocManaged creates the context: 186.5 ms -> 1172.0 ms
    assert 0.85 * 985.5e6 <= p["one_time_setup"] <= 1.15 * 985.5e6
    # 4501 cudaLaunchKernel at 5.53 -> 18.11 us mean, plus 4500 memsets at that toll at most
    assert 0.85 * 4501 * 12.58e3 <= p["launch_toll"] <= 1.15 * 2 * 4501 * 12.58e3
    ev = next(a for a in r.attribution if a.mechanism == "uvm_migration")
    assert ev.confidence == "low"
    assert ev.evidence["managed_memory"]["managed_allocations"] >= 6
    assert "cuda_gpu_kern_sum" in ev.evidence["method"]


# --------------------------------------------------------------------------- summary-only


MISS = pytest.mark.xfail(
    strict=True,
    reason="a miss, not a pass: host_slowdown 562 ms from the summaries (the critical-path "
    "ledger) vs 699 ms from the full traces (the replay's Shapley value), -20 % against 15 %",
)


@pytest.mark.parametrize(
    ("app", "mem"),
    [
        pytest.param(a, m, marks=MISS) if (a, m) == ("hotspot3D", "uvm") else (a, m)
        for a in APPS
        for m in ("nor", "uvm")
    ],
)
def test_summary_only_pairs_agree_with_the_full_traces(tmp_path: Path, app: str, mem: str):
    # arrange: both runs without cuda_gpu_trace
    b = _set(tmp_path, f"{app}-nor-{mem}", drop_gpu=True)
    t = _set(tmp_path, f"{app}-cc-{mem}", drop_gpu=True)
    ref = full(app, mem) if (app, mem) != ("BN", "uvm") else None
    # act
    r = api.diagnose(b, t)
    # assert: every mechanism within 15 % of what the full traces give, or 3 % of the delta
    total = r.partition.total_ns_per_step
    assert r.mode == "host_only"
    if ref is None:
        return
    pr, pf = parts(r), parts(ref)
    for m in set(pr) | set(pf):
        got, want = pr.get(m, 0.0), pf.get(m, 0.0)
        assert abs(got - want) <= max(0.15 * abs(want), 0.03 * abs(total)), (m, got, want)
    assert abs(r.unattributed_ns_per_step) <= abs(ref.unattributed_ns_per_step) + 0.03 * total


# --------------------------------------------------------------------------- small CSV sets

API_HEAD = "Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name\n"
SUM_HEAD = "Time (%),Total Time (ns),{n},Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"


def write_set(
    folder: Path,
    calls: list[tuple[str, int]],
    kernels: dict[str, tuple[int, int]] | None,
    gap: dict[str, int] | None = None,
) -> Path:
    """A ``nsys stats`` set without cuda_gpu_trace: ``calls`` (name, duration ns) with 1 us
    gaps (``gap``: name -> host time before each such call instead); ``kernels`` name ->
    (instances, total ns) for cuda_gpu_kern_sum."""
    folder.mkdir(parents=True)
    rows, t, sums = [], 1_000, {}
    for i, (name, dur) in enumerate(calls):
        t += (gap or {}).get(name, 1_000)
        rows.append(f"{t},{dur},{name},0,{i + 1},7,7,20,app\n")
        n, tot = sums.get(name, (0, 0))
        sums[name] = (n + 1, tot + dur)
        t += dur
    (folder / "run_cuda_api_trace.csv").write_text(API_HEAD + "".join(rows))
    api_sum = [f"0,{tot},{n},0,0,0,0,0,{name}\n" for name, (n, tot) in sums.items()]
    (folder / "run_cuda_api_sum.csv").write_text(SUM_HEAD.format(n="Num Calls") + "".join(api_sum))
    if kernels is not None:
        ks = [f"0,{tot},{n},0,0,0,0,0,{name}\n" for name, (n, tot) in kernels.items()]
        (folder / "run_cuda_gpu_kern_sum.csv").write_text(
            SUM_HEAD.format(n="Instances") + "".join(ks)
        )
    return folder


@pytest.mark.parametrize("where", ["inside the call", "in the gap before"])
def test_tens_of_thousands_of_launches_each_8us_longer_are_launch_toll(tmp_path: Path, where: str):
    # arrange: 20,000 launches 5 -> 13 us, a sync every 100 launches, same kernels; the toll
    # inside the call (real CC) or beside it (an LD_PRELOAD emulator spinning before the call)
    inside = where == "inside the call"

    def calls(launch: int) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = [("cudaMalloc", 150_000_000)]
        for i in range(20_000):
            out.append(("cudaLaunchKernel", launch))
            if i % 100 == 99:
                out.append(("cudaDeviceSynchronize", 20_000))
        return out

    kern = {"k(float*)": (20_000, 20_000 * 3_000)}
    b = write_set(tmp_path / "b", calls(5_000), kern)
    if inside:
        t = write_set(tmp_path / "t", calls(13_000), kern)
    else:
        t = write_set(tmp_path / "t", calls(5_000), kern, gap={"cudaLaunchKernel": 9_000})
    # act
    r = api.diagnose(b, t)
    # assert: 160 ms of toll, not unattributed
    p = parts(r)
    assert 0.85 * 160e6 <= p["launch_toll"] <= 1.15 * 160e6
    assert abs(r.unattributed_ns_per_step) <= 0.10 * r.partition.total_ns_per_step
    assert "host_slowdown" not in p or p["host_slowdown"] < 0.03 * r.partition.total_ns_per_step


def _uvm_calls(sync: int, free: int, explicit_sync: bool) -> list[tuple[str, int]]:
    out = [("cudaMallocManaged", 200_000_000)]
    for _ in range(50):
        out.append(("cudaLaunchKernel", 5_000))
        if explicit_sync:
            out.append(("cudaDeviceSynchronize", sync))
    out.append(("cudaFree", free))
    return out


def test_uvm_kernel_growth_waited_for_by_syncs_is_uvm_migration(tmp_path: Path):
    # arrange: kernel time +2 s in cuda_gpu_kern_sum, the syncs after each launch +2 s
    b = write_set(tmp_path / "b", _uvm_calls(1_000_000, 50_000, True), {"k": (50, 50_000_000)})
    t = write_set(tmp_path / "t", _uvm_calls(41_000_000, 50_000, True), {"k": (50, 2_050_000_000)})
    # act
    r = api.diagnose(b, t)
    # assert
    p = parts(r)
    assert 0.95 * 2e9 <= p["uvm_migration"] <= 1.05 * 2e9
    assert p.get("sync_stall", 0.0) < 0.03 * r.partition.total_ns_per_step
    assert p.get("one_time_setup", 0.0) < 0.03 * r.partition.total_ns_per_step


def test_uvm_kernel_growth_waited_for_by_cudafree_is_not_one_time_setup(tmp_path: Path):
    # arrange: no explicit sync: the final cudaFree waits for the kernels (+2 s)
    b = write_set(tmp_path / "b", _uvm_calls(0, 60_000_000, False), {"k": (50, 50_000_000)})
    t = write_set(tmp_path / "t", _uvm_calls(0, 2_060_000_000, False), {"k": (50, 2_050_000_000)})
    # act
    r = api.diagnose(b, t)
    # assert
    p = parts(r)
    assert 0.95 * 2e9 <= p["uvm_migration"] <= 1.05 * 2e9
    assert p.get("one_time_setup", 0.0) < 0.03 * r.partition.total_ns_per_step


def test_kernel_growth_without_managed_memory_is_said_not_uvm(tmp_path: Path):
    # arrange: the same growth, plain cudaMalloc
    def calls(sync: int) -> list[tuple[str, int]]:
        return [("cudaMalloc", 1_000_000)] + [("cudaLaunchKernel", 5_000), ("cudaDeviceSynchronize", sync)] * 50  # fmt: skip

    b = write_set(tmp_path / "b", calls(1_000_000), {"k": (50, 50_000_000)})
    t = write_set(tmp_path / "t", calls(41_000_000), {"k": (50, 2_050_000_000)})
    # act
    r = api.diagnose(b, t)
    # assert: not UVM, not a sync stall; left unattributed with the reason stated
    p = parts(r)
    status, reason = outcome(r, "UV01")
    assert "uvm_migration" not in p and status == "clean" and "no managed memory" in reason
    assert p.get("sync_stall", 0.0) < 0.03 * r.partition.total_ns_per_step
    assert r.unattributed_ns_per_step >= 0.9 * 2e9


def test_without_kernel_times_the_sync_growth_is_stated_not_guessed(tmp_path: Path):
    # arrange: no cuda_gpu_kern_sum in either run
    b = write_set(tmp_path / "b", _uvm_calls(1_000_000, 50_000, True), None)
    t = write_set(tmp_path / "t", _uvm_calls(41_000_000, 50_000, True), None)
    # act
    r = api.diagnose(b, t)
    # assert
    for code in ("SY01", "UV01"):
        status, reason = outcome(r, code)
        assert status == "skipped" and "cannot be told apart" in reason and "unknown" in reason
    assert r.unattributed_ns_per_step >= 0.9 * 2e9
