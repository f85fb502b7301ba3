"""The dashboard's server, driven through Dash's HTTP callback protocol with crafted payloads.

A browser can send anything to ``/_dash-update-component``: these tests send what a hostile
page would (paths instead of ids, forged upload tokens, oversize and path-named uploads) and
check that the server refuses it without reading anything.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
from app_samples import SAMPLES
from ccdiag.app import DEFAULT_HOST, create_app


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    staging = tmp_path_factory.mktemp("staging")
    app = create_app(max_upload_mb=0.2, staging_dir=staging)
    app.staging = staging
    return app


def _dep(client: Any, output_part: str) -> dict[str, Any]:
    deps = client.get("/_dash-dependencies").get_json()
    return next(d for d in deps if output_part in d["output"])


def _outputs(dep: dict[str, Any]) -> list[dict[str, str]]:
    outs = []
    for o in dep["output"].strip(".").split("..."):
        cid, _, prop = o.rpartition(".")
        outs.append({"id": cid, "property": prop})
    return outs


def call(app: Any, output_part: str, inputs: list[Any], state: list[Any] | None = None) -> Any:
    """POST one callback the way the Dash renderer does; return the response JSON."""
    client = app.server.test_client()
    dep = _dep(client, output_part)
    outs: Any = _outputs(dep)
    body = {
        "output": dep["output"],
        "outputs": outs if dep["output"].startswith("..") else outs[0],
        "inputs": [{**i, "value": v} for i, v in zip(dep["inputs"], inputs)],
        "state": [{**s, "value": v} for s, v in zip(dep["state"], state or [])],
        "changedPropIds": [f"{dep['inputs'][0]['id']}.{dep['inputs'][0]['property']}"],
    }
    r = client.post("/_dash-update-component", json=body)
    assert r.status_code in (200, 204), r.data[:300]
    return r.get_json() if r.status_code == 200 else {}


def _status(resp: dict[str, Any]) -> str:
    return resp["response"].get("status-line", {}).get("children", "")


@pytest.mark.parametrize(
    "request_data",
    [
        {"kind": "listed", "id": "/etc/passwd"},
        {"kind": "listed", "id": "../../sample_traces/decode_eager"},
        {"kind": "listed", "id": str(SAMPLES / "kv_offload" / "baseline.json.gz")},
        {"kind": "listed", "id": ["s1", "s2"]},
        {"kind": "path", "baseline": "/etc/passwd", "treatment": "/etc/passwd"},
    ],
)
def test_a_path_instead_of_an_id_is_refused(server: Any, request_data: dict) -> None:
    # act
    resp = call(server, "job-store.data", [request_data], [None])
    # assert: refused with a message; no job started
    assert "job-store" not in resp["response"]
    assert _status(resp) in ("unknown trace pair: choose one from the list", "bad request")


@pytest.mark.parametrize(
    "tokens",
    [
        ("../../etc/passwd", "../../etc/passwd"),
        ("0" * 32, "1" * 32),  # well formed, never handed out
        ({"path": "/etc"}, None),
    ],
)
def test_forged_upload_tokens_are_refused(server: Any, tokens: tuple) -> None:
    req = {"kind": "upload", "baseline": tokens[0], "treatment": tokens[1]}
    resp = call(server, "job-store.data", [req], [None])
    assert "job-store" not in resp["response"]
    assert _status(resp).startswith("unknown upload") and "upload the files again" in _status(resp)


def test_a_listed_id_starts_an_analysis(server: Any) -> None:
    sid = server.ccdiag_sources.options("sample")[0]["value"]
    resp = call(server, "job-store.data", [{"kind": "listed", "id": sid, "n": 1}], [None])
    job = resp["response"].get("job-store", {}).get("data") or {}
    cached = resp["response"].get("report-store")
    assert job.get("job") or cached


def _b64(data: bytes) -> str:
    return "data:application/gzip;base64," + base64.b64encode(data).decode()


def test_an_upload_with_a_path_as_its_name_is_stored_under_its_base_name(server: Any) -> None:
    # arrange: a real trace, named like a path out of the staging folder
    data = (SAMPLES / "async_readback" / "baseline.json.gz").read_bytes()
    check = {"ok": True, "contents": [_b64(data)], "filenames": ["../../../../tmp/evil.json.gz"]}
    # act
    resp = call(server, "staged-store.data@", [check], [{}])
    # assert
    staged = resp["response"]["staged-store"]["data"]["baseline"]
    assert staged["label"] == "evil.json.gz"
    files = [p for p in Path(server.staging).rglob("*") if p.is_file()]
    assert files and all(p.resolve().is_relative_to(Path(server.staging).resolve()) for p in files)
    assert not Path("/tmp/evil.json.gz").exists()


def test_an_oversize_upload_is_refused_by_the_server_too(server: Any) -> None:
    # arrange: the browser's size check skipped (a crafted request claims ok)
    data = (SAMPLES / "decode_eager" / "baseline.json.gz").read_bytes()  # > 0.2 MB
    check = {"ok": True, "contents": [_b64(data)], "filenames": ["baseline.json.gz"]}
    # act
    resp = call(server, "upload-message-treatment.children@", [check], [{}])
    # assert
    msg = next(v["children"] for k, v in resp["response"].items() if k.startswith("upload-message"))
    size = f"{len(data) / 1e6:.1f} MB"
    assert msg.startswith(f"treatment upload is {size}; this server accepts up to 0.2 MB per side")
    assert "--max-upload-mb" in msg and "staged-store" not in resp["response"]


def test_requests_larger_than_the_upload_limit_are_cut_off(server: Any) -> None:
    client = server.server.test_client()
    big = b"x" * (server.server.config["MAX_CONTENT_LENGTH"] + 1)
    r = client.post("/_dash-update-component", data=big, content_type="application/json")
    assert r.status_code == 413


def test_polling_an_unknown_job_reveals_nothing(server: Any) -> None:
    resp = call(server, "status-progress.value", [1], [{"job": "../../etc/passwd"}])
    assert resp["response"]["status-line"]["children"] == ""


def test_binds_to_localhost_by_default() -> None:
    import inspect

    from ccdiag.app import run

    from ccdiag import cli

    assert DEFAULT_HOST == "127.0.0.1"
    assert inspect.signature(run).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(cli.app_cmd).parameters["host"].default == "127.0.0.1"


def test_a_repeated_pair_is_answered_from_the_cache(tmp_path: Path) -> None:
    # arrange: the same bytes under another name and folder
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.sources import Source

    b, t = (
        SAMPLES / "async_readback" / "baseline.json.gz",
        SAMPLES / "async_readback" / "treatment.json.gz",
    )
    (tmp_path / "b.json.gz").write_bytes(b.read_bytes())
    (tmp_path / "t.json.gz").write_bytes(t.read_bytes())
    analyses = Analyses()
    first = analyses.submit(Source("a", "a", "dir", b, t))
    _wait(first)
    # act
    again = analyses.submit(Source("b", "b", "dir", tmp_path / "b.json.gz", tmp_path / "t.json.gz"))
    _wait(again)
    # assert
    assert first.key == again.key and again.cached and not first.cached
    assert analyses.cached_key(Source("a", "a", "dir", b, t)) == first.key
    analyses.close()


def _wait(job: Any, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while job.state not in ("done", "error") and time.monotonic() < end:
        time.sleep(0.05)
    assert job.state == "done", job.message


def test_a_bad_trace_ends_the_job_with_a_one_line_message(tmp_path: Path) -> None:
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.sources import Source

    bad = tmp_path / "baseline.json"
    bad.write_text(json.dumps({"not": "a trace"}))
    analyses = Analyses()
    job = analyses.submit(Source("x", "x", "dir", bad, bad))
    end = time.monotonic() + 30
    while job.state not in ("done", "error") and time.monotonic() < end:
        time.sleep(0.05)
    assert job.state == "error" and job.message.startswith("baseline.json:")
    assert "\n" not in job.message and str(tmp_path) not in job.message
    analyses.close()


def test_polling_reports_progress_until_the_report_is_ready(tmp_path: Path) -> None:
    # arrange: a fresh server (nothing cached) and the default pair
    app = create_app(staging_dir=tmp_path)
    start = call(app, "job-store.data", [None], [None])
    job = start["response"]["job-store"]["data"]
    # act: poll the way the browser's interval does
    seen, report = [], None
    for n in range(600):
        resp = call(app, "status-progress.value", [n], [job])["response"]
        seen.append((resp["status-line"]["children"], float(resp["status-progress"]["value"])))
        if "report-store" in resp:
            report = resp["report-store"]["data"]
            break
        time.sleep(0.02)
    # assert: stages in order, progress never goes back, the key of a loaded report at the end
    assert report is not None and report["label"] == "decode_eager"
    assert app.ccdiag_analyses.entry(report["key"]) is not None
    values = [v for _, v in seen]
    assert values == sorted(values)
    texts = " ".join(t for t, _ in seen)
    assert "parsing the" in texts or "hashing" in texts or len(seen) == 1
    assert seen[-1][0].startswith("decode_eager: analysed in")
    # a second request for the same pair is answered at once, from the cache
    again = call(
        app, "job-store.data", [{"kind": "listed", "id": app.ccdiag_sources.default.id}], [None]
    )
    assert again["response"]["report-store"]["data"]["key"] == report["key"]
    assert "from the cache" in _status(again)


def test_the_annotated_trace_is_built_from_the_loaded_analysis_and_size_limited(
    tmp_path: Path,
) -> None:
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.pages.export import annotated
    from ccdiag.app.sources import Source

    from ccdiag.errors import InputError

    # arrange: a finished analysis (its pair lives only in the browse worker, loaded on demand)
    b, t = (SAMPLES / "kv_offload" / f"{s}.json.gz" for s in ("baseline", "treatment"))
    analyses = Analyses()
    job = analyses.submit(Source("k", "kv_offload", "sample", b, t))
    _wait(job)
    assert analyses.entry(job.key) is not None
    # act
    out = analyses.annotated(job.key, tmp_path, 100_000_000)
    sent, msg = annotated(analyses, job.key, "kv_offload")
    # assert: a gzip Chrome trace with the diagnosis process and its evidence tracks
    doc = json.loads(gzip.decompress(out.read_bytes()))
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"verdict", "where: serialized_copies", "where: blocked_non_blocking"} <= threads
    assert sent["filename"] == "ccdiag-annotated-kv_offload.json.gz" and sent["base64"]
    assert msg == "downloaded ccdiag-annotated-kv_offload.json.gz"
    # too large: refused before writing anything, with the command to use instead
    with pytest.raises(InputError, match="ccdiag annotate"):
        analyses.annotated(job.key, tmp_path / "none", 1_000)
    assert not (tmp_path / "none").exists()
    with pytest.raises(InputError, match="no longer loaded"):
        analyses.annotated("unknown", tmp_path, 100_000_000)
    analyses.close()


def test_a_failed_analysis_clears_the_verdict_and_shows_a_banner(tmp_path: Path) -> None:
    # arrange: a server showing a finished analysis, then a pair that cannot be read
    bad = tmp_path / "traces" / "broken"
    bad.mkdir(parents=True)
    (bad / "baseline.json").write_text('{"traceEvents": [')
    (bad / "treatment.json").write_text('{"traceEvents": [')
    app = create_app(staging_dir=tmp_path / "staging", trace_dir=tmp_path / "traces")
    sid = next(o["value"] for o in app.ccdiag_sources.options("dir") if o["label"] == "broken")
    start = call(app, "job-store.data", [{"kind": "listed", "id": sid, "n": 1}], [None])
    job = start["response"]["job-store"]["data"]
    # act: poll until the job ends
    for n in range(600):
        resp = call(app, "status-progress.value", [n], [job])["response"]
        if "report-store" in resp:
            break
        time.sleep(0.05)
    store = resp["report-store"]["data"]
    header = call(app, "pair-label.children", [store])["response"]
    # assert: the store names the failure (no report key), the banner says what and why
    assert "key" not in store and store["failed"].startswith("baseline.json:")
    assert header["verdict-line"]["children"] == ""
    assert header["failure-banner"]["hidden"] is False
    banner = header["failure-banner"]["children"]
    assert banner.startswith("The analysis of broken failed: baseline.json:")
    overview = call(app, "overview-content.children", [store])
    assert "did not finish" in json.dumps(overview)
    app.ccdiag_analyses.close()


def _stuck(analyses: Any, tmp_path: Path) -> Path:
    """A trace whose analysis never ends: the worker is asked to wait instead of parsing it."""
    path = tmp_path / "stuck.json"
    path.write_text('{"traceEvents": []}')
    real = analyses.worker.call

    def call(op: str, *args: Any, **kw: Any) -> Any:
        if op == "analyse" and Path(args[0]).name == "stuck.json":
            return real("sleep", 3600, **kw)
        return real(op, *args, **kw)

    analyses.worker.call = call
    return path


def test_jobs_queue_in_order_and_a_stuck_one_can_be_cancelled(tmp_path: Path) -> None:
    # arrange: an analysis that never ends holds the worker (child process)
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.sources import Source

    analyses = Analyses()
    stuck_file = _stuck(analyses, tmp_path)
    stuck = analyses.submit(Source("stuck", "stuck", "dir", stuck_file, stuck_file))
    b, t = (SAMPLES / "async_readback" / f"{s}.json.gz" for s in ("baseline", "treatment"))
    waiting = analyses.submit(Source("next", "next", "dir", b, t))
    end = time.monotonic() + 60
    while analyses.job(stuck.id).state != "running" and time.monotonic() < end:
        time.sleep(0.05)
    # assert: the second job knows its place and who is ahead of it
    w = analyses.job(waiting.id)
    assert w.state == "queued" and w.position == 1
    assert w.status()["stage"] == "queued, 1st in line (running: stuck)"
    # act: cancel the stuck one
    assert analyses.cancel(stuck.id)
    _wait(waiting)
    # assert: cancelled, and the next one ran in a fresh worker
    assert stuck.state == "error" and stuck.message == "cancelled"
    assert waiting.state == "done" and analyses.entry(waiting.key) is not None
    assert analyses.worker.started == 2
    assert not analyses.cancel(stuck.id) and not analyses.cancel("nope")
    analyses.close()


def test_a_queued_job_can_be_cancelled_before_it_runs(tmp_path: Path) -> None:
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.sources import Source

    analyses = Analyses()
    stuck_file = _stuck(analyses, tmp_path)
    stuck = analyses.submit(Source("stuck", "stuck", "dir", stuck_file, stuck_file))
    b, t = (SAMPLES / "async_readback" / f"{s}.json.gz" for s in ("baseline", "treatment"))
    queued = analyses.submit(Source("q", "q", "dir", b, t))
    assert analyses.cancel(queued.id)
    assert queued.state == "error" and queued.message == "cancelled"
    assert analyses.cancel(stuck.id)
    analyses.close()


def test_an_analysis_past_its_time_limit_is_ended(tmp_path: Path) -> None:
    from ccdiag.app.jobs import Analyses
    from ccdiag.app.sources import Source
    from ccdiag.app.worker import Limits

    analyses = Analyses(limits=Limits(timeout_s=3))
    stuck_file = _stuck(analyses, tmp_path)
    job = analyses.submit(Source("slow", "slow", "dir", stuck_file, stuck_file))
    end = time.monotonic() + 60
    while job.state not in ("done", "error") and time.monotonic() < end:
        time.sleep(0.1)
    assert job.state == "error"
    assert job.message.startswith("refused: the analysis took longer than 3 s")
    analyses.close()
