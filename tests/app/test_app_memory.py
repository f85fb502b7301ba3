"""The server's memory under hostile and huge uploads, measured on a real ``ccdiag app``.

``ccdiag app`` runs as a subprocess; the uploads go through Dash's HTTP callback protocol the
way the browser sends them (base64 in a JSON body). A sampler reads the resident memory of
the server process (``/proc/<pid>/status``) and of its worker processes every 20 ms.

The bound checked: **the server process grows by at most 300 MB** while it takes each upload
and runs (and refuses) its analysis, and holds at most 150 MB more afterwards; the worker
that parses is ended at its limit (``--max-analysis-mb 700`` here) plus what one 50 ms
sampling interval lets it overshoot.

The bombs (built in seconds, see ``gzip_repeat``):

- ``{"traceEvents":[`` followed by spaces, as a 10 MB and a 30 MB gzip file (about 10 and
  30 GB of spaces). The deflate stream is one block of 1 MiB of spaces repeated (each block
  after a full flush, so the stream is valid); the gzip trailer's CRC is not that of 30 GB
  (computing it would take minutes) — no reader gets that far: the app's decompression limit
  (40x) ends the read after 0.4 / 1.2 GB.
- a legitimate-looking 36 MB gzip of 2.2 million events: the 12,450 events of the real
  ``kv_offload`` baseline repeated 180 times.
"""

from __future__ import annotations

import base64
import gzip
import json
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from app_samples import REPO, SAMPLES

SERVER_GROWTH_MAX = 300e6
SERVER_HELD_MAX = 150e6
WORKER_LIMIT_MB = 700
WORKER_OVERSHOOT = 400e6  # what a parse can add within one 50 ms sample, with margin

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads memory from /proc (Linux)"
)


def gzip_repeat(head: bytes, block: bytes, n: int, tail: bytes, *, crc: bool = True) -> bytes:
    """A gzip file of ``head + block * n + tail``, compressed once: the deflate stream repeats
    one block compressed after a full flush (so every repeat is the same bytes)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.compress(tail) + c.flush()
    check = 0
    if crc:
        check = zlib.crc32(head)
        for _ in range(n):
            check = zlib.crc32(block, check)
        check = zlib.crc32(tail, check)
    size = (len(head) + len(block) * n + len(tail)) & 0xFFFFFFFF
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
    return header + start + one * n + end + struct.pack("<II", check, size)


def spaces_bomb(mb: int) -> bytes:
    block = b" " * (1 << 20)
    one = len(zlib.compress(block, 9))  # about 1 KB per MiB of spaces
    return gzip_repeat(b'{"traceEvents":[', block, mb * 1_000_000 // one, b"]}", crc=False)


def many_events(repeats: int = 180) -> tuple[bytes, int]:
    doc = json.loads(gzip.decompress((SAMPLES / "kv_offload" / "baseline.json.gz").read_bytes()))
    evs = doc.pop("traceEvents")
    head = json.dumps(doc)[:-1] + ', "traceEvents": [' + json.dumps(evs[0])
    block = "".join("," + json.dumps(e) for e in evs[1:])
    data = gzip_repeat(head.encode(), block.encode(), repeats, b"]}")
    return data, 1 + (len(evs) - 1) * repeats


def rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    """Child processes, whichever of the server's threads started them."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


class Sampler:
    """Peak RSS of the server and of each of its children, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.server_peak = 0
        self.child_peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.server_peak = max(self.server_peak, rss(self.pid))
            for c in children(self.pid):
                self.child_peak[c] = max(self.child_peak.get(c, 0), rss(c))
            time.sleep(0.02)

    def __enter__(self) -> Sampler:
        self._t.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._t.join()


class Client:
    """Dash's callback protocol over HTTP, as the browser speaks it."""

    def __init__(self, url: str) -> None:
        self.url = url
        with urllib.request.urlopen(url + "/_dash-dependencies", timeout=30) as r:
            self.deps = json.loads(r.read())

    def dep(self, input_id: str) -> dict[str, Any]:
        return next(d for d in self.deps if d["inputs"] and d["inputs"][0]["id"] == input_id)

    def call(self, input_id: str, inputs: list[Any], state: list[Any] | None = None) -> Any:
        dep = self.dep(input_id)
        outs = [
            {"id": o.rpartition(".")[0], "property": o.rpartition(".")[2]}
            for o in dep["output"].strip(".").split("...")
        ]
        body = {
            "output": dep["output"],
            "outputs": outs if dep["output"].startswith("..") else outs[0],
            "inputs": [{**i, "value": v} for i, v in zip(dep["inputs"], inputs)],
            "state": [{**s, "value": v} for s, v in zip(dep["state"], state or [])],
            "changedPropIds": [f"{dep['inputs'][0]['id']}.{dep['inputs'][0]['property']}"],
        }
        req = urllib.request.Request(
            self.url + "/_dash-update-component",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read() or b"{}").get("response", {})

    def upload(self, side: str, name: str, data: bytes, staged: dict[str, Any]) -> Any:
        b64 = "data:application/gzip;base64," + base64.b64encode(data).decode()
        check = {"ok": True, "contents": [b64], "filenames": [name]}
        return self.call(f"upload-check-{side}", [check], [staged])

    def analyse(self, request: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
        start = self.call("request-store", [request], [None])
        job = start["job-store"]["data"]
        end = time.monotonic() + timeout
        n = 0
        while time.monotonic() < end:
            n += 1
            resp = self.call("poll-interval", [n], [job])
            if "report-store" in resp:
                return {
                    "store": resp["report-store"]["data"],
                    "status": resp["status-line"]["children"],
                }
            time.sleep(0.2)
        raise AssertionError("the analysis did not end")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("log") / "server.log"
    cmd = [
        sys.executable, "-m", "ccdiag.cli", "app", "--port", str(port),
        "--max-upload-mb", "60", "--max-analysis-mb", str(WORKER_LIMIT_MB),
    ]  # fmt: skip
    with open(log, "w+") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/_dash-layout", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    fh.seek(0)
                    pytest.fail(f"ccdiag app did not start:\n{fh.read()[-3000:]}")
                time.sleep(0.25)
        try:
            yield url, proc.pid
        finally:
            proc.terminate()
            proc.wait(20)


@pytest.fixture(scope="module")
def warm(server: tuple[str, int]) -> Client:
    """The server after one real analysis (Dash, plotly and the workers loaded)."""
    url, _ = server
    c = Client(url)
    staged: dict[str, Any] = {}
    for side in ("baseline", "treatment"):
        data = (SAMPLES / "async_readback" / f"{side}.json.gz").read_bytes()
        resp = c.upload(side, f"{side}.json.gz", data, staged)
        staged = resp["staged-store"]["data"]
    out = c.analyse(resp["request-store"]["data"])
    assert "key" in out["store"], out
    return c


def _bomb_case(name: str) -> tuple[bytes, str, str]:
    """(baseline bytes, the refusal expected or "", the sample whose treatment pairs it)."""
    if name == "spaces_10mb":
        return spaces_bomb(10), "refused: gzip data inflates", "async_readback"
    if name == "spaces_30mb":
        return spaces_bomb(30), "refused: ", "async_readback"
    data, n = many_events()
    assert n > 2_000_000
    return data, "", "kv_offload"


@pytest.mark.parametrize("case", ["spaces_10mb", "spaces_30mb", "events_2m"])
def test_a_bomb_upload_keeps_the_server_memory_bounded(
    server: tuple[str, int], warm: Client, case: str, record_property: Any
) -> None:
    # arrange
    url, pid = server
    data, refusal, sample = _bomb_case(case)
    before = rss(pid)
    # act: upload it as the baseline of a real treatment, and let the analysis run
    with Sampler(pid) as s:
        t0 = time.monotonic()
        staged = warm.upload("baseline", f"{case}.json.gz", data, {})["staged-store"]["data"]
        treat = (SAMPLES / sample / "treatment.json.gz").read_bytes()
        resp = warm.upload("treatment", "treatment.json.gz", treat, staged)
        out = warm.analyse(resp["request-store"]["data"])
        elapsed = time.monotonic() - t0
    time.sleep(1.0)
    after = rss(pid)
    growth, held = s.server_peak - before, after - before
    worker_peak = max(s.child_peak.values(), default=0)
    line = (
        f"{case}: {len(data) / 1e6:.1f} MB gzip; server RSS +{growth / 1e6:.0f} MB at peak, "
        f"+{held / 1e6:.0f} MB after; worker peak {worker_peak / 1e6:.0f} MB "
        f"(limit {WORKER_LIMIT_MB} MB); {elapsed:.1f} s; {out['status']}"
    )
    print(line)
    record_property("memory", line)
    # assert: the server stayed within the bound, the worker within its limit, and the
    # analysis ended with a one-line answer
    assert growth <= SERVER_GROWTH_MAX, line
    assert held <= SERVER_HELD_MAX, line
    assert worker_peak <= WORKER_LIMIT_MB * 1e6 + WORKER_OVERSHOOT, line
    if refusal:
        assert out["store"].get("failed", "").count("\n") == 0
        assert refusal in out["store"].get("failed", ""), line
    else:  # a report, or a one-line reason (a memory refusal, an unpairable step structure)
        assert "key" in out["store"] or "\n" not in out["store"]["failed"], line


def test_staged_uploads_and_workers_are_gone_after_sigterm(tmp_path: Path) -> None:
    # arrange: a server whose temporary folders go to tmp_path, one upload staged
    import os
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "ccdiag.cli", "app", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/_dash-layout", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.25)
        c = Client(url)
        data = (SAMPLES / "async_readback" / "baseline.json.gz").read_bytes()
        c.upload("baseline", "baseline.json.gz", data, {})
        staged = [p for p in tmp_path.glob("ccdiag-app-*/*/baseline/baseline.json.gz")]
        assert len(staged) == 1
        workers = children(proc.pid)
        # act
        proc.terminate()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # assert: the staging folder and the worker processes are gone
    assert not list(tmp_path.glob("ccdiag-app-*")), list(tmp_path.rglob("*"))
    time.sleep(0.5)
    assert all(not Path(f"/proc/{w}").exists() or rss(w) == 0 for w in workers)
