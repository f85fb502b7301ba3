"""The user guide: its links resolve, it covers every rule, the README links it."""

from __future__ import annotations

import re
from pathlib import Path

from ccdiag import api

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "user_guide.md"
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_of_the_guide_and_readme_resolve():
    # arrange
    docs = [GUIDE, ROOT / "README.md"]
    # act
    missing = [
        f"{doc.name}: {target}"
        for doc in docs
        for target in _LINK.findall(doc.read_text(encoding="utf-8"))
        if "://" not in target and not (doc.parent / target).exists()
    ]
    # assert
    assert not missing, missing


def test_guide_lists_every_rule_with_its_generated_page():
    # arrange
    text = GUIDE.read_text(encoding="utf-8")
    # act
    rows = {r["code"]: f"(rules/{r['name']}.md)" for r in api.list_rules()}
    # assert
    assert all(page in text for page in rows.values()), rows
    assert "(rules/index.md)" in text


def test_readme_links_the_guide():
    assert "(docs/user_guide.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_guide_anchors_exist():
    # arrange
    text = GUIDE.read_text(encoding="utf-8")
    headings = {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, flags=re.M)
    }
    # act
    anchors = re.findall(r"\]\(#([^)]+)\)", text)
    # assert
    assert anchors and all(a in headings for a in anchors), set(anchors) - headings
