"""Regenerate the golden file reports in tests/golden/reports/ from the sample pairs.

    python scripts/update_report_goldens.py            # rewrite every golden report
    python scripts/update_report_goldens.py --check    # exit 1 if any would change

Review the diff (``git diff tests/golden/reports``) before committing: a changed number is a
change in the diagnosis, a changed layout a change in the renderers. Running it twice gives
byte-identical files (reports are deterministic).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import report_goldens as rg  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--check", action="store_true", help="only list goldens that would change")
    args = ap.parse_args()
    stale = []
    for name in rg.PAIRS:
        for fmt in rg.FORMATS:
            path, text = rg.golden_path(name, fmt), rg.render(name, fmt)
            if path.exists() and path.read_text(encoding="utf-8") == text:
                continue
            stale.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    verb = "stale" if args.check else "wrote"
    for p in stale:
        print(f"{verb}: {p.relative_to(rg.TESTS.parent)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
