"""Put the diagnosis on the treatment's timeline (``ccdiag annotate``), for Perfetto UI or
chrome://tracing.

What is added, in a process named ``ccdiag diagnosis`` (one per rank, pid
``ANNOTATION_PID + rank``), all with category ``ccdiag``:

- thread ``verdict``: one complete event over the analysed steps, named by the verdict, with the
  per-step times, the CI and every mechanism's ns/step and share in its args;
- thread ``steps``: one complete event per aligned step (aligned index, treatment step number,
  step delta, the partition of that step's delta in ns) and an instant event (global scope) at
  each step start: the step boundaries;
- one thread per mechanism, then ``unattributed``: an event over the analysed steps holding the
  finding (rule, confidence, ns/step, share, summary, the evidence numbers, the fixes), and
  inside it, per step, an event whose *length* is the time attributed to the mechanism in that
  step, drawn from the step's start (the ledger is per category, not per interval: where inside
  the step the time went is not claimed);
- one thread ``where: <mechanism>`` per mechanism with time attributed: the treatment's
  intervals that carry its signature (``ccdiag.timeline.mechanism_intervals``: each launch call
  and the gap before it, each blocked copy call, each host-crossing GPU copy, each sync call,
  collective or UVM event), on their exact times, so Perfetto shows where the time can live.
  At most 20,000 per mechanism (the shortest are left out and counted in the thread's first
  event).

A Kineto treatment is copied byte for byte with these events spliced in at the start of
``traceEvents`` (streaming: the trace is never held in memory). Anything else (an nsys export,
CSV reports, a folder of ranks) becomes a Chrome-trace JSON built from the event frame with
Kineto's categories and args, so ccdiag reads it back. ccdiag's own Kineto reader counts the
added events as skipped (``category:ccdiag``, ``instant``, ``metadata``): they never change a
diagnosis of the annotated file.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import polars as pl

from ccdiag.errors import InputError
from ccdiag.pairing import Pair
from ccdiag.progress import Progress
from ccdiag.report.canonical import canonical
from ccdiag.schema import KINETO_CATEGORY
from ccdiag.verdict import Report

CATEGORY = "ccdiag"
ANNOTATION_PID = 1 << 30
"""pid of the added process (+ rank): above any Linux pid (at most 2**22) and GPU index."""
UNATTRIBUTED = "unattributed"
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_MAX_HEADER = 256 << 20
_BLOCK = 4 << 20


def _us(ns: int | float) -> float:
    return round(ns / 1000.0, 3)


def _x(pid: int, tid: int, name: str, start: int, dur: int, args: Mapping[str, Any]) -> dict:
    return {
        "ph": "X",
        "cat": CATEGORY,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": _us(start),
        "dur": _us(max(dur, 0)),
        "args": dict(args),
    }


def _meta_events(pid: int, rank: int, multi: bool, threads: list[str]) -> list[dict]:
    name = "ccdiag diagnosis" + (f" (rank {rank})" if multi else "")
    out = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}},
    ]
    for tid, label in enumerate(threads, 1):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}})  # fmt: skip
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})  # fmt: skip
    return out


def step_windows(pair: Pair) -> pl.DataFrame:
    """Treatment window of each aligned step: rank, idx, t_step, start_ns, end_ns."""
    w = pair.treatment.windows.select("rank", pl.col("step").alias("t_step"), "start_ns", "end_ns")
    a = pair.aligned.select("rank", "idx", "t_step")
    return a.join(w, on=["rank", "t_step"], how="inner").sort("rank", "idx")


def _finding_args(a: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "rule": a["rule"],
        "confidence": a["confidence"],
        "ns_per_step": a["ns_per_step"],
        "share": a["share"],
        "summary": a["summary"],
        "evidence": a["evidence"],
        "fixes": [
            {k: r[k] for k in ("fix", "predicted_recovery_ns_per_step", "share", "method")}
            for r in a["recommendations"]
        ],
    }


def _verdict_args(d: Mapping[str, Any]) -> dict[str, Any]:
    st = d["step_ns"]
    return {
        "step_ns": {k: st[k] for k in ("baseline", "treatment", "delta", "ratio")},
        "delta_ci95": st["delta_ci95"],
        "significant": st["significant"],
        "attribution": {
            a["mechanism"]: {"ns_per_step": a["ns_per_step"], "share": a["share"]}
            for a in d["attribution"]
        },  # fmt: skip
        "unattributed": {
            "ns_per_step": d["unattributed_ns_per_step"],
            "share": d["unattributed_share"],
        },  # fmt: skip
        "ccdiag_version": d["ccdiag_version"],
    }


def annotation_events(
    report: Report,
    windows: pl.DataFrame,
    where: pl.DataFrame | None = None,
    left_out: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The added events (pure): metadata, verdict, steps, one thread per mechanism, and the
    evidence intervals of each mechanism with attributed time.

    Args:
        report: the diagnosis (its evidence is scrubbed like the file reports).
        windows: ``step_windows(pair)``: treatment window of each aligned step.
        where: ``timeline.mechanism_intervals`` of the pair (None: no ``where:`` threads).
        left_out: per mechanism, intervals left out of ``where``.

    Returns:
        Chrome-trace events (dicts), times in µs on the treatment's clock.
    """
    d = canonical(report)
    per_step = {(s["rank"], s["index"]): s for s in (d.get("partition") or {}).get("per_step", [])}
    mechs = [a["mechanism"] for a in d["attribution"]] + [UNATTRIBUTED]
    findings = {a["mechanism"]: _finding_args(a) for a in d["attribution"]}
    findings[UNATTRIBUTED] = {"ns_per_step": d["unattributed_ns_per_step"], "share": d["unattributed_share"], "summary": "what no rule explains"}  # fmt: skip
    ranks = sorted(set(windows["rank"].to_list()))
    out: list[dict[str, Any]] = []
    for rank in ranks:
        pid = ANNOTATION_PID + rank
        rows = windows.filter(pl.col("rank") == rank).iter_rows(named=True)
        steps = [(r, per_step.get((rank, r["idx"]))) for r in rows]
        if not steps:
            continue
        t0, t1 = steps[0][0]["start_ns"], max(r["end_ns"] for r, _ in steps)
        shown = [
            m for m in mechs
            if m != UNATTRIBUTED and findings[m]["ns_per_step"] > 0 and where is not None
        ]  # fmt: skip
        threads = ["verdict", "steps", *mechs, *(f"where: {m}" for m in shown)]
        out += _meta_events(pid, rank, len(ranks) > 1, threads)
        out.append(_x(pid, 1, d["verdict"] or "diagnosis", t0, t1 - t0, _verdict_args(d)))
        for r, part in steps:
            out += _step_events(pid, r, part)
        for tid, m in enumerate(mechs, 3):
            f = findings[m]
            label = (
                f"{m}: {f['ns_per_step'] / 1e3:+.1f} us/step ({100 * f['share']:.1f}% of the delta)"
            )
            out.append(_x(pid, tid, label, t0, t1 - t0, f))
            out += _mechanism_steps(pid, tid, m, steps)
        for tid, m in enumerate(shown, 3 + len(mechs)):
            assert where is not None
            out += _where_events(pid, tid, m, t0, where.filter((pl.col("rank") == rank) & (pl.col("mechanism") == m)), (left_out or {}).get(m, 0))  # fmt: skip
    return out


def _where_events(pid: int, tid: int, mech: str, t0: int, iv: pl.DataFrame, left: int) -> list[dict]:  # fmt: skip
    head = {"ph": "i", "cat": CATEGORY, "name": f"where: {mech}", "pid": pid, "tid": tid, "ts": _us(t0), "s": "t", "args": {"intervals": iv.height, "left_out_shortest": left, "what": "treatment intervals carrying the mechanism's signature (evidence, not its attributed amount)"}}  # fmt: skip
    return [head] + [
        _x(pid, tid, name, start, dur, {"lane": lane})
        for start, dur, name, lane in iv.select("start_ns", "dur_ns", "name", "lane").iter_rows()
    ]


def _step_events(pid: int, r: Mapping[str, Any], part: Mapping[str, Any] | None) -> list[dict]:
    args: dict[str, Any] = {"aligned_index": r["idx"], "treatment_step": r["t_step"]}
    if part is not None:
        args |= {"delta_ns": part["delta"], "kept_in_mean": part["kept"], "parts_ns": part["parts"]}
    start, end = r["start_ns"], r["end_ns"]
    boundary = {"ph": "i", "cat": CATEGORY, "name": f"step {r['idx']}", "pid": pid, "tid": 2, "ts": _us(start), "s": "g", "args": {"treatment_step": r["t_step"]}}  # fmt: skip
    return [boundary, _x(pid, 2, f"step {r['idx']}", start, end - start, args)]


def _mechanism_steps(pid: int, tid: int, mech: str, steps: list[tuple[dict, Any]]) -> list[dict]:
    out = []
    for r, part in steps:
        ns = int((part or {}).get("parts", {}).get(mech, 0)) if part else 0
        if ns <= 0:
            continue
        start, length = r["start_ns"], r["end_ns"] - r["start_ns"]
        args = {"ns": ns, "step_delta_ns": part["delta"], "aligned_index": r["idx"]}
        if ns > length:
            args["clipped_to_step"] = True
        out.append(_x(pid, tid, f"{mech} {ns / 1e3:.1f} us", start, min(ns, length), args))
    return out


# -- writing -----------------------------------------------------------------------------------


def _dump(ev: Mapping[str, Any]) -> bytes:
    return json.dumps(ev, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@contextlib.contextmanager
def _sink(out: str | Path) -> Iterator[IO[bytes]]:
    """A binary stream to ``out`` ('-': stdout), gzip when the name ends in .gz (mtime 0)."""
    if str(out) == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    path = Path(out)
    try:
        raw = open(path, "wb")
    except OSError as exc:
        raise InputError(path, f"cannot write: {exc.strerror or exc}") from None
    with raw:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield raw


def _open_text(path: Path) -> IO[bytes]:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _header_end(buf: bytearray) -> int | None:
    """Offset just after the '[' of the top-level traceEvents array, or None (read more)."""
    lead = bytes(buf).lstrip()[:1]
    if lead == b"[":
        return len(buf) - len(bytes(buf).lstrip()) + 1
    for m in _KEY.finditer(buf):
        try:
            head = json.loads(bytes(buf[: m.start()]) + b'"traceEvents": null}')
        except ValueError:
            continue
        if isinstance(head, dict):
            return m.end()
    return None


def splice_kineto(src: Path, sink: IO[bytes], added: Iterable[Mapping[str, Any]]) -> None:
    """Copy a Kineto trace to ``sink`` with ``added`` events first in ``traceEvents``."""
    with _open_text(src) as fh:
        buf = bytearray()
        while (cut := _header_end(buf)) is None:
            block = fh.read(_BLOCK)
            if not block or len(buf) > _MAX_HEADER:
                raise InputError(src, "no traceEvents array found: not a Kineto trace")
            buf += block
        sink.write(bytes(buf[:cut]) + b"\n")
        events = b",\n".join(_dump(e) for e in added)
        sink.write(events)
        rest = bytes(buf[cut:])
        while not rest.strip():
            block = fh.read(_BLOCK)
            if not block:
                raise InputError(src, "truncated JSON: the file ends inside traceEvents")
            rest += block
        sink.write(b"\n" if not events or rest.lstrip().startswith(b"]") else b",\n")
        sink.write(rest)
        while block := fh.read(_BLOCK):
            sink.write(block)


def _event_of(r: Mapping[str, Any]) -> dict[str, Any]:
    """One event row as a Kineto-style complete event (readable by ccdiag's Kineto reader)."""
    kind, gpu = r["kind"], r["device"] is not None
    cat = "gpu_user_annotation" if kind == "annotation" and gpu else KINETO_CATEGORY[kind]
    name = r["name"]
    if kind == "memcpy" and r["copy_kind"]:
        name = f"Memcpy {r['copy_kind']} ({(r['src_mem'] or 'unknown').title()} -> {(r['dst_mem'] or 'unknown').title()})"  # fmt: skip
    args: dict[str, Any] = {}
    for col, key in (("correlation", "correlation"), ("external_id", "External id"), ("bytes", "bytes"), ("device", "device"), ("stream", "stream"), ("rank", "rank"), ("domain", "domain")):  # fmt: skip
        if r[col] is not None:
            args[key] = r[col]
    pid, tid = (r["device"], r["stream"]) if gpu else (r["pid"], r["tid"])
    return {"ph": "X", "cat": cat, "name": name, "pid": pid if pid is not None else -1, "tid": tid if tid is not None else 0, "ts": _us(r["start_ns"]), "dur": _us(r["dur_ns"]), "args": args}  # fmt: skip


def write_from_events(
    events: pl.DataFrame, meta: Mapping[str, Any], sink: IO[bytes], added: Iterable[Mapping]
) -> int:
    """A Chrome-trace JSON of an event frame (sorted by time) plus ``added``; rows written."""
    cols = ["kind", "name", "start_ns", "dur_ns", "pid", "tid", "device", "stream", "correlation", "external_id", "bytes", "copy_kind", "src_mem", "dst_mem", "rank", "domain"]  # fmt: skip
    enums = [pl.col(c).cast(pl.String) for c in ("kind", "copy_kind", "src_mem", "dst_mem")]
    frame = events.select(cols).with_columns(enums).sort("start_ns", "rank", maintain_order=True)
    head = {"schemaVersion": 1, "displayTimeUnit": "ms", "ccdiagSource": dict(meta)}
    sink.write(_dump(head)[:-1] + b',"traceEvents":[\n')
    written = b",\n".join(_dump(e) for e in added)
    sink.write(written)
    sep = b",\n" if written else b""
    for chunk in frame.iter_slices(100_000):
        for r in chunk.iter_rows(named=True):
            sink.write(sep + _dump(_event_of(r)))
            sep = b",\n"
    sink.write(b"\n]}\n")
    return frame.height


def annotate_pair(
    pair: Pair,
    report: Report,
    treatment: Path,
    out: str | Path,
    *,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write the annotated treatment trace (see the module docstring).

    Returns:
        ``out``, ``mode`` (``kineto-copy`` or ``from-events``), ``report`` and ``added``
        (number of added events by phase).
    """
    from ccdiag.ledger import PairContext as RuleContext
    from ccdiag.timeline import mechanism_intervals

    fired = {a.mechanism for a in report.attribution if a.ns_per_step > 0}
    where, left = mechanism_intervals(RuleContext.of(pair), fired)
    added = annotation_events(report, step_windows(pair), where, left)
    counts: dict[str, int] = {}
    for e in added:
        counts[e["ph"]] = counts.get(e["ph"], 0) + 1
    meta = pair.treatment.trace.meta
    kineto_file = meta.format == "kineto" and treatment.is_file()
    if progress is not None:
        progress(f"writing {Path(str(out)).name}", 0, 1)
    with _sink(out) as sink:
        if kineto_file:
            splice_kineto(treatment, sink, added)
        else:
            info = {"source": meta.source, "format": meta.format, "profiler": meta.profiler}
            write_from_events(pair.treatment.trace.events, info, sink, added)
    if progress is not None:
        progress(f"writing {Path(str(out)).name}", 1, 1)
    mode = "kineto-copy" if kineto_file else "from-events"
    return {"out": str(out), "mode": mode, "report": report, "added": dict(sorted(counts.items()))}


def read_text(path: Path) -> str:
    """The (possibly gzip) text of a written trace (for tests and checks)."""
    with _open_text(path) as fh:
        return io.TextIOWrapper(fh, encoding="utf-8").read()
