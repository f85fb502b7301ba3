"""What the server checks before Dash sees a request: Host (DNS rebinding), security headers,
and how many upload bodies it reads at once."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from app_samples import SAMPLES
from ccdiag.app import create_app, guard


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return create_app(staging_dir=tmp_path_factory.mktemp("staging"), allowed_hosts=("ccdiag.lan",))


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8050", "localhost", "LOCALHOST:8050", "[::1]:8050", "ccdiag.lan:8050"]
)
def test_loopback_and_configured_hosts_are_served(app: Any, host: str) -> None:
    r = app.server.test_client().get("/_dash-layout", headers={"Host": host})
    assert r.status_code == 200


@pytest.mark.parametrize(
    "host",
    ["attacker.example", "attacker.example:8050", "127.0.0.1.attacker.example", "[::2]:8050", ""],
)
def test_other_hosts_are_refused_before_dash(app: Any, host: str) -> None:
    # a DNS-rebinding page reaches 127.0.0.1 with its own name in the Host header
    client = app.server.test_client()
    for path in ("/", "/_dash-layout", "/_dash-dependencies"):
        r = client.get(path, headers={"Host": host})
        assert r.status_code == 421, (path, host)
        assert b"Host is not served" in r.data and b"traceEvents" not in r.data


def test_the_hosts_of_run_and_the_environment_are_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(guard.HOSTS_ENV, "a.example, b.example:80")
    app = create_app(staging_dir=tmp_path)
    guard.add_host(app, "10.1.2.3")
    guard.add_host(app, "0.0.0.0")  # binding everywhere names no host
    client = app.server.test_client()
    for host, status in (
        ("a.example", 200),
        ("b.example", 200),
        ("10.1.2.3:8050", 200),
        ("0.0.0.0", 421),
        ("c.example", 421),
    ):
        assert client.get("/_dash-layout", headers={"Host": host}).status_code == status, host


def test_security_headers_on_every_response(app: Any) -> None:
    client = app.server.test_client()
    for path in ("/", "/_dash-layout", "/assets/ccdiag.js", "/no-such-page"):
        r = client.get(path)
        r.close()
        csp = r.headers.get("Content-Security-Policy", "")
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
        assert "object-src 'none'" in csp
        script = next(d for d in csp.split("; ") if d.startswith("script-src"))
        assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script
        assert "'sha256-" in script  # Dash's inline bootstrap script, by hash
        assert r.headers["X-Frame-Options"] == "DENY"
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Referrer-Policy"] == "no-referrer"


def test_the_csp_hashes_match_the_inline_scripts_served(app: Any) -> None:
    import hashlib
    import re

    r = app.server.test_client().get("/")
    page = re.sub(r"<!--.*?-->", "", r.get_data(as_text=True), flags=re.S)  # IE-only comments
    inline = re.findall(
        r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>(.*?)</script>", page, re.S
    )
    assert inline
    csp = r.headers["Content-Security-Policy"]
    for body in inline:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def _slow_upload(port: int, body: bytes, out: list[int]) -> None:
    """POST an upload-sized callback request, sending its body slowly; record the status."""
    s = socket.create_connection(("127.0.0.1", port))
    head = (
        "POST /_dash-update-component HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    s.sendall(head)
    step = len(body) // 8
    for i in range(0, len(body), step):
        s.sendall(body[i : i + step])
        time.sleep(0.05)
    resp = b""
    while b"\r\n" not in resp:
        chunk = s.recv(4096)
        if not chunk:
            break
        resp += chunk
    s.close()
    out.append(int(resp.split(b" ")[1]) if resp else 0)


def test_at_most_max_uploads_bodies_are_read_at_once(tmp_path: Path) -> None:
    # arrange: a real threaded server, 2 upload slots, and a count of stage() calls in flight
    from werkzeug.serving import make_server

    app = create_app(staging_dir=tmp_path / "staging", max_uploads=2, max_upload_mb=5)
    src = app.ccdiag_sources
    inflight, peak, lock = [0], [0], threading.Lock()
    real = src.stage

    def counted(*a: Any, **k: Any) -> Any:
        with lock:
            inflight[0] += 1
            peak[0] = max(peak[0], inflight[0])
        try:
            time.sleep(0.3)
            return real(*a, **k)
        finally:
            with lock:
                inflight[0] -= 1

    src.stage = counted  # type: ignore[method-assign]
    srv = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    deps = app.server.test_client().get("/_dash-dependencies").get_json()
    dep = next(d for d in deps if d["output"].startswith("..staged-store.data@"))
    data = (SAMPLES / "decode_eager" / "baseline.json.gz").read_bytes()  # > 1 MB: an upload
    b64 = "data:application/gzip;base64," + base64.b64encode(data).decode()
    outs = [
        {"id": o.rpartition(".")[0], "property": o.rpartition(".")[2]}
        for o in dep["output"].strip(".").split("...")
    ]
    # act: six uploads at once
    statuses: list[int] = []
    threads = []
    for i in range(6):
        check = {"ok": True, "contents": [b64], "filenames": [f"b{i}.json.gz"]}
        body = json.dumps(
            {
                "output": dep["output"],
                "outputs": outs,
                "inputs": [{**dep["inputs"][0], "value": check}],
                "state": [{**dep["state"][0], "value": {}}],
                "changedPropIds": [f"{dep['inputs'][0]['id']}.{dep['inputs'][0]['property']}"],
            }
        ).encode()
        assert len(body) > guard.UPLOAD_REQUEST_BYTES
        t = threading.Thread(target=_slow_upload, args=(srv.port, body, statuses))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(60)
    srv.shutdown()
    # assert: every upload served, never more than two bodies read at once
    assert statuses == [200] * 6
    assert app.ccdiag_gate.peak == 2 and peak[0] <= 2
    assert app.ccdiag_gate.active == 0
