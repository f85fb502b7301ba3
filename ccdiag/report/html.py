"""The report as one self-contained HTML file with the dashboard's figures, for offline viewing.

The text is the Markdown report (:mod:`ccdiag.report.markdown`) rendered to HTML, so the two
never disagree. The overview figures come after the partition table, each mechanism's evidence
figures after the evidence. plotly.js is inlined once in the head (no CDN, no network); each
figure is a ``<div>`` with a fixed id and one ``Plotly.newPlot`` call. The figures are the
dashboard's (``ccdiag.app.figures``, pure ``Report -> go.Figure`` functions) when that module is
installed, else the minimal set in :mod:`ccdiag.report.figures` (see :func:`report_figures`).

Deterministic: no random ids, no dates unless ``generated_at`` is set.
"""

from __future__ import annotations

import html as _html
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from markdown_it import MarkdownIt

from ccdiag.report import markdown as md
from ccdiag.report.canonical import canonical
from ccdiag.report.figures import REPORT_FIGURES
from ccdiag.verdict import Report

PLOTLY_JS_ID = "plotly-js"
"""id of the one ``<script>`` element that holds the inlined plotly.js bundle."""
TEMPLATES_ID = "plotly-templates"
"""id of the ``<script>`` element that defines the figures' plotly templates, once each."""
TEMPLATES_JS = "CCDIAG_TEMPLATES"

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


Figures = list[tuple[str, str, Any]]
"""(group, title, figure): group ``overview`` or a mechanism id."""


def _app_figures() -> Any:
    """The dashboard's figure module (``ccdiag.app.figures``), or None when not installed."""
    try:
        from ccdiag.app import figures as app_figures
    except ImportError:
        return None
    return app_figures


def report_figures(report: Report) -> Figures:
    """The figures to embed, in order: the dashboard's when available, else ours.

    ``ccdiag.app.figures.REPORT_FIGURES`` ((title, fn) pairs), when the dashboard defines it,
    is used as is; otherwise its overview figures (step time, waterfall, top fixes, ledger) and
    each attributed mechanism's figures (``mechanism_figures``). Without the dashboard module
    (or without those functions): :data:`ccdiag.report.figures.REPORT_FIGURES`.
    """
    app = _app_figures()
    custom = getattr(app, "REPORT_FIGURES", None)
    overview: list[Any] = [
        getattr(app, n, None) for n in ("step_time", "delta_waterfall", "top_fixes", "ledger")
    ]
    per_mechanism: Any = getattr(app, "mechanism_figures", None)
    if custom or not all(overview) or per_mechanism is None:
        return [("overview", title, fn(report)) for title, fn in (custom or REPORT_FIGURES)]
    out: Figures = [("overview", _title(f), f) for f in (fn(report) for fn in overview)]
    for a in report.attribution:
        out += [(a.mechanism, _title(f), f) for f in per_mechanism(report, a.mechanism)]
    return out


def _title(fig: Any) -> str:
    text = getattr(getattr(fig.layout, "title", None), "text", None) or "figure"
    return re.sub(r"<[^>]+>.*", "", str(text)).strip() or "figure"


def plotly_js() -> str:
    """The plotly.js bundle of the installed plotly (inlined once per report)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def figures_html(figures: Sequence[tuple[str, Any]], templates: list[str], first: int = 1) -> str:
    """One ``<figure>`` per figure: a div with a fixed id and its ``Plotly.newPlot`` call.

    Each figure's plotly template (its theme, several KB) is stored once in ``templates`` and
    referenced as ``CCDIAG_TEMPLATES[i]`` instead of being repeated in every figure.
    """
    out = []
    for i, (title, fig) in enumerate(figures, first):
        div_id = f"ccdiag-figure-{i}"
        spec = fig.to_plotly_json()
        layout_spec = dict(spec.get("layout", {}))
        template = layout_spec.pop("template", None)
        data = json.dumps(spec.get("data", []), sort_keys=True, default=_json_default)
        layout = _script_safe(json.dumps(layout_spec, sort_keys=True, default=_json_default))
        if template is not None:
            key = json.dumps(template, sort_keys=True, default=_json_default)
            if key not in templates:
                templates.append(key)
            layout = (
                f"Object.assign({{template: {TEMPLATES_JS}[{templates.index(key)}]}}, {layout})"
            )
        config = json.dumps({"displaylogo": False, "responsive": True}, sort_keys=True)
        out.append(
            f'<figure>\n<div id="{div_id}" role="img" aria-label="{_html.escape(title)}" '
            f'style="height:{fig.layout.height or 360}px"></div>\n'
            f'<script>Plotly.newPlot("{div_id}", {_script_safe(data)}, {layout}, {config});'
            "</script>\n</figure>"
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
    """The page with plotly's own parts (the plotly.js bundle, the theme templates) replaced by
    one-line stand-ins naming the plotly.js version.

    For goldens and diffs: those ~4.6 MB are the installed plotly's, not ccdiag's output.
    """

    def stand_in(text: str, script_id: str, what: Callable[[str], str]) -> str:
        head = f'<script id="{script_id}">\n'
        start = text.index(head) + len(head)
        end = text.index("\n</script>", start)
        return text[:start] + f"/* {what(text[start:end])} */" + text[end:]

    def version(bundle: str) -> str:
        m = re.search(r"plotly\.js v[0-9][0-9A-Za-z.+-]*", bundle[:400])
        return f"{m.group(0) if m else 'plotly.js'} inlined here"

    page = stand_in(page, PLOTLY_JS_ID, version)
    return stand_in(page, TEMPLATES_ID, lambda _: f"{TEMPLATES_JS}: the figures' plotly templates")


def _figure_sections(figures: Figures, templates: list[str]) -> tuple[str, str]:
    """(overview section, per-mechanism section) HTML."""
    overview = [(t, f) for g, t, f in figures if g == "overview"]
    groups: dict[str, list[tuple[str, Any]]] = {}
    for g, t, f in figures:
        if g != "overview":
            groups.setdefault(g, []).append((t, f))
    head = ""
    if overview:
        head = (
            '<section id="figures">\n<h3>Figures</h3>\n'
            + figures_html(overview, templates)
            + "\n</section>"
        )
    parts, n = [], len(overview) + 1
    for g, figs in groups.items():
        parts.append(
            f"<h4><code>{_html.escape(g)}</code></h4>\n" + figures_html(figs, templates, n)
        )
        n += len(figs)
    tail = ""
    if parts:
        tail = '<section id="evidence-figures">\n<h3>Evidence figures</h3>\n' + "\n".join(parts) + "\n</section>"  # fmt: skip
    return head, tail


def html_from_data(d: Mapping[str, Any], figures: Figures, *, plotly: str) -> str:
    """The HTML page of canonical report data: figures after the partition and the evidence."""
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    templates: list[str] = []
    overview, per_mechanism = _figure_sections(figures, templates)
    after = {"attribution": overview, "evidence": per_mechanism}
    body = []
    for sid, fn in md.SECTIONS:
        text = fn(d)
        if text:
            body.append(f'<section id="{sid}">\n{renderer.render(text)}</section>')
        if after.get(sid):
            body.append(after[sid])
    title = _html.escape(f"ccdiag: {d['verdict'] or 'diagnosis'}")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="generator" content="ccdiag {_html.escape(d["ccdiag_version"])}">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n"
        f'<script id="{PLOTLY_JS_ID}">\n{plotly}\n</script>\n'
        f'<script id="{TEMPLATES_ID}">\nconst {TEMPLATES_JS} = [{_script_safe(",".join(templates))}];\n</script>\n'
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
    figures = report_figures(Report.model_validate(d))
    return html_from_data(d, figures, plotly=plotly_js())
