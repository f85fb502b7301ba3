""".nsys-rep reading: no nsys, and a fake nsys that exports a real SQLite (as nsys would)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from ccdiag.parsers import _nsys_export, nsys_rep, nsys_sqlite
from nsys_fixtures import EAGER

from ccdiag import parsers
from ccdiag.errors import InputError

FAKE_NSYS = """#!{python}
# A stand-in for `nsys export --type sqlite --force-overwrite true --output OUT REP`.
import shutil, sys
args = sys.argv[1:]
with open({calls!r}, "a") as fh:
    fh.write(" ".join(args) + "\\n")
if {fail!r}:
    print("Processing [report]...", flush=True)
    print("ERROR: the report is truncated or corrupt", flush=True)
    sys.exit(1)
assert args[:5] == ["export", "--type", "sqlite", "--force-overwrite", "true"], args
out = args[args.index("--output") + 1]
sys.stdout.write("Processing [report] with [exporter]...\\n")
for pct in (0, 50, 100):
    sys.stdout.write(f"\\r[1/1] [{{'=' * (pct // 10):<10}}] {{pct:3d}}% out.sqlite")
    sys.stdout.flush()
sys.stdout.write("\\n")
if {write!r}:
    shutil.copy({source!r}, out)
"""


def _fake_nsys(folder: Path, *, fail: bool = False, write: bool = True) -> tuple[Path, Path]:
    """An executable `nsys` in folder; returns it and the file that logs its calls."""
    folder.mkdir(parents=True, exist_ok=True)
    calls = folder / "calls.log"
    script = folder / "nsys"
    text = FAKE_NSYS.format(
        python=sys.executable, calls=str(calls), fail=fail, write=write, source=str(EAGER)
    )
    script.write_text(text)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script, calls


def exports_name(rep: Path) -> str:
    return next(rep.parent.glob("run.ccdiag-*.sqlite")).name


def _calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def rep(tmp_path: Path) -> Path:
    """A stand-in report (its bytes do not matter: the fake nsys ignores them)."""
    p = tmp_path / "reports" / "run.nsys-rep"
    p.parent.mkdir()
    p.write_bytes(b"stand-in report")
    return p


@pytest.fixture
def no_nsys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("NSYS", raising=False)


def test_without_nsys_the_error_says_how_to_export(rep: Path, no_nsys: None) -> None:
    # act
    with pytest.raises(InputError) as err:
        parsers.read(rep)
    # assert
    line = err.value.line()
    assert line.startswith("run.nsys-rep: cannot read a .nsys-rep without Nsight Systems")
    assert "nsys export --type sqlite -o trace.sqlite trace.nsys-rep" in line
    assert "NSYS=" in line


def test_nsys_on_path_exports_once_and_the_export_is_cached(
    rep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange
    script, calls = _fake_nsys(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(script.parent))
    monkeypatch.delenv("NSYS", raising=False)
    seen: list[str] = []
    # act
    first = parsers.read(rep, progress=lambda *a: seen.append(a[0] if len(a) == 1 else a))
    second = nsys_rep.read(rep)
    # assert
    direct = nsys_sqlite.read(EAGER)
    assert first.events.equals(direct.events) and second.events.equals(direct.events)
    assert _calls(calls) == 1
    assert first.meta.format == "nsys_rep" and first.meta.source == "run.nsys-rep"
    assert first.meta.files == ["run.nsys-rep"] and first.meta.size_bytes == rep.stat().st_size
    assert seen[0] == "Processing [report] with [exporter]..."
    assert any(isinstance(s, str) and s.endswith("100% out.sqlite") for s in seen)
    assert seen[-1][0] == f"reading {exports_name(rep)}" and seen[-1][1] == seen[-1][2]
    exports = sorted(p.name for p in rep.parent.glob("*.sqlite"))
    assert len(exports) == 1 and exports[0].startswith("run.ccdiag-")


def test_a_rewritten_report_is_exported_again(
    rep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange
    script, calls = _fake_nsys(tmp_path / "bin")
    monkeypatch.setenv("NSYS", str(script))
    monkeypatch.setenv("PATH", "")
    nsys_rep.read(rep)
    # act
    rep.write_bytes(b"a longer stand-in report")
    nsys_rep.read(rep)
    # assert
    assert _calls(calls) == 2


def test_nsys_env_var_may_name_the_folder(
    rep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange
    script, calls = _fake_nsys(tmp_path / "nsys-install" / "bin")
    monkeypatch.setenv("NSYS", str(script.parent))
    monkeypatch.setenv("PATH", "")
    # act
    trace = nsys_rep.read(rep)
    # assert
    assert trace.meta.n_events == nsys_sqlite.read(EAGER).meta.n_events
    assert _calls(calls) == 1


def test_an_unwritable_report_folder_caches_in_the_user_cache(
    rep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange (running as root, chmod cannot make a folder unwritable: patch the check)
    script, _ = _fake_nsys(tmp_path / "bin")
    monkeypatch.setenv("NSYS", str(script))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(_nsys_export, "_writable", lambda folder: False)
    # act
    nsys_rep.read(rep)
    # assert
    assert list(rep.parent.glob("*.sqlite")) == []
    cached = list((tmp_path / "xdg" / "ccdiag").glob("run.ccdiag-*.sqlite"))
    assert len(cached) == 1
    assert not list((tmp_path / "xdg" / "ccdiag").glob("*.tmp-*"))


@pytest.mark.parametrize(
    ("fail", "write", "said"),
    [
        (True, True, "ERROR: the report is truncated or corrupt"),
        (False, False, "100% out.sqlite"),
    ],
    ids=["nsys-fails", "nsys-writes-nothing"],
)
def test_a_failed_export_is_an_input_error_with_nsys_last_line(
    rep: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fail: bool,
    write: bool,
    said: str,
) -> None:
    # arrange
    script, _ = _fake_nsys(tmp_path / "bin", fail=fail, write=write)
    monkeypatch.setenv("NSYS", str(script))
    # act
    with pytest.raises(InputError) as err:
        nsys_rep.read(rep)
    # assert
    assert err.value.line().startswith("run.nsys-rep: `nsys export` failed (exit status")
    assert err.value.line().endswith(said)
    assert list(rep.parent.glob("*.sqlite")) == []


def test_nsys_that_cannot_run_is_an_input_error(
    rep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange: executable bit set, but not a program
    bad = tmp_path / "bin" / "nsys"
    bad.parent.mkdir()
    bad.write_bytes(b"\x00\x01not an executable")
    bad.chmod(0o755)
    monkeypatch.setenv("NSYS", str(bad))
    # act
    with pytest.raises(InputError) as err:
        nsys_rep.read(rep)
    # assert
    assert "could not run" in err.value.line()
    assert os.path.basename(str(bad)) in err.value.line()


def test_the_export_module_runs_as_a_script_without_ccdiag_or_polars(
    rep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So a GPU box with nsys but without ccdiag's dependencies can use the same code."""
    # arrange
    import subprocess

    script, calls = _fake_nsys(tmp_path / "bin")
    monkeypatch.setenv("NSYS", str(script))
    code = (
        "import runpy, sys; sys.modules.update(polars=None, ccdiag=None); "
        f"sys.argv = ['_nsys_export.py', {str(rep)!r}]; "
        f"runpy.run_path({_nsys_export.__file__!r}, run_name='__main__')"
    )
    # act
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    # assert
    assert res.returncode == 0, res.stderr
    out = Path(res.stdout.strip())
    assert out.parent == rep.parent and out.name.startswith("run.ccdiag-") and out.is_file()
    assert "100% out.sqlite" in res.stderr and _calls(calls) == 1
