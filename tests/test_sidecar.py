"""ccdiag capture's metadata sidecars: read with their traces, never mistaken for traces."""

from __future__ import annotations

from conftest import SAMPLES

from ccdiag import api


def test_a_rank_folder_with_sidecars_reads_only_the_traces() -> None:
    # regression: rank0.meta.json beside rank0.json.gz was read as a trace and refused (exit 2)
    trace = api.load_trace(SAMPLES / "tp2_decode" / "treatment")
    assert sorted(trace.events["rank"].unique().to_list()) == [0, 1]
    assert trace.meta.extra["emulated_cc"].startswith("b200")


def test_a_sidecar_tells_the_emulated_platform_and_mechanisms() -> None:
    base = api.load_trace(SAMPLES / "decode_eager" / "baseline.json.gz")
    treat = api.load_trace(SAMPLES / "decode_eager" / "treatment.json.gz")
    assert base.meta.extra["emulated_cc"] == "b200 (no mechanism on)"
    assert treat.meta.extra["emulated_cc"] == "b200 (launch, copy_pad, copy_sync)"
    assert base.meta.cc_mode == "off"
