"""The "What if CC" page in a real browser (Playwright + Debian's Chromium against ``ccdiag app``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_app_browser import ARGS, ARTIFACTS, CHROMIUM, serve

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    trace_dir = tmp_path_factory.mktemp("traces")
    with serve(trace_dir, tmp_path_factory.mktemp("log") / "server.log") as u:
        yield u


def test_whatif_predicts_the_default_trace_and_follows_the_platform_picker(url: str) -> None:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page: Any = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_default_timeout(90_000)
        # act: open the page from the navigation, then switch the platform to H100
        page.goto(url + "/")
        page.click("nav >> text=What if CC")
        head = page.locator("#whatif-headline")
        sync_api.expect(head).to_contain_text("Under CC on B200 this step takes", timeout=120_000)
        page.click("#whatif-platform")
        page.get_by_role("option", name="H100", exact=True).click()
        sync_api.expect(head).to_contain_text("Under CC on H100 this step takes", timeout=120_000)
        # assert: the partition figure is drawn and the fixes are listed
        page.wait_for_function(
            "() => [...document.querySelectorAll('.figure')].every(g => g.querySelector('.main-svg'))"
        )
        assert page.locator("tr[data-fix=cuda_graphs]").count() == 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "whatif.png"), full_page=True)
        browser.close()
    assert not errors, errors
