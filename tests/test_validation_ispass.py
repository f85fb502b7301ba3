"""ccdiag on the real H100 CC pairs of the ISPASS 2025 artifact, checked against its README.

Facts from tests/data/shared/external/hcc-ispass25/README.md: launch median 4.5-4.9 us off ->
10.7-17.6 us on; the 67 MB pinned H2D of 3DCONV 1.58 ms -> 25.6 ms; context creation 0.16-0.20 s
-> 1.15-1.19 s; UVM kernel time up to ~250x (3DCONV 51.7 -> 12,971 ms).
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import validate_ispass as vi  # noqa: E402

from ccdiag.verdict import Report  # noqa: E402

APPS = vi.APPS


@cache
def report(app: str, mem: str) -> Report:
    return vi.diagnose(app, mem)


@pytest.mark.parametrize("app", APPS)
@pytest.mark.parametrize("mem", ["nor", "uvm"])
def test_launch_medians_match_the_artifact(app: str, mem: str) -> None:
    # act
    f = vi.facts(report(app, mem))
    # assert
    off, on = f["launch_p50_us"]
    assert 4.5 <= off <= 4.95 and 10.6 <= on <= 17.6


@pytest.mark.parametrize("app", [a for a in APPS])
def test_context_creation_is_one_time_setup_of_about_a_second(app: str) -> None:
    # arrange / act
    r = report(app, "nor")
    setup = next(a for a in r.attribution if a.mechanism == "one_time_setup")
    off, on = vi.facts(r)["setup_call_s"]
    # assert
    assert 0.15 <= off <= 0.21 and 1.14 <= on <= 1.20
    assert 0.9e9 <= setup.ns_per_step <= 1.1e9


def test_3dconv_67mb_copy_goes_from_1_6_to_25_6_ms() -> None:
    off, on = vi.facts(report("3DCONV", "nor"))["copy_16MiB_plus_ms"]
    assert 1.5 <= off <= 1.7 and 25.0 <= on <= 26.5


@pytest.mark.parametrize(
    ("app", "leader"),
    [("3DCONV", "serialized_copies"), ("BN", "serialized_copies"), ("GRAMSCHM", "sync_stall")],
)
def test_explicit_copy_verdicts(app: str, leader: str) -> None:
    assert vi.steady_leader(report(app, "nor")) == leader


@pytest.mark.parametrize("app", ["3DCONV", "FDTD-2D", "hotspot3D", "kmeans"])
def test_uvm_builds_are_led_by_uvm_migration(app: str) -> None:
    # act
    r = report(app, "uvm")
    # assert
    assert vi.steady_leader(r) == "uvm_migration"
    assert abs(r.unattributed_share) < 0.2


def test_3dconv_uvm_kernel_time_grows_about_250x() -> None:
    off, on = vi.facts(report("3DCONV", "uvm"))["kernel_ms"]
    assert 240 <= on / off <= 260


def test_missing_gpu_trace_makes_a_host_only_treatment() -> None:
    r = report("BN", "uvm")
    assert r.mode == "host_only"
    assert any("devtools" in w for w in r.warnings)
    assert all(a.confidence == "low" for a in r.attribution)


def test_bn_uvm_without_gpu_trace_is_led_by_uvm_migration_from_the_summary_tables() -> None:
    # issue 12 class 4: it was 97 % unattributed; cuda_gpu_kern_sum shows +30.7 s of kernels
    r = report("BN", "uvm")
    assert vi.steady_leader(r) == "uvm_migration"
    assert abs(r.unattributed_share) < 0.1
    assert vi.facts(r)["kernel_ms"] == (399.810652, 31062.87874)


def test_hotspot3d_host_code_is_host_slowdown_with_low_confidence_and_flagged() -> None:
    # its host code outside CUDA calls grows ~1 s in the TD; HS01 claims it from the gap fit
    r = report("hotspot3D", "nor")
    att = {a.mechanism: a for a in r.attribution}
    assert att["host_slowdown"].ns_per_step > 0.4 * r.partition.total_ns_per_step
    assert att["host_slowdown"].confidence == "low"
    assert abs(r.unattributed_share) < 0.05
    assert "low confidence: host_slowdown" in vi.unsure(r)
    assert vi.steady_leader(r) == "host_slowdown"


def test_every_partition_adds_up() -> None:
    for app in APPS:
        for mem in ("nor", "uvm"):
            r = report(app, mem)
            total = sum(a.ns_per_step for a in r.attribution) + r.unattributed_ns_per_step
            assert total == r.partition.total_ns_per_step


def test_validation_doc_is_fresh() -> None:
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "validate_ispass.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout
