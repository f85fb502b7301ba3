"""The Kineto reader on every real trace: goldens, independent counts, MANIFEST facts, quirks."""

from __future__ import annotations

import gzip
import json
import re
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import goldens
import polars as pl
import pytest
from ccdiag.parsers import kineto
from goldens import shared_path

from ccdiag import api

TRACES = goldens.kineto_traces()
HTA = "external/HolisticTraceAnalysis/tests/data"
TL = "external/TraceLens/tests/traces"


def _raw_events(path: Path) -> list[dict[str, Any]]:
    """traceEvents read by the standard library (independent of ccdiag's reader)."""
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as fh:
        return json.load(fh)["traceEvents"]


@pytest.fixture(scope="module")
def read():
    """kineto.read, memoized per path for the module."""
    cache: dict[Path, Any] = {}

    def _read(path: Path, **kw: Any) -> Any:
        key = (path, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = kineto.read(path, **kw)
        return cache[key]

    return _read


def _shared(rel: str) -> Path:
    return shared_path(*rel.split("/"))


# -- every trace ------------------------------------------------------------------------------


def test_every_kineto_trace_is_found():
    # arrange / act: discovery walks tests/data/shared
    names = {p.name for p in TRACES}
    # assert: 3 H200 traces + 19 HTA + 6 TraceLens files, and the non-trace JSON is left out
    assert len(TRACES) == 28
    assert "h200_microbench.json" not in names


@pytest.mark.parametrize("path", TRACES, ids=goldens.trace_id)
def test_summary_matches_golden(path: Path):
    # arrange
    golden = json.loads(goldens.golden_path(path).read_text())
    # act
    summary = goldens.summary_of(path)
    # assert (on a difference: run scripts/update_goldens.py and review the diff)
    assert summary == golden


@pytest.mark.parametrize("path", TRACES, ids=goldens.trace_id)
def test_every_event_is_read_or_counted_as_skipped(path: Path, read):
    # arrange
    raw = _raw_events(path)
    complete = [e for e in raw if e.get("ph") == "X"]
    # act
    trace = read(path)
    kinds = trace.events["kind"].value_counts()
    n = dict(zip(kinds["kind"].cast(pl.String), kinds["count"]))
    # assert: nothing is dropped silently
    assert trace.meta.n_events + sum(trace.meta.skipped.values()) == len(raw)
    assert trace.meta.skipped.get("flow:ac2g", 0) == sum(
        1 for e in raw if e.get("cat") == "ac2g" and e.get("ph") in ("s", "f")
    )
    gpu_kernels = sum(1 for e in complete if e.get("cat") in ("kernel", "Kernel"))
    assert n.get("kernel", 0) + n.get("collective", 0) == gpu_kernels
    runtime = sum(1 for e in complete if e.get("cat") in ("cuda_runtime", "Runtime"))
    assert n.get("runtime", 0) == runtime
    assert n.get("memcpy", 0) == sum(1 for e in complete if e.get("cat") == "gpu_memcpy")


@pytest.mark.parametrize("path", TRACES, ids=goldens.trace_id)
def test_gpu_rows_have_device_stream_and_the_launching_process(path: Path, read):
    # act
    ev = read(path).events
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "collective", "memcpy", "memset"]))
    host_pids = set(ev.filter(pl.col("kind").is_in(["runtime", "driver"]))["pid"].to_list())
    # assert
    assert gpu["device"].null_count() == 0
    assert gpu["stream"].null_count() == 0
    assert gpu["tid"].null_count() == gpu.height
    if host_pids:
        assert set(gpu["pid"].unique().to_list()) <= host_pids


# -- MANIFEST.md facts (computed upstream with json/gzip, independent of ccdiag) --------------


def _manifest_rows() -> list[tuple[str, str]]:
    rows = []
    for line in shared_path("external", "MANIFEST.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 8 and cells[1].startswith("`") and "Kineto JSON" in cells[8]:
            rows.append((cells[1].strip("`"), cells[8]))
    return rows


def _num(text: str, pattern: str) -> int | None:
    m = re.search(pattern, text)
    if not m:
        return None
    return 0 if m.group(1) == "none" else int(m.group(1).replace(",", ""))


MANIFEST = _manifest_rows()


def test_manifest_lists_every_external_kineto_trace():
    listed = {"external/" + rel for rel, _ in MANIFEST}
    found = {goldens.trace_id(p) for p in TRACES if goldens.trace_id(p).startswith("external/")}
    assert listed == found


@pytest.mark.parametrize("rel,facts", MANIFEST, ids=[r for r, _ in MANIFEST])
def test_manifest_facts(rel: str, facts: str, read):
    # arrange
    trace = read(_shared("external/" + rel))
    ev = trace.events
    kinds = dict(zip(*ev["kind"].cast(pl.String).value_counts().to_dict(as_series=False).values()))

    def count(*ks: str) -> int:
        return sum(kinds.get(k, 0) for k in ks)

    # act / assert: each fact the MANIFEST states
    assert count("kernel", "collective") == _num(facts, r"(?<!NCCL )kernels: ([\d,]+)")
    assert count("collective") == _num(facts, r"NCCL kernels: ([\d,]+|none)")
    assert count("memcpy") == _num(facts, r"memcpy: ([\d,]+|none)")
    if (memset := _num(facts, r"memset: ([\d,]+)")) is not None:
        assert count("memset") == memset
    assert count("runtime", "driver") == _num(facts, r"runtime API: ([\d,]+)")
    steps = _num(facts, r"ProfilerStep: ([\d,]+|none)")
    marker = ev.filter(
        pl.col("name").str.contains(r"^ProfilerStep#\d+$") & pl.col("device").is_null()
    )
    assert marker.height == steps
    graph = re.search(r"cudaGraphLaunch ([\d,]+) \(correlated kernels ([\d,]+)", facts)
    graph_kernels = ev.filter(pl.col("kind").is_in(["kernel", "collective"]) & pl.col("graph"))
    assert graph_kernels.height == (int(graph.group(2).replace(",", "")) if graph else 0)
    if graph:
        launches = ev.filter((pl.col("name") == "cudaGraphLaunch") & pl.col("graph"))
        assert launches.height == int(graph.group(1))
    gpu = re.search(r"GPU: (.+?) \(sm_", facts)
    assert trace.meta.gpu == (gpu.group(1) if gpu else None)
    if (rank := re.search(r"rank (\d+)", facts)) is not None:
        assert trace.meta.rank == int(rank.group(1))
    if (world := re.search(r"world_size (\d+)", facts)) is not None:
        assert trace.meta.world_size == int(world.group(1))
    if (py := _num(facts, r"python_function events: ([\d,]+)")) is not None:
        assert trace.meta.skipped["python_function"] == py


@pytest.mark.parametrize("rel,facts", MANIFEST, ids=[r for r, _ in MANIFEST])
def test_manifest_memcpy_kinds(rel: str, facts: str, read):
    # arrange: "memcpy: 1,390 (DtoD 1,280, HtoD/Pageable 45, HtoD/Pinned 35, DtoH/Pageable 30)"
    m = re.search(r"memcpy: [\d,]+ \(([^)]*)\)", facts)
    if not m:
        pytest.skip("no memcpy")
    expected = {}
    for part in re.split(r", (?=[A-Z])", m.group(1)):
        label, n = part.rsplit(" ", 1)
        expected[label] = int(n.replace(",", ""))
    # act
    ev = read(_shared("external/" + rel)).events.filter(pl.col("kind") == "memcpy")
    host_side = (
        pl.when(pl.col("copy_kind") == "HtoD")
        .then(pl.col("src_mem"))
        .when(pl.col("copy_kind") == "DtoH")
        .then(pl.col("dst_mem"))
        .cast(pl.String)
    )
    labels = ev.select(
        pl.when(host_side.is_null())
        .then(pl.col("copy_kind").cast(pl.String))
        .otherwise(pl.col("copy_kind").cast(pl.String) + "/" + host_side.str.to_titlecase())
        .alias("label")
    )["label"].value_counts()
    got = dict(zip(labels["label"], labels["count"]))
    # assert
    assert got == expected


# -- facts of the H200 traces (tests/data/shared/traces/README.md) ----------------------------


def test_h200_eager_decode_step_facts(read):
    # act
    trace = api.load_trace(shared_path("traces", "h200_decode_eager.kineto.json.gz"))
    ev = trace.events
    per_step = ev.filter(pl.col("kind") == "kernel").group_by("step").len()
    d2h = ev.filter(pl.col("kind") == "memcpy")
    nb = ev.filter(pl.col("non_blocking"))
    # assert: ~149 kernel launches per decode step; a 64 B D2H to pinned memory each step,
    # issued by a non_blocking copy; decode_step annotations
    assert trace.meta.step_marker == "decode_step"
    assert trace.steps.height == 10
    assert per_step["len"].to_list() == [149] * 10
    assert d2h.height == 10 and set(d2h["bytes"]) == {64}
    assert set(d2h["copy_kind"].cast(pl.String)) == {"DtoH"}
    assert set(d2h["dst_mem"].cast(pl.String)) == {"pinned"}
    assert nb.height == 10 and set(nb["name"]) == {"aten::copy_"}
    assert sorted(d2h["step"].to_list()) == list(range(10))


def test_h200_graph_decode_one_graph_launch_per_step():
    # act
    trace = api.load_trace(shared_path("traces", "h200_decode_graph.kineto.json.gz"))
    ev = trace.events
    launches = ev.filter(pl.col("name") == "cudaGraphLaunch").group_by("step").len()
    kernels = ev.filter(pl.col("kind") == "kernel")
    graph_corr = set(ev.filter(pl.col("name") == "cudaGraphLaunch")["correlation"])
    # assert: one cudaGraphLaunch per step; every kernel came from a graph launch
    assert launches.sort("step")["len"].to_list() == [1] * 10
    assert kernels["graph"].all()
    assert set(kernels["correlation"]) <= graph_corr
    assert kernels.group_by("step").len()["len"].to_list() == [149] * 10


def test_h200_copies_on_16_streams(read):
    # act
    ev = read(shared_path("traces", "h200_copies_streams.kineto.json.gz")).events
    small = ev.filter((pl.col("kind") == "memcpy") & (pl.col("bytes") == 32))
    big = ev.filter((pl.col("kind") == "memcpy") & (pl.col("bytes") == 16 << 20))
    # assert: 32 B D2H copies on 16 streams, then 16 MiB pinned H2D and D2H copies
    assert small["stream"].n_unique() == 16
    assert set(small["copy_kind"].cast(pl.String)) == {"DtoH"}
    assert set(big["copy_kind"].cast(pl.String)) == {"HtoD", "DtoH"}
    assert set(big["src_mem"].cast(pl.String)) | set(big["dst_mem"].cast(pl.String)) == {
        "pinned",
        "device",
    }


# -- quirks of real traces (each one bit us once) ---------------------------------------------


def test_old_layout_categories_lowercase_external_id_and_metadata_after_events(read):
    # inference_rank_1: cats Kernel/Runtime, flows async_gpu, "external id", and
    # distributedInfo written AFTER traceEvents
    trace = read(_shared(f"{HTA}/trace_file_list/inference_rank_1.json.gz"))
    ev = trace.events
    assert ev.filter(pl.col("kind") == "kernel").height == 4
    assert ev.filter(pl.col("kind") == "runtime").height == 8
    assert trace.meta.skipped["flow:async_gpu"] == 8
    assert ev.filter(pl.col("kind") == "kernel")["external_id"].null_count() == 0
    assert trace.meta.rank == 1


def test_float_microsecond_timestamps_keep_sub_microsecond_precision(read):
    # ns_resolution_trace: ts like 1712195495520854.8 (µs floats). HTA rounds these to whole µs
    # (ts up, end down); ccdiag keeps what the double holds: within 125 ns at epoch-µs
    # magnitudes (the double's spacing there is 0.25 µs); durations to the ns.
    path = _shared(f"{HTA}/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    with gzip.open(path, "rb") as fh:
        raw = json.load(fh, parse_float=Decimal)["traceEvents"]
    kernels = [e for e in raw if e.get("cat") == "kernel"][:200]
    ns = {}
    for e in kernels:
        start = (Decimal(e["ts"]) * 1000).to_integral_value(ROUND_HALF_EVEN)
        ns[e["args"]["correlation"]] = (int(start), int(Decimal(e["dur"]) * 1000))
    ev = read(path).events.filter(
        pl.col("correlation").is_in(list(ns)) & (pl.col("kind") == "kernel")
    )
    assert ev.height == len(ns)
    for corr, start, dur in ev.select("correlation", "start_ns", "dur_ns").iter_rows():
        assert abs(start - ns[corr][0]) <= 125
        assert abs(dur - ns[corr][1]) <= 1
    assert any(d % 1000 for d in ev["dur_ns"].to_list())  # sub-µs parts survived


def test_h200_timestamps_are_exact_to_the_nanosecond(read):
    # ts ~5.1e12 µs: the double holds the 3 decimals, so ns are exact
    path = shared_path("traces", "h200_decode_eager.kineto.json.gz")
    with gzip.open(path, "rb") as fh:
        raw = json.load(fh, parse_float=Decimal)["traceEvents"]
    want = {
        e["args"]["correlation"]: int(Decimal(e["ts"]) * 1000)
        for e in raw
        if e.get("cat") == "kernel"
    }
    ev = read(path).events.filter(pl.col("kind") == "kernel")
    got = dict(ev.select("correlation", "start_ns").iter_rows())
    assert got == want


def test_cuda13_driver_launches_keep_their_names(read):
    # b200 eager: cuLaunchKernelEx / cuLaunchKernel (cat cuda_driver) next to cudaLaunchKernelExC
    ev = read(_shared(f"{TL}/b200/eager_trace.json.gz")).events
    driver = ev.filter(pl.col("kind") == "driver")
    names = set(driver["name"])
    assert names == {"cuLaunchKernel", "cuLaunchKernelEx"}
    assert "cudaLaunchKernelExC" in set(ev.filter(pl.col("kind") == "runtime")["name"])
    launched = ev.filter(pl.col("kind").is_in(["kernel", "collective"])).join(
        driver.select("correlation"), on="correlation"
    )
    assert launched.height == driver.height  # every driver launch found its kernel


def test_triton_kernel_launched_through_the_driver_api(read):
    ev = read(_shared(f"{HTA}/triton_example/triton_example.json.gz")).events
    drv = ev.filter(pl.col("kind") == "driver")
    assert drv["name"].to_list() == ["cuLaunchKernel"]
    k = ev.filter(pl.col("kind") == "kernel")
    assert k["correlation"].to_list() == drv["correlation"].to_list()


def test_nccl_bytes_from_the_kernel_args(read):
    # b200: the kernel carries In/Out msg nelems (25136 / 201088) and dtype BFloat16
    ev = read(_shared(f"{TL}/b200/eager_trace.json.gz")).events
    coll = ev.filter(pl.col("kind") == "collective")
    assert coll["bytes"].to_list() == [201088 * 2]
    rpc = ev.filter(pl.col("name") == "record_param_comms")
    assert rpc["bytes"].to_list() == [201088 * 2]


def test_nccl_bytes_agree_with_record_param_comms_by_external_id(read):
    ev = read(_shared(f"{HTA}/nccl_parser_config/nccl_data.json.gz")).events
    coll = ev.filter(pl.col("kind") == "collective").select("external_id", "bytes")
    rpc = ev.filter(pl.col("name") == "record_param_comms").select(
        "external_id", pl.col("bytes").alias("rpc_bytes")
    )
    joined = coll.join(rpc, on="external_id")
    assert joined.height == coll.height == 21
    assert (joined["bytes"] == joined["rpc_bytes"]).all()


def test_nccl_bytes_by_time_containment_in_old_traces(read):
    # sampled_rank-0: kernels have no size args, External ids do not link; the launch call
    # lies inside a record_param_comms whose first input is [419430400] x unsigned char
    ev = read(_shared(f"{HTA}/trace_filter/sampled_rank-0.json.gz")).events
    coll = ev.filter(pl.col("kind") == "collective")
    sizes = coll["bytes"].drop_nulls().to_list()
    assert 419430400 in sizes
    assert coll.height == 10 and len(sizes) == 4


def test_cuda_sync_records_are_sync_rows(read):
    ev = read(
        _shared(f"{HTA}/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz")
    ).events
    sync = ev.filter(pl.col("kind") == "sync")["name"].value_counts()
    assert dict(zip(sync["name"], sync["count"])) == {
        "Stream Sync": 16,
        "Context Sync": 5,
        "Stream Wait Event": 20,
    }


def test_cupti_counter_trace_is_host_only(read):
    trace = read(_shared(f"{HTA}/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"))
    assert trace.meta.host_only
    assert trace.meta.skipped["cuda_profiler_range (CUPTI counters)"] == 77


def test_hta_overlay_output_flows_are_counted(read):
    path = f"{HTA}/critical_path/end_to_end/simple_add/output/overlaid_critical_path_trace.json.gz"
    trace = read(_shared(path))
    assert trace.meta.skipped["flow:critical_path"] == 384
    assert trace.meta.n_events == 837


def test_python_functions_are_skipped_unless_asked(read):
    path = _shared(f"{TL}/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    assert read(path).meta.skipped["python_function"] == 1385
    with_py = read(path, python_functions=True)
    assert "python_function" not in with_py.meta.skipped
    assert with_py.events.filter(pl.col("kind") == "python").height == 1385


def test_tracelens_metadata_gives_versions(read):
    meta = read(_shared(f"{TL}/h100/gaunernst_bert-small-uncased__1016001.json.gz")).meta
    assert (meta.torch_version, meta.cuda_runtime, meta.cuda_driver) == (
        "2.6.0+cu124",
        "12.4",
        "12.9",
    )
    assert (meta.driver_version, meta.nccl_version) == ("575.51.03", "2.21.5")


def test_gpu_is_the_one_kernels_ran_on(read):
    # trace_diff/control: 8 A100s listed, rank 3 ran on device 3
    trace = read(_shared(f"{HTA}/trace_diff/control/control.json.gz"))
    devices = trace.events.filter(pl.col("kind") == "kernel")["device"].unique().to_list()
    assert devices == [3]
    assert trace.meta.gpus == ["NVIDIA A100-PG509-200"]


def test_non_blocking_unknown_without_recorded_inputs(read):
    ev = read(_shared(f"{HTA}/trace_diff/test/test.json.gz")).events
    copies = ev.filter(pl.col("name").is_in(["aten::copy_", "aten::to", "aten::_to_copy"]))
    assert copies.height > 0 and copies["non_blocking"].null_count() == copies.height


def test_invalid_runtime_names_are_kept_but_are_not_launches(read):
    ev = read(_shared(f"{HTA}/df_index_resolver/df_index_resolver.json.gz")).events
    invalid = ev.filter(pl.col("name") == "INVALID")
    summary = api.summarize(
        api.load_trace(_shared(f"{HTA}/df_index_resolver/df_index_resolver.json.gz"))
    )
    launches = ev.filter(pl.col("name").is_in(["cudaLaunchKernel", "cudaGraphLaunch"])).height
    assert invalid.height > 0 and set(invalid["kind"].cast(pl.String)) == {"runtime"}
    assert summary["launches"]["count"] == launches
