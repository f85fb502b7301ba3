"""The Nsight Systems SQLite reader on every real export, edited copies of them, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from ccdiag.parsers import _sqlite_fetch, nsys_sqlite
from nsys_fixtures import (
    EAGER,
    FLAMEOX,
    GRAPH,
    H100_2GPU,
    MFU_AFTER,
    MFU_BEFORE,
    MOCK,
    REAL_SQLITE,
    count,
    edited,
    rows,
)

from ccdiag import parsers
from ccdiag.errors import InputError
from ccdiag.schema import EVENT_COLUMNS, validate_events

KERNEL_KINDS = ["kernel", "collective"]
API_KINDS = ["runtime", "driver"]


@pytest.fixture(scope="module")
def traces() -> dict[str, object]:
    """Every real export, read once."""
    return {p.name: nsys_sqlite.read(p) for p in REAL_SQLITE}


def _n(df: pl.DataFrame, *kinds: str) -> int:
    return df.filter(pl.col("kind").is_in(list(kinds))).height


# ---- every real export: each table's rows land in the right kind, nothing lost -------------


@pytest.mark.parametrize("path", REAL_SQLITE, ids=lambda p: p.name)
def test_every_row_of_every_read_table_becomes_one_event(path: Path, traces: dict) -> None:
    # arrange
    trace = traces[path.name]
    ev = trace.events
    graph_rows = count(path, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    nvtx = count(path, "NVTX_EVENTS", "WHERE eventType IN (34, 59, 60, 70, 71)")
    overhead = count(path, "PROFILER_OVERHEAD") + count(path, "CUPTI_ACTIVITY_KIND_OVERHEAD")
    # act / assert
    assert list(ev.schema) == list(EVENT_COLUMNS)
    assert validate_events(ev).height == ev.height == trace.meta.n_events
    assert _n(ev, *API_KINDS) == count(path, "CUPTI_ACTIVITY_KIND_RUNTIME")
    assert _n(ev, *KERNEL_KINDS) == count(path, "CUPTI_ACTIVITY_KIND_KERNEL") + graph_rows
    assert _n(ev, "memcpy") == count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert _n(ev, "memset") == count(path, "CUPTI_ACTIVITY_KIND_MEMSET")
    assert _n(ev, "sync") == count(path, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    assert _n(ev, "annotation") == nvtx
    assert _n(ev, "overhead") == overhead


@pytest.mark.parametrize("path", REAL_SQLITE, ids=lambda p: p.name)
def test_times_are_the_exports_nanoseconds(path: Path, traces: dict) -> None:
    # arrange
    ev = traces[path.name].events.filter(pl.col("kind").is_in(KERNEL_KINDS))
    want = rows(
        path, "SELECT min(start), max(end), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    graphs = count(path, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    # act
    got = ev.filter(~pl.col("name").str.starts_with("[CUDA graph")) if graphs else ev
    # assert
    lo, hi, total = want[0]
    assert got["start_ns"].min() == lo
    assert (got["start_ns"] + got["dur_ns"]).max() == hi
    assert got["dur_ns"].sum() == total


# ---- facts published with the files (MANIFEST.md, anchors-nsys.md, traces/README.md) -------


@pytest.mark.parametrize(
    ("path", "kernels", "nccl", "memcpy", "memset", "api", "sync", "nvtx"),
    [
        (MFU_BEFORE, 4010, 66, 1020, 269, 7466, 366, 19118),
        (MFU_AFTER, 3587, 62, 904, 242, 6682, 334, 17113),
        (H100_2GPU, 3442, 0, 904, 22, 5796, 244, 16782),
        (MOCK, 2, 0, 1, 0, 9, 1, 0),
        (EAGER, 4487, 0, 129, 30, 10407, 129, 30),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_counts_match_the_published_facts(
    path: Path,
    kernels: int,
    nccl: int,
    memcpy: int,
    memset: int,
    api: int,
    sync: int,
    nvtx: int,
    traces: dict,
) -> None:
    # arrange
    ev = traces[path.name].events
    # act / assert
    assert _n(ev, *KERNEL_KINDS) == kernels
    assert _n(ev, "collective") == nccl
    assert _n(ev, "memcpy") == memcpy
    assert _n(ev, "memset") == memset
    assert _n(ev, *API_KINDS) == api
    assert _n(ev, "sync") == sync
    assert _n(ev, "annotation") == nvtx


def test_correlation_joins_within_a_process_not_across(traces: dict) -> None:
    """Quirk: correlation ids repeat across the 2 processes of one file (anchors 0.3)."""
    # arrange
    ev = traces[MFU_BEFORE.name].events
    kernels = ev.filter(pl.col("kind").is_in(KERNEL_KINDS))
    api = ev.filter(pl.col("kind").is_in(API_KINDS))
    # act
    by_process = kernels.join(api.select("pid", "correlation"), on=["pid", "correlation"])
    by_id_only = kernels.join(api.select("correlation"), on="correlation")
    # assert
    assert by_process.height == 3986
    assert by_id_only.height == 4280  # what a correlationId-only join would wrongly give


@pytest.mark.parametrize("path", [MFU_BEFORE, MFU_AFTER, H100_2GPU], ids=lambda p: p.name)
def test_each_process_of_a_torchrun_capture_is_a_rank_on_its_own_gpu(
    path: Path, traces: dict
) -> None:
    # arrange
    trace = traces[path.name]
    gpu = trace.events.filter(pl.col("device").is_not_null())
    # act
    per_rank = gpu.group_by("rank").agg(pl.col("device").n_unique(), pl.col("pid").n_unique())
    # assert
    assert trace.meta.ranks == [0, 1]
    assert trace.meta.world_size == 2
    assert per_rank.sort("rank").rows() == [(0, 1, 1), (1, 1, 1)]
    assert any("processes ran GPU work" in w for w in trace.meta.warnings)


def test_driver_calls_are_event_class_1_and_names_lose_the_version_suffix(traces: dict) -> None:
    # arrange
    ev = traces[EAGER.name].events.filter(pl.col("kind").is_in(API_KINDS))
    # act
    kinds = dict(ev.group_by("kind").len().iter_rows())
    names = set(ev["name"].unique())
    # assert
    assert kinds == {"driver": 5405, "runtime": 5002}
    assert {"cudaLaunchKernel", "cuKernelGetName", "cudaStreamSynchronize"} <= names
    assert not any(n.startswith("cudaLaunchKernel_v") for n in names)
    assert ev.filter(pl.col("name").str.contains(r"_v\d{4,}$")).is_empty()


@pytest.mark.parametrize(
    ("path", "sync_type", "n"), [(EAGER, 2, 129), (MFU_BEFORE, 3, 33)], ids=["2025.3", "2026.2"]
)
def test_syncs_are_named_by_their_api_call_whatever_the_sync_type(
    path: Path, sync_type: int, n: int, traces: dict
) -> None:
    """Quirk: 2025.x exports label cudaStreamSynchronize 'Stream wait sync' (2), 2026.x (3)."""
    # arrange
    recorded = rows(
        path, "SELECT syncType, count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION GROUP BY 1"
    )
    ev = traces[path.name].events.filter(pl.col("kind") == "sync")
    # act
    stream_syncs = ev.filter(pl.col("name") == "cudaStreamSynchronize")
    # assert
    assert (sync_type, n) in recorded or sync_type in dict(recorded)
    assert stream_syncs.height == n
    assert stream_syncs["tid"].null_count() == 0  # the calling thread comes with the name


def test_whole_graph_launches_are_one_kernel_row_each_tied_to_cuda_graph_launch(
    traces: dict,
) -> None:
    # arrange
    ev = traces[GRAPH.name].events
    # act
    graph_rows = ev.filter(pl.col("name").str.starts_with("[CUDA graph"))
    launches = ev.filter(pl.col("name") == "cudaGraphLaunch")
    joined = graph_rows.join(launches, on=["pid", "correlation"])
    # assert
    assert graph_rows.height == launches.height == joined.height == 30
    assert graph_rows["graph"].all() and launches["graph"].all()
    assert set(graph_rows["kind"]) == {"kernel"}
    assert graph_rows["stream"].null_count() == 0
    assert traces[GRAPH.name].meta.skipped["CUDA graph creation/instantiation records"] == 4


def test_flameox_fixture_kernels_graphs_pageable_copy_and_stream_syncs(traces: dict) -> None:
    # arrange
    trace = traces[FLAMEOX.name]
    ev = trace.events
    # act
    copy = ev.filter(pl.col("kind") == "memcpy").row(0, named=True)
    # assert
    assert ev.filter(pl.col("kind") == "kernel")["graph"].to_list().count(True) == 2
    assert ev.filter(pl.col("kind") == "kernel").height == 5  # 3 kernels + 2 graph launches
    assert (copy["copy_kind"], copy["src_mem"], copy["dst_mem"]) == ("HtoD", "pageable", "device")
    assert copy["bytes"] == 4096
    assert ev.filter(pl.col("kind") == "sync")["name"].to_list() == ["cudaStreamSynchronize"] * 2
    assert trace.meta.skipped["OS runtime calls (OSRT_API), not used by the rules"] == 654


def test_eager_decode_copies_by_memory_kind(traces: dict) -> None:
    # arrange
    ev = traces[EAGER.name].events.filter(pl.col("kind") == "memcpy")
    # act
    by = ev.group_by("copy_kind", "src_mem", "dst_mem").agg(pl.len(), pl.col("bytes").sum())
    # assert
    assert sorted(by.rows()) == [
        ("DtoH", "device", "pinned", 30, 1920),  # the sampled token, 64 B per step
        ("HtoD", "pageable", "device", 99, 232076288),
    ]


def test_nvtx_ranges_and_the_nccl_domain_of_a_trimmed_export(traces: dict) -> None:
    """Quirk: nsys-ai's time-trimmed exports lost the DomainCreate rows of NCCL's domain 1."""
    # arrange
    ev = traces[MFU_BEFORE.name].events.filter(pl.col("kind") == "annotation")
    # act
    domains = dict(ev.group_by("domain").len().iter_rows())
    nccl = set(ev.filter(pl.col("domain") == "NCCL")["name"])
    # assert
    assert domains == {None: 18656, "NCCL": 462}
    assert nccl == {"ncclCommCount", "ncclGroupStart", "ncclSend", "ncclRecv", "ncclGroupEnd"}
    decode = traces[EAGER.name].events.filter(pl.col("kind") == "annotation")
    assert decode["name"].unique().to_list() == ["decode_step"]
    assert decode.height == 30 and decode["tid"].null_count() == 0


def test_collectives_are_the_nccl_kernels(traces: dict) -> None:
    # arrange
    ev = traces[MFU_BEFORE.name].events
    # act
    names = set(ev.filter(pl.col("kind") == "collective")["name"])
    # assert
    assert names and all("nccl" in n.lower() for n in names)
    assert ev.filter(
        (pl.col("kind") == "kernel") & pl.col("name").str.contains("(?i)nccl")
    ).is_empty()


@pytest.mark.parametrize(
    ("path", "meta"),
    [
        (
            EAGER,
            {
                "gpu": "NVIDIA H200",
                "driver_version": "580.159.04",
                "cuda_driver": "13.0",
                "cuda_runtime": "13.0.2",
                "nccl_version": "2.28.3",
                "schema_version": "3.20.3",
                "cc_mode": "off",
            },
        ),
        (
            MFU_BEFORE,
            {
                "gpu": None,
                "driver_version": "580.95.05",
                "cuda_driver": "13.0",
                "cuda_runtime": "12.8.0",
                "nccl_version": "2.25.1",
                "schema_version": "3.25.0",
                "cc_mode": None,
            },
        ),
        (FLAMEOX, {"gpu": "NVIDIA GeForce RTX 3060", "schema_version": "3.24.0", "cc_mode": "off"}),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_metadata(path: Path, meta: dict, traces: dict) -> None:
    # arrange
    got = traces[path.name].meta
    # act / assert
    for key, value in meta.items():
        assert getattr(got, key) == value, key
    assert got.format == "nsys_sqlite" and got.profiler == "nsys" and got.source == path.name
    if meta.get("gpu") is None:
        assert any("GPU model not recorded" in w for w in got.warnings)


# ---- privacy: the captured environment never leaves the parser ------------------------------


def _secrets(path: Path) -> set[str]:
    """Every environment value, host/user name and path the export holds."""
    found: set[str] = set()
    for name, value in rows(path, "SELECT name, value FROM META_DATA_CAPTURE"):
        if name.endswith("ENVIRONMENT_VARIABLE"):
            key, _, val = str(value).partition("=")
            if key not in ("CUDA_VERSION", "NCCL_VERSION"):  # the two read on purpose
                found.add(val.strip('"'))
        elif name.split(":")[-1] in ("COMMAND", "WORKING_DIR") or "ARGUMENT" in name:
            found.add(str(value))
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if count(path, table):
            for name, value in rows(path, f"SELECT name, value FROM {table}"):
                if "PATH" in name or name in ("EXPORT_HOST", "EXPORT_USER"):
                    found.add(str(value))
    for name, value in rows(path, "SELECT name, value FROM TARGET_INFO_SYSTEM_ENV"):
        if name == "DeviceEnvironment":
            found |= {kv.partition("=")[2] for kv in str(value).split(";")}
        elif name in ("Hostname", "TargetInstallDir"):
            found.add(str(value))
    # long enough to be meaningful; not a bare number or a boolean
    return {s for s in found if len(s) >= 6 and not s.replace(".", "").replace("-", "").isdigit()}


@pytest.mark.parametrize("path", REAL_SQLITE, ids=lambda p: p.name)
def test_no_environment_value_host_user_or_path_reaches_meta_or_events(
    path: Path, traces: dict
) -> None:
    # arrange
    trace = traces[path.name]
    secrets = _secrets(path)
    meta_text = json.dumps(trace.meta.model_dump())
    strings = trace.events.select(pl.col("name"), pl.col("domain")).unique()
    event_text = "\n".join(str(v) for v in strings["name"].to_list() + strings["domain"].to_list())
    # act
    leaked = sorted(s for s in secrets if s in meta_text or s in event_text)
    # assert
    assert len(secrets) >= 5  # the oracle found the file's environment
    assert leaked == []


# ---- edited copies: CC-style copies, UVM, old schemas, metadata fallbacks -----------------------


def test_cc_relabelled_pinned_copies_and_uvm_migrations(tmp_path: Path) -> None:
    """Under CC a pinned H2D shows as DtoD with a Managed source (hcc-ispass25 README)."""
    # arrange: the mock export's one DtoH copy, duplicated with edited kinds
    m = "CUPTI_ACTIVITY_KIND_MEMCPY"
    cols = "start, end, deviceId, contextId, streamId, globalPid, bytes, srcDeviceId, dstDeviceId"
    path = edited(
        MOCK,
        tmp_path,
        f"INSERT INTO {m} ({cols}, correlationId, copyKind, srcKind, dstKind) "
        f"SELECT {cols}, 0, 8, 4, 2 FROM {m}",  # Managed -> Device labelled DtoD
        f"INSERT INTO {m} ({cols}, correlationId, copyKind, srcKind, dstKind) "
        f"SELECT {cols}, 0, 8, 2, 4 FROM {m} WHERE copyKind = 2",  # Device -> Managed
        f"INSERT INTO {m} ({cols}, correlationId, copyKind, srcKind, dstKind, migrationCause) "
        f"SELECT {cols}, 0, 11, 7, 7, 2 FROM {m} WHERE copyKind = 2",  # UVM HtoD
    )
    # act
    ev = nsys_sqlite.read(path).events.filter(pl.col("kind") == "memcpy")
    got = ev.select("name", "copy_kind", "src_mem", "dst_mem", "correlation").rows()
    # assert
    assert sorted(got, key=str) == sorted(
        [
            ("[CUDA memcpy Device-to-Host]", "DtoH", "device", "pinned", ev["correlation"][0]),
            ("[CUDA memcpy Device-to-Device]", "HtoD", "managed", "device", None),
            ("[CUDA memcpy Device-to-Device]", "DtoH", "device", "managed", None),
            ("[CUDA memcpy Unified Host-to-Device]", "HtoD", "managed", "managed", None),
        ],
        key=str,
    )


def test_uvm_page_fault_tables_become_uvm_fault_rows(tmp_path: Path) -> None:
    # arrange: the documented tables (anchors-nsys 1.9), absent from every public export
    path = edited(
        MOCK,
        tmp_path,
        "CREATE TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL, end INTEGER NOT "
        "NULL, globalPid INTEGER, deviceId INTEGER, address INTEGER, numberOfPageFaults "
        "INTEGER, faultAccessType INTEGER)",
        "INSERT INTO CUDA_UM_GPU_PAGE_FAULT_EVENTS SELECT start, start + 5000, globalPid, 0, "
        "4096, 3, 2 FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "CREATE TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, "
        "address INTEGER)",
        "INSERT INTO CUDA_UM_CPU_PAGE_FAULT_EVENTS SELECT start, globalPid, 8192 FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL",
    )
    # act
    ev = nsys_sqlite.read(path).events.filter(pl.col("kind") == "uvm_fault")
    # assert
    assert sorted(ev.select("name", "dur_ns", "device").rows()) == [
        ("[Unified Memory CPU page fault]", 0, None),
        ("[Unified Memory CPU page fault]", 0, None),
        ("[Unified Memory GPU page fault (Write)]", 5000, 0),
        ("[Unified Memory GPU page fault (Write)]", 5000, 0),
    ]
    assert ev["pid"].unique().to_list() == [91186]


def test_an_old_schema_export_without_enum_tables_or_newer_columns(tmp_path: Path) -> None:
    """Schema 3.0 (2022.4): EXPORT_META_DATA, no greenContextId/graphId, enums by number."""
    # arrange
    enums = rows(MOCK, "SELECT name FROM sqlite_master WHERE name LIKE 'ENUM_%'")
    path = edited(
        MOCK,
        tmp_path,
        "ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA",
        "UPDATE EXPORT_META_DATA SET value = '3.0.0' WHERE name = 'EXPORT_SCHEMA_VERSION'",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN greenContextId",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN graphId",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN copyCount",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION DROP COLUMN eventSyncId",
        *[f"DROP TABLE {name}" for (name,) in enums],
    )
    # act
    trace = nsys_sqlite.read(path)
    ev = trace.events
    # assert
    assert trace.meta.schema_version == "3.0.0"
    assert _n(ev, "kernel") == 2 and _n(ev, "driver") == 1 and _n(ev, "runtime") == 8
    copy = ev.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (copy["name"], copy["copy_kind"], copy["dst_mem"]) == (
        "[CUDA memcpy Device-to-Host]",
        "DtoH",
        "pinned",
    )


def test_gpu_name_and_cc_flag_fall_back_to_gpu_info_json(tmp_path: Path) -> None:
    # arrange
    gpu_info = rows(EAGER, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'GpuInfo'")[0][0]
    cc_on = gpu_info.replace(
        '"InConfidentialComputeMode":false', '"InConfidentialComputeMode":true'
    )
    path = edited(
        EAGER,
        tmp_path,
        "DROP TABLE TARGET_INFO_GPU",
        f"UPDATE TARGET_INFO_SYSTEM_ENV SET value = '{cc_on}' WHERE name = 'GpuInfo'",
    )
    # act
    meta = nsys_sqlite.read(path).meta
    # assert
    assert cc_on != gpu_info
    assert meta.gpu == "NVIDIA H200" and meta.gpus == ["NVIDIA H200"]
    assert meta.cc_mode == "devtools"  # CC reported on, yet GPU work was traced


@pytest.mark.parametrize("bad_id", ["X'C041C8'", "'gpu0'", "1.5"])
def test_a_gpu_id_that_is_not_an_integer_is_not_a_gpu(tmp_path: Path, bad_id: str) -> None:
    # arrange: found by the fuzz run speed-sqlite-aligned (a blob id crashed int())
    path = edited(EAGER, tmp_path, f"UPDATE TARGET_INFO_GPU SET id = {bad_id}")
    # act
    meta = nsys_sqlite.read(path).meta
    # assert: the name comes from the GpuInfo JSON instead
    assert meta.gpu == "NVIDIA H200"


def test_a_host_only_export_is_read_with_a_warning(tmp_path: Path) -> None:
    """What CC mode 'on' gives: API calls, no GPU activity (NVIDIA/nvtrust#74)."""
    # arrange
    gpu_tables = ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "CUDA_EVENT")
    path = edited(EAGER, tmp_path, *[f"DROP TABLE CUPTI_ACTIVITY_KIND_{t}" for t in gpu_tables])
    # act
    trace = nsys_sqlite.read(path)
    # assert
    assert trace.meta.host_only
    assert any("no GPU kernels recorded" in w for w in trace.meta.warnings)
    assert _n(trace.events, *API_KINDS) == 10407
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in trace.meta.extra["nsys_tables_absent"]


def test_parallel_part_reading_gives_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    # arrange: tiny parts and no minimum, so the read-ahead threads really run
    sequential = nsys_sqlite.read(EAGER, workers=1).events
    monkeypatch.setattr(_sqlite_fetch, "PART_ROWS", 1000)
    monkeypatch.setattr(_sqlite_fetch, "PARALLEL_MIN_ROWS", 0)
    # act
    parallel = nsys_sqlite.read(EAGER, workers=2).events
    # assert
    assert parallel.equals(sequential)


# ---- bad input: one line naming the file and what is wrong -----------------------------------


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", "no CUPTI_ACTIVITY_KIND_RUNTIME table"),
        ("DROP TABLE StringIds", "not an Nsight Systems export (no StringIds table)"),
        (
            "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName",
            "table CUPTI_ACTIVITY_KIND_KERNEL has no column demangledName",
        ),
    ],
    ids=["no-runtime", "no-strings", "no-kernel-name"],
)
def test_missing_tables_or_columns_are_named(tmp_path: Path, sql: str, message: str) -> None:
    # arrange
    path = edited(MOCK, tmp_path, sql, name="broken.sqlite")
    # act
    with pytest.raises(InputError) as err:
        nsys_sqlite.read(path)
    # assert
    assert err.value.line().startswith("broken.sqlite: ")
    assert message in err.value.line()
    assert "\n" not in err.value.line()


def test_cli_exits_2_with_one_line_for_a_missing_table(tmp_path: Path) -> None:
    # arrange
    path = edited(MOCK, tmp_path, "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", name="run.sqlite")
    # act
    res = subprocess.run(
        [sys.executable, "-c", "from ccdiag.cli import main; main()", "summary", str(path)],
        capture_output=True,
        text=True,
    )
    # assert
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("ccdiag: error: run.sqlite: no CUDA API calls recorded")


@pytest.mark.parametrize("keep", [0.02, 0.3, 0.6, 0.95])
def test_a_truncated_export_is_an_input_error(tmp_path: Path, keep: float) -> None:
    # arrange
    data = EAGER.read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[: int(len(data) * keep)])
    # act
    with pytest.raises(InputError) as err:
        parsers.read(path)
    # assert
    assert err.value.line().startswith("cut.sqlite: corrupt or truncated SQLite file")


def test_a_sqlite_file_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    # arrange
    import sqlite3

    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()
    # act
    with pytest.raises(InputError) as err:
        parsers.read(path)
    # assert
    assert "not an Nsight Systems export" in err.value.line()


def test_a_kineto_file_named_sqlite_is_sniffed_by_content(tmp_path: Path) -> None:
    # arrange
    path = tmp_path / "trace.sqlite"
    path.write_text('{"traceEvents": []}')
    # act
    fmt = parsers.sniff(path)
    with pytest.raises(InputError) as err:
        nsys_sqlite.read(path)
    # assert
    assert fmt == "kineto"
    assert err.value.line().startswith("trace.sqlite: corrupt or truncated SQLite file")


def test_a_thread_that_meets_a_corrupt_page_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # arrange: keep the schema pages, cut the data; force the read-ahead threads
    path = tmp_path / "cut.sqlite"
    path.write_bytes(EAGER.read_bytes()[: len(EAGER.read_bytes()) // 2])
    monkeypatch.setattr(_sqlite_fetch, "PART_ROWS", 1000)
    monkeypatch.setattr(_sqlite_fetch, "PARALLEL_MIN_ROWS", 0)
    # act
    with pytest.raises(InputError) as err:
        nsys_sqlite.read(path, workers=2)
    # assert
    assert err.value.line().startswith("cut.sqlite: corrupt or truncated SQLite file")


def test_event_syncs_have_no_stream_and_syncs_take_their_contexts_device(traces: dict) -> None:
    """Quirks (nsys 2026.2, 2 GPUs): event syncs carry stream 0xFFFFFFFF (CUPTI's invalid id),
    and every sync row says deviceId 0, also those of the process on GPU 1."""
    # arrange
    raw = rows(
        MFU_BEFORE,
        "SELECT count(*), sum(streamId = 4294967295), sum(deviceId = 0) "
        "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    )[0]
    ev = traces[MFU_BEFORE.name].events.filter(pl.col("kind") == "sync")
    # act
    by = ev.group_by("name").agg(pl.col("stream").null_count(), pl.len())
    devices = ev.group_by("pid").agg(pl.col("device").unique()).sort("pid")
    # assert
    assert raw == (366, 133, 366)
    assert dict((n, (s, k)) for n, s, k in by.rows())["cudaEventQuery"] == (133, 133)
    assert devices["device"].to_list() == [[0], [1]]
