"""Copy an Nsight Systems SQLite export with the profiled machine's private details removed.

    python scripts/scrub_nsys_sqlite.py IN.sqlite OUT.sqlite [--keep-osrt]

An export holds the profiled process's whole environment (``META_DATA_CAPTURE``, and once more as
one string in ``StringIds`` when OS runtime calls were traced), the device environment and host
name (``TARGET_INFO_SYSTEM_ENV``), paths (``META_DATA_EXPORT``, ``DIAGNOSTIC_EVENT``, command
arguments) and every process on the machine (``PROCESSES``). This writes a copy fit to share or
commit as a test fixture: environment rows are deleted except ``CUDA_VERSION``, ``NCCL_VERSION``
and the rank variables ccdiag reads; paths, host and user names become ``<scrubbed>``; strings
holding an environment or a path become ``<scrubbed>``; OS runtime tables (large, full of
library paths) are dropped unless ``--keep-osrt``; the file is vacuumed. Event tables that ccdiag
reads are not touched.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
from pathlib import Path

KEEP_ENV = ("CUDA_VERSION", "NCCL_VERSION", "RANK", "WORLD_SIZE")
X = "<scrubbed>"
_PATH = re.compile(r"(?<![\w<])/[\w.@+-]+(?:/[\w.@+%-]*)+")


def scrub(src: Path, dest: Path, keep_osrt: bool = False) -> None:
    """Write the scrubbed copy of src to dest (see the module docstring)."""
    shutil.copy(src, dest)
    con = sqlite3.connect(dest)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    keep = " AND ".join(f"value NOT LIKE '{k}=%'" for k in KEEP_ENV)
    if "META_DATA_CAPTURE" in tables:
        con.execute(
            f"DELETE FROM META_DATA_CAPTURE WHERE name GLOB '*ENVIRONMENT_VARIABLE' AND {keep}"
        )
        con.execute(
            "UPDATE META_DATA_CAPTURE SET value = ? WHERE name GLOB '*WORKING_DIR' OR "
            "name GLOB '*ARGUMENT_*' OR name GLOB '*COMMAND' OR name = 'DEVICE_DISPLAY_NAME'",
            (X,),
        )
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables:
            con.execute(
                f"UPDATE {table} SET value = ? WHERE name GLOB '*PATH*' OR name GLOB '*FILE*' "
                "OR name IN ('EXPORT_HOST', 'EXPORT_USER')",
                (X,),
            )
    if "TARGET_INFO_SYSTEM_ENV" in tables:
        con.execute(
            "UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name IN ('DeviceEnvironment', "
            "'Hostname', 'TargetInstallDir', 'SystemUID', 'NamespacePID')",
            (X,),
        )
    if "DIAGNOSTIC_EVENT" in tables:
        rows = con.execute("SELECT rowid, text FROM DIAGNOSTIC_EVENT").fetchall()
        for rowid, text in rows:
            con.execute(
                "UPDATE DIAGNOSTIC_EVENT SET text = ? WHERE rowid = ?",
                (_PATH.sub(X, text or ""), rowid),
            )
    con.execute(
        "UPDATE StringIds SET value = ? WHERE value LIKE '/%' OR instr(value, char(0)) > 0 "
        "OR value GLOB '*=*/*'",
        (X,),
    )
    if "PROCESSES" in tables:
        con.execute(
            "DELETE FROM PROCESSES WHERE globalPid NOT IN (SELECT DISTINCT globalPid FROM "
            "CUPTI_ACTIVITY_KIND_KERNEL)"
            if "CUPTI_ACTIVITY_KIND_KERNEL" in tables
            else "DELETE FROM PROCESSES"
        )
    if not keep_osrt:
        for table in sorted(tables):
            if table.startswith("OSRT_"):
                con.execute(f'DROP TABLE "{table}"')
    con.commit()
    con.execute("VACUUM")
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--keep-osrt", action="store_true", help="keep the OS runtime tables")
    args = ap.parse_args()
    scrub(args.src, args.dest, keep_osrt=args.keep_osrt)
    print(f"{args.dest}: {args.dest.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
