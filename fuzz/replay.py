"""Replay recorded crashes: ``python -m fuzz.replay [fuzz/crashes/<id> ...]`` (all by default).

Runs :func:`fuzz.oracle.check` on each recorded input and prints the outcome, or the traceback
when it still fails. Exit status 1 when any still fails.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from fuzz import oracle
from fuzz.mutations import Case

CRASHES = Path(__file__).resolve().parent / "crashes"


def replay(folder: Path) -> bool:
    """True when the recorded input no longer crashes."""
    doc = json.loads((folder / "case.json").read_text())
    case = Case(folder / doc["path"], doc.get("total_events"))
    sig = (folder / "signature.txt").read_text().strip()
    try:
        outcome = oracle.check(case, repeat=True)
    except Exception:  # noqa: BLE001 - reported
        print(f"STILL FAILS {folder.name} ({sig})")
        traceback.print_exc()
        return False
    print(f"fixed       {folder.name} ({sig}): now {outcome}")
    return True


def main() -> int:
    folders = [Path(a) for a in sys.argv[1:]] or sorted(
        p for p in CRASHES.iterdir() if (p / "case.json").exists()
    )
    results = [replay(f) for f in folders]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
