"""Write docs/schema/report-v<major>.json, the JSON Schema of the report contract.

Generated from the pydantic models in ccdiag/verdict.py (``ccdiag schema`` prints the same).

python scripts/gen_schema.py          # regenerate
python scripts/gen_schema.py --check  # exit 1 when the published schema is missing or stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ccdiag.report.json_contract import schema_file_name, schema_text

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schema"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail when the schema file is stale")
    args = ap.parse_args()
    path = SCHEMA_DIR / schema_file_name()
    text = schema_text()
    if args.check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"stale: docs/schema/{path.name} (run python scripts/gen_schema.py)")
            return 1
        return 0
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
