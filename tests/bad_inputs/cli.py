"""Run the installed ``ccdiag`` CLI in a child process and measure it (hostile-input tests).

``run(args, ...)`` returns the exit status, stderr, wall time and the child's own peak resident
memory (``os.wait4``: the rusage of that one child, not a maximum over all children), and
``check_one_line`` asserts the contract of a refusal: exit 2, exactly one stderr line of at most
300 characters, naming the file, no traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO

#: The reproducers of the independent fuzz run (issue 18): a byte-for-byte copy of
#: ../shared/fuzz-repro/ kept in the repository, because CI runs on a clean clone without
#: ../shared (tests/test_hostile_repro.py checks the copy against the original where it exists).
REPRO = Path(__file__).resolve().parent / "fuzz_repro"
#: The original, beside the clone on the project's machines (absent in CI).
SHARED_REPRO = REPO.parent / "shared" / "fuzz-repro"
#: Every reproducer answers within this (issue 18: "≤ 30 s") on a quiet machine; on a loaded
#: one, plus twice the time the CLI takes to refuse a two-byte file there (:func:`time_limit`).
TIME_LIMIT_S = 30.0
MAX_LINE = 300
_STARTUP: list[float] = []


def time_limit(fresh: bool = False) -> float:
    """30 s + twice the CLI's start-up time on this machine (measured once; again when
    ``fresh``: a run that looks slow is judged against the machine's load at that time)."""
    if fresh:
        _STARTUP.clear()
    if not _STARTUP:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "t.json").write_bytes(b"{}")
            t0 = time.monotonic()
            subprocess.run([*cli(), "summary", "t.json"], cwd=tmp, capture_output=True)
            _STARTUP.append(time.monotonic() - t0)
    return TIME_LIMIT_S + 2 * _STARTUP[0]


def cli() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m ccdiag.cli``."""
    script = Path(sys.executable).with_name("ccdiag")
    if script.exists():
        return [str(script)]
    found = shutil.which("ccdiag")
    return [found] if found else [sys.executable, "-m", "ccdiag.cli"]


@dataclass
class Result:
    rc: int
    stderr: str
    stdout: str
    wall_s: float
    peak_bytes: int

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / (1 << 20)


def run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120.0
) -> Result:
    """One CLI run; killed after ``timeout`` seconds (then rc is negative)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CCDIAG_")}
    proc = subprocess.Popen(
        [*cli(), *args],
        cwd=cwd,
        env={**base, "COLUMNS": "200", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    t0 = time.monotonic()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    hwm: list[int] = [0]
    watcher = threading.Thread(target=_watch_hwm, args=(proc, hwm), daemon=True)
    watcher.start()
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    try:
        err = proc.stderr.read()  # type: ignore[union-attr]
        reader.join()
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    return Result(
        rc=proc.returncode,
        stderr=err.decode("utf-8", "replace"),
        stdout=b"".join(out).decode("utf-8", "replace"),
        wall_s=time.monotonic() - t0,
        peak_bytes=_peak(hwm[0], ru.ru_maxrss * 1024),
    )


def _watch_hwm(proc: subprocess.Popen, hwm: list[int]) -> None:
    """The child's own high-water mark (``VmHWM`` of its address space), read every 5 ms while
    it runs. ``ru_maxrss`` alone is not the child's: a child forked (or vforked) from a test
    process inherits that process's high-water mark across exec, so once the test process holds
    1.6 GB every child would seem to."""
    status = Path(f"/proc/{proc.pid}/status")  # never waitpid here: run() reaps with wait4
    while True:
        try:
            text = status.read_text()
        except OSError:
            return
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith(("Z", "X")):
            return
        try:
            hwm[0] = max(hwm[0], int(fields["VmHWM"].split()[0]) * 1024)
        except (KeyError, ValueError, IndexError):
            pass
        time.sleep(0.005)


def _peak(hwm: int, maxrss: int) -> int:
    """The watched high-water mark, which the inherited ``ru_maxrss`` can only exceed; without
    /proc (or a child too quick to be seen), ``ru_maxrss``."""
    return min(hwm, maxrss) if hwm else maxrss


def check_contract(res: Result, name: str, *, expect: str | None = None) -> None:
    """Exit 0 (stderr empty) or 2 (one line naming ``name``); never a traceback; in time."""
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.rc in (0, 2), (res.rc, res.stderr[-2000:])
    lines = res.stderr.splitlines()
    if res.rc == 2:
        assert len(lines) == 1, res.stderr[:2000]
        assert len(lines[0]) <= MAX_LINE, (len(lines[0]), lines[0][:400])
        assert lines[0].startswith(f"ccdiag: error: {name}: "), lines[0]
    else:
        assert lines == [], res.stderr[:2000]
    if expect is not None:
        import re

        assert re.search(expect, res.stderr + res.stdout), (res.stderr[:500], res.stdout[:500])
    if res.wall_s > time_limit():
        assert res.wall_s <= time_limit(fresh=True), (
            f"took {res.wall_s:.1f} s > {time_limit():.1f} s"
        )
