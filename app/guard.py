"""What the server checks on every request before Dash sees it, and adds to every response.

- **Host header** (DNS rebinding): a page on another site that re-points its own name at
  127.0.0.1 reaches the app with *its* name in ``Host``; only loopback names and the hosts the
  server was told about (``--host``, ``CCDIAG_APP_HOSTS``) are answered, anything else gets 421.
- **Headers**: a Content-Security-Policy (scripts only from the server itself plus the hashes
  of Dash's inline bootstrap scripts), ``X-Frame-Options: DENY``, ``X-Content-Type-Options:
  nosniff``, ``Referrer-Policy: no-referrer``.
- **Concurrent uploads**: a callback request large enough to be an upload waits for one of
  ``max_uploads`` slots *before* its body is read, so at most that many upload bodies are in
  the server's memory at once; one that waits longer than ``wait_s`` gets 503.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
HOSTS_ENV = "CCDIAG_APP_HOSTS"
#: A callback request with a body larger than this is treated as an upload.
UPLOAD_REQUEST_BYTES = 1 << 20
DEFAULT_MAX_UPLOADS = 2
DEFAULT_UPLOAD_WAIT_S = 120.0
_ANY_ADDRESS = ("0.0.0.0", "::", "")


def host_name(header: str | None) -> str:
    """The host part of a ``Host`` header, lowercased, without port or IPv6 brackets."""
    h = (header or "").strip().lower()
    if h.startswith("["):
        return h[1 : h.find("]")] if "]" in h else ""
    if h.count(":") == 1:
        h = h.split(":", 1)[0]
    return h.rstrip(".")


def allowed_hosts(extra: Iterable[str] = ()) -> set[str]:
    """Loopback names, ``extra`` and the comma-separated names in ``CCDIAG_APP_HOSTS``."""
    names = set(LOOPBACK_HOSTS)
    env = os.environ.get(HOSTS_ENV, "")
    for h in [*extra, *env.split(",")]:
        n = host_name(h)
        if n and n not in _ANY_ADDRESS:
            names.add(n)
    return names


def csp(script_hashes: Iterable[str]) -> str:
    """The Content-Security-Policy: nothing from other origins, no inline script but Dash's."""
    hashes = " ".join(h if h.startswith("'") else f"'{h}'" for h in script_hashes)
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' {hashes}".strip(),
            # plotly and React set inline styles
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


class UploadGate:
    """At most ``slots`` upload requests read at once; the others wait (bounded)."""

    def __init__(self, slots: int = DEFAULT_MAX_UPLOADS, wait_s: float = DEFAULT_UPLOAD_WAIT_S):
        self.slots, self.wait_s = slots, wait_s
        self._sem = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def enter(self) -> bool:
        if not self._sem.acquire(timeout=self.wait_s):
            return False
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        return True

    def leave(self) -> None:
        with self._lock:
            self.active -= 1
        self._sem.release()


def add_host(app: Any, host: str) -> None:
    """Answer to one more name (the address ``ccdiag app --host`` binds to)."""
    n = host_name(host)
    if n and n not in _ANY_ADDRESS:
        app.ccdiag_hosts.add(n)


def install(app: Any, hosts: set[str], gate: UploadGate) -> None:
    """Attach the checks and headers to a Dash app's Flask server."""
    import flask

    server = app.server
    app.ccdiag_hosts = hosts
    policy: dict[str, str] = {}

    @server.before_request
    def _check() -> Any:
        if host_name(flask.request.host) not in hosts:
            return flask.Response(
                "ccdiag app: this Host is not served (allowed: loopback names and the --host "
                f"the app was started with; add others with {HOSTS_ENV}=name1,name2)\n",
                status=421,
                mimetype="text/plain",
            )
        req = flask.request
        if req.method == "POST" and req.path.endswith("/_dash-update-component"):
            n = req.content_length
            if n is None or n > UPLOAD_REQUEST_BYTES:
                if not gate.enter():
                    return flask.Response(
                        "ccdiag app: too many uploads at once; try again in a minute\n",
                        status=503,
                        mimetype="text/plain",
                    )
                flask.g.ccdiag_upload_slot = True
        return None

    @server.teardown_request
    def _release(_exc: BaseException | None) -> None:
        if flask.g.pop("ccdiag_upload_slot", False):
            gate.leave()

    @server.after_request
    def _headers(resp: Any) -> Any:
        if "csp" not in policy:
            policy["csp"] = csp(app.csp_hashes())
        resp.headers.setdefault("Content-Security-Policy", policy["csp"])
        resp.headers.setdefault("X-Frame-Options", "DENY")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "no-referrer")
        return resp
