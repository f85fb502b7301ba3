"""Multi-GPU fixes, predicted vs measured: bigger DDP buckets, narrower tensor parallelism.

    python scripts/validate_multigpu.py            # write docs/validation_multigpu.md + README
    python scripts/validate_multigpu.py --check    # exit 1 if either would change
    python scripts/validate_multigpu.py --no-write # print only

Pairs (sample_traces/, real H200 runs, CC emulated; per-rank trace folders):

- ``ddp_2gpu`` (``bucket_cap_mb=25``) vs ``ddp_2gpu_bucket200`` (200), both at the emulator's
  16-CTA NCCL cap (0.87x all-reduce bandwidth), and the ``*_ctas2`` pair of pairs at a 2-CTA
  cap (0.15x). **Predicted**: ccdiag's ``bucket_cap_mb`` advice on the cap-25 pair with the
  rule's target set to 200 (``CO01 bucket_cap_mb=200``): collectives removed × the growth of
  the fitted fixed cost per collective (``ccdiag.collectives``). **Measured**: CC overhead
  (treatment − baseline delta) at 25 minus at 200, from ccdiag's pair deltas and from the
  samples' ground truth (per-rank truths averaged).
- ``tp2_decode`` (TP2 over 2 GPUs) vs ``tp1_decode`` (the same decode on 1 GPU).
  **Predicted**: the narrower-TP recovery (TP 2 → 1) from the same cost model. **Measured**:
  CC overhead at TP2 minus at TP1, and the step time change (narrower TP also gives up
  parallel speed).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _readme import with_section

from ccdiag import api
from ccdiag import collectives as cc
from ccdiag.verdict import Report

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
DOC = ROOT / "docs" / "validation_multigpu.md"
BEGIN, END = "<!-- multigpu-validation:begin -->", "<!-- multigpu-validation:end -->"
#: (label, pair at the smaller bucket cap, pair at the bigger one, the bigger cap in MiB)
BUCKETS = (
    ("16 CTAs (0.87x bandwidth)", "ddp_2gpu", "ddp_2gpu_bucket200", 200),
    ("2 CTAs (0.15x bandwidth)", "ddp_2gpu_ctas2", "ddp_2gpu_bucket200_ctas2", 200),
)
TP = ("tp2_decode", "tp1_decode", 2, 1)


@dataclass
class Estimate:
    """A value (ns per step) with an optional 95 % CI."""

    value: float
    ci: tuple[float, float] | None = None

    def minus(self, other: Estimate) -> Estimate:
        """Difference of two independent estimates; CI half-widths combined in quadrature."""
        v = self.value - other.value
        if self.ci is None or other.ci is None:
            return Estimate(v)
        lo = ((self.value - self.ci[0]) ** 2 + (other.ci[1] - other.value) ** 2) ** 0.5
        hi = ((self.ci[1] - self.value) ** 2 + (other.value - other.ci[0]) ** 2) ** 0.5
        return Estimate(v, (v - lo, v + hi))

    def text(self) -> str:
        ci = f" ({us(self.ci[0])} – {us(self.ci[1])})" if self.ci else ""
        return f"{us(self.value)}{ci}"


@dataclass
class Run:
    """One sample pair: ccdiag's report and the sample's ground truth."""

    name: str
    report: Report
    truth: dict[str, Any]
    pair: Any = None
    notes: list[str] = field(default_factory=list)

    def delta(self) -> Estimate:
        """ccdiag's per-step delta (mean over the steps it used)."""
        assert self.report.partition is not None
        return Estimate(float(self.report.partition.total_ns_per_step))

    def truth_delta(self) -> Estimate:
        d = self.truth["delta_ns_per_step"]
        return Estimate(float(d["value"]), (float(d["ci95"][0]), float(d["ci95"][1])))

    def attributed(self, mechanism: str) -> float:
        return float(
            next((a.ns_per_step for a in self.report.attribution if a.mechanism == mechanism), 0)
        )

    def rule(self, code: str) -> str:
        o = next(o for o in self.report.rules if o.code == code)
        return f"{o.outcome}: {o.reason}"


def us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:,.1f}"


def truth_of(name: str) -> dict[str, Any]:
    """The sample's ground truth; per-rank truths averaged (values and CI bounds)."""
    d = SAMPLES / name
    ranks = sorted(d.glob("ground_truth.rank*.json"))
    files = ranks if len(ranks) > 1 else [d / "ground_truth.json"]
    gs = [json.loads(p.read_text()) for p in files]
    out = dict(gs[0])
    deltas = [g["delta_ns_per_step"] for g in gs]
    out["delta_ns_per_step"] = {
        "value": sum(x["value"] for x in deltas) / len(gs),
        "ci95": [sum(x["ci95"][i] for x in deltas) / len(gs) for i in (0, 1)],
    }
    out["ranks"] = len(gs)
    return out


def side(name: str, which: str) -> Path:
    d = SAMPLES / name
    return d / which if (d / which).is_dir() else d / f"{which}.json.gz"


def load(name: str, **options: Any) -> Run:
    pair = api.load_pair(side(name, "baseline"), side(name, "treatment"))
    return Run(name, api.diagnose_pair(pair, **options), truth_of(name), pair)


def exposure_of(r: Report) -> float:
    """Exposed share of the collectives' busy-time growth: what the partition gave
    ``encrypted_collectives`` / the growth; when the rule did not fire, the growth of
    GPU-critical collective time / the growth (``ccdiag.collectives.exposure``)."""
    assert r.partition is not None
    busy = next((row.delta for row in r.partition.gpu_busy if row.category == "collective"), 0)
    got = next((a for a in r.attribution if a.mechanism == "encrypted_collectives"), None)
    if got is not None:
        return cc.exposure(float(got.ns_per_step), float(busy))
    crit = next((row.delta for row in r.partition.ledger if row.category == "gpu_collective"), 0)
    return cc.exposure(float(crit), float(busy))


def collective_growth(run: Run) -> dict[str, Any]:
    """Per-collective cost facts of a run (``ccdiag.collectives.facts``)."""
    f = cc.facts_of_pair(run.pair)
    if f is None:
        return {}
    return {"k": f.k, "bytes": f.nbytes, "dt_ns": f.dt_ns, "fit_b": f.fit_b, "fit_t": f.fit_t}


def bucket_row(label: str, small: Run, big: Run, cap: int) -> dict[str, Any]:
    """Predicted (ccdiag's advice on the small-bucket pair) vs measured recovery of a bigger cap."""
    rec = next((x for x in small.report.recommendations if x.fix == "bucket_cap_mb"), None)
    fs, fb = collective_growth(small), collective_growth(big)
    per_byte = None
    if fs and fb and fs["bytes"] and fb["bytes"]:
        # growth per collective at the big size vs the small size's scaled by bytes
        per_byte = fb["dt_ns"] / (fs["dt_ns"] * fb["bytes"] / fs["bytes"])
    return {
        "label": label,
        "small": small,
        "big": big,
        "cap": cap,
        "predicted": None if rec is None else float(rec.predicted_recovery_ns_per_step),
        "advice": None if rec is None else rec.text,
        "method": None if rec is None else rec.method,
        "rule": small.rule("CO01"),
        "measured_pair": small.delta().minus(big.delta()),
        "measured_truth": small.truth_delta().minus(big.truth_delta()),
        "collectives": (fs, fb),
        "bytes_scaling": per_byte,
        "exposure": (exposure_of(small.report), exposure_of(big.report)),
        "attributed": (
            small.attributed("encrypted_collectives"),
            big.attributed("encrypted_collectives"),
        ),
    }


def tp_row(wide: Run, narrow: Run, n: int, n_new: int) -> dict[str, Any]:
    """Predicted narrower-TP recovery on the wide pair vs the measured change at the other width."""
    rec = next((x for x in wide.report.recommendations if x.fix == "narrower_tp"), None)
    f = cc.facts_of_pair(wide.pair)
    share = exposure_of(wide.report)
    model = (
        cc.predict_narrower_tp(f.fit_b, f.fit_t, f.k, n, n_new, share, f.nbytes, f.dt_ns)
        if f
        else None
    )
    st_w, st_n = wide.report.step_ns, narrow.report.step_ns
    return {
        "wide": wide,
        "narrow": narrow,
        "n": n,
        "n_new": n_new,
        "predicted": None if rec is None else float(rec.predicted_recovery_ns_per_step),
        "rule": wide.rule("CO01"),
        "model": model,
        "share": share,
        "facts": f,
        "measured_pair": wide.delta().minus(narrow.delta()),
        "measured_truth": wide.truth_delta().minus(narrow.truth_delta()),
        "step_baseline": (st_w.baseline, st_n.baseline),
        "step_treatment": (st_w.treatment, st_n.treatment),
    }


def _pred(row: dict[str, Any]) -> str:
    if row["predicted"] is not None:
        return us(row["predicted"])
    return "no advice"


def bucket_table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| NCCL cap | CC overhead at 25 (pair / truth) | at 200 (pair / truth) | predicted recovery | "
        "measured recovery, pair | measured recovery, truth (95 % CI) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s, b = r["small"], r["big"]
        up = re.search(r"upper bound (\d[\d,.]*) us", r["method"] or "")
        pred = _pred(r) + (f" (≤ {up.group(1)} if all fixed cost)" if up else "")
        out.append(
            f"| {r['label']} | {us(s.delta().value)} / {us(s.truth_delta().value)} | "
            f"{us(b.delta().value)} / {us(b.truth_delta().value)} | {pred} | "
            f"{us(r['measured_pair'].value)} | {r['measured_truth'].text()} |"
        )
    return out


def bucket_facts(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| NCCL cap | all-reduces/step 25 → 200 | fit baseline → treatment (at 25) | growth per "
        "all-reduce at 25 / at 200 | 200's growth / (25's × bytes ratio) | exposed share at 25 "
        "→ 200 (mean over steps) | `encrypted_collectives` at 25 → 200 |",
        "|---|---|---|---|---:|---|---|",
    ]
    for r in rows:
        fs, fb = r["collectives"]
        fit = "-"
        if fs:
            b, t = fs["fit_b"], fs["fit_t"]
            if b.fixed_ns is not None and t.fixed_ns is not None:
                fit = (
                    f"fixed {b.fixed_ns / 1e3:.1f} → {t.fixed_ns / 1e3:.1f} µs, "
                    f"{b.gbps:.0f} → {t.gbps:.0f} GB/s"
                )
            else:
                fit = "one message size: fixed and per-byte cost not separable"
        scale = "-" if r["bytes_scaling"] is None else f"{r['bytes_scaling']:.2f}"
        e, a = r["exposure"], r["attributed"]
        out.append(
            f"| {r['label']} | {fs.get('k', 0):.0f} → {fb.get('k', 0):.0f} | {fit} | "
            f"{us(fs.get('dt_ns'))} / {us(fb.get('dt_ns'))} µs | {scale} | "
            f"{e[0]:.2f} → {e[1]:.2f} | {us(a[0])} → {us(a[1])} µs |"
        )
    return out


def tp_table(t: dict[str, Any]) -> list[str]:
    w, n = t["wide"], t["narrow"]
    model = t["model"]
    sb, st = t["step_baseline"], t["step_treatment"]
    return [
        "| | TP2 (`tp2_decode`) | TP1 (`tp1_decode`) | change TP2 → TP1 |",
        "|---|---:|---:|---:|",
        f"| CC overhead, pair (µs/step) | {us(w.delta().value)} | {us(n.delta().value)} | "
        f"{us(-t['measured_pair'].value)} |",
        f"| CC overhead, truth (95 % CI) | {w.truth_delta().text()} | {n.truth_delta().text()} | "
        f"{Estimate(-t['measured_truth'].value, None if t['measured_truth'].ci is None else (-t['measured_truth'].ci[1], -t['measured_truth'].ci[0])).text()} |",  # noqa: E501
        f"| step, baseline (median µs) | {us(sb[0])} | {us(sb[1])} | {us(sb[1] - sb[0])} |",
        f"| step, treatment (median µs) | {us(st[0])} | {us(st[1])} | {us(st[1] - st[0])} |",
        f"| `encrypted_collectives` attributed | {us(w.attributed('encrypted_collectives'))} | - "
        "| - |",
        "| predicted CC recovery of TP2 → TP1 | "
        + ("CO01: no advice (clean)" if t["predicted"] is None else f"CO01: {_pred(t)}")
        + f"; cost model: {us(model.recovery_ns if model else None)} | | |",
    ]


def render(rows: list[dict[str, Any]], tp: dict[str, Any]) -> str:
    lines = [
        "# Multi-GPU fixes: predicted vs measured",
        "",
        "Generated by `scripts/validate_multigpu.py` from `sample_traces/` (real H200 runs, 2 "
        "GPUs, CC emulated: B200 launch and copy costs, NCCL slowed by capping its CTAs). Do not "
        "edit by hand. Times in µs per step. *CC overhead* is treatment − baseline: ccdiag's "
        "pair delta (mean over the steps it used) and the sample's ground truth (median, per-rank "
        "truths averaged, 95 % CI). A *recovery* is how much smaller the CC overhead gets with "
        "the fix; a CI of a difference combines the two CIs in quadrature.",
        "",
        "## Bigger DDP buckets (`bucket_cap_mb` 25 → 200)",
        "",
        "ccdiag's advice on the cap-25 pair, with the rule's target cap set to 200 "
        '(`api.diagnose(..., rule_options={"CO01": {"bucket_cap_mb": 200}})`), against the '
        "cap-200 pair.",
        "",
        *bucket_table(rows),
        "",
        "What the advice says and how it was predicted:",
        "",
    ]
    for r in rows:
        lines.append(f"- **{r['label']}**: {r['advice'] or r['rule']} *How*: {r['method'] or '-'}")
    lines += ["", "The collectives behind it (fast-end quantile of the all-reduce kernels):", ""]
    lines += bucket_facts(rows)
    lines += [
        "",
        "## Narrower tensor parallelism (TP2 → TP1)",
        "",
        f"CO01 on `tp2_decode`: {tp['rule']}.",
        "",
        *tp_table(tp),
        "",
        f"Model: {tp['model'].method if tp['model'] else '-'}"
        + (
            f" (upper bound {us(tp['model'].upper_ns)} µs)"
            if tp["model"] and tp["model"].upper_ns is not None
            else ""
        ),
        "",
        "## Reading it",
        "",
        *reading(rows, tp),
        "",
    ]
    return "\n".join(lines)


def reading(rows: list[dict[str, Any]], tp: dict[str, Any]) -> list[str]:
    r16, r2 = rows
    fit = r16["collectives"][0].get("fit_t")
    fb = r16["collectives"][0].get("fit_b")
    fit2 = r2["collectives"][0].get("fit_t")
    fb2 = r2["collectives"][0].get("fit_b")
    at2 = (
        f"at 2 CTAs it moves the fixed cost {fb2.fixed_ns / 1e3:.1f} → {fit2.fixed_ns / 1e3:.1f} µs "
        f"and the bandwidth {fb2.gbps:.0f} → {fit2.gbps:.0f} GB/s, and the"
        if fb2 and fit2 and fb2.fixed_ns is not None and fit2.fixed_ns is not None
        else "at 2 CTAs every all-reduce has one size, but the"
    )
    out = [
        f"- **The emulated CC slows bandwidth, not the fixed cost per collective.** At 16 CTAs "
        f"the fit over barrier-sized and 64 MiB all-reduces moves the fixed cost "
        f"{fb.fixed_ns / 1e3:.1f} → {fit.fixed_ns / 1e3:.1f} µs and the bandwidth "
        f"{fb.gbps:.0f} → {fit.gbps:.0f} GB/s; {at2} "
        f"200-MiB buckets' growth is {r2['bytes_scaling']:.2f}x the 25-MiB buckets' scaled by "
        "bytes: all of it is per byte. Bigger buckets send the same bytes, so the honest "
        "prediction is ~0 recovery; ccdiag's advice says so (and, where one message size leaves "
        "the split unknown, gives the bound if it were all fixed cost)."
        if fb and fit and fb.fixed_ns is not None and fit.fixed_ns is not None
        else "- The cost fit could not separate fixed and per-byte cost.",
        f"- **Measured, bigger buckets did not help**: the recovery was "
        f"{us(r16['measured_truth'].value)} µs/step at 16 CTAs (truth; 95 % CI "
        f"{us(r16['measured_truth'].ci[0])} – {us(r16['measured_truth'].ci[1])}: within the "
        f"noise) and {us(r2['measured_truth'].value)} µs/step at 2 CTAs (95 % CI "
        f"{us(r2['measured_truth'].ci[0])} – {us(r2['measured_truth'].ci[1])}: the overhead "
        "grew). At 2 CTAs the "
        f"collectives' busy-time growth is the same at both caps, but fewer, larger buckets start "
        f"later in the backward pass and overlap less of it: the exposed share of the growth "
        f"rose {r2['exposure'][0]:.2f} → {r2['exposure'][1]:.2f}. The cost model predicts the "
        "per-collective saving only; the overlap lost is a second effect it does not predict.",
        "- **The published 4.95–7.31x cut** (`bucket_cap_mb` 44 → 400 MB under GPU TEEs) comes "
        "from software AES-GCM per ring step, a fixed cost per collective (4·k·(n−1) crypto "
        "operations per GPU per iteration: with k 8 → 2 buckets on 2 ranks, 32 → 8). The "
        "emulator's CTA cap has no such fixed cost, so this pair cannot show that recovery; the "
        "prediction would, given traces whose fit shows a fixed-cost growth.",
        f"- **Narrower TP** removes every collective at TP1, so its prediction is the whole "
        f"exposed collective growth of `tp2_decode`: {us(tp['model'].recovery_ns if tp['model'] else 0)} "
        f"µs/step (CO01: {tp['rule'].split(':')[0]}; the TP2 all-reduces are small and "
        "latency-bound, and a 0.87x bandwidth cap barely touches them). Measured: the CC overhead "
        f"is {us(tp['measured_truth'].value)} µs/step smaller at TP1 (truth; 95 % CI "
        f"{us(tp['measured_truth'].ci[0])} – {us(tp['measured_truth'].ci[1])}; pair "
        f"{us(tp['measured_pair'].value)}), within the noise: both widths pay the same graph-launch "
        f"toll. The step itself is {us(tp['step_treatment'][1] - tp['step_treatment'][0])} µs "
        f"slower at TP1 under CC ({us(tp['step_baseline'][1] - tp['step_baseline'][0])} µs "
        "without): narrower TP gives up far more parallel speed than it saves in CC overhead "
        "here.",
    ]
    return out


def readme_section(rows: list[dict[str, Any]], tp: dict[str, Any]) -> str:
    lines = [
        "### Multi-GPU fixes: predicted vs measured",
        "",
        "Generated by `python scripts/validate_multigpu.py`; details in "
        "[docs/validation_multigpu.md](docs/validation_multigpu.md). µs per step; *recovery* = "
        "how much the CC overhead (treatment − baseline) shrinks with the fix.",
        "",
        "| fix | pairs | predicted recovery | measured recovery (truth, 95 % CI) |",
        "|---|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `bucket_cap_mb` 25 → 200, {r['label']} | `{r['small'].name}` → `{r['big'].name}` "
            f"| {_pred(r)} | {r['measured_truth'].text()} |"
        )
    m = tp["model"]
    lines.append(
        f"| narrower TP (2 → 1) | `{tp['wide'].name}` → `{tp['narrow'].name}` | "
        f"{us(m.recovery_ns if m else None)} | {tp['measured_truth'].text()}; step time "
        f"{us(tp['step_treatment'][1] - tp['step_treatment'][0])} slower |"
    )
    return "\n".join(lines)


def write_readme(section: str, check: bool) -> bool:
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = with_section(text, BEGIN, END, section, after="<!-- attribution-accuracy:end -->")
    if new == text:
        return False
    if not check:
        readme.write_text(new)
    return True


def collect() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = []
    for label, small, big, cap in BUCKETS:
        s = load(small, rule_options={"CO01": {"bucket_cap_mb": cap}})
        rows.append(bucket_row(label, s, load(big), cap))
    wide, narrow, n, n_new = TP
    return rows, tp_row(load(wide), load(narrow), n, n_new)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if the doc or README is stale")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    rows, tp = collect()
    doc = render(rows, tp)
    if args.no_write:
        print(doc)
        return 0
    stale = DOC.read_text() != doc if DOC.exists() else True
    readme_stale = write_readme(readme_section(rows, tp), check=args.check)
    if args.check:
        for what, bad in ((DOC, stale), (ROOT / "README.md", readme_stale)):
            if bad:
                print(f"stale: {what.relative_to(ROOT)} (run python scripts/validate_multigpu.py)")
        return 1 if stale or readme_stale else 0
    DOC.write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
