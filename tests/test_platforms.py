"""Platform profiles: the shipped YAML files, a user's file, and the errors for bad ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ccdiag.emulate.platforms import PLATFORMS as EMULATED
from ccdiag.errors import InputError
from ccdiag.platforms import UNITS, known_platforms, load_platform

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "ccdiag" / "platforms"


def _ccdiag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", *args], capture_output=True, text=True, cwd=REPO
    )


def test_the_three_platforms_ship_and_every_constant_names_its_source() -> None:
    assert known_platforms() == ["b200", "b300", "h100"]
    for name in known_platforms():
        p = load_platform(name)
        for key in UNITS:
            c = getattr(p, key)
            assert c.low <= c.value <= c.high
            assert c.source.startswith("[")  # an evidence tag: [V] [D] [B] [I]


@pytest.mark.parametrize("name", ["h100", "b200", "b300"])
def test_profiles_agree_with_the_emulators_constants(name: str) -> None:
    # the emulator (ccdiag.emulate.platforms) injects these values; both must say the same
    p, e = load_platform(name), EMULATED[name]
    assert p.kernel_launch_toll_ns.value == e.launch_toll.value
    assert p.graph_launch_toll_ns.value == e.graph_launch_toll.value
    assert p.copy_toll_ns.value == e.copy_toll.value
    assert p.copy_bandwidth_gbps.value == pytest.approx(e.copy_bandwidth.value / 1e9, rel=0.011)
    assert p.collective_bandwidth_ratio.value == pytest.approx(
        e.collective_bandwidth_ratio.value, rel=1e-3
    )


def _user_file(tmp_path: Path, edit: object) -> Path:
    data = yaml.safe_load((SHIPPED / "b200.yaml").read_text())
    edit(data)  # type: ignore[operator]
    out = tmp_path / "my_platform.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def test_a_users_copy_with_edited_numbers_is_taken(tmp_path: Path) -> None:
    def faster(d: dict) -> None:
        d["name"] = "b200-tuned"
        d["kernel_launch_toll_ns"].update(value=6000, low=5000, high=7000)

    p = load_platform(_user_file(tmp_path, faster))
    assert p.name == "b200-tuned" and p.kernel_launch_toll_ns.value == 6000


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("copy_toll_ns"), "missing field 'copy_toll_ns'"),
        (lambda d: d["copy_toll_ns"].pop("source"), "missing field 'copy_toll_ns.source'"),
        (lambda d: d["copy_toll_ns"].update(value="fast"), "field 'copy_toll_ns.value'"),
        (lambda d: d["copy_toll_ns"].update(low=99e9), "low <= value <= high"),
        (lambda d: d["copy_bandwidth_gbps"].update(unit="MB/s"), "unit must be 'GB/s'"),
        (lambda d: d.update(colour="red"), "unknown field 'colour'"),
    ],
)
def test_a_bad_field_is_one_clear_line(tmp_path: Path, edit: object, message: str) -> None:
    path = _user_file(tmp_path, edit)
    with pytest.raises(InputError) as exc:
        load_platform(path)
    assert message in exc.value.line()
    assert exc.value.line().startswith("my_platform.yaml: bad platform profile")


def test_unknown_platform_and_bad_file_exit_2_from_the_cli(tmp_path: Path) -> None:
    # arrange
    trace = "sample_traces/decode_graph/baseline.json.gz"
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    # act
    unknown = _ccdiag("predict", trace, "--platform", "a100")
    bad = _ccdiag("predict", trace, "--platform", str(broken))
    # assert
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "ccdiag: error: unknown platform 'a100': choose from b200, b300, h100 or a .yaml file"
    )
    assert bad.returncode == 2 and "broken.yaml: not valid YAML at line" in bad.stderr
    assert "Traceback" not in unknown.stderr + bad.stderr
