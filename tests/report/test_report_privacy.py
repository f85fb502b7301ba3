"""Nothing private from the traces reaches a report: no environment, paths, user or host names.

Nsight Systems exports keep the profiled process's whole environment (META_DATA_CAPTURE), its
command line and working directory, and the export's host, user and paths. The report files
(Markdown, HTML, JSON) and the annotated trace must carry none of it, except the few values
ccdiag reads on purpose (versions, ranks: ``_nsys_meta._ENV_KEYS``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from ccdiag.parsers._nsys_meta import _ENV_KEYS, _SYSTEM_KEYS

from ccdiag import api
from ccdiag.report.canonical import scrub_text
from ccdiag.report.html import without_plotly_js

TESTS = Path(__file__).resolve().parents[1]
SAMPLES = TESTS.parent / "sample_traces"
REAL_ENV = (
    TESTS / "data" / "shared" / "traces" / "h200_decode_eager.nsys.sqlite"
)  # real environment
PAIRS = {
    "sample-vs-real-export": (SAMPLES / "decode_eager_nsys" / "baseline.sqlite", REAL_ENV),
    "sample-pair": tuple(
        SAMPLES / "decode_eager_nsys" / f"{s}.sqlite" for s in ("baseline", "treatment")
    ),  # fmt: skip
}
MIN_LEN = 6  # shorter values ("1", "8", "true") occur in any text


def _private_values(path: Path) -> set[str]:
    """Environment values, command line, working dir, user, host and export metadata."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        values: set[str] = set()
        for name, value in con.execute("SELECT name, value FROM META_DATA_CAPTURE"):
            text = str(value)
            if str(name).endswith("ENVIRONMENT_VARIABLE"):
                key, _, text = text.partition("=")
                if key in _ENV_KEYS:
                    continue  # read on purpose (CUDA/NCCL version, rank)
            values.add(text.strip('"'))
        for table, keep in (("TARGET_INFO_SYSTEM_ENV", _SYSTEM_KEYS), ("META_DATA_EXPORT", ())):
            for name, value in con.execute(f"SELECT name, value FROM {table}"):
                if name not in keep and "VERSION" not in str(name):
                    values.add(str(value))
    finally:
        con.close()
    pieces = {p for v in values for p in {v, *v.split(":"), *v.split(";")}}
    return {p for p in pieces if len(p) >= MIN_LEN and "<scrubbed" not in p}


def test_the_real_export_does_carry_an_environment():
    # the test is only meaningful if there is something to leak
    values = _private_values(REAL_ENV)
    assert "/etc/ssl/certs/ca-certificates.crt" in values
    assert len(values) > 30


@pytest.mark.parametrize("pair", list(PAIRS))
def test_no_environment_value_reaches_any_report(pair: str, tmp_path: Path):
    # arrange
    baseline, treatment = PAIRS[pair]
    private = _private_values(baseline) | _private_values(treatment)
    report = api.diagnose(baseline, treatment)
    annotated = tmp_path / "annotated.json"
    api.annotate(baseline, treatment, annotated)
    # act
    outputs = {fmt: api.render_report(report, fmt) for fmt in ("md", "html", "json")}
    outputs["html"] = without_plotly_js(outputs["html"])
    outputs["annotated trace"] = annotated.read_text(encoding="utf-8")
    # assert
    leaks = sorted(f"{v!r} in {fmt}" for fmt, text in outputs.items() for v in private if v in text)
    assert not leaks, leaks


def test_no_absolute_path_or_user_in_reports_of_a_deep_path(tmp_path: Path):
    # arrange: the traces sit under a path with a user and host name in it
    deep = tmp_path / "home" / "alice" / "gpu-node-7" / "runs"
    deep.mkdir(parents=True)
    for side in ("baseline", "treatment"):
        (deep / f"{side}.sqlite").write_bytes((SAMPLES / "decode_eager_nsys" / f"{side}.sqlite").read_bytes())  # fmt: skip
    report = api.diagnose(deep / "baseline.sqlite", deep / "treatment.sqlite")
    sources = {s: str(deep / f"{s}.sqlite") for s in ("baseline", "treatment")}
    # act
    scrubbed = [api.render_report(report, f, sources=sources) for f in ("md", "json")]
    kept = api.render_report(report, "md", keep_paths=True, sources=sources)
    # assert
    for text in scrubbed:
        assert "alice" not in text and str(tmp_path) not in text and "gpu-node-7" not in text
        assert "`baseline.sqlite`" in text or '"baseline.sqlite"' in text
    assert sources["baseline"] in kept  # --keep-paths shows the paths as given


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("read /home/alice/run/trace.json: bad", "read <path>/trace.json: bad"),
        ("C:\\Users\\bob\\t.json ok", "<path>\\t.json ok"),
        ("~/traces/a.json", "<path>/a.json"),
        ("file:///home/u/x.json", "<path>/x.json"),
        ("PATH=/a HOME=/b USER=c", "<scrubbed environment>"),
        ("by bob@gpu-node-1.example.com", "by <user>@<host>"),
        ("gpu-node-7_4242.1712345678901.pt.trace.json", "<host>_4242.1712345678901.pt.trace.json"),
        ("<path>/module.py(1501): _call_impl", "<path>/module.py(1501): _call_impl"),
    ],
)
def test_scrub_text_removes_private_parts(text: str, scrubbed: str):
    assert scrub_text(text) == scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "void at::native::(anonymous namespace)::f<float>(float*, int)",
        "2644 -> 6358 us/step; 9.5 GB/s",
        "Memcpy HtoD (Pinned -> Device)",
        "https://github.com/NVIDIA/nvtrust/issues/74 (NVIDIA/nvtrust#74)",
        "ratio 1/2, ns/step",
    ],
)
def test_scrub_text_keeps_kernel_names_units_and_links(text: str):
    assert scrub_text(text) == text
