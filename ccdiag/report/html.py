"""The report as one self-contained HTML file with the dashboard's figures, for offline viewing.

The text is the Markdown report (:mod:`ccdiag.report.markdown`) rendered to HTML, so the two
never disagree; the figures come after the partition table. plotly.js is inlined once in the
head (no CDN, no network), each figure is a ``<div>`` with a fixed id and one
``Plotly.newPlot`` call. Figures come from ``ccdiag.app.figures.REPORT_FIGURES`` when the
dashboard provides it, else from :mod:`ccdiag.report.figures` (see :func:`figure_set`).

Deterministic: no random ids, no dates unless ``generated_at`` is set.
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from markdown_it import MarkdownIt

from ccdiag.report import markdown as md
from ccdiag.report.canonical import canonical
from ccdiag.report.figures import REPORT_FIGURES, FigureFn
from ccdiag.verdict import Report

PLOTLY_JS_ID = "plotly-js"
"""id of the one ``<script>`` element that holds the inlined plotly.js bundle."""

_CSS = """
body{font:15px/1.5 -apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;
color:#1f2328;margin:0;background:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}
h2{border-bottom:1px solid #d1d9e0;padding-bottom:.3em}
h3{margin-top:1.6em}
blockquote{margin:0;padding:.2em 1em;border-left:.25em solid #d55e00;background:#fff8f2}
table{border-collapse:collapse;margin:.6em 0;display:block;overflow-x:auto}
th,td{border:1px solid #d1d9e0;padding:4px 10px;vertical-align:top}
th{background:#f6f8fa}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:85%;
background:#eff1f3;padding:.1em .3em;border-radius:4px}
details{border:1px solid #d1d9e0;border-radius:6px;padding:.4em .8em;margin:.6em 0}
summary{cursor:pointer}
figure{margin:1em 0}
"""


def figure_set() -> Sequence[tuple[str, FigureFn]]:
    """The figures to embed: the dashboard's ``REPORT_FIGURES`` when it has them, else ours."""
    try:
        from ccdiag.app import figures as app_figures
    except ImportError:
        return REPORT_FIGURES
    return getattr(app_figures, "REPORT_FIGURES", None) or REPORT_FIGURES


def plotly_js() -> str:
    """The plotly.js bundle of the installed plotly (inlined once per report)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def figures_html(report: Report, figures: Sequence[tuple[str, FigureFn]]) -> str:
    """One ``<figure>`` per figure function: a div with a fixed id and its newPlot call."""
    out = []
    for i, (title, fn) in enumerate(figures, 1):
        fig = fn(report)
        div_id = f"ccdiag-figure-{i}"
        spec = fig.to_plotly_json()
        data = json.dumps(spec.get("data", []), sort_keys=True, default=_json_default)
        layout = json.dumps(spec.get("layout", {}), sort_keys=True, default=_json_default)
        config = json.dumps({"displaylogo": False, "responsive": True}, sort_keys=True)
        out.append(
            f'<figure>\n<div id="{div_id}" role="img" aria-label="{_html.escape(title)}" '
            f'style="height:{fig.layout.height or 360}px"></div>\n'
            f'<script>Plotly.newPlot("{div_id}", {_script_safe(data)}, '
            f"{_script_safe(layout)}, {config});</script>\n</figure>"
        )
    return "\n".join(out)


def _json_default(v: Any) -> Any:
    """numpy arrays and scalars inside plotly figure specs."""
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"not JSON serializable: {type(v).__name__}")


def _script_safe(text: str) -> str:
    """JSON that cannot close the surrounding ``<script>`` element."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def without_plotly_js(page: str) -> str:
    """The page with the inlined plotly.js replaced by a one-line stand-in naming its version.

    For goldens and diffs: the ~4.6 MB bundle is the installed plotly's, not ccdiag's output.
    """
    head = f'<script id="{PLOTLY_JS_ID}">\n'
    start = page.index(head) + len(head)
    end = page.index("\n</script>", start)
    m = re.search(r"plotly\.js v[0-9][0-9A-Za-z.+-]*", page[start : start + 400])
    version = m.group(0) if m else "plotly.js"
    return page[:start] + f"/* {version} inlined here ({end - start:,} characters) */" + page[end:]


def html_from_data(
    d: Mapping[str, Any], figures: Sequence[tuple[str, FigureFn]], *, plotly: str
) -> str:
    """The HTML page of canonical report data, with ``figures`` after the partition."""
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    report = Report.model_validate(d)
    body = []
    for sid, fn in md.SECTIONS:
        text = fn(d)
        if text:
            body.append(f'<section id="{sid}">\n{renderer.render(text)}</section>')
        if sid == "attribution" and figures:
            body.append(
                '<section id="figures">\n<h3>Figures</h3>\n'
                + figures_html(report, figures)
                + "\n</section>"
            )
    title = _html.escape(f"ccdiag: {d['verdict'] or 'diagnosis'}")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="generator" content="ccdiag {_html.escape(d["ccdiag_version"])}">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n"
        f'<script id="{PLOTLY_JS_ID}">\n{plotly}\n</script>\n'
        "</head>\n<body>\n<main>\n" + "\n".join(body) + "\n</main>\n</body>\n</html>\n"
    )


def render_html(
    report: Report,
    *,
    keep_paths: bool = False,
    timestamp: datetime | str | None = None,
    sources: Mapping[str, str] | None = None,
) -> str:
    """The report as a self-contained HTML page (scrubbed unless ``keep_paths``).

    Args:
        report: the diagnosis.
        keep_paths: keep paths and names as read; show the sources as given in ``sources``.
        timestamp: print this generation time (None: no time, byte-identical reruns).
        sources: the paths the user gave, ``{"baseline": ..., "treatment": ...}``.

    Returns:
        The HTML text (plotly.js inlined: about 4–5 MB).
    """
    d = canonical(report, keep_paths=keep_paths, timestamp=timestamp, sources=sources)
    return html_from_data(d, figure_set(), plotly=plotly_js())
