"""The widened campaign: grammar-built inputs (``fuzz.grammar``), sidecars, special files and
memory-shaped inputs (``fuzz.shapes``), each case rebuilt from its seed.

    python -m fuzz.hostile --cases 50000 --seed 18 --name campaign-hostile
    python -m fuzz.hostile --replay 18000123          # rebuild and rerun one case, verbose

Case kinds (picked per case from its seed): ``kineto`` (a grammar-built trace, 3 % of them also
through ``analyze`` against a clean trace of the same workload), ``csv`` (a report set),
``sidecar`` (a trace with a generated ``.meta.json``), ``folder`` (two generated rank files),
``special`` (a FIFO, a device, a socket, a folder named like a file, a dangling or looping
link; a FIFO as a sidecar or as a CSV sibling) and, every ``--shape-every`` cases, ``shape``:
a memory-shaped input run through the installed CLI in a child process.

Oracles. In process (kineto, csv, sidecar, folder, special): what ``ccdiag summary --json``
runs must return or raise ccdiag's InputError of one line of at most 300 characters naming a
file; nothing may take longer than ``--timeout`` (a hang is a crash); a trace that Python's
``json`` reads as a well-formed document must account for every entry
(``n_events + sum(skipped) == len(traceEvents)``) and read the ``distributedInfo.rank`` that
Python's ``json`` reads (members after the array, some after a member of megabytes that is
skipped unread, included). Library warnings raised during a case are
counted (the CLI never prints them). In a child process (shape): exit status 0 or 2; on 2,
exactly one stderr line of at most 300 characters naming the file, no traceback; peak RSS (the
child's own ``VmHWM``, written at its exit; polled while it runs, for a child that is killed) at
most ``ccdiag.limits.memory_bound(U)``; wall time at most 2x the CLI's start-up time
(measured as the campaign runs: the machine is shared) + 5 s + 1 s per MiB of U.

The summary (``fuzz/runs/<name>.json``) is rewritten every 250 cases: counts per kind and
outcome, crash signatures with the first seed and the case index of the last crash.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RUNS = HERE / "runs"
MAX_LINE = 300


class CaseTimeoutError(Exception):
    """A case ran past the per-case limit."""


class OracleError(AssertionError):
    """The reader returned (or refused), but broke a promise."""


def small_trace() -> bytes:
    """A clean, valid grammar-built trace (for shapes that wrap one)."""
    from fuzz import grammar

    rng = random.Random(7)
    while True:
        evs = grammar.kineto_events(rng, 0.0)
        if len(evs) > 20:
            break
    w = grammar.Writer(rng, "pretty")
    w.value({"schemaVersion": 1, "traceEvents": evs})
    return w.text()


# -- one case ----------------------------------------------------------------------------------
def _build(kind: str, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Write the case's files; returns what the oracle needs."""
    from fuzz import grammar

    p = rng.choice([0.0, 0.02, 0.1, 0.3])
    case: dict[str, Any] = {"kind": kind, "p": p}
    if kind in ("kineto", "sidecar"):
        doc, _ = grammar.kineto_doc(rng, p)
        text = grammar.serialize(rng, doc, p)
        gz = rng.random() < 0.3
        path = folder / ("trace.json.gz" if gz else "trace.json")
        path.write_bytes(gzip.compress(text, 1) if gz else text)
        case["path"] = path
        case["total"] = _total(text)
        if case["total"] is not None and kind == "kineto":
            case["rank"] = _rank(text)
        if kind == "sidecar":
            (folder / "trace.meta.json").write_bytes(grammar.sidecar(rng, 0.3))
        if kind == "kineto" and rng.random() < 0.03:
            base_rng = random.Random(rng.random())
            bdoc, _ = grammar.kineto_doc(base_rng, 0.0)
            bpath = folder / "base" / "baseline.json"
            bpath.parent.mkdir()
            bpath.write_bytes(grammar.serialize(base_rng, bdoc, 0.0))
            case["baseline"] = bpath
    elif kind == "csv":
        case["path"] = grammar.csv_set(rng, folder, p)
    elif kind == "folder":
        ranks = folder / "ranks"
        ranks.mkdir()
        for r in range(rng.randint(1, 3)):
            doc, _ = grammar.kineto_doc(rng, p)
            name = rng.choice([f"rank{r}.json", f"rank-{r}.json", f"trace_{r}.json"])
            (ranks / name).write_bytes(grammar.serialize(rng, doc, p))
            if rng.random() < 0.2:
                (ranks / name.replace(".json", ".meta.json")).write_bytes(grammar.sidecar(rng, 0.3))
        case["path"] = ranks
    elif kind == "special":
        sk = rng.choice(grammar.SPECIAL_KINDS)
        case["special"] = sk
        case["path"] = grammar.special(rng, folder, sk)
    return case


def _total(text: bytes) -> int | None:
    """Entries of traceEvents when Python's json reads the text as one trace document."""
    try:
        doc = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, list):
        return len(doc)
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return len(doc["traceEvents"])
    return None


def _rank(text: bytes) -> int | None:
    """``distributedInfo.rank`` as Python's json reads it (last duplicate wins), if it is a
    rank ccdiag accepts (an int in [0, 2**31)); None otherwise."""
    doc = json.loads(text.decode("utf-8"))
    dist = doc.get("distributedInfo") if isinstance(doc, dict) else None
    r = dist.get("rank") if isinstance(dist, dict) else None
    ok = isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31
    return r if ok else None


def _check_error(exc: Any) -> None:
    line = exc.line()
    if "\n" in line or exc.path is None or not line.startswith(exc.path.name):
        raise OracleError(f"InputError not one line naming a file: {line[:200]!r}")
    if len(line) > MAX_LINE:
        raise OracleError(f"InputError longer than {MAX_LINE} characters ({len(line)})")


def run_in_process(case: dict[str, Any]) -> tuple[str, list[str]]:
    """The oracle for in-process kinds: ("ok" | "input_error", library warnings)."""
    from ccdiag import api
    from ccdiag.errors import InputError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trace = api.load_trace(case["path"])
            summary = api.summarize(trace)
            json.dumps(summary, allow_nan=False)
            text = json.dumps(summary)
            text.encode("utf-8")  # no lone surrogate may reach an output
            total = case.get("total")
            if total is not None and trace.meta.format == "kineto":
                got = trace.meta.n_events + sum(trace.meta.skipped.values())
                if got != total:
                    raise OracleError(f"events lost: {got} accounted != {total} in the file")
            if "rank" in case and trace.meta.rank != case["rank"]:
                raise OracleError(f"rank {trace.meta.rank} read, {case['rank']} in the file")
            for w in trace.meta.warnings:
                w.encode("utf-8")
            if case.get("baseline") is not None:
                report = api.diagnose(case["baseline"], case["path"])
                api.render_report(report, "json").encode("utf-8")
            outcome = "ok"
        except InputError as exc:
            _check_error(exc)
            outcome = "input_error"
    found = sorted({f"{w.category.__name__}: {str(w.message)[:80]}" for w in caught})
    return outcome, found


#: The CLI in a child that writes its own peak RSS (``VmHWM``, KiB) to the file named first, at
#: exit. ``ru_maxrss`` from ``wait4`` is not the child's own: it carries the high-water mark of
#: this campaign process across fork and exec (a confirmation run saw 461 MiB on every shape,
#: the parent's peak, not the child's).
_CHILD = (
    "import atexit, sys\n"
    "out = sys.argv.pop(1)\n"
    "def _hwm():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            open(out, 'w').write(line.split()[1])\n"
    "atexit.register(_hwm)\n"
    "from ccdiag.cli import main\n"
    "main()\n"
)


def _watch_hwm(pid: int, seen: list[int]) -> None:
    """The child's own VmHWM, polled every 10 ms while it runs (for a child that is killed and
    never reaches its atexit handler)."""
    status = Path(f"/proc/{pid}/status")
    while True:
        try:
            text = status.read_text()
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                return
            if line.startswith("VmHWM:"):
                seen[0] = max(seen[0], int(line.split()[1]) * 1024)
        time.sleep(0.01)


def run_cli(path: Path, env: dict[str, str], uncompressed: int) -> dict[str, Any]:
    """The installed CLI on one input in a child process: status, stderr, peak RSS (the child's
    own VmHWM), time."""
    from ccdiag import limits

    hwm_file = path.parent / ".hwm"
    cmd = [sys.executable, "-c", _CHILD, str(hwm_file)]
    cmd += ["summary", str(path), "--json", os.devnull]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
        cwd=path.parent,
    )
    limit_s = 2 * startup_s() + 5 + uncompressed / (1 << 20)
    timer = threading.Timer(limit_s * 2, proc.kill)
    timer.start()
    seen = [0]
    watcher = threading.Thread(target=_watch_hwm, args=(proc.pid, seen), daemon=True)
    watcher.start()
    try:
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    watcher.join(1)
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        peak = int(hwm_file.read_text()) * 1024  # exact: the child's own, at exit
    except (OSError, ValueError):
        peak = seen[0] or ru.ru_maxrss * 1024  # killed: the last VmHWM seen
    return {
        "rc": proc.returncode,
        "stderr": err.decode("utf-8", "replace"),
        "peak": peak,
        "wall": time.monotonic() - t0,
        "limit_s": limit_s,
        "bound": limits.memory_bound(uncompressed),
    }


_STARTUP: list[float] = []


def startup_s() -> float:
    """Seconds the CLI takes to refuse a one-line file on this machine now (re-measured every
    20 shape cases: the time oracle is relative to the machine's load)."""
    if not _STARTUP or len(_STARTUP) % 20 == 0:
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "t.json"
            p.write_bytes(b"{}")
            t0 = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "ccdiag.cli", "summary", str(p)], capture_output=True
            )
            _STARTUP.append(time.monotonic() - t0)
    else:
        _STARTUP.append(_STARTUP[-1])
    return _STARTUP[-1]


def check_cli(res: dict[str, Any], name: str) -> str:
    """The oracle for a child run; returns the outcome or raises OracleError."""
    err = res["stderr"]
    if res["rc"] not in (0, 2):
        raise OracleError(f"exit status {res['rc']}: {err.strip().splitlines()[-1:]!r}")
    if "Traceback" in err:
        raise OracleError("traceback on stderr")
    lines = err.splitlines()
    if res["rc"] == 2:
        if len(lines) != 1:
            raise OracleError(f"{len(lines)} stderr lines on exit 2")
        if len(lines[0]) > MAX_LINE or name not in lines[0]:
            raise OracleError(f"error line too long or not naming the file ({len(lines[0])})")
    elif lines:
        raise OracleError(f"{len(lines)} stderr lines on exit 0")
    if res["peak"] > res["bound"]:
        raise OracleError(f"peak RSS {res['peak'] >> 20} MiB > bound {res['bound'] >> 20} MiB")
    if res["wall"] > res["limit_s"]:
        raise OracleError(f"took {res['wall']:.0f} s > {res['limit_s']:.0f} s")
    return "ok" if res["rc"] == 0 else "input_error"


def run_shape(rng: random.Random, folder: Path, rec: dict[str, Any]) -> str:
    """One memory-shaped case; its shape, size, peak, wall and status go into ``rec`` before
    the oracle judges them (a failing case is recorded under its shape too)."""
    from fuzz.shapes import SHAPES, MiB

    shape = SHAPES[rng.choice(sorted(SHAPES))]
    size = int(rng.choice([0.5, 2, 6, 12, 20, 32]) * MiB)
    path = folder / shape.filename
    rec["shape"] = shape.name
    uncompressed = shape.build(path, size, rng)
    res = run_cli(path, dict(shape.env), uncompressed)
    rec.update({"U": uncompressed, "peak": res["peak"], "wall": res["wall"], "rc": res["rc"]})
    return check_cli(res, path.name)


def _signature(exc: BaseException) -> str:
    if isinstance(exc, OracleError):
        return f"OracleError: {str(exc).split(':')[0][:60]}"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if str(REPO) in f.filename and "/fuzz/" not in f.filename]
    where = f"{Path(own[-1].filename).relative_to(REPO)}:{own[-1].lineno}" if own else "?"
    return f"{type(exc).__name__} at {where}"


def pick_kind(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.55:
        return "kineto"
    if r < 0.75:
        return "csv"
    if r < 0.87:
        return "sidecar"
    if r < 0.94:
        return "folder"
    return "special"


def one(seed: int, shape: bool, timeout: float, verbose: bool = False) -> dict[str, Any]:
    """Build and check case ``seed``; returns its record (kind, outcome, signature...)."""
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="ccdiag-hostile-"))
    rec: dict[str, Any] = {"seed": seed}
    t0 = time.perf_counter()
    try:
        if shape:
            rec["kind"] = "shape"
            outcome = run_shape(rng, tmp, rec)
        else:
            kind = pick_kind(rng)
            rec["kind"] = kind
            case = _build(kind, rng, tmp)
            if "special" in case:
                rec["special"] = case["special"]
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                outcome, found = run_in_process(case)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if found:
                rec["warnings"] = found
        rec["outcome"] = outcome
    except Exception as exc:  # noqa: BLE001 - every other exception is a finding
        rec["outcome"] = "crash"
        rec["signature"] = _signature(exc)
        if verbose:
            traceback.print_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _rmtree(tmp)
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


def _rmtree(p: Path) -> None:
    for q in p.rglob("*"):
        try:
            if not q.is_symlink():
                q.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(p, ignore_errors=True)


def _on_alarm(*_: Any) -> None:
    raise CaseTimeoutError("case ran past the time limit")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--start", type=int, default=0, help="first case index (resume)")
    ap.add_argument("--shape-every", type=int, default=250)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--name", default=None)
    ap.add_argument("--replay", type=int, default=None, help="rerun one case seed, verbose")
    ap.add_argument("--replay-shape", action="store_true")
    a = ap.parse_args()
    signal.signal(signal.SIGALRM, _on_alarm)
    if a.replay is not None:
        print(json.dumps(one(a.replay, a.replay_shape, a.timeout, verbose=True), indent=1))
        return 0
    name = a.name or time.strftime("hostile-%Y%m%d-%H%M%S")
    RUNS.mkdir(exist_ok=True)
    out = RUNS / f"{name}.json"
    stats: dict[str, Any] = {
        "name": name,
        "command": " ".join(["python -m fuzz.hostile", *sys.argv[1:]]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cases": 0,
        "outcomes": Counter(),
        "by_kind": Counter(),
        "special": Counter(),
        "shapes": {},
        "crashes": {},
        "library_warnings": {},
        "last_crash_case": None,
        "slowest_in_process_s": 0.0,
    }
    t_start = time.time()
    for i in range(a.start, a.start + a.cases):
        seed = a.seed * 10_000_000 + i
        shape = a.shape_every > 0 and i % a.shape_every == a.shape_every - 1
        rec = one(seed, shape, a.timeout)
        stats["cases"] += 1
        stats["outcomes"][rec["outcome"]] += 1
        stats["by_kind"][f"{rec['kind']}:{rec['outcome']}"] += 1
        if "special" in rec:
            stats["special"][f"{rec['special']}:{rec['outcome']}"] += 1
        if rec["kind"] == "shape":
            s = stats["shapes"].setdefault(rec.get("shape", "?"), {"runs": 0, "worst": None})
            s["runs"] += 1
            if "peak" in rec:
                ratio = rec["peak"] / max(1, rec["U"])
                if s["worst"] is None or rec["peak"] > s["worst"]["peak_mib"] * (1 << 20):
                    s["worst"] = {
                        "U_mib": round(rec["U"] / (1 << 20), 1),
                        "peak_mib": round(rec["peak"] / (1 << 20)),
                        "wall_s": round(rec["wall"], 1),
                        "rc": rec["rc"],
                        "peak_per_U": round(ratio, 2),
                    }
        else:
            stats["slowest_in_process_s"] = max(stats["slowest_in_process_s"], rec["seconds"])
        for w in rec.get("warnings", []):
            stats["library_warnings"].setdefault(w, {"count": 0, "first_seed": seed})
            stats["library_warnings"][w]["count"] += 1
        if rec["outcome"] == "crash":
            c = stats["crashes"].setdefault(
                rec["signature"], {"count": 0, "first_seed": seed, "kind": rec["kind"]}
            )
            c["count"] += 1
            stats["last_crash_case"] = i
            print(f"CRASH case {i} seed {seed}: {rec['signature']}", flush=True)
        if stats["cases"] % 250 == 0 or i == a.start + a.cases - 1:
            stats["wall_s"] = round(time.time() - t_start, 1)
            last = stats["last_crash_case"]
            stats["cases_since_last_crash"] = (i - last) if last is not None else stats["cases"]
            out.write_text(json.dumps(stats, indent=1, default=dict) + "\n")
    print(
        json.dumps({k: stats[k] for k in ("cases", "outcomes", "crashes")}, indent=1, default=dict)
    )
    return 1 if stats["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
