"""The README's generated sections: text between ``<!-- name:begin -->`` and ``<!-- name:end -->``
markers, written by the validation scripts (``validate_samples.py``, ``validate_multigpu.py``)."""

from __future__ import annotations

import re


def with_section(text: str, begin: str, end: str, section: str, after: str | None = None) -> str:
    """``text`` with the section between ``begin`` and ``end`` replaced by ``section``. Without
    the markers, the block goes right after ``after`` (unchanged text if ``after`` is missing),
    or at the end when ``after`` is None."""
    block = f"{begin}\n{section}\n{end}"
    if begin in text:
        return re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    if after is None:
        return text.rstrip() + "\n\n" + block + "\n"
    return text.replace(after, after + "\n\n" + block, 1) if after in text else text
