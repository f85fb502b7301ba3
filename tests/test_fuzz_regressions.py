"""Regression tests: one per crash the fuzzers found (fuzz/README.md lists them).

Each builds the smallest damaged file that crashed a reader, from a real trace, and checks the
reader now reads it (counting what it skipped) or refuses it with one InputError line.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, shared_path

from ccdiag import api
from ccdiag.errors import InputError

H200_NSYS = REPO / "tests" / "data" / "h200_nsys"


def _sqlite(tmp_path: Path, *sql: str, params: tuple = ()) -> Path:
    path = tmp_path / "t.sqlite"
    shutil.copyfile(shared_path("traces", "h200_decode_graph.nsys.sqlite"), path)
    con = sqlite3.connect(path)
    for q in sql:
        con.execute(q, params)
    con.commit()
    con.close()
    return path


def _csv_set(tmp_path: Path, edit: dict[str, tuple[str, str]]) -> Path:
    """The H200 run's nsys stats set, with (old, new) text replaced in some reports."""
    for report in ("cuda_api_trace", "cuda_gpu_trace", "cuda_api_sum", "cuda_gpu_kern_sum"):
        text = gzip.decompress((H200_NSYS / f"run_{report}.csv.gz").read_bytes()).decode()
        if report in edit:
            old, new = edit[report]
            assert old in text
            text = text.replace(old, new)
        (tmp_path / f"run_{report}.csv").write_text(text)
    return tmp_path / "run_cuda_api_trace.csv"


def test_nsys_gpu_rows_ending_before_they_start_are_skipped_and_counted(tmp_path: Path):
    # arrange: fuzz crash "ValidationError at ccdiag/schema.py" (memcpy start/end swapped)
    path = _sqlite(
        tmp_path,
        "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET start = end, end = start WHERE rowid % 3 = 0",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE rowid % 5 = 0",
    )
    con = sqlite3.connect(path)
    n_copies = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE rowid % 3 = 0 AND end < start"
    ).fetchone()[0]
    n_kernels = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 5 = 0"
    ).fetchone()[0]
    con.close()
    # act
    trace = api.load_trace(path)
    # assert
    skipped = trace.meta.skipped
    assert skipped["CUPTI_ACTIVITY_KIND_MEMCPY: no end time, or end before start"] == n_copies
    assert skipped["CUPTI_ACTIVITY_KIND_KERNEL: no end time, or end before start"] == n_kernels
    assert n_copies > 0 and n_kernels > 0


@pytest.mark.parametrize(
    "table,column,value",
    [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start", "abc"),  # text where an integer belongs
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", b"\x00blob"),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "streamId", 1.5),
        ("StringIds", "value", 12),
        ("ENUM_CUDA_MEMCPY_OPER", "label", 3),
    ],
)
def test_nsys_cells_of_the_wrong_type_do_not_break_the_read(
    tmp_path: Path, table: str, column: str, value: object
):
    # arrange: fuzz crash "ComputeError at parsers/_sqlite_fetch.py" (polars rows of mixed types)
    path = _sqlite(
        tmp_path, f'UPDATE "{table}" SET "{column}" = ? WHERE rowid % 7 = 1', params=(value,)
    )
    # act
    trace = api.load_trace(path)
    # assert
    assert trace.meta.n_events > 0
    assert trace.meta.n_events + sum(trace.meta.skipped.values()) > 0


def test_csv_reports_without_a_correlation_column_are_read(tmp_path: Path):
    # arrange: fuzz crashes "ColumnNotFoundError at parsers/nsys_csv.py" (CorrId / CorrID absent)
    path = _csv_set(
        tmp_path,
        {"cuda_api_trace": ("CorrID", "Junk"), "cuda_gpu_trace": ("CorrId", "Junk")},
    )
    # act
    trace = api.load_trace(path)
    # assert
    assert trace.meta.n_events > 0
    assert trace.events["correlation"].null_count() == trace.events.height


def test_csv_gpu_report_without_bytes_column_is_read(tmp_path: Path):
    # arrange: same crash family, on "Bytes (MB)"
    path = _csv_set(tmp_path, {"cuda_gpu_trace": ("Bytes (MB)", "Junk")})
    # act
    trace = api.load_trace(path)
    # assert
    copies = trace.events.filter(trace.events["kind"] == "memcpy")
    assert copies.height > 0 and copies["bytes"].null_count() == copies.height


def test_a_broken_summary_report_is_a_warning_not_an_error(tmp_path: Path):
    # arrange: a cross-check-only report (cuda_api_sum) without its Name column
    path = _csv_set(tmp_path, {"cuda_api_sum": ("Name", "Junk")})
    # act
    trace = api.load_trace(path)
    # assert
    assert any(
        w.startswith("run_cuda_api_sum.csv: report has no column 'Name'")
        for w in trace.meta.warnings
    )


def test_csv_report_that_is_corrupt_gzip_is_one_input_error(tmp_path: Path):
    # arrange
    path = _csv_set(tmp_path, {})
    data = gzip.compress(path.read_bytes())
    (tmp_path / "run_cuda_api_trace.csv").unlink()
    gz = tmp_path / "run_cuda_api_trace.csv.gz"
    gz.write_bytes(data[: len(data) // 2])
    # act
    with pytest.raises(InputError) as info:
        api.load_trace(gz)
    # assert
    assert info.value.line().startswith("run_cuda_api_trace.csv.gz: ")


def test_nsys_device_id_beyond_int32_is_counted_not_fatal(tmp_path: Path):
    # arrange: fuzz crash "InvalidOperationError at parsers/nsys_sqlite.py" (strict Int32 cast)
    path = _sqlite(
        tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 2147483648 WHERE rowid % 4 = 0"
    )
    con = sqlite3.connect(path)
    n = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 4 = 0"
    ).fetchone()[0]
    con.close()
    # act
    trace = api.load_trace(path)
    # assert
    assert trace.meta.skipped["invalid row: device out of range"] == n


def test_csv_nan_in_a_copy_size_cell_leaves_the_size_unknown(tmp_path: Path):
    # arrange: fuzz crash "InvalidOperationError at parsers/nsys_csv.py" (NaN cast to Int64)
    def nan_first_copy(text: str) -> str:
        lines = text.splitlines(keepends=True)
        head = lines[0].split(",")
        col = head.index("Throughput (MB/s)")
        for i, line in enumerate(lines[1:], 1):
            if "[CUDA memcpy" in line:
                cells = line.split(",")
                cells[col] = "nan"
                cells[head.index("Bytes (MB)")] = "inf"
                lines[i] = ",".join(cells)
                break
        return "".join(lines)

    path = _csv_set(tmp_path, {})
    gpu = tmp_path / "run_cuda_gpu_trace.csv"
    gpu.write_text(nan_first_copy(gpu.read_text()))
    # act
    trace = api.load_trace(path)
    # assert
    copies = trace.events.filter(trace.events["kind"] == "memcpy")
    assert copies["bytes"].null_count() == 1


def test_csv_reads_are_deterministic_when_reports_disagree(tmp_path: Path):
    # arrange: fuzz oracle "two reads of the same file differ" (warnings, then gpu / gpus):
    # a kernel summary that disagrees with the trace, and one device under two GPU names
    path = _csv_set(tmp_path, {"cuda_gpu_kern_sum": ("65.8,16865897,1,", "65.8,16865897,7,")})
    gpu = tmp_path / "run_cuda_gpu_trace.csv"
    lines = gpu.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace("NVIDIA H200 (0)", "NVIDIA H100 (0)")
    gpu.write_text("".join(lines))
    # act
    reads = [api.summarize(api.load_trace(path)) for _ in range(5)]
    # assert
    assert any("disagrees with the trace" in w for w in reads[0]["warnings"])
    assert reads[0]["gpus"] == ["NVIDIA H200"]  # one name per device, the same every time
    assert all(r == reads[0] for r in reads)


def test_analyze_survives_a_treatment_that_lost_api_calls(tmp_path: Path):
    # arrange: fuzz crash "IndexError at ccdiag/replay.py" (analyze; a rank whose steps kept no
    # GPU rows after every 4th CUDA API call was lost, as when CUPTI drops records)
    sys.path.insert(0, str(REPO))
    from fuzz import seeds

    base = seeds.sqlite_seed("nsys_ai_2gpu")  # the 2-GPU nsys-ai export, activity cut to 300 rows
    treat = tmp_path / "lost_calls.sqlite"
    shutil.copyfile(base, treat)
    con = sqlite3.connect(treat)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 4 = 0")
    con.commit()
    con.close()
    # act
    report = api.diagnose(base, treat)
    # assert
    assert report.verdict


@pytest.mark.parametrize("where", ["args", "event", "top"])
def test_json_nested_too_deeply_is_one_input_error(tmp_path: Path, where: str):
    # arrange: RecursionError traceback from msgspec on 100,000 nested arrays (found while
    # adding the "deep" mutation; now a mutation of the campaign)
    deep = "[" * 100_000 + "]" * 100_000
    ev = '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1'
    text = {
        "args": '{"traceEvents": [' + ev + ', "args": {"x": ' + deep + "}}]}",
        "event": '{"traceEvents": [' + ev + "}, " + deep + "]}",
        "top": '{"x": ' + deep + ', "traceEvents": [' + ev + "}]}",
    }[where]
    path = tmp_path / "deep.json"
    path.write_text(text)
    # act
    with pytest.raises(InputError) as info:
        api.load_trace(path)
    # assert
    assert info.value.line() == "deep.json: JSON nested too deeply to be a trace"


def test_a_utf8_byte_order_mark_before_the_json_is_read(tmp_path: Path):
    # arrange: a Kineto trace saved by an editor that writes a BOM
    src = shared_path("traces", "h200_copies_streams.kineto.json.gz")
    path = tmp_path / "bom.json.gz"
    path.write_bytes(gzip.compress(b"\xef\xbb\xbf" + gzip.decompress(src.read_bytes())))
    # act
    trace = api.load_trace(path)
    # assert
    assert trace.meta.n_events == api.load_trace(src).meta.n_events


def test_a_recursive_view_in_an_nsys_export_cannot_hang_the_reader(tmp_path: Path):
    # arrange: a hostile export where a table is a never-ending recursive view (found by hand
    # while writing docs/security.md; now a mutation of the campaign). Run in a subprocess with a
    # timeout, so that a regression fails instead of hanging the suite.
    path = _sqlite(
        tmp_path,
        "DROP TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT",
        "CREATE VIEW CUPTI_ACTIVITY_KIND_CUDA_EVENT AS WITH RECURSIVE r(x) AS "
        "(SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS start FROM r",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k",
        "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE r(x) AS "
        "(SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS start FROM r",
    )
    # act
    result = subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", "summary", str(path), "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # assert: views are not read (nsys writes none): only the whole-graph launches are kernels
    assert result.returncode == 0, result.stderr
    con = sqlite3.connect(path)
    graphs = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone()[0]
    con.close()
    assert json.loads(result.stdout)["kinds"]["kernel"] == graphs


@pytest.mark.parametrize("rank", [2**64, -1, "0", True, 2**31])
def test_kineto_rank_that_is_not_a_rank_is_ignored_with_a_warning(tmp_path: Path, rank: object):
    # arrange: fuzz crash "InvalidOperationError at parsers/kineto.py" (distributedInfo.rank
    # 2**64 as an Int32 literal) during the documented campaign
    doc = json.loads(
        gzip.decompress(shared_path("traces", "h200_copies_streams.kineto.json.gz").read_bytes())
    )
    doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    # act
    trace = api.load_trace(path)
    # assert
    assert trace.meta.rank is None and trace.meta.world_size == 2
    assert any(w.startswith("distributedInfo.rank ") for w in trace.meta.warnings)
    assert set(trace.events["rank"].unique().to_list()) == {0}


def test_a_rank_file_name_with_a_huge_number_is_given_a_rank_by_order(tmp_path: Path):
    # arrange: rank99999999999999999999.json crashed the Int32 rank literal (found by hand,
    # probing the folder reader after the distributedInfo.rank crash)
    for name, src in (("rank0.json.gz", "rank0"), ("rank99999999999999999999.json.gz", "rank1")):
        doc = json.loads(
            gzip.decompress(
                (REPO / "sample_traces/tp2_decode/baseline" / f"{src}.json.gz").read_bytes()
            )
        )
        doc.pop("distributedInfo", None)
        (tmp_path / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    # act
    trace = api.load_trace(tmp_path)
    # assert
    assert trace.meta.ranks == [0, 1]
    assert any("ranks given in name order" in w for w in trace.meta.warnings)


def test_nsys_export_with_a_damaged_schema_name_is_one_input_error(tmp_path: Path):
    # arrange: atheris crash "UnicodeDecodeError at parsers/nsys_sqlite.py": a flipped byte in a
    # table name made SQLite's own error message invalid UTF-8 ("malformed database schema
    # (ENUM_CUDA_DEV_\xcdEM_EVENT_OPER)"), which Python could not decode
    path = _sqlite(tmp_path)
    data = bytearray(path.read_bytes())
    name = b"ENUM_CUDA_MEMCPY_OPER"
    at = data.index(name, data.index(name) + 1) + 10  # the table's name in sqlite_master
    data[at] = 0xCD  # as the fuzzer did
    path.write_bytes(bytes(data))
    # act
    with pytest.raises(InputError) as info:
        api.load_trace(path)
    # assert
    assert info.value.line().startswith("t.sqlite: corrupt or truncated SQLite file")


def test_nsys_text_that_is_not_utf8_is_read_with_replacement_characters(tmp_path: Path):
    # arrange: kernel and API names whose bytes are not UTF-8 (a damaged or hand-made export)
    path = _sqlite(
        tmp_path, "UPDATE StringIds SET value = CAST(x'cd41ff' AS TEXT) WHERE id % 5 = 0"
    )
    # act
    trace = api.load_trace(path)
    # assert
    assert trace.meta.n_events > 0
    assert trace.events["name"].str.contains("\ufffd").sum() > 0


def test_nsys_table_whose_rowid_range_is_inverted_is_read_whole(monkeypatch: pytest.MonkeyPatch):
    # arrange: atheris crash "ValueError at parsers/nsys_sqlite.py" (concat of no parts): in a
    # damaged file SQLite answered min(rowid) = 1 > max(rowid) = 0 for the memcpy table, so the
    # table was split into no parts at all. The damage is simulated on a real export.
    from ccdiag.parsers import _sqlite_fetch

    real = _sqlite_fetch._rowid_range
    monkeypatch.setattr(
        _sqlite_fetch,
        "_rowid_range",
        lambda con, t: (1, 0) if t == "CUPTI_ACTIVITY_KIND_MEMCPY" else real(con, t),
    )
    path = shared_path("traces", "h200_decode_graph.nsys.sqlite")
    # act
    trace = api.load_trace(path)
    # assert
    monkeypatch.undo()
    assert trace.events.height == api.load_trace(path).events.height
