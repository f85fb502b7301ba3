"""Trace metadata from an Nsight Systems SQLite export, read by allow-list only.

An export carries far more than ccdiag may report: ``META_DATA_CAPTURE`` holds one row per
environment variable of the profiled process (``PATH``, tokens, user names), and
``TARGET_INFO_SYSTEM_ENV`` holds the host name and the whole device environment
(``DeviceEnvironment``). Every query below names the rows it wants, so nothing else is ever
read into Python; each value read is checked against the shape it must have (a version
number, ``Graph``/``Node``, ``true``/``false``) and dropped otherwise.

Read:
- GPU names from ``TARGET_INFO_GPU``; when it is absent (trimmed or old exports), from the
  ``GpuInfo`` JSON of ``TARGET_INFO_SYSTEM_ENV`` (only each GPU's ``Name`` and
  ``InConfidentialComputeMode``); else the GPU is unknown and a warning says so.
- ``NvDriverVersion`` and ``CudaDriverVersion`` from ``TARGET_INFO_SYSTEM_ENV``.
- ``CUDA_VERSION``, ``NCCL_VERSION`` and the launcher's rank variables (``RANK``,
  ``WORLD_SIZE`` and their MPI/Slurm equivalents) from the captured environment.
- the export schema and nsys version from ``META_DATA_EXPORT`` (``EXPORT_META_DATA`` before
  2023).
- the CUDA-graph trace mode and whether UVM page faults were collected.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Set
from typing import Any

_VERSION = re.compile(r"^\d+(\.\d+){0,3}$")
_ENV_VERSION = re.compile(r"^\"?(\d+(?:\.\d+){1,3})(?:-\d+)?\"?$")
_ENV_INT = re.compile(r"^\"?(\d{1,7})\"?$")
#: The only environment variables read: name -> (field, pattern of an acceptable value).
_ENV_KEYS = {
    "CUDA_VERSION": ("cuda_runtime", _ENV_VERSION),
    "NCCL_VERSION": ("nccl_version", _ENV_VERSION),
    "RANK": ("env_rank", _ENV_INT),
    "OMPI_COMM_WORLD_RANK": ("env_rank", _ENV_INT),
    "SLURM_PROCID": ("env_rank", _ENV_INT),
    "PMI_RANK": ("env_rank", _ENV_INT),
    "WORLD_SIZE": ("env_world_size", _ENV_INT),
    "OMPI_COMM_WORLD_SIZE": ("env_world_size", _ENV_INT),
    "SLURM_NTASKS": ("env_world_size", _ENV_INT),
    "PMI_SIZE": ("env_world_size", _ENV_INT),
}
_SYSTEM_KEYS = ("NvDriverVersion", "CudaDriverVersion", "GpuInfo")
_EXPORT_KEYS = (
    "EXPORT_SCHEMA_VERSION",
    "EXPORT_SCHEMA_VERSION_MAJOR",
    "EXPORT_SCHEMA_VERSION_MINOR",
    "EXPORT_SCHEMA_VERSION_MICRO",
    "EXPORT_PRODUCT_VERSION",
)
_CAPTURE_FLAGS = {
    "CUDA_GRAPH_TRACE_OPTIONS:MODE": ("cuda_graph_trace", {"graph", "node"}),
    "COLLECT_UVM_GPU_PAGE_FAULTS": ("uvm_gpu_page_faults", {"true", "false"}),
    "COLLECT_UVM_CPU_PAGE_FAULTS": ("uvm_cpu_page_faults", {"true", "false"}),
}


def _rows(con: sqlite3.Connection, sql: str, params: tuple = ()) -> list[tuple[Any, ...]]:
    return con.execute(sql, params).fetchall()


def _in(keys: tuple[str, ...]) -> str:
    return ", ".join("?" for _ in keys)


def cuda_driver_version(raw: str) -> str | None:
    """``12040`` -> ``12.4``; ``13000`` -> ``13.0``."""
    if not raw.isdigit():
        return None
    v = int(raw)
    return f"{v // 1000}.{(v % 1000) // 10}"


def _system(con: sqlite3.Connection, tables: Mapping[str, Set[str]]) -> dict[str, str]:
    if "TARGET_INFO_SYSTEM_ENV" not in tables:
        return {}
    sql = f"SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ({_in(_SYSTEM_KEYS)})"
    return {str(n): str(v) for n, v in _rows(con, sql, _SYSTEM_KEYS) if v is not None}


def _gpu_info(raw: str | None) -> tuple[dict[int, str], list[bool]]:
    """GPU names and CC flags from the GpuInfo JSON (other fields are not looked at)."""
    try:
        gpus = json.loads(raw or "{}").get("Gpus", [])
    except (ValueError, AttributeError):
        return {}, []
    names, cc = {}, []
    for i, g in enumerate(gpus if isinstance(gpus, list) else []):
        if not isinstance(g, dict):
            continue
        if isinstance(g.get("Name"), str):
            names[int(g.get("Id", i)) if isinstance(g.get("Id"), int) else i] = g["Name"]
        if isinstance(g.get("InConfidentialComputeMode"), bool):
            cc.append(g["InConfidentialComputeMode"])
    return names, cc


def _gpus(
    con: sqlite3.Connection, tables: Mapping[str, Set[str]], system: dict[str, str]
) -> tuple[dict[int, str], list[bool]]:
    info_names, cc = _gpu_info(system.get("GpuInfo"))
    if {"id", "name"} <= tables.get("TARGET_INFO_GPU", set()):
        rows = _rows(con, "SELECT id, name FROM TARGET_INFO_GPU ORDER BY id")
        # SQLite does not enforce a column's type: an id that is not an integer is no GPU's
        names = {
            i: str(n) for i, n in rows if n is not None and isinstance(i, int) and i is not True
        }
        if names:
            return names, cc
    return info_names, cc


def _export(con: sqlite3.Connection, tables: Mapping[str, Set[str]]) -> dict[str, str]:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables:
            sql = f"SELECT name, value FROM {table} WHERE name IN ({_in(_EXPORT_KEYS)})"
            return {str(n): str(v) for n, v in _rows(con, sql, _EXPORT_KEYS) if v is not None}
    return {}


def _schema_version(export: dict[str, str]) -> str | None:
    v = export.get("EXPORT_SCHEMA_VERSION")
    if v is None and "EXPORT_SCHEMA_VERSION_MAJOR" in export:
        parts = [export.get(f"EXPORT_SCHEMA_VERSION_{p}") for p in ("MAJOR", "MINOR", "MICRO")]
        v = ".".join(p for p in parts if p is not None)
    return v if v and _VERSION.match(v) else None


def _capture(con: sqlite3.Connection, tables: Mapping[str, Set[str]]) -> dict[str, str]:
    """Allow-listed rows of META_DATA_CAPTURE: a few environment variables and three flags."""
    if "META_DATA_CAPTURE" not in tables:
        return {}
    out: dict[str, str] = {}
    keys = tuple(_ENV_KEYS)
    env_sql = (
        "SELECT value FROM META_DATA_CAPTURE WHERE name GLOB '*ENVIRONMENT_VARIABLE' "
        f"AND substr(value, 1, instr(value, '=') - 1) IN ({_in(keys)})"
    )
    for (value,) in _rows(con, env_sql, keys):
        key, _, raw = str(value).partition("=")
        field, pattern = _ENV_KEYS[key]
        m = pattern.match(raw.strip())
        if m and field not in out:
            out[field] = m.group(1)
    for suffix, (field, allowed) in _CAPTURE_FLAGS.items():
        sql = "SELECT value FROM META_DATA_CAPTURE WHERE name = ? OR name GLOB ?"
        for (value,) in _rows(con, sql, (suffix, f"PROCESS_*:{suffix}")):
            if str(value).lower() in allowed and field not in out:
                out[field] = str(value).lower()
    return out


def read_meta(
    con: sqlite3.Connection, tables: Mapping[str, Set[str]], used_devices: Set[int] = frozenset()
) -> dict[str, Any]:
    """TraceMeta fields of one export (see the module docstring for what is read).

    Args:
        con: the open export.
        tables: table name -> column names.
        used_devices: device ids that ran GPU work (picks ``gpu`` among several).

    Returns:
        Keyword arguments for :class:`ccdiag.schema.TraceMeta` plus ``warnings`` and, when the
        profiled process had them, ``env_rank`` / ``env_world_size`` (its ``RANK`` and
        ``WORLD_SIZE``); ``cc_mode`` is ``on`` when the GPU reports Confidential Computing (the
        caller refines it).
    """
    system = _system(con, tables)
    names, cc = _gpus(con, tables, system)
    export = _export(con, tables)
    capture = _capture(con, tables)
    out: dict[str, Any] = {"warnings": [], "extra": {}}
    if names:
        used = sorted(d for d in used_devices if d in names)
        out["gpu"] = names[used[0]] if used else names[min(names)]
        out["gpus"] = [names[i] for i in sorted(names)]
    else:
        out["warnings"].append(
            "GPU model not recorded in this export (no TARGET_INFO_GPU, no GpuInfo)"
        )
    if cc:
        out["cc_mode"] = "on" if any(cc) else "off"
    driver = system.get("NvDriverVersion", "")
    if _VERSION.match(driver):
        out["driver_version"] = driver
    out["cuda_driver"] = cuda_driver_version(system.get("CudaDriverVersion", ""))
    out["cuda_runtime"] = capture.pop("cuda_runtime", None)
    out["nccl_version"] = capture.pop("nccl_version", None)
    for key in ("env_rank", "env_world_size"):
        if key in capture:
            out[key] = int(capture.pop(key))
    out["schema_version"] = _schema_version(export)
    product = export.get("EXPORT_PRODUCT_VERSION", "")
    if _VERSION.match(product):
        out["extra"]["nsys_version"] = product
    out["extra"].update(capture)
    return out
