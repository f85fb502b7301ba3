"""Capture traces of a live workload: ``with ccdiag.capture(out, label) as cap: ... cap.step()``.

Two back ends:

- ``torch``: the PyTorch profiler (Kineto) with a step schedule; each ``cap.step()`` advances it,
  so the trace carries ``ProfilerStep#N`` marks. Written as ``<out>/<label>[.rank<r>].json.gz``.
- ``nsys``: the workload runs under ``nsys profile`` (``ccdiag capture --nsys``); each step is an
  NVTX range ``ccdiag_step``, and the torch profiler stays off.

Every capture also writes ``<out>/<label>.meta.json``: label, GPU, driver, CUDA / PyTorch / NCCL
versions, CC mode (``nvidia-smi conf-compute``), the emulated platform when the CC emulator is
active, and the step window. No host names, user names, paths or environment are recorded, and
trace files are scrubbed of local paths.

Only the standard library and torch are needed here (no polars), so this runs on a bare GPU box.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ENV_OUT = "CCDIAG_CAPTURE_OUT"
ENV_LABEL = "CCDIAG_CAPTURE_LABEL"
ENV_MODE = "CCDIAG_CAPTURE_MODE"
STEP_RANGE = "ccdiag_step"


def _run(cmd: list[str]) -> str | None:
    """Output of a command, or None when it is missing or fails."""
    if not shutil.which(cmd[0]):
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def cc_mode() -> dict[str, str | None]:
    """CC mode as the driver states it (``nvidia-smi conf-compute``), or unknown."""
    out = _run(["nvidia-smi", "conf-compute", "-f"]) or ""
    m = re.search(r"CC status:\s*(\w+)", out)
    mode = m.group(1).lower() if m else None
    q = _run(["nvidia-smi", "conf-compute", "-q"]) or ""
    dev = re.search(r"(?i)dev\s*tools\s*mode\s*:\s*(\w+)", q)
    if mode == "on" and dev and dev.group(1).lower() in ("on", "enabled"):
        mode = "devtools"
    return {"cc_mode": mode, "cc_mode_source": "nvidia-smi conf-compute" if m else None}


def environment_facts() -> dict[str, Any]:
    """GPU, driver and library versions of this machine (nothing identifying)."""
    facts: dict[str, Any] = {}
    smi = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if smi:
        names = [line.split(",")[0].strip() for line in smi.strip().splitlines()]
        facts["gpus"] = names
        facts["gpu"] = names[0] if names else None
        facts["driver_version"] = smi.strip().splitlines()[0].split(",")[1].strip()
    try:
        import torch

        facts["torch_version"] = torch.__version__
        facts["cuda_runtime"] = torch.version.cuda
        if torch.cuda.is_available():
            facts.setdefault("gpu", torch.cuda.get_device_name(0))
            try:
                facts["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:  # noqa: BLE001 (NCCL is optional)
                pass
    except ImportError:
        pass
    facts.update(cc_mode())
    emu = {
        k[len("CCDIAG_EMU_") :].lower(): v
        for k, v in os.environ.items()
        if k.startswith("CCDIAG_EMU_")
    }
    if emu and emu.get("platform"):
        facts["emulation"] = {k: v for k, v in emu.items() if k != "log"}
    return facts


def _scrub_text(text: str) -> str:
    """Replace local paths, the user and host names in a trace's text by placeholders."""
    for needle in sorted(
        {os.getcwd(), os.path.expanduser("~"), str(Path.cwd().parent)}, key=len, reverse=True
    ):
        if len(needle) > 1:
            text = text.replace(needle, "<path>")
    for name in {os.environ.get("USER"), os.environ.get("LOGNAME"), _hostname()}:
        if name and len(name) > 2:
            text = re.sub(rf"\b{re.escape(name)}\b", "<redacted>", text)
    return text


def _hostname() -> str | None:
    try:
        return os.uname().nodename
    except AttributeError:
        return None


def scrub_trace_file(path: Path) -> None:
    """Scrub a Kineto trace in place (plain or .gz): local paths, user and host names."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        text = fh.read()
    doc = json.loads(text)
    if isinstance(doc, dict):
        if "traceName" in doc:
            doc["traceName"] = Path(str(doc["traceName"])).name
        if "host_name" in doc:
            doc["host_name"] = "<redacted>"
    text = _scrub_text(json.dumps(doc))
    with opener(path, "wt") as fh:
        fh.write(text)


class Capture:
    """Profiles a step loop. Use through :func:`capture`."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        label: str,
        *,
        steps: int = 20,
        warmup: int = 3,
        wait: int = 0,
        mode: str | None = None,
        cpu_only: bool = False,
        record_shapes: bool = True,
        rank: int | None = None,
    ) -> None:
        self.out = Path(out)
        self.label = label
        self.steps, self.warmup, self.wait = steps, warmup, wait
        self.mode = mode or os.environ.get(ENV_MODE, "torch")
        self.cpu_only = cpu_only
        self.record_shapes = record_shapes
        self.rank = rank if rank is not None else _env_rank()
        self.trace_path: Path | None = None
        self._prof: Any = None
        self._step = 0
        self._nvtx_open = False
        self._t0 = 0.0
        from ccdiag.emulate.shim import maybe_control

        self._shim = maybe_control()

    @property
    def total_steps(self) -> int:
        """Steps the loop should run for the schedule to complete."""
        return self.wait + self.warmup + self.steps

    def _name(self, suffix: str) -> Path:
        rank = f".rank{self.rank}" if self.rank is not None else ""
        return self.out / f"{self.label}{rank}{suffix}"

    def __enter__(self) -> Capture:
        self.out.mkdir(parents=True, exist_ok=True)
        self._t0 = time.time()
        if self.mode == "torch":
            import torch
            from torch.profiler import ProfilerActivity, profile, schedule

            acts = [ProfilerActivity.CPU]
            if torch.cuda.is_available() and not self.cpu_only:
                acts.append(ProfilerActivity.CUDA)
            self.trace_path = self._name(".json.gz")
            self._prof = profile(
                activities=acts,
                schedule=schedule(wait=self.wait, warmup=self.warmup, active=self.steps, repeat=1),
                record_shapes=self.record_shapes,
                on_trace_ready=self._export,
            )
            self._prof.__enter__()
        self._open_range()
        return self

    def _export(self, prof: Any) -> None:
        assert self.trace_path is not None
        prof.export_chrome_trace(str(self.trace_path))
        scrub_trace_file(self.trace_path)

    def _open_range(self) -> None:
        if self.mode == "nsys":
            import torch

            torch.cuda.nvtx.range_push(STEP_RANGE)
            self._nvtx_open = True

    def _close_range(self) -> None:
        if self._nvtx_open:
            import torch

            torch.cuda.nvtx.range_pop()
            self._nvtx_open = False

    def step(self) -> None:
        """Mark the end of one step (advances the profiler schedule and the emulator's counters)."""
        self._close_range()
        self._step += 1
        if self._prof is not None:
            self._prof.step()
        if self._shim is not None:
            self._shim.mark_step()
        if self.mode == "nsys" and self._step == self.wait + self.warmup:
            import torch

            torch.cuda.profiler.start()  # nsys --capture-range=cudaProfilerApi records from here
            self._nsys_started = True
        self._open_range()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close_range()
        if self._prof is not None:
            self._prof.__exit__(exc_type, exc, tb)
        if getattr(self, "_nsys_started", False):
            import torch

            torch.cuda.profiler.stop()
        meta = {
            "label": self.label,
            "backend": self.mode,
            "rank": self.rank,
            "steps_run": self._step,
            "profiled_steps": self.steps,
            "schedule": {"wait": self.wait, "warmup": self.warmup, "active": self.steps},
            "trace": self.trace_path.name if self.trace_path else None,
            "wall_s": round(time.time() - self._t0, 3),
            **environment_facts(),
        }
        if self._shim is not None:
            from ccdiag.emulate.shim import MASK

            mask = self._shim.mask()
            meta["emulated_shim_mechanisms"] = [
                n for n in ("launch", "copy_pad", "copy_sync") if mask & MASK[n]
            ]
            meta["emulator_counters"] = self._shim.counters()
        self._name(".meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def _env_rank() -> int | None:
    r = os.environ.get("RANK")
    return int(r) if r is not None and r.isdigit() else None


def capture(
    out: str | os.PathLike[str] | None = None, label: str | None = None, **options: Any
) -> Capture:
    """Profile a step loop; ``ccdiag capture`` supplies out/label through the environment.

    Args:
        out: output folder (default: $CCDIAG_CAPTURE_OUT or ./ccdiag_traces).
        label: run label, e.g. ``cc_off`` / ``cc_on`` (default: $CCDIAG_CAPTURE_LABEL or ``run``).
        **options: steps, warmup, wait, mode ("torch" | "nsys"), cpu_only, record_shapes, rank.

    Returns:
        A context manager; call ``.step()`` once per step and run ``.total_steps`` steps.
    """
    out = out or os.environ.get(ENV_OUT) or "ccdiag_traces"
    label = label or os.environ.get(ENV_LABEL) or "run"
    return Capture(out, label, **options)


#: Environment variables whose values an nsys export may keep after scrubbing (versions only).
KEEP_ENV = ("CUDA_VERSION", "NCCL_VERSION", "NV_CUDNN_VERSION", "NV_LIBCUBLAS_VERSION")
_ABS_PATH = re.compile(r"(?<![\w<])/(?:[\w.+-]+/)+([\w.+-]*)")
_ENV_ASSIGN = re.compile(r"(?:^|[\s\x00;])[A-Za-z_][A-Za-z0-9_]*=")


def _scrub_value(value: str) -> str:
    """An environment dump becomes a placeholder; absolute paths keep only their last part."""
    if len(_ENV_ASSIGN.findall(value)) >= 3:
        return "<scrubbed environment>"
    return _ABS_PATH.sub(lambda m: "<path>/" + m.group(1), value)


def scrub_nsys_sqlite(path: str | os.PathLike[str]) -> dict[str, int]:
    """Remove the profiled process's environment, paths, host and user names from an nsys export.

    Nsight Systems stores the whole environment, the command line and working directory
    (META_DATA_CAPTURE), the export paths, host and user (META_DATA_EXPORT) and the host name and
    device environment (TARGET_INFO_SYSTEM_ENV). Version variables in ``KEEP_ENV`` survive; every
    other value becomes ``<scrubbed>``; absolute paths in StringIds keep only their last component.

    Returns:
        Rows changed per table.
    """
    import sqlite3

    con = sqlite3.connect(str(path))
    changed: dict[str, int] = {}
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    if "META_DATA_CAPTURE" in tables:
        rows = con.execute("select rowid, name, value from META_DATA_CAPTURE").fetchall()
        n = 0
        for rowid, name, value in rows:
            if name.endswith("ENVIRONMENT_VARIABLE"):
                key = str(value).split("=", 1)[0]
                new = value if key in KEEP_ENV else f"{key}=<scrubbed>"
            elif any(
                k in name for k in ("ARGUMENT", "WORKING_DIR", "USER", "HOST", "PATH", "EXECUTABLE")
            ):
                new = "<scrubbed>"
            else:
                new = value
            if new != value:
                con.execute("update META_DATA_CAPTURE set value=? where rowid=?", (new, rowid))
                n += 1
        changed["META_DATA_CAPTURE"] = n
    for table, col_name in (("META_DATA_EXPORT", "name"), ("TARGET_INFO_SYSTEM_ENV", "name")):
        if table not in tables:
            continue
        cur = con.execute(
            f"update {table} set value='<scrubbed>' where {col_name} like '%HOST%' or {col_name} like "
            f"'%USER%' or {col_name} like '%PATH%' or {col_name} like '%Dir%' or {col_name} = "
            f"'DeviceEnvironment' or {col_name} = 'Hostname'"
        )
        changed[table] = cur.rowcount
    # Any other text that holds an absolute path (StringIds, ANALYSIS_FILE, DIAGNOSTIC_EVENT, ...).
    for table in sorted(tables):
        cols = [
            r[1]
            for r in con.execute(f"pragma table_info('{table}')")
            if "TEXT" in (r[2] or "").upper()
        ]
        for col in cols:
            # values may be stored as BLOBs, which LIKE does not match: test the bytes
            rows = con.execute(
                f"select rowid, {col} from '{table}' where instr(cast({col} as blob), cast('/' as blob)) > 0 "
                f"or instr(cast({col} as blob), cast('=' as blob)) > 0"
            ).fetchall()
            n = 0
            for rowid, value in rows:
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                if not isinstance(value, str):
                    continue
                new = _scrub_value(value)
                if new != value:
                    con.execute(f"update '{table}' set {col}=? where rowid=?", (new, rowid))
                    n += 1
            if n:
                changed[f"{table}.{col}"] = changed.get(f"{table}.{col}", 0) + n
    con.commit()
    con.execute("vacuum")
    con.close()
    return changed
