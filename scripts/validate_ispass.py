"""Diagnose every ISPASS 2025 H100 CC pair and write docs/validation_ispass.md.

    python scripts/validate_ispass.py            # regenerate the doc
    python scripts/validate_ispass.py --check    # exit 1 when the doc is stale

Data: tests/data/shared/external/hcc-ispass25/ (real ``nsys stats`` CSVs, H100 NVL + Intel TDX,
one profiled run per app, whole-program traces). Pairs: ``nor-nor`` vs ``cc-nor`` (explicit
copies) and ``nor-uvm`` vs ``cc-uvm`` (managed memory). The facts checked against the artifact's
README are in tests/test_validation_ispass.py. Each pair is diagnosed a second time
*summary-only*: both runs without their ``cuda_gpu_trace`` (``cuda_api_trace`` + ``*_sum``
only, the form of BN's UVM run), to show what ccdiag tells from the host side and the summary
tables alone (issue 12, failure class 4).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ccdiag import api
from ccdiag.verdict import Report

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "shared" / "external" / "hcc-ispass25" / "example_csv"
DOC = ROOT / "docs" / "validation_ispass.md"
APPS = ("3DCONV", "BN", "FDTD-2D", "GRAMSCHM", "hotspot3D", "kmeans")
MECHS = (
    "one_time_setup",
    "launch_toll",
    "serialized_copies",
    "sync_stall",
    "uvm_migration",
    "host_slowdown",
)


def diagnose(app: str, mem: str) -> Report:
    """The report of one app and build (``nor``: explicit copies, ``uvm``: managed memory)."""
    return api.diagnose(DATA / f"{app}-nor-{mem}", DATA / f"{app}-cc-{mem}")


def diagnose_summary_only(app: str, mem: str, tmp: Path) -> Report:
    """The same pair with both runs' ``cuda_gpu_trace`` left out (links to the other reports)."""
    sides = []
    for side in (f"{app}-nor-{mem}", f"{app}-cc-{mem}"):
        d = tmp / side
        d.mkdir(parents=True, exist_ok=True)
        for f in sorted(DATA.glob(f"{side}_*.csv*")):
            if "gpu_trace" not in f.name and not (d / f.name).exists():
                (d / f.name).symlink_to(f)
        sides.append(d)
    return api.diagnose(sides[0], sides[1])


def facts(r: Report) -> dict[str, Any]:
    """Numbers a reader can hold against the artifact's README."""
    ev = {a.mechanism: a.evidence for a in r.attribution}
    out: dict[str, Any] = {}
    la = ev.get("launch_toll", {}).get("per_launch_call_ns")
    if la:
        out["launch_p50_us"] = (la["baseline"]["p50"] / 1e3, la["treatment"]["p50"] / 1e3)
    big = ev.get("one_time_setup", {}).get("largest_call")
    if big and big["baseline"] and big["treatment"]:
        out["setup_call_s"] = (big["baseline"][0]["ns"] / 1e9, big["treatment"][0]["ns"] / 1e9)
    cp = ev.get("serialized_copies", {}).get("buckets")
    if cp:
        top = {b["run"]: b for b in cp if b["bucket"] == ">=16 MiB"}
        if len(top) == 2:
            out["copy_16MiB_plus_ms"] = (
                top["baseline"]["latency_p50_ns"] / 1e6,
                top["treatment"]["latency_p50_ns"] / 1e6,
            )
    uv = ev.get("uvm_migration", {}).get("kernel_busy_ns_per_step") or ev.get(
        "uvm_migration", {}
    ).get("kernel_ns_per_step")
    if uv:
        out["kernel_ms"] = (uv["baseline"] / 1e6, uv["treatment"] / 1e6)
    return out


def steady_leader(r: Report) -> str:
    """The mechanism that leads the steady state (after one-time setup), or 'unattributed'."""
    steady = [a for a in r.attribution if a.mechanism != "one_time_setup" and a.ns_per_step > 0]
    best = max(steady, key=lambda a: a.ns_per_step, default=None)
    if best is None or r.unattributed_ns_per_step > best.ns_per_step:
        return "unattributed"
    return best.mechanism


def unsure(r: Report) -> str:
    """Why a reader should doubt this row, if anything."""
    why = []
    if r.mode == "host_only":
        why.append("treatment has no GPU trace (file missing upstream): host-side evidence only")
    if not r.step_ns.significant:
        why.append("whole-run delta within the assumed 15 % run-to-run noise (one run each)")
    total = r.partition.total_ns_per_step if r.partition else 0
    if total and abs(r.unattributed_ns_per_step) > 0.1 * abs(total):
        why.append(f"{abs(r.unattributed_share):.0%} unattributed (host code outside CUDA calls)")
    low = [
        a.mechanism for a in r.attribution if a.confidence == "low" and a.ns_per_step > 0.01 * total
    ]
    if low:
        why.append("low confidence: " + ", ".join(low))
    return "; ".join(why) or "-"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f}"


def hotspot_note(r: Report) -> str:
    """What the host-code rule (HS01) says of hotspot3D's explicit-copy build."""
    a = next((a for a in r.attribution if a.mechanism == "host_slowdown"), None)
    if a is None:
        return "- **hotspot3D**: host code outside CUDA calls is not flagged as slower."
    ev = a.evidence
    return (
        f"- **hotspot3D** spends most of its run in host code outside CUDA calls. In the TD it "
        f"runs {ev['ratio']:.2f}x slower by the {ev['basis']}, and the "
        f"growth of exposed host code, {_ms(a.ns_per_step)} ms, is `host_slowdown` "
        f"({a.confidence} confidence): a trace cannot tell CPU-side TD costs (private-page "
        "acceptance on first touch, VM exits) from other host slowdown; before this rule it was "
        "left unattributed."
    )


def summary_only_table(
    rows: list[tuple[str, str, Report]], alone: dict[tuple[str, str], Report]
) -> list[str]:
    """Full traces vs summary-only, per app: each mechanism, full -> summary-only (ms)."""
    out = [
        "",
        "## Summary-only: the same pairs without `cuda_gpu_trace`",
        "",
        "Both runs diagnosed again from `cuda_api_trace` + `cuda_api_sum` + `cuda_gpu_kern_sum` only "
        "(the GPU trace left out; BN `uvm` has none in the treatment anyway). The host path is the "
        "critical path; launch and copy deltas come from the API trace; UVM from the kernel-time "
        "growth of `cuda_gpu_kern_sum` against the growth of the calls that waited for it. Every "
        "finding is low confidence. Cells: ms with full traces → ms summary-only.",
        "",
        "| app | build | delta | " + " | ".join(MECHS) + " | unattr. |",
        "|" + "---|" * (len(MECHS) + 4),
    ]
    for app, mem, r in rows:
        s = alone[(app, mem)]
        pf = {a.mechanism: a.ns_per_step for a in r.attribution}
        ps = {a.mechanism: a.ns_per_step for a in s.attribution}

        def cell(m: str) -> str:
            if m not in pf and m not in ps:
                return "-"
            return f"{_ms(pf.get(m, 0))} → {_ms(ps.get(m, 0))}"

        total = s.partition.total_ns_per_step if s.partition else 0
        out.append(
            f"| {app} | {mem} | {_ms(total)} | "
            + " | ".join(cell(m) for m in MECHS)
            + f" | {_ms(r.unattributed_ns_per_step)} → {_ms(s.unattributed_ns_per_step)} |"
        )
    return out


def render(
    rows: list[tuple[str, str, Report]], alone: dict[tuple[str, str], Report] | None = None
) -> str:
    head = (
        "# Validation on real H100 CC traces (ISPASS 2025 artifact)\n\n"
        "Generated by `scripts/validate_ispass.py` from `tests/data/shared/external/hcc-ispass25/` "
        "(H100 NVL, Intel TDX, CUDA 12.4, driver 550; `nsys stats` CSVs; one profiled run per "
        "app; whole-program traces treated as one step). Do not edit by hand.\n\n"
        "Pairs: `nor-nor` (CC off) vs `cc-nor` (CC on) for the explicit-copy build, `nor-uvm` vs "
        "`cc-uvm` for the managed-memory build. Times in ms for the whole run. *Steady state* is the "
        "delta minus one-time setup (context creation); its leader is the verdict per app.\n\n"
    )
    cols = [
        "app",
        "build",
        "delta",
        *MECHS,
        "unattr.",
        "steady",
        "steady leader",
        "where ccdiag is unsure",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for app, mem, r in rows:
        parts = {a.mechanism: a.ns_per_step for a in r.attribution}
        total = r.partition.total_ns_per_step if r.partition else 0
        steady = r.partition.steady_state_ns_per_step if r.partition else 0
        cells = [
            app,
            mem,
            _ms(total),
            *(_ms(parts[m]) if m in parts else "-" for m in MECHS),
            _ms(r.unattributed_ns_per_step),
            _ms(steady),
            f"`{steady_leader(r)}`",
            unsure(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    checks = [
        "",
        "## Evidence against the artifact's README",
        "",
        "| app | build | launch median µs off → on | context-creating call s off → on | copies ≥ 16 MiB ms off → on | GPU kernel time ms off → on |",
        "|---|---|---|---|---|---|",
    ]
    for app, mem, r in rows:
        f = facts(r)

        def pair(k: str, fmt: str) -> str:
            return f"{f[k][0]:{fmt}} → {f[k][1]:{fmt}}" if k in f else "-"

        checks.append(
            f"| {app} | {mem} | {pair('launch_p50_us', '.2f')} | {pair('setup_call_s', '.2f')} | "
            f"{pair('copy_16MiB_plus_ms', '.2f')} | {pair('kernel_ms', ',.1f')} |"
        )
    notes = [
        "",
        "## Reading it",
        "",
        "- **One-time setup dominates every short app** (context creation +0.97–1.01 s under CC). "
        "Judge CC by the steady state.",
        "- **Explicit-copy builds**: pinned copies through bounce buffers (`serialized_copies`) lead "
        "the steady state where there are big or many copies (3DCONV, BN); where kernels are waited "
        "for after every launch (GRAMSCHM, FDTD-2D) the slower wake-up of each synchronize call "
        "(`sync_stall`, +12-45 µs per call) leads, ahead of the launch toll (~2.3x per launch).",
        "- **UVM builds**: faults serviced through encrypted staging make kernels up to ~250x longer "
        "(`uvm_migration`), except GRAMSCHM (+7 %).",
        hotspot_note(next(r for app, mem, r in rows if (app, mem) == ("hotspot3D", "nor"))),
        bn_uvm_note(next(r for app, mem, r in rows if (app, mem) == ("BN", "uvm"))),
        "- One run per configuration: no spread can be measured; the whole-run CI assumes 15 % "
        "run-to-run noise, so several small deltas are not called significant even though "
        "per-event evidence (per-launch and per-copy costs) is clear.",
    ]
    extra = summary_only_table(rows, alone) if alone else []
    return (
        head + "\n".join(lines) + "\n" + "\n".join(checks) + "\n" + "\n".join(extra + notes) + "\n"
    )


def bn_uvm_note(r: Report) -> str:
    """What the host-only rules say of BN's UVM run (its treatment has no GPU trace)."""
    a = next((a for a in r.attribution if a.mechanism == "uvm_migration"), None)
    if a is None:
        return (
            "- **BN `cc-uvm`** has no GPU trace in the snapshot (upstream file missing): the "
            "treatment is host-only and its kernel growth is not attributed."
        )
    ev = a.evidence
    k = ev["kernel_ns_per_step"]
    return (
        "- **BN `cc-uvm`** has no GPU trace in the snapshot (upstream file missing): the treatment "
        f"is host-only. `cuda_gpu_kern_sum` shows kernel time {_ms(k['baseline'])} → "
        f"{_ms(k['treatment'])} ms; the synchronize calls that waited for those kernels grew "
        f"{_ms(ev['waiting_calls_growth_ns_per_step']['sync'])} ms, and the program uses managed "
        f"memory, so {_ms(a.ns_per_step)} ms is `uvm_migration` (low confidence: "
        "without the GPU trace a fault-servicing kernel and a kernel slowed otherwise look the "
        "same), including the growth of its memsets on managed memory beyond the launch toll "
        f"({_ms(ev['memset_beyond_launch_toll_ns_per_step'])} ms). Before the summary tables were "
        "read it was 97 % unattributed."
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--check", action="store_true", help="fail when docs/validation_ispass.md is stale"
    )
    args = ap.parse_args()
    rows = [(app, mem, diagnose(app, mem)) for app in APPS for mem in ("nor", "uvm")]
    with tempfile.TemporaryDirectory() as tmp:
        alone = {(a, m): diagnose_summary_only(a, m, Path(tmp)) for a, m, _ in rows}
    text = render(rows, alone)
    if args.check:
        stale = not DOC.exists() or DOC.read_text() != text
        print("stale: docs/validation_ispass.md" if stale else "fresh")
        return 1 if stale else 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
