"""A folder of per-rank traces (or one CSV set) read as one trace with a rank column."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from ccdiag.parsers import folder, kineto, nsys_sqlite
from nsys_fixtures import EAGER, GRAPH, SHARED, edited

from ccdiag import parsers
from ccdiag.errors import InputError

HTA_PAIR = SHARED / "external" / "HolisticTraceAnalysis" / "tests" / "data" / "trace_filter"
CSV = SHARED / "external" / "hcc-ispass25" / "example_csv"
KINETO_EAGER = SHARED / "traces" / "h200_decode_eager.kineto.json.gz"  # no distributedInfo
KINETO_GRAPH = SHARED / "traces" / "h200_decode_graph.kineto.json.gz"


def _put(dest: Path, *pairs: tuple[Path, str]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for src, name in pairs:
        shutil.copy(src, dest / name)
    return dest


def test_hta_two_rank_pair_takes_ranks_from_distributed_info() -> None:
    # arrange
    r0, r1 = (kineto.read(HTA_PAIR / f"sampled_rank-{i}.json.gz") for i in (0, 1))
    # act
    trace = parsers.read(HTA_PAIR)
    # assert
    assert parsers.sniff(HTA_PAIR) == "kineto"
    assert trace.meta.ranks == [0, 1] and trace.meta.world_size == 128
    assert dict(trace.events.group_by("rank").len().iter_rows()) == {
        0: r0.events.height,
        1: r1.events.height,
    }
    assert trace.meta.n_events == r0.meta.n_events + r1.meta.n_events
    assert trace.meta.files == ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]
    assert trace.meta.source == "trace_filter" and trace.meta.rank is None
    assert trace.meta.warnings == []


def test_ranks_from_file_names_when_the_metadata_has_none(tmp_path: Path) -> None:
    # arrange: rank1 sorts before rank0 by name on purpose (b_ < c_)
    d = _put(
        tmp_path / "run", (KINETO_EAGER, "c_rank0.json.gz"), (KINETO_GRAPH, "b_rank-1.json.gz")
    )
    # act
    trace = parsers.read(d)
    # assert
    per_rank = trace.events.group_by("rank").agg(pl.col("graph").any()).sort("rank").rows()
    assert per_rank == [(0, False), (1, True)]  # the graph-mode trace is rank 1
    assert trace.meta.extra["rank_files"] == "0:c_rank0.json.gz,1:b_rank-1.json.gz"
    assert trace.meta.warnings == []


def test_ranks_by_name_order_with_a_warning_when_nothing_says(tmp_path: Path) -> None:
    # arrange
    d = _put(tmp_path / "run", (EAGER, "b.sqlite"), (GRAPH, "a.sqlite"))
    # act
    trace = parsers.read(d)
    # assert
    assert trace.meta.format == "nsys_sqlite" and trace.meta.ranks == [0, 1]
    assert trace.meta.extra["rank_files"] == "0:a.sqlite,1:b.sqlite"
    assert any("ranks given in name order" in w for w in trace.meta.warnings)


def test_nsys_rank_environment_variable_wins_over_the_name(tmp_path: Path) -> None:
    # arrange: each file recorded from one torchrun rank (RANK in its environment)
    env = "INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', '{}')"
    a = edited(
        EAGER, tmp_path, env.format("RANK=1"), env.format("WORLD_SIZE=2"), name="rank0.sqlite"
    )
    b = edited(
        GRAPH, tmp_path, env.format("RANK=0"), env.format("WORLD_SIZE=2"), name="rank1.sqlite"
    )
    d = _put(tmp_path / "run", (a, a.name), (b, b.name))
    # act
    one = nsys_sqlite.read(a)
    trace = parsers.read(d)
    # assert
    assert (one.meta.rank, one.meta.world_size, one.events["rank"].unique().to_list()) == (
        1,
        2,
        [1],
    )
    assert trace.meta.extra["rank_files"] == "0:rank1.sqlite,1:rank0.sqlite"
    assert sum("the metadata wins" in w for w in trace.meta.warnings) == 2


def test_two_files_claiming_one_rank_are_an_error(tmp_path: Path) -> None:
    # arrange
    d = _put(tmp_path / "run", (HTA_PAIR / "sampled_rank-0.json.gz", "x.json.gz"))
    shutil.copy(HTA_PAIR / "sampled_rank-0.json.gz", d / "y.json.gz")
    # act
    with pytest.raises(InputError) as err:
        parsers.read(d)
    # assert
    assert err.value.line() == "run: x.json.gz and y.json.gz are both rank 0"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([], "no trace files in this folder"),
        ([(EAGER, "rank0.sqlite"), (KINETO_GRAPH, "rank1.json.gz")], "traces of several formats"),
    ],
    ids=["empty", "mixed"],
)
def test_folders_without_one_kind_of_trace_are_errors(
    tmp_path: Path, files: list, message: str
) -> None:
    # arrange
    d = _put(tmp_path / "run", *files)
    (d / "README.md").write_text("notes")
    # act
    with pytest.raises(InputError) as err:
        parsers.read(d)
    # assert
    assert err.value.line().startswith("run: ") and message in err.value.line()


def test_a_folder_with_one_csv_set_is_that_set(tmp_path: Path) -> None:
    # arrange
    d = tmp_path / "kmeans"
    d.mkdir()
    for f in CSV.glob("kmeans-cc-uvm_*"):
        shutil.copy(f, d)
    # act
    trace = parsers.read(d)
    # assert
    assert trace.meta.format == "nsys_csv" and trace.meta.source == "kmeans-cc-uvm"
    assert trace.events.equals(parsers.read(CSV / "kmeans-cc-uvm").events)


def test_per_rank_csv_sets(tmp_path: Path) -> None:
    # arrange
    d = tmp_path / "ranks"
    d.mkdir()
    for src, rank in (("kmeans-nor-nor", 0), ("hotspot3D-nor-nor", 1)):
        for f in CSV.glob(f"{src}_*"):
            shutil.copy(f, d / f.name.replace(src, f"rank{rank}"))
    # act
    trace = parsers.read(d)
    # assert
    assert trace.meta.format == "nsys_csv" and trace.meta.ranks == [0, 1]
    launches = trace.events.filter(pl.col("name") == "cudaLaunchKernel").group_by("rank").len()
    assert dict(launches.iter_rows()) == {0: 500, 1: 100}


def test_a_folder_of_many_unranked_csv_sets_asks_for_one() -> None:
    # act
    with pytest.raises(InputError) as err:
        parsers.read(CSV)
    # assert
    assert "24 nsys stats report sets" in err.value.line()


def test_exports_cached_next_to_reports_are_not_ranks(tmp_path: Path) -> None:
    # arrange: what nsys_rep leaves next to a report
    d = _put(tmp_path / "run", (EAGER, "rank0.ccdiag-0123456789ab.sqlite"))
    (d / "rank0.nsys-rep").write_bytes(b"stand-in report")
    # act
    fmt, files = folder.rank_files(d)
    # assert
    assert fmt == "nsys_rep" and [f.path.name for f in files] == ["rank0.nsys-rep"]


def test_read_rank_passes_each_reader_only_its_options() -> None:
    # act: `workers` is an nsys option; the Kineto reader does not take it
    trace = folder.read_rank(KINETO_GRAPH, "kineto", workers=1, progress=print)
    # assert
    assert trace.meta.format == "kineto"


def test_ranks_disagreeing_on_versions_are_reported(tmp_path: Path) -> None:
    # arrange
    a = edited(EAGER, tmp_path, "UPDATE TARGET_INFO_SYSTEM_ENV SET value = '570.1' WHERE name = "
               "'NvDriverVersion'", name="rank0.sqlite")  # fmt: skip
    d = _put(tmp_path / "run", (a, "rank0.sqlite"), (GRAPH, "rank1.sqlite"))
    # act
    trace = parsers.read(d)
    # assert
    assert trace.meta.driver_version == "570.1"
    assert any("disagree on driver_version: 570.1, 580.159.04" in w for w in trace.meta.warnings)
