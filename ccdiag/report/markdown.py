"""The report as GitHub-flavoured Markdown, ready to paste into an issue (``ccdiag report --md``).

Sections, in order: the verdict; per-step times with the noise; the partition (mechanism,
ns/step, share, confidence); the evidence of each mechanism in a collapsible ``<details>``; the
fixes with their predicted recovery and how it was predicted; the rule outcomes (fired / clean /
skipped with the reason); the critical-path ledger; skipped-event counts; the environment (GPU,
driver, CUDA, PyTorch, NCCL, CC mode, trace sources and sizes, profiler, ccdiag version);
warnings and notes.

Pure: reads the canonical data (:func:`ccdiag.report.canonical.canonical`, already scrubbed),
returns text. No dates unless the report carries ``generated_at``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ccdiag.report import units
from ccdiag.report.canonical import canonical
from ccdiag.report.legend import PER_STEP_AND_PAID
from ccdiag.verdict import Report

Data = Mapping[str, Any]
_ESCAPE = re.compile(r"([\\`*\[\]|])")
_PCT_KEYS = ("p10", "p50", "p90")


def esc(text: object) -> str:
    """Text for a Markdown paragraph or table cell: no markup, no HTML, one line."""
    s = " ".join(str(text).split())
    s = _ESCAPE.sub(r"\\\1", s)
    return s.replace("<", "&lt;").replace(">", "&gt;")


def code(text: object) -> str:
    """An inline code span that survives any backticks and table pipes in ``text``."""
    s = " ".join(str(text).split()).replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def table(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A GFM table; columns in ``right`` are right-aligned (numbers)."""
    right = right or set()
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _unit_key(path: list[str]) -> str:
    """The path component whose name says the unit (``latency_ns`` for ``latency_ns.p50``)."""
    for part in reversed(path):
        p = part.lower()
        if p.endswith("_ns") or "bytes" in p or p.startswith("share") or p.endswith("ns_per_step"):
            return part
    return path[-1] if path else ""


def compact(path: list[str], v: Any) -> str:
    """One cell for any value: numbers by unit, percentile dicts as ``p10 · p50 · p90``."""
    if isinstance(v, Mapping):
        keys = [k for k in _PCT_KEYS if k in v] if all(k in v for k in _PCT_KEYS) else list(v)
        return " · ".join(f"{esc(k)} {compact([*path, k], v[k])}" for k in keys) or "—"
    if isinstance(v, list):
        return ", ".join(compact(path, x) for x in v) or "—"
    if isinstance(v, str):
        return esc(v)
    if v is None:
        return "—"
    return units.quantity(_unit_key(path), v)


# -- sections --------------------------------------------------------------------------------


def head(d: Data) -> str:
    """Title, the one-line verdict, what was compared."""
    b, t, st = d["baseline"], d["treatment"], d["step_ns"]
    mode = " · **host-only treatment** (no GPU activity: CC mode `on`?)" * (
        d["mode"] == "host_only"
    )
    whole = " · whole-program traces (one step each)" * bool(d["whole_program"])
    return (
        "## ccdiag: CC slowdown diagnosis\n\n"
        f"> **{esc(d['verdict'] or 'no verdict')}**\n\n"
        f"Baseline (CC off) {code(b['source'])} ({esc(b['profiler'])}, {b['steps']} steps) vs "
        f"treatment (CC on) {code(t['source'])} ({esc(t['profiler'])}, {t['steps']} steps)"
        f" · {st['n_steps']} aligned steps{mode}{whole}"
    )


def steps(d: Data) -> str:
    """Per-step times of both runs and the delta, with the noise."""
    st = d["step_ns"]
    rows = []
    for name, sp in (("baseline", st["baseline_spread"]), ("treatment", st["treatment_spread"])):
        rows.append([name, *(units.duration(sp[k]) for k in ("median", "p10", "p90", "mean"))])
        rows[-1].append(str(sp["n"]))
    ds = st.get("delta_spread")
    if ds:
        cells = [units.duration(ds[k], signed=True) for k in ("median", "p10", "p90", "mean")]
        rows.append(["**delta**", *cells, str(ds["n"])])
    lo, hi = st["delta_ci95"]
    verdict = "**significant**" if st["significant"] else "**not significant** (within the noise)"
    return (
        "### Per-step time\n\n"
        + table(["", "median", "p10", "p90", "mean", "steps"], rows, right={1, 2, 3, 4, 5})
        + f"\n\nRatio {units.number(st['ratio'])}x. 95 % CI of the median delta: "
        f"{units.duration(lo, signed=True)} … {units.duration(hi, signed=True)} — {verdict}"
        + (f" ({esc(st['noise_method'])})." if st.get("noise_method") else ".")
    )


def attribution(d: Data) -> str:
    """The partition: one row per mechanism, unattributed, total."""
    part = d.get("partition") or {}
    total = part.get("total_ns_per_step", d["step_ns"]["delta"])
    rows = []
    for a in d["attribution"]:
        sp = a.get("spread")
        spread = f"{units.duration(sp['p10'])} … {units.duration(sp['p90'])}" if sp else "—"
        rows.append(
            [
                code(a["mechanism"]),
                units.duration(a["ns_per_step"], signed=True),
                units.duration(a.get("paid_ns_per_step"), signed=True),
                units.share(a["share"]),
                spread,
                a["confidence"],
                f"{code(a['rule'])} {esc(a['summary'])}",
            ]
        )
    un = d["unattributed_ns_per_step"]
    rows.append(["unattributed", units.duration(un, signed=True), "—", units.share(d["unattributed_share"]), "—", "—", "what no rule explains"])  # fmt: skip
    rows.append(["**total**", f"**{units.duration(total, signed=True)}**", "—", "100.0 %", "—", "—", esc(part.get("basis", ""))])  # fmt: skip
    text = "### Where the extra time goes\n\n" + table(
        ["mechanism", "per step", "paid", "share", "per-step p10 … p90", "confidence", "finding"],
        rows,
        right={1, 2, 3, 4},
    )
    text += f"\n\n*{PER_STEP_AND_PAID[0].upper()}{PER_STEP_AND_PAID[1:]}.*"
    steady = part.get("steady_state_ns_per_step")
    if d["whole_program"] and steady is not None and steady != total:
        text += f"\n\nSteady state (without one-time setup): {units.duration(steady, signed=True)} per step."
    return text


def _evidence_parts(ev: Mapping[str, Any]) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """Evidence split into paired rows (baseline vs treatment), plain rows and list tables."""
    paired: list[list[str]] = []
    plain: list[list[str]] = []
    tables: list[str] = []

    def visit(path: list[str], v: Any) -> None:
        label = code(".".join(path))
        if isinstance(v, Mapping) and "baseline" in v and "treatment" in v:
            paired.append([label, compact(path, v["baseline"]), compact(path, v["treatment"])])
            for k in v:
                if k not in ("baseline", "treatment"):
                    visit([*path, k], v[k])
        elif isinstance(v, Mapping) and v:
            for k in v:
                visit([*path, k], v[k])
        elif isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
            cols = list(dict.fromkeys(k for x in v for k in x))
            rows = [[compact([*path, c], x.get(c)) for c in cols] for x in v]
            tables.append(f"{label}\n\n" + table([esc(c) for c in cols], rows))
        else:
            plain.append([label, compact(path, v)])

    for key in ev:
        visit([key], ev[key])
    return paired, plain, tables


def _one_evidence(a: Mapping[str, Any]) -> str:
    summary = (
        f"<summary><b>{esc(a['mechanism'])}</b> · {esc(a['rule'])} · "
        f"{units.duration(a['ns_per_step'], signed=True)} per step ({units.share(a['share'])}) · "
        f"confidence {esc(a['confidence'])}</summary>"
    )
    blocks = [esc(a["summary"])]
    if a.get("parts"):
        rows = [[code(k), units.duration(v, signed=True)] for k, v in a["parts"].items() if v]
        if rows:
            blocks.append("How the ns per step were built (ledger category → ns per step):\n\n" + table(["part", "per step"], rows, right={1}))  # fmt: skip
    paired, plain, tables = _evidence_parts(a.get("evidence") or {})
    if paired:
        blocks.append(table(["evidence", "baseline", "treatment"], paired))
    if plain:
        blocks.append(table(["evidence", "value"], plain))
    blocks.extend(tables)
    return "<details>\n" + summary + "\n\n" + "\n\n".join(blocks) + "\n\n</details>"


def evidence(d: Data) -> str:
    """One collapsible block per mechanism with every number the finding rests on."""
    if not d["attribution"]:
        return ""
    blocks = [_one_evidence(a) for a in d["attribution"]]
    return "### Evidence\n\n" + "\n\n".join(blocks)


def fixes(d: Data) -> str:
    """Recommendations ranked by predicted recovery, with how each was predicted."""
    recs = d["recommendations"]
    if not recs:
        return "### Fixes\n\nNo fix to recommend: no mechanism was found."
    rows = [
        [
            str(i),
            code(r["fix"]),
            units.duration(r["predicted_recovery_ns_per_step"]),
            units.share(r["share"]),
            esc(r["text"]),
            esc(r["method"]),
        ]
        for i, r in enumerate(recs, 1)
    ]
    header = ["#", "fix", "predicted recovery / step", "of the gap", "what to do", "how predicted"]
    return "### Fixes, by predicted recovery\n\n" + table(header, rows, right={0, 2, 3})


def rules(d: Data) -> str:
    """Every rule's outcome: fired, clean (checked, nothing found) or skipped (could not check)."""
    rows = [
        [
            code(r["code"]),
            code(r["name"]),
            code(r["mechanism"]),
            f"**{r['outcome']}**" if r["outcome"] == "fired" else r["outcome"],
            esc(r["reason"]) or "—",
        ]
        for r in d["rules"]
    ]
    counts = {o: sum(r["outcome"] == o for r in d["rules"]) for o in ("fired", "clean", "skipped")}
    line = ", ".join(f"{n} {o}" for o, n in counts.items())
    return (
        "### Rules\n\n"
        + f"{line}. *clean*: checked, nothing found; *skipped*: could not be checked on these traces.\n\n"
        + table(["rule", "name", "mechanism", "outcome", "reason"], rows)
    )


def ledger(d: Data) -> str:
    """The critical-path ledger (mean per step), collapsed."""
    part = d.get("partition") or {}
    rows = [
        [
            code(f"{r['side']}: {r['category']}"),
            *(
                units.duration(r[k], signed=k == "delta")
                for k in ("baseline", "treatment", "delta")
            ),
        ]  # fmt: skip
        for r in part.get("ledger", [])
        if r["baseline"] or r["treatment"]
    ]
    if not rows:
        return ""
    return (
        "<details>\n<summary>Critical-path ledger (mean per step)</summary>\n\n"
        "The main host thread's exposed time per category plus GPU-critical time (where the host "
        "waited for the GPU); the deltas add up to the step delta.\n\n"
        + table(["category", "baseline", "treatment", "delta"], rows, right={1, 2, 3})
        + "\n\n</details>"
    )


def skipped(d: Data) -> str:
    """Events the parsers did not turn into rows, by reason, both runs."""
    b, t = d["baseline"]["skipped"], d["treatment"]["skipped"]
    reasons = sorted(set(b) | set(t))
    if not reasons:
        return "### Skipped events\n\nNone: every event of both traces was read."
    rows = [[esc(r), units.number(b.get(r, 0)), units.number(t.get(r, 0))] for r in reasons]
    return (
        "### Skipped events\n\nEvents not turned into rows, counted by reason (nothing is dropped "
        "silently):\n\n" + table(["reason", "baseline", "treatment"], rows, right={1, 2})
    )


_ENV_ROWS = (
    ("GPU", "gpu"),
    ("driver", "driver_version"),
    ("CUDA runtime", "cuda_runtime"),
    ("CUDA driver API", "cuda_driver"),
    ("PyTorch", "torch_version"),
    ("NCCL", "nccl_version"),
    ("CC mode", "cc_mode"),
    ("ranks", "ranks"),
    ("world size", "world_size"),
    ("events read", "n_events"),
    ("trace format version", "schema_version"),
)


def environment(d: Data) -> str:
    """GPU, driver and library versions, CC mode, trace sources and sizes, profiler, ccdiag."""
    b, t = d["baseline"], d["treatment"]

    def meta(side: Mapping[str, Any], key: str) -> str:
        v = side["metadata"].get(key)
        return "not recorded" if v in (None, "", []) else compact([key], v)

    rows = [
        ["source", code(b["source"]), code(t["source"])],
        ["format", esc(b["format"]), esc(t["format"])],
        ["profiler", esc(b["profiler"]), esc(t["profiler"])],
        ["size", meta(b, "size_bytes"), meta(t, "size_bytes")],
        [
            "steps (marker)",
            f"{b['steps']} ({esc(b['step_marker'] or '—')})",
            f"{t['steps']} ({esc(t['step_marker'] or '—')})",
        ],  # fmt: skip
        *([label, meta(b, key), meta(t, key)] for label, key in _ENV_ROWS),
    ]
    stamp = f" · generated {esc(d['generated_at'])}" if d.get("generated_at") else ""
    return (
        "### Environment\n\n"
        + table(["", "baseline", "treatment"], rows)
        + f"\n\nccdiag {esc(d['ccdiag_version'])} · report contract {esc(d['schema_version'])}{stamp}"
    )


def remarks(d: Data) -> str:
    """Warnings and notes of the analysis."""
    out = []
    if d["warnings"]:
        out.append("### Warnings\n\n" + "\n".join(f"- {esc(w)}" for w in d["warnings"]))
    if d["notes"]:
        out.append("### Notes\n\n" + "\n".join(f"- {esc(n)}" for n in d["notes"]))
    return "\n\n".join(out)


def footer(d: Data) -> str:
    """How to reproduce the report."""
    b, t = d["baseline"]["source"], d["treatment"]["source"]
    return (
        f"<sub>Reproduce: {code(f'ccdiag report {b} {t} --md report.md')} · "
        "read a diagnosis: docs/user_guide.md in the ccdiag repository</sub>"
    )


def ranks(d: Data) -> str:
    """A job analyzed rank by rank: per-rank results, stragglers, runs, collectives."""
    rs, j = d.get("ranks"), d.get("job")
    if not rs or not j:
        return ""
    strag = {s["rank"]: s["why"] for s in d.get("stragglers") or []}
    rows = []
    for r in sorted(rs, key=lambda x: x["rank"]):
        st = r.get("step_ns")
        if st is None:
            rows.append([str(r["rank"]), "—", "—", "—", "—", esc(r.get("error") or "no result")])
            continue
        top = r["attribution"][0] if r["attribution"] else None
        rows.append(
            [
                str(r["rank"]),
                units.duration(st["baseline"]),
                units.duration(st["treatment"]),
                units.duration(st["delta"], signed=True),
                f"{code(top['mechanism'])} {units.duration(top['ns_per_step'])}" if top else "—",
                esc(strag.get(r["rank"], r.get("error") or "")),
            ]
        )
    out = [
        f"### Ranks\n\n{j['n_ranks']} ranks, slowest rank {j['slowest_rank']}; stragglers: "
        + (", ".join(f"rank {k}" for k in sorted(strag)) or "none")
        + f" ({esc(j['straggler_test'])}). Tasks ran on: {esc(d.get('scheduler') or '—')}.\n",
        table(["rank", "baseline", "treatment", "delta", "top mechanism", "note"], rows, {1, 2, 3}),
    ]
    runs = j.get("runs")
    if runs:
        lo, hi = runs["delta_ci95"]
        out.append(
            f"\nRepeated runs: {runs['baseline_runs']} baseline, {runs['treatment_runs']} "
            f"treatment; delta {units.duration(runs['delta_ns'], signed=True)}/step, 95 % CI "
            f"{units.duration(lo, signed=True)} … {units.duration(hi, signed=True)} "
            f"({esc(runs['method'])})."
        )
    c = j.get("collectives")
    if c:
        prow = [
            [
                str(p["world_size"]),
                f"{p['crypto_ops_per_step']:,}",
                units.duration(p["cc_collective_ns_per_step"]["low"])
                + (
                    ""
                    if p["cc_collective_ns_per_step"]["low"]
                    == p["cc_collective_ns_per_step"]["high"]
                    else f" … {units.duration(p['cc_collective_ns_per_step']['high'])}"
                ),
            ]
            for p in c["predicted"]
        ]
        out.append(
            f"\nCollectives vs ring size: {code(c['name'])}, k = {c['k']} per step at n = "
            f"{c['world_size']} ({c['crypto_ops_per_step']:,} crypto operations per step, "
            "4·k·(n−1)).\n"
        )
        out.append(
            table(
                ["n", "crypto ops / step", "predicted CC collective cost / step"], prow, {0, 1, 2}
            )
        )
    return "\n".join(out)


SECTIONS = (
    ("head", head),
    ("steps", steps),
    ("ranks", ranks),
    ("attribution", attribution),
    ("evidence", evidence),
    ("fixes", fixes),
    ("rules", rules),
    ("ledger", ledger),
    ("skipped", skipped),
    ("environment", environment),
    ("remarks", remarks),
    ("footer", footer),
)
"""(id, section function) in report order; the HTML report interleaves its figures by id."""


def markdown_from_data(d: Data) -> str:
    """Markdown of canonical report data."""
    parts = [fn(d) for _, fn in SECTIONS]
    return "\n\n".join(p for p in parts if p) + "\n"


def render_markdown(
    report: Report,
    *,
    keep_paths: bool = False,
    timestamp: datetime | str | None = None,
    sources: Mapping[str, str] | None = None,
) -> str:
    """The report as Markdown for a GitHub issue (scrubbed unless ``keep_paths``).

    Args:
        report: the diagnosis.
        keep_paths: keep paths and names as read; show the sources as given in ``sources``.
        timestamp: print this generation time (None: no time, byte-identical reruns).
        sources: the paths the user gave, ``{"baseline": ..., "treatment": ...}``.

    Returns:
        The Markdown text, ending in one newline.
    """
    d = canonical(report, keep_paths=keep_paths, timestamp=timestamp, sources=sources)
    return markdown_from_data(d)
