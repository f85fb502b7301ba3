"""Write docs/schema/predict-v<major>.json, the JSON Schema of ``ccdiag predict --json``.

Generated from the pydantic models in ccdiag/predict.py (``ccdiag schema --predict`` prints the
same), next to the report's schema (scripts/gen_schema.py).

python scripts/gen_predict_schema.py          # regenerate
python scripts/gen_predict_schema.py --check  # exit 1 when the published schema is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ccdiag.predict import SCHEMA_VERSION, prediction_schema

PATH = (
    Path(__file__).resolve().parents[1]
    / "docs"
    / "schema"
    / (f"predict-v{SCHEMA_VERSION.split('.')[0]}.json")
)


def text() -> str:
    return json.dumps(prediction_schema(), indent=2) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail when the schema file is stale")
    args = ap.parse_args()
    if args.check:
        if not PATH.exists() or PATH.read_text(encoding="utf-8") != text():
            print(f"stale: docs/schema/{PATH.name} (run python scripts/gen_predict_schema.py)")
            return 1
        return 0
    PATH.write_text(text(), encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
