"""Per-rank jobs on dask.distributed: a real LocalCluster (worker processes), not a mock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ccdiag import api, distributed, job
from ccdiag.errors import InputError
from ccdiag.verdict import MechanismNs, RankResult, RankStepNs

REPO = Path(__file__).resolve().parents[1]
DDP = REPO / "sample_traces" / "ddp_2gpu"
DDP_SLOW = REPO / "sample_traces" / "ddp_2gpu_ctas2"
DECODE = REPO / "sample_traces" / "decode_eager"

pytest.importorskip("distributed")


def _comparable(report: object) -> dict:
    d = json.loads(report.model_dump_json())  # type: ignore[attr-defined]
    d.pop("scheduler")
    return d


def _ranks(tmp: Path, side: str, sources: list[Path]) -> Path:
    """A rank folder whose rank i is a copy of ``sources[i]`` (with its sidecar)."""
    out = tmp / side
    out.mkdir()
    for i, src in enumerate(sources):
        shutil.copy(src, out / f"rank{i}.json.gz")
        meta = src.with_name(src.name.replace(".json.gz", ".meta.json"))
        if meta.exists():
            m = json.loads(meta.read_text())
            m["rank"] = i
            (out / f"rank{i}.meta.json").write_text(json.dumps(m))
    return out


@pytest.fixture(scope="module")
def inprocess_ddp():
    return api.diagnose(DDP / "baseline", DDP / "treatment", scheduler="inprocess")


def test_rank_folder_on_a_local_cluster_equals_in_process(inprocess_ddp) -> None:
    # act: the same rank-folder pair on two worker processes
    on_cluster = api.diagnose(DDP / "baseline", DDP / "treatment", scheduler="local:2")
    # assert: same partition, ranks, stragglers; the scheduler says what ran it
    assert _comparable(on_cluster) == _comparable(inprocess_ddp)
    assert on_cluster.scheduler.startswith("dask LocalCluster, 2 worker")
    assert inprocess_ddp.scheduler.startswith("in-process")
    assert [r.rank for r in on_cluster.ranks] == [0, 1]
    assert on_cluster.job.n_ranks == 2 and on_cluster.job.missing_ranks == []


def test_job_partition_is_the_mean_over_ranks(inprocess_ddp) -> None:
    rep = inprocess_ddp
    for a in rep.attribution:
        per_rank = [
            next((m.ns_per_step for m in r.attribution if m.mechanism == a.mechanism), 0)
            for r in rep.ranks
        ]
        assert abs(a.ns_per_step - np.mean(per_rank)) <= 1
    total = rep.partition.total_ns_per_step
    assert sum(a.ns_per_step for a in rep.attribution) + rep.unattributed_ns_per_step == total
    slow = max(rep.ranks, key=lambda r: r.step_ns.treatment)
    assert rep.job.slowest_rank == slow.rank
    assert rep.job.slowest_rank_attribution == slow.attribution
    # the collectives' ring-size view: 4·k·(n−1) at n = 2, predictions at other sizes
    c = rep.job.collectives
    assert c is not None and c.world_size == 2
    assert c.crypto_ops_per_step == round(4 * c.k * 1)
    assert {p["world_size"] for p in c.predicted} >= {2, 4, 8}


def test_killed_worker_is_handled(tmp_path: Path, inprocess_ddp) -> None:
    from distributed import Client, LocalCluster

    # arrange: a 4-rank job (ranks 2, 3 are copies of 0, 1) on two worker processes
    b = _ranks(tmp_path, "b", [DDP / "baseline" / f"rank{i % 2}.json.gz" for i in range(4)])
    t = _ranks(tmp_path, "t", [DDP / "treatment" / f"rank{i % 2}.json.gz" for i in range(4)])
    tasks, _ = distributed.plan_tasks([b], [t])
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    client = Client(cluster)
    try:
        pids = list(client.run(os.getpid).values())
        killed: list[int] = []

        def kill_one(task: str, done: int | None = None, total: int | None = None) -> None:
            if done == 0 and not killed:  # the tasks are submitted and running
                threading.Timer(1.0, os.kill, (pids[0], signal.SIGKILL)).start()
                killed.append(pids[0])

        # act
        results = distributed._collect(client, tasks, kill_one)
    finally:
        client.close()
        cluster.close()
    # assert: every rank has its result (the task was run again on a live worker)
    assert killed
    assert [r.error for r in results] == [None] * 4
    rep = job.reduce_job(results, scheduler="test")
    by_rank = {r.rank: r for r in rep.ranks}
    ref = {r.rank: r for r in inprocess_ddp.ranks}
    for i in range(4):
        assert by_rank[i].attribution == ref[i % 2].attribution


def test_a_rank_that_fails_is_reported_by_rank(tmp_path: Path) -> None:
    # arrange: three ranks, the treatment of rank 2 is not a trace
    srcs_b = [DDP / "baseline" / f"rank{i % 2}.json.gz" for i in range(3)]
    srcs_t = [DDP / "treatment" / f"rank{i % 2}.json.gz" for i in range(3)]
    b, t = _ranks(tmp_path, "b", srcs_b), _ranks(tmp_path, "t", srcs_t)
    import gzip

    (t / "rank2.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "na'))
    # act
    rep = api.diagnose(b, t, scheduler="inprocess")
    # assert: a partial result that says what it is missing
    assert rep.job.missing_ranks == [2]
    bad = next(r for r in rep.ranks if r.rank == 2)
    assert bad.error and "rank2.json.gz" in bad.error and bad.step_ns is None
    assert rep.warnings[0].startswith("partial result: ranks [2]")
    # and the CLI: the report is printed, exit status 2, one line on stderr naming the rank
    proc = subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", "analyze", str(b), str(t), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "rank 2" in lines[0] and "Traceback" not in proc.stderr


def test_ranks_that_disagree_between_the_sides_are_named(tmp_path: Path) -> None:
    b = _ranks(tmp_path, "b", [DDP / "baseline" / f"rank{i % 2}.json.gz" for i in range(3)])
    t = _ranks(tmp_path, "t", [DDP / "treatment" / f"rank{i}.json.gz" for i in range(2)])
    with pytest.raises(InputError, match=r"3 rank file\(s\) and the treatment 2"):
        distributed.plan_tasks([b], [t])
    (t / "rank1.json.gz").rename(t / "rank7.json.gz")
    shutil.copy(t / "rank0.json.gz", t / "rank1.json.gz")
    with pytest.raises(
        InputError, match=r"only in the baseline \[2\], only in the treatment \[7\]"
    ):
        distributed.plan_tasks([b], [t])


def test_a_slower_rank_is_a_straggler(tmp_path: Path) -> None:
    # arrange: rank 2's treatment is the 2-CTA run (collectives 0.15x the bandwidth)
    b = _ranks(tmp_path, "b", [DDP / "baseline" / f"rank{i % 2}.json.gz" for i in range(3)])
    srcs = [DDP / "treatment" / "rank0.json.gz", DDP / "treatment" / "rank1.json.gz"]
    t = _ranks(tmp_path, "t", [*srcs, DDP_SLOW / "treatment" / "rank0.json.gz"])
    # act
    rep = api.diagnose(b, t, scheduler="inprocess")
    # assert
    by = {s.rank: s.why for s in rep.stragglers}
    assert "above every other rank's delta" in by[2] and "modified z-score" in by[2]
    assert rep.job.slowest_rank == 2
    # any other rank singled out is so for its mechanism mix, not for being slow
    assert all(w.startswith("mechanism mix") for r, w in by.items() if r != 2)


def test_straggler_tests_on_numbers() -> None:
    def rank(i: int, delta: int, mix: dict[str, int]) -> RankResult:
        return RankResult(
            rank=i,
            step_ns=RankStepNs(baseline=10_000_000, treatment=10_000_000 + delta, delta=delta),
            attribution=[MechanismNs(mechanism=m, ns_per_step=v) for m, v in mix.items()],
        )

    common = {"launch_toll": 700_000, "encrypted_collectives": 300_000}
    ranks = [rank(i, 1_000_000 + 5_000 * i, common) for i in range(7)]
    ranks.append(rank(7, 3_000_000, common))  # slower
    ranks.append(rank(8, 1_000_000, {"launch_toll": 100_000, "encrypted_collectives": 900_000}))
    found, test = job.stragglers(ranks, {})
    by = {s.rank: s.why for s in found}
    assert set(by) == {7, 8}
    assert "modified z-score" in by[7] and "mechanism mix" in by[8]
    assert "9 ranks" in test
    # two ranks: only the CI test applies
    two, test2 = job.stragglers(ranks[:2], {1: (900_000, 1_100_000)})
    assert two == [] and "need at least 3 ranks" in test2


def test_hierarchical_bootstrap_sees_run_to_run_noise() -> None:
    rng = np.random.default_rng(1)
    # arrange: three runs per side whose means differ by run (a run-level effect of ±5 %)
    b = [rng.normal(10e6 * (1 + off), 1e5, 200) for off in (-0.05, 0.0, 0.05)]
    t = [rng.normal(11e6 * (1 + off), 1e5, 200) for off in (0.04, -0.04, 0.0)]
    delta, lo, hi = job.hierarchical_ci(b, t)
    # a steps-only bootstrap (all runs pooled, as if one run) is far narrower
    pooled_b, pooled_t = np.concatenate(b), np.concatenate(t)
    boots = [
        np.median(rng.choice(pooled_t, pooled_t.size))
        - np.median(rng.choice(pooled_b, pooled_b.size))
        for _ in range(500)
    ]
    s_lo, s_hi = np.percentile(boots, [2.5, 97.5])
    assert lo < delta < hi
    assert (hi - lo) > 3 * (s_hi - s_lo)


def test_repeated_runs_give_a_run_to_run_ci(tmp_path: Path) -> None:
    # arrange: a folder of runs per side (three runs each: real traces of one workload)
    for side in ("baseline", "treatment"):
        d = tmp_path / side
        d.mkdir()
        for i in (1, 2, 3):
            shutil.copy(DECODE / f"{side}.json.gz", d / f"{side}_run{i}.json.gz")
    # act
    rep = api.diagnose(tmp_path / "baseline", tmp_path / "treatment", scheduler="inprocess")
    # assert: the CI comes from the runs, and says so
    runs = rep.job.runs
    assert runs is not None and runs.baseline_runs == 3 and runs.treatment_runs == 3
    assert "hierarchical bootstrap" in rep.step_ns.noise_method
    assert rep.step_ns.delta_ci95 == runs.delta_ci95
    assert runs.per_mechanism and runs.per_mechanism[0].ci95_low is not None
    assert len(rep.ranks) == 1 and rep.ranks[0].runs == 3


def test_extra_runs_from_the_command_line(tmp_path: Path) -> None:
    b, t = DECODE / "baseline.json.gz", DECODE / "treatment.json.gz"
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "ccdiag.cli", "analyze", str(b), str(t),
            "--baseline-run", str(b), "--treatment-run", str(t), "--json", str(out), "-q",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    d = json.loads(out.read_text())
    assert d["job"]["runs"]["baseline_runs"] == 2 and d["scheduler"].startswith("in-process")
    assert d["ranks"][0]["runs"] == 2


def test_scheduler_values() -> None:
    assert distributed.parse_scheduler(None, 2).kind == "inprocess"
    assert distributed.parse_scheduler("auto", 8).kind == "local"
    assert distributed.parse_scheduler("local:3", 1).workers == 3
    assert distributed.parse_scheduler("tcp://127.0.0.1:8786", 1).address == "tcp://127.0.0.1:8786"
    for bad in ("locale", "local:0", "ssh://x", "local:two"):
        with pytest.raises(InputError, match="scheduler"):
            distributed.parse_scheduler(bad, 4)
