"""Regenerate the golden summaries in tests/golden/ from the real traces in tests/data/shared.

    python scripts/update_goldens.py            # rewrite every golden
    python scripts/update_goldens.py --check    # exit 1 if any golden would change

Review the diff (``git diff tests/golden``) before committing: every changed number is a change
in what ccdiag reads from a real trace.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import goldens  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only report goldens that differ")
    args = ap.parse_args()
    stale = []
    traces = goldens.all_traces()
    for path in traces:
        gp = goldens.golden_path(path)
        new = goldens.summary_of(path)
        old = json.loads(gp.read_text()) if gp.exists() else None
        if old != new:
            stale.append(gp)
            if not args.check:
                goldens.write_golden(path)
        print(f"{'changed' if old != new else 'same   '}  {goldens.trace_id(path)}")
    known = {goldens.golden_path(p) for p in traces}
    for orphan in sorted(set(goldens.GOLDEN.glob("*.summary.json")) - known):
        print(f"orphan   {orphan.name} (no trace; delete it)")
        stale.append(orphan)
    print(f"{len(traces)} traces, {len(stale)} {'stale' if args.check else 'rewritten'}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
