"""The "What if CC" page (issue 13): served by Dash, driven through its HTTP callback protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ccdiag.app import create_app


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return create_app(staging_dir=tmp_path_factory.mktemp("staging"))


def _render(app: Any, source_id: Any, platform: Any) -> str:
    """POST the page's callback as the Dash renderer does; the response as text."""
    client = app.server.test_client()
    deps = client.get("/_dash-dependencies").get_json()
    dep = next(d for d in deps if "whatif-content" in d["output"])
    body = {
        "output": dep["output"],
        "outputs": {"id": "whatif-content", "property": "children"},
        "inputs": [
            {**dep["inputs"][0], "value": source_id},
            {**dep["inputs"][1], "value": platform},
        ],
        "changedPropIds": ["whatif-trace.value"],
    }
    r = client.post("/_dash-update-component", json=body)
    assert r.status_code == 200, r.data[:300]
    return json.dumps(r.get_json())


def _sample_id(app: Any, label: str) -> str:
    return next(s.id for s in app.ccdiag_sources.listed.values() if s.label == label)


def test_the_page_is_registered_and_served(app: Any) -> None:
    client = app.server.test_client()
    assert client.get("/whatif").status_code == 200
    layout = client.get("/_dash-layout").get_json()
    assert "What if CC" in json.dumps(layout)


def test_a_listed_trace_gets_its_prediction_partition_and_fixes(app: Any) -> None:
    # act
    out = _render(app, _sample_id(app, "decode_eager"), "b200")
    # assert: the sentence, the mechanisms (per launch path) and the fixes
    assert "Under CC on B200 this step takes" in out
    assert "Kernel launch toll (runtime)" in out and "Kernel launch toll (library)" in out
    assert "cuda_graphs" in out
    assert '"type": "Graph"' in out


def test_the_platform_picker_changes_the_prediction(app: Any) -> None:
    sid = _sample_id(app, "decode_eager")
    assert "Under CC on H100" in _render(app, sid, "h100")
    assert "Under CC on B300" in _render(app, sid, "b300")


@pytest.mark.parametrize(
    ("source_id", "platform", "message"),
    [
        ("/etc/passwd", "b200", "unknown trace pair"),
        ("../sample_traces/decode_eager/baseline.json.gz", "b200", "unknown trace pair"),
        (None, "b200", "Pick a trace"),
    ],
)
def test_paths_and_unknown_ids_are_refused(
    app: Any, source_id: Any, platform: str, message: str
) -> None:
    assert message in _render(app, source_id, platform)


def test_an_unknown_platform_is_refused(app: Any) -> None:
    out = _render(app, _sample_id(app, "decode_graph"), "./evil.yaml")
    assert "unknown platform" in out and "Under CC" not in out
