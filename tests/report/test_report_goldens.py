"""Golden Markdown / HTML / JSON reports of the sample pairs, byte for byte (the plotly.js version
named in the HTML stand-in line aside: it is the installed plotly's).

Regenerate with ``python scripts/update_report_goldens.py`` and review the diff.
"""

from __future__ import annotations

import json
import re

import pytest
import report_goldens as rg

from ccdiag import api
from ccdiag.report.html import PLOTLY_JS_ID, report_figures

CASES = [(name, fmt) for name in rg.PAIRS for fmt in rg.FORMATS]


def _any_plotly_js(text: str) -> str:
    """The stand-in line's plotly.js version masked: which bundle is inlined (v2.34 with
    plotly 5.23, the lowest allowed; v4 with plotly 7) is the installed plotly's, not ccdiag's."""
    return re.sub(r"/\* plotly\.js v\S+ inlined here \*/", "/* plotly.js inlined here */", text)


@pytest.mark.parametrize(("name", "fmt"), CASES, ids=[f"{n}.{f}" for n, f in CASES])
def test_report_matches_golden(name: str, fmt: str):
    # arrange
    golden = rg.golden_path(name, fmt)
    assert golden.exists(), f"missing {golden.name}: run python scripts/update_report_goldens.py"
    # act
    text = rg.render(name, fmt)
    expected = golden.read_text(encoding="utf-8")
    if fmt == "html":
        text, expected = _any_plotly_js(text), _any_plotly_js(expected)
    # assert
    assert text == expected, (
        f"{golden.name} changed: run python scripts/update_report_goldens.py and review the diff"
    )


def test_same_inputs_give_byte_identical_reports_across_diagnoses():
    # arrange: two independent diagnoses of the same pair (the engine has tie-breaks to keep)
    b, t = (rg.SAMPLES / p for p in rg.PAIRS["decode_eager"])
    # act
    first, second = api.diagnose(b, t), api.diagnose(b, t)
    # assert
    for fmt in rg.FORMATS:
        assert api.render_report(first, fmt) == api.render_report(second, fmt), fmt


def test_timestamp_only_when_asked():
    # arrange
    report = rg.report_of("decode_eager")
    # act
    plain = api.render_report(report, "json")
    stamped = api.render_report(report, "json", timestamp="2026-01-02T03:04:05Z")
    md = api.render_report(report, "md", timestamp="2026-01-02T03:04:05Z")
    # assert
    assert json.loads(plain)["generated_at"] is None
    assert json.loads(stamped)["generated_at"] == "2026-01-02T03:04:05Z"
    assert "generated 2026-01-02T03:04:05Z" in md
    assert "2026" not in api.render_report(report, "md")


def test_html_is_self_contained_with_plotly_inlined_once():
    # arrange
    report = rg.report_of("decode_eager")
    # act
    page = api.render_report(report, "html")
    # assert
    outside = rg.without_plotly_js(page)
    assert page.count(f'<script id="{PLOTLY_JS_ID}">') == 1
    assert len(page) - len(outside) > 1_000_000  # the bundle itself is in the page
    assert "<script src" not in page and "cdn.plot.ly" not in outside and "https://" not in outside
    assert outside.count("Plotly.newPlot(") == len(report_figures(report)) >= 4
    assert "<details>" in outside and "Where the extra time goes" in outside
    assert 'id="figures"' in outside and 'id="evidence-figures"' in outside


def test_html_falls_back_to_its_own_figures_without_the_dashboard(monkeypatch: pytest.MonkeyPatch):
    # arrange: the dashboard package is not installed
    import ccdiag.report.html as html_report

    monkeypatch.setattr(html_report, "_app_figures", lambda: None)
    report = rg.report_of("decode_eager")
    # act
    figures = report_figures(report)
    page = api.render_report(report, "html")
    # assert
    assert [t for _, t, _ in figures] == [t for t, _ in html_report.REPORT_FIGURES]
    assert rg.without_plotly_js(page).count("Plotly.newPlot(") == len(figures)


def test_markdown_has_every_section():
    # arrange
    md = rg.golden_path("decode_eager", "md").read_text(encoding="utf-8")
    # act
    headings = [line for line in md.splitlines() if line.startswith("#")]
    headings = [h for h in headings if h not in ("### Warnings", "### Notes")]
    # assert
    assert headings == [
        "## ccdiag: CC slowdown diagnosis",
        "### Per-step time",
        "### Where the extra time goes",
        "### Evidence",
        "### Fixes, by predicted recovery",
        "### Rules",
        "### Skipped events",
        "### Environment",
    ]
    assert md.count("<details>") == md.count("</details>") >= 3
    for needle in ("fired", "clean", "skipped", "how predicted", "NVIDIA H200", "PyTorch"):
        assert needle in md
