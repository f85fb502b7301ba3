"""Where pairs come from: discovery under a folder, opaque ids, upload staging."""

from __future__ import annotations

import base64
import os
import random
import shutil
from pathlib import Path

import pytest
from app_samples import SAMPLES
from ccdiag.app.sources import SourceError, Sources, discover, safe_name


def _sources(tmp_path: Path, limit: int = 10_000_000) -> Sources:
    return Sources(staging=tmp_path / "staging", max_upload_bytes=limit)


def _b64(data: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(data).decode()


def test_discover_finds_every_shipped_sample_pair() -> None:
    # act
    found = discover(SAMPLES, "sample", "s")
    # assert
    labels = {s.label for s in found}
    assert {"decode_eager", "kv_offload", "async_readback", "ddp_2gpu", "tp2_decode"} <= labels
    assert "decode_eager (treatment_host_only)" in labels
    de = next(s for s in found if s.label == "decode_eager")
    assert (de.baseline.name, de.treatment.name) == ("baseline.json.gz", "treatment.json.gz")
    ddp = next(s for s in found if s.label == "ddp_2gpu")
    assert ddp.baseline.is_dir() and ddp.treatment.is_dir()
    assert len({s.id for s in found}) == len(found)
    assert all(str(SAMPLES) not in s.id and "/" not in s.id for s in found)


def test_discover_pairs_cc_off_and_cc_on_names(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "llama"
    run.mkdir(parents=True)
    for name in ("cc_off.json.gz", "cc_on.json.gz", "cc_off.meta.json", "notes.md"):
        (run / name).write_bytes(b"{}")
    found = discover(tmp_path, "dir", "d")
    assert [(s.label, s.baseline.name, s.treatment.name) for s in found] == [
        ("runs/llama", "cc_off.json.gz", "cc_on.json.gz")
    ]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_discover_does_not_follow_links_out_of_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    root = tmp_path / "root"
    (root / "pair").mkdir(parents=True)
    (root / "pair" / "baseline.json").symlink_to(outside / "secret.json")
    (root / "pair" / "treatment.json").write_text("{}")
    assert discover(root, "dir", "d") == []


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "", None, 3, ["s1"], {"id": "s1"}])
def test_resolve_refuses_anything_but_a_listed_id(tmp_path: Path, bad: object) -> None:
    src = _sources(tmp_path)
    src.add(discover(SAMPLES, "sample", "s"))
    with pytest.raises(SourceError, match="unknown trace pair"):
        src.resolve(bad)


def test_resolve_returns_the_listed_pair(tmp_path: Path) -> None:
    src = _sources(tmp_path)
    src.add(discover(SAMPLES, "sample", "s"))
    opt = next(o for o in src.options("sample") if o["label"] == "kv_offload")
    assert (
        src.resolve(opt["value"]).baseline
        == (SAMPLES / "kv_offload" / "baseline.json.gz").resolve()
    )


@pytest.mark.parametrize(
    "given, expected",
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\x\\baseline.json.gz", "baseline.json.gz"),
        ("run/rank0.json.gz", "rank0.json.gz"),
        ("<img src=x>.json", "img_src_x_.json"),
        ("..", "fallback"),
    ],
)
def test_upload_names_are_reduced_to_safe_base_names(given: str, expected: str) -> None:
    assert safe_name(given, "fallback") == expected


def test_stage_stores_a_folder_of_ranks_by_content(tmp_path: Path) -> None:
    # arrange: a folder upload of two ranks, plus a README the folder reader would ignore
    folder = SAMPLES / "tp2_decode" / "baseline"
    names = ["baseline/rank0.json.gz", "baseline/rank1.json.gz", "baseline/README.md"]
    contents = [_b64((folder / n.split("/")[1]).read_bytes()) for n in names[:2]] + [_b64(b"# hi")]
    src = _sources(tmp_path)
    # act
    st = src.stage("baseline", contents, names)
    again = src.stage("baseline", contents, names)
    # assert
    assert st.files == 2 and st.path.is_dir() and st.label == "2 files"
    assert sorted(p.name for p in st.path.iterdir()) == ["rank0.json.gz", "rank1.json.gz"]
    assert again.token == st.token and src.staged(st.token) == st
    assert st.path.resolve().is_relative_to((tmp_path / "staging").resolve())


def test_stage_refuses_uploads_over_the_limit_before_decoding(tmp_path: Path) -> None:
    src = _sources(tmp_path, limit=1000)
    with pytest.raises(SourceError, match=r"2\.0 MB; this server accepts up to 0\.001 MB per side"):
        src.stage("treatment", [_b64(b"x" * 2_000_000)], ["treatment.json"])
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").rglob("*.json"))


@pytest.mark.parametrize(
    "contents, names, match",
    [
        (["data:x;base64,@@@@"], ["a.json"], "not valid base64"),
        ([_b64(b"notes")], ["notes.txt"], "no trace files"),
        ([], [], "bad upload request"),
        ("not a list", None, "not valid base64|no trace files"),
        ([123], ["a.json"], "bad upload request"),
    ],
)
def test_stage_refuses_bad_uploads(
    tmp_path: Path, contents: object, names: object, match: str
) -> None:
    with pytest.raises(SourceError, match=match):
        _sources(tmp_path).stage("baseline", contents, names)


def test_upload_pair_needs_tokens_the_server_handed_out(tmp_path: Path) -> None:
    src = _sources(tmp_path)
    b = src.stage(
        "baseline", [_b64((SAMPLES / "kv_offload/baseline.json.gz").read_bytes())], ["b.json.gz"]
    )
    with pytest.raises(SourceError, match="unknown upload"):
        src.upload_pair(b.token, "f" * 32)
    t = src.stage(
        "treatment", [_b64((SAMPLES / "kv_offload/treatment.json.gz").read_bytes())], ["t.json.gz"]
    )
    pair = src.upload_pair(b.token, t.token)
    assert pair.kind == "upload" and pair.digests == (b.token, t.token)
    shutil.rmtree(tmp_path / "staging")


def _noise(n: int) -> bytes:
    """Binary noise that is no trace, the same on every run: ``os.urandom`` here failed a CI run
    when its first byte was ``[`` (the sniffer takes a leading ``{`` / ``[`` for JSON, and the
    JSON reader, not the upload's staging, then refuses it)."""
    return b"\x00" + random.Random(n).randbytes(n - 1)


@pytest.mark.parametrize(
    "data, name, match",
    [
        (_noise(4096), "baseline.json.gz", "named .gz but not gzip-compressed"),
        (_noise(4096), "baseline.json", "unrecognized trace format"),
        (b"\x1f\x8b" + _noise(4096), "baseline.json.gz", "gzip"),
        (b"", "baseline.json", "empty file"),
        (b"hello, I am a CSV\n1,2\n", "baseline.csv", "unrecognized trace format"),
    ],
)
def test_an_upload_that_is_no_trace_is_refused_at_once(
    tmp_path: Path, data: bytes, name: str, match: str
) -> None:
    # arrange
    src = _sources(tmp_path)
    # act / assert: refused while staging (no analysis), naming the file, nothing kept
    with pytest.raises(SourceError, match=match) as exc:
        src.stage("baseline", [_b64(data)], [name])
    assert str(exc.value).startswith(f"{name}: ") and "\n" not in str(exc.value)
    assert src.staged_bytes == 0
    assert not [p for p in (tmp_path / "staging").rglob("*") if p.is_file()]


def _trace_upload(seed: int, size: int = 400_000) -> str:
    """A distinct (sniffable) Kineto JSON upload of about ``size`` bytes."""
    pad = " " * (size - 40)
    return _b64(f'{{"traceEvents":[], "x": {seed}{pad}}}'.encode())


def test_staged_uploads_stay_under_the_quota_least_recently_used_first(tmp_path: Path) -> None:
    # arrange: room for two 0.4 MB uploads
    src = Sources(staging=tmp_path / "staging", max_upload_bytes=10_000_000, quota_bytes=900_000)
    a = src.stage("baseline", [_trace_upload(1)], ["a.json"])
    b = src.stage("treatment", [_trace_upload(2)], ["b.json"])
    src.staged(a.token)  # a used again: b is now the least recently used
    # act
    c = src.stage("baseline", [_trace_upload(3)], ["c.json"])
    # assert: b deleted (its files too), a and c kept, the quota holds
    with pytest.raises(SourceError, match="deleted to make room"):
        src.staged(b.token)
    assert not b.path.exists() and a.path.exists() and c.path.exists()
    assert src.staged(a.token) == a and src.staged(c.token) == c
    assert src.staged_bytes <= 900_000
    on_disk = sum(p.stat().st_size for p in (tmp_path / "staging").rglob("*") if p.is_file())
    assert on_disk == src.staged_bytes


def test_uploads_an_analysis_reads_are_not_evicted(tmp_path: Path) -> None:
    # arrange
    src = Sources(staging=tmp_path / "staging", max_upload_bytes=10_000_000, quota_bytes=900_000)
    a = src.stage("baseline", [_trace_upload(1)], ["a.json"])
    b = src.stage("treatment", [_trace_upload(2)], ["b.json"])
    pair = src.upload_pair(a.token, b.token)
    # act / assert: while held, a new upload finds no room and is refused with why
    with src.hold(pair):
        with pytest.raises(SourceError, match="no room for this upload"):
            src.stage("baseline", [_trace_upload(3)], ["c.json"])
        assert a.path.exists() and b.path.exists()
    # released: the oldest is evicted for the new one
    c = src.stage("baseline", [_trace_upload(3)], ["c.json"])
    assert c.path.exists() and not a.path.exists()


def test_clear_deletes_every_staged_upload(tmp_path: Path) -> None:
    src = _sources(tmp_path)
    src.stage("baseline", [_trace_upload(1)], ["a.json"])
    src.clear()
    assert not (tmp_path / "staging").exists()
