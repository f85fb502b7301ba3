"""Rendering of a prediction (``ccdiag predict``, ``ccdiag report TRACE``): terminal and Markdown.

Every number goes through :mod:`ccdiag.report.units` (the one formatter). Pure functions of a
``ccdiag.predict.Prediction``.
"""

from __future__ import annotations

from typing import Any

from ccdiag.report import units

_LABELS = {
    "launch_toll": "Kernel launch toll",
    "serialized_copies": "Serialized copies",
    "blocked_non_blocking": "Blocked non_blocking copies",
    "sync_stall": "Sync stalls",
    "encrypted_collectives": "Encrypted collectives",
    "uvm_migration": "UVM migration",
    "one_time_setup": "One-time setup (context creation)",
}


def _label(m: Any) -> str:
    base = _LABELS.get(m.mechanism, m.mechanism)
    return f"{base} ({m.path})" if m.path else base


def _slow(p: Any) -> str:
    b = p.baseline_step_ns
    return f"{p.predicted_step_ns.median / b:.2f}x" if b else "—"


def headline(p: Any) -> str:
    """One sentence: what CC costs this step on the platform, and what the best fixes give."""
    d = units.duration
    text = (
        f"Under CC on {p.platform.upper()} this step takes {d(p.predicted_step_ns.median)} "
        f"(band {d(p.predicted_step_ns.low)} – {d(p.predicted_step_ns.high)}; CC off "
        f"{d(p.baseline_step_ns)}, {_slow(p)})"
    )
    for fx in p.fixes[:3]:
        text += f"; with {fx.fix.replace('_', ' ')} {d(fx.predicted_step_ns)}"
    return text + "."


def _table_with_sentences(
    con: Any,
    heads: list[str],
    sentence_head: str,
    rows: list[tuple[str, list[str], str]],
    no_wrap: range,
) -> None:
    """Print a table of (label, cells, sentence) rows (:class:`ccdiag.report.layout.SentenceTable`:
    the sentence as the last column on a wide console, else as ``label: sentence`` lines under
    the table); the columns in ``no_wrap`` never wrap."""
    from rich import box
    from rich.table import Table

    from ccdiag.report.layout import SentenceTable

    con.print(
        SentenceTable(
            lambda: Table(*heads, box=box.SIMPLE),
            sentence_head,
            [([label, *cells], sentence, None) for label, cells, sentence in rows],
            no_wrap=list(no_wrap),
        )
    )


def render_text(p: Any, console: Any = None) -> None:
    """Print the prediction on a terminal (rich)."""
    from rich.console import Console
    from rich.text import Text

    con = console or Console()
    d = units.duration
    # text, not markup: the trace's file name and the platform file's description are the user's
    con.print(headline(p), style="bold", markup=False)
    con.print(
        f"trace {p.source} ({p.format}, {p.n_steps} steps); platform {p.platform}: "
        f"{p.platform_description}",
        markup=False,
    )
    if p.one_time_ns and not p.one_time_in_steps:
        con.print(f"one-time context creation under CC: +{d(p.one_time_ns)} before the first step")
    delta = p.predicted_step_ns.median - p.baseline_step_ns
    _table_with_sentences(
        con,
        ["mechanism", "per step", "share", "paid/step", "count/step"],
        "how",
        [
            (
                _label(m),
                [
                    d(m.ns_per_step, signed=True),
                    units.share(m.ns_per_step / delta) if delta else "—",
                    d(m.paid_ns_per_step, signed=True),
                    units.number(m.count_per_step),
                ],
                m.text,
            )
            for m in p.mechanisms
        ],
        range(1, 5),  # the numbers whole; a long mechanism label may wrap
    )
    con.print(
        "per step: what the mechanism adds to the step time; paid: what it costs where it is "
        "paid (calls, GPU rows) before any overlap (— where only the replay can tell)"
    )
    if p.fixes:
        _table_with_sentences(
            con,
            ["fix", "CC step with it", "recovers", "without CC", "alternative to"],
            "what",
            [
                (
                    fx.fix,
                    [
                        d(fx.predicted_step_ns),
                        d(fx.recovery_ns_per_step),
                        d(fx.recovery_without_cc_ns_per_step),
                        ", ".join(fx.alternative_to) or "—",
                    ],
                    fx.text,
                )
                for fx in p.fixes
            ],
            range(4),
        )
        con.print(
            "without CC: what the same fix saves on the CC-off run (the part of its recovery that "
            "is not CC's; — where the model charges the fix only through CC's costs)"
        )
        if any(fx.alternative_to for fx in p.fixes):
            con.print("fixes marked as alternatives replace each other: pick one, do not add them")
    for w in p.warnings:
        con.print(Text.assemble(("warning:", "yellow"), f" {w}"))


def render_markdown(p: Any) -> str:
    """The prediction as a Markdown section (``ccdiag report TRACE``)."""
    from ccdiag.report.markdown import esc

    d = units.duration
    lines = [
        f"## What CC will cost: {esc(p.platform.upper())} (predicted from the CC-off trace)",
        "",
        esc(headline(p)),
        "",
        f"Trace `{esc(p.source)}` ({esc(p.format)}, {p.n_steps} steps). Platform `{esc(p.platform)}`: "
        f"{esc(p.platform_description)}.",
        "",
        "| mechanism | per step | paid per step | count per step | how |",
        "|---|---:|---:|---:|---|",
    ]
    for m in p.mechanisms:
        lines.append(
            f"| {esc(_label(m))} | {d(m.ns_per_step, signed=True)} | "
            f"{d(m.paid_ns_per_step, signed=True)} | "
            f"{units.number(m.count_per_step)} | {esc(m.text)} |"
        )
    lines += [
        "",
        "*Per step*: what the mechanism adds to the step time; *paid*: what it costs where it is "
        "paid (calls, GPU rows) before any overlap (— where only the replay can tell).",
    ]
    lines += [
        "",
        f"Steady state (no context creation): {d(p.steady_step_ns.median)} "
        f"(band {d(p.steady_step_ns.low)} – {d(p.steady_step_ns.high)}).",
    ]
    if p.fixes:
        lines += [
            "",
            "| fix | CC step with it | recovers | without CC | alternative to |",
            "|---|---:|---:|---:|---|",
        ]
        for fx in p.fixes:
            lines.append(
                f"| `{esc(fx.fix)}`: {esc(fx.text)} | {d(fx.predicted_step_ns)} | "
                f"{d(fx.recovery_ns_per_step)} | {d(fx.recovery_without_cc_ns_per_step)} | "
                f"{esc(', '.join(fx.alternative_to) or '—')} |"
            )
        lines += [
            "",
            "Fixes marked as alternatives replace each other: pick one, never add them. *Without "
            "CC*: what the same fix saves on the CC-off run, the part of its recovery that is not "
            "CC's (— where the model charges the fix only through CC's costs).",
        ]
    lines += [
        "",
        f"How: {esc(p.method)}.",
        "",
        "<details><summary>Constants and sources</summary>",
        "",
    ]
    lines += ["| constant | value | range | source |", "|---|---:|---|---|"]
    for key, c in p.constants.items():
        lines.append(
            f"| `{key}` | {units.number(c['value'])} {esc(c['unit'])} | "
            f"{units.number(c['low'])} – {units.number(c['high'])} | {esc(c['source'])} |"
        )
    lines += ["", "</details>"]
    for w in p.warnings:
        lines += ["", f"> **Warning:** {esc(w)}"]
    return "\n".join(lines) + "\n"


def render_html(p: Any) -> str:
    """The Markdown section as a self-contained HTML page."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(render_markdown(p))
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>ccdiag prediction</title>'
        "</head><body>\n" + body + "</body></html>\n"
    )
