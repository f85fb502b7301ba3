"""Published constants, ground-truth files of the shipped samples, and export scrubbing."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import SAMPLES, shared_path

from ccdiag.emulate.pairs import diff_spread, expand, spread
from ccdiag.emulate.platforms import PLATFORMS, get_platform, shim_env
from ccdiag.profiling import scrub_nsys_sqlite

SAMPLE_DIRS = sorted(p.parent for p in SAMPLES.glob("*/ground_truth.json"))


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_every_constant_says_where_it_comes_from(name: str) -> None:
    plat = get_platform(name)
    for field in (
        "launch_toll",
        "graph_launch_toll",
        "copy_toll",
        "copy_bandwidth",
        "collective_bandwidth_ratio",
    ):
        const = getattr(plat, field)
        assert const.value > 0
        assert re.match(r"\[[VDBI]\]", const.source), (
            f"{name}.{field}: source needs an evidence tag"
        )


def test_b200_constants_match_the_published_numbers() -> None:
    b200 = get_platform("b200")
    assert b200.launch_toll.value == pytest.approx((15.7 - 3.45) * 1000)  # 3.45 -> 15.7 us
    assert b200.graph_launch_toll.value == pytest.approx(2589_000 - 2500_000)  # graph decode step
    assert b200.collective_bandwidth_ratio.value == pytest.approx(156 / 185)
    assert get_platform("h100").launch_toll.value == pytest.approx(10_000 - 4_900)  # ISPASS medians


def test_shim_env_and_mechanism_names() -> None:
    env = shim_env(get_platform("h100"), ["launch", "collective"], "runtime")
    assert env["CCDIAG_EMU_MECH"] == "launch"
    assert env["CCDIAG_EMU_LAUNCH_NS"] == "5100" and env["CCDIAG_EMU_LAYER"] == "runtime"
    assert expand(["copy", "launch"]) == ["copy_pad", "copy_sync", "launch"]
    with pytest.raises(ValueError):
        get_platform("z80")


def test_spread_statistics() -> None:
    s = spread(list(range(1, 101)))
    assert (
        s["median"] == 50
        and s["p10"] == 10
        and s["p90"] == 90
        and s["ci95"][0] <= 50 <= s["ci95"][1]
    )
    d = diff_spread([100] * 20, [150] * 20)
    assert d == {"value": 50, "ci95": [50, 50]}


def test_samples_exist_for_the_issue() -> None:
    names = {p.name for p in SAMPLE_DIRS}
    assert {"decode_eager", "decode_graph", "kv_offload", "ddp_2gpu"} <= names
    assert (SAMPLES / "decode_eager_nsys" / "baseline.sqlite").exists()


@pytest.mark.parametrize("sample", SAMPLE_DIRS, ids=lambda p: p.name)
def test_sample_ground_truth_is_complete(sample: Path) -> None:
    truth = json.loads((sample / "ground_truth.json").read_text())
    assert truth["platform"]["name"] in PLATFORMS
    assert truth["mechanisms"], "a sample injects at least one mechanism"
    for mech in truth["mechanisms"]:
        imp = truth["impact_ns_per_step"][mech]
        assert imp["ci95"][0] <= imp["value"] <= imp["ci95"][1]
    for side in ("baseline", "treatment"):
        assert truth["step_ns"][side]["n"] >= 10
        trace = sample / f"{side}.json.gz"
        ranks = sorted((sample / side).glob("rank*.json.gz"))
        files = [trace] if trace.exists() else ranks
        assert files, f"{sample.name}: no {side} trace"
        for f in files:
            assert f.stat().st_size < 2_000_000, f"{f} is over 2 MB compressed"
            assert f.read_bytes()[:2] == b"\x1f\x8b"


@pytest.mark.parametrize(
    "trace", sorted(SAMPLES.rglob("*.json.gz")), ids=lambda p: str(p.relative_to(SAMPLES))
)
def test_sample_traces_hold_no_local_paths_or_host_names(trace: Path) -> None:
    text = gzip.open(trace, "rt").read()
    doc = json.loads(text)
    assert doc.get("host_name") in (None, "<redacted>")
    assert not re.search(r'"/(?:root|home|work|tmp)/', text)


def test_nsys_scrubber_removes_environment_paths_and_hosts(tmp_path: Path) -> None:
    # arrange: a real export that carries the profiled process's environment
    src = shared_path("traces", "h200_decode_eager.nsys.sqlite")
    db = tmp_path / "t.sqlite"
    shutil.copy(src, db)
    con = sqlite3.connect(db)
    env_before = [
        v
        for (v,) in con.execute(
            "select value from META_DATA_CAPTURE where name like '%ENVIRONMENT%'"
        )
    ]
    con.close()
    assert env_before
    # act
    scrub_nsys_sqlite(db)
    # assert: no environment value survives anywhere in the file's bytes, except version variables
    raw = db.read_bytes()
    for entry in env_before:
        key, _, value = str(entry).partition("=")
        value = value.strip('"')
        distinctive = "/" in value or len(value) >= 16  # short values (x86_64, 1) occur anyway
        if key.endswith("VERSION") or not distinctive or value == "<path>":
            continue
        assert value.encode() not in raw, f"{key} leaked"


@pytest.mark.parametrize("name", ["baseline.sqlite", "treatment.sqlite"])
def test_shipped_nsys_sample_is_scrubbed(name: str) -> None:
    raw = (SAMPLES / "decode_eager_nsys" / name).read_bytes()
    for needle in (b"/work/", b"/root", b"/tmp/", b"PYTHONPATH=/", b"CONTAINER_NAME=d"):
        assert needle not in raw


def test_the_cpu_neighbour_runs_only_while_on() -> None:
    """The ``cpu`` mechanism of the pair driver: a busy process on the main thread's core,
    stopped between phases. Run in a child process (it pins the calling thread)."""
    import subprocess
    import sys
    import textwrap

    from ccdiag.emulate.pairs import MECH_IDS
    from ccdiag.verdict import MECHANISMS

    assert expand(["launch", "cpu"]) == ["launch", "cpu"] and MECH_IDS["cpu"] in MECHANISMS
    code = textwrap.dedent(
        """
        import os, time
        from ccdiag.emulate.pairs import CpuNeighbour

        def cpu(pid):  # utime + stime of the neighbour, in clock ticks
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return int(f[11]) + int(f[12])

        n = CpuNeighbour()
        assert os.sched_getaffinity(0) == {n.core}
        a = cpu(n.proc.pid); time.sleep(0.3); b = cpu(n.proc.pid)
        n.set(True); time.sleep(0.6); c = cpu(n.proc.pid)
        n.set(False); time.sleep(0.1); d = cpu(n.proc.pid); time.sleep(0.3); e = cpu(n.proc.pid)
        n.close()
        print(b - a, c - b, e - d)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    paused, running, paused_again = (int(x) for x in out.stdout.split())
    # ticks of 10 ms; while on it gets a share of its core even on a busy CI machine
    assert paused == 0 and paused_again == 0 and running >= 5
