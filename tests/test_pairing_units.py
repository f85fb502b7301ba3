"""A pair whose clocks disagree by ~1000x is refused, not reported as a 1000x slowdown."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_traces" / "decode_graph"
ISPASS = REPO / "tests" / "data" / "shared" / "external" / "hcc-ispass25" / "example_csv"


def _scaled(src: Path, dst: Path, factor: float) -> Path:
    doc = json.loads(gzip.open(src, "rt").read())
    for e in doc["traceEvents"]:
        for k in ("ts", "dur"):
            if isinstance(e.get(k), (int, float)):
                e[k] = e[k] * factor
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


def _analyze(b: Path, t: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", "analyze", str(b), str(t), "-q"],
        capture_output=True,
        text=True,
    )


def test_a_treatment_in_nanoseconds_read_as_microseconds_is_refused(tmp_path: Path) -> None:
    # arrange: the real treatment with every time multiplied by 1000 (ns values in a µs field)
    treat = _scaled(SAMPLE / "treatment.json.gz", tmp_path / "treatment_ns.json.gz", 1000)
    # act
    proc = _analyze(SAMPLE / "baseline.json.gz", treat)
    # assert
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ccdiag: error: treatment_ns.json.gz: time units differ"
    )


def test_a_real_uvm_pair_with_250x_longer_kernels_is_not_mistaken_for_a_unit_mismatch() -> None:
    # CC UVM kernels run up to ~250x longer, but API calls only ~2x: a real slowdown, analyzed
    proc = _analyze(
        ISPASS / "3DCONV-nor-uvm_cuda_gpu_trace.csv.gz",
        ISPASS / "3DCONV-cc-uvm_cuda_gpu_trace.csv.gz",
    )
    assert proc.returncode == 0, proc.stderr
    assert "uvm_migration" in proc.stdout


HTA_DIFF = REPO / "tests" / "data" / "shared" / "external" / "HolisticTraceAnalysis" / "tests"
HTA_DIFF = HTA_DIFF / "data" / "trace_diff"


def test_two_ranks_traces_are_refused_naming_both_ranks() -> None:
    """HTA's trace_diff pair: rank 3's trace against rank 1's. The refusal said only "no steps to
    align with the baseline"; it now says which ranks each side holds and what to give."""
    # act
    proc = _analyze(HTA_DIFF / "control" / "control.json.gz", HTA_DIFF / "test" / "test.json.gz")
    # assert: exit 2, one line naming the file, both ranks and the remedy, no traceback
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("ccdiag: error: test.json.gz: no steps to align")
    assert "on rank 3, the treatment's on rank 1" in lines[0]
    assert "same rank" in lines[0]
