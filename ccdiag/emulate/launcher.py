"""Run a user's command under capture (``ccdiag capture``) or under CC emulation (``ccdiag emulate``).

Only the standard library here: both run on a bare GPU machine.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ccdiag.emulate.platforms import get_platform, shim_env
from ccdiag.emulate.shim import build_shim
from ccdiag.errors import InputError
from ccdiag.profiling import ENV_LABEL, ENV_MODE, ENV_OUT, environment_facts, scrub_nsys_sqlite

EMULATED = ("launch", "copy", "copy_pad", "copy_sync", "collective", "uvm")


def find_nsys() -> str | None:
    """The nsys executable: $NSYS, PATH, or the copy bundled with Nsight Compute."""
    cand = os.environ.get("NSYS") or shutil.which("nsys")
    if cand:
        return cand
    hits = sorted(glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"))
    return hits[-1] if hits else None


def run_capture(cmd: list[str], out: Path, label: str, *, nsys: bool = False) -> int:
    """Run ``cmd`` with capture settings in its environment; with nsys, profile it and export SQLite.

    The workload marks its steps with ``ccdiag.capture()`` (which reads the output folder and
    label from the environment). Under ``nsys`` each step is an NVTX range and only the profiled
    steps are recorded (``--capture-range=cudaProfilerApi``).

    Returns:
        The command's exit status.
    """
    if not cmd:
        raise InputError(None, "no command given: ccdiag capture --out DIR --label NAME -- CMD ...")
    out.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ, **{ENV_OUT: str(out), ENV_LABEL: label, ENV_MODE: "nsys" if nsys else "torch"}
    )
    if not nsys:
        rc = subprocess.call(cmd, env=env)
        if not list(out.glob(f"{label}*.json.gz")):
            sys.stderr.write(
                f"ccdiag: warning: {cmd[0]} wrote no trace to {out}: does it call ccdiag.capture()? "
                "(see `ccdiag capture --help`)\n"
            )
        return rc
    exe = find_nsys()
    if exe is None:
        raise InputError(None, "nsys not found: install Nsight Systems, or set NSYS=/path/to/nsys")
    rep = out / label
    prof = [
        exe,
        "profile",
        "-t",
        "cuda,nvtx",
        "-s",
        "none",
        "--cpuctxsw=none",
        "--capture-range=cudaProfilerApi",
        "--force-overwrite",
        "true",
        "-o",
        str(rep),
        *cmd,
    ]
    rc = subprocess.call(prof, env=env)
    rep_file = rep.with_suffix(".nsys-rep")
    if rep_file.exists():
        sqlite = rep.with_suffix(".sqlite")
        subprocess.call(
            [
                exe,
                "export",
                "--type",
                "sqlite",
                "--force-overwrite",
                "true",
                "-o",
                str(sqlite),
                str(rep_file),
            ]
        )
        if sqlite.exists():
            scrub_nsys_sqlite(sqlite)
    (out / f"{label}.meta.json").write_text(
        json.dumps({"label": label, "backend": "nsys", **environment_facts()}, indent=2) + "\n"
    )
    return rc


def run_emulated(
    cmd: list[str],
    platform_name: str,
    mechanisms: list[str],
    *,
    layer: str = "auto",
    out: Path | None = None,
) -> int:
    """Run ``cmd`` with CC behaviour injected; write ``ground_truth.json`` into ``out``.

    Args:
        cmd: the workload's command line.
        platform_name: h100 | b200 | b300 (constants and sources in ``platforms.py``).
        mechanisms: any of launch, copy (= copy_pad + copy_sync), copy_pad, copy_sync, collective, uvm.
        layer: auto | runtime | driver (see ``cc_shim.c``).
        out: folder for the emulator's counters and ground truth (default: ./ccdiag_emulation).

    Returns:
        The command's exit status.
    """
    if not cmd:
        raise InputError(None, "no command given: ccdiag emulate --platform b200 -- CMD ...")
    unknown = [m for m in mechanisms if m not in EMULATED]
    if unknown:
        raise InputError(
            None, f"unknown mechanism {unknown[0]!r}; choose from {', '.join(EMULATED)}"
        )
    try:
        platform = get_platform(platform_name)
    except ValueError as exc:
        raise InputError(None, str(exc)) from None
    out = out or Path("ccdiag_emulation")
    out.mkdir(parents=True, exist_ok=True)
    shim = build_shim(driver_layer=layer == "driver")
    env = dict(os.environ, **shim_env(platform, mechanisms, layer))
    env["LD_PRELOAD"] = f"{shim}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(shim)
    env["CCDIAG_EMU_PLATFORM"] = platform.name
    env["CCDIAG_EMU_LOG"] = str((out / "emulator_counters").resolve())
    notes = []
    if "collective" in mechanisms:
        # Whole-process emulation: every NCCL communicator gets the CTA cap.
        env.setdefault("NCCL_MAX_CTAS", os.environ.get("CCDIAG_EMU_MAX_CTAS", "16"))
        notes.append(
            f"collectives: NCCL_MAX_CTAS={env['NCCL_MAX_CTAS']} for every communicator "
            "(calibrate with python -m ccdiag.emulate.calibrate)"
        )
    if "uvm" in mechanisms:
        notes.append(
            "uvm: not emulated — page-fault migrations happen inside the driver and cannot be "
            "slowed from user space; use real CC traces (e.g. the ISPASS'25 UVM pairs)"
        )
    rc = subprocess.call(cmd, env=env)
    counters = []
    for path in sorted(out.glob("emulator_counters.*")):
        try:
            counters.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            notes.append(f"{path.name}: unreadable counters (process killed?)")
    truth = {
        "platform": platform.to_dict(),
        "mechanisms": mechanisms,
        "layer": layer,
        "command": Path(cmd[0]).name,
        "processes": [
            {
                "calls": c["calls"],
                "config": c["config"],
                "injected_ns_total": {
                    "launch_toll": sum(s["launch_ns"] + s["graph_ns"] for s in c["steps"]),
                    "serialized_copies": sum(s["copy_pad_ns"] for s in c["steps"]),
                    "blocked_non_blocking": sum(s["copy_wait_ns"] for s in c["steps"]),
                },
                "steps": c["steps"],
            }
            for c in counters
        ],
        "notes": notes,
    }
    (out / "ground_truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return rc
