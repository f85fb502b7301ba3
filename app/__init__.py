"""The ccdiag dashboard (Dash): ``create_app()`` builds it, ``run()`` serves it.

Layout follows Dash Pages: the pages live in ``ccdiag.app.pages`` and are registered here,
navigation comes from ``dash.page_registry``, component ids are constants in ``ids``, figures
are pure functions of the Report in ``figures`` (plotly only), and the browser holds only a
report key in a ``dcc.Store``. Nothing is imported from Dash at module level, so
``ccdiag.app.figures`` stays importable without it.
"""

from __future__ import annotations

import atexit
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
DEFAULT_MAX_UPLOAD_MB = 200.0
DEFAULT_SAMPLE = "decode_eager"
DEFAULT_UPLOAD_QUOTA_MB = 2000.0
DEFAULT_MAX_UPLOADS = 2
DEFAULT_MAX_ANALYSIS_MB = 2048.0
DEFAULT_MAX_ANALYSIS_S = 300.0


def samples_dir() -> Path | None:
    """The shipped sample pairs (``sample_traces/`` next to the package), when present."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "sample_traces", here / "sample_traces"):
        if cand.is_dir():
            return cand
    return None


def _sources(
    baseline: Path | None,
    treatment: Path | None,
    trace_dir: Path | None,
    max_upload_mb: float,
    staging: Path,
    quota_mb: float,
) -> Any:
    from ccdiag.app.sources import Source, Sources, discover

    src = Sources(
        staging=staging, max_upload_bytes=int(max_upload_mb * 1e6), quota_bytes=int(quota_mb * 1e6)
    )
    sdir = samples_dir()
    if sdir is not None:
        samples = discover(sdir, "sample", "s")
        src.add(samples)
        src.default = next((s for s in samples if s.label == DEFAULT_SAMPLE), None)
    if trace_dir is not None:
        src.add(discover(Path(trace_dir), "dir", "d"))
    if baseline is not None and treatment is not None:
        arg = Source(
            "arg",
            f"{Path(baseline).name} vs {Path(treatment).name}",
            "arg",
            Path(baseline).resolve(),
            Path(treatment).resolve(),
        )
        src.add([arg])
        src.default = arg
    return src


def create_app(
    baseline: str | Path | None = None,
    treatment: str | Path | None = None,
    *,
    trace_dir: str | Path | None = None,
    max_upload_mb: float = DEFAULT_MAX_UPLOAD_MB,
    staging_dir: str | Path | None = None,
    upload_quota_mb: float = DEFAULT_UPLOAD_QUOTA_MB,
    max_uploads: int = DEFAULT_MAX_UPLOADS,
    max_analysis_mb: float = DEFAULT_MAX_ANALYSIS_MB,
    max_analysis_s: float = DEFAULT_MAX_ANALYSIS_S,
    allowed_hosts: tuple[str, ...] = (),
) -> Any:
    """Build the dashboard.

    Args:
        baseline: CC-off trace (file or folder) to open first; a shipped sample when None.
        treatment: CC-on trace to open first.
        trace_dir: a folder whose trace pairs the user may pick (never any other path).
        max_upload_mb: largest upload accepted, per side, in MB.
        staging_dir: where uploads are stored (a temporary folder if None); removed at exit.
        upload_quota_mb: uploads kept at most (MB, both sides of every pair); the least
            recently used are deleted to make room.
        max_uploads: upload requests read at once (the others wait).
        max_analysis_mb: memory (RSS) one analysis may use, in its worker process.
        max_analysis_s: time one analysis may take.
        allowed_hosts: names the server answers to besides the loopback ones (``Host``).

    Returns:
        The ``dash.Dash`` app; ``app.server`` is its Flask server.
    """
    import dash
    from ccdiag.app import callbacks, guard, layout
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.pages import PAGE_MODULES, mechanisms
    from ccdiag.app.worker import Limits
    from dash import Dash

    if staging_dir is None:
        staging = Path(tempfile.mkdtemp(prefix="ccdiag-app-"))
    else:
        staging = Path(staging_dir)
        staging.mkdir(parents=True, exist_ok=True)
    sources = _sources(
        Path(baseline) if baseline else None,
        Path(treatment) if treatment else None,
        Path(trace_dir) if trace_dir else None,
        max_upload_mb,
        staging,
        upload_quota_mb,
    )
    limits = Limits(memory_bytes=int(max_analysis_mb * 1e6), timeout_s=max_analysis_s)
    analyses = Analyses(limits=limits, hold=sources.hold)
    atexit.register(analyses.close)
    atexit.register(sources.clear)
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        assets_folder=str(Path(__file__).resolve().parent / "assets"),
        suppress_callback_exceptions=True,
        title="ccdiag",
        update_title=None,  # type: ignore[arg-type]  # None: no "Updating..." title
    )
    for mod in PAGE_MODULES:
        dash.register_page(mod.__name__, layout=mod.layout, **mod.PAGE)
        mod.register(app, sources if mod.__name__.endswith("traces") else analyses)
    for spec in mechanisms.PAGES:
        kw = {k: v for k, v in spec.items() if k not in ("module", "mechanism")}
        dash.register_page(spec["module"], layout=mechanisms.page_layout(spec), **kw)
    mechanisms.register(app, analyses)
    app.layout = layout.shell
    callbacks.register(app, sources, analyses)
    # Uploads travel base64-encoded (4/3 of their size) in one request per side.
    app.server.config["MAX_CONTENT_LENGTH"] = int(sources.max_upload_bytes * 4 / 3) + (4 << 20)
    gate = guard.UploadGate(max_uploads)
    guard.install(app, guard.allowed_hosts(allowed_hosts), gate)
    app.ccdiag_sources, app.ccdiag_analyses = sources, analyses  # type: ignore[attr-defined]
    app.ccdiag_gate = gate  # type: ignore[attr-defined]
    return app


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def run(app: Any, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve the app (Flask's threaded server; bind to 127.0.0.1 unless told otherwise).

    The ``--host`` name is added to the names the server answers to (``Host`` header). On
    SIGTERM (or Ctrl-C) the server exits through ``atexit``: staged uploads are deleted and the
    worker processes ended.
    """
    import signal

    from ccdiag.app import guard

    guard.add_host(app, host)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app.ccdiag_analyses.start_workers()  # their imports run while the first page loads
    if host not in LOOPBACK:
        sys.stderr.write(
            f"ccdiag app: listening on {host}: anyone who can reach it can upload traces and "
            "read the reports (there is no login); use --host 127.0.0.1 to keep it local\n"
        )
    app.run(host=host, port=port, debug=False)
