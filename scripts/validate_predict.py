"""Predict every ISPASS 2025 H100 CC run from its CC-off run; write docs/validation_predict.md.

    python scripts/validate_predict.py            # regenerate the doc
    python scripts/validate_predict.py --check    # exit 1 when the doc is stale

Data: tests/data/shared/external/hcc-ispass25/ (real ``nsys stats`` CSVs, H100 NVL + Intel TDX,
one profiled run per app, whole-program traces = one step). Only the CC-off run goes into the
prediction; the real CC run is read only to judge it. Two profiles: the shipped ``h100`` (its
constants come from the same artifact's microbenchmarks, not from these apps) and
``scripts/platforms/h100_independent.yaml`` (every constant from another source).

The emulated validation (H200 + the LD_PRELOAD emulator, measured without a profiler) is in
``scripts/validate_predict_emulated.py``; its table is appended here when its data exists.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import polars as pl

from ccdiag import api
from ccdiag.platforms import load_platform
from ccdiag.predict import context_call, predict_with_trace
from ccdiag.replay import model_rows
from ccdiag.schema import Trace

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "shared" / "external" / "hcc-ispass25" / "example_csv"
DOC = ROOT / "docs" / "validation_predict.md"
EMULATED = ROOT / "docs" / "validation_predict_emulated.md"
DEVICE = ROOT / "docs" / "validation_predict_device.md"
APPS = ("3DCONV", "BN", "FDTD-2D", "GRAMSCHM", "hotspot3D", "kmeans")
PROFILES = {
    "h100": "h100",
    "h100-independent": ROOT / "scripts" / "platforms" / "h100_independent.yaml",
}
TARGET = 0.25


def context_call_ns(trace: Trace) -> int:
    """The context-creating call's duration (``ccdiag.predict.context_call``), or 0."""
    calls, gpu = model_rows(trace)
    row = context_call(calls, gpu)
    return int(trace.events["dur_ns"][row]) if row is not None else 0


def totals(trace: Trace) -> dict[str, int]:
    """Launch / copy / sync API time on the main thread, GPU copy and kernel time (ns)."""
    calls, gpu = model_rows(trace)
    by = {
        c: int(calls.filter(pl.col("cls") == c)["dur_ns"].sum()) for c in ("launch", "copy", "sync")
    }
    ev = trace.events
    kern = ev.filter(pl.col("kind") == "kernel")["dur_ns"].sum()
    copies = ev.filter(pl.col("kind") == "memcpy")["dur_ns"].sum()
    return {**by, "gpu_copy": int(copies), "kernel": int(kern), "gpu_rows": int(gpu.height)}


def _uvm_rows(trace: Trace) -> tuple[int, int]:
    """UVM migrations in a trace: count and bytes."""
    u = trace.events.filter(
        (pl.col("kind") == "memcpy") & pl.col("name").str.contains("(?i)unified")
    )
    return u.height, int(u["bytes"].sum() or 0)


def step_ns(trace: Trace) -> int:
    return int(trace.steps["dur_ns"].median() or 0)


def judge(app: str, mem: str, profile: str | Path, *, partition: bool = True) -> dict[str, Any]:
    """One app and build: prediction from the CC-off run against the real CC run."""
    base = api.load_trace(DATA / f"{app}-nor-{mem}")
    real = api.load_trace(DATA / f"{app}-cc-{mem}")
    plat = load_platform(profile)
    pred, ptrace = predict_with_trace(base, plat, partition=partition)
    b_ctx, r_ctx = context_call_ns(base), context_call_ns(real)
    actual_steady = step_ns(real) - r_ctx
    pred_steady = pred.steady_step_ns.median - b_ctx
    band = (pred.steady_step_ns.low - b_ctx, pred.steady_step_ns.high - b_ctx)
    return {
        "app": app,
        "build": mem,
        "base_steady": step_ns(base) - b_ctx,
        "actual_steady": actual_steady,
        "pred_steady": pred_steady,
        "band": band,
        "err": pred_steady / actual_steady - 1 if actual_steady else float("nan"),
        "ctx": (b_ctx, b_ctx + pred.one_time_ns if b_ctx else 0, r_ctx),
        "tot_pred": totals(ptrace),
        "tot_real": totals(real),
        "tot_base": totals(base),
        "real_host_only": real.meta.host_only,
        "uvm": _uvm_rows(base),
        "mechanisms": {
            (m.mechanism + (f".{m.path}" if m.path else "")): m.ns_per_step for m in pred.mechanisms
        },
        "warnings": pred.warnings,
    }


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f}"


def _pct(x: float) -> str:
    return f"{100 * x:+.0f} %"


def _ok(x: float) -> str:
    return "yes" if abs(x) <= TARGET else "**no**"


def _tot(r: dict[str, Any], key: str) -> str:
    p, a, b = r["tot_pred"][key], r["tot_real"][key], r["tot_base"][key]
    if not a and not p:
        return "-"
    err = f" ({_pct(p / a - 1)})" if a else ""
    return f"{_ms(b)} → {_ms(p)} / {_ms(a)}{err}"


def miss_reason(r: dict[str, Any]) -> str:
    """Why a row misses, in numbers (the largest gap between predicted and real totals)."""
    if abs(r["err"]) <= TARGET:
        return "-"
    gaps = []
    for key, label in (
        ("sync", "sync API"),
        ("copy", "copy API"),
        ("launch", "launch API"),
        ("kernel", "kernel"),
    ):
        p, a = r["tot_pred"][key], r["tot_real"][key]
        if r["real_host_only"] and key == "kernel":
            continue
        gaps.append((abs(a - p), label, p, a))
    gaps.sort(reverse=True)
    _, label, p, a = gaps[0]
    missing = r["actual_steady"] - r["pred_steady"]
    n_uvm, b_uvm = r["uvm"]
    if r["build"] == "uvm" and n_uvm and missing > 0:
        key = "sync" if r["real_host_only"] else "kernel"
        grew = r["tot_real"][key] - r["tot_base"][key]
        pred = r["tot_pred"][key] - r["tot_base"][key]
        return (
            f"UVM: {n_uvm:,} migrations ({b_uvm / 1e6:,.0f} MB) cost {grew / n_uvm / 1e3:,.0f} µs "
            f"each under real CC ({key} time +{_ms(grew)} ms), the published constants "
            f"(toll + bytes / CPU AES-GCM throughput) give {pred / n_uvm / 1e3:,.0f} µs; no "
            "published figure covers per-fault servicing under CC"
            + (" (the real CC run has no GPU trace upstream)" if r["real_host_only"] else "")
        )
    text = (
        f"{'under' if missing > 0 else 'over'}-predicted by {_ms(abs(missing))} ms; largest gap: "
        f"{label} time {_ms(p)} ms predicted vs {_ms(a)} ms real"
    )
    if r["real_host_only"]:
        text += " (the real CC run has no GPU trace upstream)"
    return text


def render(results: dict[str, list[dict[str, Any]]]) -> str:
    head = [
        "# Validation of `ccdiag predict` on real H100 CC runs (ISPASS 2025 artifact)",
        "",
        "Generated by `scripts/validate_predict.py`. Do not edit by hand.",
        "",
        "Each CC-on run (`cc-nor`, `cc-uvm`) is predicted from its CC-off run (`nor-nor`, `nor-uvm`) "
        "alone, with a platform profile, and compared with the real CC run (H100 NVL + Intel TDX, "
        "`nsys stats` CSVs, one profiled run per app; whole-program traces are one step). "
        "*Steady* = the whole run minus the context-creating call (the first allocation, "
        "~0.2 s off / ~1.2 s on), which is compared on its own. Target: steady state within "
        f"±{int(TARGET * 100)} % per app. Times in ms.",
        "",
        "**Independence.** The shipped `h100` profile takes its constants from the ISPASS'25 "
        "artifact's *microbenchmarks* (fig4 bandwidth sweeps, fig6 allocation, fig7/fig12 launch "
        "runs) — the same artifact and machine as the apps judged here, but not these apps; the "
        "sync toll has no published figure outside these apps and is an assumption (one launch "
        "toll). No constant was fitted to these pairs. The `h100-independent` profile "
        "(`scripts/platforms/h100_independent.yaml`) replaces every constant with a figure from "
        "another source (B200 study, H20 and H200 copy measurements, a vendor blog), to show what "
        "the prediction is worth without this artifact.",
        "",
    ]
    out = list(head)
    for prof, rows in results.items():
        hit = sum(abs(r["err"]) <= TARGET for r in rows)
        out += [
            f"## Profile `{prof}`: {hit} of {len(rows)} within ±{int(TARGET * 100)} %",
            "",
            "| app | build | CC off steady | predicted CC steady (band) | real CC steady | error | within | context call off → predicted / real |",
            "|---|---|---:|---:|---:|---:|---|---|",
        ]
        for r in rows:
            b0, b1, b2 = r["ctx"]
            ctx = f"{b0 / 1e9:.2f} → {b1 / 1e9:.2f} / {b2 / 1e9:.2f} s" if b0 and b2 else "-"
            out.append(
                f"| {r['app']} | {r['build']} | {_ms(r['base_steady'])} | {_ms(r['pred_steady'])} "
                f"({_ms(r['band'][0])} – {_ms(r['band'][1])}) | {_ms(r['actual_steady'])} | "
                f"{_pct(r['err'])} | {_ok(r['err'])} | {ctx} |"
            )
        out += [
            "",
            "Totals, CC off → predicted / real (error): main-thread API time by class, and GPU "
            "kernel time (UVM fault servicing lands inside kernels).",
            "",
            "| app | build | launch API | copy API | sync API | GPU kernel | why it misses |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            out.append(
                f"| {r['app']} | {r['build']} | {_tot(r, 'launch')} | {_tot(r, 'copy')} | "
                f"{_tot(r, 'sync')} | {_tot(r, 'kernel')} | {miss_reason(r)} |"
            )
        out.append("")
    h = results["h100"]
    out += [
        "## Predicted partition (`h100`, ms per run)",
        "",
        "| app | build | " + " | ".join(_MECH_COLS) + " |",
        "|---|---|" + "---:|" * len(_MECH_COLS),
    ]
    for r in h:
        cells = [_ms(r["mechanisms"][m]) if m in r["mechanisms"] else "-" for m in _MECH_COLS]
        out.append(f"| {r['app']} | {r['build']} | " + " | ".join(cells) + " |")
    out += ["", *_READING]
    for extra in (EMULATED, DEVICE):
        if extra.exists():
            out += ["", extra.read_text(encoding="utf-8").strip()]
    return "\n".join(out) + "\n"


_MECH_COLS = (
    "launch_toll.runtime",
    "serialized_copies",
    "blocked_non_blocking",
    "sync_stall",
    "uvm_migration",
    "one_time_setup",
)

_READING = [
    "## Reading it",
    "",
    "- A row that misses is explained in its *why it misses* cell by the class of time whose "
    "predicted total is furthest from the real one; the criterion is not loosened.",
    "- `one_time_setup` is the context-creation toll (+1.0 s on `h100`), reported apart from "
    "the steady state as the issue asks; the predicted context call is within a few % of the "
    "real one everywhere except BN `uvm` (1.72 s real).",
    "- **UVM builds miss** wherever migrations matter (3DCONV, BN, FDTD-2D, hotspot3D): under "
    "real CC each migration costs milliseconds (fault servicing through the encrypted fault "
    "buffer and staging), two to three orders of magnitude above what the published "
    "per-copy toll and CPU AES-GCM throughput give. The only study of that path (LAEGIS, "
    "ISCA'26) withholds its breakdown; the per-migration cost is not fitted to these pairs.",
    "- **hotspot3D `nor`** is within the target but under-predicted by ~1 s: its host code outside "
    "CUDA calls runs ~1.7x slower in the TD (`ccdiag analyze` calls it `host_slowdown`, see "
    "docs/validation_ispass.md); no profile constant models CPU-side TD costs.",
    "- **`h100-independent`** over-predicts BN `nor` (+45 %): the H20's 60 µs small-copy toll "
    "and the B200 launch toll are far above this H100 host's; its context creation (+3.2 s, a "
    "vLLM start-up figure that includes attestation) is 3x the real one. Host and generation "
    "matter more than the model: ship measured profiles per platform.",
]


README = ROOT / "README.md"
BEGIN, END = "<!-- predict-validation:begin -->", "<!-- predict-validation:end -->"


def readme_section(results: dict[str, list[dict[str, Any]]]) -> str:
    """The README's summary of both validations (the tables are in docs/validation_predict.md)."""
    h = results["h100"]
    hit = sum(abs(r["err"]) <= TARGET for r in h)
    lines = [
        "### `ccdiag predict`: CC cost from a CC-off trace alone",
        "",
        "`ccdiag predict TRACE --platform h100|b200|b300|./my_platform.yaml [--json F|-]` replays "
        "the CC-off trace with a platform profile's published costs (`ccdiag/platforms/*.yaml`, "
        "every constant with its range and source) through the same replay model the attribution "
        "uses, and prints the predicted CC step with a band, its partition into mechanisms (launch "
        "tolls per launch path, copies, revoked `non_blocking`, syncs, collectives, UVM, context "
        "creation) and the CC step with each fix (alternatives marked, never summed). Each "
        "mechanism shows what it adds to the step (`ns_per_step`, its Shapley share) beside what "
        "it costs where it is paid, before any overlap (`paid_ns_per_step`: the calls' tolls, the "
        "copies' padding, the collectives' slower and longer kernels): on HTA's two-rank "
        "`df_index_resolver` trace, B200's encrypted NVLink costs the 404 all-reduces of a step "
        "22.0 ms, and the step 0 ns (they run on their own stream, behind the compute). Each fix "
        "also says what it would save with CC off (`recovery_without_cc_ns_per_step`, for CUDA "
        "graphs, a drain thread and fewer synchronous copies), so a fix that helps without CC is "
        "not read as a CC fix: on TraceLens's TimeSformer trace CC adds 1.1 ms a step, and a "
        "drain thread saves 120 ms under CC and 126 ms without it. A readback the step waits for "
        "and then goes on launching after (a size, a flag, `if tensor:`) is not offered a drain "
        "thread, which cannot take a value the step needs to go on; where two or more small "
        "copies a step were synchronous already, they get `fewer_sync_copies` (keep those values "
        "on the GPU, one synchronous copy a step) and only the others are packed, as CP01 "
        "advises: on HELD-OUT-28's detection loop (26 of its 30 readbacks a step are read "
        "mid-step) the drain thread's predicted recovery drops from 4.14 ms to 124 µs (its 4 "
        "result readbacks), and `fewer_sync_copies` is predicted to recover 7.56 ms under CC, "
        "4.97 ms of it without CC (H100 profile; no fix of this kind was applied for real). "
        "A fix's step is never shorter than the GPU's work per "
        "step. The same "
        "prediction is the dashboard's *What if CC* page and `ccdiag report TRACE` (one trace). "
        "JSON Schema: `docs/schema/predict-v1.json`.",
        "",
        f"**Real H100 CC (ISPASS'25, `h100` profile): {hit} of {len(h)} runs within ±25 %** of the "
        "real CC run's steady state, predicted from the CC-off run alone "
        "([docs/validation_predict.md](docs/validation_predict.md)):",
        "",
        "| app | build | CC off | predicted CC | real CC | error |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in h:
        lines.append(
            f"| {r['app']} | {r['build']} | {_ms(r['base_steady'])} ms | {_ms(r['pred_steady'])} ms "
            f"| {_ms(r['actual_steady'])} ms | {_pct(r['err'])} |"
        )
    lines += [
        "",
        "All six explicit-copy builds are within the target; the UVM builds miss where "
        "migrations matter, because under real CC each migration costs milliseconds and no "
        "published figure covers that per-fault cost (numbers in the doc).",
    ]
    for extra in (DEVICE, EMULATED):
        if not extra.exists():
            continue
        body = extra.read_text(encoding="utf-8").split("\n")
        keep: list[str] = []
        skipping = False
        for ln in body:
            if ln.startswith("**Per mechanism"):
                # the README keeps each per-mechanism verdict line, the doc keeps the tables
                keep += [
                    ln.split("**")[1] + f" (table in [docs/{extra.name}](docs/{extra.name})).",
                    "",
                ]
                skipping = True
                continue
            if skipping and (ln.startswith("**") or ln.startswith("#")):
                skipping = False
            if not skipping:
                for hashes, deeper in (("### ", "##### "), ("## ", "#### ")):
                    if ln.startswith(hashes):
                        ln = deeper + ln[len(hashes) :]
                        break
                keep.append(ln)
        lines += ["", *keep]
    return "\n".join(lines).rstrip()


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--check", action="store_true", help="fail when the doc is stale")
    args = ap.parse_args()
    results = {
        prof: [
            judge(app, mem, path, partition=prof == "h100")
            for app in APPS
            for mem in ("nor", "uvm")
        ]
        for prof, path in PROFILES.items()
    }
    text = render(results)
    sys.path.insert(0, str(ROOT / "scripts"))
    from _readme import with_section

    readme = README.read_text(encoding="utf-8")
    new_readme = with_section(
        readme, BEGIN, END, readme_section(results), after="<!-- multigpu-validation:end -->"
    )
    if args.check:
        stale = [
            name
            for name, ok in (
                (
                    "docs/validation_predict.md",
                    DOC.exists() and DOC.read_text(encoding="utf-8") == text,
                ),
                ("README.md (predict section)", readme == new_readme),
            )
            if not ok
        ]
        print("stale: " + ", ".join(stale) if stale else "fresh")
        return 1 if stale else 0
    DOC.write_text(text, encoding="utf-8")
    README.write_text(new_readme, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)} and the README's predict section")
    return 0


if __name__ == "__main__":
    sys.exit(main())
