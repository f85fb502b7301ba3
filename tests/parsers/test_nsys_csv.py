"""The nsys stats CSV reader on every set of the ISPASS 2025 artifact (H100 + TDX, CC on/off)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest
from ccdiag.parsers import nsys_csv

from ccdiag import parsers
from ccdiag.errors import InputError

CSV = Path(__file__).resolve().parents[1] / "data" / "shared" / "external" / "hcc-ispass25"
CSV = CSV / "example_csv"
APPS = ("3DCONV", "BN", "FDTD-2D", "GRAMSCHM", "hotspot3D", "kmeans")
CONFIGS = ("nor-nor", "cc-nor", "nor-uvm", "cc-uvm")
SETS = [f"{a}-{c}" for a in APPS for c in CONFIGS]
API = ["runtime", "driver"]


@pytest.fixture(scope="module")
def traces() -> dict[str, object]:
    """Every set, read once (from the api_trace file; siblings found by prefix)."""
    return {s: nsys_csv.read(CSV / f"{s}_cuda_api_trace.csv.gz") for s in SETS}


def _rows(report: Path) -> int:
    with gzip.open(report, "rt") as fh:
        return sum(1 for _ in fh) - 1


def _ms(ns: float | None) -> float:
    return round((ns or 0) / 1e6, 3)


def _us(ns: float | None) -> float:
    return round((ns or 0) / 1e3, 2)


@pytest.mark.parametrize("name", SETS)
def test_every_row_is_an_event_and_the_sums_agree_with_the_traces(name: str, traces: dict) -> None:
    # arrange
    trace = traces[name]
    ev = trace.events
    gpu_report = CSV / f"{name}_cuda_gpu_trace.csv.gz"
    # act
    n_api = ev.filter(pl.col("kind").is_in(API)).height
    n_gpu = ev.filter(pl.col("device").is_not_null()).height
    # assert
    assert n_api == _rows(CSV / f"{name}_cuda_api_trace.csv.gz")
    assert n_gpu == (_rows(gpu_report) if gpu_report.exists() else 0)
    assert trace.meta.n_events == ev.height and trace.meta.skipped == {}
    mismatch = [w for w in trace.meta.warnings if "disagrees with the trace" in w]
    assert mismatch == []  # cuda_api_sum and cuda_gpu_kern_sum match the trace reports
    assert trace.meta.format == "nsys_csv" and trace.meta.source == name
    if gpu_report.exists():
        assert trace.meta.gpu == "NVIDIA H100 NVL" and set(ev["device"].drop_nulls()) == {0}
        assert ev["pid"].n_unique() == 1 and ev["pid"].null_count() == 0


# The README's tables ("Summary of the copied apps"): launches, cudaLaunchKernel median µs,
# cudaMemcpy* calls and median µs, GPU kernel total ms, CUDA API total ms, off -> on.
EXPLICIT = {
    "3DCONV": (254, 4.86, 11.66, 3, 1588.79, 26074.24, 0.599, 0.602, 282.527, 1374.050),
    "BN": (4501, 4.51, 11.11, 13503, 7.52, 22.57, 336.003, 339.755, 685.505, 2085.885),
    "FDTD-2D": (1500, 4.81, 11.25, 5, 406.18, 6095.15, 30.046, 29.828, 241.316, 1308.515),
    "GRAMSCHM": (6144, 4.79, 11.11, 2, 433.73, 7571.16, 1612.127, 1606.623, 1887.607, 3036.603),
    "hotspot3D": (100, 4.86, 11.94, 3, 223.02, 3392.87, 4.250, 4.276, 182.656, 1189.726),
    "kmeans": (500, 4.73, 10.68, 7, 13.71, 38.14, 18274.261, 18265.047, 18479.844, 19445.323),
}
UVM = {
    "3DCONV": (254, 4.94, 11.46, 51.735, 12970.573, 252.897, 14145.430),
    "BN": (4501, 4.74, 17.55, 399.811, 31062.879, 733.008, 35400.075),
    "FDTD-2D": (1500, 4.88, 11.13, 44.362, 4636.590, 245.937, 5849.991),
    "GRAMSCHM": (6144, 4.74, 11.12, 1628.191, 1737.967, 1876.837, 3102.724),
    "hotspot3D": (100, 4.74, 11.43, 10.447, 2290.717, 198.846, 3460.654),
    "kmeans": (500, 4.78, 11.04, 18274.852, 22371.683, 18463.486, 23555.486),
}


def _facts(ev: pl.DataFrame) -> dict[str, float]:
    api = ev.filter(pl.col("kind").is_in(API))
    launch = api.filter(pl.col("name") == "cudaLaunchKernel")["dur_ns"]
    copies = api.filter(pl.col("name").str.starts_with("cudaMemcpy"))["dur_ns"]
    kernels = ev.filter(pl.col("kind").is_in(["kernel", "collective"]))["dur_ns"]
    return {
        "launches": launch.len(),
        "launch_us": _us(launch.median()),
        "copies": copies.len(),
        "copy_us": _us(copies.median()),
        "kernel_ms": _ms(kernels.sum()),
        "api_ms": _ms(api["dur_ns"].sum()),
    }


@pytest.mark.parametrize("app", APPS)
def test_explicit_copy_pair_matches_the_published_table(app: str, traces: dict) -> None:
    # arrange
    n, l_off, l_on, c, c_off, c_on, k_off, k_on, a_off, a_on = EXPLICIT[app]
    # act
    off, on = _facts(traces[f"{app}-nor-nor"].events), _facts(traces[f"{app}-cc-nor"].events)
    # assert
    assert (off["launches"], off["launch_us"], off["copies"], off["copy_us"]) == (
        n,
        l_off,
        c,
        c_off,
    )
    assert (on["launches"], on["launch_us"], on["copies"], on["copy_us"]) == (n, l_on, c, c_on)
    assert (off["kernel_ms"], on["kernel_ms"], off["api_ms"], on["api_ms"]) == (
        k_off,
        k_on,
        a_off,
        a_on,
    )


@pytest.mark.parametrize("app", APPS)
def test_uvm_pair_matches_the_published_table(app: str, traces: dict) -> None:
    # arrange
    n, l_off, l_on, k_off, k_on, a_off, a_on = UVM[app]
    # act
    off, on = _facts(traces[f"{app}-nor-uvm"].events), _facts(traces[f"{app}-cc-uvm"].events)
    on_meta = traces[f"{app}-cc-uvm"].meta
    on_kernel_ms = on["kernel_ms"] or _ms(int(on_meta.extra["kern_sum_total_ns"]))
    # assert
    assert (off["launches"], off["launch_us"], on["launches"], on["launch_us"]) == (
        n,
        l_off,
        n,
        l_on,
    )
    assert (off["kernel_ms"], on_kernel_ms, off["api_ms"], on["api_ms"]) == (
        k_off,
        k_on,
        a_off,
        a_on,
    )
    assert off["copies"] == on["copies"] == 0


@pytest.mark.parametrize("app", APPS)
def test_cc_relabels_every_pinned_copy_and_the_kinds_restore_the_direction(
    app: str, traces: dict
) -> None:
    """README: in cc-nor every pinned copy is labelled Device-to-Device, with a Managed side."""

    # arrange
    def by(ev: pl.DataFrame) -> dict[tuple, int]:
        m = ev.filter(pl.col("kind") == "memcpy")
        return {
            r[:4]: r[4] for r in m.group_by("name", "copy_kind", "src_mem", "dst_mem").len().rows()
        }

    # act
    off, on = by(traces[f"{app}-nor-nor"].events), by(traces[f"{app}-cc-nor"].events)
    # assert
    h2d = off.get(("[CUDA memcpy Host-to-Device]", "HtoD", "pinned", "device"), 0)
    d2h = off.get(("[CUDA memcpy Device-to-Host]", "DtoH", "device", "pinned"), 0)
    assert on.get(("[CUDA memcpy Device-to-Device]", "HtoD", "managed", "device"), 0) == h2d
    assert on.get(("[CUDA memcpy Device-to-Device]", "DtoH", "device", "managed"), 0) == d2h
    assert not any(k[2] == "pinned" or k[3] == "pinned" for k in on)


def test_relabelled_copies_total_14_h2d_and_9007_d2h(traces: dict) -> None:
    # act
    ev = pl.concat([traces[f"{a}-cc-nor"].events for a in APPS])
    m = ev.filter(
        (pl.col("kind") == "memcpy") & (pl.col("name") == "[CUDA memcpy Device-to-Device]")
    )
    # assert
    assert dict(m.group_by("copy_kind").len().iter_rows()) == {"HtoD": 14, "DtoH": 9007}


def test_uvm_migrations_are_managed_to_managed_copies_without_correlation(traces: dict) -> None:
    # arrange
    ev = traces["3DCONV-cc-uvm"].events.filter(pl.col("name").str.contains("Unified"))
    # act
    by = ev.group_by("name", "kind", "copy_kind", "src_mem", "dst_mem").agg(
        pl.len(), pl.col("bytes").sum(), pl.col("correlation").null_count()
    )
    # assert
    got = {r[0]: r[1:] for r in by.rows()}
    assert got["[CUDA memcpy Unified Device-to-Host]"] == (
        "memcpy", "DtoH", "managed", "managed", 2, 65536, 2
    )  # fmt: skip
    kind, ck, src, dst, n, nbytes, no_corr = got["[CUDA memcpy Unified Host-to-Device]"]
    assert (kind, ck, src, dst, n, no_corr) == ("memcpy", "HtoD", "managed", "managed", 481, 481)
    assert abs(nbytes - 64 * 2**20) < 1000  # the 64 MiB input, migrated in 481 pieces
    assert ev["stream"].unique().to_list() == [0]


@pytest.mark.parametrize(
    ("name", "dur", "want"),
    [
        ("BN-nor-nor", 959, 172),  # 'Bytes (MB)' 0.000: throughput x duration is exact
        ("BN-nor-nor", 1248, 5776),  # 0.006 MB
        ("3DCONV-nor-nor", 1577110, 67_109_000),  # 67.109 MB; throughput disagrees: MB wins
    ],
)
def test_bytes_from_the_mb_column_refined_by_throughput(
    name: str, dur: int, want: int, traces: dict
) -> None:
    # act
    ev = traces[name].events.filter((pl.col("kind") == "memcpy") & (pl.col("dur_ns") == dur))
    # assert
    assert want in ev["bytes"].to_list()


def test_memsets_keep_their_memory_kind(traces: dict) -> None:
    # act: BN's explicit-copy build memsets device memory, its UVM build managed memory
    dev = traces["BN-nor-nor"].events.filter(pl.col("kind") == "memset")
    uvm = traces["BN-nor-uvm"].events.filter(pl.col("kind") == "memset")
    # assert
    assert (set(dev["dst_mem"]), set(uvm["dst_mem"])) == ({"device"}, {"managed"})
    assert (dev.height, uvm.height) == (9001, 4500)
    assert uvm["src_mem"].null_count() == uvm.height and uvm["copy_kind"].null_count() == uvm.height


def test_a_set_without_its_gpu_trace_is_host_only_with_a_warning(traces: dict) -> None:
    """Quirk: BN-cc-uvm_cuda_gpu_trace.csv is missing from the artifact snapshot."""
    # arrange
    trace = traces["BN-cc-uvm"]
    # assert
    assert trace.meta.host_only
    assert any("no cuda_gpu_trace report" in w for w in trace.meta.warnings)
    assert trace.meta.extra["kern_sum_instances"] == "4501"
    assert trace.events.filter(pl.col("device").is_not_null()).is_empty()


def test_driver_and_runtime_names_without_nsys_suffixes(traces: dict) -> None:
    # act
    ev = traces["3DCONV-cc-nor"].events.filter(pl.col("kind").is_in(API))
    # assert
    assert set(ev.filter(pl.col("kind") == "driver")["name"]) == {"cuModuleGetLoadingMode"}
    assert "cudaGetDeviceProperties_v2" in set(ev["name"])  # was ..._v2_v12000


# ---- what a user may pass: a report, the prefix, a folder; .csv or .csv.gz ------------------


def _copy_set(name: str, dest: Path, *, unzip: bool = False, rename: str | None = None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for f in CSV.glob(f"{name}_*.csv.gz"):
        target = dest / (f.name.replace(name, rename or name))
        if unzip:
            with gzip.open(f, "rb") as src, open(target.with_suffix(""), "wb") as out:
                shutil.copyfileobj(src, out)
        else:
            shutil.copy(f, target)


@pytest.mark.parametrize(
    "pick",
    [
        lambda d: d / "kmeans-cc-nor_cuda_gpu_trace.csv",
        lambda d: d / "kmeans-cc-nor_cuda_gpu_kern_sum.csv",
        lambda d: d / "kmeans-cc-nor",  # the prefix
        lambda d: d,  # the folder
    ],
    ids=["gpu-trace", "kern-sum", "prefix", "folder"],
)
def test_any_member_the_prefix_or_the_folder_reads_the_same_set(
    tmp_path: Path, pick: object, traces: dict
) -> None:
    # arrange: plain .csv this time
    _copy_set("kmeans-cc-nor", tmp_path, unzip=True)
    # act
    trace = parsers.read(pick(tmp_path))  # type: ignore[operator]
    # assert
    assert trace.events.equals(traces["kmeans-cc-nor"].events)
    assert sorted(trace.meta.files) == sorted(
        f"kmeans-cc-nor_cuda_{r}.csv" for r in ("api_sum", "api_trace", "gpu_kern_sum", "gpu_trace")
    )


def test_a_folder_of_many_sets_asks_for_one() -> None:
    # act
    with pytest.raises(InputError) as err:
        parsers.read(CSV)
    # assert
    assert "holds 24 nsys stats report sets" in err.value.line()
    assert "pass one of them" in err.value.line()


def test_a_preamble_before_the_header_is_skipped(tmp_path: Path, traces: dict) -> None:
    """`nsys stats -f csv` to stdout prints 'Processing ...' lines before the CSV."""
    # arrange
    _copy_set("hotspot3D-nor-nor", tmp_path, unzip=True)
    api = tmp_path / "hotspot3D-nor-nor_cuda_api_trace.csv"
    api.write_text(
        "Generating SQLite file x.sqlite from x.nsys-rep\nProcessing [x.sqlite]...\n\n"
        + api.read_text()
    )
    # act
    trace = nsys_csv.read(api)
    # assert
    assert trace.events.equals(traces["hotspot3D-nor-nor"].events)


def test_gpu_trace_alone_is_gpu_only_with_a_warning(tmp_path: Path) -> None:
    # arrange
    shutil.copy(CSV / "kmeans-nor-nor_cuda_gpu_trace.csv.gz", tmp_path)
    # act
    trace = parsers.read(tmp_path / "kmeans-nor-nor_cuda_gpu_trace.csv.gz")
    # assert
    assert any("no cuda_api_trace report" in w for w in trace.meta.warnings)
    assert trace.events["pid"].null_count() == trace.events.height
    assert not trace.meta.host_only


def test_a_cut_trace_report_disagrees_with_its_sum(tmp_path: Path) -> None:
    # arrange: drop the last 10 API calls
    _copy_set("kmeans-nor-nor", tmp_path, unzip=True)
    api = tmp_path / "kmeans-nor-nor_cuda_api_trace.csv"
    api.write_text("\n".join(api.read_text().splitlines()[:-10]) + "\n")
    # act
    trace = nsys_csv.read(api)
    # assert
    assert any(
        "kmeans-nor-nor_cuda_api_sum.csv disagrees with the trace" in w for w in trace.meta.warnings
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("just,some,csv\n1,2,3\n", "not an nsys stats CSV report"),
        ('Start (ns),Duration (ns),Name\n1,"2\n', "malformed CSV"),
        ("Start (ns),Duration (ns)\n1,2\n", "report has no column 'Name'"),
    ],
    ids=["not-a-report", "malformed", "missing-column"],
)
def test_bad_reports_are_input_errors(tmp_path: Path, content: str, message: str) -> None:
    # arrange
    path = tmp_path / "x_cuda_api_trace.csv"
    path.write_text(content)
    # act
    with pytest.raises(InputError) as err:
        nsys_csv.read(path)
    # assert
    assert err.value.line().startswith("x_cuda_api_trace.csv: ")
    assert message in err.value.line()


def test_sniffing_finds_gzipped_reports_and_prefixes() -> None:
    # act / assert
    assert parsers.sniff(CSV / "BN-cc-nor_cuda_gpu_trace.csv.gz") == "nsys_csv"
    assert parsers.sniff(CSV / "BN-cc-nor") == "nsys_csv"
    with pytest.raises(InputError, match="no such file or folder"):
        parsers.sniff(CSV / "no-such-app")
