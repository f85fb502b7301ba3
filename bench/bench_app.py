"""Time to the verdict: the dashboard in a real browser against ``ccdiag analyze`` on the same pair.

    python bench/bench_app.py                      # the 1 GB + 1 GB Kineto pair (bench/make_large.py)
    python bench/bench_app.py --size-mb 200        # quicker
    python bench/bench_app.py --format nsys --size-mb 200

Target (issue #15): the dashboard shows a 1 GB pair's verdict in at most 1.5x the CLI's time.

What is timed, each from a cold process (nothing cached: the dashboard's cache is per server):

- **CLI**: ``python -m ccdiag.cli analyze B T --json /dev/null``, process start to exit (its
  imports, both loads, the pairing, the rules, the report). CPU and peak RSS of the process.
- **dashboard**: ``python -m ccdiag.cli app B T`` started, then headless Chromium (Playwright,
  Debian's ``chromium``, started before the server so its start is not counted) opens ``/`` as
  soon as the server answers; the clock stops when the overview shows the top mechanism card
  (``#overview-top-mechanism``, filled from the finished analysis) for this pair. Two numbers:
  from the server's start (what a user waits for after typing the command) and from the page's
  opening. CPU and peak RSS are those of the server and its worker processes (psutil, sampled
  every 0.2 s; a short-lived peak between samples can be missed). The analysis limits are
  raised (``--max-analysis-mb``, ``--max-analysis-s``) so the 1 GB pair is not refused: at the
  defaults (2 GB, 300 s) the dashboard refuses it with a message, by design.

Printed as ratios against the CLI in the same run; nothing is asserted (exit 0 unless a side
fails). Needs ``chromium`` and ``playwright`` (``scripts/test.sh`` installs both).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_analyze import _ensure, _ensure_nsys  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(b: Path, t: Path) -> dict[str, float]:
    """``ccdiag analyze`` in its own process: wall, CPU (user + system) and peak RSS."""
    cmd = [sys.executable, "-m", "ccdiag.cli", "analyze", str(b), str(t), "--json", os.devnull]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ccdiag analyze failed ({proc.returncode}): {err[-2000:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "peak_mb": ru.ru_maxrss / 1024}


class TreeMonitor(threading.Thread):
    """Samples a process tree's CPU (the last value seen per pid) and its summed RSS peak."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.every_s = every_s
        self.cpu: dict[int, float] = {}
        self.peak_mb = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss = 0
            for p in procs:
                try:
                    with p.oneshot():
                        c = p.cpu_times()
                        self.cpu[p.pid] = c.user + c.system
                        rss += p.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            self.peak_mb = max(self.peak_mb, rss / 2**20)
            self.stop.wait(self.every_s)


def run_dashboard(b: Path, t: Path, timeout_s: float) -> dict[str, float]:
    """``ccdiag app B T`` and a browser on its overview until the verdict card is shown."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "ccdiag.cli", "app", str(b), str(t), "--port", str(port)]
    cmd += ["--max-analysis-mb", "64000", "--max-analysis-s", str(timeout_s)]
    label = f"{b.name} vs {t.name}"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(timeout_s * 1000)
        log = open(HERE / "data" / "bench_app_server.log", "w")
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        mon = TreeMonitor(proc.pid)
        mon.start()
        try:
            while True:
                try:
                    with urllib.request.urlopen(url + "/_dash-layout", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None or time.perf_counter() - t0 > 120:
                        raise SystemExit(
                            "ccdiag app did not start: see bench/data/bench_app_server.log"
                        )
                    time.sleep(0.1)
            t_up = time.perf_counter()
            page.goto(url + "/")
            page.locator("#pair-label").filter(has_text=label).wait_for()
            card = page.locator("#overview-top-mechanism")
            card.wait_for()
            t_done = time.perf_counter()
            mechanism = card.get_attribute("data-mechanism")
        finally:
            mon.stop.set()
            mon.join()
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
            browser.close()
    return {
        "wall": t_done - t0,
        "from_page": t_done - t_up,
        "startup": t_up - t0,
        "cpu": sum(mon.cpu.values()),
        "peak_mb": mon.peak_mb,
        "mechanism": mechanism or "(none)",
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--format", choices=["kineto", "nsys"], default="kineto")
    ap.add_argument("--timeout-s", type=float, default=1800.0)
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    b, t = (_ensure_nsys if args.format == "nsys" else _ensure)(args.size_mb)
    size = (b.stat().st_size + t.stat().st_size) / 2**20
    la = os.getloadavg()
    cli = run_cli(b, t)
    dash = run_dashboard(b, t, args.timeout_s)
    print(f"pair: {b.name} + {t.name} ({size:,.0f} MiB, {args.format})")
    print(f"load average at the start: {la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f} (1 / 5 / 15 min)")
    print("| what | wall s | CPU s | peak MB | vs CLI (wall) |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| `ccdiag analyze --json` (process start to exit) | {cli['wall']:.1f} | "
        f"{cli['cpu']:.1f} | {cli['peak_mb']:,.0f} | 1.00x |"
    )
    print(
        f"| dashboard: server start to the verdict shown | {dash['wall']:.1f} | "
        f"{dash['cpu']:.1f} | {dash['peak_mb']:,.0f} | {dash['wall'] / cli['wall']:.2f}x |"
    )
    print(
        f"| dashboard: page opened to the verdict shown | {dash['from_page']:.1f} | | | "
        f"{dash['from_page'] / cli['wall']:.2f}x |"
    )
    print(
        f"- server start until it answered: {dash['startup']:.1f} s; top mechanism shown: "
        f"{dash['mechanism']}"
    )
    ratio = dash["wall"] / cli["wall"]
    verdict = "met" if ratio <= 1.5 else "missed"
    print(f"- dashboard / CLI: {ratio:.2f}x (target <= 1.5x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
