"""``ccdiag annotate``: the treatment trace with the diagnosis as tracks, valid Chrome-trace JSON
that ccdiag itself reads back unchanged (the added events counted as skipped)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from ccdiag import api
from ccdiag.annotate import ANNOTATION_PID, CATEGORY

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
EAGER = tuple(SAMPLES / "decode_eager" / f"{s}.json.gz" for s in ("baseline", "treatment"))
NSYS = tuple(SAMPLES / "decode_eager_nsys" / f"{s}.sqlite" for s in ("baseline", "treatment"))
DDP = tuple(SAMPLES / "ddp_2gpu_ctas2" / s for s in ("baseline", "treatment"))


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        return json.load(fh)


def _added(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if isinstance(e.get("pid"), int) and e["pid"] >= ANNOTATION_PID]  # fmt: skip


def _threads(doc: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in _added(doc) if e["name"] == "thread_name"}


def test_kineto_treatment_gets_ccdiag_tracks_and_reads_back_unchanged(tmp_path: Path):
    # arrange
    out = tmp_path / "annotated.json.gz"
    original = api.load_trace(EAGER[1])
    # act
    result = api.annotate(*EAGER, out)
    doc = _load(out)
    again = api.load_trace(out)
    # assert: a valid trace with the original events plus ours
    assert result["mode"] == "kineto-copy"
    assert gzip.decompress(out.read_bytes())  # really gzip
    added = _added(doc)
    assert len(doc["traceEvents"]) == len(_load(EAGER[1])["traceEvents"]) + len(added)
    assert Counter(e["ph"] for e in added) == Counter(result["added"])
    mechanisms = [a.mechanism for a in result["report"].attribution]
    with_time = [a.mechanism for a in result["report"].attribution if a.ns_per_step > 0]
    assert list(_threads(doc).values()) == [
        "verdict", "steps", *mechanisms, "unattributed", *(f"where: {m}" for m in with_time)
    ]  # fmt: skip
    names = {e["args"]["name"] for e in added if e["name"] == "process_name"}
    assert names == {"ccdiag diagnosis"}
    boundaries = [e for e in added if e["ph"] == "i" and e["s"] == "g"]
    assert len(boundaries) == result["report"].step_ns.n_steps
    finding = next(e for e in added if e["ph"] == "X" and e["tid"] == 3 and "evidence" in e["args"])
    assert finding["args"]["evidence"]["launches_per_step"]["treatment"] > 100
    assert all(e["cat"] == CATEGORY for e in added if e["ph"] != "M")
    # ccdiag reads it back: same events, the added ones counted as skipped
    assert again.events.equals(original.events)
    assert again.steps.equals(original.steps)
    extra = Counter(again.meta.skipped) - Counter(original.meta.skipped)
    assert extra == Counter(
        {
            f"category:{CATEGORY}": result["added"]["X"],
            "instant": result["added"]["i"],
            "metadata": result["added"]["M"],
        }  # fmt: skip
    )


def test_where_tracks_sit_on_the_treatment_intervals_of_each_mechanism(tmp_path: Path):
    # arrange: kv_offload, where blocked async copies carry both copy mechanisms
    pair = tuple(SAMPLES / "kv_offload" / f"{s}.json.gz" for s in ("baseline", "treatment"))
    out = tmp_path / "kv.json"
    # act
    result = api.annotate(*pair, out)
    doc = _load(out)
    # assert: every 'where:' event is one of the treatment's own events, at its exact time
    tid = {name: t for t, name in _threads(doc).items()}
    added = _added(doc)
    own = [e for e in doc["traceEvents"] if e.get("cat") in ("cuda_runtime", "gpu_memcpy")]
    calls = {(round(e["ts"], 3), e["name"]) for e in own}
    spans = {(round(e["ts"], 3), round(e["dur"], 3)) for e in own}
    copy_calls = [e for e in own if e["name"] == "cudaMemcpyAsync"]
    for mech in ("serialized_copies", "blocked_non_blocking"):
        where = [e for e in added if e["tid"] == tid[f"where: {mech}"] and e["ph"] == "X"]
        assert where, mech
        head = next(e for e in added if e["tid"] == tid[f"where: {mech}"] and e["ph"] == "i")
        assert head["args"]["intervals"] == len(where) and head["args"]["left_out_shortest"] == 0
        # blocked_non_blocking: the whole blocked cudaMemcpyAsync call, one per copy call
        # (a copy call lasts until the op that issued it returns: the emulator pads around it)
        if mech == "blocked_non_blocking":
            assert len(where) == len(copy_calls)
            assert all((e["ts"], e["name"]) in calls for e in where)
            dur = {round(e["ts"], 3): e["dur"] for e in copy_calls}
            assert all(e["dur"] >= dur[e["ts"]] for e in where)
        else:  # the call's own time after any wait, and each host-crossing GPU copy
            gpu = [e for e in where if e["args"]["lane"].startswith("GPU")]
            host = [e for e in where if not e["args"]["lane"].startswith("GPU")]
            assert len(host) == len(copy_calls) and len(gpu) == len(copy_calls)
            assert all((e["ts"], e["dur"]) in spans for e in gpu)
            assert all(e["name"] == "cudaMemcpyAsync" for e in host)
    # no launch toll was injected (ground_truth.json): LA01 is clean, no where-track for it
    launches = [
        e for e in added if e["tid"] == tid.get("where: launch_toll", -1) and e["ph"] == "X"
    ]
    assert "launch_toll" not in {a.mechanism for a in result["report"].attribution}
    assert not launches


def test_per_step_mechanism_events_add_up_to_the_partition(tmp_path: Path):
    # arrange
    out = tmp_path / "annotated.json"
    # act
    result = api.annotate(*EAGER, out)
    doc = _load(out)
    # assert: the per-step events of a mechanism carry exactly its per-step parts
    report = result["report"]
    tid = {name: tid for tid, name in _threads(doc).items()}
    for att in report.attribution:
        events = [e for e in _added(doc) if e["tid"] == tid[att.mechanism] and "ns" in e["args"]]
        per_step = {s.index: s.parts[att.mechanism] for s in report.partition.per_step}
        assert sum(e["args"]["ns"] for e in events) == sum(v for v in per_step.values() if v > 0)


@pytest.mark.parametrize("pair", [NSYS, DDP], ids=["nsys-sqlite", "folder-of-ranks"])
def test_non_kineto_inputs_become_a_chrome_trace_ccdiag_reads_back(pair: tuple[Path, Path], tmp_path: Path):  # fmt: skip
    # arrange
    out = tmp_path / "annotated.json"
    original = api.load_trace(pair[1])
    # act
    result = api.annotate(*pair, out)
    doc = _load(out)
    again = api.load_trace(out)
    # assert
    assert result["mode"] == "from-events"
    assert len(doc["traceEvents"]) == original.meta.n_events + sum(result["added"].values())
    kinds = lambda t: t.events.group_by("kind").len().sort("kind")  # noqa: E731
    assert kinds(again).equals(kinds(original))
    assert again.events["dur_ns"].sum() == pytest.approx(original.events["dur_ns"].sum(), rel=1e-6)
    assert again.meta.skipped.get(f"category:{CATEGORY}") == result["added"]["X"]
    ranks = original.events["rank"].unique().to_list()
    processes = {e["args"]["name"] for e in _added(doc) if e["name"] == "process_name"}
    assert len(processes) == len(ranks)


def test_annotate_cli_writes_stdout_and_reports_bad_input(tmp_path: Path):
    # act
    ok = subprocess.run(
        [sys.executable, "-m", "ccdiag.cli", "annotate", *map(str, EAGER), "-o", "-", "-q"],
        capture_output=True,
        timeout=300,
    )
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "ccdiag.cli",
            "annotate",
            str(EAGER[0]),
            str(tmp_path / "nope.json"),
            "-o",
            str(tmp_path / "x.json"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    # assert
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert _added(doc) and "deviceProperties" in doc
    assert (
        bad.returncode == 2
        and bad.stderr.strip() == "ccdiag: error: nope.json: no such file or folder"
    )


def test_annotated_output_is_deterministic(tmp_path: Path):
    # act
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    api.annotate(*NSYS, a)
    api.annotate(*NSYS, b)
    # assert
    assert a.read_bytes() == b.read_bytes()
    assert pl.Series(_load(a)["traceEvents"][:3]).len() == 3


def test_where_intervals_keep_the_longest_and_count_the_rest():
    from ccdiag.rules._base import RuleContext

    from ccdiag.timeline import mechanism_intervals

    # arrange: the eager decode has ~370 launch-toll intervals (calls + gaps) per step
    ctx = RuleContext(api.load_pair(*EAGER))
    full, none_left = mechanism_intervals(ctx, {"launch_toll"})
    # act
    capped, left = mechanism_intervals(ctx, {"launch_toll"}, max_per_mechanism=100)
    empty, _ = mechanism_intervals(ctx, set())
    # assert: the 100 longest kept, the rest counted, nothing else mixed in
    assert none_left == {} and full.height > 5_000
    assert capped.height == 100 and left == {"launch_toll": full.height - 100}
    assert capped["dur_ns"].min() >= full["dur_ns"].sort(descending=True)[99]
    assert set(capped["mechanism"]) == {"launch_toll"} and empty.height == 0
    # every interval lies inside an aligned treatment step window
    w = ctx.pair.treatment.windows.select("rank", "step", "start_ns", pl.col("end_ns").alias("w1"))
    j = full.join(w.rename({"start_ns": "w0"}), on=["rank", "step"])
    assert j.height == full.height
    assert (j["start_ns"] >= j["w0"] - j["dur_ns"]).all()  # a gap may start before the window
