"""Helpers of the dashboard tests: analysed sample pairs (real traces), a payload pair.

A plain module, not a conftest.py: a second ``conftest`` module would shadow tests/conftest.py
for the rest of the suite.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ccdiag import api

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
ISPASS = REPO / "tests" / "data" / "shared" / "external" / "hcc-ispass25" / "example_csv"
PAYLOAD = "<img src=x onerror=alert(1)>"

#: name -> (baseline, treatment), all real traces
PAIRS: dict[str, tuple[Path, Path]] = {
    "decode_eager": (
        SAMPLES / "decode_eager/baseline.json.gz",
        SAMPLES / "decode_eager/treatment.json.gz",
    ),
    "kv_offload": (
        SAMPLES / "kv_offload/baseline.json.gz",
        SAMPLES / "kv_offload/treatment.json.gz",
    ),
    "async_readback": (
        SAMPLES / "async_readback/baseline.json.gz",
        SAMPLES / "async_readback/treatment.json.gz",
    ),
    "ddp_2gpu_ctas2": (SAMPLES / "ddp_2gpu_ctas2/baseline", SAMPLES / "ddp_2gpu_ctas2/treatment"),
    "ddp_2gpu": (SAMPLES / "ddp_2gpu/baseline", SAMPLES / "ddp_2gpu/treatment"),
    "ispass_3dconv_uvm": (ISPASS / "3DCONV-nor-uvm", ISPASS / "3DCONV-cc-uvm"),
    "ispass_hotspot3d_nor": (ISPASS / "hotspot3D-nor-nor", ISPASS / "hotspot3D-cc-nor"),
    "decode_eager_cpu": (
        SAMPLES / "decode_eager_cpu/baseline.json.gz",
        SAMPLES / "decode_eager_cpu/treatment.json.gz",
    ),
    "decode_eager_host_only": (
        SAMPLES / "decode_eager/baseline.json.gz",
        SAMPLES / "decode_eager/treatment_host_only.json.gz",
    ),
}


@dataclass(frozen=True)
class Analysed:
    """One real pair run through the api the way the app runs it."""

    name: str
    pair: Any
    report: Any
    series: dict[str, Any]


_CACHE: dict[str, Analysed] = {}


def analysed(name: str) -> Analysed:
    """The analysed pair (computed once per test session)."""
    if name not in _CACHE:
        b, t = PAIRS[name]
        if not (b.exists() or b.parent.exists()):
            pytest.skip(f"missing test data {b}")
        pair = api.pair(api.load_trace(b), api.load_trace(t))
        _CACHE[name] = Analysed(name, pair, api.diagnose_pair(pair), api.evidence_series(pair))
    return _CACHE[name]


def dominant_mechanism(sample: str) -> str:
    """The ground truth's dominant mechanism of a shipped sample (unprofiled impact preferred)."""
    g = json.loads((SAMPLES / sample / "ground_truth.json").read_text())
    impact = g.get("impact_ns_per_step_unprofiled") or g["impact_ns_per_step"]
    return max(impact, key=lambda m: impact[m]["value"])


def write_payload_pair(folder: Path, sample: str = "tp1_decode") -> tuple[Path, Path]:
    """A copy of a small real pair whose kernel names all start with an HTML payload."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for side in ("baseline", "treatment"):
        doc = json.loads(gzip.decompress((SAMPLES / sample / f"{side}.json.gz").read_bytes()))
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "kernel":
                ev["name"] = f"{PAYLOAD} {ev['name']}"
        dest = folder / f"{side}.json.gz"
        dest.write_bytes(gzip.compress(json.dumps(doc).encode()))
        out.append(dest)
    return out[0], out[1]
