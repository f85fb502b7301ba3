"""Special files, sidecars and every other JSON ccdiag reads (issue 18).

A FIFO, a device, a socket, a folder where a file is expected, a dangling or looping symbolic
link: a clear one-line error (exit 2), never a hang, through the installed CLI. Sidecars go
through the strict pydantic model: wrong types and lone surrogates become one warning naming
the sidecar, and the trace is read.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from bad_inputs.cli import check_contract, run
from ccdiag.parsers import Sidecar, read_sidecar
from conftest import SAMPLES

from ccdiag import api
from ccdiag.errors import InputError

TRACE = b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}'


def _fifo(d: Path) -> Path:
    os.mkfifo(d / "t.json")
    return d / "t.json"


def _dev_zero(d: Path) -> Path:
    os.symlink("/dev/zero", d / "t.json")
    return d / "t.json"


def _socket(d: Path) -> Path:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(d / "t.json"))
    s.close()
    return d / "t.json"


def _dangling(d: Path) -> Path:
    os.symlink(d / "gone.json", d / "t.json")
    return d / "t.json"


def _loop(d: Path) -> Path:
    os.symlink(d / "b.json", d / "t.json")
    os.symlink(d / "t.json", d / "b.json")
    return d / "t.json"


def _dir_named_like_a_file(d: Path) -> Path:
    (d / "t.json").mkdir()
    return d / "t.json"


CASES = {
    "fifo": (_fifo, "named pipe"),
    "char device": (_dev_zero, "character device"),
    "socket": (_socket, "socket"),
    "dangling link": (_dangling, "symbolic link to a file that does not exist"),
    "link loop": (_loop, "cannot read"),
    "folder named .json": (_dir_named_like_a_file, "no trace files in this folder"),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_special_file_is_refused_in_one_line(tmp_path: Path, kind: str) -> None:
    make, expect = CASES[kind]
    path = make(tmp_path)
    res = run(["summary", path.name, "--json", os.devnull], tmp_path, timeout=90)
    check_contract(res, path.name, expect=expect)
    assert res.rc == 2


def test_a_fifo_as_a_sidecar_is_ignored_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_bytes(TRACE)
    os.mkfifo(tmp_path / "t.meta.json")
    res = run(["summary", "t.json", "--json", "-"], tmp_path, timeout=90)
    check_contract(res, "t.json")
    assert res.rc == 0
    assert "t.meta.json: invalid capture metadata (is a named pipe" in res.stdout


def test_a_fifo_as_a_sibling_report_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "x_cuda_api_trace.csv").write_text(
        "Start (ns),Duration (ns),Name,CorrID,Pid,Tid\n1000,5,cudaLaunchKernel_v7000,1,1,1\n"
    )
    os.mkfifo(tmp_path / "x_cuda_gpu_trace.csv")
    res = run(["summary", "x_cuda_api_trace.csv", "--json", os.devnull], tmp_path, timeout=90)
    check_contract(res, "x_cuda_api_trace.csv")


def test_a_folder_holding_a_fifo_is_read_without_it(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_bytes(TRACE)
    os.mkfifo(tmp_path / "rank1.json")
    trace = api.load_trace(tmp_path)
    assert trace.meta.n_events == 1


# -- sidecars ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("doc", "why"),
    [
        (b'{"label": "x", "emulated_shim_mechanisms": [1]}', "emulated_shim_mechanisms.0"),
        (b'{"label": "x", "gpu": "\\ud800"}', "lone UTF-16 surrogate"),
        (b'{"label": "x", "gpu": 7}', "gpu: Input should be a valid string"),
        (b'{"label": "x", "emulation": "b200"}', "emulation"),
        (b'{"label": "x", "emulation": {"platform": ["b200"]}}', "emulation.platform"),
        (b'{"label": 5}', "label"),
        (b'{"label": "x", "cc_mode": "\xff"}', "not valid JSON"),
        (b'{"label": "x"', "not valid JSON"),
    ],
)
def test_an_invalid_sidecar_is_one_warning_and_the_trace_is_read(
    tmp_path: Path, doc: bytes, why: str
) -> None:
    (tmp_path / "t.json").write_bytes(TRACE)
    (tmp_path / "t.meta.json").write_bytes(doc)
    trace = api.load_trace(tmp_path / "t.json")
    [warning] = [w for w in trace.meta.warnings if "t.meta.json" in w]
    assert why in warning and warning.endswith("ignored")
    assert "\n" not in warning and len(warning) < 300
    warning.encode("utf-8")  # never a surrogate in what is shown
    assert trace.meta.gpu is None or isinstance(trace.meta.gpu, str)


def test_a_valid_sidecar_is_read_strictly() -> None:
    doc = read_sidecar(SAMPLES / "decode_eager" / "treatment.meta.json")
    assert isinstance(doc, Sidecar)
    assert doc.emulation is not None and doc.emulation.platform == "b200"
    assert doc.emulated_shim_mechanisms == ["launch", "copy_pad", "copy_sync"]


def test_a_json_without_a_label_is_not_a_sidecar(tmp_path: Path) -> None:
    (tmp_path / "t.meta.json").write_text(json.dumps({"something": "else"}))
    assert read_sidecar(tmp_path / "t.meta.json") is None


def test_input_error_lines_are_capped() -> None:
    err = InputError(Path("x.csv"), "malformed CSV (" + "N" * 1_000_000 + ")")
    assert len(err.line()) <= 300 and err.line().endswith("...")
