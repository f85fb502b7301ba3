"""A folder as one trace: per-rank files, or one set of ``nsys stats`` CSV reports.

Per-rank folders hold one trace file per rank, all of one format (Kineto JSON[.gz], Nsight
Systems ``.sqlite`` or ``.nsys-rep``, or one ``nsys stats`` CSV set per rank). Each file is read
on its own (:func:`read_rank`, a pure function of the file and the options, so the same code can
run in a process pool or on a distributed engine) and the results are combined
(:func:`combine`): one event frame with a ``rank`` column, and merged metadata.

A file's rank comes from, in order:
1. its metadata: Kineto ``distributedInfo.rank``; in an nsys export, the ``RANK`` (or
   ``OMPI_COMM_WORLD_RANK``, ``SLURM_PROCID``, ``PMI_RANK``) environment variable of the
   profiled process;
2. its name: ``rank0``, ``rank-1``, ``rank_2``, ``rank.3`` (``nsys profile -o rank%q{RANK}``);
3. its place in name order, with a warning.

Two files claiming one rank are an error. Files other than traces (README, logs, licenses) are
ignored, and so are the exports ccdiag caches next to ``.nsys-rep`` reports.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from ccdiag.errors import InputError
from ccdiag.schema import Trace, TraceMeta, validate_events

PER_RANK_FORMATS = ("kineto", "nsys_sqlite", "nsys_rep", "nsys_csv")
_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".csv", ".csv.gz")
_RANK_RE = re.compile(r"(?:^|[^a-z])rank[-_.]?(\d{1,9})(?!\d)", re.IGNORECASE)
_CACHED_EXPORT_RE = re.compile(r"\.ccdiag-[0-9a-f]{12}\.sqlite$")


@dataclass(frozen=True)
class RankFile:
    """One rank's trace: the file (or CSV set prefix) and the rank its name suggests."""

    path: Path
    name_rank: int | None


def _candidates(folder: Path) -> list[Path]:
    files = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or not p.is_file() or not p.name.endswith(_TRACE_SUFFIXES):
            continue
        if p.name.endswith(".meta.json"):  # ccdiag capture's metadata sidecar, read with its trace
            continue
        if _CACHED_EXPORT_RE.search(p.name):
            continue
        files.append(p)
    return files


def _name_rank(name: str) -> int | None:
    m = _RANK_RE.search(name)
    return int(m.group(1)) if m else None


def _csv_sets(folder: Path) -> list[Path]:
    """Prefixes of the nsys stats trace-report sets in a folder."""
    from ccdiag.parsers import nsys_csv

    names = sorted({pre for (pre, kind) in nsys_csv.report_files(folder) if kind.endswith("trace")})
    return [folder / n for n in names]


def rank_files(folder: Path) -> tuple[str, list[RankFile]]:
    """The folder's format and its per-rank traces.

    Raises:
        InputError: no trace, mixed formats, or several CSV sets that are not per-rank.
    """
    from ccdiag import parsers

    sets = _csv_sets(folder)
    if sets:
        if len(sets) > 1 and any(_name_rank(s.name) is None for s in sets):
            shown = ", ".join(s.name for s in sets[:4]) + (", ..." if len(sets) > 4 else "")
            raise InputError(
                folder,
                f"the folder holds {len(sets)} nsys stats report sets ({shown}) that are not "
                f"per-rank; pass one of them, e.g. {folder.name}/{sets[0].name}_cuda_api_trace.csv",
            )
        return "nsys_csv", [RankFile(s, _name_rank(s.name)) for s in sets]
    formats: dict[str, list[Path]] = {}
    for p in _candidates(folder):
        try:
            fmt = parsers.sniff(p)
        except InputError:
            continue
        formats.setdefault(fmt, []).append(p)
    if not formats:
        raise InputError(
            folder,
            "no trace files in this folder (expected Kineto .json[.gz], Nsight Systems .sqlite "
            "or .nsys-rep, or nsys stats CSV reports)",
        )
    if len(formats) > 1:
        found = "; ".join(
            f"{fmt}: {', '.join(p.name for p in ps[:3])}" for fmt, ps in formats.items()
        )
        raise InputError(
            folder, f"traces of several formats in one folder ({found}); keep one format"
        )
    fmt, paths = next(iter(formats.items()))
    return fmt, [RankFile(p, _name_rank(p.name)) for p in paths]


def sniff_folder(path: Path) -> str:
    """The format of a folder's traces (see :func:`rank_files`)."""
    return rank_files(path)[0]


def _reader(fmt: str) -> Callable[..., Trace]:
    from ccdiag.parsers import kineto, nsys_csv, nsys_rep, nsys_sqlite

    return {
        "kineto": kineto.read,
        "nsys_sqlite": nsys_sqlite.read,
        "nsys_rep": nsys_rep.read,
        "nsys_csv": nsys_csv.read,
    }[fmt]


def _accepted(fn: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """The options a reader takes (each reader has its own)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return options
    return {k: v for k, v in options.items() if k in params}


def read_rank(path: Path, fmt: str, **options: Any) -> Trace:
    """Read one rank's file (rank column as the file says; :func:`combine` sets it)."""
    from ccdiag.parsers import apply_sidecar

    reader = _reader(fmt)
    return apply_sidecar(reader(path, **_accepted(reader, options)), path)


def _assign(files: Sequence[RankFile], traces: Sequence[Trace]) -> tuple[list[int], list[str]]:
    """Each file's rank: metadata, else its name, else its place. Returns ranks and warnings."""
    warnings: list[str] = []
    ranks: list[int | None] = []
    for f, t in zip(files, traces):
        meta = t.meta.rank if t.meta.rank is not None else None
        if meta is not None and f.name_rank is not None and meta != f.name_rank:
            warnings.append(
                f"{f.path.name}: its metadata says rank {meta}, its name rank {f.name_rank}; "
                "the metadata wins"
            )
        ranks.append(meta if meta is not None else f.name_rank)
    if any(r is None for r in ranks):
        taken = {r for r in ranks if r is not None}
        free = (r for r in range(len(ranks) + len(taken)) if r not in taken)
        guessed = [f.path.name for f, r in zip(files, ranks) if r is None]
        ranks = [r if r is not None else next(free) for r in ranks]
        warnings.append(
            f"no rank in the metadata or name of {', '.join(guessed[:4])}"
            f"{', ...' if len(guessed) > 4 else ''}: ranks given in name order"
        )
    dup = [r for r, n in Counter(ranks).items() if n > 1]
    if dup:
        clash = [f.path.name for f, r in zip(files, ranks) if r == dup[0]]
        raise InputError(files[0].path.parent, f"{' and '.join(clash)} are both rank {dup[0]}")
    return [int(r) for r in ranks if r is not None], warnings


def _first(values: Sequence[Any], what: str, warnings: list[str]) -> Any:
    present = [v for v in values if v is not None]
    if len(set(present)) > 1:
        warnings.append(
            f"the ranks disagree on {what}: {', '.join(sorted(set(map(str, present))))}"
        )
    return present[0] if present else None


def combine(folder: Path, fmt: str, files: Sequence[RankFile], traces: Sequence[Trace]) -> Trace:
    """One trace from per-rank traces: events with their ranks, merged metadata."""
    ranks, warnings = _assign(files, traces)
    frames = [
        t.events.with_columns(pl.lit(r, pl.Int32).alias("rank")) for r, t in zip(ranks, traces)
    ]
    events = validate_events(pl.concat(frames, how="vertical", rechunk=False))
    metas = [t.meta for t in traces]
    for f, m in zip(files, metas):
        warnings += [f"{f.path.name}: {w}" for w in m.warnings]
    skipped: Counter[str] = Counter()
    for m in metas:
        skipped.update(m.skipped)
    gpus = [g for m in metas for g in (m.gpus or ([m.gpu] if m.gpu else []))]
    sizes = [m.world_size for m in metas if m.world_size]
    order = sorted(range(len(ranks)), key=lambda i: ranks[i])
    fields: dict[str, Any] = {
        k: _first([getattr(m, k) for m in metas], k, warnings)
        for k in ("driver_version", "cuda_runtime", "cuda_driver", "torch_version", "nccl_version")
    }
    fields["cc_mode"] = _first([m.cc_mode for m in metas], "cc_mode", warnings)
    summaries = pl.concat(
        [t.summaries.with_columns(pl.lit(r, pl.Int32).alias("rank")) for r, t in zip(ranks, traces)]
    )
    return Trace(
        events=events,
        summaries=summaries,
        meta=TraceMeta(
            source=folder.name,
            format=fmt,
            profiler=metas[0].profiler,
            files=[n for i in order for n in metas[i].files],
            size_bytes=sum(m.size_bytes for m in metas),
            gpu=Counter(gpus).most_common(1)[0][0] if gpus else None,
            gpus=list(dict.fromkeys(gpus)),
            schema_version=metas[0].schema_version,
            ranks=sorted(ranks),
            world_size=max([*sizes, len(ranks)]),
            host_only=all(m.host_only for m in metas),
            n_events=events.height,
            skipped=dict(sorted(skipped.items())),
            warnings=warnings,
            extra={
                **metas[order[0]].extra,
                "rank_files": ",".join(f"{ranks[i]}:{files[i].path.name}" for i in order),
            },
            **fields,
        ),
    )


def read_folder(path: str | Path, fmt: str | None = None, **options: Any) -> Trace:
    """Read a folder of per-rank traces (or one nsys stats CSV set) as one trace.

    Args:
        path: the folder.
        fmt: its format, when already sniffed.
        **options: passed to each file's reader (those it accepts).

    Returns:
        One trace with a ``rank`` column; steps are assigned later.
    """
    folder = Path(path)
    found_fmt, files = rank_files(folder)
    fmt = fmt or found_fmt
    if fmt == "nsys_csv" and len(files) == 1:
        from ccdiag.parsers import nsys_csv

        return nsys_csv.read(folder, **_accepted(nsys_csv.read, options))
    traces = [read_rank(f.path, fmt, **options) for f in files]
    return combine(folder, fmt, files, traces)
